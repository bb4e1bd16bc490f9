package claude

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
)

// captures lists every Claude capture of the shared test data (copied
// unchanged into testdata/, see testdata/SOURCE.md) in each form it exists
// in. The same run recorded as session JSONL and as stream-json (or SDK
// traffic) is listed under one case name.
var captures = []struct {
	name  string
	form  Form
	input string // relative to testdata/<name>/
}{
	{"claude-default", FormSessionJSONL, "474e1844-fdca-4096-bc7e-7e032f8f693f.jsonl"},
	{"claude-default", FormStreamJSON, "stdout.jsonl"},
	{"claude-partial", FormSessionJSONL, "0c42952f-c66d-45e8-a93c-b1231ad2c717.jsonl"},
	{"claude-partial", FormStreamJSON, "stdout.jsonl"},
	{"claude-perm-default", FormSessionJSONL, "3b9d847f-2413-4fc8-b0e8-38674320982a.jsonl"},
	{"claude-perm-default", FormStreamJSON, "stdout.jsonl"},
	{"claude-sdk-stdio", FormSessionJSONL, "d7a09215-df2c-471b-ae6c-2c912852a407.jsonl"},
	{"claude-sdk-stdio", FormTrafficLog, "sdk-traffic.jsonl"},
	{"claude-sdk-stdio-deny", FormSessionJSONL, "9bbb289b-a0e9-4622-9c88-982cac850627.jsonl"},
	{"claude-sdk-stdio-deny", FormTrafficLog, "sdk-traffic.jsonl"},
	{"claude-claude-task", FormSessionJSONL, "claude-project/a3ba2153-280d-414f-b455-2c0308493d25.jsonl"},
	{"claude-claude-task", FormStreamJSON, "stdout.jsonl"},
	{"claude-long-output", FormSessionJSONL, "claude-project/03d3aaba-d7b7-465c-bac3-1b57d46fe749.jsonl"},
	{"claude-long-output", FormStreamJSON, "stdout.jsonl"},
	{"claude-parallel", FormSessionJSONL, "claude-project/24813172-4e02-474f-802e-46ed88ee7978.jsonl"},
	{"claude-parallel", FormStreamJSON, "stdout.jsonl"},
	{"claude-thinking", FormSessionJSONL, "claude-project/24c4ad27-8dc8-47ad-abf7-8bf19df22631.jsonl"},
	{"claude-thinking", FormStreamJSON, "stdout.jsonl"},
	{"claude-sdk-multi-turn", FormSessionJSONL, "claude-project/edf974e9-34b9-44f2-a71a-9cea1b21da69.jsonl"},
	{"claude-sdk-multi-turn", FormTrafficLog, "sdk-traffic.jsonl"},
	{"claude-sdk-todowrite", FormSessionJSONL, "claude-project/5fd4c330-9a1f-4e34-9322-19eccec6dc88.jsonl"},
	{"claude-sdk-todowrite", FormTrafficLog, "sdk-traffic.jsonl"},
	{"claude-code-acp-todo", FormSessionJSONL, "claude-project/e294ac8b-77b6-4793-a55c-118c25fcc1fb.jsonl"},
	{"interactive-r1", FormSessionJSONL, "session/cbe164e8-ff82-4bd9-8bc9-0ca70dc52318.jsonl"},
	{"interactive-r9-pr-deny", FormSessionJSONL, "session/8a453d5e-3de0-4aed-8fcc-ccf48fbdcd0c.jsonl"},
	{"interactive-r11-answer-3", FormSessionJSONL, "session/bde9506c-a1e7-4d16-b947-2a0ba0df7483.jsonl"},
	{"interactive-r20-subagent", FormSessionJSONL, "session/5d8a3d59-15e7-4fe1-81c2-c31171c0953f.jsonl"},
	{"interactive-r21-session-id", FormSessionJSONL, "session/11111111-2222-4333-8444-555555555555.jsonl"},
}

// replayEvents replays a testdata file with form detection and returns its
// events.
func replayEvents(t *testing.T, path string) ([]agent.Event, ReplayStats) {
	t.Helper()
	var evs []agent.Event
	stats, err := ReplayFile(context.Background(), path, ReplayOptions{}, func(ev agent.Event) error {
		evs = append(evs, ev)
		return nil
	})
	if err != nil {
		t.Fatalf("replay %s: %v", path, err)
	}
	return evs, stats
}

// encodeEvents writes events in their JSON form, one per line.
func encodeEvents(t *testing.T, evs []agent.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		b, err := agent.EncodeEvent(ev)
		if err != nil {
			t.Fatalf("encode %T: %v", ev, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// transcriptOf applies events to a fresh reducer and encodes the document.
func transcriptOf(t *testing.T, evs []agent.Event) (mapper.Transcript, []byte) {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: "golden", ProviderID: ProviderID})
	for _, ev := range evs {
		red.Apply(ev)
	}
	tr := red.Transcript()
	b, err := mapper.EncodeTranscript(tr)
	if err != nil {
		t.Fatalf("encode transcript: %v", err)
	}
	return tr, golden.Indent(t, b)
}

// TestGoldenCaptures maps every capture in each of its forms to an event
// sequence (<form>.events.jsonl) and a transcript document
// (<form>.expected.json), compared with the golden files.
func TestGoldenCaptures(t *testing.T) {
	for _, c := range captures {
		t.Run(c.name+"/"+c.form.String(), func(t *testing.T) {
			dir := filepath.Join("testdata", c.name)
			evs, stats := replayEvents(t, filepath.Join(dir, c.input))
			if stats.Form != c.form {
				t.Fatalf("detected form %v, want %v", stats.Form, c.form)
			}
			tr, doc := transcriptOf(t, evs)
			golden.Check(t, filepath.Join(dir, c.form.String()+".events.jsonl"), encodeEvents(t, evs))
			golden.Check(t, filepath.Join(dir, c.form.String()+".expected.json"), doc)
			// A real capture decodes without refusals, by the decoder or
			// the reducer.
			if n := countDropped(tr); n != 0 || stats.Dropped != 0 {
				t.Fatalf("%d dropped in the transcript, %d by the decoder: %+v", n, stats.Dropped, allDropped(tr))
			}
			// Every turn ends and every tool settles.
			for _, s := range allSessions(tr) {
				for _, m := range s.Messages {
					for _, p := range m.Parts {
						if tp, ok := p.(*mapper.ToolPart); ok && tp.State.Status.Open() {
							t.Errorf("tool %s left %s", tp.CallID, tp.State.Status)
						}
					}
					if a, ok := m.Info.(*mapper.AssistantMessage); ok && a.Time.Completed == nil {
						t.Errorf("assistant message %s never completed", a.ID)
					}
				}
			}
		})
	}
}

func allSessions(tr mapper.Transcript) []mapper.Transcript {
	out := []mapper.Transcript{tr}
	for _, c := range tr.Children {
		out = append(out, allSessions(c)...)
	}
	return out
}

func allDropped(tr mapper.Transcript) []agent.Dropped {
	var out []agent.Dropped
	for _, s := range allSessions(tr) {
		out = append(out, s.Dropped...)
	}
	return out
}

func countDropped(tr mapper.Transcript) int { return len(allDropped(tr)) }
