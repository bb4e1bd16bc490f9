// Package ptyproxy runs an interactive program (Claude Code in local mode)
// in a pseudo-terminal that happy sits in front of, and gives the terminal
// back exactly as it found it (docs/ARCHITECTURE.md, "The terminal is sacred").
//
// While the child runs, happy's terminal is in raw mode and every byte
// typed goes to the child (Ctrl-C included: it is byte 0x03 for the child to
// handle), the child's output goes to happy's terminal, window size changes
// (SIGWINCH) are coalesced and applied to the child's PTY (never a zero
// size), and SIGINT, SIGQUIT, SIGTERM and SIGHUP sent to happy are forwarded
// to the child's process group (SIGTERM and SIGHUP then end the child after
// a grace period).
//
// On every way out — the child exits, crashes or is killed; happy is
// signalled; the context is cancelled; a goroutine of happy panics (Guard,
// Run: restore, kill, re-panic) — the terminal modes the child left on
// (hidden cursor, alternate screen, bracketed paste, mouse, keyboard
// protocols) are turned off, the saved terminal settings are restored, and
// the child's process group is ended and reaped (package proc). Never call
// os.Exit while a Session runs: that is the one path nothing can restore.
package ptyproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/happy-dev/happy/internal/proc"
)

// drainTimeout bounds the wait for the child's last output after it exited.
const drainTimeout = 2 * time.Second

// Options configure Start.
type Options struct {
	// In is happy's terminal input (os.Stdin). When it is a terminal it is
	// put in raw mode and its size follows SIGWINCH; when it is not (a
	// pipe) its bytes are still forwarded. Nil: no input.
	In *os.File
	// Out receives the child's output (os.Stdout). Required.
	Out io.Writer
	// Cmd is the child, not started. Its stdin, stdout, stderr and
	// SysProcAttr are set here (the PTY, a new session).
	Cmd *exec.Cmd
	// Size is the PTY size when In reports none; DefaultSize when zero.
	Size Size
	// Grace is the SIGTERM→SIGKILL delay; proc.DefaultGrace when zero.
	Grace time.Duration
	// ResizeDelay is how long a new size must stay still before it is
	// applied; DefaultResizeDelay when zero.
	ResizeDelay time.Duration
	// NoSignals leaves signal handling to the caller (no SIGWINCH
	// tracking, no forwarding).
	NoSignals bool
	// HoldInput holds In back until the child reads keys one by one (its
	// terminal left canonical mode, as a terminal UI's does once it is
	// up), or HoldMax passed, or it exited: keys typed while it starts wait
	// in happy's raw terminal instead of being echoed by the PTY's line
	// editing before the child draws.
	HoldInput bool
	// HoldMax bounds HoldInput's wait; DefaultHoldMax when zero.
	HoldMax time.Duration
	// Typeahead are keys typed for the child before Start (while it was
	// being started): they are written to it before anything read from
	// In, after HoldInput's wait.
	Typeahead []byte
}

// DefaultHoldMax bounds Options.HoldInput's wait.
const DefaultHoldMax = 5 * time.Second

// holdPoll is how often HoldInput looks at the child's terminal settings.
const holdPoll = 10 * time.Millisecond

// Result is how a session ended.
type Result struct {
	// State is the child's exit state.
	State *os.ProcessState
	// Signal is a terminating signal (SIGTERM, SIGHUP) happy received
	// during the session and forwarded; nil when none.
	Signal os.Signal
	// RawErr: raw mode could not be set; the child ran with the terminal
	// in its normal mode. Reported, not fatal.
	RawErr error
	// RestoreErr: restoring the terminal settings failed (EIO when the
	// terminal hung up). Reported, not fatal.
	RestoreErr error
}

// ExitCode is the child's exit code, or 128+signal when a signal ended it
// (the shell convention), or -1 when unknown.
func (r Result) ExitCode() int {
	if r.State == nil {
		return -1
	}
	if ws, ok := r.State.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return r.State.ExitCode()
}

// Session is a child running in a proxied PTY.
type Session struct {
	opts Options
	term *Terminal
	ptmx *os.File
	proc *proc.Process
	rs   *resizer
	pump *inputPump

	outMu     sync.Mutex
	modes     *modeTracker
	outFailed bool
	outDone   chan struct{}

	sigCh   chan os.Signal
	sigStop chan struct{}
	sigDone chan struct{}

	mu     sync.Mutex
	signal os.Signal
	rawErr error

	finish     sync.Once
	result     Result
	err        error
	emergencyO sync.Once
}

// Start puts the terminal in raw mode and starts the child in a new PTY of
// the terminal's size (applied before the child starts). Cancelling ctx
// ends the child. Errors: no command or output, the PTY cannot be opened,
// the child cannot be started (proc.ErrNotStarted); the terminal is back
// in its settings then.
func Start(ctx context.Context, opts Options) (*Session, error) {
	if opts.Cmd == nil || opts.Out == nil {
		return nil, errors.New("ptyproxy: a command and an output are required")
	}
	s := &Session{
		opts:    opts,
		term:    OpenTerminal(opts.In),
		modes:   newModeTracker(),
		outDone: make(chan struct{}),
		sigStop: make(chan struct{}),
		sigDone: make(chan struct{}),
	}
	size := s.term.Size()
	if size.IsZero() {
		size = opts.Size
	}
	if size.IsZero() {
		size = DefaultSize()
	}
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("ptyproxy: open pty: %w", err)
	}
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: size.Cols, Rows: size.Rows}); err != nil {
		ptmx.Close()
		tty.Close()
		return nil, fmt.Errorf("ptyproxy: set pty size: %w", err)
	}
	s.ptmx = ptmx
	cmd := opts.Cmd
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0
	cmd.SysProcAttr.Setpgid = false

	// Signals are caught before the terminal changes and the child starts:
	// from here on a SIGTERM or SIGHUP must go through the restoring path.
	if !opts.NoSignals {
		s.sigCh = make(chan os.Signal, 8)
		signal.Notify(s.sigCh, syscall.SIGWINCH, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM, syscall.SIGHUP)
	}
	if s.term.IsTerminal() {
		if err := s.term.MakeRaw(); err != nil {
			s.rawErr = err
		}
	}
	if opts.In != nil {
		if s.pump, err = newInputPump(int(opts.In.Fd())); err != nil {
			s.stopSignals()
			_ = s.term.Restore()
			ptmx.Close()
			tty.Close()
			return nil, fmt.Errorf("ptyproxy: %w", err)
		}
	}
	p, err := proc.Start(ctx, cmd, proc.Options{Grace: opts.Grace})
	tty.Close()
	if err != nil {
		s.stopSignals()
		_ = s.term.Restore()
		if s.pump != nil {
			s.pump.discard()
		}
		ptmx.Close()
		return nil, fmt.Errorf("ptyproxy: %w", err)
	}
	s.proc = p
	s.rs = newResizer(size, opts.ResizeDelay, 0, s.applySize)

	go s.copyOutput()
	if s.pump != nil || len(opts.Typeahead) > 0 {
		go func() {
			defer s.Guard()
			s.holdInput()
			if len(opts.Typeahead) > 0 {
				_, _ = ptmx.Write(opts.Typeahead) // fails only when the child is gone
			}
			if s.pump != nil {
				_ = s.pump.run(ptmx)
			}
		}()
	}
	if s.sigCh != nil {
		go s.handleSignals()
	} else {
		close(s.sigDone)
	}
	return s, nil
}

// holdInput waits, with Options.HoldInput, until the child's terminal left
// canonical mode, HoldMax passed or the child exited.
func (s *Session) holdInput() {
	if !s.opts.HoldInput {
		return
	}
	limit := s.opts.HoldMax
	if limit <= 0 {
		limit = DefaultHoldMax
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(holdPoll)
	defer tick.Stop()
	for !s.childReadsKeys() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-s.proc.Done():
			return
		}
	}
}

// childReadsKeys reports whether the child's terminal is out of canonical
// mode (true too when its settings cannot be read: nothing to wait for).
// The PTY's master side reports its slave's settings; SyscallConn leaves
// the file's non-blocking mode alone.
func (s *Session) childReadsKeys() bool {
	rc, err := s.ptmx.SyscallConn()
	if err != nil {
		return true
	}
	raw := true
	_ = rc.Control(func(fd uintptr) {
		if st, err := unix.IoctlGetTermios(int(fd), ioctlGetTermios); err == nil {
			raw = st.Lflag&unix.ICANON == 0
		}
	})
	return raw
}

// stopSignals gives signal handling back to the process defaults (before
// the handler goroutine started).
func (s *Session) stopSignals() {
	if s.sigCh != nil {
		signal.Stop(s.sigCh)
	}
}

// Pid is the child's process id (its process group and session id).
func (s *Session) Pid() int { return s.proc.Pid() }

// Done is closed when the child has exited and been reaped.
func (s *Session) Done() <-chan struct{} { return s.proc.Done() }

// Size is the size last applied to the child's PTY.
func (s *Session) Size() Size { return s.rs.size() }

// Resize proposes a size from a source (SourceRemote only counts in
// ViewRemote); zero sizes are ignored, bursts coalesced.
func (s *Session) Resize(src Source, size Size) { s.rs.offer(src, size) }

// SetView chooses whose sizes are applied (ViewLocal or ViewRemote).
func (s *Session) SetView(v int) { s.rs.setView(v) }

// Type writes b to the child as if it was typed on the terminal. Keys meant
// for an input box answer a dialog instead when one is open: the caller
// must know what the child is showing.
func (s *Session) Type(b []byte) error {
	if _, err := s.ptmx.Write(b); err != nil {
		return fmt.Errorf("ptyproxy: type into the child's terminal: %w", err)
	}
	return nil
}

// Stop ends the child (SIGTERM to its group, SIGKILL after the grace
// period); Wait then returns.
func (s *Session) Stop() error { return s.proc.Stop() }

// pass sends a caught signal on to the child's process group. Only
// syscall signals are caught (signal.Notify), so anything else is ignored.
func (s *Session) pass(sig os.Signal) {
	if ss, ok := sig.(syscall.Signal); ok {
		_ = s.proc.Signal(ss)
	}
}

// Wait waits for the child to exit, then gives the terminal back: the
// child's last output is written, the modes it left on are turned off, the
// terminal settings are restored. Safe to call more than once. The error
// is proc.ErrGroupNotEnded when members of the child's group survived.
func (s *Session) Wait() (Result, error) {
	s.finish.Do(func() {
		defer func() {
			if r := recover(); r != nil {
				s.emergency()
				panic(r)
			}
		}()
		<-s.proc.Done()
		st, werr := s.proc.Wait()
		select {
		case <-s.outDone:
		case <-time.After(drainTimeout):
			// A descendant outside the group still holds the PTY open.
		}
		_ = s.ptmx.Close()
		<-s.outDone
		s.rs.stop()
		if s.sigCh != nil {
			signal.Stop(s.sigCh)
			close(s.sigStop)
		}
		<-s.sigDone
		if s.pump != nil {
			s.pump.stop()
		}
		s.writeModeReset()
		s.mu.Lock()
		s.result = Result{State: st, Signal: s.signal, RawErr: s.rawErr, RestoreErr: s.term.Restore()}
		s.mu.Unlock()
		if errors.Is(werr, proc.ErrGroupNotEnded) {
			s.err = werr
		}
	})
	return s.result, s.err
}

// Guard is deferred at the top of any goroutine that runs while the
// session does: on a panic it turns the child's modes off, restores the
// terminal settings, kills the child's group, then panics again with the
// same value.
func (s *Session) Guard() {
	if r := recover(); r != nil {
		s.emergency()
		panic(r)
	}
}

// emergency gives the terminal back at once, without waiting for anything
// that may never come.
func (s *Session) emergency() {
	s.emergencyO.Do(func() {
		// Settings first: nothing below may be allowed to prevent it.
		_ = s.term.Restore()
		_ = s.proc.Signal(syscall.SIGKILL)
		if tryLockFor(&s.outMu, 200*time.Millisecond) {
			defer s.outMu.Unlock()
			if !s.outFailed {
				func() {
					defer func() { _ = recover() }() // Out may be what panicked
					_, _ = s.opts.Out.Write(s.modes.Reset())
				}()
			}
		}
	})
}

// tryLockFor takes mu if it becomes free within d: the output goroutine
// may be in the middle of a write, or stuck in one for good.
func tryLockFor(mu *sync.Mutex, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !mu.TryLock() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// copyOutput copies the child's output to Out until the PTY closes.
func (s *Session) copyOutput() {
	defer close(s.outDone)
	defer s.Guard()
	buf := make([]byte, 32<<10)
	for {
		n, err := s.ptmx.Read(buf)
		if n > 0 {
			s.forward(buf[:n])
		}
		if err != nil {
			return // EIO: every holder of the PTY's other side closed it
		}
	}
}

// forward writes child output to Out, noting the modes it sets. The lock is
// released even when Out panics, so that Guard can still write the reset.
func (s *Session) forward(p []byte) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.modes.Write(p)
	if !s.outFailed {
		if _, err := s.opts.Out.Write(p); err != nil {
			// Keep draining so the child never blocks on a full PTY.
			s.outFailed = true
		}
	}
}

// writeModeReset turns off the modes the child left on.
func (s *Session) writeModeReset() {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if reset := s.modes.Reset(); len(reset) > 0 && !s.outFailed {
		_, _ = s.opts.Out.Write(reset)
	}
	s.modes = newModeTracker()
}

func (s *Session) applySize(sz Size) {
	_ = pty.Setsize(s.ptmx, &pty.Winsize{Cols: sz.Cols, Rows: sz.Rows})
}

func (s *Session) handleSignals() {
	defer close(s.sigDone)
	defer s.Guard()
	for {
		select {
		case <-s.sigStop:
			return
		case sig := <-s.sigCh:
			switch sig {
			case syscall.SIGWINCH:
				s.rs.offer(SourceLocal, s.term.Size())
			case syscall.SIGINT, syscall.SIGQUIT:
				s.pass(sig)
			case syscall.SIGTERM, syscall.SIGHUP:
				s.mu.Lock()
				if s.signal == nil {
					s.signal = sig
				}
				s.mu.Unlock()
				s.pass(sig)
				go func() {
					t := time.NewTimer(s.grace())
					defer t.Stop()
					select {
					case <-s.proc.Done():
					case <-t.C:
						_ = s.proc.Stop()
					}
				}()
			}
		}
	}
}

func (s *Session) grace() time.Duration {
	if s.opts.Grace > 0 {
		return s.opts.Grace
	}
	return proc.DefaultGrace
}
