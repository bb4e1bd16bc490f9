package mapper

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper/schema"
)

// eventProgram turns fuzz bytes into a sequence of agent events drawn from
// small pools of keys, so that the events collide on the same tools,
// messages and sessions the way real streams do. Each event takes two
// bytes: the kind, then a parameter byte whose bits pick keys and values.
func eventProgram(data []byte) []agent.Event {
	calls := []string{"c0", "c1", "c2", "c3"}
	msgs := []string{"", "", "m0", "m1"}
	blocks := []string{"", "b0", "b1", ""}
	sessions := []string{"", "", "", "k0"}
	decisions := []agent.Decision{agent.DecisionOnce, agent.DecisionAlways, agent.DecisionReject, "maybe"}
	reasons := []string{agent.TurnCompleted, agent.TurnInterrupted, agent.TurnFailed, agent.TurnAgentExited, agent.TurnTruncated, "other"}
	var evs []agent.Event
	for i := 0; i+1 < len(data); i += 2 {
		k, p := data[i], int(data[i+1])
		base := agent.EventBase{Session: sessions[p>>6&3], Time: int64(i) * 10 * int64(p&1)}
		call, msg, blk := calls[p&3], msgs[p>>2&3], blocks[p>>4&3]
		switch k % 25 {
		case 0:
			evs = append(evs, &agent.TurnStarted{EventBase: base, TurnID: calls[p&3]})
		case 1:
			evs = append(evs, &agent.UserPrompt{EventBase: base, PromptID: "p" + call, Text: "hi " + call})
		case 2:
			evs = append(evs, &agent.MessageStarted{EventBase: base, Message: msg, ModelID: "model-" + blk})
		case 3:
			evs = append(evs, &agent.TextDelta{EventBase: base, Message: msg, Block: blk, Delta: "t" + call})
		case 4:
			evs = append(evs, &agent.TextFinal{EventBase: base, Message: msg, Block: blk, Text: "final " + call})
		case 5:
			evs = append(evs, &agent.ReasoningDelta{EventBase: base, Message: msg, Block: blk, Delta: "r"})
		case 6:
			evs = append(evs, &agent.ReasoningFinal{EventBase: base, Message: msg, Block: blk, Text: "thought", Metadata: agent.Object{"n": json.Number("1")}})
		case 7:
			in := json.RawMessage(`{"a":1}`)
			if p&16 != 0 {
				in = json.RawMessage(`[1]`)
			}
			evs = append(evs, &agent.ToolCall{EventBase: base, Message: msg, CallID: call, Tool: "bash", Title: "t" + blk, Input: in})
		case 8:
			evs = append(evs, &agent.ToolInputDelta{EventBase: base, CallID: call, Delta: `{"x`})
		case 9:
			evs = append(evs, &agent.ToolRunning{EventBase: base, CallID: call})
		case 10:
			evs = append(evs, &agent.ToolBlocked{EventBase: base, Message: msg, CallID: call, Tool: "edit",
				Permission: &agent.PermissionRequest{ID: blk, Permission: "edit", Patterns: []string{"src/" + call}, Always: []string{"src/*"}}})
		case 11:
			evs = append(evs, &agent.ToolBlocked{EventBase: base, Message: msg, CallID: call,
				Question: &agent.QuestionRequest{ID: blk, Questions: []agent.QuestionInfo{{Question: "Which?", Header: "Q", Options: []agent.QuestionOption{{Label: "a"}}}}}})
		case 12:
			evs = append(evs, &agent.ToolResolved{EventBase: base, CallID: call, Decision: decisions[p>>2&3]})
		case 13:
			evs = append(evs, &agent.ToolResolved{EventBase: base, CallID: call, Answers: [][]string{{"a"}}})
		case 14:
			evs = append(evs, &agent.ToolResolved{EventBase: base, CallID: call, Decision: agent.DecisionReject, Reason: agent.ReasonTimeout})
		case 15:
			evs = append(evs, &agent.ToolCompleted{EventBase: base, CallID: call, Output: "out" + blk, Files: []agent.PromptFile{{URL: "data:,x"}}[:p>>7]})
		case 16:
			evs = append(evs, &agent.ToolFailed{EventBase: base, CallID: call, Error: "err" + blk})
		case 17:
			var in int64 = int64(p)
			evs = append(evs, &agent.Usage{EventBase: base, Message: msg, Tokens: &agent.Tokens{Input: &in}})
		case 18:
			evs = append(evs, &agent.StepFinished{EventBase: base, Message: msg, Finish: []string{agent.FinishStop, agent.FinishToolCalls, agent.FinishLength, "bogus"}[p>>4&3]})
		case 19:
			evs = append(evs, &agent.SubagentStarted{EventBase: base, CallID: call, Child: "k0", Agent: "explore", Prompt: "look"})
		case 20:
			evs = append(evs, &agent.SubagentEnded{EventBase: base, Child: []string{"k0", "k1"}[p&1]})
		case 21:
			evs = append(evs, &agent.TodosUpdated{EventBase: base, Todos: []agent.Todo{{Content: call, Status: agent.TodoPending, Priority: agent.PriorityLow}}})
		case 22:
			evs = append(evs, &agent.Retry{EventBase: base, Message: msg, Attempt: p & 3, Error: agent.MessageError{Data: agent.ErrorData{Message: "x"}}})
		case 23:
			evs = append(evs, &agent.AgentError{EventBase: base, Message: msg, Kind: agent.ErrorKind(blk), Text: "boom"})
		case 24:
			evs = append(evs, &agent.TurnEnded{EventBase: base, Reason: reasons[p%len(reasons)]})
		}
	}
	return evs
}

// FuzzReducer applies random event sequences: the reducer never panics,
// every transcript it builds is valid (states, ids, schema), and after a
// final TurnEnded nothing is left open.
func FuzzReducer(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 7, 0, 9, 0, 10, 0, 12, 0, 15, 0, 24, 0})
	f.Add([]byte{7, 1, 7, 2, 10, 1, 10, 2, 12, 9, 19, 1, 3, 64, 24, 1})
	f.Add([]byte{11, 3, 13, 3, 15, 3, 3, 0, 3, 0, 4, 0, 22, 5, 23, 6, 17, 7, 18, 8})
	v, err := schema.NewValidator()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 400 {
			data = data[:400]
		}
		evs := eventProgram(data)
		evs = append(evs, &agent.TurnEnded{Reason: agent.TurnInterrupted})
		r := NewReducer(Config{SessionID: "fuzz", Directory: "/w", Agent: "build", ProviderID: "p", ModelID: "m"})
		for _, ev := range evs {
			for _, b := range r.Apply(ev) {
				if _, err := EncodeChange(b); err != nil {
					t.Fatalf("bus event %s does not encode: %v", b.EventType(), err)
				}
			}
		}
		tr := r.Transcript()
		checkTranscript(t, v, tr)
		noOpenTools(t, tr)
	})
}

// FuzzDecodeEvent: DecodeEvent never panics, refuses with an *EventError
// wrapping ErrBadEvent, and what it accepts re-encodes to an event that
// decodes to the same encoding.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"ToolCall","callID":"c","input":{"a":1}}`,
		`{"type":"ToolResolved","callID":"c","decision":"maybe"}`,
		`{"type":"TextDelta","time":-1}`,
		`{"type":7}`, `[1]`, `nul`, `{"type":"Usage","tokens":{"input":1.5}}`,
		`{"type":"SubagentStarted","child":"k","session":"s"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := agent.DecodeEvent(data)
		if err != nil {
			var ee *agent.EventError
			if !errors.As(err, &ee) || !errors.Is(err, agent.ErrBadEvent) || ee.Reason == "" {
				t.Fatalf("refusal %v is not a reasoned *EventError", err)
			}
			return
		}
		a, err := agent.EncodeEvent(ev)
		if err != nil {
			t.Fatalf("accepted event does not encode: %v", err)
		}
		ev2, err := agent.DecodeEvent(a)
		if err != nil {
			t.Fatalf("own encoding %s refused: %v", a, err)
		}
		b, _ := agent.EncodeEvent(ev2)
		if !bytes.Equal(a, b) {
			t.Fatalf("round trip differs:\n%s\n%s", a, b)
		}
	})
}
