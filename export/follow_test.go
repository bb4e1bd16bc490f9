package export

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Followed event by event, a turn is written in happy log's layout, each
// line once: the prompt, the text as it streams, the tool's wait for a
// person, the tool whole when it ends, the answer; and what it wrote is
// happy log's body, but for the announcement of the wait.
func TestFollowerWritesTheLogAsItGrows(t *testing.T) {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-follow", Directory: "/w"})
	f := NewFollower(TextOptions{})
	var out bytes.Buffer
	var steps []string
	step := func(evs ...agent.Event) {
		for _, ev := range evs {
			red.Apply(ev)
		}
		before := out.Len()
		if err := f.Update(&out, red.Transcript(), false); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, out.String()[before:])
	}
	in := json.RawMessage(`{"command":"echo hi"}`)
	step(&agent.UserPrompt{PromptID: "p", Text: "Say hi."}, &agent.TurnStarted{TurnID: "t"}, &agent.MessageStarted{Message: "m"})
	step(&agent.TextDelta{Message: "m", Block: "0", Delta: "Let me "})
	step(&agent.TextDelta{Message: "m", Block: "0", Delta: "run it.\n"})
	step(&agent.TextFinal{Message: "m", Block: "0", Text: "Let me run it.\n"},
		&agent.ToolCall{Message: "m", CallID: "c1", Tool: "bash", Input: in})
	step(&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"echo hi"}}})
	step(&agent.ToolResolved{CallID: "c1", Decision: agent.DecisionOnce}, &agent.ToolRunning{CallID: "c1"})
	step(&agent.ToolCompleted{CallID: "c1", Output: "hi"}, &agent.StepFinished{Message: "m", Finish: agent.FinishToolCalls},
		&agent.MessageStarted{Message: "m2"}, &agent.TextDelta{Message: "m2", Block: "0", Delta: "Done"})
	step(&agent.TextFinal{Message: "m2", Block: "0", Text: "Done."}, &agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
		&agent.TurnEnded{TurnID: "t", Reason: agent.TurnCompleted})
	want := []string{
		"> Say hi.\n",
		"Let me ",
		"run it.",
		"\n",
		"● bash echo hi — blocked  [c1]\n  waiting for permission: bash echo hi\n",
		"",
		"● bash echo hi — completed  [c1]\n  permission bash echo hi: once\n  │ hi\nDone",
		".\n",
	}
	for i := range want {
		if i >= len(steps) || steps[i] != want[i] {
			t.Fatalf("step %d wrote %q, want %q (all: %q)", i, steps[min(i, len(steps)-1)], want[i], steps)
		}
	}
	// The same as happy log's body, but for the announced wait.
	var log bytes.Buffer
	if err := Text(&log, red.Transcript(), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	body := strings.SplitN(log.String(), "\n", 3)[2] // after "session …" and "  in /w"
	followed := strings.Replace(out.String(), "● bash echo hi — blocked  [c1]\n  waiting for permission: bash echo hi\n", "", 1)
	if followed != body {
		t.Errorf("followed:\n%s\nhappy log:\n%s", followed, body)
	}
	// Nothing new, nothing written; final writes nothing more here either.
	before := out.Len()
	if err := f.Update(&out, red.Transcript(), true); err != nil || out.Len() != before {
		t.Errorf("a repeated update wrote %q (%v)", out.String()[before:], err)
	}
}

// A transcript followed event by event and the same transcript read whole
// render their prompts alike, header included: a prompt whose text is
// completed afterwards, one found to be the agent's own record (synthetic),
// one with a file, and a last one nothing answered.
func TestFollowerRendersPromptsAsLog(t *testing.T) {
	evs := []agent.Event{
		&agent.UserPrompt{PromptID: "p1", Text: "Fix the"},
		&agent.UserPrompt{PromptID: "p1", Text: "Fix the failing test\nin parser.go"},
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.TextFinal{Message: "m1", Block: "0", Text: "Fixed."},
		&agent.StepFinished{Message: "m1", Finish: agent.FinishStop},
		&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted},
		&agent.UserPrompt{PromptID: "p2", Text: "git status"},
		&agent.UserPrompt{PromptID: "p2", Text: "<bash-input>git status</bash-input>", Synthetic: true},
		&agent.UserPrompt{PromptID: "p3", Text: "What is this?", Files: []agent.PromptFile{{Mime: "image/png", Filename: "shot.png", URL: "data:image/png;base64,AA=="}}},
		&agent.TurnStarted{TurnID: "t2"},
		&agent.MessageStarted{Message: "m2"},
		&agent.TextFinal{Message: "m2", Block: "0", Text: "A screenshot."},
		&agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
		&agent.TurnEnded{TurnID: "t2", Reason: agent.TurnCompleted},
		&agent.UserPrompt{PromptID: "p4", Text: "And now?"},
	}
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-prompts", Directory: "/w"})
	opts := TextOptions{SessionID: "s1", Title: "Fix the failing test"}
	var followed bytes.Buffer
	if err := Header(&followed, red.Transcript().Session, opts); err != nil {
		t.Fatal(err)
	}
	f := NewFollower(opts)
	for _, ev := range evs {
		red.Apply(ev)
		if err := f.Update(&followed, red.Transcript(), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Update(&followed, red.Transcript(), true); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	if err := Text(&logged, red.Transcript(), opts); err != nil {
		t.Fatal(err)
	}
	want := "session s1 — Fix the failing test\n  in /w\n" +
		"> Fix the failing test\n  in parser.go\nFixed.\n" +
		"(synthetic) <bash-input>git status</bash-input>\n" +
		"> What is this?\n> [file shot.png, image/png, inline]\nA screenshot.\n" +
		"> And now?\n"
	if logged.String() != want {
		t.Fatalf("happy log:\n%q\nwant\n%q", logged.String(), want)
	}
	if followed.String() != logged.String() {
		t.Fatalf("followed:\n%s\nhappy log:\n%s", followed.String(), logged.String())
	}
}

// An agent that never says a text ended (ACP sends chunks, then a tool
// call): the tool is written as soon as it completes, with the text before
// it ended on its line, not when a later event closes the message; text
// the agent adds to that first part afterwards is written too, on a line
// of its own, and the rest of the message once it completes.
func TestFollowerWritesAToolAfterAnOpenText(t *testing.T) {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-acp", Directory: "/w"})
	f := NewFollower(TextOptions{})
	var out bytes.Buffer
	step := func(evs ...agent.Event) string {
		for _, ev := range evs {
			red.Apply(ev)
		}
		before := out.Len()
		if err := f.Update(&out, red.Transcript(), false); err != nil {
			t.Fatal(err)
		}
		return out.String()[before:]
	}
	step(&agent.UserPrompt{PromptID: "p", Text: "Run it."}, &agent.TurnStarted{TurnID: "t"}, &agent.MessageStarted{Message: "m"})
	cases := []struct {
		evs  []agent.Event
		want string
	}{
		{[]agent.Event{&agent.TextDelta{Message: "m", Block: "b", Delta: "Let me "}}, "Let me "},
		{[]agent.Event{&agent.TextDelta{Message: "m", Block: "b", Delta: "check."}}, "check."},
		{[]agent.Event{&agent.ToolCall{Message: "m", CallID: "c1", Tool: "bash", Input: json.RawMessage(`{"command":"ls"}`)}, &agent.ToolRunning{CallID: "c1"}}, "\n"},
		{[]agent.Event{&agent.ToolCompleted{CallID: "c1", Output: "a.go"}}, "● bash ls — completed  [c1]\n  │ a.go\n"},
		{[]agent.Event{&agent.TextDelta{Message: "m", Block: "b", Delta: " More."}}, " More.\n"},
		{[]agent.Event{&agent.StepFinished{Message: "m", Finish: agent.FinishStop}}, ""},
	}
	for i, c := range cases {
		if got := step(c.evs...); got != c.want {
			t.Fatalf("step %d wrote %q, want %q (all %q)", i, got, c.want, out.String())
		}
	}
}
