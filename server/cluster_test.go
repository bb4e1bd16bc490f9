package server_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/bus"
	"github.com/happy-dev/happy/server/bus/natstest"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

// busEngines are the ways relays of a test reach each other.
var busEngines = []string{"nats", "postgres", "memory"}

// startCluster runs n relays on one fresh PostgreSQL database, joined by
// the engine's bus; cfg is each relay's base configuration.
func startCluster(t *testing.T, engine string, n int, cfg server.Config) []*servertest.Relay {
	t.Helper()
	return startClusterOn(t, pgtest.URL(t), engine, n, cfg)
}

// startClusterOn is startCluster on the database db.
func startClusterOn(t *testing.T, db, engine string, n int, cfg server.Config) []*servertest.Relay {
	t.Helper()
	var mem bus.Memory
	natsURL := ""
	if engine == "nats" {
		natsURL = natstest.Start(t)
	}
	var out []*servertest.Relay
	for i := range n {
		c := cfg
		c.Database = db
		c.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Int("relay", i).Logger()
		switch engine {
		case "nats":
			c.BusURL = natsURL
		case "postgres":
			c.BusURL = db
		case "memory":
			b := mem.Join()
			t.Cleanup(func() { _ = b.Close() }) // after the relay closed
			c.Bus = b
		}
		out = append(out, servertest.StartConfig(t, c))
	}
	for _, r := range out {
		waitReady(t, r.URL)
	}
	return out
}

// waitReady polls /ready until 200.
func waitReady(t *testing.T, base string) {
	t.Helper()
	var err error
	if !(waitfor.Poll{Within: 15 * time.Second}).True(func() bool {
		var resp *http.Response
		if resp, err = http.Get(base + "/ready"); err != nil {
			return false
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	}) {
		t.Fatalf("%s/ready: not ready within 15s (%v)", base, err)
	}
}

// on returns a's client for another relay of the cluster (same token).
func (a api) on(r *servertest.Relay) api { return api{t: a.t, base: r.URL, token: a.token} }

// updates collects the update events of one socket.
type updates struct {
	mu   sync.Mutex
	seqs []int64
	msgs map[string]int // localId → times received
	got  chan struct{}
}

func collect(c *sio.Client) *updates {
	u := &updates{msgs: map[string]int{}, got: make(chan struct{}, 1)}
	c.On("update", func(args []any, _ func(...any)) {
		m, _ := args[0].(map[string]any)
		seq, _ := m["seq"].(float64)
		body, _ := m["body"].(map[string]any)
		u.mu.Lock()
		u.seqs = append(u.seqs, int64(seq))
		if body["t"] == "new-message" {
			msg, _ := body["message"].(map[string]any)
			lid, _ := msg["localId"].(string)
			u.msgs[lid]++
		}
		u.mu.Unlock()
		select {
		case u.got <- struct{}{}:
		default:
		}
	})
	return u
}

// wait returns once n new-message updates arrived (failing after 20 s).
func (u *updates) wait(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		u.mu.Lock()
		have := 0
		for _, c := range u.msgs {
			have += c
		}
		u.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-u.got:
		case <-deadline:
			t.Fatalf("received %d of %d new-message updates", have, n)
		}
	}
}

// A socket on one instance receives, in seq order, gap-free and exactly
// once, the updates of messages posted on the others, while two instances
// post into the same session at once; a token issued by one instance is
// valid on every other (the shared signing secret).
func TestClusterFanout(t *testing.T) {
	for _, engine := range busEngines {
		t.Run(engine, func(t *testing.T) {
			rs := startCluster(t, engine, 3, server.Config{})
			a := newAPI(t, rs[0])
			sid := a.createSession("t", "m")["id"].(string)
			var socks []*updates
			for i, r := range rs {
				c := userSocket(t, r.URL, a.token)
				if i == 2 {
					c = sessionSocket(t, r.URL, a.token, sid)
				}
				socks = append(socks, collect(c))
			}
			const perWriter, batch = 60, 3
			var wg sync.WaitGroup
			for w := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := a.on(rs[w])
					for i := 0; i < perWriter; i += batch {
						var msgs [][2]string
						for j := i; j < i+batch; j++ {
							msgs = append(msgs, [2]string{fmt.Sprintf("w%d-%03d", w, j), "c"})
						}
						cl.postMessages(sid, msgs...)
					}
				}()
			}
			wg.Wait()
			for i, u := range socks {
				u.wait(t, 2*perWriter)
				u.mu.Lock()
				if len(u.msgs) != 2*perWriter {
					t.Errorf("socket %d: %d distinct messages, want %d", i, len(u.msgs), 2*perWriter)
				}
				for lid, n := range u.msgs {
					if n != 1 {
						t.Errorf("socket %d: message %s received %d times", i, lid, n)
					}
				}
				for k := 1; k < len(u.seqs); k++ {
					if u.seqs[k] != u.seqs[k-1]+1 {
						t.Fatalf("socket %d: update seqs %v: not consecutive at %d", i, u.seqs, k)
					}
				}
				u.mu.Unlock()
			}
			// The messages are stored once each, with session seqs 1…120.
			got := a.on(rs[2]).must(200, "GET", "/v3/sessions/"+sid+"/messages?limit=500", nil)
			list := arr(t, got["messages"])
			eq(t, "stored messages", len(list), 2*perWriter)
			for i, m := range list {
				eq(t, "seq", obj(t, m)["seq"], float64(i+1))
			}
		})
	}
}

// An rpc-call arriving on one instance reaches the method a socket
// registered on another, and its answer comes back; the errors keep the
// reference's texts: a method nobody registers within the grace, a
// callee that does not answer within the timeout, a callee that
// disconnects.
func TestClusterRPC(t *testing.T) {
	for _, engine := range busEngines {
		t.Run(engine, func(t *testing.T) {
			rs := startCluster(t, engine, 2, server.Config{RPCGrace: 500 * time.Millisecond, RPCCallTimeout: 500 * time.Millisecond})
			a := newAPI(t, rs[0])
			a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "x"})
			callee := machineSocket(t, rs[0].URL, a.token, "m1")
			in := listen(t, callee, "rpc-registered", "rpc-request")
			if err := callee.Emit("rpc-register", map[string]any{"method": "m1:echo"}); err != nil {
				t.Fatal(err)
			}
			in.nextObj("rpc-registered")
			caller := userSocket(t, rs[1].URL, a.token)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			type res struct {
				v   []any
				err error
			}
			done := make(chan res, 1)
			go func() {
				v, err := caller.Call(ctx, "rpc-call", map[string]any{"method": "m1:echo", "params": map[string]any{"x": 1.0}})
				done <- res{v, err}
			}()
			req := in.next()
			eq(t, "request", req.args[0], map[string]any{"method": "m1:echo", "params": map[string]any{"x": 1.0}})
			req.ack(map[string]any{"echo": "hi"})
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			eq(t, "answer", r.v[0], map[string]any{"ok": true, "result": map[string]any{"echo": "hi"}})

			eq(t, "unknown method", call(t, caller, "rpc-call", map[string]any{"method": "m1:nope", "params": nil}),
				map[string]any{"ok": false, "error": "RPC method not available"})

			go func() {
				v, err := caller.Call(ctx, "rpc-call", map[string]any{"method": "m1:echo", "params": "slow"})
				done <- res{v, err}
			}()
			in.nextObj("rpc-request") // never answered
			r = <-done
			eq(t, "unanswered", r.v[0], map[string]any{"ok": false, "error": "operation has timed out"})

			go func() {
				v, err := caller.Call(ctx, "rpc-call", map[string]any{"method": "m1:echo", "params": "bye"})
				done <- res{v, err}
			}()
			in.nextObj("rpc-request")
			_ = callee.Close()
			r = <-done
			eq(t, "callee gone", r.v[0], map[string]any{"ok": false, "error": "RPC target disconnected"})
		})
	}
}

// Terminal pairing works whichever instance each side talks to: the
// terminal asks on one, the phone answers on another, the terminal
// collects on a third, and the token it gets works on the first.
func TestClusterPairing(t *testing.T) {
	rs := startCluster(t, "nats", 3, server.Config{})
	phone := newAPI(t, rs[1])
	pk, sec, _ := crypto.NewBoxKeyPair()
	key := base64.StdEncoding.EncodeToString(pk[:])
	term := api{t: t, base: rs[0].URL}
	eq(t, "request", term.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": key, "supportsV2": true}), map[string]any{"state": "requested"})
	phone.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": key, "response": "sealed"})
	got := term.on(rs[2]).must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": key, "supportsV2": true})
	eq(t, "state", got["state"], "authorized")
	eq(t, "response", got["response"], "sealed")
	tok := openToken(t, got, sec)
	api{t: t, base: rs[0].URL, token: tok}.must(200, "GET", "/v1/sessions", nil)
	// Collected: a fourth poll, on any instance, starts afresh.
	api{t: t, base: rs[1].URL, token: tok}.must(200, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": key})
	eq(t, "after delivery", term.on(rs[1]).must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": key, "supportsV2": true}), map[string]any{"state": "requested"})
}

// Presence and compare-and-set hold across instances: a session ended on
// one instance refuses keep-alives on another; of two updates of the same
// version on two instances exactly one wins; the apps on every instance
// see the activity; revoking on one instance refuses the tokens on the
// other at once and drops its sockets.
func TestClusterPresenceAndCAS(t *testing.T) {
	rs := startCluster(t, "nats", 2, server.Config{})
	a := newAPI(t, rs[0])
	sid := a.createSession("t", "m")["id"].(string)
	app := listen(t, userSocket(t, rs[1].URL, a.token), "ephemeral")
	s0 := sessionSocket(t, rs[0].URL, a.token, sid)
	s1 := sessionSocket(t, rs[1].URL, a.token, sid)
	alive := call(t, s0, "session-alive", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli()), "thinking": true})
	eq(t, "alive", alive["result"], "success")
	act := app.nextObj("ephemeral")
	eq(t, "activity", []any{act["type"], act["id"], act["active"], act["thinking"]}, []any{"activity", sid, true, true})

	var wg sync.WaitGroup
	results := make([]map[string]any, 2)
	for i, s := range []*sio.Client{s0, s1} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Call(context.Background(), "update-metadata", map[string]any{"sid": sid, "metadata": fmt.Sprintf("v%d", i), "expectedVersion": 0.0})
			if err == nil {
				results[i] = obj(t, v[0])
			}
		}()
	}
	wg.Wait()
	wins := 0
	for _, r := range results {
		if r["result"] == "success" {
			wins++
			eq(t, "version", r["version"], 1.0)
		} else {
			eq(t, "loser", r["result"], "version-mismatch")
		}
	}
	eq(t, "winners", wins, 1)

	eq(t, "end", call(t, s0, "session-end", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())})["result"], "success")
	// The other instance heard of the end before a keep-alive it takes
	// after the app saw the end.
	for {
		e := app.nextObj("ephemeral")
		if e["type"] == "activity" && e["active"] == false {
			break
		}
	}
	eq(t, "keep-alive after the end", call(t, s1, "session-alive", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())}),
		map[string]any{"result": "error", "message": "Session was ended"})

	a.must(200, "POST", "/v1/auth/revoke", nil)
	var st int
	if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 5 * time.Second}).True(func() bool {
		st, _ = a.on(rs[1]).raw("GET", "/v1/sessions", nil)
		return st == 401
	}) {
		t.Fatalf("the other instance still accepts a revoked token (status %d)", st)
	}
}

// /ready is 200 while the database and the bus answer; /metrics counts
// requests by route and code.
func TestClusterReadyAndMetrics(t *testing.T) {
	rs := startCluster(t, "nats", 1, server.Config{})
	newAPI(t, rs[0])
	resp, err := http.Get(rs[0].URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`happy_relay_http_requests_total{code="200",route="POST /v1/auth"} 1`,
		`happy_relay_http_requests_total{code="200",route="GET /ready"} 1`,
		"happy_relay_sockets 0",
		"happy_relay_bus_publish_errors_total 0",
		`happy_relay_http_request_duration_seconds_count{route="POST /v1/auth"} 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// When Serve's context ends the relay drains: its sockets lose their
// connection without a Socket.IO disconnect (reason "transport close", so
// that clients reconnect on their own, elsewhere), Serve returns, and the
// listener takes no new connection.
func TestDrain(t *testing.T) {
	srv, err := server.New(server.Config{DataDir: t.TempDir(), DrainTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	acct := servertest.NewAccount(t, base)
	c := userSocket(t, base, acct.Token)
	reason := make(chan string, 1)
	c.OnDisconnect(func(r string) { reason <- r })
	eq(t, "ready", api{t: t, base: base}.must(200, "GET", "/ready", nil), map[string]any{"status": "ready"})
	cancel()
	select {
	case r := <-reason:
		eq(t, "disconnect reason", r, "transport close")
	case <-time.After(10 * time.Second):
		t.Fatal("the socket was not told to go")
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	if _, err := http.Get(base + "/health"); err == nil {
		t.Fatal("the drained relay still accepts connections")
	}
}
