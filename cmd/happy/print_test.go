package main

import (
	"encoding/json"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/evilrelay"
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
	// The -p run said what it waits for and how to answer it.
	if want := "happy: bash echo hi > hi.txt waits for permission — answer with: happy approve " + sid + " " + callID + "  (or: happy deny " + sid + " " + callID + ")\n"; !strings.Contains(c.errText(), want) {
		t.Errorf("no waiting line %q on the -p run's stderr:\n%s", want, c.errText())
	}
	// Shell completion offers the running session (with its title, once
	// the relay has it) and the call waiting in it.
	waitTitle(t, env, sid, "Run `echo hi > hi.txt`")
	compl := []struct {
		args []string
		want string
	}{
		{[]string{"__complete", "approve", ""}, sid + "\tRun `echo hi > hi.txt` (codex, running)\n:4\n"},
		{[]string{"__complete", "approve", sid, ""}, callID + "\tbash"},
		{[]string{"__complete", "answer", sid, ""}, ":4\n"},
		{[]string{"__complete", "approve", sid, "zz"}, ":4\n"},
		{[]string{"__complete", "log", "zz"}, ":4\n"},
	}
	for _, c := range compl {
		code, stdout, stderr := runHappy(t, env, c.args...)
		if code != exitOK || !strings.HasPrefix(stdout, c.want) {
			t.Errorf("happy %q = %d %q (%s), want it to start with %q", c.args, code, stdout, stderr, c.want)
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

// --output json: one report a script can decide on, for each outcome.
func TestPrintOutputJSON(t *testing.T) {
	cases := []struct {
		name      string
		args      []string
		relayDown bool
		code      int
		status    string
		tool      app.ReportTool
	}{
		{"allowed by a rule", []string{"--allow", "bash:echo hi*"}, false, exitOK, app.RunCompleted,
			app.ReportTool{CallID: "call_fake_1", Tool: "bash", Status: mapper.StatusCompleted, Decision: agent.DecisionOnce, Reason: agent.ReasonRule,
				Rule: &agent.MatchedRule{Permission: "bash", Pattern: "echo hi*", Action: "allow"}}},
		{"denied by a rule", []string{"--deny", "bash:*"}, false, exitFailed, app.RunRejected,
			app.ReportTool{CallID: "call_fake_1", Tool: "bash", Status: mapper.StatusError, Decision: agent.DecisionReject, Reason: agent.ReasonRule,
				Rule: &agent.MatchedRule{Permission: "bash", Pattern: "*", Action: "deny"}}},
		{"relay down", []string{"--allow", "bash:*", "--flush-timeout", "300ms"}, true, exitUndelivered, app.RunUndelivered,
			app.ReportTool{CallID: "call_fake_1", Tool: "bash", Status: mapper.StatusCompleted, Decision: agent.DecisionOnce, Reason: agent.ReasonRule,
				Rule: &agent.MatchedRule{Permission: "bash", Pattern: "*", Action: "allow"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			capture := "codex-app"
			if tc.status == app.RunRejected {
				capture = "codex-app-decline"
			}
			fc := newFakeCodex(t, "", capture, "")
			env := codexTestEnv(t, fc)
			if tc.relayDown {
				env["HAPPY_SERVER_URL"] = closedURL(t)
			}
			args := append([]string{"codex", "-p", "Run `echo hi > hi.txt`", "--codex-protocol", "app-server", "--output", "json"}, tc.args...)
			code, stdout, stderr := runHappy(t, env, args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			var rep app.Report
			dec := json.NewDecoder(strings.NewReader(stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("stdout is not one report: %v\n%s", err, stdout)
			}
			if rep.Status != tc.status || rep.ExitCode != tc.code || rep.Title != "Run `echo hi > hi.txt`" || rep.FinalText != "Done: the command printed hi." ||
				rep.Dropped != 0 || rep.DurationMs <= 0 || len(rep.ToolCalls) != 1 {
				t.Fatalf("report %+v", rep)
			}
			got := rep.ToolCalls[0]
			got.Title, got.Error = "", ""
			if !reflect.DeepEqual(got, tc.tool) {
				t.Errorf("tool call %+v\nwant      %+v (rule %+v)", got, tc.tool, got.Rule)
			}
			if tc.relayDown != (rep.SessionID == "") || tc.relayDown != (rep.Undelivered > 0) {
				t.Errorf("session id %q, undelivered %d", rep.SessionID, rep.Undelivered)
			}
		})
	}
}

// --output stream-json: the flat events, one JSON object a line, while
// the turn runs (as happy log --events prints them), and nothing else.
func TestPrintOutputStreamJSON(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	code, stdout, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*", "--output", "stream-json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var types []string
	ids := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Type == "" || ev.ID == "" {
			t.Fatalf("not a flat event: %q (%v)", line, err)
		}
		if ids[ev.ID] {
			t.Fatalf("event %s printed twice", ev.ID)
		}
		ids[ev.ID] = true
		types = append(types, ev.Type)
	}
	// The prompt, then the turn.
	want := []string{"text", "turn-start", "tool-call-start", "permission-request", "permission-response", "tool-call-end", "text", "turn-end"}
	if !slices.Equal(types, want) {
		t.Fatalf("event types %v, want %v", types, want)
	}
	// The same events happy log --events gives afterwards, each written
	// once it no longer changes (the final text whole, not its first
	// chunk); a tool-call-start keeps the title known when it started.
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, logged, _ := runHappy(t, env, "log", sid, "--events")
	norm := func(s string) string {
		var out []string
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			var ev map[string]any
			_ = json.Unmarshal([]byte(line), &ev)
			if ev["type"] == "tool-call-start" {
				delete(ev, "title")
			}
			b, _ := json.Marshal(ev)
			out = append(out, string(b))
		}
		return strings.Join(out, "\n")
	}
	if norm(logged) != norm(stdout) {
		t.Errorf("stream-json differs from happy log --events:\n%s\n---\n%s", stdout, logged)
	}
	if !strings.Contains(stdout, `"text":"Done: the command printed hi."`) {
		t.Errorf("the final text is not whole in the stream:\n%s", stdout)
	}
	if code, _, stderr := runHappy(t, env, "codex", "--output", "yaml", "-p", "x"); code != exitUsage || !strings.Contains(stderr, `--output "yaml": want text, json or stream-json`) {
		t.Errorf("bad --output: %d %q", code, stderr)
	}
}

// A -p run whose relay stops taking messages before the end: the session is
// not marked ended while versions wait in the outbox (a reader would be
// told "ended" before the last rows); the next happy on this home sends
// them and only then ends the session.
func TestPrintEndWaitsForEveryRow(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	proxy := evilrelay.Start(t, env["HAPPY_SERVER_URL"], evilrelay.Drop("POST", "/v3/sessions/{id}/messages"))
	env["HAPPY_SERVER_URL"] = proxy.URL
	// A process of its own: the next happy settles only what a dead
	// process left.
	c := startChild(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*", "--flush-timeout", "500ms")
	sid := c.sessionID(t)
	if code := c.wait(t); code != exitUndelivered || !strings.Contains(c.errText(), "which then ends the session") {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitUndelivered, c.errText())
	}
	o, _ := readSession(t, env, sid)
	if o.Metadata.LifecycleState != app.LifecycleRunning || !o.Info.Active {
		t.Fatalf("with rows left over the session is %q (active %v), want still running", o.Metadata.LifecycleState, o.Info.Active)
	}
	// The relay takes messages again; the next session run on this home
	// sends the rows, then ends it.
	proxy.Reset()
	// (Its settling runs beside its own session: a short run may end
	// before the round does, and the next one finishes it.)
	var tr mapper.Transcript
	for range 5 {
		if code, _, errOut := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*"); code != exitOK {
			t.Fatalf("the next run = %d %s", code, errOut)
		}
		if o, tr = readSession(t, env, sid); o.Metadata.LifecycleState == app.LifecycleEnded {
			break
		}
	}
	if o.Metadata.LifecycleState != app.LifecycleEnded || len(tr.Messages) < 2 {
		t.Fatalf("after the next happy: %q with %d messages", o.Metadata.LifecycleState, len(tr.Messages))
	}
}
