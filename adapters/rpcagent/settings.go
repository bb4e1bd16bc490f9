// Package rpcagent is the skeleton the JSON-RPC agent adapters (ACP in
// package acp, Codex in codex/appserver and codex/mcp) are built on. It
// holds what they share and names it in the field's terms:
//
//   - Settings: the options every such adapter takes, and their defaults.
//   - Link: the connection to the agent (a child process, or a stream in
//     tests). It decodes every frame with the adapter's decoder, in traffic
//     order, and publishes the events; the events of a request or
//     notification from the agent are held until the adapter's Handler has
//     done its bookkeeping for it, so whoever sees a blocked tool can answer
//     it at once. It leaves out the echo of what a session runner records
//     itself (RunnerRecordsControl), and it shuts down once: when the agent
//     exits, its stream ends, or Close.
//   - Turns: one prompt turn at a time; prompts sent meanwhile wait in
//     order; an interrupted turn the agent does not end is given up after
//     a grace period.
//   - Permissions: the agent's permission requests waiting for happy's
//     verdict, by tool call, in arrival order.
//   - Session: the three together with the adapter's Protocol (how to start
//     and interrupt a turn, how to answer a permission nobody will decide,
//     how to give a turn up), and an optional idle watchdog for the running
//     turn.
//
// See docs/ARCHITECTURE.md ("Events from an adapter").
package rpcagent

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
)

// Defaults of Settings.
const (
	DefaultCallTimeout   = 60 * time.Second
	DefaultStopGrace     = 3 * time.Second
	DefaultClientName    = "happy"
	DefaultClientVersion = "0.0.0"
)

// Errors callers branch on.
var (
	// ErrClosed: the session is closed or the agent exited.
	ErrClosed = errors.New("agent session closed")
	// ErrNoPendingRequest: an answer for a tool call that waits for none
	// (it never asked, or was answered already: the first answer wins).
	ErrNoPendingRequest = errors.New("no pending request for this call")
)

// Stale turns ErrNoPendingRequest into agent.ErrStale (the runner's name
// for it), keeping both in the chain; other errors pass unchanged.
func Stale(err error) error {
	if errors.Is(err, ErrNoPendingRequest) {
		return fmt.Errorf("%w: %w", agent.ErrStale, err)
	}
	return err
}

// Settings are the options every JSON-RPC adapter takes. The zero value
// works (see Defaults).
type Settings struct {
	// ClientName and ClientVersion identify happy to the agent; "" means
	// DefaultClientName and DefaultClientVersion.
	ClientName, ClientVersion string
	// CallTimeout bounds every request but the turn itself; 0 means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// StopGrace is how long the agent gets to exit after its stdin closed
	// before its process group is ended; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Record, when set, receives the traffic log of the session.
	Record io.Writer
	// Logger receives diagnostics (the agent's stderr included).
	Logger zerolog.Logger
	// Now is the clock of frames; nil means time.Now.
	Now func() time.Time
}

// Defaults fills the zero fields of s with their defaults.
func (s *Settings) Defaults() {
	if s.ClientName == "" {
		s.ClientName = DefaultClientName
	}
	if s.ClientVersion == "" {
		s.ClientVersion = DefaultClientVersion
	}
	if s.CallTimeout <= 0 {
		s.CallTimeout = DefaultCallTimeout
	}
	if s.StopGrace <= 0 {
		s.StopGrace = DefaultStopGrace
	}
	if s.Now == nil {
		s.Now = time.Now
	}
}
