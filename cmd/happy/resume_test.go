package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/mapper"
)

// resumeCapture is the codex-app capture with thread/resume where it has
// thread/start (Codex answers both with the thread).
func resumeCapture(t *testing.T) *fakeCodex {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "codex", "codex-app.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	fc := newFakeCodex(t, "", "", "")
	s := strings.Replace(string(b), `"method":"thread/start"`, `"method":"thread/resume"`, 1)
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return fc
}

// happy resume continues an ended Codex session in the same relay session:
// Codex gets thread/resume with the recorded thread id, the new turn
// follows the old one in the transcript with ids of its own, and the title
// and id stay.
func TestResumeCodexSession(t *testing.T) {
	env := codexTestEnv(t, nil)
	sid := endedSession(t, env, "first task")
	o, _ := readSession(t, env, sid)
	if o.Metadata.CodexThreadID != "01a227ce-b3b3-76c0-8c71-6476bf69416c" {
		t.Fatalf("codexThreadId %q", o.Metadata.CodexThreadID)
	}

	// A Codex session needs -p.
	if code, _, stderr := runHappy(t, env, "resume", sid); code != exitUsage || !strings.Contains(stderr, "needs -p") {
		t.Fatalf("resume without -p = %d %q", code, stderr)
	}
	fc := resumeCapture(t)
	env["HAPPY_CODEX_PATH"] = fc.path
	code, stdout, stderr := runHappy(t, env, "resume", sid, "-p", "second task", "--codex-protocol", "app-server", "--allow", "bash:*")
	if m := fc.mismatch(t); m != "" {
		t.Fatalf("traffic differs: %s", m)
	}
	if code != exitOK || stdout != "Done: the command printed hi.\n" || !strings.HasPrefix(stderr, "happy: session "+sid+" ") {
		t.Fatalf("resume = %d %q %q", code, stdout, stderr)
	}
	if p := fc.sent(t, "thread/resume"); p["threadId"] != "01a227ce-b3b3-76c0-8c71-6476bf69416c" {
		t.Fatalf("thread/resume params %v", p)
	}
	o, tr := readSession(t, env, sid)
	if o.Metadata.LifecycleState != app.LifecycleEnded || o.Metadata.Summary == nil || o.Metadata.Summary.Text != "first task" {
		t.Fatalf("metadata after resume %+v", o.Metadata)
	}
	var prompts []string
	ids := map[string]bool{}
	for _, m := range tr.Messages {
		if ids[m.Info.MessageID()] {
			t.Fatalf("message id %s twice", m.Info.MessageID())
		}
		ids[m.Info.MessageID()] = true
		for _, p := range m.Parts {
			if ids[p.Base().ID] {
				t.Fatalf("part id %s twice", p.Base().ID)
			}
			ids[p.Base().ID] = true
			if tp, ok := p.(*mapper.TextPart); ok {
				if _, user := m.Info.(*mapper.UserMessage); user {
					prompts = append(prompts, tp.Text)
				}
			}
		}
	}
	if strings.Join(prompts, "|") != "first task|second task" || tr.Session.Title != "first task" || len(tr.Dropped) != 0 {
		t.Fatalf("prompts %q title %q dropped %v", prompts, tr.Session.Title, tr.Dropped)
	}
	if n := len(toolsOf(tr)); n != 2 {
		t.Fatalf("%d tools, want one per turn", n)
	}
	if s := sessionState(t, env, sid, time.Now()); s.State != app.LifecycleEnded || s.Title != "first task" {
		t.Fatalf("happy sessions after resume %+v", s)
	}
}

// happy resume of a Codex session refuses mcp-server (Codex up to 0.153,
// chosen by --codex-protocol mcp or by auto from the version): its
// codex-reply only finds threads of the same server process, so the resume
// always failed ("Session not found") after the prompt was written. The
// refusal comes before Codex starts and before anything reaches the
// session: the transcript keeps its one prompt and the session stays ended.
func TestResumeCodexMCPRefused(t *testing.T) {
	env := codexTestEnv(t, nil)
	sid := endedSession(t, env, "first task")
	for _, args := range [][]string{
		{"--codex-protocol", "mcp"},
		{}, // auto, from codex --version
	} {
		fc := newFakeCodex(t, "codex-cli 0.50.0", "", "codex0150-mcp-server")
		env["HAPPY_CODEX_PATH"] = fc.path
		code, stdout, stderr := runHappy(t, env, append([]string{"resume", sid, "-p", "second task"}, args...)...)
		want := "happy: codex mcp-server (Codex ≤ 0.153) cannot resume a thread in a new process: update Codex, or start a new session\n"
		if code != exitUsage || stdout != "" || stderr != want {
			t.Fatalf("resume %v = %d %q %q", args, code, stdout, stderr)
		}
		for _, inv := range fc.invocations(t) {
			if len(inv) > 0 && inv[0] == "mcp-server" {
				t.Fatalf("resume %v started codex: %q", args, inv)
			}
		}
	}
	o, tr := readSession(t, env, sid)
	if got := textsOf(tr); strings.Join(got, "|") != "user: first task|assistant: Done: the command printed hi." {
		t.Fatalf("transcript after the refusals %q", got)
	}
	if o.Metadata.LifecycleState != app.LifecycleEnded {
		t.Fatalf("state after the refusals %q", o.Metadata.LifecycleState)
	}
}

func TestResumeRefusals(t *testing.T) {
	env := codexTestEnv(t, nil)
	sid := endedSession(t, env, "first task")

	// Another home of the same account cannot: the agent's state and the
	// session's outbox are not there.
	other := map[string]string{}
	for k, v := range env {
		other[k] = v
	}
	other["HAPPY_HOME_DIR"] = t.TempDir()
	b, err := os.ReadFile(filepath.Join(env["HAPPY_HOME_DIR"], "access.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other["HAPPY_HOME_DIR"], "access.key"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runHappy(t, other, "resume", sid, "-p", "x"); code != exitFailed || !strings.Contains(stderr, "was not started from this happy home") {
		t.Fatalf("resume from another home = %d %q", code, stderr)
	}
	if code, _, stderr := runHappy(t, env, "resume", "nosuch", "-p", "x"); code != exitFailed || !strings.Contains(stderr, "no such session") {
		t.Fatalf("resume of an unknown session = %d %q", code, stderr)
	}
	if code, _, _ := runHappy(t, env, "resume"); code != exitUsage {
		t.Fatalf("resume without SESSION = %d", code)
	}
}

// textsOf lists "role: text" for the non-synthetic text parts of the root
// messages, in order.
func textsOf(tr mapper.Transcript) []string {
	var out []string
	for _, m := range tr.Messages {
		role := "assistant"
		if _, ok := m.Info.(*mapper.UserMessage); ok {
			role = "user"
		}
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok && !tp.Synthetic {
				out = append(out, role+": "+tp.Text)
			}
		}
	}
	return out
}

// happy resume of an ended Claude session: Claude gets --resume with the
// recorded session id (the fake answers from that session's history), the
// second turn follows the first in the same relay session with ids of its
// own, and the session ends again under its first title.
func TestResumeClaudeSession(t *testing.T) {
	env := codexTestEnv(t, nil)
	claude, dir := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	code, stdout, stderr := runHappy(t, env, "claude", "-p", "first task")
	if code != exitOK || stdout != "Answer to first task\n" {
		t.Fatalf("turn 1 = %d %q %q", code, stdout, stderr)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	const claudeID = "5e55f0c1-0000-4000-8000-000000000001"
	if o, _ := readSession(t, env, sid); o.Metadata.ClaudeSessionID != claudeID {
		t.Fatalf("claudeSessionId %q", o.Metadata.ClaudeSessionID)
	}

	code, stdout, stderr = runHappy(t, env, "resume", sid, "-p", "second task")
	if code != exitOK || stdout != "Answer to second task (after: first task)\n" || !strings.HasPrefix(stderr, "happy: session "+sid+" ") {
		t.Fatalf("resume = %d %q %q", code, stdout, stderr)
	}
	calls := readLinesOf(filepath.Join(dir, "calls"))
	if len(calls) != 2 || strings.Contains(calls[0], "--resume") || !strings.Contains(calls[1], "--resume "+claudeID) {
		t.Fatalf("claude command lines:\n%s", strings.Join(calls, "\n"))
	}
	o, tr := readSession(t, env, sid)
	want := []string{"user: first task", "assistant: Answer to first task", "user: second task", "assistant: Answer to second task (after: first task)"}
	if got := textsOf(tr); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("texts %q, want %q", got, want)
	}
	ids := map[string]bool{}
	for _, m := range tr.Messages {
		if am, ok := m.Info.(*mapper.AssistantMessage); ok && (am.Time.Completed == nil || am.Finish != "stop") {
			t.Fatalf("answer %+v not completed with stop", am)
		}
		for _, id := range append([]string{m.Info.MessageID()}, func() (p []string) {
			for _, pt := range m.Parts {
				p = append(p, pt.Base().ID)
			}
			return p
		}()...) {
			if ids[id] {
				t.Fatalf("id %s twice", id)
			}
			ids[id] = true
		}
	}
	if o.Metadata.LifecycleState != app.LifecycleEnded || o.Info.Active || tr.Session.Title != "first task" || len(tr.Dropped) != 0 {
		t.Fatalf("metadata %+v active %v title %q dropped %v", o.Metadata, o.Info.Active, tr.Session.Title, tr.Dropped)
	}
	if s := sessionState(t, env, sid, time.Now()); s.State != app.LifecycleEnded || s.Title != "first task" {
		t.Fatalf("happy sessions after resume %+v", s)
	}
}

// happy resume of an ACP session continues the agent's own session
// (metadata acpSessionId) with session/resume when the agent offers it,
// else with session/load, whose replay of the first turn stays out of the
// transcript: each prompt and answer is there once, in order, with ids of
// their own, and the session ends again under its first title. An agent
// that can do neither is refused with exit 1, naming what it lacks; a
// happy acp session needs the agent's command again after --.
func TestResumeACPSession(t *testing.T) {
	cases := []struct {
		name, caps, flavor string
		wantMethod         string // how the resume continued the session
		wantCode           int
		wantErr            string
	}{
		{name: "load replays", caps: "load", flavor: "opencode", wantMethod: "session/load"},
		{name: "resume preferred", caps: "resume", flavor: "opencode", wantMethod: "session/resume"},
		{name: "happy acp session", caps: "load", flavor: "acp", wantMethod: "session/load"},
		{name: "neither", caps: "none", flavor: "opencode", wantCode: exitFailed,
			wantErr: "fake-acp cannot continue session acp-sess-1: it advertises neither loadSession (session/load) nor sessionCapabilities.resume (session/resume)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := codexTestEnv(t, nil)
			bin, dir := fakeACP(t, tc.caps)
			env["HAPPY_OPENCODE_PATH"] = bin
			first := []string{"opencode", "-p", "first task"}
			if tc.flavor == "acp" {
				first = []string{"acp", "-p", "first task", "--", bin}
			}
			code, stdout, stderr := runHappy(t, env, first...)
			if code != exitOK || stdout != "Answer to first task\n" {
				t.Fatalf("turn 1 = %d %q %q", code, stdout, stderr)
			}
			sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
			o, _ := readSession(t, env, sid)
			if o.Metadata.Flavor != tc.flavor || !strings.Contains(string(o.RawMetadata), `"acpSessionId":"acp-sess-1"`) {
				t.Fatalf("metadata %s", o.RawMetadata)
			}
			resume := []string{"resume", sid, "-p", "second task"}
			if tc.flavor == "acp" {
				if code, _, stderr := runHappy(t, env, resume...); code != exitUsage || !strings.Contains(stderr, "give the agent's command after --") {
					t.Fatalf("resume of a happy acp session without its command = %d %q", code, stderr)
				}
				resume = append(resume, "--", bin)
			}
			code, stdout, stderr = runHappy(t, env, resume...)
			if tc.wantErr != "" {
				if code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
					t.Fatalf("resume = %d %q, want %d and %q", code, stderr, tc.wantCode, tc.wantErr)
				}
				if _, tr := readSession(t, env, sid); len(textsOf(tr)) != 2 {
					t.Fatalf("a refused resume changed the transcript: %q", textsOf(tr))
				}
				return
			}
			if code != exitOK || stdout != "Answer to second task\n" || !strings.HasPrefix(stderr, "happy: session "+sid+" ") {
				t.Fatalf("resume = %d %q %q", code, stdout, stderr)
			}
			calls, err := os.ReadFile(filepath.Join(dir, "calls"))
			if err != nil {
				t.Fatal(err)
			}
			wantCalls := "initialize\nsession/new\nsession/prompt\ninitialize\n" + tc.wantMethod + "\nsession/prompt\n"
			if string(calls) != wantCalls {
				t.Fatalf("the agent got %q, want %q", calls, wantCalls)
			}
			o, tr := readSession(t, env, sid)
			want := []string{"user: first task", "assistant: Answer to first task", "user: second task", "assistant: Answer to second task"}
			if got := textsOf(tr); strings.Join(got, "|") != strings.Join(want, "|") || len(tr.Dropped) != 0 {
				t.Fatalf("transcript %q dropped %v, want %q", got, tr.Dropped, want)
			}
			ids := map[string]bool{}
			for _, m := range tr.Messages {
				if ids[m.Info.MessageID()] {
					t.Fatalf("message id %s twice", m.Info.MessageID())
				}
				ids[m.Info.MessageID()] = true
			}
			if o.Metadata.LifecycleState != app.LifecycleEnded || tr.Session.Title != "first task" {
				t.Fatalf("after resume: state %q title %q", o.Metadata.LifecycleState, tr.Session.Title)
			}
		})
	}
}

// happy claude --remote (what the daemon starts) serves the local event API
// when asked: the daemon follows every session it runs through it.
func TestClaudeRemoteServesEvents(t *testing.T) {
	env := codexTestEnv(t, nil)
	claude, _ := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	c := startChild(t, env, "claude", "--remote", "--initial-prompt=first task", "--events-listen=127.0.0.1:0")
	sid := c.sessionID(t)
	re := regexp.MustCompile(`happy: live events on (http://127\.0\.0\.1:\d+)/event \(bearer token in (\S+)\)`)
	var m []string
	waitFor(t, "the live events line", func() bool { m = re.FindStringSubmatch(c.errText()); return m != nil })
	tok, err := os.ReadFile(m[2])
	if err != nil {
		t.Fatal(err)
	}
	var sessions []struct {
		ID string `json:"id"`
	}
	waitFor(t, "the session in GET /session", func() bool {
		req, _ := http.NewRequest("GET", m[1]+"/session", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == 200 && json.NewDecoder(resp.Body).Decode(&sessions) == nil && len(sessions) > 0
	})
	if len(sessions) != 1 || !strings.HasPrefix(sessions[0].ID, "ses_") {
		t.Fatalf("GET /session = %+v, want the one session of %s", sessions, sid)
	}
}

// happy claude --remote --record FILE (how the daemon starts Claude) writes
// the traffic log of Claude's stream-json, as -p does: the prompt sent,
// Claude's answer, and its exit once the session ends.
func TestClaudeRemoteRecords(t *testing.T) {
	env := codexTestEnv(t, nil)
	claude, _ := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	rec := filepath.Join(t.TempDir(), "traffic.jsonl")
	c := startChild(t, env, "claude", "--remote", "--initial-prompt=first task", "--record", rec)
	c.sessionID(t)
	type entry struct {
		Dir string          `json:"dir"`
		Msg json.RawMessage `json:"msg"`
	}
	read := func() []entry {
		var out []entry
		for _, l := range readLinesOf(rec) {
			var e entry
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("record line %q: %v", l, err)
			}
			out = append(out, e)
		}
		return out
	}
	has := func(es []entry, dir, fragment string) bool {
		for _, e := range es {
			if e.Dir == dir && strings.Contains(string(e.Msg), fragment) {
				return true
			}
		}
		return false
	}
	waitFor(t, "the answer in the record", func() bool { return has(read(), "a2c", `"result":"Answer to first task"`) })
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d: %s", code, c.errText())
	}
	es := read()
	if !has(es, "c2a", `"text":"first task"`) || !has(es, "exit", "") {
		t.Fatalf("record lacks the prompt or the exit:\n%s", strings.Join(readLinesOf(rec), "\n"))
	}
}

// Claude in its terminal UI has no protocol to record: --record there is a
// usage error, not a file left empty.
func TestClaudeInteractiveRefusesRecord(t *testing.T) {
	env := codexTestEnv(t, nil)
	claude, _ := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	rec := filepath.Join(t.TempDir(), "traffic.jsonl")
	code, _, stderr := runHappy(t, env, "claude", "--record", rec)
	if code != exitUsage || stderr != "happy: "+errRecordInteractive.Error()+"\n" {
		t.Fatalf("happy claude --record = %d %q", code, stderr)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Fatalf("record file: %v", err)
	}
}

// Claude's common flags before --: --model reaches claude as --model; an
// unknown flag names where Claude's own flags go.
func TestClaudeModelFlagAndForeignFlags(t *testing.T) {
	env := codexTestEnv(t, nil)
	claude, dir := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	code, stdout, stderr := runHappy(t, env, "claude", "-p", "hi", "--model", "opus", "--", "--verbose")
	if code != exitOK || stdout != "Answer to hi\n" {
		t.Fatalf("happy claude --model = %d %q %q", code, stdout, stderr)
	}
	calls := readLinesOf(filepath.Join(dir, "calls"))
	if len(calls) != 1 || !strings.Contains(calls[0], " --model opus --verbose") {
		t.Fatalf("claude command line: %q", calls)
	}
	code, _, stderr = runHappy(t, env, "claude", "-p", "hi", "--max-turns", "3")
	if code != exitUsage || stderr != "happy: unknown flag: --max-turns (flags of claude itself go after --: happy claude -- --max-turns …)\n" {
		t.Fatalf("foreign flag = %d %q", code, stderr)
	}
}

// happy resume reads a daemon's first prompt from --initial-prompt-fd for
// every flavor (it was read for ACP sessions only, so a Claude session the
// daemon resumed never got its prompt).
func TestResumeReadsTheInitialPromptDescriptor(t *testing.T) {
	env := codexTestEnv(t, nil)
	code, _, stderr := runHappy(t, env, "resume", "nosuch", "--remote", "--initial-prompt-fd=99")
	if code != exitUsage || !strings.Contains(stderr, "--initial-prompt-fd") {
		t.Fatalf("resume with a descriptor that is not open = %d %q, want the descriptor refused first", code, stderr)
	}
}
