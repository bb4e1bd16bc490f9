//go:build unix

// Package daemon is `happy daemon`: one background process per happy home
// that registers this machine on the relay (encrypted machine metadata, the
// machine-alive heartbeat, the daemon state) and serves the machine RPCs
// other devices use to start and stop sessions here (docs/ARCHITECTURE.md,
// section "The daemon"). It wires packages like app does, and only the
// commands import it.
package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/settings"
)

// Files of the daemon in the happy home.
const (
	lockName  = "daemon.lock" // flock held while the daemon runs
	stateName = "daemon.json" // State, rewritten on every change
	logName   = "daemon.out"  // the daemon's stdout, stderr and log lines (not pruned with logs/*.log)
)

// LogPath is the daemon's log file: <home>/logs/daemon.out.
func LogPath(h home.Dir) string { return filepath.Join(h.Logs(), logName) }

// StatePath is the daemon's state file: <home>/daemon.json.
func StatePath(h home.Dir) string { return h.Join(stateName) }

// Daemon statuses, in State.Status and the relay's daemonState.status
// (the reference app's names for the last two).
const (
	StatusStarting     = "starting"      // taking the lock, reaching the relay
	StatusRunning      = "running"       // registered, serving machine RPCs
	StatusShuttingDown = "shutting-down" // stopping its sessions, then exiting
	// StatusOffline is the last daemon state a daemon that stopped writes
	// to the relay (never to daemon.json, which it removes): readers show
	// the machine offline at once, whatever its last heartbeat.
	StatusOffline = "offline"
)

// State is what the daemon writes to <home>/daemon.json (and, as
// daemonState, to the relay): who it is and the sessions it runs. Times are
// Unix ms.
type State struct {
	PID       int    `json:"pid"`
	StartedAt int64  `json:"startedAt"`
	Status    string `json:"status"`
	Version   string `json:"version"`
	MachineID string `json:"machineId,omitempty"`
	Relay     string `json:"relay,omitempty"`
	Log       string `json:"log"`
	// Events is the address of the daemon's local event API
	// ("127.0.0.1:PORT"; absent when it is off): GET /event there follows
	// every session the daemon runs, with the bearer token of the home's
	// events.token.
	Events string `json:"events,omitempty"`
	// Sessions are the sessions the daemon started and that still run.
	Sessions []Child `json:"sessions"`
	// ShutdownRequestedAt and ShutdownSource say when and how a stop was
	// asked for ("signal", "rpc").
	ShutdownRequestedAt int64  `json:"shutdownRequestedAt,omitempty"`
	ShutdownSource      string `json:"shutdownSource,omitempty"`
}

// Child is one session the daemon started: the happy process (its pid is
// also its process group id), its relay session id once reported, and
// StartTicks, the process's start time in clock ticks since boot
// (/proc/<pid>/stat field 22; 0 where unknown), which tells the pid of a
// later process apart.
type Child struct {
	SessionID  string `json:"sessionId,omitempty"`
	PID        int    `json:"pid"`
	StartTicks uint64 `json:"startTicks,omitempty"`
	Agent      string `json:"agent"`
	Directory  string `json:"directory"`
	StartedAt  int64  `json:"startedAt"`
	Log        string `json:"log,omitempty"`
	// Events is the address of the session's own event API, which the
	// daemon follows (absent when the daemon's API is off).
	Events string `json:"events,omitempty"`
}

// ReadState reads <home>/daemon.json. A missing file is os.ErrNotExist; a
// file that is not a State is an error naming the file.
func ReadState(h home.Dir) (State, error) {
	b, err := os.ReadFile(StatePath(h))
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("daemon state %s: %w", StatePath(h), err)
	}
	return st, nil
}

func writeState(h home.Dir, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return settings.WriteFileAtomic(StatePath(h), append(b, '\n'), 0o600)
}

// ErrRunning is returned when a daemon already runs on the home.
var ErrRunning = errors.New("a daemon already runs on this home")

// lock is the daemon's exclusive flock on <home>/daemon.lock; the kernel
// releases it when the process ends, however it ends.
type lock struct{ f *os.File }

// tryLock takes the lock without waiting: ErrRunning when another process
// holds it.
func tryLock(h home.Dir) (*lock, error) {
	if err := h.Ensure(); err != nil {
		return nil, err
	}
	f, err := private.OpenFile(h.Join(lockName), os.O_CREATE|os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("daemon lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrRunning
		}
		return nil, fmt.Errorf("daemon lock: %w", err)
	}
	return &lock{f: f}, nil
}

func (l *lock) release() { _ = l.f.Close() }

// Running reports whether a daemon holds the home's lock now.
func Running(h home.Dir) bool {
	l, err := tryLock(h)
	if err != nil {
		return errors.Is(err, ErrRunning)
	}
	l.release()
	return false
}

// Status is the home's daemon as `happy daemon status` shows it: whether one
// runs (its lock is held) and its last state file.
type Status struct {
	Running bool   `json:"running"`
	State   *State `json:"state,omitempty"`
	// StateError says why the state file could not be read.
	StateError string `json:"stateError,omitempty"`
	LogPath    string `json:"log"`
}

// ReadStatus returns the home's daemon status.
func ReadStatus(h home.Dir) Status {
	s := Status{Running: Running(h), LogPath: LogPath(h)}
	st, err := ReadState(h)
	switch {
	case err == nil:
		s.State = &st
	case errors.Is(err, os.ErrNotExist):
	default:
		s.StateError = err.Error()
	}
	return s
}
