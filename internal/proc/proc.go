//go:build unix

// Package proc starts a child process in its own process group and ends it
// as a group: signals go to every process of the group, the leader is always
// reaped, and when the leader exits the rest of its group is terminated
// (SIGTERM, then SIGKILL after a grace period) so that no agent descendant
// (an MCP server, a shell a tool started, a launcher's native child) outlives
// the session.
//
// Every adapter starts its agent through Start. A Process is reaped by a
// goroutine started with it, whatever the caller does, so no zombie is left
// behind even when the caller never calls Wait.
//
// Orphaned descendants are re-parented to the nearest "child subreaper" or
// to PID 1. When PID 1 does not reap (some containers), they stay zombies;
// EnableSubreaper (Linux) makes this process adopt and reap them instead.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// startMu orders starting a child against looking for adopted ones.
var startMu sync.Mutex

// DefaultGrace is the time between SIGTERM and SIGKILL when Options.Grace is
// zero.
const DefaultGrace = 3 * time.Second

// killTeardown bounds the wait for the group to disappear after SIGKILL.
const killTeardown = 5 * time.Second

// ErrNotStarted is returned by Start when the command could not be started.
var ErrNotStarted = errors.New("process not started")

// Options tunes Start.
type Options struct {
	// Grace is how long the group gets between SIGTERM and SIGKILL, both
	// when Stop is called and when the leader exits leaving other members
	// of its group running. Zero means DefaultGrace.
	Grace time.Duration
	// NoParentDeathSignal leaves the child without a parent-death signal.
	// By default (Linux) the child gets SIGKILL when this process dies, so a
	// crashed or SIGKILLed happy never leaves its agent attached to a
	// terminal. Descendants are covered by the group kill, not by this.
	NoParentDeathSignal bool
}

// Process is a started child that leads its own process group.
type Process struct {
	cmd   *exec.Cmd
	pid   int
	grace time.Duration
	start uint64 // the leader's start time in clock ticks since boot (0: unknown)

	done chan struct{} // closed when the leader is reaped and the group is ended

	mu       sync.Mutex
	reaped   bool      // leader reaped: pid and pgid may be reused, never signal again
	termSent time.Time // when SIGTERM was first sent to the group (zero: never)
	state    *os.ProcessState
	waitErr  error
	leftover error // group members that could not be ended
}

// Start starts cmd as the leader of a new process group and returns at once.
// cmd must not have been started. When cmd.SysProcAttr asks for a new
// session (Setsid, as a PTY child does), that session's group is used;
// otherwise Setpgid is set. Cancelling ctx stops the process as Stop does.
//
// cmd.Stdout and cmd.Stderr should be *os.File values (pipes the caller
// created, a PTY, a log file): with any other writer os/exec copies in a
// goroutine that a descendant holding the pipe open could keep alive; Start
// bounds that with cmd.WaitDelay (set to the grace period when zero).
//
// Errors: ErrNotStarted wrapping the os/exec error.
func Start(ctx context.Context, cmd *exec.Cmd, opts Options) (*Process, error) {
	if cmd == nil {
		return nil, fmt.Errorf("%w: nil command", ErrNotStarted)
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if !cmd.SysProcAttr.Setsid {
		cmd.SysProcAttr.Setpgid = true
		cmd.SysProcAttr.Pgid = 0
	}
	if !opts.NoParentDeathSignal {
		setParentDeathSignal(cmd.SysProcAttr)
	}
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = grace
	}
	// A child is marked as ours before anyone can look for adopted
	// processes (endAdopted takes the same lock), so a new agent is never
	// taken for an orphan of an old one.
	startMu.Lock()
	if err := cmd.Start(); err != nil {
		startMu.Unlock()
		return nil, fmt.Errorf("%w: start %s: %w", ErrNotStarted, cmd.Path, err)
	}
	p := &Process{cmd: cmd, pid: cmd.Process.Pid, grace: grace, done: make(chan struct{})}
	ownStarted(p.pid)
	startMu.Unlock()
	p.start, _ = StartTicks(p.pid)
	go p.reap()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				_ = p.Stop()
			case <-p.done:
			}
		}()
	}
	return p, nil
}

// Pid is the leader's process id, which is also the process group id.
func (p *Process) Pid() int { return p.pid }

// Done is closed once the leader has been reaped and the rest of its group
// has been ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until Done and returns the leader's exit state. The error is
// the one os/exec reported for the leader (an *exec.ExitError for a non-zero
// exit or a signal), joined with ErrGroupNotEnded when members of the group
// survived SIGKILL (they were stopped, or are zombies of a process that is
// not ours).
func (p *Process) Wait() (*os.ProcessState, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, errors.Join(p.waitErr, p.leftover)
}

// ErrGroupNotEnded says processes of the group were still present after
// SIGKILL and the grace period.
var ErrGroupNotEnded = errors.New("process group not ended")

// Signal sends sig to every process of the group. After the group has been
// ended it does nothing and returns nil (the ids may belong to someone else
// by then).
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signalLocked(sig)
}

func (p *Process) signalLocked(sig syscall.Signal) error {
	if p.reaped {
		return nil
	}
	if sig == syscall.SIGTERM && p.termSent.IsZero() {
		p.termSent = time.Now()
	}
	err := syscall.Kill(-p.pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d with %v: %w", p.pid, sig, err)
	}
	return nil
}

// Stop ends the group: SIGTERM to every member, SIGKILL to what is left after
// the grace period, and returns once the leader is reaped and the group is
// gone (see Wait for the exit state). Safe to call more than once and
// concurrently.
func (p *Process) Stop() error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	t := time.NewTimer(p.untilKill())
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

// Kill sends SIGKILL to the group at once and waits until it is reaped.
func (p *Process) Kill() error {
	if err := p.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-p.done
	return nil
}

// untilKill is how long to wait before SIGKILL given when SIGTERM went out.
func (p *Process) untilKill() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.termSent.IsZero() {
		return p.grace
	}
	return max(0, p.grace-time.Since(p.termSent))
}

// reap waits for the leader, ends the rest of its group, then reaps the
// leader. Where the platform allows it the leader stays a zombie (unreaped)
// while the group is ended, so its pid, which is also the group id, cannot be
// reused by an unrelated process meanwhile.
func (p *Process) reap() {
	defer close(p.done)
	var err, leftover error
	if canWaitWithoutReaping {
		waitLeaderExit(p.pid) // returns when the leader has exited, without reaping it
		leftover = p.endGroup()
		endAdopted(p.start, p.grace)
		err = p.cmd.Wait()
	} else {
		err = p.cmd.Wait()
		leftover = p.endGroup()
	}
	ownEnded(p.pid)
	p.mu.Lock()
	p.reaped = true
	p.state = p.cmd.ProcessState
	p.waitErr = err
	p.leftover = leftover
	p.mu.Unlock()
}

// endGroup terminates the members of the group that outlived the leader.
func (p *Process) endGroup() error {
	if !groupHasLiveMembers(p.pid) {
		return nil
	}
	p.mu.Lock()
	_ = p.signalLocked(syscall.SIGTERM)
	p.mu.Unlock()
	if waitGroupEmpty(p.pid, p.untilKill()) {
		return nil
	}
	p.mu.Lock()
	_ = p.signalLocked(syscall.SIGKILL)
	p.mu.Unlock()
	// After SIGKILL nothing resists; only the kernel's teardown (all threads
	// of a large process) is waited for, so the wait does not shrink with a
	// short grace period.
	if waitGroupEmpty(p.pid, max(p.grace, killTeardown)) {
		return nil
	}
	return fmt.Errorf("%w: group %d still has members after SIGKILL", ErrGroupNotEnded, p.pid)
}

// waitGroupEmpty polls until the group has no live member or d has passed.
// Zombies of ours in the group are reaped on the way.
func waitGroupEmpty(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	delay := 2 * time.Millisecond
	for {
		if !groupHasLiveMembers(pgid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
}
