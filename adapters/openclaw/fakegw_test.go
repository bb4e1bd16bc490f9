package openclaw

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fakeGateway is a scripted OpenClaw gateway on 127.0.0.1: each WebSocket
// connection runs script with the connection's index (0 for the first).
// It speaks the frames of the real gateway (connect.challenge, hello-ok,
// agent events with per-run seq, exec approvals) as recorded from openclaw
// 2026.9.6 (testdata/traffic/real-*.jsonl).
type fakeGateway struct {
	t      *testing.T
	srv    *httptest.Server
	script func(c *gwConn)
	mu     sync.Mutex
	n      int
	refuse bool // answer further upgrades with 503 (a gateway that is gone)
	wg     sync.WaitGroup
}

func newFakeGateway(t *testing.T, script func(c *gwConn)) *fakeGateway {
	t.Helper()
	g := &fakeGateway{t: t, script: script}
	up := websocket.Upgrader{}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		if g.refuse {
			g.mu.Unlock()
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		n := g.n
		g.n++
		g.wg.Add(1)
		g.mu.Unlock()
		defer g.wg.Done()
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		g.script(&gwConn{t: t, ws: ws, n: n, g: g})
	}))
	t.Cleanup(func() {
		g.srv.CloseClientConnections()
		g.srv.Close()
		g.wg.Wait()
	})
	return g
}

// url is the gateway's ws:// address.
func (g *fakeGateway) url() string { return "ws" + g.srv.URL[len("http"):] }

// goAway refuses every later connection.
func (g *fakeGateway) goAway() {
	g.mu.Lock()
	g.refuse = true
	g.mu.Unlock()
}

// gwConn is one connection of the fake gateway.
type gwConn struct {
	t   *testing.T
	ws  *websocket.Conn
	n   int
	seq int64
	g   *fakeGateway
}

// read returns the next frame of the client; ok false when it is gone.
func (c *gwConn) read() (Frame, bool) {
	_, msg, err := c.ws.ReadMessage()
	if err != nil {
		return Frame{}, false
	}
	f, err := DecodeFrame(msg)
	if err != nil {
		c.t.Errorf("fake gateway: the client sent %s: %v", msg, err)
		return Frame{}, false
	}
	return f, true
}

// expect reads the next request and checks its method.
func (c *gwConn) expect(method string) (Frame, bool) {
	f, ok := c.read()
	if ok && (f.Type != TypeReq || f.Method != method) {
		c.t.Errorf("fake gateway: got %s %s, want req %s", f.Type, f.Method, method)
		return f, false
	}
	return f, ok
}

func (c *gwConn) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.t.Fatal(err)
	}
	_ = c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *gwConn) sendRaw(s string) { _ = c.ws.WriteMessage(websocket.TextMessage, []byte(s)) }

// event sends an event frame with the connection's next seq.
func (c *gwConn) event(name string, payload any) {
	c.seq++
	c.send(map[string]any{"type": "event", "event": name, "payload": payload, "seq": c.seq})
}

func (c *gwConn) res(id string, payload any) {
	c.send(map[string]any{"type": "res", "id": id, "ok": true, "payload": payload})
}

func (c *gwConn) fail(id, code, message string) {
	c.send(map[string]any{"type": "res", "id": id, "ok": false, "error": map[string]any{"code": code, "message": message}})
}

// handshake sends the challenge, checks connect and answers hello-ok.
func (c *gwConn) handshake(token string) bool {
	c.send(map[string]any{"type": "event", "event": "connect.challenge", "payload": map[string]any{"nonce": "n-1", "ts": 1}})
	f, ok := c.expect("connect")
	if !ok {
		return false
	}
	var p struct {
		MinProtocol, MaxProtocol int
		Role                     string
		Scopes                   []string
		Client                   struct{ ID, Mode string }
		Auth                     *struct{ Token string }
	}
	if err := json.Unmarshal(f.Params, &p); err != nil {
		c.t.Errorf("connect params: %v", err)
	}
	if p.Role != "operator" || p.MinProtocol != 3 || p.MaxProtocol != 4 || p.Client.ID != "gateway-client" || p.Client.Mode != "backend" {
		c.t.Errorf("connect params %+v", p)
	}
	got := ""
	if p.Auth != nil {
		got = p.Auth.Token
	}
	if got != token {
		c.fail(f.ID, "AUTH_TOKEN_MISMATCH", "unauthorized: gateway token mismatch")
		return false
	}
	c.res(f.ID, map[string]any{"type": "hello-ok", "protocol": 4, "server": map[string]any{"version": "2026.9.6", "connId": "c"},
		"features": map[string]any{"methods": []string{"agent"}, "events": []string{"agent"}}, "snapshot": map[string]any{},
		"auth":   map[string]any{"role": "operator", "scopes": p.Scopes},
		"policy": map[string]any{"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 15000}})
	return true
}

// agentEvent sends an "agent" event of run runID.
func (c *gwConn) agentEvent(runID string, seq int64, stream string, data map[string]any) {
	c.event("agent", map[string]any{"runId": runID, "seq": seq, "stream": stream, "ts": 1000 + seq, "sessionKey": testSession, "data": data})
}

// testSession is the session key the client tests use.
const testSession = "agent:main:happy-test"

// fakeClock is the injected clock of the client tests: Now is fixed, a
// short wait (a reconnect delay) is over at once, and a long one (the
// silence watchdog, the connect timeout) lasts until the test fires it:
// each long duration has its own channel, fire the one of SilenceLimit
// (an hour).
type fakeClock struct {
	mu   sync.Mutex
	long map[time.Duration]chan time.Time
	fire chan time.Time
}

// testConnectTimeout is the clients' ConnectTimeout in the tests: a long
// wait of its own on the fake clock.
const testConnectTimeout = 2 * time.Hour

func newFakeClock() *fakeClock {
	c := &fakeClock{long: map[time.Duration]chan time.Time{}}
	c.fire = c.channel(time.Hour)
	return c
}

// channel is the channel of the long wait d.
func (c *fakeClock) channel(d time.Duration) chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.long[d]
	if !ok {
		ch = make(chan time.Time)
		c.long[d] = ch
	}
	return ch
}

func (c *fakeClock) now() time.Time { return time.UnixMilli(1_800_000_000_000) }

func (c *fakeClock) after(d time.Duration) <-chan time.Time {
	if d >= time.Minute {
		return c.channel(d)
	}
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}
