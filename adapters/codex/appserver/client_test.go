package appserver

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
	"github.com/happy-dev/happy/mapper"
)

// TestMain lets the test binary act as a scripted Codex process (see
// codextest.FakeProcess); no goroutine of a client outlives the tests.
//
// The lifecycle tests run in synctest bubbles and wait on conditions (an
// event seen, synctest.Wait), never on time: the time.Sleep calls left in
// TestTurnLifecycleB16 move the bubble's fake clock to say "Codex (or the
// person) stays silent this long", which is what the idle windows under
// test measure; and what a test asserts did not happen is checked after
// synctest.Wait.
func TestMain(m *testing.M) {
	codextest.FakeProcess()
	goleak.VerifyTestMain(m)
}

// TestTurnLifecycleB16 follows regression B16: a turn whose turn/completed
// never comes is reconciled with thread/read after the idle window; a
// prompt sent meanwhile waits; a long healthy turn is never cut while
// notifications keep coming or an approval waits; a sub-agent's
// turn/completed does not end the parent's turn.
func TestTurnLifecycleB16(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			m := f.Expect("turn/start")
			if codextest.TextOf(m) != "first" {
				t.Errorf("first turn/start text %q", codextest.TextOf(m))
			}
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			time.Sleep(time.Second)
			f.Send(`{"method":"item/started","params":{"threadId":"th1","turnId":"tu1","item":{"id":"it1","type":"contextCompaction"}}}`)
			time.Sleep(39 * time.Second)
			f.Send(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"id":"it1","type":"contextCompaction"}}}`)
			// Silence: turn/completed for tu1 never comes.
			f.Expect("thread/read")
			if got := f.Elapsed(); got != 160*time.Second {
				t.Errorf("thread/read at %s, want 160s (40s + idle window 120s)", got)
			}
			f.Send(`{"id":4,"result":{"thread":{"id":"th1","turns":[{"id":"tu1","status":"completed","items":[{"id":"it1","type":"contextCompaction"}]}]}}}`)
			// Only now does the queued prompt start.
			m = f.Expect("turn/start")
			if codextest.TextOf(m) != "second" || f.Elapsed() != 160*time.Second {
				t.Errorf("second turn/start %q at %s", codextest.TextOf(m), f.Elapsed())
			}
			f.Send(`{"id":5,"result":{"turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			for i := 0; i < 26; i++ {
				time.Sleep(61 * time.Second)
				f.Send(`{"method":"item/agentMessage/delta","params":{"threadId":"th1","turnId":"tu2","itemId":"m2","delta":"."}}`)
				switch i {
				case 5:
					// An approval, then a silence longer than the idle window.
					f.Send(`{"method":"item/started","params":{"threadId":"th1","turnId":"tu2","item":{"type":"commandExecution","id":"call_x","command":"make","cwd":"/w","status":"inProgress","commandActions":[]}}}`)
					f.Send(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th1","turnId":"tu2","itemId":"call_x","startedAtMs":1,"command":"make","cwd":"/w"}}`)
					m := f.Expect("")
					if string(m["id"]) != "0" || string(m["result"]) != `{"decision":"accept"}` {
						t.Errorf("approval answer %s %s", m["id"], m["result"])
					}
					f.Send(`{"method":"serverRequest/resolved","params":{"threadId":"th1","requestId":0}}`)
					f.Send(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu2","item":{"type":"commandExecution","id":"call_x","command":"make","cwd":"/w","status":"completed","commandActions":[],"aggregatedOutput":"ok\n","exitCode":0,"durationMs":3}}}`)
				case 15:
					f.Send(`{"method":"turn/completed","params":{"threadId":"th-sub","turn":{"id":"tu-sub","items":[],"status":"completed"}}}`)
				}
			}
			synctest.Wait() // the client has done all it would do (the main goroutine waits for this one)
			f.Quiet()
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"completed"}}}`)
		}()

		c, err := connect(ctx, rwc, codex.Options{TurnCheck: 120 * time.Second, InterruptGrace: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "first"}); err != nil {
			t.Fatal(err)
		}
		if !col.Until(func(e agent.Event) bool { ts, ok := e.(*agent.TurnStarted); return ok && ts.TurnID == "tu1" }) {
			t.Fatal("tu1 never started")
		}
		if err := c.Prompt(ctx, codex.Prompt{Text: "second"}); err != nil {
			t.Fatal(err)
		}
		if c.Queued() != 1 {
			t.Errorf("queued = %d, want 1 while tu1 runs", c.Queued())
		}
		// Answer the approval 400 s after it arrived.
		if !col.Until(func(e agent.Event) bool { b, ok := e.(*agent.ToolBlocked); return ok && b.CallID == "call_x" }) {
			t.Fatal("the approval never blocked the tool")
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
		<-col.Done()
		evs := col.Events()
		if got, want := fmt.Sprint(codextest.TurnEnds(evs)), "[tu1:completed tu2:completed]"; got != want {
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

// TestSilentTurnNeverInterrupted: the client only checks a silent turn
// (thread/read after each silent window, while Codex says inProgress); it
// never interrupts it, however long the silence: that is the session
// runner's idle watch. When something interrupts it (the runner, a
// person) and Codex does not confirm, the turn is given up InterruptGrace
// later and the queued prompt starts (never two turns at once).
func TestSilentTurnNeverInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script, checked := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			f.Expect("turn/start")
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			// An hour of silence: a thread/read every window, nothing else.
			for i := 1; i <= 60; i++ {
				m := f.Expect("thread/read")
				if f.Elapsed() != time.Duration(i)*time.Minute {
					t.Errorf("thread/read %d at %s, want %dm", i, f.Elapsed(), i)
				}
				if string(m["params"]) != `{"includeTurns":true,"threadId":"th1"}` {
					t.Errorf("thread/read params %s", m["params"])
				}
				f.Send(`{"id":%d,"result":{"thread":{"id":"th1","turns":[{"id":"tu1","status":"inProgress","items":[]}]}}}`, 3+i)
			}
			synctest.Wait()
			f.Quiet()
			close(checked)
			m := f.Expect("turn/interrupt")
			if string(m["params"]) != `{"threadId":"th1","turnId":"tu1"}` {
				t.Errorf("interrupt params %s", m["params"])
			}
			f.Send(`{"id":64,"result":{}}`)
			// Codex never confirms; happy gives the turn up after the grace.
			m = f.Expect("turn/start")
			if codextest.TextOf(m) != "next" || f.Elapsed() != time.Hour+30*time.Second {
				t.Errorf("next turn/start %q at %s, want at 1h0m30s", codextest.TextOf(m), f.Elapsed())
			}
			f.Send(`{"id":65,"result":{"turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"completed"}}}`)
		}()
		var rec strings.Builder
		c, err := connect(ctx, rwc, codex.Options{TurnCheck: time.Minute, InterruptGrace: 30 * time.Second, Settings: rpcagent.Settings{Record: &codextest.SyncWriter{W: &rec}}})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "stuck"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Prompt(ctx, codex.Prompt{Text: "next"}); err != nil {
			t.Fatal(err)
		}
		<-checked
		if err := c.Interrupt(ctx); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.Done()
		evs := col.Events()
		if got, want := fmt.Sprint(codextest.TurnEnds(evs)), "[tu1:interrupted tu2:completed]"; got != want {
			t.Errorf("turn ends %s, want %s", got, want)
		}
		// The give-up is in the traffic log, so a replay ends the turn too.
		replayed, err := codex.Replay(strings.NewReader(rec.String()), codex.ProtocolAppServer)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(codextest.TurnEnds(replayed)); got != "[tu1:interrupted tu2:completed]" {
			t.Errorf("replayed turn ends %s", got)
		}
		// What the client sent (thread/read, turn/interrupt included) is
		// valid app-server protocol.
		codextest.CheckSent(t, []byte(rec.String()))
	})
}

// TestResumeThread: with ResumeThreadID the client resumes instead of
// starting a thread, with a schema-valid request.
func TestResumeThread(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		go func() {
			f.Expect("initialize")
			f.Send(`{"id":1,"result":{}}`)
			f.Expect("initialized")
			m := f.Expect("thread/resume")
			if string(m["params"]) != `{"approvalPolicy":"never","cwd":"/w","excludeTurns":true,"model":"gpt-x","sandbox":"danger-full-access","threadId":"old-thread"}` {
				t.Errorf("resume params %s", m["params"])
			}
			f.Send(`{"id":2,"result":{"thread":{"id":"old-thread","model":"gpt-x","modelProvider":"openai","cwd":"/w"}}}`)
		}()
		var rec strings.Builder
		c, err := connect(context.Background(), rwc, codex.Options{ResumeThreadID: "old-thread", Cwd: "/w", Mode: codex.ModeYolo, Model: "gpt-x", Settings: rpcagent.Settings{Record: &codextest.SyncWriter{W: &rec}}})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if c.ThreadID() != "old-thread" {
			t.Errorf("thread %q", c.ThreadID())
		}
		_ = c.Close()
		<-col.Done()
		codextest.CheckSent(t, []byte(rec.String()))
		var info *agent.SessionInfo
		for _, e := range col.Events() {
			if si, ok := e.(*agent.SessionInfo); ok {
				info = si
			}
		}
		if info == nil || info.ProviderSessionID != "old-thread" || info.ModelID != "gpt-x" {
			t.Errorf("session info %+v", info)
		}
	})
}

// TestInterruptCancelsApprovals: Interrupt answers a pending approval with
// cancel, then sends turn/interrupt; Codex's interrupted turn/completed
// ends the turn.
func TestInterruptCancelsApprovals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			m := f.Expect("turn/start")
			if want := `{"input":[{"text":"edit","type":"text"},{"type":"image","url":"data:image/png;base64,AAAA"},{"path":"/tmp/x.png","type":"localImage"}],"threadId":"th1"}`; string(m["params"]) != want {
				t.Errorf("turn/start params %s, want %s", m["params"], want)
			}
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"item/fileChange/requestApproval","id":7,"params":{"threadId":"th1","turnId":"tu1","itemId":"fc1","startedAtMs":1,"reason":"write"}}`)
			m = f.Expect("")
			if string(m["id"]) != "7" || string(m["result"]) != `{"decision":"cancel"}` {
				t.Errorf("cancel answer %s %s", m["id"], m["result"])
			}
			f.Expect("turn/interrupt")
			f.Send(`{"id":4,"result":{}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted"}}}`)
		}()
		var rec strings.Builder
		c, err := connect(ctx, rwc, codex.Options{Settings: rpcagent.Settings{Record: &codextest.SyncWriter{W: &rec}}})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Interrupt(ctx); err != nil {
			t.Fatalf("interrupt with no turn: %v", err)
		}
		if err := c.Prompt(ctx, codex.Prompt{Text: "edit", Images: []codex.Image{{URL: "data:image/png;base64,AAAA"}, {Path: "/tmp/x.png"}}}); err != nil {
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
		<-col.Done()
		evs := col.Events()
		var resolved *agent.ToolResolved
		for _, e := range evs {
			if r, ok := e.(*agent.ToolResolved); ok {
				resolved = r
			}
		}
		if resolved == nil || resolved.CallID != "fc1" || resolved.Decision != agent.DecisionReject || resolved.Reason != agent.ReasonCancelled {
			t.Errorf("resolution %+v", resolved)
		}
		if got := fmt.Sprint(codextest.TurnEnds(evs)); got != "[tu1:interrupted]" {
			t.Errorf("turn ends %s", got)
		}
		if err := c.Prompt(ctx, codex.Prompt{Text: "late"}); err == nil {
			t.Error("prompt after close accepted")
		}
		// Image inputs, the cancel answer and turn/interrupt are valid protocol.
		codextest.CheckSent(t, []byte(rec.String()))
	})
}

// TestFastTurnEndsBeforeResponse: turn/completed may arrive before the
// turn/start response; the late response must not end the queued turn
// that started meanwhile, and prompts stay serialised.
func TestFastTurnEndsBeforeResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		gotStart, queued, checked := make(chan struct{}), make(chan struct{}), make(chan struct{})
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			f.Expect("turn/start")
			close(gotStart)
			<-queued
			f.Send(`{"method":"turn/started","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`)
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			if m := f.Expect("turn/start"); codextest.TextOf(m) != "b" {
				t.Errorf("second turn %q", codextest.TextOf(m))
			}
			f.Send(`{"id":4,"result":{"turn":{"id":"tu2","items":[],"status":"inProgress"}}}`)
			<-checked
			f.Quiet() // "c" waits for tu2
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu2","items":[],"status":"completed"}}}`)
			if m := f.Expect("turn/start"); codextest.TextOf(m) != "c" {
				t.Errorf("third turn %q", codextest.TextOf(m))
			}
			f.Send(`{"id":5,"result":{"turn":{"id":"tu3","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu3","items":[],"status":"completed"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		first := make(chan error, 1)
		go func() { first <- c.Prompt(ctx, codex.Prompt{Text: "a"}) }()
		<-gotStart
		if err := c.Prompt(ctx, codex.Prompt{Text: "b"}); err != nil || c.Queued() != 1 {
			t.Fatalf("queue b: %v, queued %d", err, c.Queued())
		}
		close(queued)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Prompt(ctx, codex.Prompt{Text: "c"}); err != nil || c.Queued() != 1 {
			t.Fatalf("queue c: %v, queued %d (tu2 must still be running)", err, c.Queued())
		}
		close(checked)
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.Done()
		if got := fmt.Sprint(codextest.TurnEnds(col.Events())); got != "[tu1:completed tu2:completed tu3:completed]" {
			t.Errorf("turn ends %s", got)
		}
	})
}

// TestInterruptBeforeTurnID: an interrupt that comes while turn/start is
// still unanswered is sent as soon as the turn has an id.
func TestInterruptBeforeTurnID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		gotStart, interrupted := make(chan struct{}), make(chan struct{})
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			f.Expect("turn/start")
			close(gotStart)
			<-interrupted
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			m := f.Expect("turn/interrupt")
			if string(m["params"]) != `{"threadId":"th1","turnId":"tu1"}` {
				t.Errorf("interrupt %s", m["params"])
			}
			f.Send(`{"id":4,"result":{}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		first := make(chan error, 1)
		go func() { first <- c.Prompt(ctx, codex.Prompt{Text: "a"}) }()
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
		<-col.Done()
		if got := fmt.Sprint(codextest.TurnEnds(col.Events())); got != "[tu1:interrupted]" {
			t.Errorf("turn ends %s", got)
		}
	})
}

// TestDuplicateApprovalsAllAnswered: Codex asks twice for one item (ids 0
// and 1); Answer answers both, and "always" becomes accept because the
// requests offer neither acceptForSession nor an amendment.
func TestDuplicateApprovalsAllAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			f.Expect("turn/start")
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			for _, id := range []int{0, 1} {
				f.Send(`{"id":%d,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c1","command":"rm -rf x","availableDecisions":["accept","decline","cancel"]}}`, id)
			}
			var got []string
			for range 2 {
				m := f.Expect("")
				got = append(got, string(m["id"])+" "+string(m["result"]))
			}
			if want := `[0 {"decision":"accept"} 1 {"decision":"accept"}]`; fmt.Sprint(got) != want {
				t.Errorf("answers %s, want %s", got, want)
			}
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "go"}); err != nil {
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
		<-col.Done()
		if got := fmt.Sprint(codextest.TurnEnds(col.Events())); got != "[tu1:completed]" {
			t.Errorf("turn ends %s", got)
		}
	})
}

// TestAgent drives the agent.Agent face: image attachments become image
// inputs, a text file a text input, decisions go out in Codex's form (an abort's rejection as
// cancel), stale answers give agent.ErrStale, and the echo of what the
// runner records itself (prompts, its answers) is not published.
func TestAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			m := f.Expect("turn/start")
			if want := `{"input":[{"text":"look","type":"text"},{"type":"image","url":"data:image/png;base64,AAAA"},{"path":"/w/shot.png","type":"localImage"},{"text":"notes.txt:\nhi","type":"text"}],"threadId":"th1"}`; string(m["params"]) != want {
				t.Errorf("turn/start params %s", m["params"])
			}
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"userMessage","id":"u1","content":[{"type":"text","text":"look"}]}}}`)
			f.Send(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th1","turnId":"tu1","itemId":"a","startedAtMs":1,"command":"ls"}}`)
			f.Send(`{"method":"item/commandExecution/requestApproval","id":1,"params":{"threadId":"th1","turnId":"tu1","itemId":"b","startedAtMs":1,"command":"rm x"}}`)
			if m := f.Expect(""); string(m["id"]) != "0" || string(m["result"]) != `{"decision":"accept"}` {
				t.Errorf("answer a: %s %s", m["id"], m["result"])
			}
			if m := f.Expect(""); string(m["id"]) != "1" || string(m["result"]) != `{"decision":"cancel"}` {
				t.Errorf("answer b: %s %s", m["id"], m["result"])
			}
			f.Send(`{"method":"serverRequest/resolved","params":{"threadId":"th1","requestId":1}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		a := NewAgent(c)
		col := codextest.Collect(c.Events())
		err = a.Prompt(ctx, agent.Prompt{Text: "look", Files: []agent.PromptFile{
			{Mime: "image/png", URL: "data:image/png;base64,AAAA"},
			{Mime: "image/png", Filename: "shot.png", URL: "file:///w/shot.png"},
			{Mime: "text/plain", Filename: "notes.txt", URL: "data:text/plain;base64,aGk="},
		}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := a.Decide(ctx, "a", agent.Verdict{Decision: agent.DecisionOnce}); err != nil {
			t.Fatal(err)
		}
		if err := a.Decide(ctx, "b", agent.Verdict{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled}); err != nil {
			t.Fatal(err)
		}
		if err := a.Decide(ctx, "a", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, agent.ErrStale) {
			t.Errorf("second decision: %v, want ErrStale", err)
		}
		if err := a.AnswerQuestion(ctx, "nope", [][]string{{"x"}}); !errors.Is(err, agent.ErrStale) {
			t.Errorf("unknown question: %v, want ErrStale", err)
		}
		<-script
		synctest.Wait()
		_ = a.Close()
		<-col.Done()
		for _, e := range col.Events() {
			switch e := e.(type) {
			case *agent.UserPrompt:
				t.Errorf("prompt echo published: %+v", e)
			case *agent.ToolResolved:
				t.Errorf("answer echo published: %+v", e)
			}
		}
		if got := codextest.TurnEnds(col.Events()); len(got) != 1 || got[0] != "tu1:interrupted" {
			t.Errorf("turn ends %v", got)
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
		{"codex-app", agent.DecisionOnce},
		{"codex-app-decline", agent.DecisionReject},
		{"codex-app-multi-tool", agent.DecisionOnce},
		{"codex-app-tool-error", agent.DecisionOnce},
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
			codextest.CheckLive(t, func(b []byte) ([]agent.Event, error) {
				return codex.Replay(bytes.NewReader(b), codex.ProtocolAppServer)
			}, raw, rec.Bytes(), evs)
			codextest.CheckSent(t, rec.Bytes())
		})
	}
}

// TestLiveCodexCrash: Codex exits in the middle of a turn (after an
// approval was answered): the open turn ends agent-exited, the running tool
// is settled, Events closes without Close, and later calls fail ErrClosed.
func TestLiveCodexCrash(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "captures", "codex-app", "rpc-traffic.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var script bytes.Buffer
	for _, line := range strings.Split(string(raw), "\n") {
		script.WriteString(line + "\n")
		if strings.Contains(line, `"dir":"c2a","msg":{"id":0,"result"`) {
			break // the answer to the approval; then Codex dies
		}
	}
	script.WriteString(`{"t":1795964187720,"dir":"exit","msg":{"code":null,"sig":"SIGSEGV"}}` + "\n")
	path := filepath.Join(t.TempDir(), "crash.jsonl")
	if err := os.WriteFile(path, script.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, codex.Options{Binary: exe, Env: []string{codextest.ScriptEnv + "=" + path},
		Cwd: "/home/dev/run/work", ProcessDir: t.TempDir(), Mode: codex.ModeReadOnly,
		Settings: rpcagent.Settings{ClientName: "happy-e2e", ClientVersion: "0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prompt(ctx, codex.Prompt{Text: "Run `echo hi > hi.txt` in the shell and tell me what happened"}); err != nil {
		t.Fatal(err)
	}
	var evs []agent.Event
	for e := range c.Events() {
		evs = append(evs, e)
		if b, ok := e.(*agent.ToolBlocked); ok {
			if err := c.Answer(ctx, b.CallID, agent.DecisionOnce); err != nil {
				t.Errorf("answer: %v", err)
			}
		}
	}
	if got := fmt.Sprint(codextest.TurnEnds(evs)); !strings.HasSuffix(got, ":agent-exited]") {
		t.Errorf("turn ends %s, want agent-exited", got)
	}
	red := mapper.NewReducer(mapper.Config{SessionID: "crash"})
	for _, e := range evs {
		red.Apply(e)
	}
	var tool *mapper.ToolPart
	for _, m := range red.Transcript().Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == "call_fake_1" {
				tool = tp
			}
		}
	}
	if tool == nil || tool.State.Status != mapper.StatusError {
		t.Errorf("tool after crash = %+v, want settled to error", tool)
	}
	if err := c.Prompt(ctx, codex.Prompt{Text: "again"}); !errors.Is(err, ErrClosed) {
		t.Errorf("prompt after exit: %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after exit: %v", err)
	}
}
