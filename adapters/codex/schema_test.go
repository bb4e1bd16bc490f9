package codex

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/adapters/codex/internal/codextest"
	"github.com/happy-dev/happy/adapters/trafficlog"
)

// TestCapturesValidateAgainstSchema: every message of the app-server
// captures, both directions, is valid for the 0.171.0 schema.
func TestCapturesValidateAgainstSchema(t *testing.T) {
	for _, name := range []string{"codex-app", "codex-app-decline", "codex-app-multi-tool", "codex-app-tool-error"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", "captures", name, "rpc-traffic.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if n := codextest.ValidateTraffic(t, raw, trafficlog.C2A, trafficlog.A2C); n < 30 {
				t.Errorf("only %d messages checked", n)
			}
		})
	}
}
