package server

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/fdlimit"
)

// lockedBuf is a bytes.Buffer safe for the logger's concurrent writes.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) lines(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), substr)
}

// healthOn sends GET /health on c (kept alive) and returns the status
// line and body.
func healthOn(t *testing.T, c net.Conn, r *bufio.Reader) (int, string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: relay\r\n\r\n"); err != nil {
		return 0, err.Error()
	}
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err.Error()
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(body)
}

// TestFDGuard503: with the open-file limit injected a few descriptors
// above what the process holds, connections beyond it are answered 503
// at once with the JSON error and closed, the refusals are logged once
// per second of the relay's clock, and closing connections makes room
// again.
func TestFDGuard503(t *testing.T) {
	if _, ok := fdlimit.Open(); !ok {
		t.Skip("open descriptors cannot be counted here")
	}
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	logs := &lockedBuf{}
	srv, err := New(Config{DataDir: t.TempDir(), Logger: zerolog.New(logs), Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n, _ := fdlimit.Open()
	// Room for a few connections (each costs this process two
	// descriptors: the client's end and the relay's) above the reserve.
	srv.cfg.MaxOpenFiles = n + fdReserve(n) + 6
	defer serveOn(srv, l)()

	var open []net.Conn
	closeAll := func() {
		for _, c := range open {
			_ = c.Close()
		}
		open = nil
	}
	defer closeAll()
	served, refusedAt := 0, -1
	var refusedBody string
	for i := 0; i < 20 && refusedAt < 0; i++ {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		st, body := healthOn(t, c, bufio.NewReader(c))
		switch st {
		case 200:
			served++
		case 503:
			refusedAt, refusedBody = i, body
		default:
			t.Fatalf("connection %d: status %d %q", i, st, body)
		}
	}
	if served == 0 || refusedAt < 0 {
		t.Fatalf("served %d, refused at %d: want some served, then a 503", served, refusedAt)
	}
	if refusedBody != `{"error":"Too many open connections, retry in a moment (503)"}` {
		t.Fatalf("503 body %q", refusedBody)
	}
	// The refused connection is closed by the relay.
	last := open[len(open)-1]
	_ = last.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := last.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("refused connection: read %v, want EOF", err)
	}
	// More refusals within the same second of the relay's clock: still
	// one log line.
	for range 3 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if st, _ := healthOn(t, c, bufio.NewReader(c)); st != 503 {
			t.Fatalf("status %d, want 503", st)
		}
		_ = c.Close()
	}
	const line = "refusing connections with 503"
	if got := logs.lines(line); got != 1 {
		t.Fatalf("%d log lines about refusals, want 1", got)
	}
	clock.Add(int64(time.Second))
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := healthOn(t, c, bufio.NewReader(c)); st != 503 {
		t.Fatalf("status %d, want 503", st)
	}
	_ = c.Close()
	if got := logs.lines(line); got != 2 {
		t.Fatalf("%d log lines after a second, want 2", got)
	}
	if !strings.Contains(logs.b.String(), `"refused":4`) {
		t.Fatalf("second line does not count the 4 refusals since the first: %s", logs.b.String())
	}
	// Room again once connections close (the next count is fresh: the
	// estimate says no, so it counts again).
	closeAll()
	waitUntil(t, 10*time.Second, "a connection served after others closed", func() bool {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			return false
		}
		defer c.Close()
		st, _ := healthOn(t, c, bufio.NewReader(c))
		return st == 200
	})
}

// The relay's HTTP server closes a keep-alive connection left idle for
// IdleConnTimeout. Without an idle timeout net/http waits for a
// connection's next request forever (ReadHeaderTimeout starts only with
// the request's first bytes), so a client that sent one request and kept
// its connections open would hold the relay's descriptors until the
// open-file guard refused everyone.
func TestServeTimesOutIdleConnections(t *testing.T) {
	srv, l := newLocal(t)
	defer serveOn(srv, l)()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Answered: the server is registered.
	if st, _ := healthOn(t, c, bufio.NewReader(c)); st != 200 {
		t.Fatalf("health: %d", st)
	}
	srv.mu.Lock()
	hs := srv.httpSrvs[0]
	got := []time.Duration{hs.ReadHeaderTimeout, hs.IdleTimeout}
	srv.mu.Unlock()
	if want := []time.Duration{DefaultHeaderTimeout, DefaultIdleConnTimeout}; !slices.Equal(got, want) {
		t.Fatalf("read header and idle timeouts %v, want %v", got, want)
	}
}

// newLocal is a relay with a fresh data folder that logs nothing, and a
// listener for it on a free loopback port.
func newLocal(t *testing.T) (*Server, net.Listener) {
	t.Helper()
	srv, err := New(Config{DataDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close()
		t.Fatal(err)
	}
	return srv, l
}

// serveOn serves srv on l until the returned stop is called, which ends
// the serving, waits for it and closes srv.
func serveOn(srv *Server, l net.Listener) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	return func() {
		cancel()
		<-done
		_ = srv.Close()
	}
}
