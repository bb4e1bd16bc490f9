//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// claudeRun is one `happy claude -p` scenario against the real Claude Code
// and the fake model: the model asks for a shell command that writes a file
// (which Claude's default mode sends to us as a permission request).
type claudeRun struct {
	relay      *relayProc
	homeA      string // runs the session
	homeB      string // another machine on the same account
	work       string
	envA, envB []string
	model      *fakemodel.Server
	proc       *bg
	sid        string
	callID     string
}

func startClaudeRun(t *testing.T, flags ...string) *claudeRun {
	t.Helper()
	return startClaudeScript(t, fakemodel.Script{
		ToolName:  "Bash",
		ToolInput: map[string]any{"command": "echo hi > hi.txt", "description": "Write hi.txt"},
		FinalText: "Created hi.txt.",
	}, "Create hi.txt", flags...)
}

// startClaudeScript is startClaudeRun with the model's script and the
// prompt given.
func startClaudeScript(t *testing.T, script fakemodel.Script, prompt string, flags ...string) *claudeRun {
	t.Helper()
	claudeBin := agentBinary(t, "CLAUDE")
	r := &claudeRun{relay: startRelay(t), work: t.TempDir()}
	hs := homes(t, r.relay.URL, 2)
	r.homeA, r.homeB = hs[0], hs[1]
	model, err := fakemodel.New(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r.model = model
	ch := claudeHome(t, r.work, "sk-e2e-dummy-key-0123456789")
	r.envA = claudeEnv(ch, r.homeA, r.relay.URL, model.URL, claudeBin)
	r.envB = claudeEnv(ch, r.homeB, r.relay.URL, model.URL, claudeBin)
	args := append([]string{"claude", "-p", prompt, "--permission-timeout", "90s"}, flags...)
	r.proc = happyStart(t, r.envA, r.work, append(args, "--", "--model", "claude-sonnet-4-5")...)
	return r
}

// waitBlocked waits, from home B, until the session shows a tool blocked on
// permission, and records the session id and the call id.
func (r *claudeRun) waitBlocked(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "a session with a blocked tool", func() bool {
		code, out, _ := happyRun(t, r.envB, r.work, "sessions", "--json")
		if code != 0 {
			return false
		}
		var list []struct{ ID string }
		if json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
			return false
		}
		r.sid = list[0].ID
		code, out, _ = happyRun(t, r.envB, r.work, "log", r.sid, "--json")
		if code != 0 {
			return false
		}
		r.callID = blockedCall(out)
		return r.callID != ""
	})
}

// blockedCall returns the callID of the first blocked tool in a document.
func blockedCall(doc string) string {
	var tr struct {
		Messages []struct {
			Parts []struct {
				Type   string `json:"type"`
				CallID string `json:"callID"`
				State  struct {
					Status string `json:"status"`
				} `json:"state"`
			} `json:"parts"`
		} `json:"messages"`
	}
	if json.Unmarshal([]byte(doc), &tr) != nil {
		return ""
	}
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if p.Type == "tool" && p.State.Status == "blocked" {
				return p.CallID
			}
		}
	}
	return ""
}

// finalLog is `happy log --json` from home B, normalised.
func (r *claudeRun) finalLog(t *testing.T) []byte {
	t.Helper()
	code, out, errOut := happyRun(t, r.envB, r.work, "log", r.sid, "--json")
	if code != 0 {
		t.Fatalf("happy log: exit %d: %s", code, errOut)
	}
	return normalize(t, []byte(out), map[string]string{r.work: "<WORK>"})
}

func TestE2EClaudePrintApproved(t *testing.T) {
	r := startClaudeRun(t)
	r.waitBlocked(t)
	if code, _, errOut := happyRun(t, r.envB, r.work, "approve", r.sid, r.callID); code != 0 {
		t.Fatalf("happy approve: exit %d: %s", code, errOut)
	}
	if code := r.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("happy claude -p exit %d\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	if u, ok := sessionUsage(r.homeA); ok {
		t.Logf("happy claude -p wrapping one turn: %s (happy alone, from its log), wall %s", u, r.proc.wall)
	}
	if got := r.proc.out.String(); got != "Created hi.txt.\n" {
		t.Fatalf("stdout %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(r.work, "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("hi.txt: %q, %v", b, err)
	}
	// A late answer fails at once: the session has ended.
	start := time.Now()
	if code, _, errOut := happyRun(t, r.envB, r.work, "deny", r.sid, r.callID); code != 1 || !strings.Contains(errOut, "the session has ended") {
		t.Fatalf("late deny: exit %d: %s", code, errOut)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("late deny took %s", d)
	}
	golden(t, "claude-print-approved.json", r.finalLog(t))
}

// A rule answers Claude's permission request at once: the tool part shows
// the request resolved by the rule, and nothing is dropped (the tool's
// result is not read as a second answer given in Claude).
func TestE2EClaudePrintAllowedByRule(t *testing.T) {
	r := startClaudeRun(t, "--allow", "bash:echo hi*")
	if code := r.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("happy claude -p exit %d\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(r.work, "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("hi.txt: %q, %v", b, err)
	}
	r.checkRuleRun(t, "permission bash echo hi > hi.txt: once, allowed by rule bash:echo hi*")
	golden(t, "claude-print-allowed-by-rule.json", r.finalLog(t))
}

func TestE2EClaudePrintDeniedByRule(t *testing.T) {
	r := startClaudeRun(t, "--deny", "bash:echo *")
	if code := r.proc.wait(t, 90*time.Second); code != 1 {
		t.Fatalf("happy claude -p exit %d, want 1\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	if _, err := os.Stat(filepath.Join(r.work, "hi.txt")); !os.IsNotExist(err) {
		t.Fatalf("hi.txt exists after a denial: %v", err)
	}
	r.checkRuleRun(t, "permission bash echo hi > hi.txt: reject, denied by rule bash:echo *")
	golden(t, "claude-print-denied-by-rule.json", r.finalLog(t))
}

// checkRuleRun finds the session from home B and checks its readable log:
// the rule's decision is there and no input was dropped.
func (r *claudeRun) checkRuleRun(t *testing.T, decision string) {
	t.Helper()
	code, out, errOut := happyRun(t, r.envB, r.work, "sessions", "--json")
	var list []struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("happy sessions: exit %d: %s %s", code, out, errOut)
	}
	r.sid = list[0].ID
	code, out, errOut = happyRun(t, r.envB, r.work, "log", r.sid)
	if code != 0 {
		t.Fatalf("happy log: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, decision) {
		t.Errorf("happy log lacks %q:\n%s", decision, out)
	}
	if strings.Contains(out, "dropped") || strings.Contains(errOut, "incomplete") {
		t.Errorf("happy log reports dropped input:\n%s\n%s", out, errOut)
	}
}

// The relay goes away while a tool waits for permission and comes back; the
// approval then goes through and the transcript on the relay is the same as
// in an undisturbed run: complete, nothing twice.
func TestE2EClaudeRelayRestartMidTurn(t *testing.T) {
	r := startClaudeRun(t)
	r.waitBlocked(t)
	r.relay.stop()
	time.Sleep(2 * time.Second)
	r.relay.start()
	waitFor(t, 30*time.Second, "approve after the relay restart", func() bool {
		code, _, _ := happyRun(t, r.envB, r.work, "approve", r.sid, r.callID)
		return code == 0
	})
	if code := r.proc.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("happy claude -p exit %d\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	golden(t, "claude-print-approved.json", r.finalLog(t))
}

// sessionUsage returns the "session usage" line happy logged in a home.
func sessionUsage(home string) (string, bool) {
	files, _ := filepath.Glob(filepath.Join(home, "logs", "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"message":"session usage"`) {
				var u struct {
					User int64 `json:"cpu_user_ms"`
					Sys  int64 `json:"cpu_system_ms"`
					RSS  int64 `json:"max_rss_kib"`
				}
				if json.Unmarshal([]byte(line), &u) == nil {
					return fmt.Sprintf("CPU user %d ms + system %d ms, peak RSS %.1f MiB", u.User, u.Sys, float64(u.RSS)/1024), true
				}
			}
		}
	}
	return "", false
}
