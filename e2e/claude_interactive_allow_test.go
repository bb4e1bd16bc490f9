//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// Claude's own terminal UI with an --allow rule, three runs: the command
// the rule allowed runs and is recorded completed with the rule's answer,
// the turn completes, and nothing is dropped. Claude writes its own record
// of the hook's decision, before or after the call's result: it is the
// echo of happy's answer, not a second answer (which replaced the rule's)
// nor an orphan (a Dropped record).
func TestE2EClaudeInteractiveAllow(t *testing.T) {
	const allowRuns = 3
	claudeBin := agentBinary(t, "CLAUDE")
	for run := 1; run <= allowRuns; run++ {
		relay := startRelay(t)
		hs := homes(t, relay.URL, 2)
		work := t.TempDir()
		model, err := fakemodel.New(fakemodel.Script{
			ToolName:  "Bash",
			ToolInput: map[string]any{"command": "echo hi > hi.txt", "description": "Write hi.txt"},
			FinalText: "Created hi.txt.",
		})
		if err != nil {
			t.Fatal(err)
		}
		ch := claudeHome(t, work, "sk-e2e-dummy-key-0123456789")
		envA := claudeEnv(ch, hs[0], relay.URL, model.URL, claudeBin)
		envB := claudeEnv(ch, hs[1], relay.URL, model.URL, claudeBin)
		master, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no PTY: %v", err)
		}
		if err := pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(happyBin, "claude", "--allow", "bash:echo hi*", "--", "--model", "claude-sonnet-4-5")
		cmd.Env, cmd.Dir = envA, work
		cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		scr := &screen{}
		go func() { _, _ = copyUntilErr(scr, master) }()
		waitFor(t, 30*time.Second, "Claude's prompt on screen", func() bool { return scr.contains("shortcuts") })
		time.Sleep(300 * time.Millisecond) // Claude's UI takes keys a moment after it draws
		if _, err := master.Write([]byte("Create hi.txt")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if _, err := master.Write([]byte("\r")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, "the answer on screen", func() bool { return scr.contains("Created hi.txt.") })
		var sid, log string
		waitFor(t, 30*time.Second, "the turn on the relay", func() bool {
			code, out, _ := happyRun(t, envB, work, "sessions", "--json")
			var list []struct{ ID string }
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
				return false
			}
			sid = list[0].ID
			code, log, _ = happyRun(t, envB, work, "log", sid)
			return code == 0 && strings.Contains(log, "Created hi.txt.")
		})
		for i := 0; i < 2; i++ {
			_, _ = master.Write([]byte{0x03})
			time.Sleep(500 * time.Millisecond)
		}
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("run %d: happy claude did not exit after Ctrl-C; screen:\n%s", run, scr.String())
		}
		master.Close()
		tty.Close()
		model.Close()
		if b, err := os.ReadFile(filepath.Join(work, "hi.txt")); err != nil || string(b) != "hi\n" {
			t.Errorf("run %d: hi.txt: %q, %v", run, b, err)
		}
		_, log, _ = happyRun(t, envB, work, "log", sid)
		for _, want := range []string{"bash echo hi > hi.txt — completed", "allowed by rule bash:echo hi*", "Created hi.txt."} {
			if !strings.Contains(log, want) {
				t.Errorf("run %d: happy log lacks %q:\n%s", run, want, log)
			}
		}
		for _, bad := range []string{"dropped", "interrupted", "aborted"} {
			if strings.Contains(log, bad) {
				t.Errorf("run %d: happy log says %q:\n%s", run, bad, log)
			}
		}
		_, doc, _ := happyRun(t, envB, work, "log", sid, "--json")
		if strings.Contains(doc, `"created": 0`) {
			t.Errorf("run %d: a message of time 0:\n%s", run, doc)
		}
	}
}
