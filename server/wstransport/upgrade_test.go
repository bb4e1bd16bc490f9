package wstransport

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	ws "github.com/gorilla/websocket"
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

// The request the library keeps holds what it reads later and nothing of
// net/http's per-connection state.
func TestStrippedRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/v1/updates/?EIO=4&transport=websocket", nil)
	r.Header.Set("Origin", "https://app.example")
	r.Header.Set("Cookie", "a=b")
	r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	r.RemoteAddr = "192.0.2.1:1234"
	// A value a middleware put in the context (the relay's proxy scheme).
	type schemeKey struct{}
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
