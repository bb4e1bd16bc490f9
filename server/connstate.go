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
// old, so a shutdown that starts just after one was opened waited its
// whole five-second timeout for a request that never came. closeAll
// closes them at shutdown, which loses nothing: net/http answers no
// request it finishes reading after Shutdown began, and a request read
// before has moved its connection out of StateNew (the hook runs before
// the request is served).
type unusedConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	shut  bool
}

// track is the http.Server's ConnState hook.
func (u *unusedConns) track(c net.Conn, st http.ConnState) {
	u.mu.Lock()
	if st != http.StateNew {
		delete(u.conns, c)
		u.mu.Unlock()
		return
	}
	if u.shut {
		// Accepted as the listener closed.
		u.mu.Unlock()
		_ = c.Close()
		return
	}
	if u.conns == nil {
		u.conns = make(map[net.Conn]struct{})
	}
	u.conns[c] = struct{}{}
	u.mu.Unlock()
}

// closeAll closes every connection that has not started a request, and
// those accepted from now on (outside the lock: closing a connection may
// write). It returns how many it closed.
func (u *unusedConns) closeAll() int {
	u.mu.Lock()
	u.shut = true
	conns := u.conns
	u.conns = nil
	u.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	return len(conns)
}
