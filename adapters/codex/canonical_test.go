package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/mapper/schema"
)

// Every tool part of every golden transcript has a canonical tool name and
// the canonical input of that tool (docs/ARCHITECTURE.md, section "Tools").
func TestGoldenToolsAreCanonical(t *testing.T) {
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob("testdata/golden/*.transcript.json")
	if len(paths) == 0 {
		t.Fatal("no golden transcripts")
	}
	for _, p := range paths {
		doc, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.ToolParts(doc); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
