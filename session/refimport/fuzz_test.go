package refimport_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session/refimport"
)

// FuzzImporter: the first line is the agentState, each further line a row
// (seq = its line number). Whatever they hold, the importer does not
// panic, its projection is a valid transcript (it encodes and decodes),
// every Dropped record has a reason and names a row it was given (or 0,
// the agentState), and a row that is not a legacy record with a known
// role is a Dropped record.
func FuzzImporter(f *testing.F) {
	for _, c := range []string{"session-protocol", "subagent", "agent-families", "refused"} {
		rows, _ := os.ReadFile(filepath.Join("testdata", "cases", c, "rows.jsonl"))
		st, _ := os.ReadFile(filepath.Join("testdata", "cases", c, "agentstate.json"))
		var plains [][]byte
		for _, line := range bytes.Split(rows, []byte("\n")) {
			var r goldenRow
			if json.Unmarshal(line, &r) == nil {
				plains = append(plains, r.Plain)
			}
		}
		f.Add(append(append(bytes.ReplaceAll(st, []byte("\n"), nil), '\n'), bytes.Join(plains, []byte("\n"))...))
	}
	f.Add([]byte("null\n{\"role\":\"session\",\"content\":{\"id\":\"x\",\"ev\":{\"t\":\"tool-call-end\"}}}\n[]\n{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines := bytes.Split(data, []byte("\n"))
		var im refimport.Importer
		im.SetAgentState(lines[0])
		for i, l := range lines[1:] {
			im.Add(int64(i+1), l)
		}
		tr := im.Transcript(root)
		doc, err := mapper.EncodeTranscript(tr)
		if err != nil {
			t.Fatalf("invalid projection: %v", err)
		}
		if _, _, err := mapper.DecodeTranscript(doc); err != nil {
			t.Fatalf("projection does not decode: %v", err)
		}
		dropped := map[int64]bool{}
		for _, d := range tr.Dropped {
			if d.Reason == "" || d.Source != refimport.DroppedSource || d.Line < 0 || d.Line > int64(len(lines)-1) {
				t.Fatalf("bad dropped record %+v", d)
			}
			dropped[d.Line] = true
		}
		for i, l := range lines[1:] {
			var env struct {
				Role string `json:"role"`
			}
			known := json.Unmarshal(l, &env) == nil && (env.Role == "user" || env.Role == "session" || env.Role == "agent")
			if !known && !dropped[int64(i+1)] {
				t.Fatalf("row %d (%q) neither mapped nor dropped", i+1, l)
			}
		}
	})
}
