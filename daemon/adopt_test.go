//go:build linux

package daemon

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/proc"
)

// idleSession starts the test binary as a fake session in a process group
// of its own that runs until SIGTERM (exit 0); it returns the command and
// the leader's start time. The process is this test's child, as a session
// is the child of the daemon that died: neither is the adopting daemon's.
func idleSession(t *testing.T) (*exec.Cmd, uint64) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fakeSessionEnv+"=idle")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	ticks, ok := proc.StartTicks(cmd.Process.Pid)
	if !ok {
		t.Fatal("no start time")
	}
	return cmd, ticks
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// An adopted session's end is noticed though the daemon is not its
// parent: kill -9 from outside closes Done within a few polls.
func TestAdoptedSessionExitIsNoticed(t *testing.T) {
	cmd, ticks := idleSession(t)
	a := adopt(cmd.Process.Pid, ticks, time.Second)
	if closedWithin(a.Done(), 3*adoptPoll) {
		t.Fatal("Done closed while the session runs")
	}
	start := time.Now()
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(a.Done(), 5*time.Second) {
		t.Fatal("the end of the adopted session was not noticed within 5 s")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("noticed after %s, want under 2 s", d)
	}
}

// Stop ends an adopted session with SIGTERM to its group (the fake exits
// on it, long before the 10 s grace after which SIGKILL would come) and
// returns once it has ended. (The zombie is this test's child, which the
// adopter reaps as a subreaper would.)
func TestAdoptedSessionStop(t *testing.T) {
	cmd, ticks := idleSession(t)
	a := adopt(cmd.Process.Pid, ticks, 10*time.Second)
	start := time.Now()
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Stop took %s: SIGTERM did not end it", d)
	}
	select {
	case <-a.Done():
	default:
		t.Fatal("Done not closed after Stop")
	}
	if err := syscall.Kill(-cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("kill(-pgid, 0) after Stop = %v, want ESRCH", err)
	}
}

// adoptLeftovers takes over exactly the recorded sessions whose process is
// still the one recorded.
func TestAdoptLeftovers(t *testing.T) {
	live, ticks := idleSession(t)
	gone, goneTicks := idleSession(t)
	_ = syscall.Kill(-gone.Process.Pid, syscall.SIGKILL)
	_ = gone.Wait()
	other, otherTicks := idleSession(t)
	d := &daemon{env: app.Env{Log: zerolog.Nop()}, opts: Options{StopGrace: time.Second}, children: map[int]*child{}}
	prev := State{Sessions: []Child{
		{SessionID: "live", PID: live.Process.Pid, StartTicks: ticks, Agent: "codex", Directory: "/w", Events: "127.0.0.1:1"},
		{SessionID: "gone", PID: gone.Process.Pid, StartTicks: goneTicks},
		{SessionID: "reused", PID: other.Process.Pid, StartTicks: otherTicks + 1},
		{SessionID: "unknown", PID: other.Process.Pid},
		{SessionID: "init", PID: 1, StartTicks: 1},
	}}
	got := d.adoptLeftovers(prev)
	if len(got) != 1 || got[0].info != prev.Sessions[0] || len(d.children) != 1 || d.children[live.Process.Pid] != got[0] {
		t.Fatalf("adopted %+v, children %+v; want the live session alone, its record kept", got, d.children)
	}
	if err := got[0].p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !proc.Running(other.Process.Pid, otherTicks) {
		t.Fatal("a process not adopted was touched")
	}
}
