package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/claude/sdk"
	"github.com/happy-dev/happy/agent"
)

func TestMain(m *testing.M) {
	if script := os.Getenv(fakeScriptEnv); script != "" {
		os.Exit(runFakeClaude(script))
	}
	goleak.VerifyTestMain(m)
}

// A permission the runner answered (a rule, a person on another device) is
// recorded by the runner; the tool's result must not be read as an answer
// given inside Claude (a second, conflicting ToolResolved). The scripts are
// real captures of a can_use_tool answered allow and deny.
func TestDecidedCallIsNotAnsweredAgain(t *testing.T) {
	cases := []struct {
		script   string
		decision agent.Decision
		end      string // the type of the tool's last event
	}{
		{"allow.traffic.jsonl", agent.DecisionOnce, "*agent.ToolCompleted"},
		{"deny.traffic.jsonl", agent.DecisionReject, "*agent.ToolFailed"},
	}
	for _, c := range cases {
		t.Run(c.script, func(t *testing.T) {
			script, err := filepath.Abs(filepath.Join("testdata", c.script))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			a, err := Start(ctx, Options{SDK: sdk.Options{Binary: os.Args[0], Env: append(os.Environ(), fakeScriptEnv+"="+script, "GORACE=atexit_sleep_ms=0"), Grace: 2 * time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := a.Prompt(ctx, agent.Prompt{Text: "Run echo hi > hi.txt"}); err != nil {
				t.Fatal(err)
			}
			var after []string // events of the call after the answer
			decided := false
			for ev := range a.Events() {
				if b, ok := ev.(*agent.ToolBlocked); ok && b.CallID == "toolu_fake_2" {
					if err := a.Decide(ctx, b.CallID, agent.Verdict{Decision: c.decision, Reason: "rule"}); err != nil {
						t.Fatalf("decide: %v", err)
					}
					decided = true
					continue
				}
				if !decided {
					continue
				}
				switch e := ev.(type) {
				case *agent.ToolResolved:
					after = append(after, "*agent.ToolResolved "+string(e.Decision)+" "+e.Reason)
				case *agent.ToolCompleted, *agent.ToolFailed, *agent.ToolRunning:
					after = append(after, fmt.Sprintf("%T", ev))
				case *agent.DroppedInput:
					t.Errorf("dropped: %+v", e.Dropped)
				}
			}
			if !decided || len(after) != 1 || after[0] != c.end {
				t.Fatalf("decided %v; events of the call after the answer %q, want only %s", decided, after, c.end)
			}
		})
	}
}

func TestQuestionInputAddsAnswersByQuestion(t *testing.T) {
	in := json.RawMessage(`{"questions":[{"question":"Which database?","header":"DB","options":[]},{"question":"Which port?","header":"Port","options":[]}]}`)
	out, err := questionInput(in, [][]string{{"PostgreSQL"}, {"5432", "5433"}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Questions []any             `json:"questions"`
		Answers   map[string]string `json:"answers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Questions) != 2 || got.Answers["Which database?"] != "PostgreSQL" || got.Answers["Which port?"] != "5432, 5433" {
		t.Fatalf("updated input %s", out)
	}
	if _, err := questionInput(json.RawMessage(`[1]`), nil); err == nil {
		t.Fatal("an array input was accepted")
	}
	out, err = questionInput(nil, [][]string{{"x"}})
	if err != nil || string(out) != `{"answers":{}}` {
		t.Fatalf("no input: %s %v", out, err)
	}
}

func TestParseDataURL(t *testing.T) {
	cases := []struct {
		in         string
		mime, data string
		ok         bool
	}{
		{"data:image/png;base64,AAAA", "image/png", "AAAA", true},
		{"data:text/plain,hello", "", "", false},
		{"https://example.invalid/x.png", "", "", false},
		{"data:image/png;base64", "", "", false},
	}
	for _, c := range cases {
		mime, data, ok := parseDataURL(c.in)
		if ok != c.ok || (ok && (mime != c.mime || data != c.data)) {
			t.Errorf("parseDataURL(%q) = %q %q %v", c.in, mime, data, ok)
		}
	}
}

// noteEvents keeps the request id of every blocked call; answers for other
// calls are refused before anything reaches Claude.
func TestAnswersNeedABlockedCall(t *testing.T) {
	a := &Agent{requests: map[string]string{}, inputs: map[string]json.RawMessage{}}
	a.noteEvents([]agent.Event{
		&agent.ToolCall{CallID: "toolu_1", Input: json.RawMessage(`{"command":"ls"}`)},
		&agent.ToolBlocked{CallID: "toolu_1", Permission: &agent.PermissionRequest{ID: "req-7"}},
		&agent.ToolBlocked{CallID: "toolu_2", Question: &agent.QuestionRequest{ID: "req-8"}},
	})
	if a.requests["toolu_1"] != "req-7" || a.requests["toolu_2"] != "req-8" || string(a.inputs["toolu_1"]) != `{"command":"ls"}` {
		t.Fatalf("requests %v inputs %v", a.requests, a.inputs)
	}
	if err := a.Decide(context.Background(), "toolu_9", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("Decide on an unknown call: %v", err)
	}
	if err := a.AnswerQuestion(context.Background(), "toolu_9", [][]string{{"a"}}); !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("AnswerQuestion on an unknown call: %v", err)
	}
}

// An answer goes back to Claude on Claude's own input (multiSelect, not the
// canonical multiple), which the call's announcement carries in its
// metadata; a later canonical input does not replace it.
func TestAnswersUseClaudesInput(t *testing.T) {
	a := &Agent{requests: map[string]string{}, inputs: map[string]json.RawMessage{}}
	claude := map[string]any{"questions": []any{map[string]any{"question": "Q?", "header": "H", "multiSelect": true, "options": []any{}}}}
	a.noteEvents([]agent.Event{
		&agent.ToolCall{CallID: "q1", Tool: agent.ToolQuestion, Input: json.RawMessage(`{"questions":[{"question":"Q?","header":"H","options":[],"multiple":true}]}`),
			Metadata: agent.Object{agent.MetaProviderTool: "AskUserQuestion", agent.MetaProviderInput: claude}},
		&agent.ToolBlocked{CallID: "q1", Tool: agent.ToolQuestion, Input: json.RawMessage(`{"questions":[{"question":"Q?","header":"H","options":[],"multiple":true}]}`),
			Question: &agent.QuestionRequest{ID: "r1"}},
	})
	out, err := questionInput(a.inputs["q1"], [][]string{{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"answers":{"Q?":"a, b"},"questions":[{"header":"H","multiSelect":true,"options":[],"question":"Q?"}]}`; string(out) != want {
		t.Errorf("updated input %s, want %s", out, want)
	}
	if a.requests["q1"] != "r1" {
		t.Errorf("request %q", a.requests["q1"])
	}
}
