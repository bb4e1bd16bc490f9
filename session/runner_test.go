package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// fakeAgent is a scripted agent: tests push events and read back what the
// runner told it.
type fakeAgent struct {
	events chan agent.Event
	mu     sync.Mutex
	calls  []string
	// onDecide, when set, runs after Decide (in the runner goroutine).
	onDecide func(callID string, d agent.Verdict)
	onPrompt func(p agent.Prompt)
	// onInterrupt, when set, runs after Interrupt (in the runner goroutine).
	onInterrupt func()
	// failDecide makes the next n Decide calls fail (as an agent that lost
	// the request would).
	failDecide int
}

func newFakeAgent() *fakeAgent { return &fakeAgent{events: make(chan agent.Event, 100)} }

func (a *fakeAgent) record(s string) {
	a.mu.Lock()
	a.calls = append(a.calls, s)
	a.mu.Unlock()
}

func (a *fakeAgent) Calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

func (a *fakeAgent) Events() <-chan agent.Event { return a.events }
func (a *fakeAgent) Prompt(_ context.Context, p agent.Prompt) error {
	if a.onPrompt != nil {
		a.onPrompt(p)
	}
	a.record("prompt:" + p.Text) // after onPrompt: a test that saw the call sees its effects
	return nil
}
func (a *fakeAgent) Decide(_ context.Context, id string, d agent.Verdict) error {
	a.record("decide:" + id + ":" + string(d.Decision) + ":" + d.Reason)
	a.mu.Lock()
	fail := a.failDecide > 0
	if fail {
		a.failDecide--
	}
	a.mu.Unlock()
	if fail {
		return errors.New("unknown permission request")
	}
	if a.onDecide != nil {
		a.onDecide(id, d)
	}
	return nil
}
func (a *fakeAgent) AnswerQuestion(_ context.Context, id string, ans [][]string) error {
	b, _ := json.Marshal(ans)
	a.record("answer:" + id + ":" + string(b))
	return nil
}
func (a *fakeAgent) Interrupt(context.Context) error {
	a.record("interrupt")
	if a.onInterrupt != nil {
		a.onInterrupt()
	}
	return nil
}
func (a *fakeAgent) Close() error { return nil }

func (a *fakeAgent) emit(evs ...agent.Event) {
	for _, e := range evs {
		a.events <- e
	}
}

// startTurn is what an agent emits up to a tool blocked on permission.
func startTurn(callID, command string) []agent.Event {
	in, _ := json.Marshal(map[string]string{"command": command})
	return []agent.Event{
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.ToolCall{Message: "m1", CallID: callID, Tool: "bash", Input: in},
		&agent.ToolRunning{CallID: callID},
		&agent.ToolBlocked{CallID: callID, Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{command}, Always: []string{command}}},
	}
}

func finishTurn(callID string) []agent.Event {
	return []agent.Event{
		&agent.ToolCompleted{CallID: callID, Output: "ok", Title: "bash"},
		&agent.StepFinished{Message: "m1", Finish: agent.FinishToolCalls},
		&agent.TextFinal{Message: "m2", Block: "0", Text: "Done."},
		&agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
		&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted},
	}
}

type harness struct {
	t      *testing.T
	agent  *fakeAgent
	red    *mapper.Reducer
	runner *Runner
	store  *memStore
	done   chan struct{}
	res    Result
	err    error
}

func newHarness(t *testing.T, opts Options) *harness {
	h := &harness{t: t, agent: newFakeAgent(), red: mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"}), store: &memStore{last: map[string]int64{}}, done: make(chan struct{})}
	opts.Agent, opts.Reducer = h.agent, h.red
	opts.Sink = NewSink(h.store, h.red)
	h.runner = NewRunner(opts)
	go func() {
		defer close(h.done)
		h.res, h.err = h.runner.Run(context.Background())
	}()
	return h
}

func (h *harness) control(c Control) error {
	h.t.Helper()
	ch := make(chan error, 1)
	switch v := c.(type) {
	case ControlPrompt:
		v.Reply = ch
		c = v
	case ControlAnswer:
		v.Reply = ch
		c = v
	case ControlQuestion:
		v.Reply = ch
		c = v
	case ControlAbort:
		v.Reply = ch
		c = v
	case ControlEnd:
		v.Reply = ch
		c = v
	}
	if err := h.runner.Control(context.Background(), c); err != nil {
		h.t.Fatal(err)
	}
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("no reply from the runner")
		return nil
	}
}

func (h *harness) wait() {
	h.t.Helper()
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		h.t.Fatal("runner did not stop")
	}
}

// waitCall waits until the runner is idle (the test runs in a synctest
// bubble), then asserts that the agent saw the call.
func (h *harness) waitCall(want string) {
	h.t.Helper()
	synctest.Wait()
	for _, c := range h.agent.Calls() {
		if c == want {
			return
		}
	}
	h.t.Fatalf("agent never saw %q; saw %v", want, h.agent.Calls())
}

func toolState(t *testing.T, tr mapper.Transcript, callID string) mapper.ToolState {
	t.Helper()
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == callID {
				return tp.State
			}
		}
	}
	t.Fatalf("no tool %s", callID)
	return mapper.ToolState{}
}

func TestRunnerPermissionApprovedOnceFirstAnswerWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		h.agent.onPrompt = func(agent.Prompt) { go h.agent.emit(startTurn("c1", "rm x")...) }

		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "remove x"}}); err != nil {
			t.Fatal(err)
		}
		// The tool blocks (the runner is idle once it has); the first answer
		// is taken.
		synctest.Wait()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Fatalf("answer: %v", err)
		}
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionReject}}); !errors.Is(err, agent.ErrStale) {
			t.Fatalf("second answer: %v, want ErrStale", err)
		}
		h.agent.emit(finishTurn("c1")...)
		h.wait()
		if h.err != nil || h.res.TurnReason != agent.TurnCompleted || h.res.Rejected != 0 {
			t.Fatalf("result %+v, %v", h.res, h.err)
		}
		st := toolState(t, h.red.Transcript(), "c1")
		if st.Status != mapper.StatusCompleted || st.Block == nil || st.Block.Decision != agent.DecisionOnce || st.Block.DecidedAt == nil {
			t.Fatalf("tool state %+v block %+v", st, st.Block)
		}
		calls := h.agent.Calls()
		if len(calls) != 2 || calls[0] != "prompt:remove x" || calls[1] != "decide:c1:once:" {
			t.Fatalf("agent calls %v", calls)
		}
		if len(h.store.puts) == 0 {
			t.Fatal("nothing reached the relay sink")
		}
	})
}

func TestRunnerRulesAllowAndDeny(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true, Rules: []mapper.PermissionRule{
			{Permission: "bash", Pattern: "ls*", Action: mapper.ActionAllow},
			{Permission: "bash", Pattern: "rm*", Action: mapper.ActionDeny},
		}})
		in := json.RawMessage(`{"command":"ls"}`)
		h.agent.emit(&agent.TurnStarted{TurnID: "t"}, &agent.ToolCall{Message: "m", CallID: "a", Tool: "bash", Input: in}, &agent.ToolRunning{CallID: "a"},
			&agent.ToolBlocked{CallID: "a", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"ls"}}},
			&agent.ToolCall{Message: "m", CallID: "b", Tool: "bash", Input: json.RawMessage(`{"command":"rm -rf x"}`)}, &agent.ToolRunning{CallID: "b"},
			&agent.ToolBlocked{CallID: "b", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm -rf x"}}},
			&agent.ToolCompleted{CallID: "a", Output: "f", Title: "ls"},
			&agent.TurnEnded{Reason: agent.TurnCompleted})
		h.wait()
		tr := h.red.Transcript()
		// Both decisions are on the tool parts, with the rule that made them.
		st := toolState(t, tr, "a")
		if b := st.Block; st.Status != mapper.StatusCompleted || b == nil || b.Decision != agent.DecisionOnce || b.Reason != agent.ReasonRule ||
			b.DecidedAt == nil || b.Rule == nil || *b.Rule != (mapper.PermissionRule{Permission: "bash", Pattern: "ls*", Action: mapper.ActionAllow}) {
			t.Fatalf("allowed tool %+v block %+v", st, st.Block)
		}
		st = toolState(t, tr, "b")
		if b := st.Block; st.Status != mapper.StatusError || st.Error != "rejected: denied by rule bash:rm*" || b == nil || b.Decision != agent.DecisionReject ||
			b.Reason != agent.ReasonRule || b.Rule == nil || *b.Rule != (mapper.PermissionRule{Permission: "bash", Pattern: "rm*", Action: mapper.ActionDeny}) {
			t.Fatalf("denied tool %+v block %+v", st, st.Block)
		}
		if len(tr.Dropped) != 0 {
			t.Fatalf("dropped %+v", tr.Dropped)
		}
		calls := h.agent.Calls()
		if len(calls) != 2 || calls[0] != "decide:a:once:rule" || calls[1] != "decide:b:reject:denied by rule bash:rm*" {
			t.Fatalf("calls %v", calls)
		}
		if h.res.Rejected != 1 {
			t.Fatalf("rejected %d", h.res.Rejected)
		}
	})
}

// A rule's answer is recorded as blocked → resolved (→ running →
// completed, or error), whatever each adapter reports around it: the order
// in which it announces the call, and its own confirmation of the answer
// (an echo of the same decision, which the reducer takes as a no-op). No
// Dropped record is left.
func TestRunnerRuleAnswersLeaveNoDropped(t *testing.T) {
	in := json.RawMessage(`{"command":"echo hi"}`)
	perm := &agent.PermissionRequest{ID: "req-1", Permission: "bash", Patterns: []string{"echo hi"}, Always: []string{"echo *"}}
	call := &agent.ToolCall{Message: "m", CallID: "c", Tool: "bash", Input: in}
	blocked := &agent.ToolBlocked{Message: "m", CallID: "c", Tool: "bash", Input: in, Permission: perm}
	done := &agent.ToolCompleted{CallID: "c", Output: "hi"}
	failed := &agent.ToolFailed{CallID: "c", Error: "The user rejected this tool use."}
	echo := func(d agent.Decision, reason string) agent.Event {
		return &agent.ToolResolved{CallID: "c", Decision: d, Reason: reason}
	}
	cases := []struct {
		name   string
		action mapper.Action
		before []agent.Event // up to the request
		after  []agent.Event // what the agent reports once answered
	}{
		{"claude sdk", mapper.ActionAllow, []agent.Event{call, &agent.ToolRunning{CallID: "c"}, blocked}, []agent.Event{done}},
		{"claude, confirmed in the agent", mapper.ActionAllow, []agent.Event{call, &agent.ToolRunning{CallID: "c"}, blocked},
			[]agent.Event{echo(agent.DecisionOnce, agent.ReasonAnsweredInAgent), done}},
		{"acp, request before the call", mapper.ActionAllow, []agent.Event{blocked},
			[]agent.Event{call, &agent.ToolRunning{CallID: "c"}, done}},
		{"codex, request of a pending call", mapper.ActionAllow, []agent.Event{call, blocked},
			[]agent.Event{&agent.ToolRunning{CallID: "c"}, done}},
		{"a replayed answer", mapper.ActionAllow, []agent.Event{call, blocked}, []agent.Event{echo(agent.DecisionOnce, agent.ReasonRule), done}},
		{"claude sdk, denied", mapper.ActionDeny, []agent.Event{call, &agent.ToolRunning{CallID: "c"}, blocked}, []agent.Event{failed}},
		{"claude, denial confirmed", mapper.ActionDeny, []agent.Event{call, &agent.ToolRunning{CallID: "c"}, blocked},
			[]agent.Event{echo(agent.DecisionReject, agent.ReasonAnsweredInAgent), failed}},
		{"acp, denied before the call", mapper.ActionDeny, []agent.Event{blocked}, []agent.Event{call, failed}},
		{"codex, denial confirmed", mapper.ActionDeny, []agent.Event{call, blocked}, []agent.Event{echo(agent.DecisionReject, "denied by rule bash:echo*"), failed}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rule := mapper.PermissionRule{Permission: "bash", Pattern: "echo*", Action: c.action}
				h := newHarness(t, Options{OneShot: true, Rules: []mapper.PermissionRule{rule}})
				h.agent.onDecide = func(string, agent.Verdict) {
					go h.agent.emit(append(append([]agent.Event(nil), c.after...), &agent.TurnEnded{Reason: agent.TurnCompleted})...)
				}
				h.agent.emit(append([]agent.Event{&agent.TurnStarted{TurnID: "t"}}, c.before...)...)
				h.wait()
				tr := h.red.Transcript()
				if len(tr.Dropped) != 0 || h.red.DroppedTotal() != 0 {
					t.Fatalf("dropped %+v", tr.Dropped)
				}
				st := toolState(t, tr, "c")
				want, status := agent.DecisionOnce, mapper.StatusCompleted
				if c.action == mapper.ActionDeny {
					want, status = agent.DecisionReject, mapper.StatusError
				}
				if b := st.Block; st.Status != status || b == nil || b.ID != "req-1" || b.Decision != want || b.Reason != agent.ReasonRule || b.Rule == nil || *b.Rule != rule {
					t.Fatalf("tool %+v block %+v", st, st.Block)
				}
			})
		})
	}
}

// An answer from the agent that contradicts the rule's is a conflict, kept
// as a Dropped record: the first answer stands.
func TestRunnerConflictingAnswerAfterRuleIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true, Rules: []mapper.PermissionRule{{Permission: "bash", Pattern: "*", Action: mapper.ActionAllow}}})
		h.agent.onDecide = func(id string, _ agent.Verdict) {
			go h.agent.emit(&agent.ToolResolved{CallID: id, Decision: agent.DecisionReject, Reason: agent.ReasonAnsweredInAgent},
				&agent.ToolCompleted{CallID: id, Output: "ok"}, &agent.TurnEnded{Reason: agent.TurnCompleted})
		}
		h.agent.emit(startTurn("c1", "make")...)
		h.wait()
		tr := h.red.Transcript()
		if st := toolState(t, tr, "c1"); st.Status != mapper.StatusCompleted || st.Block.Decision != agent.DecisionOnce || st.Block.Reason != agent.ReasonRule {
			t.Fatalf("tool %+v block %+v", st, st.Block)
		}
		if len(tr.Dropped) != 1 || tr.Dropped[0].Reason != agent.DropIllegalTransition {
			t.Fatalf("dropped %+v", tr.Dropped)
		}
	})
}

func TestRunnerPermissionTimeoutRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true, PermissionTimeout: 30 * time.Millisecond})
		h.agent.onDecide = func(id string, d agent.Verdict) {
			go h.agent.emit(&agent.ToolFailed{CallID: id, Error: "denied"}, &agent.TurnEnded{Reason: agent.TurnCompleted})
		}
		h.agent.emit(startTurn("c9", "make deploy")...)
		h.wait()
		st := toolState(t, h.red.Transcript(), "c9")
		if st.Status != mapper.StatusError || st.Block == nil || st.Block.Decision != agent.DecisionReject || st.Block.Reason != agent.ReasonTimeout {
			t.Fatalf("state %+v block %+v", st, st.Block)
		}
		if calls := h.agent.Calls(); len(calls) != 1 || calls[0] != "decide:c9:reject:timeout" {
			t.Fatalf("calls %v", calls)
		}
	})
}

func TestRunnerAgentExitSettlesOpenTools(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		h.agent.emit(startTurn("c1", "sleep 100")...)
		close(h.agent.events)
		h.wait()
		if !h.res.AgentExited || h.res.TurnReason != "" {
			t.Fatalf("result %+v", h.res)
		}
		st := toolState(t, h.red.Transcript(), "c1")
		if st.Status != mapper.StatusError || st.Block == nil || st.Block.Reason != agent.ReasonAgentExited {
			t.Fatalf("state %+v block %+v", st, st.Block)
		}
		for _, m := range h.red.Transcript().Messages {
			if am, ok := m.Info.(*mapper.AssistantMessage); ok && am.Time.Completed == nil {
				t.Fatalf("assistant message %s left open", am.ID)
			}
		}
	})
}

func TestRunnerAbortRejectsPendingAndInterrupts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		h.agent.emit(startTurn("c1", "rm y")...)
		h.waitBlocked("c1")
		if err := h.control(ControlAbort{}); err != nil {
			t.Fatal(err)
		}
		h.agent.emit(&agent.TurnEnded{Reason: agent.TurnInterrupted})
		h.wait()
		calls := h.agent.Calls()
		if len(calls) != 2 || calls[0] != "decide:c1:reject:cancelled" || calls[1] != "interrupt" {
			t.Fatalf("calls %v", calls)
		}
		if h.res.TurnReason != agent.TurnInterrupted {
			t.Fatalf("result %+v", h.res)
		}
	})
}

// An abort settles waiting tools in the order they blocked, never in map
// order, so a live run and its replay write the same transcript.
func TestRunnerAbortSettlesInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		ids := []string{"c5", "c3", "c1", "c4", "c2", "c6"}
		h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"})
		for _, id := range ids {
			h.agent.emit(
				&agent.ToolCall{Message: "m1", CallID: id, Tool: "bash", Input: json.RawMessage(`{"command":"rm x"}`)},
				&agent.ToolBlocked{CallID: id, Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm x"}}},
			)
		}
		h.waitBlocked("c6")
		if err := h.control(ControlAbort{}); err != nil {
			t.Fatal(err)
		}
		h.agent.emit(&agent.TurnEnded{Reason: agent.TurnInterrupted})
		h.wait()
		var want []string
		for _, id := range ids {
			want = append(want, "decide:"+id+":reject:cancelled")
		}
		want = append(want, "interrupt")
		if got := h.agent.Calls(); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("calls\n got %v\nwant %v", got, want)
		}
	})
}

// waitBlocked waits until the relay sink has written the tool as blocked.
// The test runs in a synctest bubble: the loop moves the fake clock on in
// 10 ms steps, the sink's flush interval at most, for at most 5 fake seconds.
func (h *harness) waitBlocked(callID string) {
	h.t.Helper()
	for range 500 {
		synctest.Wait()
		if h.blockedSeen(callID) {
			return
		}
		time.Sleep(10 * time.Millisecond) // fake time: lets the sink's flush timer fire
	}
	h.t.Fatalf("tool %s never blocked", callID)
}

func (h *harness) blockedSeen(callID string) bool {
	for _, put := range h.store.snapshotPuts() {
		for _, v := range put {
			var env struct {
				Parts []struct {
					CallID string `json:"callID"`
					State  struct {
						Status string `json:"status"`
					} `json:"state"`
				} `json:"parts"`
			}
			_ = json.Unmarshal(v.Plaintext, &env)
			for _, p := range env.Parts {
				if p.CallID == callID && p.State.Status == "blocked" {
					return true
				}
			}
		}
	}
	return false
}

func TestTitleFromPrompt(t *testing.T) {
	cases := map[string]string{
		"Create hi.txt":                   "Create hi.txt",
		"\n\n  Fix the bug  \nin main.go": "Fix the bug",
		"":                                "",
		"Please refactor the storage layer so that it can use PostgreSQL as well as SQLite, and keep tests": "Please refactor the storage layer so that it can use…",
		strings.Repeat("é", 70): strings.Repeat("é", 60) + "…",
	}
	for in, want := range cases {
		if got := TitleFromPrompt(in); got != want {
			t.Errorf("TitleFromPrompt(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRunnerQueuesPromptsWhileATurnRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		turn := 0
		h.agent.onPrompt = func(p agent.Prompt) {
			turn++
			n := turn
			// Buffered: emitting from the runner goroutine cannot block.
			h.agent.emit(&agent.TurnStarted{TurnID: fmt.Sprint(n)}, &agent.TextFinal{Message: fmt.Sprint("m", n), Block: "0", Text: "answer to " + p.Text})
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "one"}}); err != nil {
			t.Fatal(err)
		}
		// Sent while turn 1 has not ended: queued, not handed to the agent.
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "two"}}); err != nil {
			t.Fatal(err)
		}
		h.waitCall("prompt:one")
		synctest.Wait() // everything the runner would do with prompt two is done
		if calls := h.agent.Calls(); len(calls) != 1 {
			t.Fatalf("second prompt reached the agent during turn 1: %v", calls)
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "1", Reason: agent.TurnCompleted})
		h.waitCall("prompt:two")
		h.agent.emit(&agent.TurnEnded{TurnID: "2", Reason: agent.TurnCompleted})
		close(h.agent.events)
		h.wait()
		var order []string
		for _, m := range h.red.Transcript().Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.TextPart); ok {
					order = append(order, tp.Text)
				}
			}
		}
		if got := strings.Join(order, "|"); got != "one|answer to one|two|answer to two" {
			t.Fatalf("transcript order %s", got)
		}
	})
}

// ControlEnd (the prompt line's input ended) ends the run once the session
// is idle: the running turn and a prompt queued behind it still run, and
// nothing is interrupted; when idle, the run ends at once.
func TestRunnerEndWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		turn := 0
		h.agent.onPrompt = func(p agent.Prompt) {
			turn++
			h.agent.emit(&agent.TurnStarted{TurnID: fmt.Sprint(turn)}, &agent.TextFinal{Message: fmt.Sprint("m", turn), Block: "0", Text: "answer to " + p.Text})
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "one"}}); err != nil {
			t.Fatal(err)
		}
		h.waitCall("prompt:one")
		if err := h.control(ControlEnd{}); err != nil {
			t.Fatal(err)
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "two"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-h.done:
			t.Fatal("the run ended during a turn")
		default:
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "1", Reason: agent.TurnCompleted})
		h.waitCall("prompt:two")
		synctest.Wait()
		select {
		case <-h.done:
			t.Fatal("the run ended with a prompt still to answer")
		default:
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "2", Reason: agent.TurnCompleted})
		h.wait()
		if h.err != nil || h.res.TurnReason != agent.TurnCompleted || h.res.AgentExited {
			t.Fatalf("result %+v, %v", h.res, h.err)
		}
		if calls := strings.Join(h.agent.Calls(), " "); calls != "prompt:one prompt:two" {
			t.Fatalf("agent calls %s (nothing may be interrupted)", calls)
		}

		idle := newHarness(t, Options{})
		if err := idle.control(ControlEnd{}); err != nil {
			t.Fatal(err)
		}
		idle.wait()
		if calls := idle.agent.Calls(); len(calls) != 0 || idle.res.TurnReason != "" {
			t.Fatalf("idle run: calls %v, result %+v", calls, idle.res)
		}
	})
}

// An allow rule the agent fails to take falls back to asking (and so to the
// permission timeout): the tool never waits for ever.
func TestRunnerRuleAnswerFailureFallsBackToAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true, PermissionTimeout: 50 * time.Millisecond,
			Rules: []mapper.PermissionRule{{Permission: "bash", Pattern: "*", Action: mapper.ActionAllow}}})
		h.agent.failDecide = 1
		h.agent.onDecide = func(id string, d agent.Verdict) {
			go h.agent.emit(&agent.ToolFailed{CallID: id, Error: "denied"}, &agent.TurnEnded{Reason: agent.TurnCompleted})
		}
		h.agent.emit(startTurn("c1", "make")...)
		h.wait()
		st := toolState(t, h.red.Transcript(), "c1")
		if st.Status != mapper.StatusError || st.Block == nil || st.Block.Reason != agent.ReasonTimeout {
			t.Fatalf("state %+v block %+v", st, st.Block)
		}
		if calls := h.agent.Calls(); len(calls) != 2 || calls[0] != "decide:c1:once:rule" || calls[1] != "decide:c1:reject:timeout" {
			t.Fatalf("calls %v", calls)
		}
	})
}

// TestRunnerStaleAnswerNamesWaitingCalls: an answer for a call id that does
// not wait is refused with the ids that do, oldest first, per kind.
func TestRunnerStaleAnswerNamesWaitingCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		h.agent.onPrompt = func(agent.Prompt) {
			evs := startTurn("c1", "rm x")
			in, _ := json.Marshal(map[string]string{"command": "rm y"})
			evs = append(evs,
				&agent.ToolCall{Message: "m1", CallID: "c2", Tool: "bash", Input: in},
				&agent.ToolBlocked{CallID: "c2", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm y"}}})
			go h.agent.emit(evs...)
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "remove"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cases := []struct {
			name string
			in   Control
			want string
		}{
			{"permission typo", ControlAnswer{Answer: Answer{CallID: "c9", Decision: agent.DecisionOnce}},
				`no tool call "c9" waits for permission; waiting: c1, c2`},
			{"question for a permission", ControlQuestion{Answer: QuestionAnswer{CallID: "c1", Answers: [][]string{{"a"}}}},
				`no tool call "c1" waits for an answer; nothing in this session waits for an answer now`},
		}
		for _, c := range cases {
			err := h.control(c.in)
			var se *StaleError
			if !errors.As(err, &se) || !errors.Is(err, agent.ErrStale) || err.Error() != c.want {
				t.Errorf("%s: %v, want %q (a StaleError)", c.name, err, c.want)
			}
		}
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Fatal(err)
		}
		err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}})
		if want := `no tool call "c1" waits for permission; waiting: c2`; err == nil || err.Error() != want {
			t.Errorf("second answer: %v, want %q", err, want)
		}
		if err := h.control(ControlAbort{}); err != nil {
			t.Fatal(err)
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnInterrupted})
		h.wait()
	})
}

// refusingAgent is a fakeAgent whose Prompt fails, as an agent that has
// gone does.
type refusingAgent struct{ *fakeAgent }

func (a refusingAgent) Prompt(context.Context, agent.Prompt) error {
	return errors.New("write to claude: claude exited")
}

// An agent that exits without starting a turn for its prompt, however the
// prompt met it (still in the control queue, sent, or refused): the prompt
// is the session's user message and title, an assistant message says
// nothing answered, and the result counts it.
func TestRunnerAgentExitsWithoutAnswering(t *testing.T) {
	for _, how := range []string{"queued", "sent", "refused"} {
		t.Run(how, func(t *testing.T) {
			fa := newFakeAgent()
			var ag agent.Agent = fa
			if how == "refused" {
				ag = refusingAgent{fa}
			}
			red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"})
			red.Apply(&agent.SessionInfo{})
			r := NewRunner(Options{Agent: ag, Reducer: red, OneShot: true, Now: func() time.Time { return time.UnixMilli(1000) }})
			reply := make(chan error, 1)
			if err := r.Control(context.Background(), ControlPrompt{Prompt: agent.Prompt{Text: "Fix the parser"}, Reply: reply}); err != nil {
				t.Fatal(err)
			}
			if how == "queued" {
				close(fa.events) // gone before the runner looks at its input
			} else {
				fa.onPrompt = func(agent.Prompt) { close(fa.events) }
				if how == "refused" {
					go func() { <-reply; close(fa.events) }()
				}
			}
			res, err := r.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !res.AgentExited || res.Unanswered != 1 || res.TurnError != NoAnswer || res.TurnReason != "" {
				t.Fatalf("result %+v", res)
			}
			switch how {
			case "queued":
				if e := <-reply; !errors.Is(e, ErrAgentExited) {
					t.Fatalf("reply %v", e)
				}
			case "sent":
				if e := <-reply; e != nil {
					t.Fatalf("reply %v", e)
				}
			}
			tr := red.Transcript()
			if tr.Session.Title != "Fix the parser" || len(tr.Messages) != 2 {
				t.Fatalf("title %q, %d messages", tr.Session.Title, len(tr.Messages))
			}
			if _, ok := tr.Messages[0].Info.(*mapper.UserMessage); !ok || len(tr.Messages[0].Parts) != 1 || tr.Messages[0].Parts[0].(*mapper.TextPart).Text != "Fix the parser" {
				t.Fatalf("first message %+v %+v", tr.Messages[0].Info, tr.Messages[0].Parts)
			}
			am, ok := tr.Messages[1].Info.(*mapper.AssistantMessage)
			if !ok || am.Finish != agent.FinishError || am.Time.Completed == nil || am.Error == nil ||
				am.Error.Data.Message != NoAnswer || am.Error.Data.Kind != agent.ErrorInternal {
				t.Fatalf("answer %+v", tr.Messages[1].Info)
			}
		})
	}
}

// gateStore is a RecordStore that notes when each version was written and,
// while gated, holds every Enqueue until released.
type gateStore struct {
	mu     sync.Mutex
	last   map[string]int64
	writes []gateWrite
	gate   chan struct{} // nil: not gated
}

type gateWrite struct {
	at   time.Time
	body string
}

func (g *gateStore) Enqueue(_ context.Context, rec string, build func(int64) ([]byte, error)) (int64, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.last[rec] + 1
	body, err := build(v)
	if err != nil {
		return 0, err
	}
	g.last[rec] = v
	g.writes = append(g.writes, gateWrite{at: time.Now(), body: string(body)})
	return v, nil
}

// TestRunnerFlushesAtOnceAfterABusyFlush: a state change that arrived while
// the runner was writing (so it is taken without waiting) is written as
// soon as nothing else waits, not a timer tick later (the fake clock of the
// synctest bubble does not move).
func TestRunnerFlushesAtOnceAfterABusyFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ag := newFakeAgent()
		red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"})
		store := &gateStore{last: map[string]int64{}}
		r := NewRunner(Options{Agent: ag, Reducer: red, Sink: NewSink(store, red)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _, _ = r.Run(ctx) }()
		defer func() { cancel(); <-done }()
		in, _ := json.Marshal(map[string]string{"command": "ls"})
		ag.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
			&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: in}, &agent.ToolRunning{CallID: "c1"})
		synctest.Wait()

		gate := make(chan struct{})
		store.mu.Lock()
		store.gate = gate
		store.mu.Unlock()
		ag.emit(&agent.ToolCompleted{CallID: "c1", Output: "ok", Title: "ls"})
		synctest.Wait() // the runner is writing the completion, held by the gate
		ag.emit(&agent.ToolCall{Message: "m1", CallID: "c2", Tool: "bash", Input: in}, &agent.ToolRunning{CallID: "c2"})
		store.mu.Lock()
		store.gate = nil
		store.mu.Unlock()
		released := time.Now()
		close(gate)
		synctest.Wait()

		store.mu.Lock()
		w := store.writes[len(store.writes)-1]
		store.mu.Unlock()
		if !strings.Contains(w.body, `"callID":"c2"`) || !strings.Contains(w.body, `"status":"running"`) {
			t.Fatalf("last version written does not show c2 running: %s", w.body)
		}
		if d := w.at.Sub(released); d != 0 {
			t.Fatalf("c2 running written %v after the busy flush ended, want at once", d)
		}
	})
}

// A session stopped (its run cancelled, as happy stop does) after a prompt
// was sent but before the agent started the turn says it was stopped: the
// turn ends interrupted and its step finishes aborted, so the prompt does
// not stand alone.
func TestRunnerStoppedBeforeTheTurnStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fa := newFakeAgent()
		red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"})
		r := NewRunner(Options{Agent: fa, Reducer: red, Sink: NewSink(&memStore{last: map[string]int64{}}, red)})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		var res Result
		go func() {
			defer close(done)
			res, _ = r.Run(ctx)
		}()
		reply := make(chan error, 1)
		if err := r.Control(context.Background(), ControlPrompt{Prompt: agent.Prompt{Text: "a long job"}, Reply: reply}); err != nil {
			t.Fatal(err)
		}
		if err := <-reply; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		cancel()
		<-done
		tr := red.Transcript()
		if len(tr.Messages) != 2 {
			t.Fatalf("%d messages, result %+v", len(tr.Messages), res)
		}
		if a := tr.Messages[1].Info.(*mapper.AssistantMessage); a.Finish != agent.FinishAborted {
			t.Fatalf("the stopped turn's step: %+v", a)
		}
	})
}
