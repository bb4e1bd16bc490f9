//go:build unix

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/mapper"
)

// A turn whose agent goes silent is interrupted after --idle-timeout: -p
// exits 1 saying why, and the transcript's answer carries the reason, so
// every device reads it.
func TestIdleTimeoutInterruptsASilentAgent(t *testing.T) {
	env := codexTestEnv(t, nil)
	bin, dir := fakeACP(t, "none")
	env["HAPPY_OPENCODE_PATH"] = bin
	code, stdout, stderr := runHappy(t, env, "opencode", "-p", "hang", "--idle-timeout", "300ms")
	if code != exitFailed || stdout != "Looking\n" || !strings.HasSuffix(stderr, "\nhappy: "+bin+" sent nothing for longer than --idle-timeout: the turn was interrupted\n") {
		t.Fatalf("happy opencode -p = %d %q %q", code, stdout, stderr)
	}
	calls, _ := os.ReadFile(dir + "/calls")
	if string(calls) != "initialize\nsession/new\nsession/prompt\nsession/cancel\n" {
		t.Fatalf("the agent got %q", calls)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, tr := readSession(t, env, sid)
	last := tr.Messages[len(tr.Messages)-1]
	a, ok := last.Info.(*mapper.AssistantMessage)
	if !ok || a.Error == nil || a.Error.Data.Message != "the agent sent nothing for 300ms: interrupted" || a.Finish != "aborted" {
		t.Fatalf("last message %+v", last.Info)
	}
	if got := textsOf(tr); strings.Join(got, "|") != "user: hang|assistant: Looking" {
		t.Fatalf("transcript %q", got)
	}
	if code, _, stderr := runHappy(t, env, "opencode", "-p", "hi", "--idle-timeout", "-1s"); code != exitUsage ||
		stderr != "happy: --idle-timeout -1s: want a duration ≥ 0 (0 never interrupts)\n" {
		t.Fatalf("a negative --idle-timeout = %d %q", code, stderr)
	}
}

// happy doctor SESSION says in one line what a running session is doing:
// here its agent went silent inside a running tool, which pauses the idle
// watch.
func TestDoctorSessionLine(t *testing.T) {
	env := codexTestEnv(t, nil)
	bin, _ := fakeACP(t, "none")
	env["HAPPY_OPENCODE_PATH"] = bin
	c := startChild(t, env, "opencode", "--initial-prompt=hang in a tool", "--events-listen=127.0.0.1:0", "--idle-timeout=1h")
	sid := c.sessionID(t)
	re := regexp.MustCompile(`happy: live events on http://(127\.0\.0\.1:\d+)/event`)
	var m []string
	waitFor(t, "the live events line", func() bool { m = re.FindStringSubmatch(c.errText()); return m != nil })
	want := regexp.MustCompile(`^session ` + sid + ` \(opencode\): agent running; turn running for \d+s; last agent event \d+s ago; ` +
		`tool bash running for \d+s \(call call-1\); nobody asked; idle watch paused\n$`)
	var out string
	waitFor(t, "doctor's line with the tool running", func() bool {
		var code int
		code, out, _ = runHappy(t, env, "doctor", sid, "--events", m[1])
		return code == exitOK && want.MatchString(out)
	})
	t.Logf("%s", out)
	if code, out, stderr := runHappy(t, env, "doctor", "nosuch", "--events", m[1]); code != exitFailed || out != "" ||
		stderr != "happy: session nosuch: no running happy on this machine serves the session's status; a session started in a terminal serves its status only with --events-listen ADDR (then: happy doctor nosuch --events ADDR)\n" {
		t.Fatalf("doctor of an unknown session = %d %q %q", code, out, stderr)
	}
}

// Codex's lost-turn-end check comes before the idle watch would interrupt
// the turn: at half the idle timeout when that is under its default.
func TestCodexTurnCheck(t *testing.T) {
	for _, c := range []struct{ idle, want time.Duration }{
		{0, codex.DefaultTurnCheck},
		{time.Hour, codex.DefaultTurnCheck},
		{10 * time.Minute, codex.DefaultTurnCheck},
		{2 * time.Minute, time.Minute},
		{time.Nanosecond, time.Millisecond},
	} {
		if got := turnCheck(c.idle); got != c.want {
			t.Errorf("turnCheck(%s) = %s, want %s", c.idle, got, c.want)
		}
	}
}

// With --recover a silent ACP agent is restarted in its own session
// (session/load, whose replay stays out of the transcript) and sent
// "continue", which the transcript shows; the turn that follows is the
// run's answer. An agent that can resume no session is interrupted, the
// transcript saying why it was not restarted; OpenClaw and an idle watch
// that is off refuse the flag.
func TestRecoverRestartsASilentACPAgent(t *testing.T) {
	env := codexTestEnv(t, nil)
	bin, dir := fakeACP(t, "load")
	env["HAPPY_OPENCODE_PATH"] = bin
	code, stdout, stderr := runHappy(t, env, "opencode", "-p", "hang", "--idle-timeout", "300ms", "--recover")
	if code != exitOK || stdout != "Answer to continue\n" {
		t.Fatalf("happy opencode -p --recover = %d %q %q", code, stdout, stderr)
	}
	calls, _ := os.ReadFile(dir + "/calls")
	if string(calls) != "initialize\nsession/new\nsession/prompt\ninitialize\nsession/load\nsession/prompt\n" {
		t.Fatalf("the agent got %q", calls)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, tr := readSession(t, env, sid)
	if got := textsOf(tr); strings.Join(got, "|") != "user: hang|assistant: Looking|user: continue|assistant: Answer to continue" {
		t.Fatalf("transcript %q", got)
	}
	var errs []string
	for _, m := range tr.Messages {
		if a, ok := m.Info.(*mapper.AssistantMessage); ok && a.Error != nil {
			errs = append(errs, a.Error.Data.Message)
		}
	}
	if strings.Join(errs, "|") != "the agent sent nothing for 300ms: restarted it in its own session (recovery 1 of 2)" {
		t.Fatalf("errors %q", errs)
	}

	bin, dir = fakeACP(t, "none")
	env["HAPPY_OPENCODE_PATH"] = bin
	code, _, stderr = runHappy(t, env, "opencode", "-p", "hang", "--idle-timeout", "300ms", "--recover")
	if code != exitFailed {
		t.Fatalf("happy opencode -p --recover without resume = %d %q", code, stderr)
	}
	if calls, _ := os.ReadFile(dir + "/calls"); string(calls) != "initialize\nsession/new\nsession/prompt\nsession/cancel\n" {
		t.Fatalf("the agent got %q", calls)
	}
	sid = strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, tr = readSession(t, env, sid)
	a, _ := tr.Messages[len(tr.Messages)-1].Info.(*mapper.AssistantMessage)
	if a == nil || a.Error == nil || a.Error.Data.Message != "the agent sent nothing for 300ms: interrupted; it cannot be restarted: "+bin+" offers neither session/resume nor session/load" {
		t.Fatalf("last message %+v", tr.Messages[len(tr.Messages)-1].Info)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"opencode", "-p", "hi", "--recover", "--idle-timeout", "0"}, "happy: --recover restarts an agent the idle watch found silent: it needs --idle-timeout above 0\n"},
		{[]string{"openclaw", "-p", "hi", "--recover"}, "happy: --recover restarts the agent in its own session, and OpenClaw has no resume\n"},
	} {
		if code, _, stderr := runHappy(t, env, tc.args...); code != exitUsage || stderr != tc.want {
			t.Errorf("happy %v = %d %q, want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// With --recover a silent Codex (app-server) is restarted on its own
// thread (thread/resume, its turns left out) and sent "continue"; the turn
// that follows is the run's answer. codex mcp-server cannot resume a
// thread, so there the turn is interrupted saying why.
func TestRecoverRestartsASilentCodex(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app-hang", "")
	b, err := os.ReadFile(filepath.Join("testdata", "codex", "codex-app-resumed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.2.jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	env := codexTestEnv(t, fc)
	code, stdout, stderr := runHappy(t, env, "codex", "-p", "Run `echo hi > hi.txt`", "--codex-protocol", "app-server",
		"--allow", "bash:*", "--idle-timeout", "400ms", "--recover")
	if code != exitOK || stdout != "Done: the command printed hi.\n" {
		t.Fatalf("happy codex -p --recover = %d %q %q", code, stdout, stderr)
	}
	if m := fc.mismatch(t); m != "" {
		t.Fatalf("happy's traffic differs from the script:\n%s", m)
	}
	var methods []string
	for _, l := range fc.lines(t, "recv.jsonl") {
		var m struct {
			Method string `json:"method"`
			Params struct {
				ThreadID string `json:"threadId"`
				Input    []struct {
					Text string `json:"text"`
				} `json:"input"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(l), &m)
		switch m.Method {
		case "thread/start", "thread/resume":
			methods = append(methods, m.Method+" "+m.Params.ThreadID)
		case "turn/start":
			methods = append(methods, m.Method+" "+m.Params.Input[0].Text)
		}
	}
	if want := "thread/start |turn/start Run `echo hi > hi.txt`|thread/resume 01a227ce-b3b3-76c0-8c71-6476bf69416c|turn/start continue"; strings.Join(methods, "|") != want {
		t.Fatalf("codex got %q, want %q", strings.Join(methods, "|"), want)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, tr := readSession(t, env, sid)
	var errs []string
	for _, m := range tr.Messages {
		if a, ok := m.Info.(*mapper.AssistantMessage); ok && a.Error != nil {
			errs = append(errs, a.Error.Data.Message)
		}
	}
	if strings.Join(errs, "|") != "the agent sent nothing for 400ms: restarted it in its own session (recovery 1 of 2)" {
		t.Fatalf("errors %q", errs)
	}
}
