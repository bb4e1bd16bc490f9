package app

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// The prompt line shows what the session says: the marker when it waits,
// a tool waiting for permission with the commands that answer it, a
// question, each completed answer, and prompts from other devices (not
// those typed here, which the terminal shows already).
func TestPromptLineRendersTheSession(t *testing.T) {
	var out, errb strings.Builder
	p := &PromptLine{Out: &out, Err: &errb, Agent: "codex", Marker: "codex> "}
	red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w"})
	apply := func(evs ...agent.Event) {
		for _, e := range evs {
			p.OnBus(red.Apply(e))
		}
	}
	in, _ := json.Marshal(map[string]string{"command": "echo hi > hi.txt"})
	apply(&agent.SessionInfo{Title: "t"})
	p.SetSession("S1")
	p.mu.Lock()
	p.typed = append(p.typed, "write hi.txt") // as Prompts does for a typed line
	p.marked = false
	p.mu.Unlock()
	apply(
		&agent.UserPrompt{PromptID: "local-1", Text: "write hi.txt"},
		&agent.TurnStarted{TurnID: "t1"},
		&agent.TextFinal{Message: "m1", Block: "0", Text: "I will write it."},
		&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: in},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"echo hi > hi.txt"}}},
		&agent.ToolResolved{CallID: "c1", Decision: agent.DecisionOnce},
		&agent.ToolBlocked{CallID: "q1", Tool: "question", Question: &agent.QuestionRequest{Questions: []agent.QuestionInfo{{Question: "Which color?", Options: []agent.QuestionOption{{Label: "red"}}}}}},
		&agent.ToolResolved{CallID: "q1", Answers: [][]string{{"red"}}},
		&agent.ToolCompleted{CallID: "c1", Output: ""},
		&agent.TextFinal{Message: "m1", Block: "1", Text: "Created hi.txt."},
		&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted},
		&agent.UserPrompt{PromptID: "relay:x", Text: "and now?"},
		&agent.TurnStarted{TurnID: "t2"},
		&agent.TextFinal{Message: "m2", Block: "0", Text: "Nothing else."},
		&agent.TurnEnded{TurnID: "t2", Reason: agent.TurnCompleted},
	)
	if want := "I will write it.\nCreated hi.txt.\n> and now?\nNothing else.\n"; out.String() != want {
		t.Errorf("out %q, want %q", out.String(), want)
	}
	wantErr := "codex> " +
		"happy: codex asks to use bash echo hi > hi.txt — happy approve S1 c1 (or happy deny S1 c1)\n" +
		"happy: codex asks: Which color? — answer with: happy answer S1 q1 LABEL…\n" +
		"codex> \n" + // a prompt from another device ends the marker's line
		"codex> "
	if errb.String() != wantErr {
		t.Errorf("err %q, want %q", errb.String(), wantErr)
	}
}

// Prompts delivers every non-blank line, and a last one without its
// newline, then closes at the end of the input.
func TestPromptLinePrompts(t *testing.T) {
	var errb strings.Builder
	r, w := io.Pipe()
	p := &PromptLine{In: r, Out: io.Discard, Err: &errb, Marker: "> "}
	ch := p.Prompts(context.Background())
	go func() {
		_, _ = io.WriteString(w, "first\n\n  second  \r\nlast")
		_ = w.Close()
	}()
	var got []string
	for pr := range ch {
		got = append(got, pr.Text)
	}
	if strings.Join(got, "|") != "first|second|last" {
		t.Errorf("prompts %q", got)
	}
	if errb.String() != "> " { // the blank line shows the marker again
		t.Errorf("err %q", errb.String())
	}
}
