package main

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

// closedURL is the address of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// A -p run whose relay is down completes the turn, says on stderr that the
// transcript waits in the outbox, and exits 4 after --flush-timeout.
func TestPrintRelayDownExitsUndelivered(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	env["HAPPY_SERVER_URL"] = closedURL(t)
	code, stdout, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*", "--flush-timeout", "500ms")
	if code != exitUndelivered || stdout != "Done: the command printed hi.\n" {
		t.Fatalf("exit %d stdout %q, want %d; stderr:\n%s", code, stdout, exitUndelivered, stderr)
	}
	if !strings.Contains(stderr, "version(s) of the transcript did not reach the relay within 500ms") ||
		!strings.Contains(stderr, "they are kept and sent the next time happy runs on this home") {
		t.Fatalf("stderr does not say the transcript waits:\n%s", stderr)
	}
}

// --yolo allows a call no rule names, says so at start, and records it in
// the session metadata.
func TestPrintYolo(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	code, _, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--yolo", "--permission-timeout", "1m")
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if !strings.HasPrefix(stderr, "happy: --yolo: every tool call") {
		t.Fatalf("no --yolo warning first on stderr:\n%s", stderr)
	}
	code, out, errOut := runHappy(t, env, "sessions", "--json")
	if code != exitOK || !strings.Contains(out, `"yolo": true`) || !strings.Contains(out, `"oneShot": true`) {
		t.Fatalf("sessions --json exit %d: %s %s", code, out, errOut)
	}
}

// The control commands of a -p session: send is refused (one prompt only),
// a wrong call id names the waiting ones, and approve says what it did.
func TestControlCommandsSayWhatTheyDid(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	c := startChild(t, env, "codex", "-p", "Run `echo hi > hi.txt`", "--codex-protocol", "app-server")
	sid := c.sessionID(t)
	waitBlocked(t, env, c, sid)
	_, tr := readSession(t, env, sid)
	callID := ""
	for _, tp := range toolsOf(tr) {
		if tp.State.Status == mapper.StatusBlocked {
			callID = tp.CallID
		}
	}
	cases := []struct {
		args      []string
		code      int
		stdout    string
		stderrHas string
	}{
		{[]string{"send", sid, "and then?"}, exitFailed, "", sid + " runs one prompt only (it was started with -p)"},
		{[]string{"approve", sid, "call_nope"}, exitFailed, "", `no tool call "call_nope" waits for permission; waiting: ` + callID + "\n"},
		{[]string{"approve", sid, callID}, exitOK, "approved " + callID + " in session " + sid + " (once)\n", ""},
	}
	for _, tc := range cases {
		code, stdout, stderr := runHappy(t, env, tc.args...)
		if code != tc.code || stdout != tc.stdout || !strings.Contains(stderr, tc.stderrHas) {
			t.Errorf("happy %s: exit %d stdout %q stderr %q; want %d %q, stderr with %q", strings.Join(tc.args, " "), code, stdout, stderr, tc.code, tc.stdout, tc.stderrHas)
		}
	}
	if code := c.wait(t); code != exitOK {
		t.Fatalf("the session exited %d: %s", code, c.errText())
	}
}

// runHappyOnTerminal is runHappy as if stdin and stdout were a terminal.
func runHappyOnTerminal(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	f.isTerminal = func(any) bool { return true }
	code = run(args, f)
	return code, out.String(), errb.String()
}

// Claude's interactive screen without a terminal is a usage error that
// points at -p; nothing starts and no session is opened.
func TestInteractiveNeedsATerminal(t *testing.T) {
	env := codexTestEnv(t, nil)
	dir := t.TempDir()
	claude := dir + "/claude"
	if err := os.WriteFile(claude, []byte("#!/bin/sh\necho started >"+dir+"/ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := "happy: happy claude without -p draws the agent's own screen and needs a terminal on stdin and stdout; in a script or CI run one turn with -p \"PROMPT\"\n"
	code, stdout, stderr := runHappy(t, env, "claude", "--claude-path", claude)
	if code != exitUsage || stdout != "" || stderr != want {
		t.Fatalf("= (%d, %q, %q), want (2, \"\", %q)", code, stdout, stderr, want)
	}
	if _, err := os.Stat(dir + "/ran"); err == nil {
		t.Fatal("claude was started")
	}
	if _, out, _ := runHappy(t, env, "sessions", "--json"); strings.Contains(out, `"id"`) {
		t.Fatalf("a session was opened: %s", out)
	}
}
