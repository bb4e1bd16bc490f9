package refimport_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
	"github.com/happy-dev/happy/session/refimport"
)

// goldenRow is one line of a case's rows.jsonl: a relay row as happy log
// reads it (seq, localId, decrypted plaintext).
type goldenRow struct {
	Seq     int64           `json:"seq"`
	LocalID string          `json:"localId"`
	Plain   json.RawMessage `json:"plain"`
}

func loadRows(t *testing.T, path string) []goldenRow {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []goldenRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r goldenRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rows = append(rows, r)
	}
	return rows
}

var root = mapper.Session{ID: "relay-ref-1", Directory: "/home/dev/proj", Time: mapper.SessionTime{Created: 1, Updated: 2}}

// readCase reads a case folder through session.Readback, as happy log
// does: rows.jsonl, and agentstate.json when present.
func readCase(t *testing.T, dir string) *session.Readback {
	t.Helper()
	rb := session.NewReadback(root)
	if st, err := os.ReadFile(filepath.Join(dir, "agentstate.json")); err == nil {
		rb.SetAgentState(st)
	}
	for _, r := range loadRows(t, filepath.Join(dir, "rows.jsonl")) {
		rb.Add(r.Seq, r.LocalID, r.Plain)
	}
	return rb
}

// TestGolden reads each case's rows (hand-made after seed 000 and the
// reference CLI's shapes: see testdata/README.md) as happy log does, and
// checks the transcript document (transcript.golden.json), its readable
// rendering (text.golden.txt) and its flat events (events.golden.jsonl).
// The document must decode again: what the importer makes is canonical.
func TestGolden(t *testing.T) {
	golden.Cases(t, filepath.Join("testdata", "cases"), func(t *testing.T, dir string) {
		rb := readCase(t, dir)
		if !rb.Imported() {
			t.Fatal("a session of legacy rows only is not read as imported")
		}
		tr := rb.Transcript()
		doc, err := mapper.EncodeTranscript(tr)
		if err != nil {
			t.Fatalf("the projection is not a valid transcript: %v", err)
		}
		back, _, err := mapper.DecodeTranscript(doc)
		if err != nil {
			t.Fatalf("the projection does not decode: %v", err)
		}
		if again, _ := mapper.EncodeTranscript(back); !bytes.Equal(again, doc) {
			t.Fatal("the projection changes when decoded and encoded again")
		}
		golden.Check(t, filepath.Join(dir, "transcript.golden.json"), golden.Indent(t, doc))
		var text bytes.Buffer
		if err := export.Text(&text, tr, export.TextOptions{SessionID: root.ID, Stopped: true}); err != nil {
			t.Fatal(err)
		}
		golden.Check(t, filepath.Join(dir, "text.golden.txt"), text.Bytes())
		var flat bytes.Buffer
		enc := json.NewEncoder(&flat)
		enc.SetEscapeHTML(false)
		for _, ev := range export.Flat(tr) {
			if err := enc.Encode(ev); err != nil {
				t.Fatal(err)
			}
		}
		golden.Check(t, filepath.Join(dir, "events.golden.jsonl"), flat.Bytes())
		var w bytes.Buffer
		if err := rb.WriteDocument(&w, func(int64, func(int64, string, func() ([]byte, error)) error) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), doc) {
			t.Fatal("WriteDocument (happy log --json) writes another document than Transcript")
		}
	})
}

// TestCanonicalSessionKeepsLegacyAsCompanions: in a session with canonical
// records the legacy rows are happy's companions, counted, not imported.
func TestCanonicalSessionKeepsLegacyAsCompanions(t *testing.T) {
	rb := session.NewReadback(root)
	rb.Add(1, "legacy:e1.1", []byte(`{"role":"session","content":{"id":"e1","time":1,"role":"user","ev":{"t":"text","text":"hi"}}}`))
	if !rb.Imported() {
		t.Fatal("legacy rows alone are not imported")
	}
	rb.Add(2, root.ID+".1", []byte(`{"kind":"session","version":1,"session":{"id":"`+root.ID+`","projectID":"p","directory":"/d","title":"t","time":{"created":1,"updated":1}}}`))
	if rb.Imported() {
		t.Fatal("a session with a session record is read as imported")
	}
	tr := rb.Transcript()
	if len(tr.Messages) != 0 || len(tr.Dropped) != 0 || rb.Legacy != 1 || tr.Session.Title != "t" {
		t.Fatalf("messages %d, dropped %v, legacy %d, title %q", len(tr.Messages), tr.Dropped, rb.Legacy, tr.Session.Title)
	}
}

// TestTitle: an untitled session takes its first prompt's first line; a
// titled one (metadata summary, given as the root's title) keeps it.
func TestTitle(t *testing.T) {
	row := []byte(`{"role":"user","content":{"type":"text","text":"  Fix the login bug\nin auth.go"}}`)
	var im refimport.Importer
	im.Add(1, row)
	if got := im.Transcript(root).Session.Title; got != "Fix the login bug" {
		t.Fatalf("title %q", got)
	}
	titled := root
	titled.Title = "Login work"
	if got := im.Transcript(titled).Session.Title; got != "Login work" {
		t.Fatalf("title %q", got)
	}
}

// TestCanonicalTool: the Claude names and keys compat.NativeTool writes
// come back as the canonical tools; MCP names and others as they are.
func TestCanonicalTool(t *testing.T) {
	for _, c := range []struct {
		name string
		in   agent.Object
		tool string
		want agent.Object
	}{
		{"Edit", agent.Object{"file_path": "a", "old_string": "x", "new_string": "y", "replace_all": true}, agent.ToolEdit,
			agent.Object{"path": "a", "oldString": "x", "newString": "y", "replaceAll": true}},
		{"Task", agent.Object{"subagent_type": "Explore", "prompt": "p"}, agent.ToolTask, agent.Object{"agent": "Explore", "prompt": "p"}},
		{"Bash", agent.Object{"command": "ls"}, agent.ToolBash, agent.Object{"command": "ls"}},
		{"mcp__files__search", agent.Object{"q": 1}, "mcp:files/search", agent.Object{"q": 1}},
		{"mcp__x", agent.Object{}, "mcp__x", agent.Object{}},
		{"execute", agent.Object{"cmd": "ls"}, "execute", agent.Object{"cmd": "ls"}},
	} {
		tool, in := refimport.CanonicalTool(c.name, c.in)
		if tool != c.tool || !jsonEqual(in, c.want) {
			t.Errorf("%s: %s %v, want %s %v", c.name, tool, in, c.tool, c.want)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
