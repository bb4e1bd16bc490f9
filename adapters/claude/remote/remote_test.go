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

// Answers for a call that waits on no request are refused before anything
// reaches Claude.
func TestAnswersNeedABlockedCall(t *testing.T) {
	a := &Agent{waiting: map[string]*sdk.PermissionRequest{}}
	if err := a.Decide(context.Background(), "toolu_9", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("Decide on an unknown call: %v", err)
	}
	if err := a.AnswerQuestion(context.Background(), "toolu_9", [][]string{{"a"}}); !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("AnswerQuestion on an unknown call: %v", err)
	}
}

// A question's answer goes back to Claude on Claude's own input, the one
// its request carries (multiSelect, not the canonical multiple), with the
// answers added; the fake CLI checks the updated input.
func TestAnswersUseClaudesInput(t *testing.T) {
	a, ctx := startScript(t, "question.traffic.jsonl")
	asked := false
	for ev := range a.Events() {
		if b, ok := ev.(*agent.ToolBlocked); ok {
			if b.CallID != "toolu_q" || b.Question == nil || b.Question.ID != "perm-q" || len(b.Question.Questions) != 1 || b.Question.Questions[0].Multiple == nil || !*b.Question.Questions[0].Multiple {
				t.Fatalf("blocked %+v", b)
			}
			asked = true
			if err := a.AnswerQuestion(ctx, b.CallID, [][]string{{"A", "B"}}); err != nil {
				t.Fatalf("answer: %v", err)
			}
		}
	}
	if !asked {
		t.Fatal("the question never reached the runner")
	}
	checkCleanExit(t, a)
}
