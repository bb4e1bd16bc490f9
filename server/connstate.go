package server

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// newConnGrace is how long after it was accepted a connection that has
// not started a request is still expected to: a client that connects to
// send a request sends it within a round trip. Past that, at shutdown, it
// is a spare connection and is closed (unusedConns).
const newConnGrace = 250 * time.Millisecond

// unusedConns tracks the connections of one http.Server that have not
// started a request yet (http.StateNew), with the time each was accepted.
// Browsers open such connections ahead of need (Chrome preconnects a
// spare one to a host it talks to), and net/http's Shutdown counts them
// as busy until they are five seconds old, so a shutdown that starts just
// after one was opened waited its whole five-second timeout for a request
// that never came. At shutdown closeAll closes each once it is
// newConnGrace old: nothing is in flight on it, and a client that was
// still writing its first request that late sees the connection close
// before any answer, which HTTP clients retry.
type unusedConns struct {
	mu    sync.Mutex
	conns map[net.Conn]time.Time
	shut  bool
}

// track is the http.Server's ConnState hook.
func (u *unusedConns) track(c net.Conn, st http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if st != http.StateNew {
		delete(u.conns, c)
		return
	}
	if u.conns == nil {
		u.conns = make(map[net.Conn]time.Time)
	}
	u.conns[c] = time.Now()
	if u.shut {
		// Accepted as the listener closed.
		u.closeLater(c, newConnGrace)
	}
}

// closeAll closes every connection that has not started a request, now
// when it is newConnGrace old, else when it will be (unless it starts one
// first), and does so for connections accepted from now on. It returns
// how many it closed at once.
func (u *unusedConns) closeAll() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.shut = true
	n := 0
	now := time.Now()
	for c, at := range u.conns {
		if wait := newConnGrace - now.Sub(at); wait > 0 {
			u.closeLater(c, wait)
			continue
		}
		_ = c.Close()
		delete(u.conns, c)
		n++
	}
	return n
}

// closeLater closes c after d if it still has not started a request. u.mu
// is held.
func (u *unusedConns) closeLater(c net.Conn, d time.Duration) {
	time.AfterFunc(d, func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if _, ok := u.conns[c]; ok {
			_ = c.Close()
			delete(u.conns, c)
		}
	})
}
