//go:build unix

package openclaw

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStartGatewayTokenAndExit: the token reaches the gateway in its
// environment, never on its command line; a gateway that exits before it
// listens is an error with its exit status.
func TestStartGatewayTokenAndExit(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "seen")
	script := filepath.Join(dir, "openclaw")
	body := "#!/bin/sh\nprintf '%s\\n' \"$*\" > " + out + "\nprintf '%s\\n' \"$OPENCLAW_GATEWAY_TOKEN\" >> " + out + "\nexit 3\n"
	if err := os.WriteFile(script, []byte(body), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OPENCLAW_GATEWAY_TOKEN", "inherited")
	_, err := StartGateway(context.Background(), GatewayOptions{Command: []string{script}, Token: "s3cret", Dir: dir})
	if err == nil || !regexp.MustCompile(`^openclaw: the gateway exited \(status 3\) before listening on 127\.0\.0\.1:\d+$`).MatchString(err.Error()) {
		t.Fatalf("StartGateway: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || strings.Contains(lines[0], "s3cret") || !strings.HasSuffix(lines[0], "--bind loopback --allow-unconfigured --auth token") || lines[1] != "s3cret" {
		t.Fatalf("the gateway saw %q", lines)
	}
}
