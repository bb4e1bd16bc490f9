//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/happy-dev/happy/adapters/claude/dual"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
)

// A prompt sent from another home to an interactive happy claude: Claude
// leaves its terminal UI for remote mode, and the terminal shows the turn
// (the prompt, the answer, the tool's states) instead of a frozen screen;
// space twice gives the terminal back to Claude's UI, and nothing of the
// view is written after that.
func TestInteractiveClaudeShowsTheRemoteTurn(t *testing.T) {
	env := codexTestEnv(t, nil)
	claude, _ := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	envB := map[string]string{"HAPPY_SERVER_URL": env["HAPPY_SERVER_URL"], "HAPPY_HOME_DIR": t.TempDir()}
	creds, err := os.ReadFile(filepath.Join(env["HAPPY_HOME_DIR"], crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(envB["HAPPY_HOME_DIR"], crypto.CredentialsFileName), creds, 0o600); err != nil {
		t.Fatal(err)
	}
	c, master, scr := startOnPTY(t, env, "claude")
	sid := c.sessionID(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("screen:\n%q\nstderr:\n%s", scr.String(), c.errText())
		}
	})
	waitOutput(t, "the fake Claude's screen", scr, "FAKE READY", nil)
	if code, out, errOut := runHappy(t, envB, "send", sid, "use the tool"); code != exitOK {
		t.Fatalf("happy send: %d %s %s", code, out, errOut)
	}
	waitOutput(t, "the remote turn", scr, "Answer to use the tool", nil)
	screen := scr.String()
	_, view, _ := strings.Cut(screen, "FAKE READY")
	want := "> use the tool\r\n" +
		"● bash echo hi — running\r\n" +
		"● bash echo hi — completed\r\n" +
		"Answer to use the tool"
	if !strings.Contains(view, want) {
		t.Fatalf("screen after Claude's UI:\n%q\nwant it to show\n%q", view, want)
	}
	waitfor.Until(t, "the remote notice", func() bool { return strings.Contains(c.errText(), dual.NoticeRemote+"\r\n") })

	if _, err := master.Write([]byte(" ")); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "the confirmation", func() bool { return strings.Contains(c.errText(), dual.NoticeConfirm+"\r\n") })
	if _, err := master.Write([]byte(" ")); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "Claude's UI again", func() bool { return strings.Count(scr.String(), "FAKE READY") == 2 })
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want 130: %s", code, c.errText())
	}
	_, after, _ := strings.Cut(scr.String()[len(screen):], "FAKE READY")
	if strings.Contains(after, "●") || strings.Contains(after, "Answer to") || strings.Contains(after, "> ") {
		t.Fatalf("the view wrote after Claude's UI came back:\n%q", after)
	}
}
