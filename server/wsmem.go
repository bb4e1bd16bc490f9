package server

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// What an idle socket holds (docs/ARCHITECTURE.md, "Performance"). The
// Socket.IO library keeps the upgrade request's context (its request and
// response writer) for as long as the socket lives. Through the response
// writer that would keep net/http's whole per-connection state: its 4 KiB
// read and 4 KiB write buffers, the parsed request, its headers. The
// websocket has its own buffers once hijacked, so none of that is used
// again.

// hijackReleaser wraps the Socket.IO handler: the response writer it
// hands on forgets net/http's once the connection is hijacked.
func hijackReleaser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&releasingWriter{w: w}, r)
	})
}

// releasingWriter is an http.ResponseWriter that lets go of the writer it
// wraps after a successful Hijack; from then on it answers as a hijacked
// net/http writer does (Write: http.ErrHijacked; Header: an empty map).
type releasingWriter struct {
	mu       sync.Mutex
	w        http.ResponseWriter // nil once hijacked
	hijacked http.Header
}

func (rw *releasingWriter) inner() http.ResponseWriter {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return rw.w
}

// Header implements http.ResponseWriter.
func (rw *releasingWriter) Header() http.Header {
	if w := rw.inner(); w != nil {
		return w.Header()
	}
	rw.mu.Lock()
	defer rw.mu.Unlock()
	if rw.hijacked == nil {
		rw.hijacked = http.Header{}
	}
	return rw.hijacked
}

// Write implements http.ResponseWriter.
func (rw *releasingWriter) Write(b []byte) (int, error) {
	if w := rw.inner(); w != nil {
		return w.Write(b)
	}
	return 0, http.ErrHijacked
}

// WriteHeader implements http.ResponseWriter.
func (rw *releasingWriter) WriteHeader(code int) {
	if w := rw.inner(); w != nil {
		w.WriteHeader(code)
	}
}

// Flush implements http.Flusher.
func (rw *releasingWriter) Flush() {
	if w := rw.inner(); w != nil {
		_ = http.NewResponseController(w).Flush()
	}
}

// Hijack implements http.Hijacker: the wrapped writer's, after which it
// is forgotten.
func (rw *releasingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w := rw.inner()
	if w == nil {
		return nil, nil, http.ErrHijacked
	}
	c, brw, err := http.NewResponseController(w).Hijack()
	if err == nil {
		rw.mu.Lock()
		rw.w = nil
		rw.mu.Unlock()
	}
	return c, brw, err
}
