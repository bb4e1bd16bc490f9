package server

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/happy-dev/happy/internal/fdlimit"
)

// fdGuard wraps the relay's listener so that it never runs out of file
// descriptors: an accepted connection that would leave fewer than
// reserve descriptors under the open-file limit is answered at once with
// HTTP 503 and closed, instead of the process failing later in accept(2)
// (which net/http only retries) or in the store's own file opens.
//
// Descriptors in use are the connections this listener accepted and are
// still open plus everything else the process holds (the store's files,
// logs, outgoing sockets), counted from /proc/self/fd at most once a
// second. Refusals are logged at most once a second, with the count
// refused since the last line.
type fdGuard struct {
	net.Listener
	s       *Server
	limit   int
	reserve int

	live atomic.Int64
	// mu guards other, measured and the log's state.
	mu       sync.Mutex
	other    int // descriptors not accepted here, at measured
	measured time.Time
	loggedAt time.Time
	refused  int64
}

// fdReserve is how many descriptors stay free for everything but new
// connections: a thirty-second of the limit, between 8 and 256.
func fdReserve(limit int) int { return min(max(limit/32, 8), 256) }

// guardListener returns l behind an fdGuard, or l itself when the limit
// is unknown (Config.MaxOpenFiles zero and no RLIMIT_NOFILE on this
// system) or the descriptors cannot be counted.
func (s *Server) guardListener(l net.Listener) net.Listener {
	limit := s.cfg.MaxOpenFiles
	if limit <= 0 {
		limit = int(min(fdlimit.Soft(), 1<<30))
	}
	if _, ok := fdlimit.Open(); !ok || limit <= 0 {
		return l
	}
	return &fdGuard{Listener: l, s: s, limit: limit, reserve: fdReserve(limit)}
}

// Accept implements net.Listener.
func (g *fdGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if g.room() {
			g.live.Add(1)
			return &guardedConn{Conn: c, g: g}, nil
		}
		g.refuse(c)
	}
}

// room reports whether one more connection (already accepted) keeps
// reserve descriptors free.
func (g *fdGuard) room() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	live := int(g.live.Load())
	now := time.Now()
	used := g.other + live + 1
	if now.Sub(g.measured) >= time.Second || used > g.limit-g.reserve {
		// Count again when the estimate is old or says no: a refusal is
		// always based on a fresh count. The new connection is one of them.
		if n, ok := fdlimit.Open(); ok {
			g.other = max(n-live-1, 0)
			g.measured = now
			used = g.other + live + 1
		}
	}
	return used <= g.limit-g.reserve
}

// refusal is the whole answer to a refused connection.
const refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 62\r\n\r\n" +
	`{"error":"Too many open connections, retry in a moment (503)"}`

// refuse answers c with 503 and closes it, off the accept loop (a TLS
// connection's handshake must not hold the loop up), and logs.
func (g *fdGuard) refuse(c net.Conn) {
	// The answer goes out after the accounting, so a client that saw it
	// finds the refusal counted.
	defer func() { go refuseConn(c, refusal) }()
	g.mu.Lock()
	g.refused++
	now := g.s.cfg.Now()
	if !g.loggedAt.IsZero() && now.Sub(g.loggedAt) < time.Second {
		g.mu.Unlock()
		return
	}
	g.loggedAt = now
	n, used := g.refused, g.other+int(g.live.Load())
	g.refused = 0
	g.mu.Unlock()
	g.s.log.Warn().Int64("refused", n).Int("open_files", used).Int("limit", g.limit).Int("reserve", g.reserve).
		Msg("refusing connections with 503: open-file limit nearly reached")
}

// refuseConn writes answer (a whole HTTP response) to c and closes it.
func refuseConn(c net.Conn, answer string) {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte(answer))
	// Half-close and take what the client sent (its request) for a
	// moment: closing with unread bytes would reset the connection, and a
	// reset can lose the answer before the client reads it.
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, _ = io.CopyN(io.Discard, c, 64<<10)
	}
	_ = c.Close()
}

// guardedConn gives its descriptor back to the guard when closed.
type guardedConn struct {
	net.Conn
	g    *fdGuard
	once sync.Once
}

// SyscallConn implements syscall.Conn with the wrapped connection's raw
// access (errors.ErrUnsupported when it has none): the websocket
// transport writes frames without blocking and waits for readability
// through it (package wstransport).
func (c *guardedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// CloseWrite half-closes the wrapped connection (errors.ErrUnsupported
// when it cannot): refuseConn needs it.
func (c *guardedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

// Close implements net.Conn.
func (c *guardedConn) Close() error {
	c.once.Do(func() { c.g.live.Add(-1) })
	return c.Conn.Close()
}
