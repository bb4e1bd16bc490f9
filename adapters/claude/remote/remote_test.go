package remote

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/agent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
