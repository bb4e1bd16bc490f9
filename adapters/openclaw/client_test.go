package openclaw

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	gold "github.com/happy-dev/happy/internal/golden"
)

// startClient connects a client with the fake clock to g.
func startClient(t *testing.T, g *fakeGateway, clock *fakeClock, record *bytes.Buffer) *Client {
	t.Helper()
	n := 0
	opts := Options{URL: g.url(), Token: "tok", SessionKey: testSession, Now: clock.now, After: clock.after,
		SilenceLimit: time.Hour, ReconnectAttempts: 2, Version: "test", ConnectTimeout: testConnectTimeout,
		newKey: func() string { n++; return fmt.Sprintf("key-%d", n) }}
	if record != nil {
		opts.Record = record
	}
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close(); drain(c) })
	return c
}

func drain(c *Client) {
	for range c.Events() {
	}
}

// collect reads events until stop says so (or the channel closes); on
// each ToolBlocked it calls onBlocked. A guard fails the test instead of
// hanging when the client never delivers.
func collect(t *testing.T, c *Client, stop func(agent.Event) bool, onBlocked func(*agent.ToolBlocked)) []agent.Event {
	t.Helper()
	var out []agent.Event
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				return out
			}
			out = append(out, e)
			if b, ok := e.(*agent.ToolBlocked); ok && onBlocked != nil {
				onBlocked(b)
			}
			if stop != nil && stop(e) {
				return out
			}
		case <-guard.C:
			t.Fatalf("no more events after %d", len(out))
		}
	}
}

func turnEnded(e agent.Event) bool { _, ok := e.(*agent.TurnEnded); return ok }

func encodeEvents(t *testing.T, evs []agent.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range evs {
		line, err := agent.EncodeEvent(e)
		if err != nil {
			t.Fatalf("encode %T: %v", e, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// simpleTurn is the gateway side of one text turn of run runID.
func simpleTurn(c *gwConn, runID string) bool {
	f, ok := c.expect("agent")
	if !ok {
		return false
	}
	var p struct {
		Message, SessionKey, IdempotencyKey string
		Deliver                             *bool
	}
	_ = json.Unmarshal(f.Params, &p)
	if p.SessionKey != testSession || p.IdempotencyKey == "" || p.Deliver == nil || *p.Deliver {
		c.t.Errorf("agent params %s", f.Params)
	}
	c.res(f.ID, map[string]any{"runId": runID, "status": "accepted"})
	c.agentEvent(runID, 1, "lifecycle", map[string]any{"phase": "start"})
	c.agentEvent(runID, 2, "assistant", map[string]any{"text": "Hel", "delta": "Hel"})
	c.agentEvent(runID, 3, "assistant", map[string]any{"text": "Hello " + p.Message, "delta": "lo " + p.Message})
	c.agentEvent(runID, 4, "usage", map[string]any{"inputTokens": 12, "outputTokens": 3})
	// The last frame of the turn, so that the traffic log ends the same
	// way in every run (the decoder tables cover the final response).
	c.agentEvent(runID, 5, "lifecycle", map[string]any{"phase": "end", "stopReason": "stop"})
	return true
}

// TestClientTwoTurns: two prompts, the second sent while the first runs
// (queued, sent after its end), each a text turn; the traffic log of the
// run replays to the same events.
func TestClientTwoTurns(t *testing.T) {
	release := make(chan struct{})
	g := newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		f, ok := c.expect("agent")
		if !ok {
			return
		}
		c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
		c.agentEvent("run-1", 1, "assistant", map[string]any{"text": "one", "delta": "one"})
		<-release
		c.agentEvent("run-1", 2, "lifecycle", map[string]any{"phase": "end"})
		simpleTurn(c, "run-2")
		c.read()
	})
	var rec bytes.Buffer
	clock := newFakeClock()
	c := startClient(t, g, clock, &rec)
	ctx := context.Background()
	if err := c.Prompt(ctx, agent.Prompt{Text: "first"}); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, func(e agent.Event) bool { _, ok := e.(*agent.TextDelta); return ok }, nil)
	if err := c.Prompt(ctx, agent.Prompt{Text: "second"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	evs = append(evs, collect(t, c, turnEnded, nil)...)
	evs = append(evs, collect(t, c, turnEnded, nil)...)
	gold.Check(t, filepath.Join("testdata", "client", "two-turns.events.jsonl"), encodeEvents(t, evs))
	var ends []string
	for _, e := range evs {
		if te, ok := e.(*agent.TurnEnded); ok {
			ends = append(ends, te.TurnID+":"+te.Reason)
		}
	}
	if got, want := strings.Join(ends, " "), "key-1:completed key-2:completed"; got != want {
		t.Errorf("turn ends %q, want %q", got, want)
	}
	_ = c.Close()
	drain(c)
	gold.Check(t, filepath.Join("testdata", "traffic", "fake-two-turns.jsonl"), rec.Bytes())
	if bytes.Contains(rec.Bytes(), []byte(`"tok"`)) {
		t.Error("the traffic log holds the token")
	}
}

// TestClientApprovals: the exec approval table — blocked, the runner's
// decision on the wire, then running and completed (allowed) or failed
// (denied).
func TestClientApprovals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		decision agent.Decision
		noAlways bool
		wire     string
	}{
		{"once", agent.DecisionOnce, false, "allow-once"},
		{"always", agent.DecisionAlways, false, "allow-always"},
		{"always-unavailable", agent.DecisionAlways, true, "allow-once"},
		{"reject", agent.DecisionReject, false, "deny"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotWire := make(chan string, 1)
			g := newFakeGateway(t, func(c *gwConn) {
				if !c.handshake("tok") {
					return
				}
				f, ok := c.expect("agent")
				if !ok {
					return
				}
				c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
				c.agentEvent("run-1", 1, "tool", map[string]any{"phase": "start", "name": "exec", "toolCallId": "call-1",
					"args": map[string]any{"command": "touch mark", "workdir": "/w", "timeout": 30}})
				rq := map[string]any{"command": "touch mark", "cwd": "/w", "toolCallId": "call-1", "runId": "run-1", "sessionKey": testSession}
				if tc.noAlways {
					rq["unavailableDecisions"] = []string{"allow-always"}
				}
				c.event("exec.approval.requested", map[string]any{"id": "ap-1", "request": rq, "createdAtMs": 5, "expiresAtMs": 6})
				r, ok := c.expect("exec.approval.resolve")
				if !ok {
					return
				}
				var p struct{ ID, Decision string }
				_ = json.Unmarshal(r.Params, &p)
				gotWire <- p.ID + " " + p.Decision
				c.res(r.ID, map[string]any{"ok": true})
				c.event("exec.approval.resolved", map[string]any{"id": "ap-1", "decision": p.Decision})
				if p.Decision == "deny" {
					c.agentEvent("run-1", 2, "tool", map[string]any{"phase": "result", "name": "exec", "toolCallId": "call-1", "isError": true,
						"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "Exec denied by the operator"}}}})
				} else {
					c.agentEvent("run-1", 2, "tool", map[string]any{"phase": "result", "name": "exec", "toolCallId": "call-1", "isError": false,
						"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "(no output)"}}}})
				}
				c.agentEvent("run-1", 3, "assistant", map[string]any{"delta": "Done."})
				c.agentEvent("run-1", 4, "lifecycle", map[string]any{"phase": "end"})
				c.read()
			})
			c := startClient(t, g, newFakeClock(), nil)
			ctx := context.Background()
			if err := c.Prompt(ctx, agent.Prompt{Text: "touch it"}); err != nil {
				t.Fatal(err)
			}
			if err := c.Decide(ctx, "nobody", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, agent.ErrStale) {
				t.Errorf("Decide of an unknown call: %v, want ErrStale", err)
			}
			var blocked *agent.ToolBlocked
			evs := collect(t, c, turnEnded, func(b *agent.ToolBlocked) {
				blocked = b
				if err := c.Decide(ctx, b.CallID, agent.Verdict{Decision: tc.decision}); err != nil {
					t.Errorf("Decide: %v", err)
				}
				if err := c.Decide(ctx, b.CallID, agent.Verdict{Decision: tc.decision}); !errors.Is(err, agent.ErrStale) {
					t.Errorf("second Decide: %v, want ErrStale", err)
				}
			})
			if got := <-gotWire; got != "ap-1 "+tc.wire {
				t.Errorf("wire decision %q, want %q", got, "ap-1 "+tc.wire)
			}
			if blocked == nil || blocked.CallID != "call-1" || blocked.Permission == nil || blocked.Permission.Permission != agent.ToolBash ||
				strings.Join(blocked.Permission.Patterns, ",") != "touch mark" || (len(blocked.Permission.Always) == 0) != tc.noAlways {
				t.Fatalf("blocked %+v", blocked)
			}
			gold.Check(t, filepath.Join("testdata", "client", "approval-"+tc.name+".events.jsonl"), encodeEvents(t, evs))
		})
	}
}

// TestClientReconnectDedupe: the connection drops in the middle of a run;
// the client dials again, asks agent.wait about the run, and the gateway
// delivers part of the stream again: every part appears once.
func TestClientReconnectDedupe(t *testing.T) {
	waited := make(chan string, 1)
	g := newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		switch c.n {
		case 0:
			f, ok := c.expect("agent")
			if !ok {
				return
			}
			c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
			c.agentEvent("run-1", 1, "assistant", map[string]any{"delta": "a"})
			c.agentEvent("run-1", 2, "assistant", map[string]any{"delta": "b"})
			// The connection breaks here (the script returns: closed).
		case 1:
			f, ok := c.expect("agent.wait")
			if !ok {
				return
			}
			var p struct{ RunID string }
			_ = json.Unmarshal(f.Params, &p)
			waited <- p.RunID
			c.res(f.ID, map[string]any{"runId": "run-1", "status": "timeout"})
			c.agentEvent("run-1", 2, "assistant", map[string]any{"delta": "b"}) // again
			c.agentEvent("run-1", 3, "assistant", map[string]any{"delta": "c"})
			c.agentEvent("run-1", 4, "lifecycle", map[string]any{"phase": "end"})
			c.read()
		}
	})
	var rec bytes.Buffer
	c := startClient(t, g, newFakeClock(), &rec)
	if err := c.Prompt(context.Background(), agent.Prompt{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, turnEnded, nil)
	if got := <-waited; got != "run-1" {
		t.Errorf("agent.wait for %q", got)
	}
	var text []string
	for _, e := range evs {
		if d, ok := e.(*agent.TextDelta); ok {
			text = append(text, d.Delta)
		}
	}
	if got := strings.Join(text, ""); got != "abc" {
		t.Errorf("text %q, want abc (each part once)", got)
	}
	if te := evs[len(evs)-1].(*agent.TurnEnded); te.Reason != agent.TurnCompleted {
		t.Errorf("turn ended %s", te.Reason)
	}
	_ = c.Close()
	drain(c)
	// The log replays to the same parts: the note marks the new connection.
	replayed, err := Replay(bytes.NewReader(rec.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	text = nil
	for _, e := range replayed {
		if d, ok := e.(*agent.TextDelta); ok {
			text = append(text, d.Delta)
		}
	}
	if got := strings.Join(text, ""); got != "abc" {
		t.Errorf("replayed text %q, want abc", got)
	}
	gold.Check(t, filepath.Join("testdata", "traffic", "fake-reconnect.jsonl"), rec.Bytes())
}

// TestClientGatewayGone: the gateway goes away in the middle of a turn and
// refuses every reconnect: the turn ends failed with a transport error and
// the event channel closes — no hang.
func TestClientGatewayGone(t *testing.T) {
	var g *fakeGateway
	g = newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		f, ok := c.expect("agent")
		if !ok {
			return
		}
		c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
		c.agentEvent("run-1", 1, "assistant", map[string]any{"delta": "partial"})
		g.goAway()
	})
	c := startClient(t, g, newFakeClock(), nil)
	if err := c.Prompt(context.Background(), agent.Prompt{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, nil, nil) // until the channel closes
	assertGone(t, evs)
	if err := c.Prompt(context.Background(), agent.Prompt{Text: "again"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Prompt after the gateway went away: %v, want ErrClosed", err)
	}
}

// assertGone checks that evs end with a transport error and a failed turn.
func assertGone(t *testing.T, evs []agent.Event) {
	t.Helper()
	if len(evs) < 2 {
		t.Fatalf("events %d", len(evs))
	}
	ae, ok1 := evs[len(evs)-2].(*agent.AgentError)
	te, ok2 := evs[len(evs)-1].(*agent.TurnEnded)
	if !ok1 || !ok2 || ae.Kind != agent.ErrorTransport || te.Reason != agent.TurnFailed || !strings.HasPrefix(te.Error, "the gateway went away") {
		t.Fatalf("last events %s", encodeEvents(t, evs[len(evs)-2:]))
	}
}

// TestClientSilentGateway: a gateway that keeps the connection open but
// sends nothing for the silence limit counts as lost; when it cannot be
// reached again the turn ends as a transport error. The watchdog's clock
// is the test's: no real waiting.
func TestClientSilentGateway(t *testing.T) {
	var g *fakeGateway
	hung := make(chan struct{})
	g = newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		f, ok := c.expect("agent")
		if !ok {
			return
		}
		c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
		g.goAway()
		close(hung)
		c.read() // silent until the client closes the connection
	})
	clock := newFakeClock()
	c := startClient(t, g, clock, nil)
	if err := c.Prompt(context.Background(), agent.Prompt{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	<-hung
	// Frames arrived since the watchdog started (the accepted response):
	// the first expiry sees them, the second sees silence.
	collect(t, c, func(e agent.Event) bool { _, ok := e.(*agent.TurnStarted); return ok }, nil)
	clock.fire <- time.Time{}
	clock.fire <- time.Time{}
	assertGone(t, collect(t, c, nil, nil))
}

// TestClientHandshakeRefused: a wrong token is the gateway's error.
func TestClientHandshakeRefused(t *testing.T) {
	g := newFakeGateway(t, func(c *gwConn) { c.handshake("other") })
	clock := newFakeClock()
	_, err := Start(context.Background(), Options{URL: g.url(), Token: "tok", Now: clock.now, After: clock.after, ConnectTimeout: testConnectTimeout})
	if !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "AUTH_TOKEN_MISMATCH") {
		t.Fatalf("Start: %v", err)
	}
}

// TestClientInterrupt: Interrupt sends chat.abort for the run; the
// aborted lifecycle end ends the turn interrupted.
func TestClientInterrupt(t *testing.T) {
	g := newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		f, ok := c.expect("agent")
		if !ok {
			return
		}
		c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
		c.agentEvent("run-1", 1, "assistant", map[string]any{"delta": "long"})
		a, ok := c.expect("chat.abort")
		if !ok {
			return
		}
		if string(a.Params) != `{"runId":"run-1","sessionKey":"`+testSession+`"}` {
			c.t.Errorf("chat.abort params %s", a.Params)
		}
		c.res(a.ID, map[string]any{"ok": true, "aborted": true})
		c.agentEvent("run-1", 2, "lifecycle", map[string]any{"phase": "end", "aborted": true})
		c.read()
	})
	c := startClient(t, g, newFakeClock(), nil)
	ctx := context.Background()
	if err := c.Prompt(ctx, agent.Prompt{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	collect(t, c, func(e agent.Event) bool { _, ok := e.(*agent.TextDelta); return ok }, nil)
	if err := c.Interrupt(ctx); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, turnEnded, nil)
	if te := evs[len(evs)-1].(*agent.TurnEnded); te.Reason != agent.TurnInterrupted {
		t.Errorf("turn ended %s", te.Reason)
	}
	if err := c.Prompt(ctx, agent.Prompt{Text: "x", Files: []agent.PromptFile{{Mime: "image/png"}}}); !errors.Is(err, agent.ErrUnsupportedInput) {
		t.Errorf("attachment: %v", err)
	}
}

// TestClientAbortWhileApprovalWaits: an abort while an exec approval waits
// (the runner denies the approval, then interrupts) aborts the run too.
// The real gateway answers exec.approval.resolve only when the run is over
// (real-approval-once: the response follows the lifecycle end); it
// broadcasts exec.approval.resolved at once. Decide returns on that event,
// so chat.abort goes out while the run still goes on: the fake gateway
// carries on after the denial and ends the run only when aborted.
func TestClientAbortWhileApprovalWaits(t *testing.T) {
	aborted := make(chan string, 1)
	g := newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		f, ok := c.expect("agent")
		if !ok {
			return
		}
		c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
		c.agentEvent("run-1", 1, "tool", map[string]any{"phase": "start", "name": "exec", "toolCallId": "call-1",
			"args": map[string]any{"command": "touch mark", "workdir": "/w"}})
		rq := map[string]any{"command": "touch mark", "cwd": "/w", "toolCallId": "call-1", "runId": "run-1", "sessionKey": testSession}
		c.event("exec.approval.requested", map[string]any{"id": "ap-1", "request": rq, "createdAtMs": 5, "expiresAtMs": 6})
		r, ok := c.expect("exec.approval.resolve")
		if !ok {
			return
		}
		c.event("exec.approval.resolved", map[string]any{"id": "ap-1", "decision": "deny"})
		c.agentEvent("run-1", 2, "tool", map[string]any{"phase": "result", "name": "exec", "toolCallId": "call-1", "isError": true,
			"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": "Exec denied by the operator"}}}})
		c.agentEvent("run-1", 3, "assistant", map[string]any{"delta": "Then I will try another way"})
		a, ok := c.expect("chat.abort")
		if !ok {
			return
		}
		aborted <- string(a.Params)
		c.res(a.ID, map[string]any{"ok": true, "aborted": true})
		c.agentEvent("run-1", 4, "lifecycle", map[string]any{"phase": "end", "aborted": true})
		c.res(r.ID, map[string]any{"ok": true}) // only now, as the real gateway
		c.read()
	})
	c := startClient(t, g, newFakeClock(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Prompt(ctx, agent.Prompt{Text: "touch it"}); err != nil {
		t.Fatal(err)
	}
	evs := collect(t, c, turnEnded, func(b *agent.ToolBlocked) {
		// What the runner's abort does: deny what waits, then interrupt.
		if err := c.Decide(ctx, b.CallID, agent.Verdict{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled}); err != nil {
			t.Errorf("Decide: %v", err)
		}
		if err := c.Interrupt(ctx); err != nil {
			t.Errorf("Interrupt: %v", err)
		}
	})
	select {
	case p := <-aborted:
		if p != `{"runId":"run-1","sessionKey":"`+testSession+`"}` {
			t.Errorf("chat.abort params %s", p)
		}
	default:
		t.Fatal("no chat.abort reached the gateway")
	}
	if te := evs[len(evs)-1].(*agent.TurnEnded); te.Reason != agent.TurnInterrupted {
		t.Errorf("turn ended %s, want interrupted", te.Reason)
	}
}

// TestClientConnectTimeout: an address that takes the TCP connection but
// no WebSocket, a server that takes the WebSocket but never answers
// connect, and one that answers only with junk all end Start with
// ErrNotAnswering naming the URL, instead of waiting for ever. The connect
// timeout is the fake clock's: the test fires it.
func TestClientConnectTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		// script gets the connect request, then says so on reached; nil:
		// a TCP listener that never speaks HTTP.
		script func(c *gwConn, reached chan<- struct{})
		fire   bool
		want   string
	}{
		{"no websocket", nil, true, "no WebSocket connection within 2h0m0s"},
		{"silent after the upgrade", func(c *gwConn, reached chan<- struct{}) {
			c.read()
			reached <- struct{}{}
			c.read()
		}, true, "no answer to connect within 2h0m0s"},
		{"challenge, then nothing", func(c *gwConn, reached chan<- struct{}) {
			c.send(map[string]any{"type": "event", "event": "connect.challenge", "payload": map[string]any{"nonce": "n-1", "ts": 1}})
			c.read()
			reached <- struct{}{}
			c.read()
		}, true, "no answer to connect within 2h0m0s"},
		{"junk frames", func(c *gwConn, reached chan<- struct{}) {
			for i := 0; i < 40; i++ {
				c.sendRaw("<html>hello</html>")
			}
			c.read()
			reached <- struct{}{}
			c.read()
		}, false, `16 frames that are not the gateway protocol, the first "<html>hello</html>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var url string
			reached := make(chan struct{}, 1)
			if tc.script == nil {
				url = silentListener(t, reached)
			} else {
				url = newFakeGateway(t, func(c *gwConn) { tc.script(c, reached) }).url()
			}
			clock := newFakeClock()
			errc := make(chan error, 1)
			go func() {
				c, err := Start(context.Background(), Options{URL: url, Now: clock.now, After: clock.after, ConnectTimeout: testConnectTimeout})
				if c != nil {
					_ = c.Close()
					drain(c)
				}
				errc <- err
			}()
			if tc.fire {
				<-reached
				clock.channel(testConnectTimeout) <- time.Time{}
			}
			err := <-errc
			if !errors.Is(err, ErrNotAnswering) || !strings.Contains(err.Error(), url+": not an OpenClaw gateway, or not answering: "+tc.want) {
				t.Fatalf("Start: %v", err)
			}
		})
	}
}

// silentListener is a TCP listener on 127.0.0.1 that takes connections and
// never answers (saying so on reached); it returns its ws:// address.
func silentListener(t *testing.T, reached chan<- struct{}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case reached <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return "ws://" + ln.Addr().String()
}

// TestClientReconnectJunk: after a break, the address answers the new
// connection with junk and then nothing: each junk frame is a Dropped
// record, the connect timeout ends the attempt, and with no attempt left
// the turn ends as a transport error naming the URL.
func TestClientReconnectJunk(t *testing.T) {
	g := newFakeGateway(t, func(c *gwConn) {
		switch c.n {
		case 0:
			if !c.handshake("tok") {
				return
			}
			f, ok := c.expect("agent")
			if !ok {
				return
			}
			c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
			c.agentEvent("run-1", 1, "assistant", map[string]any{"delta": "a"})
		default:
			c.sendRaw("not json")
			c.sendRaw(`{"type":"evt"}`)
			for {
				if _, ok := c.read(); !ok {
					return
				}
			}
		}
	})
	clock := newFakeClock()
	c, err := Start(context.Background(), Options{URL: g.url(), Token: "tok", SessionKey: testSession, Now: clock.now, After: clock.after,
		SilenceLimit: time.Hour, ReconnectAttempts: 1, ConnectTimeout: testConnectTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); drain(c) })
	if err := c.Prompt(context.Background(), agent.Prompt{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	drops := 0
	evs := collect(t, c, func(e agent.Event) bool {
		if _, ok := e.(*agent.DroppedInput); ok {
			drops++
		}
		return drops == 2
	}, nil)
	var reasons []string
	for _, e := range evs {
		if d, ok := e.(*agent.DroppedInput); ok {
			reasons = append(reasons, string(d.Dropped.Reason)+" "+d.Dropped.Raw)
		}
	}
	if got, want := strings.Join(reasons, "|"), `unparseable_json not json|unknown_type {"type":"evt"}`; got != want {
		t.Errorf("dropped %q, want %q", got, want)
	}
	clock.channel(testConnectTimeout) <- time.Time{}
	evs = collect(t, c, nil, nil)
	assertGone(t, evs)
	if te := evs[len(evs)-1].(*agent.TurnEnded); !strings.Contains(te.Error, g.url()+": not an OpenClaw gateway, or not answering: no answer to connect") {
		t.Errorf("turn error %q", te.Error)
	}
	if err := c.Gone(); !errors.Is(err, ErrNotAnswering) {
		t.Errorf("Gone: %v", err)
	}
}

// TestClientSilentAfterHello: a gateway that answers every connect and then
// says nothing is not reconnected for ever: the attempts count across the
// reconnects that bring no new event, and the turn ends as a transport
// error.
func TestClientSilentAfterHello(t *testing.T) {
	up := make(chan struct{}, 64) // a connection is the client's current one
	g := newFakeGateway(t, func(c *gwConn) {
		if !c.handshake("tok") {
			return
		}
		method := "agent.wait" // sent once the new connection is in place
		if c.n == 0 {
			method = "agent"
		}
		f, ok := c.expect(method)
		if !ok {
			return
		}
		if c.n == 0 {
			c.res(f.ID, map[string]any{"runId": "run-1", "status": "accepted"})
			c.agentEvent("run-1", 1, "assistant", map[string]any{"delta": "a"}) // the test waits for it
		} else {
			up <- struct{}{}
		}
		for {
			if _, ok := c.read(); !ok {
				return
			}
		}
	})
	clock := newFakeClock()
	c := startClient(t, g, clock, nil)
	if err := c.Prompt(context.Background(), agent.Prompt{Text: "go"}); err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	conns, pending := 0, 0
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
loop:
	for {
		// Each connection in place gets two silence periods: the
		// first may see the frames of its start.
		var fire chan time.Time
		if pending > 0 {
			fire = clock.fire
		}
		select {
		case <-up:
			if conns++; conns > 10 {
				t.Fatalf("still reconnecting after %d connections", conns)
			}
			pending = 2
		case fire <- time.Time{}:
			pending--
		case e, ok := <-c.Events():
			if !ok {
				break loop
			}
			evs = append(evs, e)
			if _, ok := e.(*agent.TextDelta); ok {
				conns, pending = 1, 2 // the first connection is in place
			}
		case <-guard.C:
			t.Fatal("no end")
		}
	}
	assertGone(t, evs)
	if te := evs[len(evs)-1].(*agent.TurnEnded); !strings.Contains(te.Error, "reconnects with no new event") {
		t.Errorf("turn error %q", te.Error)
	}
	if err := c.Gone(); err == nil {
		t.Error("Gone is nil after the gateway went away")
	}
}
