//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildHappy builds the happy binary once per test binary into a temp folder.
func buildHappy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "happy")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X github.com/happy-dev/happy/internal/buildinfo.Version=e2e-test", "-o", bin, "../cmd/happy")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestE2EBinaryVersionAndUsage(t *testing.T) {
	bin := buildHappy(t)
	home := t.TempDir()

	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("happy --version: %v", err)
	}
	if got, want := string(out), "happy e2e-test\n"; got != want {
		t.Fatalf("happy --version = %q, want %q", got, want)
	}

	cmd := exec.Command(bin, "--no-such-flag")
	cmd.Env = append(os.Environ(), "HAPPY_HOME_DIR="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 2 {
		t.Fatalf("happy --no-such-flag: err %v, want exit status 2", err)
	}
	if !strings.Contains(stderr.String(), "unknown flag: --no-such-flag") {
		t.Fatalf("stderr = %q, want the unknown flag named", stderr.String())
	}
}
