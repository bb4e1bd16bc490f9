package codex

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// fakeServer is an in-process scripted Codex over pipes, for lifecycle
// tests that run in a synctest bubble (fake clock: hours of silence take
// no time).
type fakeServer struct {
	t     *testing.T
	w     io.WriteCloser
	lines chan map[string]json.RawMessage
	start time.Time
}

type pipeEnd struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (p *pipeEnd) Close() error {
	for _, c := range p.closers {
		_ = c.Close()
	}
	return nil
}

func newFake(t *testing.T) (*pipeEnd, *fakeServer) {
	s2cR, s2cW := io.Pipe()
	c2sR, c2sW := io.Pipe()
	f := &fakeServer{t: t, w: s2cW, lines: make(chan map[string]json.RawMessage, 100), start: time.Now()}
	go func() {
		r := bufio.NewReader(c2sR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(f.lines)
				return
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Errorf("client wrote %q: %v", line, err)
				continue
			}
			f.lines <- m
		}
	}()
	t.Cleanup(func() { _ = s2cW.Close(); _ = c2sR.Close() })
	return &pipeEnd{Reader: s2cR, Writer: c2sW, closers: []io.Closer{s2cR, c2sW}}, f
}

func (f *fakeServer) send(format string, args ...any) {
	if _, err := fmt.Fprintf(f.w, format+"\n", args...); err != nil {
		f.t.Errorf("fake send: %v", err)
	}
}

// expect returns the client's next message and checks its method ("" for
// a response).
func (f *fakeServer) expect(method string) map[string]json.RawMessage {
	f.t.Helper()
	m, ok := <-f.lines
	if !ok {
		f.t.Fatalf("client closed its end, want %q", method)
	}
	var got string
	_ = json.Unmarshal(m["method"], &got)
	if got != method {
		b, _ := json.Marshal(m)
		f.t.Fatalf("at %s client sent %s, want method %q", f.elapsed(), b, method)
	}
	return m
}

func (f *fakeServer) elapsed() time.Duration { return time.Since(f.start) }

// quiet checks the client sent nothing more.
func (f *fakeServer) quiet() {
	f.t.Helper()
	select {
	case m, ok := <-f.lines:
		if ok {
			b, _ := json.Marshal(m)
			f.t.Errorf("at %s client sent unexpected %s", f.elapsed(), b)
		}
	default:
	}
}

func (f *fakeServer) appServerHandshake() {
	f.expect("initialize")
	f.send(`{"id":1,"result":{"userAgent":"fake","codexHome":"/h","platformFamily":"unix","platformOs":"linux"}}`)
	f.expect("initialized")
	f.expect("thread/start")
	f.send(`{"id":2,"result":{"thread":{"id":"th1","model":"m","modelProvider":"fake","cwd":"/w"}}}`)
}

// collector gathers a client's events.
type collector struct {
	mu   sync.Mutex
	evs  []agent.Event
	done chan struct{}
}

func collect(c *Client) *collector {
	col := &collector{done: make(chan struct{})}
	go func() {
		defer close(col.done)
		for e := range c.Events() {
			col.mu.Lock()
			col.evs = append(col.evs, e)
			col.mu.Unlock()
		}
	}()
	return col
}

func (col *collector) events() []agent.Event {
	col.mu.Lock()
	defer col.mu.Unlock()
	return append([]agent.Event(nil), col.evs...)
}

// turnEnds lists "turnID:reason" of every TurnEnded of the root session.
func turnEnds(evs []agent.Event) []string {
	var out []string
	for _, e := range evs {
		if te, ok := e.(*agent.TurnEnded); ok && te.Session == "" {
			out = append(out, te.TurnID+":"+te.Reason)
		}
	}
	return out
}

func textOf(m map[string]json.RawMessage) string {
	var p struct {
		Params struct {
			Input []struct {
				Text string `json:"text"`
			} `json:"input"`
			Arguments struct {
				Prompt   string `json:"prompt"`
				ThreadID string `json:"threadId"`
			} `json:"arguments"`
		} `json:"params"`
	}
	b, _ := json.Marshal(m)
	_ = json.Unmarshal(b, &p)
	if len(p.Params.Input) > 0 {
		return p.Params.Input[0].Text
	}
	return p.Params.Arguments.Prompt
}

// TestTurnLifecycleB16 follows regression B16: a turn whose turn/completed
// never comes is reconciled with thread/read after the idle window; a
// prompt sent meanwhile waits; a long healthy turn is never cut while
// notifications keep coming or an approval waits; a sub-agent's
// turn/completed does not end the parent's turn.
func TestTurnLifecycleB16(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			m := f.expect("turn/start")
			if textOf(m) != "first" {
				t.Errorf("first turn/start text %q", textOf(m))
			}
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			time.Sleep(time.Second)
			f.send(`{"method":"item/started","params":{"threadId":"th1","turnId":"tu1","item":{"id":"it1","type":"contextCompaction"}}}`)
			time.Sleep(39 * time.Second)
			f.send(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"id":"it1","type":"contextCompaction"}}}`)
			// Silence: turn/completed for tu1 never comes.
			f.expect("thread/read")
			if got := f.elapsed(); got != 160*time.Second {
				t.Errorf("thread/read at %s, want 160s (40s + idle window 120s)", got)
			}
			f.send(`{"id":4,"result":{"thread":{"id":"th1","turns":[{"id":"tu1","status":"completed","items":[{"id":"it1","type":"contextCompaction"}]}]}}}`)
			// Only now does the queued prompt start.
			m = f.expect("turn/start")
			if textOf(m) != "second" || f.elapsed() != 160*time.Second {
				t.Errorf("second turn/start %q at %s", textOf(m), f.elapsed())
			}
			f.send(`{"id":5,"result":{"turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			for i := 0; i < 26; i++ {
				time.Sleep(61 * time.Second)
				f.send(`{"method":"item/agentMessage/delta","params":{"threadId":"th1","turnId":"tu2","itemId":"m2","delta":"."}}`)
				switch i {
				case 5:
					// An approval, then a silence longer than the idle window.
					f.send(`{"method":"item/started","params":{"threadId":"th1","turnId":"tu2","item":{"type":"commandExecution","id":"call_x","command":"make","cwd":"/w","status":"inProgress","commandActions":[]}}}`)
					f.send(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th1","turnId":"tu2","itemId":"call_x","startedAtMs":1,"command":"make","cwd":"/w"}}`)
					m := f.expect("")
					if string(m["id"]) != "0" || string(m["result"]) != `{"decision":"accept"}` {
						t.Errorf("approval answer %s %s", m["id"], m["result"])
					}
					f.send(`{"method":"serverRequest/resolved","params":{"threadId":"th1","requestId":0}}`)
					f.send(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu2","item":{"type":"commandExecution","id":"call_x","command":"make","cwd":"/w","status":"completed","commandActions":[],"aggregatedOutput":"ok\n","exitCode":0,"durationMs":3}}}`)
				case 15:
					f.send(`{"method":"turn/completed","params":{"threadId":"th-sub","turn":{"id":"tu-sub","items":[],"status":"completed"}}}`)
				}
			}
			f.quiet()
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"completed"}}}`)
		}()

		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer, IdleTimeout: 120 * time.Second, InterruptGrace: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		if err := c.Prompt(ctx, Prompt{Text: "first"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Second)
		if err := c.Prompt(ctx, Prompt{Text: "second"}); err != nil {
			t.Fatal(err)
		}
		if c.Queued() != 1 {
			t.Errorf("queued = %d, want 1 while tu1 runs", c.Queued())
		}
		// Answer the approval 400 s after it arrived.
		for {
			synctest.Wait()
			blocked := false
			for _, e := range col.events() {
				if b, ok := e.(*agent.ToolBlocked); ok && b.CallID == "call_x" {
					blocked = true
				}
			}
			if blocked {
				break
			}
			time.Sleep(time.Second)
		}
		time.Sleep(400 * time.Second)
		if err := c.Answer(ctx, "call_x", agent.DecisionOnce); err != nil {
			t.Fatal(err)
		}
		if err := c.Answer(ctx, "call_x", agent.DecisionOnce); err == nil {
			t.Error("second answer accepted")
		}
		<-script
		synctest.Wait()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		<-col.done
		evs := col.events()
		if got, want := fmt.Sprint(turnEnds(evs)), "[tu1:completed tu2:completed]"; got != want {
			t.Errorf("turn ends %s, want %s", got, want)
		}
		var dropped []string
		for _, e := range evs {
			if d, ok := e.(*agent.DroppedInput); ok {
				dropped = append(dropped, d.Dropped.Kind+":"+string(d.Dropped.Reason))
			}
		}
		if fmt.Sprint(dropped) != "[turn/completed:orphan]" {
			t.Errorf("dropped %v", dropped)
		}
		// The reconciled turn and the approval resolved as expected.
		red := mapper.NewReducer(mapper.Config{SessionID: "b16"})
		for _, e := range evs {
			red.Apply(e)
		}
		tr := red.Transcript()
		var tool *mapper.ToolPart
		for _, m := range tr.Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok {
					tool = tp
				}
			}
		}
		if tool == nil || tool.State.Status != mapper.StatusCompleted || tool.State.Output != "ok\n" || tool.State.Block == nil || tool.State.Block.Decision != agent.DecisionOnce {
			t.Errorf("tool part %+v", tool)
		}
	})
}

// TestTurnGivenUp: a turn that stays silent while thread/read keeps
// saying inProgress is interrupted after two idle windows, and given up
// InterruptGrace later when Codex does not end it; the queued prompt then
// starts (never two turns at once).
func TestTurnGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			f.expect("turn/start")
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.expect("thread/read")
			f.send(`{"id":4,"result":{"thread":{"id":"th1","turns":[{"id":"tu1","status":"inProgress","items":[]}]}}}`)
			f.expect("thread/read")
			if f.elapsed() != 120*time.Second {
				t.Errorf("second thread/read at %s, want 120s", f.elapsed())
			}
			f.send(`{"id":5,"result":{"thread":{"id":"th1","turns":[{"id":"tu1","status":"inProgress","items":[]}]}}}`)
			m := f.expect("turn/interrupt")
			if string(m["params"]) != `{"threadId":"th1","turnId":"tu1"}` {
				t.Errorf("interrupt params %s", m["params"])
			}
			f.send(`{"id":6,"result":{}}`)
			// Codex never confirms; happy gives the turn up after the grace.
			m = f.expect("turn/start")
			if textOf(m) != "next" || f.elapsed() != 150*time.Second {
				t.Errorf("next turn/start %q at %s, want at 150s", textOf(m), f.elapsed())
			}
			f.send(`{"id":7,"result":{"turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"completed"}}}`)
		}()
		var rec strings.Builder
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer, IdleTimeout: 60 * time.Second, InterruptGrace: 30 * time.Second, Record: &syncWriter{w: &rec}})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		if err := c.Prompt(ctx, Prompt{Text: "stuck"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Prompt(ctx, Prompt{Text: "next"}); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.done
		evs := col.events()
		if got, want := fmt.Sprint(turnEnds(evs)), "[tu1:interrupted tu2:completed]"; got != want {
			t.Errorf("turn ends %s, want %s", got, want)
		}
		// The give-up is in the traffic log, so a replay ends the turn too.
		replayed, err := Replay(strings.NewReader(rec.String()), ProtocolAppServer)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(turnEnds(replayed)); got != "[tu1:interrupted tu2:completed]" {
			t.Errorf("replayed turn ends %s", got)
		}
		// What the client sent (thread/read, turn/interrupt included) is
		// valid app-server protocol.
		checkSentMessagesValid(t, ProtocolAppServer, []byte(rec.String()))
	})
}

// TestResumeThread: with ResumeThreadID the client resumes instead of
// starting a thread, with a schema-valid request.
func TestResumeThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		go func() {
			f.expect("initialize")
			f.send(`{"id":1,"result":{}}`)
			f.expect("initialized")
			m := f.expect("thread/resume")
			if string(m["params"]) != `{"approvalPolicy":"never","cwd":"/w","excludeTurns":true,"model":"gpt-x","sandbox":"danger-full-access","threadId":"old-thread"}` {
				t.Errorf("resume params %s", m["params"])
			}
			f.send(`{"id":2,"result":{"thread":{"id":"old-thread","model":"gpt-x","modelProvider":"openai","cwd":"/w"}}}`)
		}()
		var rec strings.Builder
		c, err := Connect(context.Background(), rwc, Options{Protocol: ProtocolAppServer, ResumeThreadID: "old-thread", Cwd: "/w", Mode: ModeYolo, Model: "gpt-x", Record: &syncWriter{w: &rec}})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		if c.ThreadID() != "old-thread" || c.Protocol() != ProtocolAppServer {
			t.Errorf("thread %q protocol %s", c.ThreadID(), c.Protocol())
		}
		_ = c.Close()
		<-col.done
		checkSentMessagesValid(t, ProtocolAppServer, []byte(rec.String()))
		var info *agent.SessionInfo
		for _, e := range col.events() {
			if si, ok := e.(*agent.SessionInfo); ok {
				info = si
			}
		}
		if info == nil || info.ProviderSessionID != "old-thread" || info.ModelID != "gpt-x" {
			t.Errorf("session info %+v", info)
		}
	})
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// TestInterruptCancelsApprovals: Interrupt answers a pending approval with
// cancel, then sends turn/interrupt; Codex's interrupted turn/completed
// ends the turn.
func TestInterruptCancelsApprovals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			m := f.expect("turn/start")
			if want := `{"input":[{"text":"edit","type":"text"},{"type":"image","url":"data:image/png;base64,AAAA"},{"path":"/tmp/x.png","type":"localImage"}],"threadId":"th1"}`; string(m["params"]) != want {
				t.Errorf("turn/start params %s, want %s", m["params"], want)
			}
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"item/fileChange/requestApproval","id":7,"params":{"threadId":"th1","turnId":"tu1","itemId":"fc1","startedAtMs":1,"reason":"write"}}`)
			m = f.expect("")
			if string(m["id"]) != "7" || string(m["result"]) != `{"decision":"cancel"}` {
				t.Errorf("cancel answer %s %s", m["id"], m["result"])
			}
			f.expect("turn/interrupt")
			f.send(`{"id":4,"result":{}}`)
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted"}}}`)
		}()
		var rec strings.Builder
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer, Record: &syncWriter{w: &rec}})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		if err := c.Interrupt(ctx); err != nil {
			t.Fatalf("interrupt with no turn: %v", err)
		}
		if err := c.Prompt(ctx, Prompt{Text: "edit", Images: []Image{{URL: "data:image/png;base64,AAAA"}, {Path: "/tmp/x.png"}}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Answer(ctx, "fc1", agent.Decision("maybe")); err == nil {
			t.Error("unknown decision accepted")
		}
		if err := c.Interrupt(ctx); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.done
		evs := col.events()
		var resolved *agent.ToolResolved
		for _, e := range evs {
			if r, ok := e.(*agent.ToolResolved); ok {
				resolved = r
			}
		}
		if resolved == nil || resolved.CallID != "fc1" || resolved.Decision != agent.DecisionReject || resolved.Reason != agent.ReasonCancelled {
			t.Errorf("resolution %+v", resolved)
		}
		if got := fmt.Sprint(turnEnds(evs)); got != "[tu1:interrupted]" {
			t.Errorf("turn ends %s", got)
		}
		if err := c.Prompt(ctx, Prompt{Text: "late"}); err == nil {
			t.Error("prompt after close accepted")
		}
		// Image inputs, the cancel answer and turn/interrupt are valid protocol.
		checkSentMessagesValid(t, ProtocolAppServer, []byte(rec.String()))
	})
}

// TestMCPLostReplyB13 follows regression B13 on the mcp-server protocol: a
// turn ends on task_complete although its tools/call reply never comes;
// later prompts go out as codex-reply calls in order; a reply that arrives
// late does not end the newer turn; abort works with or without a turn.
func TestMCPLostReplyB13(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.expect("initialize")
			f.send(`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"codex-mcp-server","version":"0.150.0"}}}`)
			f.expect("notifications/initialized")
			f.expect("tools/list")
			f.send(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"codex"},{"name":"codex-reply"}]}}`)
			m := f.expect("tools/call")
			if textOf(m) != "run the linter" || !strings.Contains(string(m["params"]), `"name":"codex-reply"`) || !strings.Contains(string(m["params"]), `"threadId":"conv-1"`) {
				t.Errorf("first call %s", m["params"])
			}
			for i, msg := range []string{`{"type":"task_started","model_context_window":200000}`, `{"type":"agent_message","message":"Lint passes."}`, `{"type":"token_count","info":null}`, `{"type":"task_complete","last_agent_message":"Lint passes."}`} {
				f.send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":3},"id":"ev%d","msg":%s}}`, i+1, msg)
			}
			// No reply to id 3, ever (until much later).
			m = f.expect("tools/call")
			if textOf(m) != "now run the tests" || f.elapsed() != 176*time.Second {
				t.Errorf("second call %q at %s", textOf(m), f.elapsed())
			}
			f.send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":4},"id":"ev5","msg":{"type":"task_started"}}}`)
			time.Sleep(10 * time.Second)
			f.send(`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Lint passes."}]}}`)
			m = f.expect("notifications/cancelled")
			if !strings.Contains(string(m["params"]), `"requestId":4`) || f.elapsed() != 262*time.Second {
				t.Errorf("cancel %s at %s", m["params"], f.elapsed())
			}
			f.send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":4},"id":"ev6","msg":{"type":"turn_aborted","reason":"interrupted"}}}`)
			m = f.expect("tools/call")
			if textOf(m) != "hello?" {
				t.Errorf("third call %q", textOf(m))
			}
			f.send(`{"jsonrpc":"2.0","method":"codex/event","params":{"_meta":{"requestId":5},"id":"ev7","msg":{"type":"task_complete"}}}`)
		}()
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolMCP, ResumeThreadID: "conv-1", IdleTimeout: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		if err := c.Prompt(ctx, Prompt{Text: "run the linter"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(176 * time.Second)
		if err := c.Interrupt(ctx); err != nil {
			t.Fatalf("abort with no turn: %v", err)
		}
		if err := c.Prompt(ctx, Prompt{Text: "now run the tests"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(86 * time.Second) // +262 s
		if err := c.Prompt(ctx, Prompt{Text: "hello?"}); err != nil {
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
		<-col.done
		got := fmt.Sprint(turnEnds(col.events()))
		if want := "[tools/call#3:completed tools/call#4:interrupted tools/call#5:completed]"; got != want {
			t.Errorf("turn ends %s, want %s", got, want)
		}
	})
}

// TestFastTurnEndsBeforeResponse: turn/completed may arrive before the
// turn/start response; the late response must not end the queued turn
// that started meanwhile, and prompts stay serialised.
func TestFastTurnEndsBeforeResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		gotStart, queued, checked := make(chan struct{}), make(chan struct{}), make(chan struct{})
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			f.expect("turn/start")
			close(gotStart)
			<-queued
			f.send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`)
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			if m := f.expect("turn/start"); textOf(m) != "b" {
				t.Errorf("second turn %q", textOf(m))
			}
			f.send(`{"id":4,"result":{"turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			<-checked
			f.quiet() // "c" waits for tu2
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"completed"}}}`)
			if m := f.expect("turn/start"); textOf(m) != "c" {
				t.Errorf("third turn %q", textOf(m))
			}
			f.send(`{"id":5,"result":{"turn":{"id":"tu3","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu3","items":[],"status":"completed"}}}`)
		}()
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		first := make(chan error, 1)
		go func() { first <- c.Prompt(ctx, Prompt{Text: "a"}) }()
		<-gotStart
		if err := c.Prompt(ctx, Prompt{Text: "b"}); err != nil || c.Queued() != 1 {
			t.Fatalf("queue b: %v, queued %d", err, c.Queued())
		}
		close(queued)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Prompt(ctx, Prompt{Text: "c"}); err != nil || c.Queued() != 1 {
			t.Fatalf("queue c: %v, queued %d (tu2 must still be running)", err, c.Queued())
		}
		close(checked)
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.done
		if got := fmt.Sprint(turnEnds(col.events())); got != "[tu1:completed tu2:completed tu3:completed]" {
			t.Errorf("turn ends %s", got)
		}
	})
}

// TestInterruptBeforeTurnID: an interrupt that comes while turn/start is
// still unanswered is sent as soon as the turn has an id.
func TestInterruptBeforeTurnID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		gotStart, interrupted := make(chan struct{}), make(chan struct{})
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			f.expect("turn/start")
			close(gotStart)
			<-interrupted
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			m := f.expect("turn/interrupt")
			if string(m["params"]) != `{"threadId":"th1","turnId":"tu1"}` {
				t.Errorf("interrupt %s", m["params"])
			}
			f.send(`{"id":4,"result":{}}`)
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted"}}}`)
		}()
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		first := make(chan error, 1)
		go func() { first <- c.Prompt(ctx, Prompt{Text: "a"}) }()
		<-gotStart
		if err := c.Interrupt(ctx); err != nil {
			t.Fatal(err)
		}
		close(interrupted)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.done
		if got := fmt.Sprint(turnEnds(col.events())); got != "[tu1:interrupted]" {
			t.Errorf("turn ends %s", got)
		}
	})
}

// TestDuplicateApprovalsAllAnswered: Codex asks twice for one item (ids 0
// and 1); Answer answers both, and "always" becomes accept because the
// requests offer neither acceptForSession nor an amendment.
func TestDuplicateApprovalsAllAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			f.expect("turn/start")
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			for _, id := range []int{0, 1} {
				f.send(`{"id":%d,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c1","command":"rm -rf x","availableDecisions":["accept","decline","cancel"]}}`, id)
			}
			var got []string
			for range 2 {
				m := f.expect("")
				got = append(got, string(m["id"])+" "+string(m["result"]))
			}
			if want := `[0 {"decision":"accept"} 1 {"decision":"accept"}]`; fmt.Sprint(got) != want {
				t.Errorf("answers %s, want %s", got, want)
			}
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`)
		}()
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer})
		if err != nil {
			t.Fatal(err)
		}
		col := collect(c)
		if err := c.Prompt(ctx, Prompt{Text: "go"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Answer(ctx, "c1", agent.DecisionAlways); err != nil {
			t.Fatal(err)
		}
		if err := c.Answer(ctx, "c1", agent.DecisionOnce); !errors.Is(err, ErrNoPendingRequest) {
			t.Errorf("second answer: %v, want ErrNoPendingRequest", err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.done
		if got := fmt.Sprint(turnEnds(col.events())); got != "[tu1:completed]" {
			t.Errorf("turn ends %s", got)
		}
	})
}
