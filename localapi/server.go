package localapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/mapper"
)

// Defaults of the event stream (ServerOptions).
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultRetry        = 3 * time.Second
	DefaultWriteTimeout = 30 * time.Second
)

// ErrNotLoopback is wrapped by CheckLoopback's and Listen's refusals.
var ErrNotLoopback = errors.New("the local event API listens on loopback only")

// ServerOptions configure the HTTP side of the local event API.
type ServerOptions struct {
	// Hub is what the server serves (required).
	Hub *Hub
	// Token is the bearer token every request must carry (required; see
	// LoadOrCreateToken).
	Token string
	// Heartbeat is the interval of the ": heartbeat" comments on
	// /event; 0 means DefaultHeartbeat.
	Heartbeat time.Duration
	// Retry is the reconnection delay sent once ("retry:") at the start
	// of /event; 0 means DefaultRetry.
	Retry time.Duration
	// WriteTimeout bounds each write of /event: a reader that takes
	// nothing for it is disconnected; 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Log receives disconnections and server errors.
	Log zerolog.Logger
}

// Handler serves the local event API (docs/ARCHITECTURE.md, section
// "Local event API"):
//
//	GET /event                     text/event-stream: retry once, then every change, ": heartbeat" comments
//	GET /session                   [Session, …] (root and child sessions)
//	GET /session/{id}/message      [{"info":Message,"parts":[Part,…]}, …]
//	GET /session/{id}/todo         [Todo, …]
//
// Every request needs "Authorization: Bearer <token>" (401 otherwise; the
// token is never taken from the URL, where logs and shell histories keep
// it). Errors are JSON {"error": "…"}: 401, 404 for an unknown session or
// path, 405 for another method.
type Handler struct {
	opts ServerOptions
	mux  *http.ServeMux
	stop chan struct{} // closed by stopStreams
	once sync.Once
}

// NewHandler checks opts and returns the handler.
func NewHandler(opts ServerOptions) (*Handler, error) {
	if opts.Hub == nil {
		return nil, errors.New("localapi: no hub")
	}
	if _, err := ParseToken([]byte(opts.Token)); err != nil {
		return nil, err
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.Retry <= 0 {
		opts.Retry = DefaultRetry
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	h := &Handler{opts: opts, mux: http.NewServeMux(), stop: make(chan struct{})}
	h.mux.HandleFunc("GET /event", h.events)
	h.mux.HandleFunc("GET /session", h.sessions)
	h.mux.HandleFunc("GET /session/{id}/message", h.messages)
	h.mux.HandleFunc("GET /session/{id}/todo", h.todos)
	h.mux.HandleFunc("GET /status", h.statusList)
	return h, nil
}

// ServeHTTP checks the token, then routes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok, ok := bearer(r.Header.Get("Authorization"))
	if !ok || !tokenOK(tok, h.opts.Token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="happy"`)
		msg := "missing Authorization: Bearer <token> (the token is in the happy home's events.token)"
		if ok {
			msg = "wrong token"
		}
		writeError(w, http.StatusUnauthorized, msg)
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" {
		// ServeMux's own 404 and 405 are plain text: ours are JSON.
		probe := r.Clone(r.Context())
		probe.Method = http.MethodGet
		if _, p := h.mux.Handler(probe); p != "" {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed on "+r.URL.Path)
			return
		}
		writeError(w, http.StatusNotFound, "no such path: "+r.URL.Path)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// stopStreams ends every /event stream (the server shuts down).
func (h *Handler) stopStreams() { h.once.Do(func() { close(h.stop) }) }

func writeError(w http.ResponseWriter, code int, msg string) {
	b, _ := marshal(map[string]string{"error": msg}) // a map of strings always encodes
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

func writeJSON(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(append(b, '\n'))
}

// sessions: GET /session.
func (h *Handler) sessions(w http.ResponseWriter, _ *http.Request) {
	b, err := EncodeSessions(h.opts.Hub.Sessions())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, b)
}

// messages: GET /session/{id}/message.
func (h *Handler) messages(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	msgs, ok := h.opts.Hub.Messages(id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no session %q", id))
		return
	}
	b, err := EncodeMessages(msgs)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, b)
}

// todos: GET /session/{id}/todo.
func (h *Handler) todos(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	todos, ok := h.opts.Hub.Todos(id)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no session %q", id))
		return
	}
	b, err := marshal(todos)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	writeJSON(w, b)
}

// marshal is json.Marshal without HTML escaping (as mapper.EncodeChange
// writes sessions), without the trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EncodeSessions writes GET /session's body: a JSON array of sessions,
// each as session.created carries it ([] when none).
func EncodeSessions(ss []mapper.Session) ([]byte, error) {
	if ss == nil {
		ss = []mapper.Session{}
	}
	return marshal(ss)
}

// EncodeMessages writes GET /session/{id}/message's body: a JSON array of
// {"info","parts"} in mapper's canonical form ([] when none). It fails
// (wrapping mapper.ErrInvalid) when a message does not encode.
func EncodeMessages(ms []mapper.MessageWithParts) ([]byte, error) {
	b := []byte{'['}
	for i, m := range ms {
		raw, err := mapper.EncodeMessageWithParts(m)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, raw...)
	}
	return append(b, ']'), nil
}

// events: GET /event.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	sub := h.opts.Hub.Subscribe()
	defer sub.Close()
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(b []byte) error {
		// Writers that cannot set deadlines (test recorders) write
		// without one.
		_ = rc.SetWriteDeadline(time.Now().Add(h.opts.WriteTimeout))
		if _, err := w.Write(b); err != nil {
			return err
		}
		return rc.Flush()
	}
	buf := sse.AppendRetry(nil, h.opts.Retry.Milliseconds())
	if err := write(buf); err != nil {
		return
	}
	hb := time.NewTicker(h.opts.Heartbeat)
	defer hb.Stop()
	for {
		var err error
		select {
		case <-sub.Ready():
			var terr error
			buf, terr = sub.Take(buf[:0])
			if len(buf) > 0 {
				err = write(buf)
			}
			if terr != nil {
				if errors.Is(terr, ErrTooSlow) {
					// Said on the stream too, for whoever reads it
					// later; the hub logged it.
					_ = write(append(sse.AppendComment(nil, "disconnected: "+terr.Error()), '\n'))
				}
				return
			}
		case <-hb.C:
			err = write(append(sse.AppendComment(buf[:0], "heartbeat"), '\n'))
		case <-h.stop:
			// The server shuts down: what is queued still goes out.
			if buf, _ = sub.Take(buf[:0]); len(buf) > 0 {
				_ = write(buf)
			}
			return
		case <-r.Context().Done():
			return
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				h.opts.Log.Warn().Dur("timeout", h.opts.WriteTimeout).Int64("droppedDeltas", sub.Dropped()).
					Msg("event subscriber disconnected: it took nothing in time")
			}
			return
		}
		if cap(buf) > 1<<20 {
			buf = nil
		}
	}
}

// CheckLoopback refuses an address that is not host:port with a loopback
// host: an IP address of 127.0.0.0/8 or ::1, or "localhost". An empty host
// (":8080", every interface) is refused too.
func CheckLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q is not host:port (e.g. 127.0.0.1:4096): %w", ErrNotLoopback, addr, err)
	}
	if port == "" {
		return fmt.Errorf("%w: %q has no port (e.g. 127.0.0.1:4096, or port 0 for any)", ErrNotLoopback, addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || strconv.FormatUint(n, 10) != port {
		return fmt.Errorf("%w: %q: the port must be a number from 0 to 65535", ErrNotLoopback, addr)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		what := host
		if host == "" {
			what = "every interface"
		}
		return fmt.Errorf("%w: %q would listen on %s; use 127.0.0.1:%s or [::1]:%s", ErrNotLoopback, addr, what, port, port)
	}
	return nil
}

// Server is a running local event API.
type Server struct {
	ln   net.Listener
	hs   *http.Server
	h    *Handler
	done chan struct{}
	err  error
}

// Start listens on addr (CheckLoopback first; "localhost" means
// 127.0.0.1) and serves the handler until Close.
func Start(addr string, opts ServerOptions) (*Server, error) {
	if err := CheckLoopback(addr); err != nil {
		return nil, err
	}
	h, err := NewHandler(opts)
	if err != nil {
		return nil, err
	}
	if host, port, _ := net.SplitHostPort(addr); strings.EqualFold(host, "localhost") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("localapi: listen: %w", err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("%w: listening on %s", ErrNotLoopback, ln.Addr())
	}
	s := &Server{ln: ln, h: h, done: make(chan struct{}), hs: &http.Server{
		Handler: h, ReadHeaderTimeout: 10 * time.Second,
	}}
	go func() {
		defer close(s.done)
		if err := s.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
			opts.Log.Error().Err(err).Msg("local event API stopped")
		}
	}()
	return s, nil
}

// Addr is the address listened on ("127.0.0.1:PORT").
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://" + Addr.
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close ends every stream and stops the server (waiting at most 5 s for
// requests in progress). The hub is left as it is.
func (s *Server) Close() error {
	s.h.stopStreams()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.hs.Shutdown(ctx)
	if err != nil {
		err = s.hs.Close()
	}
	<-s.done
	return err
}
