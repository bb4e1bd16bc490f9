package codex

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/codex/internal/codextest"
)

// TestMain lets the test binary act as a scripted Codex process (see
// codextest.FakeProcess): TestChooseProtocol runs it for --version.
func TestMain(m *testing.M) {
	codextest.FakeProcess()
	os.Exit(m.Run())
}

func TestChooseProtocol(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		out  string
		want Protocol
	}{
		{"codex-cli 0.171.0", ProtocolAppServer},
		{"codex-cli 0.60.0", ProtocolAppServer},
		{"codex-cli 0.59.9", ProtocolMCP},
		{"codex-cli 0.50.0", ProtocolMCP},
	} {
		t.Setenv(codextest.ScriptEnv, "unused")
		t.Setenv(codextest.VersionEnv, tc.out)
		p, v, err := ChooseProtocol(context.Background(), exe)
		if err != nil || p != tc.want || !strings.HasSuffix(tc.out, v) {
			t.Errorf("ChooseProtocol(%q) = %s %q %v, want %s", tc.out, p, v, err, tc.want)
		}
	}
	if _, _, err := protocolForVersion("codex-cli dev"); err == nil {
		t.Error("accepted a version string without a version")
	}
	if _, _, err := ChooseProtocol(context.Background(), "/nonexistent/codex"); err == nil {
		t.Error("accepted a missing binary")
	}
}
