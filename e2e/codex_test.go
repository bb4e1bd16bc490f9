//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/internal/fakemodel"
)

// The Codex scenarios (app-server on 0.171.0, mcp-server on 0.150.0) are
// rows of the real-agent matrix (matrix_test.go); the helpers here set
// Codex up against the fake model.

// codexRun is one `happy codex -p` scenario against a real Codex CLI and the
// fake model: the model asks for a shell command that writes a file, with
// an escalation out of the sandbox (sandbox_permissions require_escalated),
// which Codex turns into an approval request that happy blocks on.
type codexRun struct {
	relay      *relayProc
	homeA      string // runs the session
	homeB      string // another machine on the same account
	work       string
	codexHome  string
	envA, envB []string
	model      *fakemodel.Server
	proc       *bg
	sid        string
	callID     string
	started    time.Time
}

// codexFinal is the fake model's answer once the command ran (or was
// refused): it says which, from the tool output Codex sent back.
func codexFinal(r fakemodel.Request) fakemodel.Reply {
	var body struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
	}
	_ = json.Unmarshal(r.Body, &body)
	for i := len(body.Input) - 1; i >= 0; i-- {
		if body.Input[i].Type == "function_call_output" {
			if strings.Contains(string(body.Input[i].Output), "rejected") {
				return fakemodel.Reply{Text: "The command was not allowed; hi.txt was not created."}
			}
			break
		}
	}
	return fakemodel.Reply{Text: "Created hi.txt."}
}

// codexConfig is CODEX_HOME/config.toml: the fake model as the only
// provider, no retries, and the features that reach public hosts at start
// turned off.
func codexConfig(modelURL string) string {
	return fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
apps = false
remote_plugin = false
`, modelURL)
}

// codexEnv is the environment of happy wrapping Codex against the fake model.
func codexEnv(home, codexHome, happyHome, relayURL, codexBin string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TERM=xterm-256color",
		"HAPPY_HOME_DIR=" + happyHome, "HAPPY_CODEX_PATH=" + codexBin, "HAPPY_SERVER_URL=" + relayURL,
		"CODEX_HOME=" + codexHome, "FAKE_API_KEY=sk-e2e-dummy", "RUST_LOG=warn",
	}
}

// startCodexRun starts `happy codex -p` with the Codex binary of agent
// (CODEX or CODEX150) speaking protocol (app-server or mcp); extra flags
// follow the usual ones.
func startCodexRun(t *testing.T, agent, protocol string, extra ...string) *codexRun {
	t.Helper()
	r := newCodexRun(t, agent, protocol)
	args := append([]string{"codex", "-p", "Create hi.txt", "--permission-timeout", "90s", "--codex-protocol", protocol}, extra...)
	r.proc = happyStart(t, r.envA, r.work, args...)
	return r
}

// newCodexRun prepares a run: the relay, two homes on one account, the
// fake model (which asks for the escalated command, and answers "Bye." to
// a prompt that asks for it) and CODEX_HOME.
func newCodexRun(t *testing.T, agent, protocol string) *codexRun {
	t.Helper()
	return newCodexRunWith(t, agent, protocol, fakemodel.Script{
		Decide: func(req fakemodel.Request) fakemodel.Reply {
			switch {
			case !req.HasTools:
				return fakemodel.Reply{Text: "Fake title"}
			case strings.Contains(req.LastText, "say bye"):
				return fakemodel.Reply{Text: "Bye."}
			case req.ToolDone:
				return codexFinal(req)
			}
			return fakemodel.Reply{ToolName: "exec_command", ToolInput: codexEscalated("echo hi > hi.txt", "Need to write hi.txt")}
		},
	}, "")
}

// codexEscalated is the input of Codex's exec_command asking to run cmd
// out of the sandbox, which Codex asks approval for.
func codexEscalated(cmd, why string) map[string]any {
	return map[string]any{"cmd": cmd, "sandbox_permissions": "require_escalated", "justification": why}
}

// newCodexRunWith prepares a run whose fake model follows script;
// features are lines added to config.toml's [features] table.
func newCodexRunWith(t *testing.T, agent, protocol string, script fakemodel.Script, features string) *codexRun {
	t.Helper()
	codexBin := agentBinary(t, agent)
	r := &codexRun{relay: startRelay(t), work: t.TempDir(), started: time.Now()}
	hs := homes(t, r.relay.URL, 2)
	r.homeA, r.homeB = hs[0], hs[1]
	model, err := fakemodel.New(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	r.model = model
	home := t.TempDir()
	r.codexHome = filepath.Join(home, "codex")
	if err := os.MkdirAll(r.codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.codexHome, "config.toml"), []byte(codexConfig(model.URL)+features), 0o600); err != nil {
		t.Fatal(err)
	}
	r.envA = codexEnv(home, r.codexHome, r.homeA, r.relay.URL, codexBin)
	r.envB = codexEnv(home, r.codexHome, r.homeB, r.relay.URL, codexBin)
	return r
}

// waitBlocked waits, from home B, until the session shows a tool blocked on
// permission, and records the session id and the call id.
func (r *codexRun) waitBlocked(t *testing.T) {
	t.Helper()
	waitFor(t, 60*time.Second, "a session with a blocked tool", func() bool {
		select {
		case <-r.proc.done:
			t.Fatalf("happy codex exited with %d before a tool was blocked\nstdout: %s\nstderr: %s", r.proc.code, r.proc.out.String(), r.proc.errb.String())
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

// finalLog is `happy log --json` from home B, normalised.
func (r *codexRun) finalLog(t *testing.T) []byte {
	t.Helper()
	code, out, errOut := happyRun(t, r.envB, r.work, "log", r.sid, "--json")
	if code != 0 {
		t.Fatalf("happy log: exit %d: %s", code, errOut)
	}
	return normalize(t, []byte(out), map[string]string{r.work: "<WORK>", r.codexHome: "<CODEX_HOME>"})
}

// auto reads the installed version: both pinned Codex builds have the v2
// app-server, so both get it (which is why the matrix's codex-mcp row pins
// mcp).
func TestE2ECodexChooseProtocol(t *testing.T) {
	for _, tc := range []struct{ agent, version string }{{"CODEX", "0.171.0"}, {"CODEX150", "0.150.0"}} {
		bin := agentBinary(t, tc.agent)
		p, v, err := codex.ChooseProtocol(context.Background(), bin)
		if err != nil || p != codex.ProtocolAppServer || v != tc.version {
			t.Errorf("%s: ChooseProtocol = %q, %q, %v; want app-server, %s", tc.agent, p, v, err, tc.version)
		}
	}
}

// A rule written the way a person types the command (Codex runs it as
// /bin/bash -lc 'echo hi > hi.txt') allows it at once: nobody is asked and
// the permission timeout never comes into play.
func TestE2ECodexAppServerRuleAllows(t *testing.T) {
	r := startCodexRun(t, "CODEX", "app-server", "--allow", "bash:echo hi*")
	if code := r.proc.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("happy codex -p exit %d\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	if got := r.proc.out.String(); got != "Created hi.txt.\n" {
		t.Fatalf("stdout %q\nstderr: %s", got, r.proc.errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(r.work, "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("hi.txt: %q, %v", b, err)
	}
	code, out, _ := happyRun(t, r.envB, r.work, "sessions", "--json")
	var list []struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("sessions: %s", out)
	}
	r.sid = list[0].ID
	doc := string(r.finalLog(t))
	for _, want := range []string{`"command": "echo hi > hi.txt"`, `"rawCommand": "/bin/bash -lc 'echo hi > hi.txt'"`, `"status": "completed"`} {
		if !strings.Contains(doc, want) {
			t.Errorf("transcript lacks %s:\n%s", want, doc)
		}
	}
	t.Logf("wall time %s", r.proc.wall.Round(time.Millisecond))
}

// `happy codex` without -p in a terminal: a prompt typed at the prompt
// line is answered (its command allowed by a rule), a second prompt sent
// with happy send from another home of the account is answered on the same
// Codex thread, and Ctrl-D ends the session cleanly (exit 0, ended on the
// relay).
func TestE2ECodexInteractive(t *testing.T) {
	r := newCodexRun(t, "CODEX", "app-server")
	record := filepath.Join(t.TempDir(), "traffic.jsonl")
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no PTY: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	cmd := exec.Command(happyBin, "codex", "--codex-protocol", "app-server", "--allow", "bash:echo hi*", "--record", record)
	cmd.Env, cmd.Dir = r.envA, r.work
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	scr := &screen{}
	go func() { _, _ = copyUntilErr(scr, master) }()
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(record)
			t.Logf("screen:\n%s\ntraffic:\n%s", scr.String(), b)
		}
	})

	waitFor(t, 60*time.Second, "the prompt line", func() bool { return scr.contains("codex> ") })
	if _, err := master.Write([]byte("Create hi.txt\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 90*time.Second, "the first answer on screen", func() bool { return scr.contains("Created hi.txt.") })
	if b, err := os.ReadFile(filepath.Join(r.work, "hi.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("hi.txt: %q, %v", b, err)
	}
	code, out, _ := happyRun(t, r.envB, r.work, "sessions", "--json")
	var list []struct{ ID, State string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("sessions: %s", out)
	}
	r.sid = list[0].ID
	if code, _, errOut := happyRun(t, r.envB, r.work, "send", r.sid, "Now say bye"); code != 0 {
		t.Fatalf("happy send: exit %d: %s", code, errOut)
	}
	waitFor(t, 90*time.Second, "the second answer on screen", func() bool { return scr.contains("Bye.") })
	if !scr.contains("> Now say bye") {
		t.Errorf("the prompt from home B is not on screen")
	}
	if _, err := master.Write([]byte{0x04}); err != nil { // Ctrl-D
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("happy codex ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("happy codex did not end after Ctrl-D")
	}
	if !scr.contains("happy: session " + r.sid + " ended") {
		t.Errorf("no end notice for %s on screen", r.sid)
	}
	if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
		t.Error("processes of happy's group still run")
	}

	// One thread, one turn/start on it per prompt.
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var starts int
	var turns []string
	for _, l := range strings.Split(string(b), "\n") {
		var rec struct {
			Dir string `json:"dir"`
			Msg struct {
				Method string `json:"method"`
				Params struct {
					ThreadID string `json:"threadId"`
				} `json:"params"`
			} `json:"msg"`
		}
		if json.Unmarshal([]byte(l), &rec) != nil || rec.Dir != "c2a" {
			continue
		}
		switch rec.Msg.Method {
		case "thread/start", "thread/resume":
			starts++
		case "turn/start":
			turns = append(turns, rec.Msg.Params.ThreadID)
		}
	}
	if starts != 1 || len(turns) != 2 || turns[0] != turns[1] || turns[0] == "" {
		t.Fatalf("thread starts %d, turn/start on threads %q", starts, turns)
	}

	// From home B: both turns in the transcript, and the session ended.
	code, out, _ = happyRun(t, r.envB, r.work, "sessions", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].State != "ended" {
		t.Fatalf("sessions after the end: %s", out)
	}
	code, doc, _ := happyRun(t, r.envB, r.work, "log", r.sid, "--json")
	if code != 0 {
		t.Fatalf("happy log: exit %d", code)
	}
	var tr struct {
		Messages []struct {
			Info  struct{ Role string } `json:"info"`
			Parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(doc), &tr); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if p.Type == "text" {
				texts = append(texts, m.Info.Role+": "+p.Text)
			}
		}
	}
	want := []string{"user: Create hi.txt", "assistant: Created hi.txt.", "user: Now say bye", "assistant: Bye."}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Fatalf("transcript texts %q, want %q", texts, want)
	}
	t.Logf("wall time %s", time.Since(r.started).Round(time.Millisecond))
}
