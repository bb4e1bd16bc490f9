package perm

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestVerdict(t *testing.T) {
	in := json.RawMessage(`{"answers":{"q":"a"}}`)
	cases := []struct {
		name string
		a    Answer
		want Verdict
		err  error
	}{
		{"once", Answer{Decision: agent.DecisionOnce}, Verdict{Allow: true}, nil},
		{"once with input", Answer{Decision: agent.DecisionOnce, UpdatedInput: in}, Verdict{Allow: true, UpdatedInput: in}, nil},
		{"always", Answer{Decision: agent.DecisionAlways}, Verdict{Allow: true, Always: true}, nil},
		{"reject", Answer{Decision: agent.DecisionReject}, Verdict{Message: DefaultRejectMessage}, nil},
		{"reject with message", Answer{Decision: agent.DecisionReject, Message: "no"}, Verdict{Message: "no"}, nil},
		{"abort", Answer{Abort: true}, Verdict{Interrupt: true, Message: DefaultAbortMessage}, nil},
		{"abort with message", Answer{Abort: true, Message: "stop"}, Verdict{Interrupt: true, Message: "stop"}, nil},
		{"abort and decision", Answer{Abort: true, Decision: agent.DecisionOnce}, Verdict{}, ErrDecisionAndAbort},
		{"empty", Answer{}, Verdict{}, agent.ErrUnknownDecision},
		{"allow is not canonical", Answer{Decision: "allow"}, Verdict{}, agent.ErrUnknownDecision},
		{"case matters", Answer{Decision: "Once"}, Verdict{}, agent.ErrUnknownDecision},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.a.Verdict()
			if !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("verdict %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestHasSuggestions(t *testing.T) {
	for in, want := range map[string]bool{
		`[{"type":"addRules"}]`: true,
		`[]`:                    false,
		`null`:                  false,
		``:                      false,
		`{"type":"addRules"}`:   false,
		`[1`:                    false,
	} {
		if got := HasSuggestions(json.RawMessage(in)); got != want {
			t.Errorf("HasSuggestions(%q) = %v", in, got)
		}
	}
}
