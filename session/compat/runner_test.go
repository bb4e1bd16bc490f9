package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// stubAgent is an agent whose events the test emits; it takes every answer.
type stubAgent struct{ events chan agent.Event }

func (a *stubAgent) Events() <-chan agent.Event                               { return a.events }
func (a *stubAgent) Prompt(context.Context, agent.Prompt) error               { return nil }
func (a *stubAgent) Decide(context.Context, string, agent.Verdict) error      { return nil }
func (a *stubAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *stubAgent) Interrupt(context.Context) error                          { return nil }
func (a *stubAgent) Close() error                                             { return nil }

// TestRunnerClaudeSession drives the runner with a Claude-like agent: a
// prompt from the app (not echoed), a Bash call blocked and approved
// through the app's permission RPC, a question answered through its
// communication RPC, a prompt typed at the agent's terminal (echoed). It
// checks the agentState at each step field by field and the legacy
// envelope sequence against its golden file.
func TestRunnerClaudeSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ag := &stubAgent{events: make(chan agent.Event, 64)}
		red := mapper.NewReducer(mapper.Config{SessionID: "relay-compat-2", ProjectID: "prj", Directory: "/w", Agent: "build", ProviderID: "anthropic"})
		store, relay := newMemStore(), &relayState{}
		w := New(Options{Store: store, RootID: red.RootID(), Flavor: "claude", UpdateState: relay.update})
		sink := session.NewSink(store, red)
		sink.SetCompanion(w)
		runner := session.NewRunner(session.Options{Agent: ag, Reducer: red, Sink: sink})
		ctx := context.Background()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if _, err := runner.Run(ctx); err != nil {
				t.Error(err)
			}
		}()
		control := func(c func(chan<- error) session.Control) {
			t.Helper()
			reply := make(chan error, 1)
			if err := runner.Control(ctx, c(reply)); err != nil {
				t.Fatal(err)
			}
			if err := <-reply; err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		emit := func(evs ...agent.Event) {
			for _, e := range evs {
				ag.events <- e
			}
			synctest.Wait()
		}

		// A prompt the app wrote as a legacy record: shown there already.
		w.ExpectEcho("Fix the bug")
		control(func(r chan<- error) session.Control {
			return session.ControlPrompt{Prompt: agent.Prompt{Text: "Fix the bug"}, Key: "relay:m1", Reply: r}
		})
		bashIn := json.RawMessage(`{"command":"go test ./...","description":"Run the tests"}`)
		emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
			&agent.TextFinal{Message: "m1", Block: "0", Text: "I will run the tests."},
			&agent.ToolCall{Message: "m1", CallID: "toolu_1", Tool: "bash", Title: "Run the tests", Input: bashIn,
				Metadata: agent.ToolMetadata("Bash", bashIn, bashIn)},
			&agent.ToolRunning{CallID: "toolu_1"},
			&agent.ToolBlocked{CallID: "toolu_1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"go test ./..."}}})
		st := w.Snapshot()
		req, ok := st.Requests["toolu_1"]
		if !ok || req.Tool != "Bash" || req.ToolUseID != "toolu_1" || req.Arguments["command"] != "go test ./..." || req.CreatedAt != 946684800000 {
			t.Fatalf("blocked: requests %+v", st.Requests)
		}

		// The app's Approve: permission {id, approved}.
		a, err := session.DecodePermission([]byte(`{"id":"toolu_1","approved":true}`))
		if err != nil {
			t.Fatal(err)
		}
		control(func(r chan<- error) session.Control { return session.ControlAnswer{Answer: a, Reply: r} })
		st = w.Snapshot()
		cr := st.CompletedRequests["toolu_1"]
		if len(st.Requests) != 0 || cr.Status != "approved" || cr.Decision != "approved" || cr.Tool != "Bash" || cr.CompletedAt != 946684800000 {
			t.Fatalf("approved: %+v %+v", st.Requests, cr)
		}

		qIn := json.RawMessage(`{"questions":[{"question":"Which colour?","header":"Colour","options":[{"label":"Blue","description":"calm"},{"label":"Red"}]},{"question":"Size?","header":"Size","options":[{"label":"S"}],"multiple":true}]}`)
		emit(&agent.ToolCompleted{CallID: "toolu_1", Output: "ok\tall passed"},
			&agent.ToolCall{Message: "m1", CallID: "toolu_2", Tool: "question", Input: qIn, Metadata: agent.ToolMetadata("AskUserQuestion", qIn, qIn)},
			&agent.ToolRunning{CallID: "toolu_2"},
			&agent.ToolBlocked{CallID: "toolu_2", Question: &agent.QuestionRequest{Questions: []agent.QuestionInfo{
				{Question: "Which colour?", Header: "Colour", Options: []agent.QuestionOption{{Label: "Blue", Description: "calm"}, {Label: "Red"}}},
				{Question: "Size?", Header: "Size", Options: []agent.QuestionOption{{Label: "S"}}, Multiple: ptr(true)},
			}}})
		st = w.Snapshot()
		wantForm := Form{Questions: []FormQuestion{
			{ID: "0", Header: "Colour", Question: "Which colour?", Options: []FormOption{{"Blue", "calm"}, {"Red", ""}}, AllowCustom: true},
			{ID: "1", Header: "Size", Question: "Size?", Options: []FormOption{{"S", ""}}, MultiSelect: true, AllowCustom: true},
		}}
		comm, ok := st.Communications["toolu_2"]
		if !ok || comm.Kind != "form" || comm.ToolUseID != "toolu_2" || !reflect.DeepEqual(comm.Form, wantForm) {
			t.Fatalf("question: %+v", st.Communications)
		}

		// The app's answer: communication, question ids by position.
		c, err := session.DecodeCommunication([]byte(`{"id":"toolu_2","kind":"form","status":"answered","answers":{"0":{"options":["Blue"]},"1":{"options":["S"],"custom":"tiny"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		control(func(r chan<- error) session.Control { return session.ControlCommunication{Communication: c, Reply: r} })
		st = w.Snapshot()
		cc := st.CompletedCommunications["toolu_2"]
		wantAnswers := map[string]FormAnswer{"0": {Options: []string{"Blue"}}, "1": {Options: []string{"S"}, Custom: "tiny"}}
		if len(st.Communications) != 0 || cc.Status != "answered" || !reflect.DeepEqual(cc.Answers, wantAnswers) || cc.Nested.ToolUseID != "toolu_2" {
			t.Fatalf("answered: %+v %+v", st.Communications, cc)
		}

		emit(&agent.ToolCompleted{CallID: "toolu_2", Output: "Blue, S tiny"},
			&agent.StepFinished{Message: "m1", Finish: agent.FinishToolCalls},
			&agent.ReasoningFinal{Message: "m2", Block: "0", Text: "All green."},
			&agent.TextFinal{Message: "m2", Block: "1", Text: "Fixed."},
			&agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
			&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted},
			// Typed at the agent's own terminal: echoed.
			&agent.UserPrompt{PromptID: "local-1", Text: "thanks"},
			&agent.TurnStarted{TurnID: "t2"},
			&agent.TurnEnded{TurnID: "t2", Reason: agent.TurnInterrupted, Error: "interrupted"})
		close(ag.events)
		<-done
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if err := validateAgentState(relay.value); err != nil {
			t.Errorf("relay agentState %s: %v", relay.value, err)
		}
		var buf bytes.Buffer
		recs := store.legacy()
		for _, r := range recs {
			if err := validateRecord(r); err != nil {
				t.Errorf("%s: %v", r, err)
			}
			if bytes.Contains(r, []byte("Fix the bug")) {
				t.Errorf("the app's own prompt echoed: %s", r)
			}
			buf.Write(r)
			buf.WriteByte('\n')
		}
		checkSequence(t, recs)
		golden.Check(t, filepath.Join("testdata", "runner", "legacy.jsonl"), buf.Bytes())
		golden.Check(t, filepath.Join("testdata", "runner", "agentstate.json"), append(relay.value, '\n'))
	})
}

func ptr[T any](v T) *T { return &v }

// gatedRelay holds each agentState write until the test releases it, and
// fails the first one when told to.
type gatedRelay struct {
	relayState
	gate chan struct{}

	gmu      sync.Mutex
	failNext bool
	calls    int
}

func (g *gatedRelay) update(ctx context.Context, fn Updater) error {
	g.gmu.Lock()
	g.calls++
	g.gmu.Unlock()
	<-g.gate
	g.gmu.Lock()
	fail := g.failNext
	g.failNext = false
	g.gmu.Unlock()
	if fail {
		return context.DeadlineExceeded
	}
	return g.relayState.update(ctx, fn)
}

// seen returns the calls so far, the writes that succeeded and the value.
func (g *gatedRelay) seen() (calls, writes int, value json.RawMessage) {
	g.gmu.Lock()
	calls = g.calls
	g.gmu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	return calls, g.writes, g.value
}

func blockedPart(call string, status mapper.ToolStatus) *mapper.MessagePartUpdated {
	tp := &mapper.ToolPart{PartBase: mapper.PartBase{ID: "prt_" + call, SessionID: "ses_root", MessageID: "msg_1"}, CallID: call, Tool: "bash",
		State: mapper.ToolState{Status: status, Input: agent.Object{"command": "ls"}}}
	if status == mapper.StatusBlocked {
		tp.State.Block = &mapper.Block{Type: mapper.BlockPermission, ID: "per_" + call, Permission: "bash", Patterns: []string{"ls"}}
	}
	return &mapper.MessagePartUpdated{Part: tp}
}

// TestStateWritesCoalesceAndRetry: changes made while a write is in flight
// are one next write; a failed write is retried after RetryAfter; Observe
// never waits for the relay.
func TestStateWritesCoalesceAndRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gatedRelay{gate: make(chan struct{})}
		w := New(Options{Store: newMemStore(), RootID: "ses_root", UpdateState: g.update, RetryAfter: time.Second})
		fail := func(format string, args ...any) {
			t.Helper()
			close(g.gate)
			_ = w.Close(context.Background())
			t.Fatalf(format, args...)
		}
		release := func() { g.gate <- struct{}{}; synctest.Wait() }
		w.Observe([]mapper.BusEvent{blockedPart("c1", mapper.StatusBlocked)})
		synctest.Wait() // the first write waits at the gate
		for _, c := range []string{"c2", "c3", "c4"} {
			w.Observe([]mapper.BusEvent{blockedPart(c, mapper.StatusBlocked)}) // does not wait
		}
		release() // c1 written; the three changes since are the next write
		if calls, writes, _ := g.seen(); calls != 2 || writes != 1 {
			fail("calls %d writes %d", calls, writes)
		}
		g.gmu.Lock()
		g.failNext = true
		g.gmu.Unlock()
		release() // that write fails: retried after RetryAfter
		if calls, _, _ := g.seen(); calls != 2 {
			fail("retried at once: calls %d", calls)
		}
		time.Sleep(time.Second) // fake clock: the retry is due
		synctest.Wait()
		release()
		calls, writes, value := g.seen()
		if calls != 3 || writes != 2 {
			fail("calls %d writes %d: not coalesced or not retried", calls, writes)
		}
		var st struct{ Requests map[string]Request }
		if err := json.Unmarshal(value, &st); err != nil || len(st.Requests) != 4 {
			fail("state %s %v", value, err)
		}
		w.Observe([]mapper.BusEvent{blockedPart("c1", mapper.StatusError)})
		synctest.Wait()
		release()
		close(g.gate)
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		var done struct {
			Requests          map[string]Request
			CompletedRequests map[string]CompletedRequest `json:"completedRequests"`
		}
		_, writes, value = g.seen()
		_ = json.Unmarshal(value, &done)
		if len(done.Requests) != 3 || done.CompletedRequests["c1"].Status != "canceled" || writes != 3 {
			t.Fatalf("after settle %s (writes %d)", value, writes)
		}
	})
}
