package server

import (
	"net"
	"net/http"
	"sync"
)

// unusedConns tracks the connections of one http.Server that have not
// started a request yet (http.StateNew). Browsers open such connections
// ahead of need (Chrome preconnects a spare one to a host it talks to),
// and net/http's Shutdown counts them as busy until they are five seconds
// old, so a shutdown that starts just after one was opened waits the whole
// five seconds for a request that never comes. closeAll closes them at
// shutdown: nothing is in flight on them, and a client that had started
// writing its first request sees the connection close before any answer,
// which HTTP clients retry.
type unusedConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
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
	if u.shut {
		// Accepted while shutting down: the listener is closing.
		_ = c.Close()
		return
	}
	if u.conns == nil {
		u.conns = make(map[net.Conn]struct{})
	}
	u.conns[c] = struct{}{}
}

// closeAll closes every connection that has not started a request, now
// and from now on. It returns how many it closed.
func (u *unusedConns) closeAll() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.shut = true
	n := len(u.conns)
	for c := range u.conns {
		_ = c.Close()
	}
	clear(u.conns)
	return n
}
