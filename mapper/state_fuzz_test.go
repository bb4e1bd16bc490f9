package mapper

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// FuzzToolStateMachine drives a tool through random operations: nothing
// panics, every accepted state is valid, reached by a legal transition and
// round-trips through the codec, every refusal is a *TransitionError that
// leaves the state unchanged, and nothing ever leaves a terminal state or
// changes what it says (a repeat may only add to it).
func FuzzToolStateMachine(f *testing.F) {
	f.Add([]byte{0, 1, 3, 9})       // run, ask, once, complete
	f.Add([]byte{0, 2, 7, 9, 0})    // question answered, then complete, then run again
	f.Add([]byte{0, 1, 5, 0, 11})   // rejected, then attempts to leave error
	f.Add([]byte{12, 3, 12, 14, 6}) // paths to fixtures
	f.Add([]byte{11, 11, 13, 2})
	fixtures := stateFixtures()
	names := make([]string, 0, len(fixtures))
	for k := range fixtures {
		names = append(names, k)
	}
	slices.Sort(names)
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := PendingState(agent.Object{"command": "ls"}, "")
		for i := 0; i < len(ops); i++ {
			prev := s
			at := int64(i * 10)
			arg := func() ToolState {
				i++
				if i < len(ops) {
					return fixtures[names[int(ops[i])%len(names)]]
				}
				return ToolState{}
			}
			var next ToolState
			var err error
			var path []ToolState
			switch ops[i] % 15 {
			case 0:
				next, err = s.Run(at)
			case 1:
				next, err = s.Ask(permRequest())
			case 2:
				next, err = s.Ask(questionRequest())
			case 3:
				next, err = s.Decide(agent.DecisionOnce, at, "")
			case 4:
				next, err = s.Decide(agent.DecisionAlways, at, "")
			case 5:
				next, err = s.Decide(agent.DecisionReject, at, "")
			case 6:
				next, err = s.Decide("allow", at, "")
			case 7:
				next, err = s.Answer([][]string{{"PostgreSQL"}}, at)
			case 8:
				next, err = s.Answer(nil, at)
			case 9:
				next, err = s.Complete("out", "title", nil, at)
			case 10:
				next, err = s.Fail("boom", nil, at)
			case 11:
				next, err = s.Settle(agent.ReasonCancelled, at)
			case 12:
				target := arg()
				path, err = TransitionPath(s, target)
				if err == nil {
					next = path[len(path)-1]
				} else {
					next = s
				}
			case 13:
				next = arg()
				if err = Transition(s, next); err != nil {
					next = s
				}
			case 14:
				next, err = s.Settle("", at)
			}
			if err != nil {
				if !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("op %d: refusal is not a transition error: %v", ops[i]%15, err)
				}
				if !reflect.DeepEqual(next, prev) {
					t.Fatalf("op %d: refused but the state changed: %+v", ops[i]%15, next)
				}
				continue
			}
			if prev.Status.Terminal() && !reflect.DeepEqual(prev, next) && (next.Status != prev.Status || !confirms(prev, next)) {
				t.Fatalf("op %d: left or changed terminal %s for %s", ops[i]%15, prev.Status, next.Status)
			}
			steps := path
			if steps == nil {
				steps = []ToolState{next}
			}
			from := prev
			for _, st := range steps {
				if err := Transition(from, st); err != nil {
					t.Fatalf("op %d: accepted an illegal step: %v", ops[i]%15, err)
				}
				from = st
			}
			if err := next.Validate(); err != nil {
				t.Fatalf("op %d: invalid state: %v", ops[i]%15, err)
			}
			b, err := EncodeToolState(next)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			back, err := DecodeToolState(b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if b2, err := EncodeToolState(back); err != nil || string(b2) != string(b) {
				t.Fatalf("not byte-stable: %s / %s (%v)", b, b2, err)
			}
			s = next
		}
	})
}
