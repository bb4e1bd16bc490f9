package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/happy-dev/happy/adapters/openclaw"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
)

// fakeOpenclawGateway serves one scripted turn per agent request on
// 127.0.0.1: an exec tool call that asks for approval, its result after the
// decision, the answer "Done." (or "Denied." when denied). decisions
// receives what happy decided.
func fakeOpenclawGateway(t *testing.T) (url string, decisions <-chan string) {
	t.Helper()
	dec := make(chan string, 4)
	var wg sync.WaitGroup
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		wg.Add(1)
		defer wg.Done()
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		seq := 0
		send := func(v map[string]any) {
			if v["type"] == "event" {
				seq++
				v["seq"] = seq
			}
			b, _ := json.Marshal(v)
			_ = ws.WriteMessage(websocket.TextMessage, b)
		}
		read := func() (map[string]json.RawMessage, string, bool) {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return nil, "", false
			}
			var f map[string]json.RawMessage
			_ = json.Unmarshal(msg, &f)
			var id string
			_ = json.Unmarshal(f["id"], &id)
			return f, id, true
		}
		agentEv := func(run string, n int, stream string, data map[string]any) {
			send(map[string]any{"type": "event", "event": "agent", "payload": map[string]any{"runId": run, "seq": n, "stream": stream, "ts": 100 + n, "data": data}})
		}
		send(map[string]any{"type": "event", "event": "connect.challenge", "payload": map[string]any{"nonce": "n", "ts": 1}})
		_, id, ok := read()
		if !ok {
			return
		}
		send(map[string]any{"type": "res", "id": id, "ok": true, "payload": map[string]any{"type": "hello-ok", "protocol": 4,
			"policy": map[string]any{"tickIntervalMs": 15000}}})
		for {
			f, id, ok := read()
			if !ok {
				return
			}
			var method string
			_ = json.Unmarshal(f["method"], &method)
			if method != "agent" {
				send(map[string]any{"type": "res", "id": id, "ok": true, "payload": map[string]any{}})
				continue
			}
			run := "run-" + id
			send(map[string]any{"type": "res", "id": id, "ok": true, "payload": map[string]any{"runId": run, "status": "accepted"}})
			agentEv(run, 1, "tool", map[string]any{"phase": "start", "name": "exec", "toolCallId": "call-" + id, "args": map[string]any{"command": "touch mark"}})
			send(map[string]any{"type": "event", "event": "exec.approval.requested", "payload": map[string]any{"id": "ap-" + id,
				"request": map[string]any{"command": "touch mark", "toolCallId": "call-" + id, "runId": run}}})
			rf, rid, ok := read()
			if !ok {
				return
			}
			var p struct{ ID, Decision string }
			_ = json.Unmarshal(rf["params"], &p)
			dec <- p.Decision
			send(map[string]any{"type": "res", "id": rid, "ok": true, "payload": map[string]any{}})
			answer := "Done."
			if p.Decision == "deny" {
				answer = "Denied."
				agentEv(run, 2, "tool", map[string]any{"phase": "result", "toolCallId": "call-" + id, "isError": true, "result": "denied by the operator"})
			} else {
				agentEv(run, 2, "tool", map[string]any{"phase": "result", "toolCallId": "call-" + id, "result": "(no output)"})
			}
			agentEv(run, 3, "assistant", map[string]any{"delta": answer})
			agentEv(run, 4, "lifecycle", map[string]any{"phase": "end"})
		}
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http"), dec
}

// happy openclaw -p against a gateway: the session reaches the relay, a
// rule allows the command (allow-once on the wire), the answer is printed,
// and the recorded traffic replays to the same transcript.
func TestOpenclawOneTurn(t *testing.T) {
	for _, tc := range []struct {
		name, rule, wire, stdout string
		code                     int
	}{
		{"allowed by rule", "--allow=bash:touch *", "allow-once", "Done.\n", exitOK},
		{"denied by rule", "--deny=bash:touch *", "deny", "Denied.\n", exitFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, decisions := fakeOpenclawGateway(t)
			env := codexTestEnv(t, nil)
			env["OPENCLAW_GATEWAY_URL"] = url
			rec := filepath.Join(t.TempDir(), "traffic.jsonl")
			code, stdout, stderr := runHappy(t, env, "openclaw", "-p", "touch it", tc.rule, "--record", rec)
			if code != tc.code || stdout != tc.stdout {
				t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
			}
			if got := <-decisions; got != tc.wire {
				t.Errorf("decision %q, want %q", got, tc.wire)
			}
			sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
			o, tr := readSession(t, env, sid)
			if o.Metadata.Flavor != "openclaw" || len(tr.Dropped) != 0 {
				t.Fatalf("flavor %q dropped %v", o.Metadata.Flavor, tr.Dropped)
			}
			if got := strings.Join(textsOf(tr), "|"); got != "user: touch it|assistant: "+strings.TrimSpace(tc.stdout) {
				t.Errorf("texts %q", got)
			}
			var tools []string
			for _, m := range tr.Messages {
				for _, p := range m.Parts {
					if tp, ok := p.(*mapper.ToolPart); ok {
						tools = append(tools, tp.Tool+" "+string(tp.State.Status))
					}
				}
			}
			wantTool := "bash completed"
			if tc.wire == "deny" {
				wantTool = "bash error"
			}
			if strings.Join(tools, ",") != wantTool {
				t.Errorf("tools %q, want %q", tools, wantTool)
			}
			code, stdout, stderr = runHappy(t, nil, "replay", "--agent", "openclaw", "--session", "ses-replay", rec)
			if code != exitOK || stderr != "" || !strings.Contains(stdout, "> touch it") || !strings.Contains(stdout, strings.TrimSpace(tc.stdout)) {
				t.Fatalf("replay exit %d %q %q", code, stdout, stderr)
			}
		})
	}
}

// happy replay --agent openclaw of a capture of the real gateway.
func TestReplayOpenclawGolden(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join("testdata", "replay", "openclaw-*.jsonl"))
	if len(logs) == 0 {
		t.Fatal("no openclaw traffic logs under testdata/replay")
	}
	for _, p := range logs {
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "openclaw", "--session", "ses-replay", p)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, filepath.Join("testdata", "replay", name+".txt"), []byte(stdout))
			code, stdout, stderr = runHappy(t, nil, "replay", "--agent", "openclaw", "--format", "json", "--session", "ses-replay", p)
			if code != exitOK || stderr != "" {
				t.Fatalf("json: exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, filepath.Join("testdata", "replay", name+".json"), []byte(stdout))
		})
	}
}

// Usage errors of happy openclaw exit 2 before anything starts.
func TestOpenclawUsage(t *testing.T) {
	code, _, stderr := runHappy(t, nil, "openclaw", "--start-gateway", "--gateway", "ws://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(stderr, "--start-gateway runs its own gateway") {
		t.Fatalf("exit %d %q", code, stderr)
	}
	env := map[string]string{"PATH": t.TempDir()}
	code, _, stderr = runHappy(t, env, "openclaw", "--start-gateway", "-p", "x")
	if code != exitFailed || !strings.Contains(stderr, "openclaw") {
		t.Fatalf("missing openclaw: exit %d %q", code, stderr)
	}
}

// happy openclaw without -p serves prompts; when its gateway goes away and
// cannot be reached again it says so on stderr and exits 1, like a served
// session whose agent exits.
func TestOpenclawServedGatewayGone(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	var wg sync.WaitGroup
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := conns
		conns++
		mu.Unlock()
		if n > 0 {
			http.Error(w, "gone", http.StatusServiceUnavailable)
			return
		}
		wg.Add(1)
		defer wg.Done()
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_, msg, err := ws.ReadMessage()
		if err != nil {
			return
		}
		var f struct{ ID string }
		_ = json.Unmarshal(msg, &f)
		b, _ := json.Marshal(map[string]any{"type": "res", "id": f.ID, "ok": true, "payload": map[string]any{"type": "hello-ok", "protocol": 4}})
		_ = ws.WriteMessage(websocket.TextMessage, b)
		// The gateway goes away: the connection closes, and every later one
		// is refused.
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		wg.Wait()
	})
	openclawTune = func(o *openclaw.Options) { o.ReconnectAttempts, o.ReconnectDelay = 1, time.Millisecond }
	t.Cleanup(func() { openclawTune = nil })
	env := codexTestEnv(t, nil)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	env["OPENCLAW_GATEWAY_URL"] = url
	code, _, stderr := runHappy(t, env, "openclaw")
	if code != exitFailed || !strings.Contains(stderr, "happy: the OpenClaw gateway went away ("+url+"): ") {
		t.Fatalf("exit %d stderr %q", code, stderr)
	}
}

// happy openclaw's errors about the gateway: a URL that is not ws:// or
// wss:// is a usage error; nothing listening suggests how to start one; a
// gateway that exits at once names its exit status and the gateway log.
func TestOpenclawGatewayErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		code int
		want []string
	}{
		{"http url", nil, []string{"--gateway", "http://127.0.0.1:18789", "-p", "x"}, exitUsage,
			[]string{`happy: --gateway "http://127.0.0.1:18789": a ws:// or wss:// URL is needed`}},
		{"other scheme", nil, []string{"--gateway", "foo://x", "-p", "x"}, exitUsage, []string{"a ws:// or wss:// URL is needed"}},
		{"env url", map[string]string{"OPENCLAW_GATEWAY_URL": "127.0.0.1:18789"}, []string{"-p", "x"}, exitUsage,
			[]string{`happy: $OPENCLAW_GATEWAY_URL "127.0.0.1:18789": a ws:// or wss:// URL is needed`}},
		{"nothing listens", map[string]string{"OPENCLAW_GATEWAY_URL": closedPortURL(t)}, []string{"-p", "x"}, exitFailed,
			[]string{"connection refused", "start it with openclaw gateway, or let happy run one with --start-gateway"}},
		{"gateway exits at once", nil, []string{"--start-gateway", "--openclaw-path", "/bin/false", "-p", "x"}, exitFailed,
			[]string{"the gateway exited (status 1) before listening on 127.0.0.1:", "--gateway-log FILE keeps its output"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := codexTestEnv(t, nil)
			for k, v := range tc.env {
				env[k] = v
			}
			code, _, stderr := runHappy(t, env, append([]string{"openclaw"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
		})
	}
}

// closedPortURL is a ws:// address on 127.0.0.1 where nothing listens.
func closedPortURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return "ws://" + addr
}
