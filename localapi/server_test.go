package localapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
)

const testToken = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func startServer(t *testing.T, h *Hub) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", ServerOptions{Hub: h, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func get(t *testing.T, url, auth string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestAuth(t *testing.T) {
	h := NewHub(HubOptions{})
	h.Publish([]mapper.BusEvent{&mapper.SessionCreated{Info: mapper.Session{ID: "ses_1", Title: "t"}}})
	s := startServer(t, h)
	missing := `{"error":"missing Authorization: Bearer <token> (the token is in the happy home's events.token)"}` + "\n"
	wrong := `{"error":"wrong token"}` + "\n"
	for _, tc := range []struct {
		name, path, auth string
		code             int
		body             string
	}{
		{"no header", "/session", "", 401, missing},
		{"no header on the stream", "/event", "", 401, missing},
		{"basic", "/session", "Basic " + testToken, 401, missing},
		{"bearer without token", "/session", "Bearer ", 401, missing},
		{"wrong token", "/session", "Bearer " + strings.Repeat("0", 64), 401, wrong},
		{"token one byte short", "/event", "Bearer " + testToken[:63], 401, wrong},
		{"token in the query is not taken", "/session?token=" + testToken, "", 401, missing},
		{"right token", "/session", "Bearer " + testToken, 200, `[{"id":"ses_1","projectID":"","directory":"","title":"t","time":{"created":0,"updated":0}}]` + "\n"},
		{"scheme in any case", "/session", "bearer " + testToken, 200, `[{"id":"ses_1","projectID":"","directory":"","title":"t","time":{"created":0,"updated":0}}]` + "\n"},
		{"unknown session", "/session/ses_x/message", "Bearer " + testToken, 404, `{"error":"no session \"ses_x\""}` + "\n"},
		{"known session, no messages", "/session/ses_1/message", "Bearer " + testToken, 200, "[]\n"},
		{"todos", "/session/ses_1/todo", "Bearer " + testToken, 200, "[]\n"},
		{"unknown path", "/nope", "Bearer " + testToken, 404, `{"error":"no such path: /nope"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, hdr := get(t, s.URL()+tc.path, tc.auth)
			if code != tc.code || body != tc.body {
				t.Errorf("got %d %q, want %d %q", code, body, tc.code, tc.body)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") != `Bearer realm="happy"` {
				t.Errorf("WWW-Authenticate %q", hdr.Get("WWW-Authenticate"))
			}
		})
	}
	req, _ := http.NewRequest("POST", s.URL()+"/session", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || string(b) != `{"error":"POST is not allowed on /session"}`+"\n" {
		t.Errorf("POST: %d %s", resp.StatusCode, b)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		err  string // "" = accepted
	}{
		{"127.0.0.1:0", ""},
		{"127.1.2.3:4096", ""},
		{"[::1]:0", ""},
		{"localhost:0", ""},
		{"LOCALHOST:0", ""},
		{"0.0.0.0:4096", `"0.0.0.0:4096" would listen on 0.0.0.0; use 127.0.0.1:4096 or [::1]:4096`},
		{":4096", `":4096" would listen on every interface; use 127.0.0.1:4096 or [::1]:4096`},
		{"[::]:4096", `"[::]:4096" would listen on ::`},
		{"192.168.1.10:4096", `would listen on 192.168.1.10`},
		{"example.com:4096", `would listen on example.com`},
		{"127.0.0.1", `"127.0.0.1" is not host:port`},
		{"127.0.0.1:", `"127.0.0.1:" has no port`},
		{"127.0.0.1:99999", `"127.0.0.1:99999": the port must be a number from 0 to 65535`},
		{"127.0.0.1:http", `the port must be a number`},
		{"127.0.0.1:04096", `the port must be a number`},
	} {
		err := CheckLoopback(tc.addr)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.addr, err)
		case tc.err != "" && (!errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: got %v, want %q", tc.addr, err, tc.err)
		}
	}
	if _, err := Start("0.0.0.0:0", ServerOptions{Hub: NewHub(HubOptions{}), Token: testToken}); !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("Start on 0.0.0.0: %v", err)
	}
	s, err := Start("localhost:0", ServerOptions{Hub: NewHub(HubOptions{}), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("localhost listened on %s", s.Addr())
	}
	if _, err := Start("127.0.0.1:0", ServerOptions{Hub: NewHub(HubOptions{}), Token: "short"}); !errors.Is(err, ErrBadToken) {
		t.Fatalf("bad token: %v", err)
	}
}

// TestEventStreamOverHTTP follows /event with the internal/sse reader over
// a real loopback connection.
func TestEventStreamOverHTTP(t *testing.T) {
	h := NewHub(HubOptions{})
	s := startServer(t, h)
	req, _ := http.NewRequest("GET", s.URL()+"/event", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	r, _ := sse.NewReader(resp.Body, sse.Options{})
	f, _, err := r.Next()
	if err != nil || !f.HasRetry || f.Retry != 3000 || f.HasData {
		t.Fatalf("first frame %+v %v", f, err)
	}
	// Subscribed before the retry was written: nothing published now is
	// missed.
	h.Publish([]mapper.BusEvent{status(1), status(2)})
	for i := 1; i <= 2; i++ {
		f, ref, err := r.Next()
		if err != nil || ref != nil || f.Event+" "+f.Data != statusLine(i) || f.HasID {
			t.Fatalf("frame %d: %+v %v %v", i, f, ref, err)
		}
	}
	// Closing the server ends the stream.
	s.Close()
	if _, _, err := r.Next(); err == nil {
		t.Fatal("stream still open after Close")
	}
	if st := h.Stats(); st.Subscribers != 0 {
		t.Fatalf("subscribers left %+v", st)
	}
}

// streamRecorder is a ResponseWriter whose body may be read while the
// handler writes.
type streamRecorder struct {
	mu   sync.Mutex
	hdr  http.Header
	code int
	buf  bytes.Buffer
}

func (w *streamRecorder) Header() http.Header { return w.hdr }
func (w *streamRecorder) WriteHeader(c int)   { w.code = c }
func (w *streamRecorder) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}
func (w *streamRecorder) Flush() {}
func (w *streamRecorder) body() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestEventStreamHeartbeatAndSlowDisconnect runs the handler in a synctest
// bubble: heartbeats every Heartbeat of fake time, retry once, and a
// subscriber past its bound is told why and ends.
func TestEventStreamHeartbeatAndSlowDisconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hub := NewHub(HubOptions{MaxPending: 2})
		hd, err := NewHandler(ServerOptions{Hub: hub, Token: testToken, Heartbeat: 10 * time.Second, Retry: 1500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		req, _ := http.NewRequestWithContext(ctx, "GET", "/event", nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		w := &streamRecorder{hdr: http.Header{}}
		done := make(chan struct{})
		go func() { defer close(done); hd.ServeHTTP(w, req) }()
		synctest.Wait()
		if got := w.body(); got != "retry: 1500\n\n" {
			t.Fatalf("start %q", got)
		}
		time.Sleep(25 * time.Second) // fake time: two heartbeats
		synctest.Wait()
		if got := w.body(); got != "retry: 1500\n\n: heartbeat\n\n: heartbeat\n\n" {
			t.Fatalf("heartbeats %q", got)
		}
		hub.Publish([]mapper.BusEvent{status(1)})
		synctest.Wait()
		if got := w.body(); !strings.HasSuffix(got, "event: session.status\ndata: "+strings.TrimPrefix(statusLine(1), "session.status ")+"\n\n") {
			t.Fatalf("event %q", got)
		}
		cancel()
		<-done

		// A subscriber that cannot take three state changes in one go is
		// past MaxPending 2: the hub disconnects it, the stream says why.
		ctx2, cancel2 := context.WithCancel(t.Context())
		defer cancel2()
		req2, _ := http.NewRequestWithContext(ctx2, "GET", "/event", nil)
		req2.Header.Set("Authorization", "Bearer "+testToken)
		w2 := &streamRecorder{hdr: http.Header{}}
		done2 := make(chan struct{})
		go func() { defer close(done2); hd.ServeHTTP(w2, req2) }()
		synctest.Wait()
		hub.Publish([]mapper.BusEvent{status(1), status(2), status(3)}) // in one call: the writer cannot run between
		<-done2
		if got := w2.body(); !strings.HasSuffix(got, ": disconnected: localapi: subscriber too slow: more than 2 state changes waiting\n\n") {
			t.Fatalf("slow stream %q", got)
		}
		if st := hub.Stats(); st.Disconnected != 1 || st.Subscribers != 0 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "home", "events.token")
	tok, err := LoadOrCreateToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseToken([]byte(tok)); err != nil {
		t.Fatalf("new token %q: %v", tok, err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", st.Mode(), err)
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o700 {
		t.Fatalf("folder mode %v", st.Mode())
	}
	again, err := LoadOrCreateToken(path)
	if err != nil || again != tok {
		t.Fatalf("second load %q %v", again, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".events-token-*")); len(left) != 0 {
		t.Fatalf("temp files left %q", left)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), "may be read by other users (mode 0644)") {
		t.Fatalf("0644: %v", err)
	}
	bad := filepath.Join(dir, "bad.token")
	if err := os.WriteFile(bad, []byte("not a token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(bad); !errors.Is(err, ErrBadToken) || strings.Contains(err.Error(), "not a token") {
		t.Fatalf("bad content (never echoed): %v", err)
	}
}

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{testToken, ""},
		{testToken + "\n", ""},
		{testToken + "\n\n", "66 bytes"},
		{strings.ToUpper(testToken), "byte 10 is not a lowercase hex digit"},
		{"", "0 bytes"},
		{testToken[:63] + "g", "byte 63"},
	} {
		got, err := ParseToken([]byte(tc.in))
		switch {
		case tc.err == "" && (err != nil || got != testToken):
			t.Errorf("%q: %q %v", tc.in, got, err)
		case tc.err != "" && (!errors.Is(err, ErrBadToken) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v, want %q", tc.in, err, tc.err)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{testToken, testToken + "\n", "", "\n", strings.ToUpper(testToken), testToken + "\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, err := ParseToken(b)
		if err != nil {
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("error not ErrBadToken: %v", err)
			}
			return
		}
		if len(tok) != TokenLen || (string(b) != tok && string(b) != tok+"\n") {
			t.Fatalf("accepted %q as %q", b, tok)
		}
	})
}

func FuzzBearer(f *testing.F) {
	for _, s := range []string{"Bearer " + testToken, "bearer  x ", "Basic x", "", "Bearer", " Bearer\tx"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := bearer(h)
		if ok && (tok == "" || strings.TrimSpace(tok) != tok || !strings.Contains(h, tok)) {
			t.Fatalf("%q gave %q", h, tok)
		}
		if ok != tokenOK(tok, testToken) && tok == testToken {
			t.Fatalf("%q: the right token refused", h)
		}
	})
}

func FuzzCheckLoopback(f *testing.F) {
	for _, s := range []string{"127.0.0.1:0", "[::1]:4096", "localhost:1", "0.0.0.0:1", ":1", "[::ffff:127.0.0.1]:1", "127.0.0.1", "[fe80::1%lo]:1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		err := CheckLoopback(addr)
		if err != nil {
			if !errors.Is(err, ErrNotLoopback) {
				t.Fatalf("%q: error not ErrNotLoopback: %v", addr, err)
			}
			return
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "" {
			t.Fatalf("%q accepted without host:port", addr)
		}
		if ip := net.ParseIP(host); !strings.EqualFold(host, "localhost") && (ip == nil || !ip.IsLoopback()) {
			t.Fatalf("%q accepted with host %q", addr, host)
		}
	})
}

// A reader that takes nothing is disconnected after WriteTimeout once the
// socket's buffers are full, whatever the hub's bounds allow.
func TestEventStreamStuckReaderDisconnected(t *testing.T) {
	h := NewHub(HubOptions{MaxPendingBytes: 1 << 30, MaxPending: 1 << 20})
	s, err := Start("127.0.0.1:0", ServerOptions{Hub: h, Token: testToken, WriteTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET /event HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testToken + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	waitfor.Poll{Every: 5 * time.Millisecond}.Until(t, "the reader's subscription", func() bool { return h.Stats().Subscribers != 0 })
	// One megabyte a tick until the socket's buffers are full and the
	// write times out.
	big := strings.Repeat("x", 1<<20)
	if !(waitfor.Poll{Every: 10 * time.Millisecond}).True(func() bool {
		if h.Stats().Subscribers != 1 {
			return true
		}
		h.Publish([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_1", big)}})
		return false
	}) {
		t.Fatalf("stuck reader still subscribed: %+v", h.Stats())
	}
	if st := h.Stats(); st.Disconnected != 0 {
		t.Fatalf("the hub, not the write timeout, disconnected it: %+v", st)
	}
}
