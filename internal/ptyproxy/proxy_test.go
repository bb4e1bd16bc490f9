//go:build linux

package ptyproxy

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/happy-dev/happy/internal/proc"
)

// The test binary plays three programs, chosen by roleEnv:
//
//	happy     the wrapper: runs a Session on its own terminal (the test's PTY)
//	agent     a small interactive agent: raw mode, echoes keys, reports its
//	          size and SIGWINCH, turns on bracketed paste and hides the cursor,
//	          exits on 'q' / Ctrl-C, crashes on 'c', spawns a stubborn grandchild on 'g'
//	stubborn  a grandchild that ignores SIGTERM
//
// happyEnv picks the wrapper's variant: "" (one run), "twice" (run the agent
// again on the same terminal after it exits), "panic-output" (a panic in
// the goroutine that writes the agent's output, on key '!'),
// "panic-goroutine" (a panic in another goroutine guarded with Guard, on '!').
const (
	roleEnv  = "PTYPROXY_TEST_ROLE"
	happyEnv = "PTYPROXY_TEST_HAPPY"
	noRace   = "GORACE=atexit_sleep_ms=0"
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "happy":
		os.Exit(runFakeHappy(os.Getenv(happyEnv)))
	case "agent":
		os.Exit(runFakeAgent())
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		select {}
	}
	goleak.VerifyTestMain(m)
}

func childEnv(role string) []string {
	return append(os.Environ(), roleEnv+"="+role, noRace)
}

func runFakeAgent() int {
	if os.Getenv("PTYPROXY_TEST_AGENT_IGNORE_HUP") != "" {
		signal.Ignore(syscall.SIGHUP) // survives the PTY hanging up
	}
	if os.Getenv("PTYPROXY_TEST_AGENT_SLOW") != "" {
		time.Sleep(300 * time.Millisecond) // a terminal UI that takes its time to start
	}
	old, err := term.MakeRaw(0)
	if err != nil {
		fmt.Printf("AGENT RAW ERROR %v\r\n", err)
		return 5
	}
	w, h, _ := term.GetSize(0)
	fmt.Printf("AGENT READY pid=%d size=%dx%d\r\n", os.Getpid(), w, h)
	os.Stdout.WriteString("\x1b[?2004h\x1b[?25l")
	winch := make(chan os.Signal, 4)
	signal.Notify(winch, syscall.SIGWINCH)
	go func() {
		for range winch {
			w, h, _ := term.GetSize(0)
			fmt.Printf("WINCH %dx%d\r\n", w, h)
		}
	}()
	buf := make([]byte, 1)
	for {
		if _, err := os.Stdin.Read(buf); err != nil {
			if os.Getenv("PTYPROXY_TEST_AGENT_IGNORE_HUP") != "" {
				select {} // an agent that outlives its terminal
			}
			return 4
		}
		switch buf[0] {
		case 'q':
			_ = term.Restore(0, old)
			os.Stdout.WriteString("\x1b[?2004l\x1b[?25h")
			fmt.Print("AGENT BYE\r\n")
			return 0
		case 0x03:
			fmt.Print("AGENT CTRL-C\r\n")
			return 130
		case 'c':
			panic("agent crash")
		case 'g':
			gc := exec.Command(os.Args[0])
			gc.Env = childEnv("stubborn")
			out, _ := gc.StdoutPipe()
			if err := gc.Start(); err != nil {
				return 6
			}
			b := make([]byte, 6)
			_, _ = io.ReadFull(out, b)
			fmt.Printf("GRANDCHILD pid=%d\r\n", gc.Process.Pid)
		default:
			fmt.Printf("KEY %02x\r\n", buf[0])
		}
	}
}

// trigger watches the agent's output for "KEY 21" (the '!' key).
type trigger struct {
	w     io.Writer
	fire  chan struct{}
	once  sync.Once
	mode  string
	seen  bytes.Buffer
	fired bool
}

func (t *trigger) Write(p []byte) (int, error) {
	t.seen.Write(p)
	if !t.fired && bytes.Contains(t.seen.Bytes(), []byte("KEY 21")) {
		t.fired = true
		if t.mode == "panic-output" {
			panic("wrapper panic in the output goroutine")
		}
		t.once.Do(func() { close(t.fire) })
	}
	return t.w.Write(p)
}

func runFakeHappy(mode string) int {
	if err := proc.EnableSubreaper(); err != nil {
		return 90
	}
	runs := 1
	if mode == "twice" {
		runs = 2
	}
	code := 0
	for i := range runs {
		cmd := exec.Command(os.Args[0])
		cmd.Env = childEnv("agent")
		tr := &trigger{w: os.Stdout, fire: make(chan struct{}), mode: mode}
		s, err := Start(context.Background(), Options{In: os.Stdin, Out: tr, Cmd: cmd, Grace: 500 * time.Millisecond})
		if err != nil {
			fmt.Printf("HAPPY START ERROR %v\n", err)
			return 91
		}
		if mode == "panic-goroutine" {
			go func() {
				defer s.Guard()
				<-tr.fire
				panic("wrapper panic in a guarded goroutine")
			}()
		}
		res, err := s.Wait()
		fmt.Printf("HAPPY EXIT run=%d code=%d signal=%v raw=%v restore=%v err=%v\n", i+1, res.ExitCode(), res.Signal, res.RawErr, res.RestoreErr, err)
		code = res.ExitCode()
	}
	return code
}

// harness is a fake happy running on a PTY owned by the test.
type harness struct {
	t      *testing.T
	master *os.File
	slave  *os.File
	cmd    *exec.Cmd
	before *unix.Termios

	mu      sync.Mutex
	out     bytes.Buffer
	changed chan struct{} // gets a value after output arrived
}

func startHappy(t *testing.T, mode string, env ...string) *harness {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Cols: 120, Rows: 40}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, master: master, slave: slave, before: before, changed: make(chan struct{}, 1)}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(childEnv("happy"), happyEnv+"="+mode), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd = cmd
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			h.mu.Lock()
			h.out.Write(buf[:n])
			h.mu.Unlock()
			select {
			case h.changed <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if h.cmd.ProcessState == nil {
			_ = h.cmd.Process.Kill()
			_ = h.cmd.Wait()
		}
		master.Close()
		slave.Close()
	})
	return h
}

func (h *harness) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

// expect waits until the output matches re and returns the submatches.
func (h *harness) expect(re string) []string {
	h.t.Helper()
	return h.expectNth(re, 1)
}

// expectNth waits until re matched n times and returns the n-th match.
func (h *harness) expectNth(re string, n int) []string {
	h.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		if m := rx.FindAllStringSubmatch(h.output(), -1); len(m) >= n {
			return m[n-1]
		}
		select {
		case <-h.changed:
		case <-deadline.C:
			h.t.Fatalf("output never matched %q %d times:\n%q", re, n, h.output())
			return nil
		}
	}
}

func (h *harness) send(s string) {
	h.t.Helper()
	if _, err := h.master.Write([]byte(s)); err != nil {
		h.t.Fatal(err)
	}
}

// agentPid waits for the agent to be ready and returns its pid.
func (h *harness) agentPid() int {
	h.t.Helper()
	m := h.expect(`AGENT READY pid=(\d+) size=(\d+)x(\d+)`)
	pid, _ := strconv.Atoi(m[1])
	if m[2] != "120" || m[3] != "40" {
		h.t.Fatalf("agent started at %sx%s, want the terminal's 120x40", m[2], m[3])
	}
	return pid
}

// finish waits for the fake happy to exit and checks that the terminal is
// exactly as before: same termios, and typing echoes again.
func (h *harness) finish() (exitCode int) {
	h.t.Helper()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		h.t.Fatalf("happy did not exit:\n%q", h.output())
	}
	after, err := unix.IoctlGetTermios(int(h.slave.Fd()), unix.TCGETS)
	if err != nil {
		h.t.Fatal(err)
	}
	if *after != *h.before {
		h.t.Fatalf("terminal settings not restored:\n before %+v\n after  %+v", *h.before, *after)
	}
	if after.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != unix.ICANON|unix.ECHO|unix.ISIG {
		h.t.Fatalf("icanon/echo/isig not all on: lflag %#x", after.Lflag)
	}
	h.send("echo-check\n")
	h.expect(`echo-check\r\n`)
	ws := h.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// gone reports whether pid is no longer running (absent, or a zombie that
// only a non-reaping PID 1 still lists after its parent died).
func gone(pid int, allowZombie bool) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return allowZombie && i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// waitGone checks every millisecond, for at most 10 s, that pid is gone
// (the test is not its parent: nothing signals its end).
func waitGone(t *testing.T, pid int, allowZombie bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for !gone(pid, allowZombie) {
		select {
		case <-tick.C:
		case <-deadline.C:
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("process %d still there: %s", pid, b)
		}
	}
}

// TestB23ExitPaths runs the wrapper on a real PTY and ends the session in
// every way B23 lists; each time the terminal's settings must be exactly as
// before, typing must echo, the modes the agent turned on must be turned
// off, and the agent must be gone (reaped).
func TestB23ExitPaths(t *testing.T) {
	cases := []struct {
		name      string
		mode      string
		end       func(h *harness, happyPid, agentPid int)
		wantCode  int
		wantOut   string // must appear in the output
		panicPath bool   // happy dies: the agent is killed but nobody reaps it
	}{
		{"agent exits normally", "", func(h *harness, _, _ int) {
			h.send("x")
			h.expect("KEY 78")
			h.send("q")
		}, 0, "AGENT BYE", false},
		{"ctrl-c byte goes to the agent", "", func(h *harness, _, _ int) { h.send("\x03") }, 130, "AGENT CTRL-C", false},
		{"agent crashes", "", func(h *harness, _, _ int) { h.send("c") }, 2, "panic: agent crash", false},
		{"agent killed", "", func(h *harness, _, agent int) { _ = syscall.Kill(agent, syscall.SIGKILL) }, 128 + 9, "HAPPY EXIT run=1 code=137", false},
		{"SIGTERM to happy", "", func(h *harness, happy, _ int) { _ = syscall.Kill(happy, syscall.SIGTERM) }, 128 + 15, "signal=terminated", false},
		{"SIGHUP to happy", "", func(h *harness, happy, _ int) { _ = syscall.Kill(happy, syscall.SIGHUP) }, 128 + 1, "signal=hangup", false},
		{"SIGINT to happy", "", func(h *harness, happy, _ int) { _ = syscall.Kill(happy, syscall.SIGINT) }, 128 + 2, "HAPPY EXIT run=1 code=130", false},
		{"happy panics in its output goroutine", "panic-output", func(h *harness, _, _ int) { h.send("!") }, 2, "panic: wrapper panic in the output goroutine", true},
		{"happy panics in a guarded goroutine", "panic-goroutine", func(h *harness, _, _ int) { h.send("!") }, 2, "panic: wrapper panic in a guarded goroutine", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := startHappy(t, c.mode)
			agent := h.agentPid()
			c.end(h, h.cmd.Process.Pid, agent)
			code := h.finish()
			out := h.output()
			if code != c.wantCode || !strings.Contains(out, c.wantOut) {
				t.Fatalf("exit %d (want %d), output lacks %q?\n%q", code, c.wantCode, c.wantOut, out)
			}
			// The agent hid the cursor and turned bracketed paste on; unless
			// it turned them off itself, happy does.
			if !strings.Contains(out, "AGENT BYE") {
				i := strings.LastIndex(out, "\x1b[?2004h\x1b[?25l")
				if j := strings.LastIndex(out, "\x1b[?2004l\x1b[?25h"); j < i {
					t.Fatalf("modes left on: no reset after the agent's %q:\n%q", "\x1b[?2004h\x1b[?25l", out)
				}
			}
			waitGone(t, agent, c.panicPath)
		})
	}
}

// TestB23AgentStartedAgain: the agent exits and is started again on the
// same terminal (the hand-back from remote mode): raw mode works the second
// time, and the terminal is restored at the end.
func TestB23AgentStartedAgain(t *testing.T) {
	h := startHappy(t, "twice")
	first := h.agentPid()
	h.send("q")
	h.expect("HAPPY EXIT run=1 code=0 signal=<nil> raw=<nil> restore=<nil>")
	waitGone(t, first, false)
	m := h.expectNth(`AGENT READY pid=(\d+)`, 2)
	if m[1] == strconv.Itoa(first) {
		t.Fatal("second run reported the first agent")
	}
	h.send("z")
	h.expect("KEY 7a") // raw again: one key, no Enter needed
	h.send("q")
	h.expect("HAPPY EXIT run=2 code=0 signal=<nil> raw=<nil> restore=<nil>")
	if code := h.finish(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestB24GrandchildEnded: the agent leaves a grandchild that ignores
// SIGTERM; it must not outlive the session.
func TestB24GrandchildEnded(t *testing.T) {
	h := startHappy(t, "")
	agent := h.agentPid()
	h.send("g")
	m := h.expect(`GRANDCHILD pid=(\d+)`)
	gc, _ := strconv.Atoi(m[1])
	h.send("q")
	if code := h.finish(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	waitGone(t, agent, false)
	waitGone(t, gc, false)
}

// TestB25WindowSizeFollowsTerminal: the agent starts at the terminal's
// size; a change reaches it as SIGWINCH with the new size; 0x0 is ignored;
// a burst ends with the last size. (When the wrapper applies a size, and
// how it coalesces, is checked on a fake clock by the resizer tests.)
func TestB25WindowSizeFollowsTerminal(t *testing.T) {
	h := startHappy(t, "")
	h.agentPid()
	setSize := func(cols, rows uint16) {
		if err := pty.Setsize(h.master, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
			t.Fatal(err)
		}
	}
	setSize(100, 30)
	h.expect(`WINCH 100x30\r\n`)
	// A detached terminal's 0x0, then a burst.
	setSize(0, 0)
	for _, s := range [][2]uint16{{120, 22}, {120, 40}, {120, 22}, {90, 20}} {
		setSize(s[0], s[1])
	}
	h.expect(`WINCH 90x20\r\n`)
	// One more size once the burst was applied: whatever the burst left
	// behind arrives before it.
	setSize(120, 40)
	h.expect(`WINCH 120x40\r\n`)
	out := h.output()
	winches := regexp.MustCompile(`WINCH (\d+x\d+)`).FindAllStringSubmatch(out, -1)
	var sizes []string
	for _, w := range winches {
		sizes = append(sizes, w[1])
	}
	n := len(sizes)
	if n < 3 || n > 4 || sizes[0] != "100x30" || sizes[n-2] != "90x20" || sizes[n-1] != "120x40" || strings.Contains(out, "WINCH 0x0") {
		t.Fatalf("agent saw sizes %v, want 100x30, at most one size of the burst, 90x20, 120x40", sizes)
	}
	h.send("q")
	if code := h.finish(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(context.Background(), Options{}); err == nil {
		t.Fatal("no command accepted")
	}
	_, err := Start(context.Background(), Options{Out: io.Discard, Cmd: exec.Command("/nonexistent/agent"), NoSignals: true})
	if err == nil || !strings.Contains(err.Error(), "not started") {
		t.Fatalf("missing binary: %v", err)
	}
}

// TestPipedInput: with a pipe instead of a terminal there is no raw mode,
// input is still forwarded, the PTY gets the given size.
func TestPipedInput(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out syncBuf
	cmd := exec.Command(os.Args[0])
	cmd.Env = childEnv("agent")
	s, err := Start(context.Background(), Options{In: r, Out: &out, Cmd: cmd, Size: Size{Cols: 99, Rows: 33}, NoSignals: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("xq")); err != nil {
		t.Fatal(err)
	}
	res, err := s.Wait()
	w.Close()
	if err != nil || res.ExitCode() != 0 || res.RawErr != nil {
		t.Fatalf("result %+v, %v", res, err)
	}
	got := out.String()
	if !strings.Contains(got, "size=99x33") || !strings.Contains(got, "KEY 78") || !strings.Contains(got, "AGENT BYE") {
		t.Fatalf("output %q", got)
	}
}

// TestHeldInputAndTypeahead: with HoldInput, keys typed while the child
// starts wait until it reads keys one by one (the PTY's line editing does
// not echo them before the child draws), after the typeahead, in order.
func TestHeldInputAndTypeahead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := w.Write([]byte("dq")); err != nil { // typed before the child is up
		t.Fatal(err)
	}
	var out syncBuf
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(childEnv("agent"), "PTYPROXY_TEST_AGENT_SLOW=1")
	s, err := Start(context.Background(), Options{In: r, Out: &out, Cmd: cmd, NoSignals: true, HoldInput: true, Typeahead: []byte("ab")})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Wait()
	w.Close()
	if err != nil || res.ExitCode() != 0 {
		t.Fatalf("result %+v, %v; output %q", res, err, out.String())
	}
	got := out.String()
	before, after, ok := strings.Cut(got, "AGENT READY")
	if !ok || before != "" {
		t.Fatalf("output before the agent was up %q (all: %q)", before, got)
	}
	if !strings.Contains(after, "KEY 61\r\nKEY 62\r\nKEY 64\r\n") || !strings.Contains(after, "AGENT BYE") {
		t.Fatalf("output %q", got)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestB24WrapperKilled: when happy itself is killed (nothing of it runs to
// restore anything), its agent still does not stay on the terminal: the
// parent-death signal ends it, even an agent that ignores the PTY's hangup.
func TestB24WrapperKilled(t *testing.T) {
	h := startHappy(t, "", "PTYPROXY_TEST_AGENT_IGNORE_HUP=1")
	agent := h.agentPid()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
	waitGone(t, agent, true) // nobody is left to reap it: a zombie of PID 1 is dead enough
}
