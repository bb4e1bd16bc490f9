package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/codex/internal/codextest"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
)

// TestMain lets the test binary act as a scripted Codex process (see
// codextest.FakeProcess); no goroutine of a client outlives the tests.
//
// The lifecycle test runs in a synctest bubble and waits on conditions
// (an event seen, synctest.Wait), never on time.
func TestMain(m *testing.M) {
	codextest.FakeProcess()
	goleak.VerifyTestMain(m)
}

// TestMCPLostReplyB13 follows regression B13 on the mcp-server protocol: a
// turn ends on task_complete although its tools/call reply never comes;
// later prompts go out as codex-reply calls in order; a reply that arrives
// late does not end the newer turn; abort works with or without a turn.
func TestMCPLostReplyB13(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script, lateReply := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(script)
			f.Expect("initialize")
			f.Send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"codex-mcp-server","version":"0.150.0"}}}`)
			f.Expect("notifications/initialized")
			f.Expect("tools/list")
			f.Send(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"codex"},{"name":"codex-reply"}]}}`)
			m := f.Expect("tools/call")
			if codextest.TextOf(m) != "run the linter" || !strings.Contains(string(m["params"]), `"name":"codex-reply"`) || !strings.Contains(string(m["params"]), `"threadId":"conv-1"`) {
				t.Errorf("first call %s", m["params"])
			}
			for i, msg := range []string{`{"type":"task_started","model_context_window":200000}`, `{"type":"agent_message","message":"Lint passes."}`, `{"type":"token_count","info":null}`, `{"type":"task_complete","last_agent_message":"Lint passes."}`} {
				f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev%d","msg":%s}}`, i+1, msg)
			}
			// No reply to id 3, ever (until much later).
			m = f.Expect("tools/call")
			if codextest.TextOf(m) != "now run the tests" {
				t.Errorf("second call %q", codextest.TextOf(m))
			}
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":4},"id":"ev5","msg":{"type":"task_started"}}}`)
			// The reply to the first call comes at last, during the second turn.
			f.Send(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Lint passes."}]}}`)
			close(lateReply)
			m = f.Expect("notifications/cancelled")
			if !strings.Contains(string(m["params"]), `"requestId":4`) {
				t.Errorf("cancel %s", m["params"])
			}
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":4},"id":"ev6","msg":{"type":"turn_aborted","reason":"interrupted"}}}`)
			m = f.Expect("tools/call")
			if codextest.TextOf(m) != "hello?" {
				t.Errorf("third call %q", codextest.TextOf(m))
			}
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":5},"id":"ev7","msg":{"type":"task_complete"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{ResumeThreadID: "conv-1"})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "run the linter"}); err != nil {
			t.Fatal(err)
		}
		// The first turn ends on task_complete; its reply never came.
		if !col.Until(func(e agent.Event) bool { te, ok := e.(*agent.TurnEnded); return ok && te.TurnID == "tools/call#3" }) {
			t.Fatal("the first turn never ended")
		}
		if err := c.Interrupt(ctx); err != nil {
			t.Fatalf("abort with no turn: %v", err)
		}
		if err := c.Prompt(ctx, codex.Prompt{Text: "now run the tests"}); err != nil {
			t.Fatal(err)
		}
		<-lateReply
		synctest.Wait() // the client has read the late reply
		if err := c.Prompt(ctx, codex.Prompt{Text: "hello?"}); err != nil {
			t.Fatal(err)
		}
		if c.Queued() != 1 {
			t.Errorf("queued %d, want 1 (the late reply must not have ended the second turn)", c.Queued())
		}
		if err := c.Interrupt(ctx); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.Done()
		got := fmt.Sprint(codextest.TurnEnds(col.Events()))
		if want := "[tools/call#3:completed tools/call#4:interrupted tools/call#5:completed]"; got != want {
			t.Errorf("turn ends %s, want %s", got, want)
		}
	})
}

// TestMCPSilentTurnNeverInterrupted: mcp-server cannot be asked about a
// turn, and the client does not interrupt a silent one on its own (the
// session runner's idle watch does): after 20 hours of silence nothing was
// sent; an Interrupt then cancels the call.
func TestMCPSilentTurnNeverInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script, silent := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(script)
			mcpHandshake(f)
			f.Expect("tools/call")
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev1","msg":{"type":"task_started"}}}`)
			time.Sleep(20 * time.Hour)
			synctest.Wait()
			f.Quiet()
			close(silent)
			m := f.Expect("notifications/cancelled")
			if !strings.Contains(string(m["params"]), `"requestId":3`) {
				t.Errorf("cancel %s", m["params"])
			}
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev2","msg":{"type":"turn_aborted","reason":"interrupted"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "hang"}); err != nil {
			t.Fatal(err)
		}
		<-silent
		if err := c.Interrupt(ctx); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.Done()
		if got := fmt.Sprint(codextest.TurnEnds(col.Events())); got != "[tools/call#3:interrupted]" {
			t.Errorf("turn ends %s", got)
		}
	})
}

// TestLiveAgainstCaptures drives the client against a fake Codex process
// replaying each real capture: the client must send exactly what the real
// driver sent (same requests, same answers), and its events must equal the
// replay of the same capture.
func TestLiveAgainstCaptures(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		decision agent.Decision
	}{
		{"codex0150-mcp-server", agent.DecisionOnce},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script, _ := filepath.Abs(filepath.Join("..", "testdata", "captures", tc.name, "rpc-traffic.jsonl"))
			raw, err := os.ReadFile(script)
			if err != nil {
				t.Fatal(err)
			}
			prompt, clientName := codextest.ScriptPrompt(t, raw)
			var rec bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := Start(ctx, codex.Options{
				Binary: exe, Env: []string{codextest.ScriptEnv + "=" + script},
				Cwd: "/home/dev/run/work", ProcessDir: t.TempDir(), Mode: codex.ModeReadOnly,
				Settings: rpcagent.Settings{ClientName: clientName, ClientVersion: "0.0.1", Record: &rec, CallTimeout: 10 * time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Prompt(ctx, codex.Prompt{Text: prompt}); err != nil {
				t.Fatal(err)
			}
			var evs []agent.Event
			for e := range c.Events() {
				evs = append(evs, e)
				if b, ok := e.(*agent.ToolBlocked); ok && b.Permission != nil {
					if err := c.Answer(ctx, b.CallID, tc.decision); err != nil {
						t.Errorf("answer %s: %v", b.CallID, err)
					}
				}
			}
			if err := c.Close(); err != nil {
				t.Logf("close: %v", err)
			}
			codextest.CheckLive(t, func(b []byte) ([]agent.Event, error) { return codex.Replay(bytes.NewReader(b), codex.ProtocolMCP) }, raw, rec.Bytes(), evs)
		})
	}
}

// mcpHandshake plays Codex's side of initialize and tools/list.
func mcpHandshake(f *codextest.Server) {
	f.Expect("initialize")
	f.Send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"codex-mcp-server","version":"0.150.0"}}}`)
	f.Expect("notifications/initialized")
	f.Expect("tools/list")
	f.Send(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"codex"},{"name":"codex-reply"}]}}`)
}

// An elicitation that names its call only through codex_event_id waits
// for a decision on the call its approval event announced; one that names
// no call happy knows waits too, on a call of its own. Neither is answered
// before someone decides, and each decision reaches Codex in its words.
func TestMCPApprovalWithoutCallID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		answers := make(chan string, 2)
		go func() {
			defer close(script)
			mcpHandshake(f)
			f.Expect("tools/call")
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev-1","msg":{"type":"task_started","turn_id":"ev-1"}}}`)
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev-1","msg":{"type":"exec_approval_request","call_id":"call_1","turn_id":"ev-1","command":["/bin/bash","-lc","echo hi > hi.txt"],"cwd":"/w","reason":"write hi.txt"}}}`)
			f.Send(`{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"Allow?","requestedSchema":{"type":"object","properties":{}},"codex_elicitation":"exec-approval","codex_mcp_tool_call_id":"3","codex_event_id":"ev-1","codex_command":["/bin/bash","-lc","echo hi > hi.txt"],"codex_cwd":"/w"}}`)
			m := f.Expect("")
			answers <- string(m["id"]) + " " + string(m["result"])
			f.Send(`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"Allow?","requestedSchema":{"type":"object","properties":{}},"codex_elicitation":"exec-approval","codex_event_id":"ev-unknown","codex_command":["rm","-rf","build"]}}`)
			m = f.Expect("")
			answers <- string(m["id"]) + " " + string(m["result"])
			f.Send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev-1","msg":{"type":"task_complete"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "write hi.txt"}); err != nil {
			t.Fatal(err)
		}
		blocked := func(call string) func(agent.Event) bool {
			return func(e agent.Event) bool {
				b, ok := e.(*agent.ToolBlocked)
				return ok && b.CallID == call && b.Permission != nil
			}
		}
		if !col.Until(blocked("call_1")) {
			t.Fatal("call_1 never blocked")
		}
		synctest.Wait()
		select {
		case a := <-answers:
			t.Fatalf("answered %s before anyone decided", a)
		default:
		}
		if err := c.Answer(ctx, "call_1", agent.DecisionOnce); err != nil {
			t.Fatal(err)
		}
		if got := <-answers; got != `0 {"decision":"approved"}` {
			t.Errorf("answer to the event-id elicitation %s", got)
		}
		if !col.Until(blocked("elicitation-1")) {
			t.Fatal("the uncorrelated approval never blocked")
		}
		synctest.Wait()
		select {
		case a := <-answers:
			t.Fatalf("answered %s before anyone decided", a)
		default:
		}
		if err := c.Answer(ctx, "elicitation-1", agent.DecisionReject); err != nil {
			t.Fatal(err)
		}
		if got := <-answers; got != `1 {"decision":"denied"}` {
			t.Errorf("answer to the uncorrelated elicitation %s", got)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.Done()
		var got []string
		for _, e := range col.Events() {
			if b, ok := e.(*agent.ToolBlocked); ok {
				got = append(got, fmt.Sprintf("%s %s %q", b.CallID, b.Tool, b.Permission.Patterns))
			}
		}
		if want := `[call_1 bash ["echo hi > hi.txt"] elicitation-1 bash ["rm -rf build"]]`; fmt.Sprint(got) != want {
			t.Errorf("blocked %s, want %s", got, want)
		}
	})
}

// TestStartRefusesResume: mcp-server cannot continue a thread of an earlier
// process, so Start refuses a ResumeThreadID before it runs anything (the
// binary here does not exist: an attempt to start it would fail otherwise).
func TestStartRefusesResume(t *testing.T) {
	_, err := Start(context.Background(), codex.Options{Binary: filepath.Join(t.TempDir(), "codex"), ResumeThreadID: "conv-1"})
	if !errors.Is(err, ErrCannotResume) {
		t.Fatalf("Start with a thread to resume: %v, want ErrCannotResume", err)
	}
}

// TestImagesRefused: mcp-server's tools take a text prompt only, so a
// prompt with an image is refused with agent.ErrUnsupportedInput before
// anything is sent (it used to go out without its image, silently).
func TestImagesRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.Expect("initialize")
			f.Send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"codex-mcp-server","version":"0.150.0"}}}`)
			f.Expect("notifications/initialized")
			f.Expect("tools/list")
			f.Send(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"codex"},{"name":"codex-reply"}]}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		<-script
		a := NewAgent(c)
		err = a.Prompt(ctx, agent.Prompt{Text: "what is this?", Files: []agent.PromptFile{{Filename: "shot.png", Mime: "image/png", URL: "data:image/png;base64,AAAA"}}})
		if !errors.Is(err, agent.ErrUnsupportedInput) || !strings.Contains(err.Error(), "codex mcp-server (Codex ≤ 0.153) takes text prompts only") {
			t.Fatalf("Prompt with an image: %v", err)
		}
		synctest.Wait()
		if c.Queued() != 0 {
			t.Fatalf("queued %d", c.Queued())
		}
		_ = c.Close()
	})
}
