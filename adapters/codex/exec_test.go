package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

func TestGoldenExecCapture(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "captures-exec", "codex-exec", "stdout.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := ReplayExec(f)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "codex-exec.events.jsonl", encodeEvents(t, evs))
	tr, doc := reduce(t, "relay-codex-exec", evs)
	golden(t, "codex-exec.transcript.json", doc)
	got := tools(tr)
	if s := state(got["item_1"]); s != "completed:hi\n" {
		t.Errorf("command = %q", s)
	}
	if len(tr.Dropped) != 0 {
		t.Errorf("dropped %+v", tr.Dropped)
	}
	var text []string
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				text = append(text, tp.Text)
			}
		}
	}
	if len(text) != 1 || text[0] != "Done: the command printed hi." {
		t.Errorf("texts %q", text)
	}
}

func TestExecDecoderKinds(t *testing.T) {
	in := `{"type":"thread.started","thread_id":"t"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"r","type":"reasoning","text":"hmm"}}
{"type":"item.started","item":{"id":"f","type":"file_change","changes":[{"path":"a","kind":"update"}],"status":"in_progress"}}
{"type":"item.completed","item":{"id":"f","type":"file_change","changes":[{"path":"a","kind":"update"}],"status":"failed"}}
{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"s","tool":"t","arguments":{},"result":{"content":[{"type":"text","text":"ok"}]},"status":"completed"}}
{"type":"item.completed","item":{"id":"w","type":"web_search","query":"q"}}
{"type":"item.updated","item":{"id":"td","type":"todo_list","items":[{"text":"a","completed":true},{"text":"b","completed":false}]}}
{"type":"item.completed","item":{"id":"x","type":"alien"}}
{"type":"item.completed","item":{"type":"agent_message"}}
[1]
nope
{"type":"wormhole"}
{"type":"turn.failed","error":{"message":"boom"}}`
	evs, err := ReplayExec(bytes.NewReader([]byte(in)))
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := reduce(t, "exec-kinds", evs)
	got := tools(tr)
	for id, want := range map[string]string{"f": "error:patch failed", "m": "completed:ok", "w": "completed:"} {
		if s := state(got[id]); s != want {
			t.Errorf("%s = %q, want %q", id, s, want)
		}
	}
	if len(tr.Todos) != 2 || tr.Todos[0].Status != agent.TodoCompleted {
		t.Errorf("todos %+v", tr.Todos)
	}
	var reasons []string
	for _, d := range tr.Dropped {
		reasons = append(reasons, string(d.Reason))
	}
	if len(reasons) != 5 || reasons[0] != "unknown_type" || reasons[1] != "missing_id" || reasons[2] != "not_an_object" || reasons[3] != "unparseable_json" || reasons[4] != "unknown_type" {
		t.Errorf("drop reasons %v", reasons)
	}
	if got := turnEnds(evs); len(got) != 1 || got[0] != "exec-turn-1:failed" {
		t.Errorf("turn ends %v", got)
	}
}

func FuzzExecDecode(f *testing.F) {
	b, _ := os.ReadFile(filepath.Join("testdata", "captures-exec", "codex-exec", "stdout.jsonl"))
	f.Add(b)
	f.Add([]byte(`{"type":"item.completed","item":{"id":"c","type":"command_execution","exit_code":1,"status":"failed"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := ReplayExec(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		red := mapper.NewReducer(mapper.Config{SessionID: "fuzz"})
		for _, e := range evs {
			if _, err := agent.EncodeEvent(e); err != nil {
				t.Fatalf("event does not encode: %v", err)
			}
			red.Apply(e)
		}
		if _, err := mapper.EncodeTranscript(red.Transcript()); err != nil {
			t.Fatal(err)
		}
	})
}
