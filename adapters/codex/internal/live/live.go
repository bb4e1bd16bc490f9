// Package live holds what the two live Codex protocols (codex/appserver and
// codex/mcp) share on top of the rpcagent skeleton: the session (turns,
// Codex's pending requests, the lost-turn-end check), the thread, and the answers
// to Codex's approval and question requests.
package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
)

// Session is the rpcagent session of a live Codex client.
type Session = rpcagent.Session[codex.Prompt, codex.Request]

// Protocol is what a live Codex protocol adds to its session (see
// rpcagent.Protocol; Core implements Cancel).
type Protocol = rpcagent.Protocol[codex.Prompt, codex.Request]

// Config is how a protocol's client describes itself to New.
type Config struct {
	Source      string // Dropped.Source of its frames
	OmitVersion bool   // frames without the "jsonrpc" member
	Decoder     jsonrpc.Decoder
	Handler     jsonrpc.Handler
	Protocol    Protocol
	// OnIdle, when set, runs when the running turn stayed silent for
	// Options.TurnCheck (see rpcagent.SessionConfig); nil: no watch.
	OnIdle func(n, strikes int)
	// OnGone runs when Codex is gone (see rpcagent.Config).
	OnGone func()
	// TextOnly, when set, names a protocol that takes no image input
	// ("codex mcp-server …"): a prompt with images is refused.
	TextOnly string
}

// Core is the shared part of a live Codex client; a protocol's Client
// embeds it. Its methods are safe for concurrent use.
type Core struct {
	Opts codex.Options // defaults applied
	S    *Session

	textOnly string // Config.TextOnly

	mu     sync.Mutex
	thread string
}

// New returns the core of a client for opts (defaults applied), not
// connected yet.
func New(opts codex.Options, cfg Config) *Core {
	opts.Defaults()
	c := &Core{Opts: opts, textOnly: cfg.TextOnly}
	var idle time.Duration
	if cfg.OnIdle != nil {
		idle = opts.TurnCheck
	}
	c.S = rpcagent.NewSession(rpcagent.SessionConfig{
		Config: rpcagent.Config{Settings: opts.Settings, Source: cfg.Source, OmitVersion: cfg.OmitVersion,
			Decoder: cfg.Decoder, Echo: codex.Echo, Handler: cfg.Handler, OnGone: cfg.OnGone},
		Grace:  opts.InterruptGrace,
		Idle:   idle,
		OnIdle: cfg.OnIdle,
	}, cfg.Protocol)
	return c
}

// Open connects the core: it starts `codex <subcommand>` (or, when rwc is
// not nil, talks to an already connected stream: a fake Codex in tests),
// then runs the protocol's handshake. On failure everything started is
// stopped (with closeClient once the handshake ran) and the error says
// what failed: the start of the binary, or the handshake's own error.
func (c *Core) Open(ctx context.Context, subcommand string, rwc io.ReadWriteCloser, handshake func(context.Context) error, closeClient func() error) error {
	if rwc != nil {
		c.S.Attach(ctx, rwc)
	} else if err := c.S.Launch(ctx, c.Opts.Command(subcommand)); err != nil {
		_ = c.S.Close()
		return fmt.Errorf("codex: start %s %s: %w", c.Opts.Binary, subcommand, err)
	}
	if err := handshake(ctx); err != nil {
		_ = closeClient()
		return err
	}
	return nil
}

// Events delivers the session's agent events in order. It is closed after
// Codex exited (or Close) and every event was delivered.
func (c *Core) Events() <-chan agent.Event { return c.S.Events() }

// Prompt sends a prompt: it starts a turn at once when none runs, else it
// queues the prompt behind the running turn (never a second concurrent
// turn). Errors: agent.ErrUnsupportedInput for images when the protocol
// takes text only (Config.TextOnly), rpcagent.ErrClosed, or the error of
// starting the turn.
func (c *Core) Prompt(ctx context.Context, p codex.Prompt) error {
	if c.textOnly != "" && len(p.Images) > 0 {
		return fmt.Errorf("%w: %s takes text prompts only, no images (%d attached)", agent.ErrUnsupportedInput, c.textOnly, len(p.Images))
	}
	return c.S.Prompt(ctx, p)
}

// Queued is the number of prompts waiting for the running turn to end.
func (c *Core) Queued() int { return c.S.Queued() }

// ThreadID is Codex's thread (conversation) id; "" until known.
func (c *Core) ThreadID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.thread
}

// SetThread records the thread id; unless force, only when none is known.
func (c *Core) SetThread(id string, force bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id != "" && (force || c.thread == "") {
		c.thread = id
	}
}

// Interrupt interrupts the running turn (a person, or the session
// runner's idle watch): pending requests are answered with Codex's
// cancel, then the protocol's interrupt goes out. Codex ends
// the turn interrupted; if it does not within InterruptGrace the turn is
// given up. With no turn running it does nothing. Errors:
// rpcagent.ErrClosed.
func (c *Core) Interrupt(ctx context.Context) error {
	return c.S.Interrupt(ctx, "interrupted")
}

// Answer answers the approval requests of tool call callID with a canonical
// decision (see codex.ApprovalAnswer). Every approval pending for the call
// (Codex may ask more than once) gets the answer. Errors:
// codex.ErrUnknownDecision, rpcagent.ErrNoPendingRequest,
// rpcagent.ErrClosed, or the write error.
func (c *Core) Answer(ctx context.Context, callID string, d agent.Decision) error {
	if d != agent.DecisionOnce && d != agent.DecisionAlways && d != agent.DecisionReject {
		return fmt.Errorf("%w: %q", codex.ErrUnknownDecision, d)
	}
	return c.reply(ctx, callID, false, func(r codex.Request) any { return codex.ApprovalAnswer(r, d) })
}

// AnswerQuestion answers the question requests (item/tool/requestUserInput)
// of call callID: answers[i] are the labels chosen for question i.
// Errors: rpcagent.ErrNoPendingRequest, rpcagent.ErrClosed, or the write
// error.
func (c *Core) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	return c.reply(ctx, callID, true, func(r codex.Request) any { return codex.QuestionAnswer(r, answers) })
}

// CancelCall answers the approval requests of callID with Codex's cancel
// (abort): the decision of a turn being aborted.
func (c *Core) CancelCall(ctx context.Context, callID string) error {
	return c.reply(ctx, callID, false, codex.CancelAnswer)
}

// reply takes the pending questions (question) or approvals of callID and
// answers each.
func (c *Core) reply(ctx context.Context, callID string, question bool, answer func(codex.Request) any) error {
	ps, err := c.S.Take(callID, func(r codex.Request) bool { return r.IsQuestion() == question }, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		if err := p.In.Reply(ctx, answer(p.Data)); err != nil {
			errs = append(errs, fmt.Errorf("codex: answer %s: %w", callID, err))
		}
	}
	return errors.Join(errs...)
}

// Decide answers a permission the way agent.Agent does: a rejection
// because the turn is being aborted (reason cancelled) is sent as Codex's
// cancel (abort). A call that waits for no answer gives agent.ErrStale.
func (c *Core) Decide(ctx context.Context, callID string, v agent.Verdict) error {
	if v.Decision == agent.DecisionReject && v.Reason == agent.ReasonCancelled {
		return rpcagent.Stale(c.CancelCall(ctx, callID))
	}
	return rpcagent.Stale(c.Answer(ctx, callID, v.Decision))
}

// Cancel implements rpcagent.Protocol: a request nobody will decide gets
// Codex's cancel (codex.CancelAnswer).
func (c *Core) Cancel(ctx context.Context, p *rpcagent.Permission[codex.Request], _ string) error {
	if err := p.In.Reply(ctx, codex.CancelAnswer(p.Data)); err != nil {
		return fmt.Errorf("codex: cancel %s: %w", p.CallID, err)
	}
	return nil
}

// Ask records Codex's request in for tool call callID (see
// rpcagent.Session.Ask).
func (c *Core) Ask(ctx context.Context, callID string, in *jsonrpc.Incoming, r codex.Request) {
	c.S.Ask(ctx, callID, in, r)
}

// Close stops Codex (stdin closed, then its process group ended after
// StopGrace; pending requests are answered with Codex's cancel first) and
// waits until every event was delivered. Open turns end with reason
// agent-exited.
func (c *Core) Close() error { return c.S.Close() }

// Agent is a live Codex client as the session runner drives it. The runner
// records prompts and answers in the transcript itself, so the Agent's
// events leave out their echo (the user prompts Codex reports, and the
// resolutions read back from happy's own answers); a recorded traffic log
// still replays with them.
type Agent struct {
	*Core
}

var _ agent.Agent = (*Agent)(nil)

// Agent returns c as an agent.Agent (call it before the first prompt).
func (c *Core) Agent() *Agent {
	c.S.RunnerRecordsControl()
	return &Agent{Core: c}
}

// Prompt implements agent.Agent: the text, image files as image inputs and
// text files as text inputs (see codex.PromptOf; other files are refused
// with agent.ErrUnsupportedInput).
func (a *Agent) Prompt(ctx context.Context, p agent.Prompt) error {
	cp, err := codex.PromptOf(p, a.S.Logger())
	if err != nil {
		return err
	}
	return a.Core.Prompt(ctx, cp)
}

// AnswerQuestion implements agent.Agent; a call that waits for no answer
// gives agent.ErrStale.
func (a *Agent) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	return rpcagent.Stale(a.Core.AnswerQuestion(ctx, callID, answers))
}
