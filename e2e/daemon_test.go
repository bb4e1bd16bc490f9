//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// The daemon with the real Claude Code: a session spawned from another
// home runs Claude in remote mode in the folder, takes its first prompt from
// the spawn, waits for the approval given from the other home, finishes,
// and happy stop ends it through the daemon; a spawn with --resume
// continues it in place with Claude's own resume.
func TestE2EDaemonSpawnsClaude(t *testing.T) {
	claudeBin := agentBinary(t, "CLAUDE")
	relay := startRelay(t)
	work := t.TempDir()
	hs := homes(t, relay.URL, 2)
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "Bash",
		ToolInput: map[string]any{"command": "echo hi > hi.txt", "description": "Write hi.txt"},
		FinalText: "Created hi.txt.",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	ch := claudeHome(t, work, "sk-e2e-dummy-key-0123456789")
	envA := append(claudeEnv(ch, hs[0], relay.URL, model.URL, claudeBin), "ANTHROPIC_MODEL=claude-sonnet-4-5")
	envB := claudeEnv(ch, hs[1], relay.URL, model.URL, claudeBin)

	if code, out, errOut := happyRun(t, envA, work, "daemon", "start"); code != 0 {
		t.Fatalf("daemon start: %d %s %s", code, out, errOut)
	}
	t.Cleanup(func() { happyRun(t, envA, work, "daemon", "stop") })
	_, out, _ := happyRun(t, envA, work, "daemon", "status", "--json")
	var st struct {
		State struct {
			MachineID string `json:"machineId"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.State.MachineID == "" {
		t.Fatalf("daemon status: %v %s", err, out)
	}
	waitFor(t, 30*time.Second, "the machine with Claude", func() bool {
		_, out, _ := happyRun(t, envB, work, "machines", "--json")
		return strings.Contains(out, `"name": "claude",
        "installed": true`)
	})
	code, out, errOut := happyRun(t, envB, work, "spawn", "--machine", st.State.MachineID, "--dir", work, "--agent", "claude", "Create hi.txt")
	if code != 0 {
		t.Fatalf("spawn: %d %s %s", code, out, errOut)
	}
	sid := strings.TrimSpace(out)
	var callID string
	waitFor(t, 60*time.Second, "a blocked tool", func() bool {
		_, doc, _ := happyRun(t, envB, work, "log", sid, "--json")
		callID = blockedCall(doc)
		return callID != ""
	})
	if code, out, errOut := happyRun(t, envB, work, "approve", sid, callID); code != 0 {
		t.Fatalf("approve: %d %s %s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "the answer", func() bool {
		_, text, _ := happyRun(t, envB, work, "log", sid)
		return strings.Contains(text, "Created hi.txt.")
	})
	if b, err := os.ReadFile(filepath.Join(work, "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("hi.txt: %q %v", b, err)
	}
	_, meta, _ := happyRun(t, envB, work, "sessions", "--json")
	if !strings.Contains(meta, sid) {
		t.Fatalf("sessions: %s", meta)
	}
	if code, out, errOut := happyRun(t, envB, work, "stop", sid); code != 0 || !strings.Contains(out, "stopped by the daemon") {
		t.Fatalf("stop: %d %s %s", code, out, errOut)
	}
	waitFor(t, 30*time.Second, "the session to end", func() bool {
		_, out, _ := happyRun(t, envB, work, "sessions", "--json")
		return strings.Contains(out, `"state": "ended"`)
	})

	// The daemon resumes the ended session in place with a new prompt.
	code, out, errOut = happyRun(t, envB, work, "spawn", "--machine", st.State.MachineID, "--resume", sid, "--agent", "claude", "Create hi.txt again")
	if code != 0 || strings.TrimSpace(out) != sid {
		t.Fatalf("spawn --resume: %d %q %s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "a blocked tool in the resumed session", func() bool {
		_, doc, _ := happyRun(t, envB, work, "log", sid, "--json")
		c := blockedCall(doc)
		if c != "" && c != callID {
			callID = c
			return true
		}
		return false
	})
	if code, out, errOut := happyRun(t, envB, work, "approve", sid, callID); code != 0 {
		t.Fatalf("approve in the resumed session: %d %s %s", code, out, errOut)
	}
	waitFor(t, 60*time.Second, "the second answer", func() bool {
		_, text, _ := happyRun(t, envB, work, "log", sid)
		return strings.Count(text, "Created hi.txt.") == 2 && strings.Contains(text, "Create hi.txt again")
	})
	if code, out, errOut := happyRun(t, envB, work, "stop", sid); code != 0 || !strings.Contains(out, "stopped by the daemon") {
		t.Fatalf("stop of the resumed session: %d %s %s", code, out, errOut)
	}
}
