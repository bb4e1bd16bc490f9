package codex

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// rolloutCases are the copied rollouts (testdata/rollout/<case>/rollout-*.jsonl).
var rolloutCases = []string{"codex-app", "codex-app-decline", "codex-app-multi-tool", "codex-app-tool-error", "codex-exec"}

func rolloutFile(t *testing.T, name string) []byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "rollout", name, "rollout-*.jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("rollout of %s: %v %v", name, paths, err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRolloutGolden(t *testing.T) {
	for _, name := range rolloutCases {
		t.Run(name, func(t *testing.T) {
			data := rolloutFile(t, name)
			first, _, _ := bytes.Cut(data, []byte("\n"))
			if !IsRollout(first) {
				t.Fatalf("IsRollout(first line) = false")
			}
			evs, err := ReplayRollout(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, "rollout-"+name+".events.jsonl", encodeEvents(t, evs))
			tr, doc := reduce(t, "ses-rollout-"+name, evs)
			golden(t, "rollout-"+name+".transcript.json", doc)
			if len(tr.Dropped) != 0 {
				t.Errorf("dropped %+v", tr.Dropped)
			}
		})
	}
}

func TestIsRollout(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{`{"timestamp":"2026-11-29T15:11:40.109Z","type":"session_meta","payload":{"id":"x"}}`, true},
		{`  {"type":"event_msg","payload":{}}  `, true},
		{`{"t":1000,"dir":"a2c","msg":{"method":"turn/started"}}`, false},
		{`{"type":"item.completed","item":{}}`, false}, // codex exec --json
		{`{"type":"","payload":{}}`, false},
		{`{"type":"x","payload":[1]}`, false},
		{`not json`, false},
		{``, false},
	} {
		if got := IsRollout([]byte(tc.line)); got != tc.want {
			t.Errorf("IsRollout(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// tool is what a check compares of a tool part.
type toolSummary struct {
	Command string
	Status  mapper.ToolStatus
	Output  string
	Error   string
}

func summarize(t *testing.T, tr mapper.Transcript) (texts []string, prompts []string, tools []toolSummary) {
	t.Helper()
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case *mapper.TextPart:
				if m.Info.MessageRole() == mapper.RoleUser {
					prompts = append(prompts, p.Text)
				} else {
					texts = append(texts, p.Text)
				}
			case *mapper.ToolPart:
				cmd, _ := p.State.Input["command"].(string)
				tools = append(tools, toolSummary{Command: cmd, Status: p.State.Status, Output: p.State.Output, Error: p.State.Error})
			}
		}
	}
	return texts, prompts, tools
}

// The rollout and the traffic log of the same app-server run tell the
// same story: prompts, answers, tool commands (the traffic log has the
// argv Codex ran, /bin/bash -lc <command>, the rollout the model's
// command: both become the same canonical command), statuses, outputs and
// errors.
// A declined command is the exception on the error text: the traffic log
// has the decision ("rejected"), the rollout only what the model was told.
func TestRolloutAgreesWithTraffic(t *testing.T) {
	for _, name := range []string{"codex-app", "codex-app-decline", "codex-app-multi-tool", "codex-app-tool-error"} {
		t.Run(name, func(t *testing.T) {
			cfg := mapper.Config{SessionID: "ses-agree", Source: "codex"}
			rt, err := transcriptOf(cfg)(ReplayRollout(bytes.NewReader(rolloutFile(t, name))))
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join("testdata", "captures", name, "rpc-traffic.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			lt, err := transcriptOf(cfg)(Replay(f, ProtocolAuto))
			if err != nil {
				t.Fatal(err)
			}
			rTexts, rPrompts, rTools := summarize(t, rt)
			lTexts, lPrompts, lTools := summarize(t, lt)
			if strings.Join(rTexts, "\x00") != strings.Join(lTexts, "\x00") || len(rTexts) == 0 {
				t.Errorf("texts: rollout %q, traffic %q", rTexts, lTexts)
			}
			if strings.Join(rPrompts, "\x00") != strings.Join(lPrompts, "\x00") || len(rPrompts) != 1 {
				t.Errorf("prompts: rollout %q, traffic %q", rPrompts, lPrompts)
			}
			if len(rTools) != len(lTools) || len(rTools) == 0 {
				t.Fatalf("tools: rollout %+v, traffic %+v", rTools, lTools)
			}
			for i := range rTools {
				r, l := rTools[i], lTools[i]
				if l.Command != r.Command || r.Command == "" {
					t.Errorf("tool %d: traffic command %q, rollout command %q", i, l.Command, r.Command)
				}
				if r.Status != l.Status || r.Output != l.Output {
					t.Errorf("tool %d: rollout %+v, traffic %+v", i, r, l)
				}
				if name != "codex-app-decline" && r.Error != l.Error {
					t.Errorf("tool %d error: rollout %q, traffic %q", i, r.Error, l.Error)
				}
			}
		})
	}
}

// Edge cases: bad lines are dropped with their type, a prompt written both
// as a response item and as an event is one prompt, an output header gives
// the exit code when no end event does, an interrupted turn and a file
// that stops inside a turn end it.
func TestRolloutEdges(t *testing.T) {
	in := strings.Join([]string{
		`{"timestamp":"2026-01-01T00:00:00Z","type":"session_meta","payload":{"id":"th1","cwd":"/w","model_provider":"openai"}}`,
		`not json`,
		`[1,2]`,
		`{"timestamp":"2026-01-01T00:00:01Z","type":"mystery","payload":{}}`,
		`{"type":"event_msg","payload":{"type":"task_started","turn_id":"t1"}}`,
		`{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>x</environment_context>"}]}}`,
		`{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}}`,
		`{"type":"event_msg","payload":{"type":"user_message","message":"hello"}}`,
		`{"type":"response_item","payload":{"type":"reasoning","id":"rs1","summary":[{"type":"summary_text","text":"think"}]}}`,
		`{"type":"response_item","payload":{"type":"function_call","name":"shell","arguments":"{\"command\":[\"bash\",\"-lc\",\"false\"]}","call_id":"c1"}}`,
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"Process exited with code 1\nOutput:\nboom\n"}}`,
		`{"type":"response_item","payload":{"type":"function_call_output","call_id":"zz","output":"x"}}`,
		`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":10,"cached_input_tokens":4,"output_tokens":3}}}}`,
		`{"type":"event_msg","payload":{"type":"brand_new"}}`,
		`{"type":"event_msg","payload":{"type":"turn_aborted","turn_id":"t1","reason":"interrupted"}}`,
		`{"type":"event_msg","payload":{"type":"user_message","message":"again"}}`,
		`{"type":"response_item","payload":{"type":"local_shell_call","call_id":"c2","action":{"type":"exec","command":["ls","-l"]}}}`,
	}, "\n")
	evs, err := ReplayRollout(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		k := strings.TrimPrefix(strings.TrimPrefix(typeName(e), "*mapper."), "")
		if d, ok := e.(*agent.DroppedInput); ok {
			k += "(" + d.Dropped.Kind + "," + string(d.Dropped.Reason) + ")"
		}
		switch e := e.(type) {
		case *agent.TurnEnded:
			k += "(" + e.TurnID + "," + e.Reason + ")"
		case *agent.ToolFailed:
			k += "(" + e.Error + ")"
		case *agent.ToolCall:
			k += "(" + e.Tool + "," + string(e.Input) + ")"
		case *agent.Usage:
			k += "(" + strconvI(e.Tokens.Input) + "," + strconvI(e.Tokens.Output) + ")"
		}
		kinds = append(kinds, k)
	}
	want := []string{
		"SessionInfo",
		"DroppedInput(,unparseable_json)",
		"DroppedInput(,not_an_object)",
		"DroppedInput(mystery,unknown_type)",
		"TurnStarted",
		"UserPrompt",
		"ReasoningFinal",
		`ToolCall(bash,{"command":"false"})`,
		"ToolRunning",
		"ToolFailed(boom\n)",
		"DroppedInput(response_item:function_call_output,orphan)",
		"Usage(6,3)",
		"DroppedInput(event_msg:brand_new,unknown_type)",
		"TurnEnded(t1,interrupted)",
		"TurnStarted",
		"UserPrompt",
		`ToolCall(bash,{"command":"ls -l"})`,
		"ToolRunning",
		"TurnEnded(turn-2,truncated)",
	}
	if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
	}
}

func typeName(e agent.Event) string {
	b, _ := agent.EncodeEvent(e)
	var m struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(b, &m)
	return m.Type
}

func strconvI(p *int64) string {
	if p == nil {
		return "nil"
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

func FuzzRollout(f *testing.F) {
	for _, name := range rolloutCases {
		paths, _ := filepath.Glob(filepath.Join("testdata", "rollout", name, "rollout-*.jsonl"))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte(`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":{"content":[{"text":1}]}}}`))
	f.Add([]byte(`{"type":"event_msg","payload":{"type":"item_completed","item":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = IsRollout(data)
		if _, err := transcriptOf(mapper.Config{SessionID: "ses-fuzz"})(ReplayRollout(bytes.NewReader(data))); err != nil {
			t.Fatalf("error on an in-memory reader: %v", err)
		}
	})
}

// BenchmarkRollout replays the largest copied rollout (24 lines, 46 KB).
func BenchmarkRollout(b *testing.B) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "rollout", "codex-app-multi-tool", "rollout-*.jsonl"))
	if len(paths) != 1 {
		b.Fatal("rollout missing")
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := transcriptOf(mapper.Config{SessionID: "ses-bench"})(ReplayRollout(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
	}
}
