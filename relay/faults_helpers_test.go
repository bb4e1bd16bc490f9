package relay

import (
	"context"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/server"
)

// restartableRelay is an in-process relay on a fixed loopback port whose
// process side can be stopped and started again over the same data folder
// (a relay restart).
type restartableRelay struct {
	t       testing.TB
	URL     string
	addr    string
	dataDir string

	mu     sync.Mutex
	srv    *server.Server
	cancel context.CancelFunc
	done   chan error
}

func newRestartableRelay(t testing.TB) *restartableRelay {
	t.Helper()
	r := &restartableRelay{t: t, dataDir: t.TempDir()}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	r.URL = "http://" + r.addr
	r.serve(l)
	t.Cleanup(r.Stop)
	return r
}

func (r *restartableRelay) serve(l net.Listener) {
	srv, err := server.New(server.Config{DataDir: r.dataDir, Logger: zerolog.New(zerolog.NewTestWriter(r.t)).Level(zerolog.ErrorLevel)})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	r.mu.Lock()
	r.srv, r.cancel, r.done = srv, cancel, done
	r.mu.Unlock()
}

// Start listens again on the same address. Stop has closed the previous
// listener, and Go listeners reuse an address whose old connections are
// in TIME_WAIT, so the port is free at once.
func (r *restartableRelay) Start() {
	r.t.Helper()
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("relay restart: %v", err)
	}
	r.serve(l)
}

// Stop closes the relay: every socket is dropped, the store is closed.
func (r *restartableRelay) Stop() {
	r.mu.Lock()
	srv, cancel, done := r.srv, r.cancel, r.done
	r.srv = nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	cancel()
	_ = srv.Close()
	<-done
}

// cutProxy is a TCP proxy on 127.0.0.1 in front of a relay. Cut closes
// every connection going through it (both directions, mid-stream) and
// refuses new ones (closing them at once, counted by Refused) until
// Restore.
type cutProxy struct {
	ln     net.Listener
	target string
	URL    string

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	down    bool
	refused int
}

func newCutProxy(t testing.TB, targetURL string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: l, target: targetURL[len("http://"):], URL: "http://" + l.Addr().String(), conns: map[net.Conn]struct{}{}}
	done := make(chan struct{})
	go func() { defer close(done); p.accept() }()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		p.Cut()
	})
	return p
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if down {
			p.refused++
		}
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

func (p *cutProxy) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// Cut drops every open connection and refuses new ones until Restore.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	p.down = true
	conns := make([]net.Conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// Restore accepts connections again.
func (p *cutProxy) Restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// Refused is the number of connections refused during cuts so far.
func (p *cutProxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}
