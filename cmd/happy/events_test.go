//go:build unix

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/happy-dev/happy/localapi"
)

// --events-listen refuses a non-loopback address as a usage error, before
// anything starts, on every agent command.
func TestEventsListenRefusesNonLoopback(t *testing.T) {
	for _, args := range [][]string{
		{"claude", "-p", "x", "--events-listen", "0.0.0.0:4096"},
		{"codex", "-p", "x", "--events-listen", ":4096"},
		{"acp", "-p", "x", "--events-listen", "192.168.1.10:4096", "--", "true"},
	} {
		code, stdout, stderr := runHappy(t, nil, args...)
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "happy: --events-listen: the local event API listens on loopback only: ") {
			t.Errorf("happy %q = (%d, %q, %q), want a usage error", args, code, stdout, stderr)
		}
	}
}

// A -p run with --events-listen says where the API listens and where its
// token is, and leaves the token in the home, mode 0600.
func TestEventsListenSaysWhere(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	code, _, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*", "--events-listen", "127.0.0.1:0")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	tokenPath := filepath.Join(env["HAPPY_HOME_DIR"], "events.token")
	re := regexp.MustCompile(`(?m)^happy: live events on http://127\.0\.0\.1:\d+/event \(bearer token in ` + regexp.QuoteMeta(tokenPath) +
		`\): curl -N -H "Authorization: Bearer \$\(cat ` + regexp.QuoteMeta(tokenPath) + `\)" http://127\.0\.0\.1:\d+/event$`)
	if !re.MatchString(stderr) {
		t.Fatalf("stderr does not say where the API listens:\n%s", stderr)
	}
	b, err := os.ReadFile(tokenPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := localapi.ParseToken(b); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(tokenPath); st.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", st.Mode())
	}
}
