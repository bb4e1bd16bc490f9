package session

import (
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// hangingTurn is what a hanging agent says before it goes silent mid-turn:
// the turn starts and some text streams, then nothing.
func hangingTurn() []agent.Event {
	return []agent.Event{
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "Let me look"},
	}
}

// interrupted counts the agent's interrupts so far.
func interrupted(a *fakeAgent) int {
	n := 0
	for _, c := range a.Calls() {
		if c == "interrupt" {
			n++
		}
	}
	return n
}

// idleHarness starts a served session with the idle watch at timeout whose
// agent ends the turn as interrupted when asked to.
func idleHarness(t *testing.T, timeout time.Duration) *harness {
	h := newHarness(t, Options{IdleTimeout: timeout})
	h.agent.onInterrupt = func() {
		go h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnInterrupted})
	}
	return h
}

// lastAssistant is the last assistant message of the transcript.
func lastAssistant(t *testing.T, tr mapper.Transcript) *mapper.AssistantMessage {
	t.Helper()
	for i := len(tr.Messages) - 1; i >= 0; i-- {
		if a, ok := tr.Messages[i].Info.(*mapper.AssistantMessage); ok {
			return a
		}
	}
	t.Fatal("no assistant message")
	return nil
}

// A turn whose agent goes silent is interrupted exactly IdleTimeout after
// its last event (an event in between restarts the clock), and its
// assistant message says why; the session goes on.
func TestRunnerIdleInterruptsSilentTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := idleHarness(t, 10*time.Minute)
		h.agent.onPrompt = func(agent.Prompt) { go h.agent.emit(hangingTurn()...) }
		start := time.Now()
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "look"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute)
		h.agent.emit(&agent.TextDelta{Message: "m1", Block: "0", Delta: " around"}) // restarts the clock: due at 15m
		time.Sleep(10*time.Minute - time.Second)
		synctest.Wait()
		if n := interrupted(h.agent); n != 0 {
			t.Fatalf("interrupted %d time(s) at %s, before the agent was silent for 10m", n, time.Since(start))
		}
		st := h.runner.Status()
		if want := start.Add(15 * time.Minute); !st.IdleDeadline.Equal(want) || !st.LastAgentEvent.Equal(start.Add(5*time.Minute)) || !st.TurnSince.Equal(start) {
			t.Fatalf("status %+v, want deadline %s", st, want)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := interrupted(h.agent); n != 1 {
			t.Fatalf("interrupted %d time(s) at %s, want once at 15m", n, time.Since(start))
		}
		a := lastAssistant(t, h.red.Transcript())
		if a.Error == nil || a.Error.Data.Message != "the agent sent nothing for 10m0s: interrupted" || a.Error.Data.Kind != agent.ErrorInternal || a.Finish != agent.FinishAborted {
			t.Fatalf("assistant message %+v error %+v", a, a.Error)
		}
		if err := h.control(ControlEnd{}); err != nil {
			t.Fatal(err)
		}
		h.wait()
		if h.res.IdleInterrupts != 1 || h.res.TurnReason != agent.TurnInterrupted {
			t.Fatalf("result %+v", h.res)
		}
	})
}

// An agent that ignores the interrupt is interrupted once, not once per
// window: the watch waits for it to say something.
func TestRunnerIdleTripsOncePerSilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{IdleTimeout: time.Minute})
		h.agent.onPrompt = func(agent.Prompt) { go h.agent.emit(hangingTurn()...) }
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "look"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := interrupted(h.agent); n != 1 {
			t.Fatalf("interrupted %d times, want 1", n)
		}
		if st := h.runner.Status(); !st.IdleDeadline.IsZero() || st.IdleInterrupts != 1 {
			t.Fatalf("status %+v", st)
		}
		h.agent.emit(&agent.TextDelta{Message: "m1", Block: "0", Delta: "."}) // alive again: the watch runs again
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := interrupted(h.agent); n != 2 {
			t.Fatalf("interrupted %d times, want 2", n)
		}
		close(h.agent.events)
		h.wait()
	})
}

// Nothing trips the watch while a tool call runs, while a permission or a
// question waits for a person, between turns, or with the watch off; the
// clock starts again once the tool ended or the person answered.
func TestRunnerIdlePausedOrOff(t *testing.T) {
	bashIn, _ := json.Marshal(map[string]string{"command": "make"})
	running := []agent.Event{
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: bashIn},
		&agent.ToolRunning{CallID: "c1"},
	}
	question := []agent.Event{
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "question"},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolBlocked{CallID: "c1", Question: &agent.QuestionRequest{Questions: []agent.QuestionInfo{{Question: "which?", Options: []agent.QuestionOption{{Label: "a"}}}}}},
	}
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		turn    []agent.Event
		// resume lets the turn go on (nil: it stays as it is).
		resume func(h *harness)
		// status is the one-line view of Status while it waits.
		tools, waiting []ToolActivity
	}{
		{name: "tool running", timeout: 10 * time.Minute, turn: running,
			resume: func(h *harness) { h.agent.emit(&agent.ToolCompleted{CallID: "c1", Output: "ok"}) },
			tools:  []ToolActivity{{CallID: "c1", Tool: "bash"}}},
		{name: "permission waiting", timeout: 10 * time.Minute, turn: startTurn("c1", "rm x"),
			resume: func(h *harness) {
				if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
					h.t.Fatal(err)
				}
				h.agent.emit(&agent.ToolCompleted{CallID: "c1", Output: "ok"}) // the approved tool ran
			},
			waiting: []ToolActivity{{CallID: "c1", Tool: "bash"}}},
		{name: "question waiting", timeout: 10 * time.Minute, turn: question,
			resume: func(h *harness) {
				if err := h.control(ControlQuestion{Answer: QuestionAnswer{CallID: "c1", Answers: [][]string{{"a"}}}}); err != nil {
					h.t.Fatal(err)
				}
				h.agent.emit(&agent.ToolCompleted{CallID: "c1", Output: "a"})
			},
			waiting: []ToolActivity{{CallID: "c1", Tool: "question", Question: true}}},
		{name: "off", timeout: 0, turn: hangingTurn()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := idleHarness(t, tc.timeout)
				time.Sleep(time.Hour) // no turn: nothing to watch
				h.agent.onPrompt = func(agent.Prompt) { go h.agent.emit(tc.turn...) }
				start := time.Now()
				if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "go"}}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(24 * time.Hour)
				synctest.Wait()
				if n := interrupted(h.agent); n != 0 {
					t.Fatalf("interrupted %d time(s)", n)
				}
				st := h.runner.Status()
				for i := range tc.tools {
					tc.tools[i].Since = start
				}
				for i := range tc.waiting {
					tc.waiting[i].Since = start
				}
				if !st.AgentRunning || !st.TurnSince.Equal(start) || !st.IdleDeadline.IsZero() || st.IdleTimeout != tc.timeout ||
					!slices.Equal(st.Tools, tc.tools) || !slices.Equal(st.Waiting, tc.waiting) {
					t.Fatalf("status %+v", st)
				}
				if tc.resume == nil {
					close(h.agent.events)
					h.wait()
					return
				}
				tc.resume(h)
				resumed := time.Now()
				time.Sleep(tc.timeout - time.Second)
				synctest.Wait()
				if n := interrupted(h.agent); n != 0 {
					t.Fatalf("interrupted %d time(s) %s after the turn went on", n, time.Since(resumed))
				}
				time.Sleep(time.Second)
				synctest.Wait()
				if n := interrupted(h.agent); n != 1 {
					t.Fatalf("interrupted %d time(s) %s after the turn went on, want 1", n, time.Since(resumed))
				}
				close(h.agent.events)
				h.wait()
			})
		})
	}
}

// A question answered from another device is decided when the answer
// comes, not at the last time the agent's events carried (an agent whose
// stream has no times, as Claude's stream-json, leaves the tool's start
// as the reducer's latest time).
func TestQuestionDecidedWhenAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, Options{})
		defer func() { close(h.agent.events); h.wait() }()
		start := time.Now()
		h.agent.emit(&agent.TurnStarted{EventBase: agent.EventBase{Time: start.UnixMilli()}, TurnID: "t1"},
			&agent.MessageStarted{Message: "m1"},
			&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "question"},
			&agent.ToolRunning{CallID: "c1"},
			&agent.ToolBlocked{CallID: "c1", Question: &agent.QuestionRequest{Questions: []agent.QuestionInfo{{Question: "which?", Options: []agent.QuestionOption{{Label: "a"}}}}}})
		h.waitBlocked("c1")
		time.Sleep(90 * time.Second) // a person takes their time (fake clock)
		answered := time.Now().UnixMilli()
		if err := h.control(ControlQuestion{Answer: QuestionAnswer{CallID: "c1", Answers: [][]string{{"a"}}}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		var got *int64
		for _, m := range h.red.Transcript().Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok && tp.CallID == "c1" && tp.State.Block != nil {
					got = tp.State.Block.DecidedAt
				}
			}
		}
		if got == nil || *got != answered {
			t.Fatalf("decidedAt %v, want %d (the answer's time; the tool started at %d)", got, answered, start.UnixMilli())
		}
	})
}
