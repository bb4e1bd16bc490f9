package mapper

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// longSession generates a session of about n events shaped like a real
// Claude/Codex stream: per turn a prompt, reasoning and text streamed as
// many small deltas then finalised, tool calls that run (every fourth one
// blocked and approved) and complete, usage, and the turn end.
func longSession(n int) []agent.Event {
	var evs []agent.Event
	t := int64(1753120000000)
	tick := func() agent.EventBase { t += 7; return agent.EventBase{Time: t} }
	for turn := 0; len(evs) < n; turn++ {
		tid := fmt.Sprint("turn-", turn)
		evs = append(evs, &agent.TurnStarted{EventBase: tick(), TurnID: tid},
			&agent.UserPrompt{EventBase: tick(), PromptID: "prompt-" + tid, Text: "Please do step " + tid})
		for step := 0; step < 3; step++ {
			msg := fmt.Sprintf("%s-m%d", tid, step)
			for i := 0; i < 20; i++ {
				evs = append(evs, &agent.ReasoningDelta{EventBase: tick(), Message: msg, Block: "0", Delta: "thinking about it "})
			}
			for i := 0; i < 60; i++ {
				evs = append(evs, &agent.TextDelta{EventBase: tick(), Message: msg, Block: "1", Delta: "some words of the answer "})
			}
			evs = append(evs, &agent.TextFinal{EventBase: tick(), Message: msg, Block: "1", Text: "the whole answer"})
			for c := 0; c < 2; c++ {
				call := fmt.Sprintf("%s-call%d", msg, c)
				evs = append(evs,
					&agent.ToolCall{EventBase: tick(), Message: msg, CallID: call, Tool: "bash", Title: "ls", Input: json.RawMessage(`{"command":"ls -la"}`)},
					&agent.ToolRunning{EventBase: tick(), CallID: call})
				if c == 1 && step%2 == 0 {
					evs = append(evs,
						&agent.ToolBlocked{EventBase: tick(), CallID: call, Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"ls -la"}, Always: []string{"ls *"}}},
						&agent.ToolResolved{EventBase: tick(), CallID: call, Decision: agent.DecisionOnce})
				}
				evs = append(evs, &agent.ToolCompleted{EventBase: tick(), CallID: call, Output: "total 0\n"})
			}
			in, out := int64(1000+step), int64(200)
			evs = append(evs, &agent.Usage{EventBase: tick(), Message: msg, Tokens: &agent.Tokens{Input: &in, Output: &out}})
		}
		evs = append(evs, &agent.TurnEnded{EventBase: tick(), TurnID: tid, Reason: agent.TurnCompleted})
	}
	return evs
}

// BenchmarkReducerLongSession applies a generated 10k-event session (about
// 80% streaming deltas). Reported: events/s and allocations per event; one
// op is the whole session.
func BenchmarkReducerLongSession(b *testing.B) {
	evs := longSession(10_000)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r := NewReducer(Config{SessionID: "bench", Directory: "/w", Agent: "build", ProviderID: "anthropic", ModelID: "m"})
		for _, ev := range evs {
			r.Apply(ev)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(evs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReducerDelta measures one streamed text delta into a session
// that already holds a long transcript (the cost must not grow with it).
func BenchmarkReducerDelta(b *testing.B) {
	r := NewReducer(Config{SessionID: "bench", Directory: "/w"})
	for _, ev := range longSession(10_000) {
		r.Apply(ev)
	}
	r.Apply(&agent.TurnStarted{TurnID: "last"})
	d := &agent.TextDelta{Message: "last-msg", Block: "0", Delta: "token "}
	b.ReportAllocs()
	for b.Loop() {
		r.Apply(d)
	}
}
