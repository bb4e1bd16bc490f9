package openclaw

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/export"
	gold "github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
)

// TestReplayGolden replays every traffic log under testdata/traffic (real
// gateway captures real-*.jsonl, and the fake gateway's recordings written
// by the client tests) and compares the events, the transcript document
// and its text rendering with testdata/golden/<name>.{events.jsonl,json,txt}
// (-update rewrites them).
func TestReplayGolden(t *testing.T) {
	logs, err := filepath.Glob(filepath.Join("testdata", "traffic", "*.jsonl"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no traffic logs: %v", err)
	}
	for _, path := range logs {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := Replay(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			gold.Check(t, filepath.Join("testdata", "golden", name+".events.jsonl"), encodeEvents(t, evs))
			red := mapper.NewReducer(mapper.Config{SessionID: "replay-" + name, Source: "openclaw"})
			for _, e := range evs {
				red.Apply(e)
			}
			tr := red.Transcript()
			doc, err := mapper.EncodeTranscript(tr)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, doc, "", "  "); err != nil {
				t.Fatal(err)
			}
			gold.Check(t, filepath.Join("testdata", "golden", name+".json"), append(out.Bytes(), '\n'))
			var txt bytes.Buffer
			if err := export.Text(&txt, tr, export.TextOptions{}); err != nil {
				t.Fatal(err)
			}
			gold.Check(t, filepath.Join("testdata", "golden", name+".txt"), txt.Bytes())
			if strings.HasPrefix(name, "real-") || strings.HasPrefix(name, "fake-") {
				if len(tr.Dropped) > 0 {
					t.Errorf("%d dropped records in a capture: %+v", len(tr.Dropped), tr.Dropped[0])
				}
			}
		})
	}
}
