package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/waitfor"
)

// The RFC 6455 §1.3 example.
func TestWSAcceptKey(t *testing.T) {
	if got, want := wsAcceptKey("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="; got != want {
		t.Fatalf("accept key %q, want %q", got, want)
	}
}

func TestHeaderHasToken(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   bool
	}{
		{[]string{"Upgrade"}, true},
		{[]string{"upgrade"}, true},
		{[]string{"UPGRADE"}, true},
		{[]string{"keep-alive, Upgrade"}, true},
		{[]string{"keep-alive,Upgrade"}, true},
		{[]string{" \tkeep-alive ,\tupgrade \t"}, true},
		{[]string{"keep-alive", "Upgrade"}, true},
		{[]string{"upgrades"}, false},
		{[]string{"up grade"}, false},
		// An element that is not a token ends the value.
		{[]string{"foo bar, upgrade"}, false},
		{[]string{"foo bar, upgrade", "upgrade"}, true},
		{[]string{"\"upgrade\""}, false},
		{[]string{", upgrade"}, false},
		{[]string{"keep-alive,, upgrade"}, false},
		{[]string{"keep-alive, upgrade,"}, true},
		{[]string{""}, false},
		{nil, false},
		// No Unicode folding: K (Kelvin sign) is not k.
		{[]string{"\u212aeep"}, false},
	} {
		h := http.Header{"Connection": c.values}
		if got := headerHasToken(h, "Connection", "upgrade"); got != c.want {
			t.Errorf("%q: %v, want %v", c.values, got, c.want)
		}
		// gorilla reads the same headers the same way.
		r := &http.Request{Header: http.Header{"Connection": c.values, "Upgrade": {"websocket"}}}
		if got := ws.IsWebSocketUpgrade(r); got != c.want {
			t.Errorf("%q: gorilla says %v, want %v", c.values, got, c.want)
		}
	}
}

// noHijack is a response writer gorilla cannot hijack: its upgrader then
// fails right after the checks checkUpgrade makes.
type noHijack struct{ h http.Header }

func (w *noHijack) Header() http.Header         { return w.h }
func (w *noHijack) Write(b []byte) (int, error) { return len(b), nil }
func (w *noHijack) WriteHeader(int)             {}

// gorillaCheck runs gorilla's upgrader on r: the status and reason it
// refuses r with, or 0 and "" when it gets as far as the hijack.
func gorillaCheck(r *http.Request, respHeader http.Header, originOK func(*http.Request) bool) (int, string) {
	status, reason := 0, ""
	u := ws.Upgrader{CheckOrigin: originOK, Error: func(_ http.ResponseWriter, _ *http.Request, s int, err error) {
		status, reason = s, err.Error()
	}}
	_, _ = u.Upgrade(&noHijack{h: http.Header{}}, r, respHeader)
	if status == http.StatusInternalServerError && reason == "websocket: response does not implement http.Hijacker" {
		return 0, ""
	}
	return status, reason
}

// upgradeRequest is a valid handshake request with the changes of mod.
func upgradeRequest(mod func(*http.Request)) *http.Request {
	r := &http.Request{Method: http.MethodGet, Host: "relay.example", Header: http.Header{
		"Connection":            {"Upgrade"},
		"Upgrade":               {"websocket"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {"dGhlIHNhbXBsZSBub25jZQ=="},
	}}
	if mod != nil {
		mod(r)
	}
	return r
}

func TestCheckUpgradeMatchesGorilla(t *testing.T) {
	const keyReason = "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header must be Base64 encoded value of 16-byte in length"
	allow := func(*http.Request) bool { return true }
	onlyApp := func(r *http.Request) bool {
		o := r.Header.Get("Origin")
		return o == "" || o == "https://app.example"
	}
	for _, c := range []struct {
		name       string
		mod        func(*http.Request)
		respHeader http.Header
		originOK   func(*http.Request) bool
		key        string
		status     int
		reason     string
	}{
		{name: "valid", key: "dGhlIHNhbXBsZSBub25jZQ=="},
		{name: "connection list", mod: func(r *http.Request) { r.Header["Connection"] = []string{"keep-alive, Upgrade"} }, key: "dGhlIHNhbXBsZSBub25jZQ=="},
		{name: "no connection upgrade", mod: func(r *http.Request) { r.Header["Connection"] = []string{"keep-alive"} },
			status: 400, reason: wsBadHandshake + "'upgrade' token not found in 'Connection' header"},
		{name: "no upgrade header", mod: func(r *http.Request) { delete(r.Header, "Upgrade") },
			status: 400, reason: wsBadHandshake + "'websocket' token not found in 'Upgrade' header"},
		{name: "POST", mod: func(r *http.Request) { r.Method = http.MethodPost },
			status: 405, reason: wsBadHandshake + "request method is not GET"},
		{name: "version 8", mod: func(r *http.Request) { r.Header["Sec-Websocket-Version"] = []string{"8"} },
			status: 400, reason: "websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header"},
		{name: "version list", mod: func(r *http.Request) { r.Header["Sec-Websocket-Version"] = []string{"8, 13"} }, key: "dGhlIHNhbXBsZSBub25jZQ=="},
		{name: "extensions answer", respHeader: http.Header{"Sec-Websocket-Extensions": {"x"}},
			status: 500, reason: "websocket: application specific 'Sec-WebSocket-Extensions' headers are unsupported"},
		{name: "origin refused", mod: func(r *http.Request) { r.Header["Origin"] = []string{"https://evil.example"} }, originOK: onlyApp,
			status: 403, reason: "websocket: request origin not allowed by Upgrader.CheckOrigin"},
		{name: "origin allowed", mod: func(r *http.Request) { r.Header["Origin"] = []string{"https://app.example"} }, originOK: onlyApp, key: "dGhlIHNhbXBsZSBub25jZQ=="},
		{name: "no key", mod: func(r *http.Request) { delete(r.Header, "Sec-Websocket-Key") }, status: 400, reason: keyReason},
		{name: "key not base64", mod: func(r *http.Request) { r.Header["Sec-Websocket-Key"] = []string{"not base64!"} }, status: 400, reason: keyReason},
		{name: "key of 15 bytes", mod: func(r *http.Request) { r.Header["Sec-Websocket-Key"] = []string{"AAAAAAAAAAAAAAAAAAAA"} }, status: 400, reason: keyReason},
		{name: "key unpadded", mod: func(r *http.Request) { r.Header["Sec-Websocket-Key"] = []string{"dGhlIHNhbXBsZSBub25jZQ"} }, status: 400, reason: keyReason},
	} {
		t.Run(c.name, func(t *testing.T) {
			originOK := c.originOK
			if originOK == nil {
				originOK = allow
			}
			r := upgradeRequest(c.mod)
			key, status, reason := checkUpgrade(r, c.respHeader, originOK)
			if key != c.key || status != c.status || reason != c.reason {
				t.Fatalf("got %q %d %q, want %q %d %q", key, status, reason, c.key, c.status, c.reason)
			}
			if gs, gr := gorillaCheck(upgradeRequest(c.mod), c.respHeader, originOK); gs != status || gr != reason {
				t.Fatalf("gorilla: %d %q, relay: %d %q", gs, gr, status, reason)
			}
		})
	}
}

// FuzzCheckUpgrade: any handshake request is accepted or refused (with
// the same status and reason) as gorilla's upgrader does, and never
// crashes.
func FuzzCheckUpgrade(f *testing.F) {
	f.Add("GET", "Upgrade", "websocket", "13", "dGhlIHNhbXBsZSBub25jZQ==", "")
	f.Add("GET", "keep-alive, Upgrade", "WebSocket", "8, 13", "dGhlIHNhbXBsZSBub25jZQ==", "https://app.example")
	f.Add("POST", "foo bar, upgrade", "websocket,", "13 ", "AAAAAAAAAAAAAAAAAAAAAA==", "https://evil.example")
	f.Add("GET", ",upgrade", "\twebsocket", "", "=", "\x00")
	f.Fuzz(func(t *testing.T, method, connection, upgrade, version, key, origin string) {
		mk := func() *http.Request {
			return &http.Request{Method: method, Host: "relay.example", Header: http.Header{
				"Connection":            {connection},
				"Upgrade":               {upgrade},
				"Sec-Websocket-Version": {version},
				"Sec-Websocket-Key":     {key},
				"Origin":                {origin},
			}}
		}
		originOK := func(r *http.Request) bool { return !strings.Contains(r.Header.Get("Origin"), "evil") }
		gotKey, status, reason := checkUpgrade(mk(), nil, originOK)
		gs, gr := gorillaCheck(mk(), nil, originOK)
		if status != gs || reason != gr {
			t.Fatalf("relay %d %q, gorilla %d %q", status, reason, gs, gr)
		}
		if (status == 0) != (gotKey == key && key != "") {
			t.Fatalf("status %d with key %q", status, gotKey)
		}
		if isWebSocketUpgrade(mk()) != ws.IsWebSocketUpgrade(mk()) {
			t.Fatalf("isWebSocketUpgrade differs from gorilla's for %q / %q", connection, upgrade)
		}
	})
}

func TestSwitchingProtocols(t *testing.T) {
	got := string(switchingProtocols("dGhlIHNhbXBsZSBub25jZQ==", http.Header{
		"Access-Control-Allow-Origin": {"https://app.example"},
		"Sec-Websocket-Protocol":      {"chat"},
	}))
	want := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n" +
		"Sec-WebSocket-Protocol: chat\r\n" +
		"Access-Control-Allow-Origin: https://app.example\r\n\r\n"
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	// A value cannot split the answer.
	got = string(switchingProtocols("dGhlIHNhbXBsZSBub25jZQ==", http.Header{"X-A": {"a\r\nX-B: b"}}))
	if !strings.HasSuffix(got, "X-A: a  X-B: b\r\n\r\n") {
		t.Fatalf("got %q", got)
	}
}

// rawHandshake sends a handshake request for path (with extra header
// lines, and after it the bytes of early) on a new connection to the
// relay at base, and returns the answer and the connection.
func rawHandshake(t *testing.T, base, path string, extra []string, early []byte) (*http.Response, *bufio.Reader, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: relay.example\r\n"
	for _, l := range extra {
		req += l + "\r\n"
	}
	if _, err := c.Write(append([]byte(req+"\r\n"), early...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, br, c
	}
	return resp, br, c
}

// wsHeaders returns the header lines of a valid websocket handshake.
func wsHeaders() []string {
	return []string{"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}
}

// What a client sees of the relay's upgrade: the answers the library's
// upgrade gave, request by request.
func TestUpgradeAnswers(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	const path = "/v1/updates/?EIO=4&transport=websocket"

	t.Run("accepted", func(t *testing.T) {
		resp, br, _ := rawHandshake(t, base, path, append([]string{"Origin: https://app.example"}, wsHeaders()...), nil)
		if resp == nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("answer %+v", resp)
		}
		for k, v := range map[string]string{
			"Upgrade":                          "websocket",
			"Connection":                       "Upgrade",
			"Sec-Websocket-Accept":             "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
			"Access-Control-Allow-Origin":      "https://app.example",
			"Access-Control-Allow-Credentials": "true",
			"Sec-Websocket-Extensions":         "",
		} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
		// The Engine.IO open packet follows, in one unmasked text frame.
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatal(err)
		}
		if hdr[0] != 0x81 || hdr[1]&0x80 != 0 || hdr[1]&0x7f < 2 {
			t.Fatalf("frame header % x", hdr)
		}
		p := make([]byte, hdr[1]&0x7f)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(p), `0{`) || !strings.Contains(string(p), `"sid":"`) {
			t.Fatalf("open packet %q", p)
		}
	})

	t.Run("bad key", func(t *testing.T) {
		h := wsHeaders()[:3]
		resp, _, _ := rawHandshake(t, base, path, append(h, "Sec-WebSocket-Key: short"), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer %+v", resp)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != `{"code":3,"message":"Bad request"}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("body %q, type %q", b, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("unknown transport", func(t *testing.T) {
		resp, _, _ := rawHandshake(t, base, "/v1/updates/?EIO=4&transport=polling", wsHeaders(), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer %+v", resp)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "Transport unknown" {
			t.Fatalf("body %q", b)
		}
	})

	t.Run("unknown sid", func(t *testing.T) {
		resp, _, _ := rawHandshake(t, base, path+"&sid=AAAAAAAAAAAAAAAAAAAA", wsHeaders(), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer %+v", resp)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "Session ID unknown" {
			t.Fatalf("body %q", b)
		}
	})

	t.Run("Engine.IO 3", func(t *testing.T) {
		// Refused after the websocket handshake: a close frame (1000 and
		// the message), then the end of the connection.
		resp, br, _ := rawHandshake(t, base, "/v1/updates/?EIO=3&transport=websocket", wsHeaders(), nil)
		if resp == nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("answer %+v", resp)
		}
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		want := controlFrame(ws.CloseMessage, ws.FormatCloseMessage(ws.CloseNormalClosure, "Unsupported protocol version"))
		if string(rest) != string(want) {
			t.Fatalf("after the answer % x, want % x", rest, want)
		}
	})

	t.Run("early data", func(t *testing.T) {
		// Bytes sent before the answer: the connection is closed unanswered.
		resp, br, _ := rawHandshake(t, base, path, wsHeaders(), clientFrame(0x81, []byte("2"), false))
		if resp != nil {
			t.Fatalf("answer %+v", resp)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			var ne net.Error
			if !errors.As(err, &ne) || ne.Timeout() {
				t.Fatalf("read after refusal: %v", err)
			}
		}
	})
}

// The request the library keeps holds what it reads later and nothing of
// net/http's per-connection state.
func TestStrippedRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/v1/updates/?EIO=4&transport=websocket", nil)
	r.Header.Set("Origin", "https://app.example")
	r.Header.Set("Cookie", "a=b")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	r.RemoteAddr = "192.0.2.1:1234"
	r = r.WithContext(context.WithValue(r.Context(), schemeKey{}, "https"))
	s := strippedRequest(r)
	if s.Context() != context.Background() {
		t.Fatal("the stripped request keeps the request's context")
	}
	got := []any{s.Method, s.URL.String(), s.Header, s.Host, s.RemoteAddr, s.RequestURI, s.TLS == nil}
	want := []any{"GET", "/v1/updates/?EIO=4&transport=websocket", http.Header{"Origin": {"https://app.example"}},
		"example.com", "192.0.2.1:1234", "/v1/updates/?EIO=4&transport=websocket", true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if s.URL.Query().Get("EIO") != "4" {
		t.Fatalf("query %q", s.URL.RawQuery)
	}
}

// A websocket with the sid of an open socket is refused before the
// websocket handshake. The relay's sockets all start on the websocket
// (there is no polling transport), so no client has a transport to
// upgrade; the library's upgrade would hand the socket, authenticated as
// its owner, to whoever held the sid, and the new transport would carry
// neither the relay's heartbeat nor its bound on events in flight. The
// socket goes on as before.
func TestUpgradeWithSidIsRefused(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sess := newTestSession(t, base, token, "sid-upgrade")
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/updates/?EIO=4&transport=websocket"
	first, _, err := ws.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, open, err := first.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var hs struct {
		Sid string `json:"sid"`
	}
	if len(open) < 2 || json.Unmarshal(open[1:], &hs) != nil || hs.Sid == "" {
		t.Fatalf("open packet %q", open)
	}
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sess})
	if err := first.WriteMessage(ws.TextMessage, append([]byte("40"), auth...)); err != nil {
		t.Fatal(err)
	}
	if _, p, err := first.ReadMessage(); err != nil || !strings.HasPrefix(string(p), "40{") {
		t.Fatalf("connect answer %q, %v", p, err)
	}

	path := "/v1/updates/?EIO=4&transport=websocket&sid=" + hs.Sid
	for _, tc := range []struct {
		name   string
		extra  []string
		status int
		body   string
	}{
		{"websocket", wsHeaders(), http.StatusBadRequest, `{"code":3,"message":"Bad request"}`},
		{"websocket with an allowed origin", append([]string{"Origin: https://app.example"}, wsHeaders()...), http.StatusBadRequest, `{"code":3,"message":"Bad request"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, _ := rawHandshake(t, base, path, tc.extra, nil)
			if resp == nil {
				t.Fatal("no answer")
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(b) != tc.body {
				t.Fatalf("answer %d %q, want %d %q", resp.StatusCode, b, tc.status, tc.body)
			}
		})
	}

	// The socket is still its owner's: an event is answered on it.
	if err := first.WriteMessage(ws.TextMessage, []byte(`421["ping",{}]`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, p, err := first.ReadMessage()
		if err != nil {
			t.Fatalf("the socket ended: %v", err)
		}
		if string(p) == "2" {
			continue
		}
		if string(p) != `431[{}]` {
			t.Fatalf("ack %q", p)
		}
		break
	}
}

// A socket whose client goes away while its CONNECT is being
// authenticated never connects, so the library never reports its
// disconnection either: what the relay set up for it (the socket count,
// its context) is given back all the same. A client that sends many
// CONNECTs at once has several authenticated before the library closes it
// for the second CONNECT it sees, each such socket left unconnected.
func TestUnconnectedSocketsAreReleased(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sess := newTestSession(t, base, token, "unconnected")
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sess})
	connect := append([]byte("40"), auth...)
	for _, tc := range []struct {
		name     string
		connects int
	}{
		{"one CONNECT, then gone", 1},
		{"a burst of CONNECTs", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, br, c := rawHandshake(t, base, "/v1/updates/?EIO=4&transport=websocket", wsHeaders(), nil)
			if resp == nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("answer %+v", resp)
			}
			if _, err := br.Peek(1); err != nil { // the open packet
				t.Fatal(err)
			}
			var out []byte
			for range tc.connects {
				out = append(out, clientFrame(0x81, connect, false)...)
			}
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}).True(func() bool {
				return srv.metrics.sockets.Load() == 0 && srv.io.Engine().ClientsCount() == 0
			}) {
				t.Fatalf("%d sockets counted, %d Engine.IO clients, want 0 and 0", srv.metrics.sockets.Load(), srv.io.Engine().ClientsCount())
			}
		})
	}
}

// Clients that close right after their CONNECT leave no socket behind:
// the library may connect a socket just after its client closed, too late
// for the client's close to reach it, and such a socket stayed in its
// namespace and rooms (and in the relay's socket count) for good.
func TestSocketsOfClosedClientsAreReleased(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sess := newTestSession(t, base, token, "closed clients")
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sess})
	connect := clientFrame(0x81, append([]byte("40"), auth...), false)
	req := "GET /v1/updates/?EIO=4&transport=websocket HTTP/1.1\r\nHost: relay.example\r\n" + strings.Join(wsHeaders(), "\r\n") + "\r\n\r\n"
	done := make(chan error)
	const clients = 300
	for range clients {
		go func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte(req)); err != nil {
				done <- err
				return
			}
			// The answer and the open packet, then the CONNECT and the end.
			if _, err := c.Read(make([]byte, 512)); err != nil {
				done <- err
				return
			}
			_, err = c.Write(connect)
			done <- err
		}()
	}
	for range clients {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}).True(func() bool {
		got = []int64{srv.metrics.sockets.Load(), int64(srv.io.Sockets().Sockets().Len()), int64(srv.io.Engine().ClientsCount())}
		return slices.Equal(got, []int64{0, 0, 0})
	}) {
		t.Fatalf("sockets counted, in the namespace, Engine.IO clients: %v, want [0 0 0]", got)
	}
}
