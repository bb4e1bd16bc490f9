package session

import (
	"context"
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

// recoverHarness starts a served session with the idle watch at 10m and
// Options.Recover: each recovery starts a new fake agent, set up by next
// (its number from 1), after recording which agent it replaced.
type recoverHarness struct {
	*harness
	mu       sync.Mutex
	agents   []*fakeAgent // agents[0] is the first
	replaced []agent.Agent
}

func newRecoverHarness(t *testing.T, opts Options, next func(n int, a *fakeAgent) error) *recoverHarness {
	rh := &recoverHarness{}
	opts.IdleTimeout = 10 * time.Minute
	opts.Recover = func(_ context.Context, old agent.Agent) (agent.Agent, error) {
		rh.mu.Lock()
		defer rh.mu.Unlock()
		rh.replaced = append(rh.replaced, old)
		a := newFakeAgent()
		if err := next(len(rh.agents), a); err != nil {
			return nil, err
		}
		rh.agents = append(rh.agents, a)
		return a, nil
	}
	rh.harness = newHarness(t, opts)
	rh.agents = []*fakeAgent{rh.agent}
	rh.agent.onPrompt = func(agent.Prompt) { go rh.agent.emit(hangingTurn()...) }
	return rh
}

// recovered is how many agents were replaced, and whether each was the
// agent before it.
func (rh *recoverHarness) recovered() int {
	rh.mu.Lock()
	defer rh.mu.Unlock()
	for i, old := range rh.replaced {
		if old != agent.Agent(rh.agents[i]) {
			rh.t.Errorf("recovery %d replaced %v, not agent %d", i+1, old, i)
		}
	}
	return len(rh.replaced)
}

// end closes every agent's events, as their Close would (the runner reads
// the replaced agents' events until then).
func (rh *recoverHarness) end() {
	rh.mu.Lock()
	defer rh.mu.Unlock()
	for _, a := range rh.agents {
		close(a.events)
	}
	rh.wait()
}

func (rh *recoverHarness) agentN(n int) *fakeAgent {
	rh.mu.Lock()
	defer rh.mu.Unlock()
	if n >= len(rh.agents) {
		rh.t.Fatalf("agent %d never started (%d did)", n, len(rh.agents))
	}
	return rh.agents[n]
}

// transcriptLines is the root session's messages, one line each: role,
// text, and for an assistant message its finish and error.
func transcriptLines(tr mapper.Transcript) []string {
	var out []string
	for _, m := range tr.Messages {
		var texts []string
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				texts = append(texts, tp.Text)
			}
		}
		line := strings.Join(texts, "")
		switch info := m.Info.(type) {
		case *mapper.UserMessage:
			line = "user: " + line
		case *mapper.AssistantMessage:
			line = "assistant: " + line + " [" + string(info.Finish) + "]"
			if info.Error != nil {
				line += " error: " + info.Error.Data.Message
			}
		}
		out = append(out, line)
	}
	return out
}

// With Recover, a silent agent is not interrupted: it is replaced, its
// turn ends interrupted with a note saying so, what it says afterwards is
// not read, and the new agent is sent "continue", recorded as the user's.
func TestRunnerRecoverRestartsSilentAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rh := newRecoverHarness(t, Options{}, func(_ int, a *fakeAgent) error {
			a.onPrompt = func(agent.Prompt) {
				go a.emit(&agent.TurnStarted{TurnID: "t2"}, &agent.MessageStarted{Message: "m2"},
					&agent.TextFinal{Message: "m2", Block: "0", Text: "Done."},
					&agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
					&agent.TurnEnded{TurnID: "t2", Reason: agent.TurnCompleted})
			}
			return nil
		})
		start := time.Now()
		if err := rh.control(ControlPrompt{Prompt: agent.Prompt{Text: "look"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10*time.Minute - time.Second)
		synctest.Wait()
		if rh.recovered() != 0 {
			t.Fatalf("recovered at %s", time.Since(start))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := rh.recovered(); n != 1 {
			t.Fatalf("%d recoveries", n)
		}
		old, fresh := rh.agentN(0), rh.agentN(1)
		if got := fmt.Sprint(old.Calls()); got != "[prompt:look]" {
			t.Errorf("old agent calls %s (never interrupted)", got)
		}
		if got := fmt.Sprint(fresh.Calls()); got != "[prompt:continue]" {
			t.Errorf("new agent calls %s", got)
		}
		old.emit(&agent.TextDelta{Message: "m1", Block: "0", Delta: " LATE"}) // read and dropped
		synctest.Wait()
		want := []string{
			"user: look",
			"assistant: Let me look [aborted] error: the agent sent nothing for 10m0s: restarted it in its own session (recovery 1 of 2)",
			"user: continue",
			"assistant: Done. [stop]",
		}
		if got := transcriptLines(rh.red.Transcript()); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("transcript\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if err := rh.control(ControlEnd{}); err != nil {
			t.Fatal(err)
		}
		rh.wait()
		rh.end()
		if rh.res.Recoveries != 1 || rh.res.IdleInterrupts != 1 || rh.res.TurnReason != agent.TurnCompleted || rh.res.AgentExited {
			t.Fatalf("result %+v", rh.res)
		}
	})
}

// A turn is recovered at most RecoverMax times; the next silence
// interrupts the agent, saying recovery was given up. A person's prompt
// starts the count again.
func TestRunnerRecoverGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rh := newRecoverHarness(t, Options{RecoverMax: 2}, func(n int, a *fakeAgent) error {
			// A restarted agent names its messages anew.
			m := fmt.Sprintf("m%d", n+1)
			a.onPrompt = func(agent.Prompt) {
				go a.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: m},
					&agent.TextDelta{Message: m, Block: "0", Delta: "Let me look"})
			}
			a.onInterrupt = func() { go a.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnInterrupted}) }
			return nil
		})
		if err := rh.control(ControlPrompt{Prompt: agent.Prompt{Text: "look"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		third := rh.agentN(2)
		if n, r := interrupted(third), rh.recovered(); n != 1 || r != 2 {
			t.Fatalf("third agent interrupted %d times, %d recoveries", n, r)
		}
		got := transcriptLines(rh.red.Transcript())
		want := []string{
			"user: look",
			"assistant: Let me look [aborted] error: the agent sent nothing for 10m0s: restarted it in its own session (recovery 1 of 2)",
			"user: continue",
			"assistant: Let me look [aborted] error: the agent sent nothing for 10m0s: restarted it in its own session (recovery 2 of 2)",
			"user: continue",
			"assistant: Let me look [aborted] error: the agent sent nothing for 10m0s: interrupted; not restarted again: recovered 2 times already",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("transcript\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// A new prompt from a person: its silence is recovered again.
		if err := rh.control(ControlPrompt{Prompt: agent.Prompt{Text: "again"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := rh.recovered(); n != 3 {
			t.Fatalf("%d recoveries after a new prompt, want 3", n)
		}
		rh.end()
		if rh.res.Recoveries != 3 || rh.res.IdleInterrupts != 4 {
			t.Fatalf("result %+v", rh.res)
		}
	})
}

// When the agent cannot be restarted now (CanRecover), the silent agent is
// interrupted and the transcript says why it was not restarted; when the
// restart fails, the transcript says so and the run ends as the agent's
// exit.
func TestRunnerRecoverImpossibleOrFailed(t *testing.T) {
	t.Run("cannot", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rh := newRecoverHarness(t, Options{CanRecover: func() error { return errors.New("it offers neither session/resume nor session/load") }},
				func(int, *fakeAgent) error { t.Error("recovered"); return nil })
			rh.agent.onInterrupt = func() { go rh.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnInterrupted}) }
			if err := rh.control(ControlPrompt{Prompt: agent.Prompt{Text: "look"}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Minute)
			synctest.Wait()
			if n := interrupted(rh.agent); n != 1 {
				t.Fatalf("interrupted %d times", n)
			}
			a := lastAssistant(t, rh.red.Transcript())
			if a.Error == nil || a.Error.Data.Message != "the agent sent nothing for 10m0s: interrupted; it cannot be restarted: it offers neither session/resume nor session/load" {
				t.Fatalf("error %+v", a.Error)
			}
			rh.end()
		})
	})
	t.Run("failed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			rh := newRecoverHarness(t, Options{}, func(int, *fakeAgent) error { return errors.New("claude exit status 1") })
			if err := rh.control(ControlPrompt{Prompt: agent.Prompt{Text: "look"}}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Minute)
			rh.wait()
			rh.end()
			want := []string{
				"user: look",
				"assistant: Let me look [aborted] error: the agent sent nothing for 10m0s: restarted it in its own session (recovery 1 of 2)",
				"assistant:  [] error: the agent could not be restarted: claude exit status 1",
			}
			if got := transcriptLines(rh.red.Transcript()); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("transcript\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if !rh.res.AgentExited || rh.res.Recoveries != 0 || rh.res.TurnError != "the agent could not be restarted: claude exit status 1" {
				t.Fatalf("result %+v", rh.res)
			}
		})
	})
}
