package session

import (
	"reflect"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/happy-dev/happy/agent"
)

// OnActivity hears true when a prompt starts a turn and false once the turn
// ended, once each, in that order.
func TestRunnerReportsActivity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []bool
		h := newHarness(t, Options{OneShot: true, OnActivity: func(b bool) {
			mu.Lock()
			seen = append(seen, b)
			mu.Unlock()
		}})
		h.agent.onPrompt = func(agent.Prompt) { go h.agent.emit(startTurn("c1", "ls")...) }
		h.agent.onDecide = func(string, agent.Verdict) { go h.agent.emit(finishTurn("c1")...) }
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "list"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mu.Lock()
		if !reflect.DeepEqual(seen, []bool{true}) {
			t.Fatalf("while the turn runs: %v, want [true]", seen)
		}
		mu.Unlock()
		if err := h.control(ControlAnswer{Answer: Answer{CallID: "c1", Decision: agent.DecisionOnce}}); err != nil {
			t.Fatal(err)
		}
		h.wait()
		mu.Lock()
		defer mu.Unlock()
		if !reflect.DeepEqual(seen, []bool{true, false}) {
			t.Fatalf("after the turn: %v, want [true false]", seen)
		}
	})
}
