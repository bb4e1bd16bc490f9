package codex

import (
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
	if err := v.ToolPartsOfFiles("testdata/golden/*.transcript.json"); err != nil {
		t.Error(err)
	}
}
