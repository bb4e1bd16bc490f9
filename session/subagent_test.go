package session

import (
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// childTool is what a subagent emits up to its tool blocked on permission.
func childTool(child, callID, command string) []agent.Event {
	in, _ := json.Marshal(map[string]string{"command": command})
	b := agent.EventBase{Session: child}
	return []agent.Event{
		&agent.TurnStarted{EventBase: b, TurnID: child + "-t"},
		&agent.MessageStarted{EventBase: b, Message: child + "-m"},
		&agent.ToolCall{EventBase: b, Message: child + "-m", CallID: callID, Tool: "bash", Input: in},
		&agent.ToolRunning{EventBase: b, CallID: callID},
		&agent.ToolBlocked{EventBase: b, CallID: callID, Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{command}}},
	}
}

func childDone(child, callID string) []agent.Event {
	b := agent.EventBase{Session: child}
	return []agent.Event{
		&agent.ToolCompleted{EventBase: b, CallID: callID, Output: "ok", Title: "bash"},
		&agent.TextFinal{EventBase: b, Message: child + "-m2", Block: "0", Text: child + " done"},
		&agent.StepFinished{EventBase: b, Message: child + "-m2", Finish: agent.FinishStop},
		&agent.TurnEnded{EventBase: b, TurnID: child + "-t", Reason: agent.TurnCompleted},
		&agent.SubagentEnded{Child: child},
	}
}

func childToolState(t *testing.T, tr mapper.Transcript, callID string) mapper.ToolState {
	t.Helper()
	for _, c := range tr.Children {
		for _, m := range c.Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == callID {
					return tp.State
				}
			}
		}
	}
	t.Fatalf("no child tool %s", callID)
	return mapper.ToolState{}
}

// TestRunnerSubagentTurnsAreTheirs: a one-shot session whose turn starts
// two subagents in parallel, each with a tool waiting for permission. The
// first subagent's turn end neither ends the session's turn (the run goes
// on, exit is decided by the root's turn) nor settles the other subagent's
// waiting permission; an approval of a subagent's tool is recorded in its
// child session as approved, with no Dropped record.
func TestRunnerSubagentTurnsAreTheirs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		task, _ := json.Marshal(map[string]string{"description": "two helpers", "prompt": "go"})
		h.agent.onPrompt = func(agent.Prompt) {
			go func() {
				h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
					&agent.ToolCall{Message: "m1", CallID: "task1", Tool: "task", Input: task}, &agent.ToolRunning{CallID: "task1"},
					&agent.SubagentStarted{CallID: "task1", Child: "sub1", Title: "one"},
					&agent.ToolCall{Message: "m1", CallID: "task2", Tool: "task", Input: task}, &agent.ToolRunning{CallID: "task2"},
					&agent.SubagentStarted{CallID: "task2", Child: "sub2", Title: "two"})
				h.agent.emit(childTool("sub1", "c1", "ls")...)
				h.agent.emit(childTool("sub2", "c2", "pwd")...)
			}()
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "use two helpers"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Fatalf("approve sub1's tool: %v", err)
		}
		h.agent.emit(childDone("sub1", "c1")...)
		synctest.Wait()
		select {
		case <-h.done:
			t.Fatalf("the run ended at a subagent's turn end: %+v", h.res)
		default:
		}
		// The second subagent's permission still waits.
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c2", Decision: agent.DecisionOnce}}); err != nil {
			t.Fatalf("approve sub2's tool after sub1 ended: %v", err)
		}
		h.agent.emit(childDone("sub2", "c2")...)
		h.agent.emit(&agent.ToolCompleted{CallID: "task1", Output: "one done"}, &agent.ToolCompleted{CallID: "task2", Output: "two done"},
			&agent.StepFinished{Message: "m1", Finish: agent.FinishToolCalls},
			&agent.TextFinal{Message: "m2", Block: "0", Text: "Both helpers are done."},
			&agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
			&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		h.wait()
		if h.err != nil || h.res.TurnReason != agent.TurnCompleted || h.res.Rejected != 0 {
			t.Fatalf("result %+v, %v", h.res, h.err)
		}
		tr := h.red.Transcript()
		for _, id := range []string{"c1", "c2"} {
			st := childToolState(t, tr, id)
			if st.Status != mapper.StatusCompleted || st.Block == nil || st.Block.Decision != agent.DecisionOnce {
				t.Errorf("%s: %s block %+v", id, st.Status, st.Block)
			}
		}
		for _, id := range []string{"task1", "task2"} {
			if st := toolState(t, tr, id); st.Status != mapper.StatusCompleted {
				t.Errorf("%s: %s", id, st.Status)
			}
		}
		var dropped []agent.Dropped
		dropped = append(dropped, tr.Dropped...)
		for _, c := range tr.Children {
			dropped = append(dropped, c.Dropped...)
		}
		if len(dropped) != 0 {
			t.Fatalf("dropped %+v", dropped)
		}
	})
}

// TestRunnerSubagentAbort: a subagent's waiting permission is settled in
// its child session by an abort, never reported as an orphan of the root.
func TestRunnerSubagentAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{OneShot: true})
		task, _ := json.Marshal(map[string]string{"description": "helper", "prompt": "go"})
		h.agent.onPrompt = func(agent.Prompt) {
			go func() {
				h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
					&agent.ToolCall{Message: "m1", CallID: "task1", Tool: "task", Input: task}, &agent.ToolRunning{CallID: "task1"},
					&agent.SubagentStarted{CallID: "task1", Child: "sub1", Title: "one"})
				h.agent.emit(childTool("sub1", "c1", "rm -rf /")...)
			}()
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "go"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := h.control(ControlAbort{}); err != nil {
			t.Fatal(err)
		}
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); !errors.Is(err, agent.ErrStale) {
			t.Fatalf("answer after abort: %v", err)
		}
		h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnInterrupted})
		h.wait()
		tr := h.red.Transcript()
		st := childToolState(t, tr, "c1")
		if st.Status != mapper.StatusError || st.Block == nil || st.Block.Decision != agent.DecisionReject || st.Block.Reason != agent.ReasonCancelled {
			t.Fatalf("c1: %s block %+v", st.Status, st.Block)
		}
		for _, c := range tr.Children {
			if len(c.Dropped) != 0 {
				t.Fatalf("child dropped %+v", c.Dropped)
			}
		}
		if len(tr.Dropped) != 0 {
			t.Fatalf("dropped %+v", tr.Dropped)
		}
	})
}
