package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// The turn view shows, only while active, the running turn: the prompt
// (caught up at activation), the text as it streams, a line per tool
// state; notices start on a line of their own; nothing after it stops.
func TestTurnViewShowsTheTurn(t *testing.T) {
	var out strings.Builder
	v := &TurnView{Out: &out}
	red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"})
	apply := func(evs ...agent.Event) {
		for _, e := range evs {
			v.OnBus(red.Apply(e))
		}
	}
	in, _ := json.Marshal(map[string]string{"command": "echo hi"})
	apply(&agent.SessionInfo{Title: "t"},
		&agent.UserPrompt{PromptID: "local-1", Text: "typed in claude"},
		&agent.TurnStarted{TurnID: "t0"},
		&agent.TextFinal{Message: "m0", Block: "0", Text: "local answer"},
		&agent.TurnEnded{TurnID: "t0", Reason: agent.TurnCompleted},
		&agent.UserPrompt{PromptID: "relay:x", Text: "run it\nplease"},
	)
	if out.String() != "" {
		t.Fatalf("wrote while inactive: %q", out.String())
	}
	v.SetActive(true)
	apply(&agent.TurnStarted{TurnID: "t1"},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "I will "},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "run it."})
	fmt.Fprint(v.Notices(&out), "happy: a notice\r\n")
	apply(&agent.TextFinal{Message: "m1", Block: "0", Text: "I will run it."},
		&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: in},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"echo hi"}}},
		&agent.ToolResolved{CallID: "c1", Decision: agent.DecisionOnce},
		&agent.ToolCompleted{CallID: "c1", Output: "hi"},
		&agent.ToolCall{Message: "m1", CallID: "c2", Tool: "bash", Input: in},
		&agent.ToolFailed{CallID: "c2", Error: "exit 1\nmore"},
		&agent.TextDelta{Message: "m1", Block: "1", Delta: "It printed\nhi."},
	)
	v.SetActive(false)
	apply(&agent.TextDelta{Message: "m1", Block: "1", Delta: " More."},
		&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
	want := "> run it\r\nplease\r\n" +
		"I will run it.\r\n" +
		"happy: a notice\r\n" +
		"● bash echo hi — running\r\n" +
		"● bash echo hi — waiting for permission\r\n" +
		"● bash echo hi — running\r\n" +
		"● bash echo hi — completed\r\n" +
		"● bash echo hi — error: exit 1\r\n" +
		"It printed\r\nhi.\r\n"
	if out.String() != want {
		t.Fatalf("out\n%q\nwant\n%q", out.String(), want)
	}
	// The next turn starts afresh: the old one is not shown again.
	out.Reset()
	v.SetActive(true)
	apply(&agent.UserPrompt{PromptID: "relay:y", Text: "next"})
	if want := "> next\r\n"; out.String() != want {
		t.Fatalf("next turn %q, want %q", out.String(), want)
	}
}
