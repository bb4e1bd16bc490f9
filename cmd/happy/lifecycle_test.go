package main

import (
	"bytes"
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

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/mapper"
)

// childArgsEnv carries the command line of a child happy process (a JSON
// array): the test binary re-executed, see startChild.
const childArgsEnv = "HAPPY_TEST_CHILD_ARGS"

// TestHappyChildProcess is not a test: it is the body of a child happy
// process, entered only when childArgsEnv is set (by startChild).
func TestHappyChildProcess(t *testing.T) {
	raw := os.Getenv(childArgsEnv)
	if raw == "" {
		t.Skip("runs only as the child happy process of the lifecycle tests")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, "child happy:", err)
		os.Exit(2)
	}
	// A daemon in a child process starts its sessions as child happy
	// processes too.
	selfExec = testSelfExec(nil)
	os.Exit(run(args, newFactory(os.Stdin, os.Stdout, os.Stderr, os.Getenv)))
}

// testSelfExec is selfExec for tests: the test binary re-executed as a
// child happy process (TestHappyChildProcess) with env added to this
// process's environment.
func testSelfExec(env map[string]string) func(args []string) *exec.Cmd {
	return func(args []string) *exec.Cmd {
		exe, err := os.Executable()
		if err != nil {
			exe = os.Args[0]
		}
		a, _ := json.Marshal(args)
		cmd := exec.Command(exe, "-test.run=^TestHappyChildProcess$")
		cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		return cmd
	}
}

// child is a happy process started by startChild.
type child struct {
	cmd    *exec.Cmd
	stderr *os.File
	done   chan struct{}
	code   int
}

// startChild runs happy with args and env in a process of its own (own
// process group); the group is killed when the test ends.
func startChild(t *testing.T, env map[string]string, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(args)
	c := &child{done: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^TestHappyChildProcess$")
	c.cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	for k, v := range env {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.stderr, err = os.Create(filepath.Join(t.TempDir(), "stderr")); err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr = c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait()
		c.code = c.cmd.ProcessState.ExitCode()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		c.stderr.Close()
	})
	return c
}

// errText is what the child wrote on stderr so far.
func (c *child) errText() string {
	b, _ := os.ReadFile(c.stderr.Name())
	return string(b)
}

// sessionID waits for the child's "happy: session ID — …" line.
func (c *child) sessionID(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(c.errText(), "\n") {
			if rest, ok := strings.CutPrefix(l, "happy: session "); ok {
				if id, _, ok := strings.Cut(rest, " "); ok {
					return id
				}
			}
		}
		select {
		case <-c.done:
			t.Fatalf("child happy exited %d before its session existed: %s", c.code, c.errText())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no session line from the child: %s", c.errText())
	return ""
}

// wait waits for the child to exit and returns its exit code.
func (c *child) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
		return c.code
	case <-time.After(60 * time.Second):
		t.Fatalf("child happy did not exit: %s", c.errText())
		return -1
	}
}

// runHappyAt is runHappy with the clock at now.
func runHappyAt(t *testing.T, env map[string]string, now time.Time, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	f.now = func() time.Time { return now }
	code = run(args, f)
	return code, out.String(), errb.String()
}

// readSession reads a session back as a reader on the same home does.
func readSession(t *testing.T, env map[string]string, sid string) (app.Opened, mapper.Transcript) {
	t.Helper()
	ctx := context.Background()
	h, err := home.New(env["HAPPY_HOME_DIR"])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := app.Connect(ctx, app.Env{Home: h, Getenv: func(k string) string { return env[k] }, Log: zerolog.Nop()}, app.ConnectOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	o, err := app.FindSession(ctx, conn, sid)
	if err != nil {
		t.Fatal(err)
	}
	rb, _, err := app.ReadTranscript(ctx, conn, o, app.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return o, rb.Transcript()
}

// sessionState is the state `happy sessions --json` shows for sid at now.
func sessionState(t *testing.T, env map[string]string, sid string, now time.Time) app.SessionSummary {
	t.Helper()
	code, stdout, stderr := runHappyAt(t, env, now, "sessions", "--json")
	if code != exitOK {
		t.Fatalf("happy sessions: exit %d: %s", code, stderr)
	}
	var list []app.SessionSummary
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("happy sessions --json: %v\n%s", err, stdout)
	}
	for _, s := range list {
		if s.ID == sid {
			return s
		}
	}
	t.Fatalf("happy sessions does not list %s: %s", sid, stdout)
	return app.SessionSummary{}
}

// toolsOf returns the tool parts of a transcript's root messages.
func toolsOf(tr mapper.Transcript) []*mapper.ToolPart {
	var out []*mapper.ToolPart
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.ToolPart); ok {
				out = append(out, tp)
			}
		}
	}
	return out
}

// openAssistants counts assistant messages without time.completed or finish.
func openAssistants(tr mapper.Transcript) int {
	n := 0
	for _, m := range tr.Messages {
		if am, ok := m.Info.(*mapper.AssistantMessage); ok && (am.Time.Completed == nil || am.Finish == "") {
			n++
		}
	}
	return n
}

// waitBlocked waits until readers see a tool of sid blocked on permission.
func waitBlocked(t *testing.T, env map[string]string, c *child, sid string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		_, tr := readSession(t, env, sid)
		for _, tp := range toolsOf(tr) {
			if tp.State.Status == mapper.StatusBlocked {
				return
			}
		}
		select {
		case <-c.done:
			t.Fatalf("child happy exited %d: %s", c.code, c.errText())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatal("no tool became blocked")
}

// A happy killed with kill -9 mid-turn leaves its session running for a
// moment, stale once its heartbeat is older than the limit, and the next
// happy on the same home settles it: the blocked tool errors with
// wrapper-exited, the open message completes with finish error, and the
// session ends for every reader.
func TestKilledHappyIsStaleThenSettledByTheNextHappy(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	c := startChild(t, env, "codex", "-p", "Run `echo hi > hi.txt`", "--codex-protocol", "app-server")
	sid := c.sessionID(t)
	waitBlocked(t, env, c, sid)
	// The title is written by compare-and-set in the background; kill once
	// the relay has it, so what follows is about the kill, not that race.
	for deadline := time.Now().Add(10 * time.Second); sessionState(t, env, sid, time.Now()).Title != "Run `echo hi > hi.txt`"; {
		if time.Now().After(deadline) {
			t.Fatal("the title never reached the relay")
		}
		time.Sleep(20 * time.Millisecond) // polls a child process's relay writes; no signal to wait on
	}
	if err := syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != -1 {
		t.Fatalf("child exit code %d, want -1 (killed)", code)
	}

	// Readers right away: still running (the heartbeat is fresh), and a
	// running session is never archived nor deleted.
	now := time.Now()
	if s := sessionState(t, env, sid, now); s.State != app.LifecycleRunning || s.Title != "Run `echo hi > hi.txt`" {
		t.Fatalf("right after the kill: %+v", s)
	}
	for _, verb := range []string{"archive", "delete"} {
		code, _, stderr := runHappyAt(t, env, now, verb, sid)
		if code != exitFailed || !strings.Contains(stderr, sid+": the session is running") {
			t.Fatalf("happy %s of a running session = %d %q", verb, code, stderr)
		}
	}
	// happy doctor names the orphan and the fix.
	if code, stdout, stderr := runHappyAt(t, env, now, "doctor", "--json"); code != exitOK ||
		!strings.Contains(stdout, `"name": "orphans",
    "status": "warn",
    "detail": "1 session(s) whose happy died before ending them: `+sid+`"`) {
		t.Fatalf("happy doctor after the kill = %d\n%s\n%s", code, stdout, stderr)
	}
	// A dry run says what the real run would: refused.
	if code, stdout, stderr := runHappyAt(t, env, now, "archive", "--dry-run", sid); code != exitFailed || stdout != "" || !strings.Contains(stderr, sid+": the session is running") {
		t.Fatalf("happy archive --dry-run of a running session = %d %q %q", code, stdout, stderr)
	}
	// Past the limit: stale, and --follow ends at once with exit 5.
	later := now.Add(app.StaleAfter + 5*time.Second)
	if s := sessionState(t, env, sid, later); s.State != app.StateStale {
		t.Fatalf("after %s without heartbeat: state %q", app.StaleAfter, s.State)
	}
	code, stdout, stderr := runHappyAt(t, env, later, "log", sid, "--follow", "--interval", "10ms")
	if code != exitStale || !strings.HasPrefix(stdout, "session "+sid+" — Run `echo hi > hi.txt`\n") ||
		!strings.HasSuffix(stderr, "(more than 1m30s); its happy probably died\n") || !strings.Contains(stderr, "happy: session "+sid+" is stale: no heartbeat since ") {
		t.Fatalf("log --follow of a stale session = %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	_, tr := readSession(t, env, sid)
	if openAssistants(tr) == 0 {
		t.Fatal("the killed session has no open message; the test proves nothing")
	}

	// The next happy on this home settles the orphan while it runs its own
	// session.
	fc2 := newFakeCodex(t, "", "codex-app", "")
	env2 := map[string]string{}
	for k, v := range env {
		env2[k] = v
	}
	env2["HAPPY_CODEX_PATH"] = fc2.path
	if code, _, stderr := runHappy(t, env2, "codex", "-p", "again", "--codex-protocol", "app-server", "--allow", "bash:*"); code != exitOK {
		t.Fatalf("the next happy: exit %d: %s", code, stderr)
	}
	o, tr := readSession(t, env, sid)
	if o.Metadata.LifecycleState != app.LifecycleEnded || o.Metadata.LifecycleStateSince < now.UnixMilli() || o.Info.Active {
		t.Fatalf("settled metadata %+v, active %v", o.Metadata, o.Info.Active)
	}
	tools := toolsOf(tr)
	if len(tools) != 1 {
		t.Fatalf("%d tools", len(tools))
	}
	st := tools[0].State
	if st.Status != mapper.StatusError || st.Error != agent.ReasonWrapperExited || st.Block == nil ||
		st.Block.Decision != agent.DecisionReject || st.Block.Reason != agent.ReasonWrapperExited {
		t.Fatalf("settled tool state %+v block %+v", st, st.Block)
	}
	if n := openAssistants(tr); n != 0 {
		t.Fatalf("%d assistant messages still open", n)
	}
	last := tr.Messages[len(tr.Messages)-1].Info.(*mapper.AssistantMessage)
	if last.Finish != agent.FinishError || last.Error == nil || !strings.Contains(last.Error.Data.Message, "wrapper-exited") {
		t.Fatalf("last message finish %q error %+v", last.Finish, last.Error)
	}
	for _, at := range []time.Time{time.Now(), later} {
		if s := sessionState(t, env, sid, at); s.State != app.LifecycleEnded {
			t.Fatalf("settled session state at %v: %q", at, s.State)
		}
	}
	code, _, stderr = runHappyAt(t, env, later, "log", sid, "--follow", "--interval", "10ms")
	if code != exitOK || !strings.HasPrefix(stderr, "happy: session "+sid+" ended at ") {
		t.Fatalf("log --follow of the settled session = %d %q", code, stderr)
	}
}

// SIGTERM and SIGINT to happy -p while a permission waits: the turn is
// aborted, happy exits 130 and the session is ended on the relay with
// nothing left open.
func TestSignalledHappyEndsItsSession(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			fc := newFakeCodex(t, "", "codex-app", "")
			env := codexTestEnv(t, fc)
			c := startChild(t, env, "codex", "-p", "x", "--codex-protocol", "app-server")
			sid := c.sessionID(t)
			waitBlocked(t, env, c, sid)
			if sig == syscall.SIGTERM {
				// While it runs, it cannot be resumed elsewhere.
				if code, _, stderr := runHappy(t, env, "resume", sid, "-p", "y"); code != exitFailed || !strings.Contains(stderr, "the session is running") {
					t.Fatalf("resume of a running session = %d %q", code, stderr)
				}
			}
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if code := c.wait(t); code != exitInterrupted {
				t.Fatalf("exit %d, want 130: %s", code, c.errText())
			}
			o, tr := readSession(t, env, sid)
			if o.Metadata.LifecycleState != app.LifecycleEnded || o.Info.Active {
				t.Fatalf("metadata %+v active %v", o.Metadata, o.Info.Active)
			}
			for _, tp := range toolsOf(tr) {
				if tp.State.Status.Open() {
					t.Fatalf("tool %s still %s", tp.CallID, tp.State.Status)
				}
			}
			if n := openAssistants(tr); n != 0 {
				t.Fatalf("%d assistant messages open", n)
			}
		})
	}
}

// An agent that crashes mid-turn: the session ends, its open tool settled
// (the adapter says how: Codex's client rejects what it was asking).
func TestCrashedAgentEndsTheSession(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "codex", "codex-app.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var cut []string
	for _, l := range strings.Split(string(b), "\n") {
		cut = append(cut, l)
		if strings.Contains(l, `"item/commandExecution/requestApproval"`) {
			break
		}
	}
	cut = append(cut, `{"t":1,"dir":"exit","msg":{"code":null,"sig":"SIGSEGV"}}`)
	fc := newFakeCodex(t, "", "", "")
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(strings.Join(cut, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := codexTestEnv(t, fc)
	code, _, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server")
	if code != exitFailed {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	o, tr := readSession(t, env, sid)
	if o.Metadata.LifecycleState != app.LifecycleEnded || o.Info.Active {
		t.Fatalf("metadata %+v active %v", o.Metadata, o.Info.Active)
	}
	tools := toolsOf(tr)
	if len(tools) != 1 || tools[0].State.Status != mapper.StatusError || tools[0].State.Error == "" {
		t.Fatalf("tool state %+v", tools[0].State)
	}
	if n := openAssistants(tr); n != 0 {
		t.Fatalf("%d assistant messages open", n)
	}
}

// An agent binary that is there but cannot start (its interpreter is
// missing): the relay session was opened first (interactive mode), so it is
// ended, not left running. A binary that is not there at all is refused
// before any session exists.
func TestAgentThatCannotStartEndsTheSession(t *testing.T) {
	env := codexTestEnv(t, nil)
	broken := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(broken, []byte("#!/nonexistent/interpreter\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runHappyOnTerminal(t, env, "claude", "--claude-path", broken)
	if code != exitFailed || !strings.Contains(stderr, broken) {
		t.Fatalf("exit %d: %q", code, stderr)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	s := sessionState(t, env, sid, time.Now())
	if s.State != app.LifecycleEnded || s.Active {
		t.Fatalf("session %+v", s)
	}

	missing := filepath.Join(t.TempDir(), "claude")
	code, _, stderr = runHappyOnTerminal(t, env, "claude", "--claude-path", missing)
	if want := "happy: Claude Code not found: --claude-path \"" + missing + "\" does not exist; point it at the claude executable\n"; code != exitFailed || stderr != want {
		t.Fatalf("missing binary: exit %d %q, want 1 %q", code, stderr, want)
	}
	code, stdout, _ := runHappy(t, env, "sessions", "--json")
	if code != exitOK || strings.Count(stdout, `"id"`) != 1 {
		t.Fatalf("after the missing binary, sessions lists: %s", stdout)
	}
}

// happy log --follow takes new rows from the relay's message stream, not
// from its polling: with an hour between polls it still prints the whole
// transcript of an ended session and returns when the stream ends.
func TestFollowReadsTheMessageStream(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	code, _, stderr := runHappy(t, env, "codex", "-p", "Run `echo hi > hi.txt`", "--codex-protocol", "app-server", "--allow", "bash:*")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, plain, _ := runHappy(t, env, "log", sid)
	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, stdout, stderr := runHappy(t, env, "log", sid, "--follow", "--interval", "1h")
		done <- result{code, stdout, stderr}
	}()
	select {
	case r := <-done:
		if r.code != exitOK || r.stdout == "" || !strings.Contains(r.stderr, "ended") {
			t.Fatalf("log --follow = %d\nstdout %q\nstderr %q", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "echo hi") || !strings.Contains(plain, "echo hi") {
			t.Fatalf("the followed transcript lacks the tool call:\n%s\n(happy log:\n%s)", r.stdout, plain)
		}
		// The same layout as happy log: after the headers, the same lines.
		followed := strings.SplitN(r.stdout, "\n", 2)[1]
		logged := strings.SplitN(plain, "\n", 3)[2]
		if followed != logged {
			t.Fatalf("--follow differs from happy log:\n%s\n---\n%s", followed, logged)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("happy log --follow did not return: it waited for its next poll instead of the stream's end")
	}
}
