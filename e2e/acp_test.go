//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/acp"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/fakemodel"
	"github.com/happy-dev/happy/mapper"
)

// acpRun is one `happy <acp agent> -p` scenario: the model asks for a
// shell command that writes hi.txt, the agent asks happy for permission,
// and another happy home on the same account approves it.
type acpRun struct {
	relay      *relayProc
	work       string
	envA, envB []string
	record     string // traffic log of the session (--record)
	proc       *bg
	sid        string
	callID     string
	blockWait  time.Duration // how long waitBlocked waits (90 s when 0)
}

func newACPRun(t *testing.T, agentEnv []string) *acpRun {
	t.Helper()
	r := &acpRun{relay: startRelay(t), work: t.TempDir()}
	r.record = filepath.Join(t.TempDir(), "traffic.jsonl")
	hs := homes(t, r.relay.URL, 2)
	base := []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "HAPPY_SERVER_URL=" + r.relay.URL}
	r.envA = append(append(append([]string{}, base...), agentEnv...), "HAPPY_HOME_DIR="+hs[0])
	r.envB = append(append([]string{}, base...), "HAPPY_HOME_DIR="+hs[1], "HOME="+t.TempDir())
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(r.record)
			t.Logf("traffic log:\n%s", b)
			if r.proc != nil {
				t.Logf("happy stderr:\n%s", r.proc.errb.String())
			}
		}
	})
	return r
}

// start runs `happy <sub> -p … [-- agent args…]`.
func (r *acpRun) start(t *testing.T, sub string, agentArgs ...string) {
	t.Helper()
	args := []string{sub, "-p", "Create hi.txt", "--permission-timeout", "90s", "--record", r.record}
	if len(agentArgs) > 0 {
		args = append(append(args, "--"), agentArgs...)
	}
	r.proc = happyStart(t, r.envA, r.work, args...)
}

// waitBlocked waits, from home B, for the session's blocked tool.
func (r *acpRun) waitBlocked(t *testing.T) {
	t.Helper()
	wait := r.blockWait
	if wait == 0 {
		wait = 90 * time.Second
	}
	waitFor(t, wait, "a session with a blocked tool", func() bool {
		select {
		case <-r.proc.done:
			t.Fatalf("happy exited %d before asking\nstdout: %s\nstderr: %s", r.proc.code, r.proc.out.String(), r.proc.errb.String())
		default:
		}
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

// approveAndFinish approves from home B and checks the run's outcome.
func (r *acpRun) approveAndFinish(t *testing.T, final string) {
	t.Helper()
	if code, _, errOut := happyRun(t, r.envB, r.work, "approve", r.sid, r.callID); code != 0 {
		t.Fatalf("happy approve: exit %d: %s", code, errOut)
	}
	if code := r.proc.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("happy exit %d\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	if got := r.proc.out.String(); got != final+"\n" {
		t.Fatalf("stdout %q, want %q", got, final+"\n")
	}
	if b, err := os.ReadFile(filepath.Join(r.work, "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("hi.txt: %q, %v", b, err)
	}
	// A second answer is refused: the first one won (and the run is over).
	if code, _, errOut := happyRun(t, r.envB, r.work, "deny", r.sid, r.callID); code != 1 || !strings.Contains(errOut, "stale") && !strings.Contains(errOut, "not available") && !strings.Contains(errOut, "has ended") {
		t.Fatalf("late deny: exit %d: %s", code, errOut)
	}
}

// msRe matches the millisecond timestamps Gemini CLI puts in tool call ids
// (run_shell_command__run_shell_command_<ms>_0).
var msRe = regexp.MustCompile(`_1[0-9]{12}_`)

// finalLog is `happy log --json` from home B, normalised (ids, times,
// paths, and the timestamps inside Gemini's call ids).
func (r *acpRun) finalLog(t *testing.T) []byte {
	t.Helper()
	code, out, errOut := happyRun(t, r.envB, r.work, "log", r.sid, "--json")
	if code != 0 {
		t.Fatalf("happy log: exit %d: %s", code, errOut)
	}
	doc := msRe.ReplaceAllString(out, "_<ms>_")
	return normalize(t, []byte(doc), map[string]string{r.work: "<WORK>"})
}

// checkReplay replays the recorded traffic offline and checks it tells
// the same story: the tool completed after a "once" decision.
func (r *acpRun) checkReplay(t *testing.T, tool string) {
	t.Helper()
	f, err := os.Open(r.record)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := acp.Replay(f)
	if err != nil {
		t.Fatal(err)
	}
	red := mapper.NewReducer(mapper.Config{SessionID: "replay"})
	for _, e := range evs {
		red.Apply(e)
	}
	tr := red.Transcript()
	if len(tr.Dropped) != 0 {
		t.Errorf("replay dropped: %+v", tr.Dropped)
	}
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.ToolPart); ok && tp.Tool == tool {
				if tp.State.Status != mapper.StatusCompleted || tp.State.Block == nil || tp.State.Block.Decision != agent.DecisionOnce {
					t.Errorf("replayed tool: %+v", tp.State)
				}
				return
			}
		}
	}
	t.Errorf("no %s tool in the replay", tool)
}

// geminiHome is a throwaway HOME in which Gemini CLI uses API-key auth and
// sends no usage statistics and no update checks.
func geminiHome(t *testing.T) string {
	t.Helper()
	h := t.TempDir()
	dir := filepath.Join(h, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	settings := map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
		"general":  map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	}
	b, _ := json.Marshal(settings)
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// Gemini CLI 0.61.0 (gemini --acp) against the fake Gemini API: its shell
// tool asks for permission without announcing the tool first; happy shows
// it blocked, another machine approves, the command runs.
func TestE2EACPGeminiApproved(t *testing.T) {
	gemini := agentBinary(t, "GEMINI")
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "run_shell_command",
		ToolInput: map[string]any{"command": "echo hi > hi.txt", "description": "Write hi.txt"},
		FinalText: "Created hi.txt.",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := newACPRun(t, []string{"HOME=" + geminiHome(t), "HAPPY_GEMINI_PATH=" + gemini,
		"GEMINI_API_KEY=e2e-dummy-key", "GOOGLE_GEMINI_BASE_URL=" + model.URL})
	r.start(t, "gemini")
	r.waitBlocked(t)
	r.approveAndFinish(t, "Created hi.txt.")
	if len(model.Requests()) < 2 {
		t.Errorf("the fake model saw %d requests", len(model.Requests()))
	}
	r.checkReplay(t, agent.ToolBash)
	golden(t, "acp-gemini-approved.json", r.finalLog(t))
}

// claude-code-acp 0.16.2 against the fake Anthropic API, through `happy acp
// -- claude-code-acp`: happy offers terminals, so the agent runs the
// command through its mcp__acp__Bash tool in a terminal happy owns.
func TestE2EACPClaudeCodeApproved(t *testing.T) {
	ccacp := agentBinary(t, "CLAUDE_ACP")
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "mcp__acp__Bash",
		ToolInput: map[string]any{"command": "echo hi > hi.txt", "timeout": 60000, "description": "Write hi.txt"},
		FinalText: "Created hi.txt.",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r := newACPRun(t, nil)
	home := claudeHome(t, r.work, "sk-e2e-dummy-key-0123456789")
	r.envA = append(r.envA, "HOME="+home, "ANTHROPIC_BASE_URL="+model.URL, "ANTHROPIC_API_KEY=sk-e2e-dummy-key-0123456789",
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	r.start(t, "acp", ccacp)
	r.waitBlocked(t)
	r.approveAndFinish(t, "Created hi.txt.")
	traffic, _ := os.ReadFile(r.record)
	if !bytes.Contains(traffic, []byte(`"method":"terminal/create"`)) {
		t.Errorf("the command did not run in a happy terminal")
	}
	r.checkReplay(t, agent.ToolBash)
	golden(t, "acp-claude-code-approved.json", r.finalLog(t))
}
