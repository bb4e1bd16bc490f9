//go:build linux

package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/waitfor"
)

// The test binary doubles as the child programs: with PROC_TEST_HELPER set,
// TestMain runs the named helper instead of the tests.
const helperEnv = "PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	// PID 1 of a container may not reap; adopt our orphans so the tests can
	// prove that nothing is left, not even a zombie.
	if err := EnableSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "enable subreaper:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}

// runHelper is the body of a helper child. Every helper prints "ready" on
// stdout once its signal dispositions are set.
func runHelper(mode string) int {
	switch {
	case mode == "sleep":
		fmt.Println("ready")
		waitForKill()
	case mode == "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		waitForKill()
	case strings.HasPrefix(mode, "exit-"):
		n, _ := strconv.Atoi(strings.TrimPrefix(mode, "exit-"))
		return n
	case mode == "spawn-detached-then-exit":
		// Leader whose grandchild leaves the group (a session of its own,
		// as Node's detached children do), then the leader exits.
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), helperEnv+"=sleep")
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		out, err := gc.StdoutPipe()
		if err != nil {
			return 10
		}
		if err := gc.Start(); err != nil {
			return 11
		}
		if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
			return 12
		}
		fmt.Printf("grandchild %d\n", gc.Process.Pid)
		return 0
	case mode == "spawn-stubborn", mode == "spawn-stubborn-then-exit":
		// Leader with a grandchild that ignores SIGTERM, in the same group.
		gc := exec.Command(os.Args[0])
		gc.Env = append(os.Environ(), helperEnv+"=ignore-term")
		out, err := gc.StdoutPipe()
		if err != nil {
			return 10
		}
		if err := gc.Start(); err != nil {
			return 11
		}
		line, _ := bufio.NewReader(out).ReadString('\n')
		if line != "ready\n" {
			return 12
		}
		fmt.Printf("grandchild %d\n", gc.Process.Pid)
		if mode == "spawn-stubborn-then-exit" {
			return 0
		}
		waitForKill()
	}
	return 99
}

// waitForKill blocks a helper until a signal ends it (SIGTERM, or SIGKILL
// when it ignores SIGTERM). It waits for a signal nobody sends, so the
// runtime knows the process is waiting on the outside world rather than
// deadlocked.
func waitForKill() {
	never := make(chan os.Signal, 1)
	signal.Notify(never, syscall.SIGUSR2)
	<-never
}

func helperCmd(mode string) *exec.Cmd {
	c := exec.Command(os.Args[0])
	c.Env = append(os.Environ(), helperEnv+"="+mode, "GORACE=atexit_sleep_ms=0")
	return c
}

// startHelper starts a helper through Start with its stdout on a pipe and
// returns the process and a reader of that pipe.
func startHelper(t *testing.T, ctx context.Context, mode string, opts Options) (*Process, *bufio.Reader) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := helperCmd(mode)
	c.Stdout = w
	p, err := Start(ctx, c, opts)
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Kill()
		r.Close()
	})
	return p, bufio.NewReader(r)
}

func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() { s, err := r.ReadString('\n'); ch <- res{s, err} }()
	select {
	case x := <-ch:
		if x.err != nil {
			t.Fatalf("read helper output: %v (got %q)", x.err, x.s)
		}
		return strings.TrimSuffix(x.s, "\n")
	case <-time.After(20 * time.Second):
		t.Fatal("helper printed nothing")
		return ""
	}
}

func grandchildPid(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line := readLine(t, r)
	var pid int
	if _, err := fmt.Sscanf(line, "grandchild %d", &pid); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	return pid
}

// exists reports whether pid has any /proc entry (zombies included).
func exists(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// ended waits (at most 5 s) until pid is gone: killed and reaped. An
// adopted descendant is reaped by this process, the subreaper, on a
// goroutine of its own, which a loaded machine may run a moment after the
// leader's Wait returned.
func ended(pid int) bool {
	return waitfor.Poll{Within: 5 * time.Second, Every: 5 * time.Millisecond}.True(func() bool { return !exists(pid) })
}

// ourZombies lists zombie processes whose parent is the test process.
func ourZombies(t *testing.T) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var z []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.ppid == os.Getpid() && st.state == 'Z' {
			z = append(z, pid)
		}
	}
	return z
}

func waitTimeout(t *testing.T, p *Process, d time.Duration) (*os.ProcessState, error) {
	t.Helper()
	select {
	case <-p.Done():
		return p.Wait()
	case <-time.After(d):
		t.Fatalf("process %d not done after %v", p.Pid(), d)
		return nil, nil
	}
}

func TestExitCodeAndOwnGroup(t *testing.T) {
	for _, code := range []int{0, 1, 7} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			p, _ := startHelper(t, context.Background(), "exit-"+strconv.Itoa(code), Options{})
			st, err := waitTimeout(t, p, 20*time.Second)
			if st.ExitCode() != code {
				t.Fatalf("exit code %d, want %d", st.ExitCode(), code)
			}
			var ee *exec.ExitError
			if (code != 0) != errors.As(err, &ee) {
				t.Fatalf("error %v for exit code %d", err, code)
			}
			if exists(p.Pid()) {
				t.Fatalf("leader %d not reaped", p.Pid())
			}
		})
	}
}

func TestLeaderIsGroupLeader(t *testing.T) {
	p, r := startHelper(t, context.Background(), "spawn-stubborn", Options{Grace: 200 * time.Millisecond})
	gc := grandchildPid(t, r)
	leader, ok := readStat(p.Pid())
	if !ok {
		t.Fatal("no stat for leader")
	}
	if leader.pgrp != p.Pid() {
		t.Fatalf("leader pgrp %d, want its own pid %d", leader.pgrp, p.Pid())
	}
	g, ok := readStat(gc)
	if !ok || g.pgrp != p.Pid() {
		t.Fatalf("grandchild pgrp %d (ok %v), want %d", g.pgrp, ok, p.Pid())
	}
	self, _ := readStat(os.Getpid())
	if self.pgrp == p.Pid() {
		t.Fatal("child shares the test's group")
	}
}

func TestStopEscalatesToKillForStubbornGrandchild(t *testing.T) {
	const grace = 300 * time.Millisecond
	p, r := startHelper(t, context.Background(), "spawn-stubborn", Options{Grace: grace})
	gc := grandchildPid(t, r)
	start := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	st, err := p.Wait()
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("leader status %v, want killed by SIGTERM", st)
	}
	if err != nil && !isExitError(err) {
		t.Fatalf("wait error %v", err)
	}
	if exists(gc) {
		st, _ := readStat(gc)
		t.Fatalf("grandchild %d still present (state %c)", gc, st.state)
	}
	// SIGKILL only after the grace period: the grandchild ignored SIGTERM.
	if elapsed < grace {
		t.Fatalf("stop took %v, less than the grace period %v: SIGKILL came first", elapsed, grace)
	}
	if z := ourZombies(t); len(z) > 0 {
		t.Fatalf("zombies left: %v", z)
	}
}

func TestLeaderIgnoringTermIsKilled(t *testing.T) {
	p, r := startHelper(t, context.Background(), "ignore-term", Options{Grace: 200 * time.Millisecond})
	if s := readLine(t, r); s != "ready" {
		t.Fatalf("helper said %q", s)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	st, _ := p.Wait()
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("leader status %v, want killed by SIGKILL", st)
	}
}

func TestGroupEndedWhenLeaderExits(t *testing.T) {
	p, r := startHelper(t, context.Background(), "spawn-stubborn-then-exit", Options{Grace: 200 * time.Millisecond})
	gc := grandchildPid(t, r)
	st, err := waitTimeout(t, p, 20*time.Second)
	if err != nil || st.ExitCode() != 0 {
		t.Fatalf("leader exit %v, err %v", st, err)
	}
	if !ended(gc) {
		t.Fatalf("grandchild %d outlived its exited leader", gc)
	}
	if z := ourZombies(t); len(z) > 0 {
		t.Fatalf("zombies left: %v", z)
	}
}

// A descendant that left the leader's group (setsid) is adopted by this
// process, the subreaper, when the leader dies, and ended with the group;
// a child this process started itself, started after that leader, is not
// touched.
func TestDetachedDescendantEndedWithItsLeader(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("only Linux has a child subreaper")
	}
	bystander, _ := startHelper(t, context.Background(), "sleep", Options{})
	p, r := startHelper(t, context.Background(), "spawn-detached-then-exit", Options{Grace: 200 * time.Millisecond})
	gc := grandchildPid(t, r)
	late, _ := startHelper(t, context.Background(), "sleep", Options{})
	st, err := waitTimeout(t, p, 20*time.Second)
	if err != nil || st.ExitCode() != 0 {
		t.Fatalf("leader exit %v, err %v", st, err)
	}
	if !ended(gc) {
		st, _ := readStat(gc)
		ticks, _ := StartTicks(gc)
		_, mine := ownPids.Load(gc)
		t.Fatalf("detached grandchild %d outlived its exited leader (state %c, ppid %d (we are %d), start %d, leader start %d, ours %v)", gc, st.state, st.ppid, os.Getpid(), ticks, p.start, mine)
	}
	for _, q := range []*Process{bystander, late} {
		select {
		case <-q.Done():
			t.Fatalf("our own child %d was ended with another's group", q.Pid())
		default:
		}
	}
	if z := ourZombies(t); len(z) > 0 {
		t.Fatalf("zombies left: %v", z)
	}
}

func TestContextCancelStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p, r := startHelper(t, ctx, "sleep", Options{Grace: time.Second})
	if s := readLine(t, r); s != "ready" {
		t.Fatalf("helper said %q", s)
	}
	cancel()
	st, _ := waitTimeout(t, p, 20*time.Second)
	if ws := st.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("status %v, want SIGTERM", st)
	}
}

func TestStopIdempotentAndConcurrent(t *testing.T) {
	p, r := startHelper(t, context.Background(), "sleep", Options{Grace: time.Second})
	readLine(t, r)
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- p.Stop() }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal after end: %v", err)
	}
}

func TestSetsidKeptForPTYChildren(t *testing.T) {
	r, w, _ := os.Pipe()
	defer r.Close()
	c := helperCmd("sleep")
	c.Stdout = w
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	p, err := Start(context.Background(), c, Options{})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Kill()
	if s := readLine(t, bufio.NewReader(r)); s != "ready" {
		t.Fatalf("helper said %q", s)
	}
	sid, err := syscall.Getpgid(p.Pid())
	if err != nil || sid != p.Pid() {
		t.Fatalf("pgid %d err %v, want %d", sid, err, p.Pid())
	}
	if c.SysProcAttr.Setpgid {
		t.Fatal("Setpgid set together with Setsid")
	}
}

func TestStartErrors(t *testing.T) {
	if _, err := Start(context.Background(), nil, Options{}); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("nil cmd: %v", err)
	}
	_, err := Start(context.Background(), exec.Command("/nonexistent/agent"), Options{})
	if !errors.Is(err, ErrNotStarted) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing binary: %v", err)
	}
}

func TestParseStat(t *testing.T) {
	cases := []struct {
		in   string
		want procStat
		ok   bool
	}{
		{"42 (claude) S 1 42 42 34816 42 4194560", procStat{'S', 1, 42}, true},
		{"43 (a) b (c)) Z 42 42 42 0", procStat{'Z', 42, 42}, true},
		{"44 (x y) R 7 9", procStat{'R', 7, 9}, true},
		{"45 (x) RS 7 9", procStat{}, false},
		{"46 (x) S seven 9", procStat{}, false},
		{"47 (x) S 7", procStat{}, false},
		{"no parenthesis", procStat{}, false},
		{"", procStat{}, false},
	}
	for _, c := range cases {
		got, ok := parseStat([]byte(c.in))
		if ok != c.ok || got != c.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (claude) S 1 42 42 34816 42"))
	f.Add([]byte("43 (a) b (c)) Z 42 42 42 0"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := parseStat(b)
		if !ok && st != (procStat{}) {
			t.Fatalf("refused input left a value: %+v", st)
		}
	})
}

func TestReadStatOwnProcess(t *testing.T) {
	st, ok := readStat(os.Getpid())
	if !ok || st.state != 'R' && st.state != 'S' || st.ppid != os.Getppid() {
		t.Fatalf("own stat %+v ok %v", st, ok)
	}
	if _, ok := readStat(1 << 30); ok {
		t.Fatal("stat of a pid that cannot exist")
	}
}

func isExitError(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}
