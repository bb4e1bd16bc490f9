package rpcagent

import (
	"context"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// Protocol is what an adapter adds to its Session: how a turn starts and
// is interrupted, how a permission nobody will decide is answered, and how
// a turn the agent never ended is given up. The Session calls these
// without holding any of its locks.
type Protocol[P, D any] interface {
	// StartTurn sends the prompt of turn n. The adapter ends the turn with
	// Session.EndTurn(n) when the agent says it ended; an error ends it at
	// once (and is returned to Prompt's caller for a prompt not queued).
	StartTurn(ctx context.Context, n int, p P) error
	// InterruptTurn asks the agent to end turn n (first is false when that
	// was asked for the turn already) and answers the pending permissions
	// with Session.CancelPermissions, in the order the protocol wants.
	InterruptTurn(ctx context.Context, n int, first bool) error
	// Cancel answers a permission nobody will decide: the turn is being
	// interrupted (reason agent.ReasonCancelled) or the session closes
	// (agent.ReasonAgentExited).
	Cancel(ctx context.Context, p *Permission[D], reason string) error
	// TurnEnded forgets what the adapter kept of turn n; it runs before the
	// next queued prompt is sent.
	TurnEnded(n int)
	// Abandon gives turn n up: the agent did not end it within the grace
	// after it was interrupted (reason says why it was). It records that
	// (a note, so that a replay ends the turn too) and ends the turn with
	// Session.EndTurn.
	Abandon(n int, reason string)
}

// SessionConfig configures a Session: its Link, and the turn timings.
type SessionConfig struct {
	Config
	// Grace is how long an interrupted turn may go on before it is given
	// up (Protocol.Abandon).
	Grace time.Duration
	// Idle, when positive, is how long the running turn may stay silent
	// (no Activity) before OnIdle runs; the watch is suspended while a
	// permission waits. OnIdle gets the turn and how many silent windows
	// in a row it had; IdleAgain starts the next window.
	Idle   time.Duration
	OnIdle func(n, strikes int)
	// OnClose runs in Close once the pending permissions are answered,
	// before the agent is stopped.
	OnClose func()
}

// Session is a live JSON-RPC agent session: a Link to the agent, its turns
// (one at a time, prompts queued in order, an interrupted turn given up
// after Grace), its pending permissions and the adapter's Protocol. Build
// one with NewSession; its methods are safe for concurrent use.
type Session[P, D any] struct {
	*Link
	cfg   SessionConfig
	proto Protocol[P, D]
	turns Turns[P]
	perms Permissions[D]

	idleMu  sync.Mutex
	idle    *time.Timer
	strikes int
}

// NewSession returns a session that is not connected yet (connect it with
// Launch or Attach). The Link's OnGone is wrapped: when the agent is gone
// the turns and permissions are closed first.
func NewSession[P, D any](cfg SessionConfig, proto Protocol[P, D]) *Session[P, D] {
	s := &Session[P, D]{cfg: cfg, proto: proto}
	lc := cfg.Config
	onGone := lc.OnGone
	lc.OnGone = func() {
		s.turns.Close()
		s.perms.Close()
		s.stopIdle()
		if onGone != nil {
			onGone()
		}
	}
	s.Link = NewLink(lc)
	return s
}

// Prompt starts a turn for p at once when none runs, else queues it behind
// the running turn (never two turns at once). Errors: ErrClosed, or
// StartTurn's error.
func (s *Session[P, D]) Prompt(ctx context.Context, p P) error {
	n, start, err := s.turns.Submit(p)
	if err != nil || !start {
		return err
	}
	if err := s.proto.StartTurn(ctx, n, p); err != nil {
		s.EndTurn(n)
		return err
	}
	return nil
}

// EndTurn ends turn n, if it still runs (false otherwise: it ended
// already or was given up), and sends the next queued prompt.
func (s *Session[P, D]) EndTurn(n int) bool {
	ended, p, next, ok := s.turns.End(n)
	if !ended {
		return false
	}
	s.stopIdle()
	s.proto.TurnEnded(n)
	if ok {
		go s.start(next, p)
	}
	return true
}

// start sends a queued prompt as turn n.
func (s *Session[P, D]) start(n int, p P) {
	if err := s.proto.StartTurn(context.Background(), n, p); err != nil {
		s.Logger().Warn().Err(err).Int("turn", n).Msg("send queued prompt")
		s.EndTurn(n)
	}
}

// Running returns the running turn; ok is false between turns.
func (s *Session[P, D]) Running() (n int, ok bool) { return s.turns.Running() }

// Queued is the number of prompts waiting for the running turn to end.
func (s *Session[P, D]) Queued() int { return s.turns.Queued() }

// Closed reports whether the session is closed or the agent gone.
func (s *Session[P, D]) Closed() bool { return s.turns.Closed() }

// Pause holds queued prompts back while the agent is replaced.
func (s *Session[P, D]) Pause() { s.turns.Pause() }

// Resume ends Pause and sends the next queued prompt if no turn runs.
func (s *Session[P, D]) Resume() {
	if p, n, ok := s.turns.Resume(); ok {
		go s.start(n, p)
	}
}

// Interrupt interrupts the running turn (Protocol.InterruptTurn) and,
// once per turn, arms the give-up: when the agent has not ended the turn
// Grace later, Protocol.Abandon(n, reason) runs. With no turn running it
// does nothing. Errors: ErrClosed, or InterruptTurn's error.
func (s *Session[P, D]) Interrupt(ctx context.Context, reason string) error {
	if s.turns.Closed() {
		return ErrClosed
	}
	n, ok := s.turns.Running()
	if !ok {
		return nil
	}
	err := s.proto.InterruptTurn(ctx, n, s.turns.Interrupt(n))
	s.turns.GiveUpAfter(n, s.cfg.Grace, func(n int) { s.proto.Abandon(n, reason) })
	return err
}

// Interrupted reports whether the running turn is being interrupted.
func (s *Session[P, D]) Interrupted() bool { return s.turns.Interrupted() }

// CancelPermissions answers every pending permission with
// Protocol.Cancel(reason), in arrival order.
func (s *Session[P, D]) CancelPermissions(ctx context.Context, reason string) {
	for _, p := range s.perms.TakeAll() {
		if err := s.proto.Cancel(ctx, p, reason); err != nil {
			s.Logger().Warn().Err(err).Str("call", p.CallID).Msg("cancel a pending permission")
		}
	}
	s.Activity()
}

// Ask records a permission request of the agent for tool call callID. A
// request that comes while the running turn is being interrupted, or
// after Close, is answered at once with Protocol.Cancel (nobody will
// decide it); added reports which happened.
func (s *Session[P, D]) Ask(ctx context.Context, callID string, in *jsonrpc.Incoming, data D) (added bool) {
	p := &Permission[D]{In: in, CallID: callID, Data: data}
	reason := agent.ReasonCancelled
	if !s.turns.Interrupted() {
		if s.perms.Add(p) {
			s.stopIdle()
			return true
		}
		reason = agent.ReasonAgentExited // closed
	}
	if err := s.proto.Cancel(ctx, p, reason); err != nil {
		s.Logger().Warn().Err(err).Str("call", callID).Msg("cancel a permission asked during an interrupt")
	}
	return false
}

// Take removes the pending permissions of callID that match accepts (see
// Permissions.Take) for the caller to answer. Errors: ErrClosed,
// ErrNoPendingRequest, check's.
func (s *Session[P, D]) Take(callID string, match func(D) bool, check func(D) error) ([]*Permission[D], error) {
	ps, err := s.perms.Take(callID, match, check)
	if err == nil {
		s.Activity()
	}
	return ps, err
}

// Withdraw removes the pending permission with JSON-RPC id id (the agent
// withdrew it, or it was answered elsewhere); nil when none waits.
func (s *Session[P, D]) Withdraw(id jsonrpc.ID) *Permission[D] {
	p := s.perms.Withdraw(id)
	s.Activity()
	return p
}

// Waits reports whether a permission for callID that match accepts (nil:
// any) is pending.
func (s *Session[P, D]) Waits(callID string, match func(D) bool) bool {
	return s.perms.Has(callID, match)
}

// ForgetPermissions drops the pending permissions unanswered (their turn
// ended: the agent no longer waits for them).
func (s *Session[P, D]) ForgetPermissions() { s.perms.TakeAll() }

// TakePermissions removes and returns every pending permission, in
// arrival order, for the caller to answer or drop.
func (s *Session[P, D]) TakePermissions() []*Permission[D] { return s.perms.TakeAll() }

// Pending is the number of pending permissions.
func (s *Session[P, D]) Pending() int { return s.perms.Len() }

// Close closes the session: nothing more is sent or queued, the pending
// permissions are answered (Protocol.Cancel, reason agent-exited),
// OnClose runs, then the agent is stopped (Link.Close) and every event is
// delivered. Closing twice is harmless.
func (s *Session[P, D]) Close() error {
	if s.turns.Close() {
		s.Link.q.Wait()
		return nil
	}
	s.stopIdle()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	for _, p := range s.perms.Close() {
		if err := s.proto.Cancel(ctx, p, agent.ReasonAgentExited); err != nil {
			s.Logger().Debug().Err(err).Str("call", p.CallID).Msg("answer a pending permission at close")
		}
	}
	cancel()
	if s.cfg.OnClose != nil {
		s.cfg.OnClose()
	}
	return s.Link.Close()
}

// Activity restarts the idle window of the running turn (the agent said
// something about it); it stays stopped while a permission waits.
func (s *Session[P, D]) Activity() {
	if s.cfg.Idle <= 0 {
		return
	}
	_, running := s.turns.Running()
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if !running || s.turns.Closed() || s.perms.Len() > 0 {
		if s.idle != nil {
			s.idle.Stop()
		}
		return
	}
	s.strikes = 0
	if s.idle == nil {
		s.idle = time.AfterFunc(s.cfg.Idle, s.silent)
		return
	}
	s.idle.Reset(s.cfg.Idle)
}

// IdleAgain starts the next idle window of turn n, counting on from the
// silent windows so far, if it still runs with no permission waiting.
func (s *Session[P, D]) IdleAgain(n int) {
	cur, running := s.turns.Running()
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if running && cur == n && s.idle != nil && s.perms.Len() == 0 {
		s.idle.Reset(s.cfg.Idle)
	}
}

// silent runs when the running turn stayed silent for Idle.
func (s *Session[P, D]) silent() {
	n, running := s.turns.Running()
	s.idleMu.Lock()
	if !running || s.turns.Closed() || s.perms.Len() > 0 {
		s.idleMu.Unlock()
		return
	}
	s.strikes++
	strikes := s.strikes
	s.idleMu.Unlock()
	if s.cfg.OnIdle != nil {
		s.cfg.OnIdle(n, strikes)
	}
}

func (s *Session[P, D]) stopIdle() {
	s.idleMu.Lock()
	defer s.idleMu.Unlock()
	if s.idle != nil {
		s.idle.Stop()
	}
}
