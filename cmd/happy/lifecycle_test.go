package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
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
	cmd            *exec.Cmd
	stdout, stderr *os.File
	done           chan struct{}
	code           int
}

// startChild runs happy with args and env in a process of its own (own
// process group); the group is killed when the test ends.
func startChild(t *testing.T, env map[string]string, args ...string) *child {
	t.Helper()
	return startChildUnder(t, env, nil, args...)
}

// startChildUnder is startChild with the happy process started by the
// command prefix (its program and arguments, then happy's), e.g. one that
// gives it a mount namespace of its own; nil prefix runs happy directly.
func startChildUnder(t *testing.T, env map[string]string, prefix []string, args ...string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(args)
	c := &child{done: make(chan struct{})}
	argv := append(append([]string(nil), prefix...), exe, "-test.run=^TestHappyChildProcess$")
	c.cmd = exec.Command(argv[0], argv[1:]...)
	c.cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	for k, v := range env {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := t.TempDir()
	if c.stderr, err = os.Create(filepath.Join(out, "stderr")); err != nil {
		t.Fatal(err)
	}
	if c.stdout, err = os.Create(filepath.Join(out, "stdout")); err != nil {
		t.Fatal(err)
	}
	c.cmd.Stderr, c.cmd.Stdout = c.stderr, c.stdout
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
		c.stdout.Close()
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
// agentStateOf decrypts the session's agentState (nil when none).
func agentStateOf(t *testing.T, o app.Opened) map[string]map[string]map[string]any {
	t.Helper()
	if o.Info.AgentState == nil {
		return nil
	}
	raw, err := crypto.DecodeBase64(*o.Info.AgentState)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := o.Cipher.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]map[string]map[string]any
	if err := json.Unmarshal(plain, &st); err != nil {
		t.Fatalf("agentState %s: %v", plain, err)
	}
	return st
}

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

// waitTitle waits until the relay holds title for session sid: the
// title is written by compare-and-set in the background, after the first
// prompt's messages.
func waitTitle(t *testing.T, env map[string]string, sid, title string) {
	t.Helper()
	// A child process's relay writes: no signal to wait on.
	waitfor.Poll{Within: 10 * time.Second}.Until(t, fmt.Sprintf("the title %q on the relay", title), func() bool {
		return sessionState(t, env, sid, time.Now()).Title == title
	})
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
	waitTitle(t, env, sid, "Run `echo hi > hi.txt`")
	// The reference app's agentState shows the request (written in the
	// background too).
	var blockedCall string
	waitfor.Poll{Within: 10 * time.Second}.Until(t, "the request in the agentState", func() bool {
		o, _ := readSession(t, env, sid)
		st := agentStateOf(t, o)
		for id := range st["requests"] {
			blockedCall = id
		}
		return len(st["requests"]) == 1
	})
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
	// Control commands say stale, how long since the heartbeat, and exit 5.
	for _, args := range [][]string{{"send", sid, "next"}, {"approve", sid, "call_1"}, {"abort", sid}} {
		code, stdout, stderr := runHappyAt(t, env, later, args...)
		if code != exitStale || stdout != "" || !staleLine.MatchString(stderr) ||
			!strings.HasSuffix(stderr, "; stale after 1m30s): its happy stopped, or cannot reach the relay: nothing is running to answer\n") {
			t.Fatalf("happy %s of a stale session = %d %q %q", args[0], code, stdout, stderr)
		}
	}
	// happy log shows the stale state, and the open parts as interrupted
	// (the stored transcript keeps them open: see below).
	code, stdout, stderr := runHappyAt(t, env, later, "log", sid)
	if code != exitOK || !strings.HasPrefix(stdout, "session "+sid+" — Run `echo hi > hi.txt`\n") ||
		!regexp.MustCompile(`\n  session `+sid+` is stale: no heartbeat for (1m[3-5][0-9]|2m[0-9]+)s \(since `).MatchString(stdout) ||
		!strings.Contains(stdout, " — interrupted (its happy stopped)  [") ||
		!strings.Contains(stdout, "\n(interrupted: its happy stopped before this message finished)\n") {
		t.Fatalf("log of a stale session = %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	// --follow with --stale-timeout stops once the heartbeat is missing for
	// that long, exit 5.
	code, stdout, stderr = runHappyAt(t, env, later, "log", sid, "--follow", "--interval", "10ms", "--stale-timeout", "1m")
	if code != exitStale || !strings.HasPrefix(stdout, "session "+sid+" — Run `echo hi > hi.txt`\n") ||
		!strings.Contains(stdout, " — interrupted (its happy stopped)  [") ||
		!strings.HasSuffix(stderr, ": its happy stopped, or cannot reach the relay; stopped following (--stale-timeout)\n") || !staleLine.MatchString(stderr) {
		t.Fatalf("log --follow --stale-timeout of a stale session = %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
	// Without it, a stale session is followed on until it really ends (the
	// next happy on its home settles it, below).
	following := startFollow(t, env, later, "log", sid, "--follow", "--interval", "10ms")
	waitfor.Poll{Within: 10 * time.Second}.Until(t, "the follower's stale notice", func() bool {
		return strings.Contains(following.stderr(), "; following on until it ends\n")
	})
	if code, _, stderr := runHappyAt(t, env, later, "wait", sid, "--timeout", "20s"); code != exitStale || !strings.Contains(stderr, "is stale") {
		t.Fatalf("happy wait of a stale session = %d %q", code, stderr)
	}
	if code, _, stderr := runHappy(t, env, "wait", sid, "--timeout", "300ms"); code != exitTimeout || !strings.Contains(stderr, "still waiting after 300ms") {
		t.Fatalf("happy wait --timeout of a session that never answers = %d %q", code, stderr)
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
	if st := agentStateOf(t, o); len(st["requests"]) != 0 || st["completedRequests"][blockedCall]["status"] != "canceled" ||
		st["completedRequests"][blockedCall]["reason"] != agent.ReasonWrapperExited {
		t.Fatalf("settled agentState %v", st)
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
	// The follower started while it was stale ends with it.
	code, stdout, stderr = following.wait(t)
	if code != exitOK || !staleLine.MatchString(stderr) || !strings.Contains(stderr, "\nhappy: session "+sid+" ended at ") ||
		!strings.Contains(stdout, "— error  [") {
		t.Fatalf("log --follow of the stale session once settled = %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}

// staleLine is how happy says a session is stale.
var staleLine = regexp.MustCompile(`happy: session \S+ is stale: no heartbeat for (1m[3-5][0-9]|2m[0-9]+)s \(since [0-9-]+ [0-9:]+; stale after 1m30s\): its happy stopped, or cannot reach the relay`)

// lockedBuffer is an output stream a command writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// follow is a happy command running in the test process (runHappyAt in
// the background).
type follow struct {
	out, errb lockedBuffer
	done      chan int
}

func startFollow(t *testing.T, env map[string]string, now time.Time, args ...string) *follow {
	t.Helper()
	fl := &follow{done: make(chan int, 1)}
	f := newFactory(strings.NewReader(""), &fl.out, &fl.errb, func(k string) string { return env[k] })
	f.now = func() time.Time { return now }
	go func() { fl.done <- run(args, f) }()
	return fl
}

func (fl *follow) stderr() string { return fl.errb.String() }

func (fl *follow) wait(t *testing.T) (int, string, string) {
	t.Helper()
	select {
	case code := <-fl.done:
		return code, fl.out.String(), fl.errb.String()
	case <-time.After(30 * time.Second):
		t.Fatalf("the follower did not end: stderr %q", fl.errb.String())
		return 0, "", ""
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
	why := "happy: Claude Code cannot be started: " + broken + `: its interpreter "/nonexistent/interpreter" (its #! line) is not there; ` +
		"point HAPPY_CLAUDE_PATH (or --claude-path) at a working claude executable, or install Claude Code\n"
	code, _, stderr := runHappyOnTerminal(t, env, "claude", "--claude-path", broken)
	if code != exitFailed || !strings.HasSuffix(stderr, " ended; read it with: happy log "+strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]+"\n"+why) {
		t.Fatalf("exit %d: %q", code, stderr)
	}
	// With -p the same one line, and no session: nothing was opened yet.
	if code, stdout, stderr := runHappy(t, env, "claude", "-p", "x", "--claude-path", broken); code != exitFailed || stdout != "" || stderr != why {
		t.Fatalf("-p: exit %d %q %q, want 1 %q", code, stdout, stderr, why)
	}
	// Codex too, whether happy asks its version first or starts it.
	codexWhy := "happy: Codex cannot be started: " + broken + `: its interpreter "/nonexistent/interpreter" (its #! line) is not there; ` +
		"point HAPPY_CODEX_PATH (or --codex-path) at a working codex executable, or install Codex\n"
	for _, proto := range []string{"auto", "app-server", "mcp"} {
		if code, stdout, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-path", broken, "--codex-protocol", proto); code != exitFailed || stdout != "" || stderr != codexWhy {
			t.Fatalf("codex --codex-protocol %s: exit %d %q %q, want 1 %q", proto, code, stdout, stderr, codexWhy)
		}
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
		// The same layout as happy log, header included.
		if r.stdout != plain {
			t.Fatalf("--follow differs from happy log:\n%s\n---\n%s", r.stdout, plain)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("happy log --follow did not return: it waited for its next poll instead of the stream's end")
	}
}

// happy log --json writes the session's document as it is read back,
// indented, byte for byte (it streams it: app.WriteTranscriptJSON), with
// a tool call, its permission and the turn's end in it.
func TestLogJSONIsTheDocument(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	code, _, stderr := runHappy(t, env, "codex", "-p", "Run `echo hi > hi.txt`", "--codex-protocol", "app-server", "--allow", "bash:*")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, tr := readSession(t, env, sid)
	var want bytes.Buffer
	if err := writeJSON(&want, tr); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runHappy(t, env, "log", sid, "--json")
	if code != exitOK || stderr != "" {
		t.Fatalf("log --json = %d: %q", code, stderr)
	}
	if stdout != want.String() || !strings.Contains(stdout, `"tool": "bash"`) || !strings.Contains(stdout, `"finish": "stop"`) {
		t.Fatalf("log --json:\n%s\nwant\n%s", stdout, want.String())
	}
}

// A Claude binary that exits at once without a word (/bin/true): the
// session keeps the prompt as its user message and title, ends with an
// answer saying the agent exited without answering, and happy -p exits 1
// saying so. Run a few times: the exit may come before or after the prompt
// is handed over.
func TestAgentThatExitsWithoutAnswering(t *testing.T) {
	env := codexTestEnv(t, nil)
	env["HAPPY_CLAUDE_PATH"] = "/bin/true"
	for i := 0; i < 3; i++ {
		code, stdout, stderr := runHappy(t, env, "claude", "-p", "Fix the parser")
		if code != exitFailed || stdout != "" || !strings.HasSuffix(stderr, "\nhappy: claude exited without answering the prompt\n") {
			t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
		}
		sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
		o, tr := readSession(t, env, sid)
		if o.Metadata.LifecycleState != app.LifecycleEnded || o.Info.Active || o.Title() != "Fix the parser" || tr.Session.Title != "Fix the parser" {
			t.Fatalf("metadata %+v active %v title %q", o.Metadata, o.Info.Active, tr.Session.Title)
		}
		if len(tr.Messages) != 2 {
			t.Fatalf("%d messages", len(tr.Messages))
		}
		if um, ok := tr.Messages[0].Info.(*mapper.UserMessage); !ok || len(tr.Messages[0].Parts) != 1 || tr.Messages[0].Parts[0].(*mapper.TextPart).Text != "Fix the parser" {
			t.Fatalf("first message %+v %+v", um, tr.Messages[0].Parts)
		}
		am, ok := tr.Messages[1].Info.(*mapper.AssistantMessage)
		if !ok || am.Finish != agent.FinishError || am.Time.Completed == nil || am.Error == nil || am.Error.Data.Message != session.NoAnswer {
			t.Fatalf("answer %+v", tr.Messages[1].Info)
		}
		if _, logged, _ := runHappy(t, env, "log", sid); logged != "session "+sid+" — Fix the parser\n  in "+o.Metadata.Path+"\n> Fix the parser\nerror (internal): the agent exited without answering\n" {
			t.Fatalf("happy log:\n%s", logged)
		}
	}
}

// childProcesses lists the pids of pid's child processes (from /proc).
func childProcesses(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			var n int
			if _, err := fmt.Sscan(s, &n); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// startOnPTY runs happy with args and env in a process of its own, its
// stdin and stdout a new PTY (its controlling terminal), its stderr a file;
// scr collects the screen. The group is killed when the test ends.
func startOnPTY(t *testing.T, env map[string]string, args ...string) (c *child, master *os.File, scr *syncBuffer) {
	t.Helper()
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no PTY: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	scr = &syncBuffer{}
	go func() { _, _ = io.Copy(scr, master) }()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(args)
	c = &child{done: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^TestHappyChildProcess$")
	c.cmd.Env = append(os.Environ(), childArgsEnv+"="+string(a))
	for k, v := range env {
		c.cmd.Env = append(c.cmd.Env, k+"="+v)
	}
	c.cmd.Dir = t.TempDir()
	if c.stderr, err = os.Create(filepath.Join(t.TempDir(), "stderr")); err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdin, c.cmd.Stdout, c.cmd.Stderr = tty, tty, c.stderr
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
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
	return c, master, scr
}

// SIGTERM to an interactive happy claude while its tool runs and waits for
// permission: happy exits 130, the session is ended on the relay with
// nothing open (the tool an error, the answer completed with a finish), and
// Claude's process group (with the tool's process) is gone.
func TestSignalledInteractiveHappyEndsItsSession(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("needs /proc")
	}
	env := codexTestEnv(t, nil)
	claude, dir := fakeClaude(t)
	env["HAPPY_CLAUDE_PATH"] = claude
	c, master, scr := startOnPTY(t, env, "claude")
	sid := c.sessionID(t)
	t.Cleanup(func() {
		if t.Failed() {
			_, logged, _ := runHappy(t, env, "log", sid)
			t.Logf("screen:\n%s\nstderr:\n%s\nhappy log:\n%s\ncalls: %q", scr.String(), c.errText(), logged, readLinesOf(filepath.Join(dir, "calls")))
		}
	})
	waitOutput(t, "the fake Claude's screen", scr, "FAKE READY", nil)
	if _, err := master.Write([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, "the tool's process", scr, "FAKE TOOL RUNNING", nil)
	waitBlocked(t, env, c, sid)
	agents := childProcesses(c.cmd.Process.Pid)
	tools := readLinesOf(filepath.Join(dir, "tool.pid"))
	if len(agents) == 0 || len(tools) != 1 {
		t.Fatalf("processes under happy %v, tool pids %v", agents, tools)
	}
	var toolPid int
	if _, err := fmt.Sscan(tools[0], &toolPid); err != nil {
		t.Fatal(err)
	}

	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := c.wait(t); code != exitInterrupted {
		t.Fatalf("exit %d, want 130: %s", code, c.errText())
	}
	if want := "happy: session " + sid + " ended; read it with: happy log " + sid + "\n"; !strings.HasSuffix(c.errText(), want) {
		t.Fatalf("stderr %q, want it to end with %q", c.errText(), want)
	}
	for _, pid := range agents {
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("process group %d after the exit: kill(-pgid, 0) = %v, want ESRCH", pid, err)
		}
	}
	if err := syscall.Kill(toolPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the tool's process %d after the exit: kill = %v, want ESRCH", toolPid, err)
	}
	o, tr := readSession(t, env, sid)
	if o.Metadata.LifecycleState != app.LifecycleEnded || o.Info.Active {
		t.Fatalf("metadata %+v active %v", o.Metadata, o.Info.Active)
	}
	ts := toolsOf(tr)
	if len(ts) != 1 || ts[0].State.Status != mapper.StatusError || ts[0].State.Block == nil || ts[0].State.Block.Decision != agent.DecisionReject {
		t.Fatalf("tools %+v", ts)
	}
	if n := openAssistants(tr); n != 0 {
		t.Fatalf("%d assistant messages open", n)
	}
	last := tr.Messages[len(tr.Messages)-1].Info.(*mapper.AssistantMessage)
	if last.Time.Completed == nil || last.Finish == "" {
		t.Fatalf("last message %+v", last)
	}
	t.Logf("tool %s (%s, block %s/%s); last answer finish %q", ts[0].State.Status, ts[0].State.Error, ts[0].State.Block.Decision, ts[0].State.Block.Reason, last.Finish)
}

// refusingClaudeEnv is codexTestEnv with a Claude that refuses its
// arguments at once: it writes why on stderr and exits 1.
func refusingClaudeEnv(t *testing.T, why string) map[string]string {
	t.Helper()
	env := codexTestEnv(t, nil)
	script := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \""+why+"\" >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	env["HAPPY_CLAUDE_PATH"] = script
	return env
}

// A Claude that refuses its arguments (it writes why on stderr and exits
// 1): happy -p shows Claude's own words, not only that it exited, and the
// transcript's answer carries them too.
func TestAgentThatRefusesItsArgumentsSaysWhy(t *testing.T) {
	const why = "error: option '--permission-mode <mode>' argument 'bogus' is invalid. Allowed choices are acceptEdits, bypassPermissions, default, plan."
	env := refusingClaudeEnv(t, why)
	code, stdout, stderr := runHappy(t, env, "claude", "-p", "hi")
	if code != exitFailed || stdout != "" || !strings.HasSuffix(stderr, "\nhappy: claude exited without answering the prompt; claude exit status 1: "+why+"\n") {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	sid := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	_, tr := readSession(t, env, sid)
	last := tr.Messages[len(tr.Messages)-1]
	am, ok := last.Info.(*mapper.AssistantMessage)
	if !ok || am.Error == nil || am.Error.Data.Message != session.NoAnswer+": claude exit status 1: "+why {
		t.Fatalf("answer %+v (%d messages)", last.Info, len(tr.Messages))
	}
	if len(tr.Messages) != 2 {
		t.Fatalf("%d messages, want the prompt and one answer", len(tr.Messages))
	}
}

// happy claude in the terminal, when Claude refuses its arguments and exits
// 1 at once: happy exits 1 too and says so, and the agent's own words
// stay on the screen.
func TestInteractiveAgentThatRefusesItsArguments(t *testing.T) {
	const why = "error: unknown option '--bogus-flag'"
	env := refusingClaudeEnv(t, why)
	c, _, scr := startOnPTY(t, env, "claude", "--", "--bogus-flag")
	if code := c.wait(t); code != exitFailed {
		t.Fatalf("exit %d, want %d\nscreen: %q\nstderr: %s", code, exitFailed, scr.String(), c.errText())
	}
	waitOutput(t, "Claude's own words on the screen", scr, why, nil)
	if !strings.HasSuffix(c.errText(), "happy: claude exited with status 1\n") {
		t.Fatalf("stderr %q", c.errText())
	}
}
