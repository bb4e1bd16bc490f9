package app

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// TestFollowReferenceSession: happy log --follow of a session the
// reference CLI wrote, its rows arriving one by one, prints what the
// importer projects: the flat events (--json, --events) of the whole
// session once each, and the readable layout of happy log.
func TestFollowReferenceSession(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "session", "refimport", "testdata", "cases", "session-protocol", "rows.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []RowEvent
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Seq   int64           `json:"seq"`
			Plain json.RawMessage `json:"plain"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, RowEvent{Seq: r.Seq, LocalID: "x", Plain: r.Plain})
	}
	root := mapper.Session{ID: "relay-ref-1", Directory: "/home/dev/proj"}
	for _, asJSON := range []bool{true, false} {
		var out bytes.Buffer
		rb := session.NewReadback(root)
		p := NewFollowPrinter(&out, rb, FollowPrinterOptions{JSON: asJSON, Text: export.TextOptions{SessionID: root.ID}})
		for _, r := range rows {
			if err := p.Take(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Print(true); err != nil {
			t.Fatal(err)
		}
		tr := rb.Transcript()
		if asJSON {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			for _, ev := range export.Flat(tr) {
				_ = enc.Encode(ev)
			}
			if out.String() != want.String() {
				t.Fatalf("followed events:\n%s\nwant (happy log --events):\n%s", out.String(), want.String())
			}
			continue
		}
		var whole bytes.Buffer
		if err := export.Text(&whole, tr, export.TextOptions{SessionID: root.ID}); err != nil {
			t.Fatal(err)
		}
		body := whole.String()[strings.Index(whole.String(), "> List"):]
		if out.String() != body {
			t.Fatalf("followed:\n%s\nwant (happy log without its header):\n%s", out.String(), body)
		}
	}
}
