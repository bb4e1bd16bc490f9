package dual

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/claude/local"
	"github.com/happy-dev/happy/adapters/claude/remote"
	"github.com/happy-dev/happy/adapters/claude/sdk"
	"github.com/happy-dev/happy/agent"
)

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "hook" {
		os.Exit(forwardHook(os.Args[2]))
	}
	if os.Getenv(roleEnv) == "claude" {
		os.Exit(runFakeClaude())
	}
	goleak.VerifyTestMain(m)
}

const firstID = "11111111-2222-4333-8444-555555555555"

// run is one dual session against the fake Claude.
type run struct {
	t        testing.TB
	agent    *Agent
	keys     *os.File
	projects string
	argv     string
	logBuf   *syncBuffer

	mu     sync.Mutex
	out    bytes.Buffer
	wrote  chan struct{} // a token after each terminal write (capacity 1)
	events []agent.Event
	evc    chan agent.Event
}

func (r *run) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case r.wrote <- struct{}{}:
	default:
	}
	return r.out.Write(p)
}

func (r *run) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// options are the dual options for the fake; in is the terminal input.
func (r *run) options(in *os.File, extraEnv ...string) Options {
	env := append(os.Environ(), roleEnv+"=claude", projectsEnv+"="+r.projects, argvLogEnv+"="+r.argv, "GORACE=atexit_sleep_ms=0")
	env = append(env, extraEnv...)
	return Options{
		Local: local.Options{
			Binary: os.Args[0], Env: env, HookCommand: []string{os.Args[0], "hook"}, StateDir: r.t.TempDir(),
			SessionID: firstID, In: in, Out: r, Grace: 2 * time.Second, Poll: 50 * time.Millisecond,
		},
		Remote: remote.Options{SDK: sdk.Options{Binary: os.Args[0], Env: env, Grace: 2 * time.Second}},
		Log:    zerolog.New(r.logBuf),
	}
}

func newRun(t testing.TB) *run {
	t.Helper()
	dir := t.TempDir()
	return &run{t: t, projects: dir, argv: filepath.Join(dir, "argv.log"), logBuf: &syncBuffer{}, wrote: make(chan struct{}, 1), evc: make(chan agent.Event, 1024)}
}

// start starts the agent with a pipe as the terminal input.
func (r *run) start(mod func(*Options), extraEnv ...string) {
	r.t.Helper()
	keysR, keysW, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	r.keys = keysW
	opts := r.options(keysR, extraEnv...)
	if mod != nil {
		mod(&opts)
	}
	r.startWith(opts)
	r.t.Cleanup(func() {
		keysW.Close()
		keysR.Close()
	})
}

func (r *run) startWith(opts Options) {
	r.t.Helper()
	a, err := Start(context.Background(), opts)
	if err != nil {
		r.t.Fatal(err)
	}
	r.agent = a
	go func() {
		for ev := range a.Events() {
			r.evc <- ev
		}
		close(r.evc)
	}()
	r.t.Cleanup(func() {
		if err := a.Close(); err != nil {
			r.t.Errorf("close: %v", err)
		}
	})
}

// expectOutput waits until the terminal shows s count times.
func (r *run) expectOutput(s string, count int) {
	r.t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for strings.Count(r.output(), s) < count {
		select {
		case <-r.wrote:
		case <-timeout.C:
			r.t.Fatalf("terminal never showed %q %d times:\n%q\nlog:\n%s", s, count, r.output(), r.logBuf)
		}
	}
}

// waitMode waits until the agent runs in mode m.
func (r *run) waitMode(m Mode) {
	r.t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for {
		cur, changed := r.agent.modeWatch()
		if cur == m {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			r.t.Fatalf("mode %s, want %s; log:\n%s", cur, m, r.logBuf)
		}
	}
}

// until collects events until pred matches one.
func (r *run) until(pred func(agent.Event) bool) agent.Event {
	r.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-r.evc:
			if !ok {
				r.t.Fatalf("events ended; got %s", describeAll(r.events))
			}
			r.events = append(r.events, ev)
			if pred(ev) {
				return ev
			}
		case <-timeout:
			r.t.Fatalf("event not seen after 20s; got %s\nterminal: %q\nlog:\n%s", describeAll(r.events), r.output(), r.logBuf)
		}
	}
}

func (r *run) turnEnded() *agent.TurnEnded {
	r.t.Helper()
	return r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.TurnEnded); return ok }).(*agent.TurnEnded)
}

// drain reads events until Events closes.
func (r *run) drain() {
	r.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-r.evc:
			if !ok {
				return
			}
			r.events = append(r.events, ev)
		case <-timeout:
			r.t.Fatalf("events not closed after 20s; got %s\nlog:\n%s", describeAll(r.events), r.logBuf)
		}
	}
}

func (r *run) key(s string) {
	r.t.Helper()
	if _, err := r.keys.WriteString(s); err != nil {
		r.t.Fatal(err)
	}
}

// starts returns the fake's start lines with the settings path cut out.
func (r *run) starts() []string {
	b, _ := os.ReadFile(r.argv)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		var keep []string
		for i := 0; i < len(f); i++ {
			switch f[i] {
			case "--settings":
				i++
				continue
			case "--output-format", "--input-format", "--verbose", "--permission-prompt-tool", "--include-partial-messages", "stream-json", "stdio":
				continue
			}
			keep = append(keep, f[i])
		}
		out = append(out, strings.Join(keep, " "))
	}
	return out
}

func describe(ev agent.Event) string {
	switch e := ev.(type) {
	case *agent.UserPrompt:
		return "prompt " + e.Text
	case *agent.TextFinal:
		return "text " + e.Text
	case *agent.SessionInfo:
		if e.ProviderSessionID != "" {
			return "claude-session " + e.ProviderSessionID
		}
	case *agent.TurnEnded:
		if e.Error != "" {
			return "turn-ended " + e.Reason + " (" + e.Error + ")"
		}
		return "turn-ended " + e.Reason
	case *agent.DroppedInput:
		return fmt.Sprintf("dropped %s %s %s", e.Dropped.Kind, e.Dropped.Reason, e.Dropped.Detail)
	}
	return ""
}

// describeAll names the events; a Claude session id is named only when it
// changes (each mode, and the transcript's records, repeat it).
func describeAll(evs []agent.Event) string {
	var out []string
	lastSession := ""
	for _, ev := range evs {
		d := describe(ev)
		if strings.HasPrefix(d, "claude-session ") {
			if d == lastSession {
				continue
			}
			lastSession = d
		}
		if d != "" {
			out = append(out, d)
		}
	}
	return strings.Join(out, " | ")
}

// prompt sends a prompt as the runner does (from its own goroutine).
func (r *run) prompt(text string) error {
	return r.agent.Prompt(context.Background(), agent.Prompt{Text: text})
}

// TestRoundTrip: local turn, a prompt from another device hands the
// session to remote mode (resuming the same Claude session) and is
// answered there, a key brings it back to local mode (resuming again, the
// transcript read only from where remote mode left it), a local turn,
// then the person quits Claude and Events closes.
func TestRoundTrip(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY "+firstID, 1)
	if m := r.agent.Mode(); m != ModeLocal {
		t.Fatalf("mode %s", m)
	}
	r.key("one\r")
	if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
		t.Fatalf("local turn %+v", e)
	}
	if err := r.prompt("two"); err != nil {
		t.Fatal(err)
	}
	if m := r.agent.Mode(); m != ModeRemote {
		t.Fatalf("mode after a prompt %s", m)
	}
	if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
		t.Fatalf("remote turn %+v", e)
	}
	// The notice comes once, after everything local mode drew.
	out := r.output()
	if strings.Count(out, NoticeRemote) != 1 || !strings.HasSuffix(out, NoticeRemote+"\r\n") {
		t.Fatalf("terminal after the switch:\n%q", out)
	}
	r.key("  ")
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY "+firstID, 2)
	r.key("three\r")
	if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
		t.Fatalf("second local turn %+v", e)
	}
	r.key("\x04")
	r.drain()
	want := "claude-session " + firstID + " | prompt one | text local: one | turn-ended completed | " +
		"text remote: two | turn-ended completed | prompt three | text local: three | turn-ended completed"
	if got := describeAll(r.events); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	wantStarts := []string{
		"tui --session-id " + firstID,
		"sdk --resume " + firstID,
		"tui --resume " + firstID,
	}
	if got := r.starts(); strings.Join(got, "\n") != strings.Join(wantStarts, "\n") {
		t.Fatalf("claude starts\n got %q\nwant %q", got, wantStarts)
	}
	if m := r.agent.Mode(); m != ModeEnded {
		t.Fatalf("mode at the end %s", m)
	}
	if err := r.prompt("four"); !errors.Is(err, ErrEnded) {
		t.Fatalf("prompt after the end: %v", err)
	}
	if err := r.agent.Interrupt(context.Background()); !errors.Is(err, ErrEnded) {
		t.Fatalf("interrupt after the end: %v", err)
	}
	for _, want := range []string{`"to":"remote"`, `"to":"local"`, `"why":"key press"`, "claude ended in local mode"} {
		if !strings.Contains(r.logBuf.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, r.logBuf)
		}
	}
}

// TestKeyInterruptsRemoteTurn: a key while a remote turn runs interrupts
// it, and local mode starts once the turn has ended.
func TestKeyInterruptsRemoteTurn(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("hang on"); err != nil {
		t.Fatal(err)
	}
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.TextFinal); return ok && e.Text == "remote: hang on" })
	r.key("  ")
	if e := r.turnEnded(); e.Reason != agent.TurnInterrupted {
		t.Fatalf("remote turn %+v", e)
	}
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got, want := describeAll(r.events), "claude-session "+firstID+" | text remote: hang on | turn-ended interrupted"; got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

// TestDoubleSpace: in remote mode other keys are ignored, a first space
// asks for a second one and says that it interrupts the running turn, and
// the second one interrupts the turn and takes control back.
func TestDoubleSpace(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("hang on"); err != nil {
		t.Fatal(err)
	}
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.TextFinal); return ok && e.Text == "remote: hang on" })
	r.key("x")
	r.key(" ")
	confirm := "happy: press space again to take control back here (this interrupts the turn from the other device).\r\n"
	r.expectOutput(confirm, 1)
	if m := r.agent.Mode(); m != ModeRemote {
		t.Fatalf("mode %s after other keys and one space", m)
	}
	r.key(" ")
	if e := r.turnEnded(); e.Reason != agent.TurnInterrupted {
		t.Fatalf("remote turn %+v", e)
	}
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
	out := r.output()
	if n := strings.Count(out, "happy: press space again"); n != 1 {
		t.Fatalf("confirmation printed %d times:\n%q", n, out)
	}
	if !strings.Contains(out, NoticeRemote+"\r\n") {
		t.Fatalf("no remote notice:\n%q", out)
	}
}

// TestCtrlCTakesControlBack: in remote mode Ctrl-C takes control back at
// once (a person stopping what runs is never ignored), interrupting the
// running remote turn.
func TestCtrlCTakesControlBack(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("hang on"); err != nil {
		t.Fatal(err)
	}
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.TextFinal); return ok && e.Text == "remote: hang on" })
	r.key("\x03")
	if e := r.turnEnded(); e.Reason != agent.TurnInterrupted {
		t.Fatalf("remote turn %+v", e)
	}
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
}

// TestKeysTypedWhileClaudeRestarts: keys typed right after the second
// space (in the same read, and while the interrupted remote turn ends and
// Claude starts again) go to the new local Claude, in order.
func TestKeysTypedWhileClaudeRestarts(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("hang on"); err != nil {
		t.Fatal(err)
	}
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.TextFinal); return ok && e.Text == "remote: hang on" })
	r.key("  thr")
	r.key("ee\r")
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.UserPrompt); return ok && e.Text == "three" })
	r.turnEnded()
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got, want := describeAll(r.events), "claude-session "+firstID+" | text remote: hang on | turn-ended interrupted | prompt three | text local: three | turn-ended completed"; got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(r.logBuf.String(), `"typeahead":`) {
		t.Fatalf("log:\n%s", r.logBuf)
	}
}

// TestSpaceConfirmation: without a running turn the line does not speak of
// one; a second space after the window, or after another key, asks again.
func TestSpaceConfirmation(t *testing.T) {
	cases := []struct {
		name   string
		window time.Duration
		keys   []string
	}{
		{"too late", time.Nanosecond, []string{" ", " "}},
		{"another key between", time.Hour, []string{" ", "y", " "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			r.start(func(o *Options) { o.ConfirmWindow = c.window })
			r.expectOutput("FAKE TUI READY", 1)
			if err := r.prompt("two"); err != nil {
				t.Fatal(err)
			}
			r.turnEnded()
			for i, k := range c.keys {
				r.key(k)
				if k == " " {
					r.expectOutput(NoticeConfirm+"\r\n", strings.Count(strings.Join(c.keys[:i+1], ""), " "))
				}
			}
			if m := r.agent.Mode(); m != ModeRemote {
				t.Fatalf("mode %s", m)
			}
			if strings.Contains(r.output(), NoticeConfirmTurn) {
				t.Fatalf("speaks of a running turn:\n%q", r.output())
			}
		})
	}
}

// TestRemoteCrashBackToLocal: remote mode ending by itself ends its turn
// and brings the session back to local mode with a notice.
func TestRemoteCrashBackToLocal(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	r.key("one\r")
	r.turnEnded()
	if err := r.prompt("crash now"); err != nil {
		t.Fatal(err)
	}
	if e := r.turnEnded(); e.Reason != agent.TurnAgentExited {
		t.Fatalf("remote turn %+v", e)
	}
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
	r.expectOutput(fmt.Sprintf(noticeBack, "claude exited"), 1)
	r.key("after\r")
	if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
		t.Fatalf("local turn %+v", e)
	}
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got := strings.Join(r.starts(), "|"); got != "tui --session-id "+firstID+"|sdk --resume "+firstID+"|tui --resume "+firstID {
		t.Fatalf("claude starts %s", got)
	}
	if got := describeAll(r.events); strings.Count(got, "prompt one") != 1 || strings.Count(got, "prompt after") != 1 {
		t.Fatalf("events %s", got)
	}
}

// TestRemoteCannotStart: the prompt fails, and Claude is back in local
// mode, resuming the same session.
func TestRemoteCannotStart(t *testing.T) {
	r := newRun(t)
	r.start(func(o *Options) { o.Remote.SDK.Binary = filepath.Join(t.TempDir(), "missing-claude") })
	r.expectOutput("FAKE TUI READY", 1)
	r.key("one\r")
	r.turnEnded()
	err := r.prompt("two")
	if err == nil || errors.Is(err, ErrEnded) {
		t.Fatalf("prompt with no remote claude: %v", err)
	}
	if m := r.agent.Mode(); m != ModeLocal {
		t.Fatalf("mode %s", m)
	}
	r.expectOutput("FAKE TUI READY", 2)
	r.key("three\r")
	r.turnEnded()
	r.key("\x04")
	r.drain()
	if got := describeAll(r.events); strings.Count(got, "prompt one") != 1 || !strings.Contains(got, "prompt three") || strings.Contains(got, "two") {
		t.Fatalf("events %s", got)
	}
	if got := r.starts(); strings.Join(got, "|") != "tui --session-id "+firstID+"|tui --resume "+firstID {
		t.Fatalf("claude starts %q", got)
	}
	if strings.Contains(r.output(), NoticeRemote) {
		t.Fatal("remote notice printed though remote mode never ran")
	}
}

// TestForkedSessionID: when resuming in remote mode gives the Claude
// session a new id, local mode resumes that one, from the end of its
// transcript.
func TestForkedSessionID(t *testing.T) {
	r := newRun(t)
	r.start(nil, forkEnv+"=1")
	r.expectOutput("FAKE TUI READY", 1)
	r.key("one\r")
	r.turnEnded()
	if err := r.prompt("two"); err != nil {
		t.Fatal(err)
	}
	r.turnEnded()
	if id := r.agent.SessionID(); id != forkedID {
		t.Fatalf("session id in remote mode %q", id)
	}
	r.key("  ")
	r.expectOutput("FAKE TUI READY "+forkedID, 1)
	r.key("three\r")
	r.turnEnded()
	r.key("\x04")
	r.drain()
	got := describeAll(r.events)
	if strings.Count(got, "prompt one") != 1 || strings.Count(got, "two") != 1 || strings.Count(got, "prompt three") != 1 {
		t.Fatalf("events %s", got)
	}
	if s := r.starts(); len(s) != 3 || s[2] != "tui --resume "+forkedID {
		t.Fatalf("claude starts %q", s)
	}
}

// TestCloseInRemoteMode: Close ends remote mode, and Events closes.
func TestCloseInRemoteMode(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("two"); err != nil {
		t.Fatal(err)
	}
	r.turnEnded()
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if m := r.agent.Mode(); m != ModeEnded {
		t.Fatalf("mode %s", m)
	}
	if err := r.agent.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := r.agent.Decide(context.Background(), "toolu_x", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, ErrEnded) {
		t.Fatalf("decide after close: %v", err)
	}
}

// TestPromptInRemoteMode: later prompts go straight to remote mode.
func TestPromptInRemoteMode(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	for _, p := range []string{"two", "three"} {
		if err := r.prompt(p); err != nil {
			t.Fatal(err)
		}
		r.turnEnded()
	}
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got, want := describeAll(r.events), "claude-session "+firstID+" | text remote: two | turn-ended completed | text remote: three | turn-ended completed"; got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if s := r.starts(); len(s) != 2 {
		t.Fatalf("claude starts %q", s)
	}
	if n := strings.Count(r.output(), NoticeRemote); n != 1 {
		t.Fatalf("notice printed %d times", n)
	}
}

// TestPromptBeforeAnythingTyped: Claude writes its session only from the
// first prompt on, so a session nobody typed in cannot be resumed: remote
// mode starts it under the same id (--session-id), and local mode resumes
// it afterwards.
func TestPromptBeforeAnythingTyped(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("two"); err != nil {
		t.Fatal(err)
	}
	if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
		t.Fatalf("remote turn %+v", e)
	}
	r.key("  ")
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
	r.key("three\r")
	r.turnEnded()
	r.key("\x04")
	r.drain()
	want := "claude-session " + firstID + " | text remote: two | turn-ended completed | prompt three | text local: three | turn-ended completed"
	if got := describeAll(r.events); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	wantStarts := "tui --session-id " + firstID + "|sdk --session-id " + firstID + "|tui --resume " + firstID
	if got := strings.Join(r.starts(), "|"); got != wantStarts {
		t.Fatalf("claude starts\n got %s\nwant %s", got, wantStarts)
	}
}

// TestRemoteWroteNothing: remote mode ended before Claude wrote the
// session (it crashed on the first prompt): local mode starts the session
// again under its id instead of failing to resume it.
func TestRemoteWroteNothing(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("crash"); err != nil {
		t.Fatal(err)
	}
	if e := r.turnEnded(); e.Reason != agent.TurnAgentExited {
		t.Fatalf("remote turn %+v", e)
	}
	r.waitMode(ModeLocal)
	r.expectOutput("FAKE TUI READY", 2)
	r.key("three\r")
	if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
		t.Fatalf("local turn %+v", e)
	}
	r.key("\x04")
	r.drain()
	wantStarts := "tui --session-id " + firstID + "|sdk --session-id " + firstID + "|tui --session-id " + firstID
	if got := strings.Join(r.starts(), "|"); got != wantStarts {
		t.Fatalf("claude starts\n got %s\nwant %s", got, wantStarts)
	}
}

// TestPromptBeforeSessionStart: a prompt arriving before Claude reported
// its session id cannot be handed over; it fails with ErrNoClaudeSession and
// local mode starts again as it first did.
func TestPromptBeforeSessionStart(t *testing.T) {
	r := newRun(t)
	r.start(nil, noStartHookEnv+"=1")
	r.expectOutput("FAKE TUI READY", 1)
	if err := r.prompt("two"); !errors.Is(err, ErrNoClaudeSession) || errors.Is(err, ErrEnded) {
		t.Fatalf("prompt: %v", err)
	}
	if m := r.agent.Mode(); m != ModeLocal {
		t.Fatalf("mode %s", m)
	}
	r.expectOutput("FAKE TUI READY", 2)
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if got := strings.Join(r.starts(), "|"); got != "tui --session-id "+firstID+"|tui --session-id "+firstID {
		t.Fatalf("claude starts %s", got)
	}
}

// TestSwitchMode: another device moves the session to remote mode and back
// (the reference app's switch RPC); an unknown mode and the current mode
// change nothing.
func TestSwitchMode(t *testing.T) {
	r := newRun(t)
	r.start(nil)
	r.expectOutput("FAKE TUI READY "+firstID, 1)
	r.key("one\r")
	r.turnEnded()
	ctx := context.Background()
	for i, c := range []struct {
		to   string
		want bool
		mode Mode
	}{
		{"sideways", false, ModeLocal},
		{"local", true, ModeLocal},
		{"remote", true, ModeRemote},
		{"remote", true, ModeRemote},
		{"local", true, ModeLocal},
	} {
		ok, err := r.agent.SwitchMode(ctx, c.to)
		if err != nil || ok != c.want {
			t.Fatalf("SwitchMode(%s) = %v, %v; want %v", c.to, ok, err, c.want)
		}
		r.waitMode(c.mode)
		if c.to == "remote" && c.want {
			// Remote mode runs a turn (so its Claude has started) before
			// the next switch.
			if err := r.prompt("in remote " + fmt.Sprint(i)); err != nil {
				t.Fatal(err)
			}
			if e := r.turnEnded(); e.Reason != agent.TurnCompleted {
				t.Fatalf("remote turn %+v", e)
			}
		}
	}
	r.expectOutput("FAKE TUI READY "+firstID, 2)
	if err := r.agent.Close(); err != nil {
		t.Fatal(err)
	}
	r.drain()
	if ok, err := r.agent.SwitchMode(ctx, "remote"); ok || !errors.Is(err, ErrEnded) {
		t.Fatalf("switch after the end: %v %v", ok, err)
	}
	wantStarts := []string{"tui --session-id " + firstID, "sdk --resume " + firstID, "tui --resume " + firstID}
	if got := r.starts(); strings.Join(got, "\n") != strings.Join(wantStarts, "\n") {
		t.Fatalf("claude starts\n got %q\nwant %q", got, wantStarts)
	}
	if !strings.Contains(r.logBuf.String(), `"why":"switch from another device"`) {
		t.Errorf("log lacks the switch:\n%s", r.logBuf)
	}
}
