package session

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// twoChildrenSameCall starts two subagents whose tools, each waiting for
// permission, carry the same call id c1.
func twoChildrenSameCall(h *harness) {
	task, _ := json.Marshal(map[string]string{"description": "two helpers", "prompt": "go"})
	h.agent.onPrompt = func(agent.Prompt) {
		go func() {
			h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
				&agent.ToolCall{Message: "m1", CallID: "task1", Tool: "task", Input: task}, &agent.ToolRunning{CallID: "task1"},
				&agent.SubagentStarted{CallID: "task1", Child: "sub1", Title: "one"},
				&agent.ToolCall{Message: "m1", CallID: "task2", Tool: "task", Input: task}, &agent.ToolRunning{CallID: "task2"},
				&agent.SubagentStarted{CallID: "task2", Child: "sub2", Title: "two"})
			h.agent.emit(childTool("sub1", "c1", "ls")...)
			h.agent.emit(childTool("sub2", "c1", "rm -rf /")...)
		}()
	}
}

// TestRunnerSubagentSameCallIDEndOfOtherChild: two subagents block the
// same call id; the second one's turn ends. The first subagent's
// permission still waits for a person: a person's answer reaches it, and
// the other subagent's end never settles it.
func TestRunnerSubagentSameCallIDEndOfOtherChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		twoChildrenSameCall(h)
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "use two helpers"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b := agent.EventBase{Session: "sub2"}
		h.agent.emit(&agent.TurnEnded{EventBase: b, TurnID: "sub2-t", Reason: agent.TurnInterrupted}, &agent.SubagentEnded{Child: "sub2"})
		synctest.Wait()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Errorf("approve sub1's c1 after sub2 ended: %v", err)
		}
		h.agent.emit(childDone("sub1", "c1")...)
		h.agent.emit(&agent.ToolCompleted{CallID: "task1", Output: "one"}, &agent.ToolCompleted{CallID: "task2", Output: "two"},
			&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
		tr := h.red.Transcript()
		if st := childToolStateIn(t, tr, "one", "c1"); st.Status != mapper.StatusCompleted || st.Block == nil || st.Block.Decision != agent.DecisionOnce {
			t.Errorf("sub1 c1: %s block %+v", st.Status, st.Block)
		}
	})
}

// TestRunnerSubagentSameCallIDResolvedInOther: two subagents block the
// same call id; the second one's is answered inside the agent. The
// first's still waits for a person.
func TestRunnerSubagentSameCallIDResolvedInOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		twoChildrenSameCall(h)
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "use two helpers"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		h.agent.emit(&agent.ToolResolved{EventBase: agent.EventBase{Session: "sub2"}, CallID: "c1", Decision: agent.DecisionReject, Reason: agent.ReasonAnsweredInAgent})
		synctest.Wait()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Errorf("approve sub1's c1 after sub2's was answered in the agent: %v", err)
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
		tr := h.red.Transcript()
		if st := childToolStateIn(t, tr, "one", "c1"); st.Block == nil || st.Block.Decision != agent.DecisionOnce {
			t.Errorf("sub1 c1: %s block %+v", st.Status, st.Block)
		}
		if st := childToolStateIn(t, tr, "two", "c1"); st.Block == nil || st.Block.Decision != agent.DecisionReject {
			t.Errorf("sub2 c1: %s block %+v", st.Status, st.Block)
		}
	})
}

// childToolStateIn is the state of call callID in the child session
// titled title.
func childToolStateIn(t *testing.T, tr mapper.Transcript, title, callID string) mapper.ToolState {
	t.Helper()
	for _, c := range tr.Children {
		if c.Session.Title != title {
			continue
		}
		for _, m := range c.Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == callID {
					return tp.State
				}
			}
		}
	}
	t.Fatalf("no tool %s in child %s", callID, title)
	return mapper.ToolState{}
}

// TestRunnerSubagentSameCallIDAmbiguousAnswer: while the same call id
// waits in two subagents, an answer naming only the call is refused (the
// agent would take it for both), and nothing is decided on the agent side.
func TestRunnerSubagentSameCallIDAmbiguousAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		twoChildrenSameCall(h)
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "use two helpers"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}})
		if !errors.Is(err, ErrBadControl) || !strings.Contains(err.Error(), "waits in 2 sessions") {
			t.Errorf("ambiguous answer: %v", err)
		}
		for _, c := range h.agent.Calls() {
			if strings.HasPrefix(c, "decide:") {
				t.Errorf("agent asked to decide: %s", c)
			}
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
		tr := h.red.Transcript()
		for _, title := range []string{"one", "two"} {
			if st := childToolStateIn(t, tr, title, "c1"); st.Block == nil || st.Block.Decision != agent.DecisionReject || st.Block.Reason != agent.ReasonCancelled {
				t.Errorf("%s c1: %s block %+v", title, st.Status, st.Block)
			}
		}
	})
}

// TestRunnerSubagentEndedNamingRoot: a SubagentEnded that names no child
// (the root's key "") is refused by the reducer, and never
// settles the root's own waiting permission: the person's answer still
// reaches the agent.
func TestRunnerSubagentEndedNamingRoot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		in, _ := json.Marshal(map[string]string{"command": "ls"})
		h.agent.onPrompt = func(agent.Prompt) {
			go h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
				&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: in}, &agent.ToolRunning{CallID: "c1"},
				&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"ls"}}},
				&agent.SubagentEnded{Child: ""})
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "go"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Errorf("approve the root's c1 after a SubagentEnded naming the root: %v", err)
		}
		h.agent.emit(&agent.ToolCompleted{CallID: "c1", Output: "ok"}, &agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
		tr := h.red.Transcript()
		if st := toolState(t, tr, "c1"); st.Status != mapper.StatusCompleted || st.Block == nil || st.Block.Decision != agent.DecisionOnce {
			t.Errorf("c1: %s block %+v", st.Status, st.Block)
		}
		if len(tr.Dropped) != 1 || tr.Dropped[0].Kind != "SubagentEnded" || tr.Dropped[0].Reason != agent.DropMissingID {
			t.Errorf("dropped %+v", tr.Dropped)
		}
	})
}

// TestRunnerSubagentAnswerReplayed: a person's answer to a subagent's
// call is used once: the same answer again is refused as stale (naming
// what still waits), and the agent is asked to decide once.
func TestRunnerSubagentAnswerReplayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		h.agent.onPrompt = func(agent.Prompt) {
			go func() {
				h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.SubagentStarted{Child: "sub1", Title: "one"})
				h.agent.emit(childTool("sub1", "c1", "ls")...)
				h.agent.emit(childTool("sub1", "c2", "pwd")...)
			}()
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "go"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Errorf("first answer: %v", err)
		}
		err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}})
		var stale *StaleError
		if !errors.As(err, &stale) || !errors.Is(err, agent.ErrStale) || strings.Join(stale.Waiting, ",") != "c2" {
			t.Errorf("replayed answer: %v", err)
		}
		var decides []string
		for _, c := range h.agent.Calls() {
			if strings.HasPrefix(c, "decide:") {
				decides = append(decides, c)
			}
		}
		if strings.Join(decides, " ") != "decide:c1:once:" {
			t.Errorf("agent decisions %q", decides)
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
	})
}

// TestRunnerSubagentEndsWhileRootToolWaits: a subagent's turn (and the
// subagent) end while a tool of the root waits for permission: the root's
// turn goes on, its tool still waits, and the person's answer reaches it.
func TestRunnerSubagentEndsWhileRootToolWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		in, _ := json.Marshal(map[string]string{"command": "make"})
		b := agent.EventBase{Session: "sub1"}
		h.agent.onPrompt = func(agent.Prompt) {
			go h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
				&agent.SubagentStarted{Child: "sub1", Title: "one"}, &agent.TurnStarted{EventBase: b, TurnID: "s1"},
				&agent.ToolCall{Message: "m1", CallID: "c0", Tool: "bash", Input: in}, &agent.ToolRunning{CallID: "c0"},
				&agent.ToolBlocked{CallID: "c0", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"make"}}},
				&agent.TurnEnded{EventBase: b, TurnID: "s1", Reason: agent.TurnCompleted}, &agent.SubagentEnded{Child: "sub1"})
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "go"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case <-h.done:
			t.Fatalf("the run ended at the subagent's end: %+v", h.res)
		default:
		}
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c0", Decision: agent.DecisionOnce}}); err != nil {
			t.Errorf("approve the root's c0 after the subagent ended: %v", err)
		}
		h.agent.emit(&agent.ToolCompleted{CallID: "c0", Output: "ok"}, &agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
		if st := toolState(t, h.red.Transcript(), "c0"); st.Status != mapper.StatusCompleted || st.Block == nil || st.Block.Decision != agent.DecisionOnce {
			t.Errorf("c0: %s block %+v", st.Status, st.Block)
		}
	})
}

// TestRunnerRootTurnEndTellsSubagentWaits: the root's turn ends while a
// subagent's tool waits for permission (a background subagent outlives
// the turn that started it). The runner settles the tool cancelled, and
// tells the agent so, which still waits for that answer; the root's own
// waiting tool, which its turn's end settled in the agent, is not
// answered again.
func TestRunnerRootTurnEndTellsSubagentWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		in, _ := json.Marshal(map[string]string{"command": "make"})
		h.agent.onPrompt = func(agent.Prompt) {
			go func() {
				h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
					&agent.SubagentStarted{Child: "sub1", Title: "one"},
					&agent.ToolCall{Message: "m1", CallID: "c0", Tool: "bash", Input: in}, &agent.ToolRunning{CallID: "c0"},
					&agent.ToolBlocked{CallID: "c0", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"make"}}})
				h.agent.emit(childTool("sub1", "c1", "ls")...)
				h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
			}()
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "go"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var decides []string
		for _, c := range h.agent.Calls() {
			if strings.HasPrefix(c, "decide:") {
				decides = append(decides, c)
			}
		}
		if got := strings.Join(decides, " "); got != "decide:c1:reject:cancelled" {
			t.Errorf("agent decisions %q, want the subagent's c1 rejected (cancelled) only", got)
		}
		if err := h.control(ControlEnd{}); err != nil {
			t.Fatal(err)
		}
		h.wait()
		if st := childToolStateIn(t, h.red.Transcript(), "one", "c1"); st.Block == nil || st.Block.Decision != agent.DecisionReject || st.Block.Reason != agent.ReasonCancelled {
			t.Errorf("c1: %s block %+v", st.Status, st.Block)
		}
	})
}
