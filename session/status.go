package session

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// IdleNote is the error the runner writes on the turn's assistant message
// when the idle watch interrupts a silent agent (docs/ARCHITECTURE.md,
// section "Stalled agents"); %s is the timeout as time.Duration prints it.
const IdleNote = "the agent sent nothing for %s: interrupted"

// What the idle watch writes with Options.Recover (docs/ARCHITECTURE.md,
// section "Stalled agents").
const (
	// RecoverNote replaces IdleNote when the agent is restarted: the
	// timeout, the recovery's number and RecoverMax.
	RecoverNote = "the agent sent nothing for %s: restarted it in its own session (recovery %d of %d)"
	// GiveUpNote follows IdleNote when the turn was recovered RecoverMax
	// times already.
	GiveUpNote = "; not restarted again: recovered %d times already"
	// NoRecoverNote follows IdleNote when CanRecover said no (its reason).
	NoRecoverNote = "; it cannot be restarted: %v"
	// RecoverFailedNote is the error written when the restart failed.
	RecoverFailedNote = "the agent could not be restarted: %v"
	// RecoverPrompt is the prompt the restarted agent is sent (recorded
	// as the user's, so every device sees what it was told).
	RecoverPrompt = "continue"
	// DefaultRecoverMax is Options.RecoverMax's default.
	DefaultRecoverMax = 2
)

// Status is what a running session is doing, as Runner.Status sees it
// (happy doctor SESSION prints it in one line). Times are the runner's
// clock; a zero time means "never" or "not now".
type Status struct {
	// AgentRunning is false once the agent's event stream closed.
	AgentRunning bool
	// LastAgentEvent is when the agent last said anything (any event).
	LastAgentEvent time.Time
	// TurnSince is when the running turn began (its prompt was sent, or
	// the agent started it); zero when no turn runs or starts.
	TurnSince time.Time
	// Tools are the tool calls running now (not waiting for a person),
	// oldest first.
	Tools []ToolActivity
	// Waiting are the tool calls waiting for a person (a permission or a
	// question), in arrival order.
	Waiting []ToolActivity
	// IdleTimeout is Options.IdleTimeout (0: the idle watch is off).
	IdleTimeout time.Duration
	// IdleDeadline is when the idle watch interrupts the turn if the agent
	// stays silent; zero when the watch does not run (off, no turn, a
	// tool running, a person asked, or it tripped already).
	IdleDeadline time.Time
	// IdleInterrupts counts the turns the idle watch interrupted.
	IdleInterrupts int
}

// ToolActivity is one tool call in a Status.
type ToolActivity struct {
	CallID string
	// Tool is the canonical tool name (docs/ARCHITECTURE.md, "Tools").
	Tool string
	// Since is when the call entered its current state (running, or
	// waiting for a person).
	Since time.Time
	// Question is set for a question (Waiting only); else a permission.
	Question bool
}

// openTool is a tool call of the transcript that has not ended.
type openTool struct {
	tool   string
	status mapper.ToolStatus
	since  time.Time
}

// trackTools follows the open tool calls from the reducer's changes.
func (r *Runner) trackTools(bus []mapper.BusEvent) {
	for _, b := range bus {
		pu, ok := b.(*mapper.MessagePartUpdated)
		if !ok {
			continue
		}
		tp, ok := pu.Part.(*mapper.ToolPart)
		if !ok {
			continue
		}
		t, known := r.tools[tp.CallID]
		if !tp.State.Status.Open() {
			if known {
				delete(r.tools, tp.CallID)
			}
			continue
		}
		if !known {
			t = &openTool{}
			r.tools[tp.CallID] = t
		}
		if t.status != tp.State.Status {
			t.since = r.opts.Now()
		}
		t.tool, t.status = tp.Tool, tp.State.Status
	}
}

// toolsRunning reports whether a tool call runs (a running tool pauses
// the idle watch: the agent waits for it, not the other way round).
func (r *Runner) toolsRunning() bool {
	for _, t := range r.tools {
		if t.status == mapper.StatusRunning {
			return true
		}
	}
	return false
}

// idleDeadline is when the silent turn is interrupted; ok is false when
// the idle watch does not run now.
func (r *Runner) idleDeadline() (time.Time, bool) {
	if !r.idleOn || r.idleTripped {
		return time.Time{}, false
	}
	return r.quietFrom.Add(r.opts.IdleTimeout), true
}

// watchIdle follows the session's state after every input: when the turn
// began, and whether the idle clock runs (while a turn runs or starts, no
// tool call runs and nobody is asked; it starts again from now each time
// it resumes). An agent event restarts it too (sawAgent).
func (r *Runner) watchIdle() {
	busy := r.inTurn || r.starting
	switch {
	case !busy:
		r.turnSince = time.Time{}
	case r.turnSince.IsZero():
		r.turnSince = r.opts.Now()
	}
	if r.opts.IdleTimeout <= 0 {
		return
	}
	on := busy && len(r.pending) == 0 && !r.toolsRunning()
	if on && !r.idleOn {
		r.quietFrom, r.idleTripped = r.opts.Now(), false
	}
	r.idleOn = on
}

// sawAgent notes that the agent said something: the idle clock restarts.
func (r *Runner) sawAgent() {
	now := r.opts.Now()
	r.lastAgent.Store(now.UnixNano())
	r.quietFrom, r.idleTripped = now, false
}

// checkIdle acts when the agent stayed silent past the idle timeout: the
// transcript says why (an error on the turn's assistant message, IdleNote
// and what was done), so every device sees it, and the log says it too.
// The agent is interrupted, unless it is to be restarted (Options.Recover):
// then checkIdle reports true and the caller recovers.
func (r *Runner) checkIdle() (recover bool) {
	due, ok := r.idleDeadline()
	if !ok || r.opts.Now().Before(due) {
		return false
	}
	r.idleTripped = true
	r.result.IdleInterrupts++
	why := fmt.Sprintf(IdleNote, r.opts.IdleTimeout)
	if r.opts.Recover != nil {
		limit := cmp.Or(r.opts.RecoverMax, DefaultRecoverMax)
		var cannot error
		if r.opts.CanRecover != nil {
			cannot = r.opts.CanRecover()
		}
		switch {
		case cannot != nil:
			why += fmt.Sprintf(NoRecoverNote, cannot)
		case r.recoveries >= limit:
			why += fmt.Sprintf(GiveUpNote, limit)
		default:
			r.recoveries++
			recover = true
			why = fmt.Sprintf(RecoverNote, r.opts.IdleTimeout, r.recoveries, limit)
		}
	}
	r.opts.Log.Warn().Dur("idleTimeout", r.opts.IdleTimeout).Time("lastAgentEvent", time.Unix(0, r.lastAgent.Load())).Msg(why)
	r.apply(&agent.AgentError{EventBase: agent.EventBase{Time: r.opts.Now().UnixMilli()}, Text: why, Kind: agent.ErrorInternal})
	if recover {
		return true
	}
	ictx, cancel := r.answerCtx()
	defer cancel()
	if err := r.opts.Agent.Interrupt(ictx); err != nil {
		r.opts.Log.Warn().Err(err).Msg("interrupt the silent agent")
	}
	return false
}

// recover replaces the silent agent (Options.Recover): what is open is
// settled (the turn ends interrupted, waiting tools are rejected, the old
// agent's events are no longer read), the new agent's events are read from
// now on, and it is sent RecoverPrompt, recorded like any prompt. It
// reports false when the agent could not be restarted (written on the
// transcript): the session has no agent any more.
func (r *Runner) recover(ctx context.Context) bool {
	old, oldEvents := r.opts.Agent, r.events
	// The old agent may still deliver events (its Close waits for them to
	// be read): they are read and dropped, never applied.
	go func() {
		for range oldEvents {
			continue
		}
	}()
	r.settleAllPending(agent.ReasonCancelled, false)
	if r.inTurn || r.starting {
		r.apply(&agent.TurnEnded{EventBase: agent.EventBase{Time: r.opts.Now().UnixMilli()}, Reason: agent.TurnInterrupted})
	}
	r.inTurn, r.starting = false, false
	r.lost = nil
	ag, err := r.opts.Recover(r.base, old)
	if err != nil {
		why := fmt.Sprintf(RecoverFailedNote, err)
		r.opts.Log.Error().Err(err).Msg("restart the silent agent")
		r.result.TurnError = why
		r.apply(&agent.AgentError{EventBase: agent.EventBase{Time: r.opts.Now().UnixMilli()}, Text: why, Kind: agent.ErrorInternal})
		return false
	}
	r.result.Recoveries++
	r.opts.Agent, r.events = ag, ag.Events()
	r.quietFrom, r.idleTripped, r.idleOn = r.opts.Now(), false, false
	c := ControlPrompt{Prompt: agent.Prompt{Text: RecoverPrompt}, Key: fmt.Sprintf("recover-%d", r.result.Recoveries), recovery: true}
	if err := r.sendPrompt(ctx, c); err != nil {
		r.opts.Log.Warn().Err(err).Msg("send the recovery prompt")
	}
	return true
}

// publishStatus copies the session's state into the snapshot Status
// reads (after every input, on the runner goroutine).
func (r *Runner) publishStatus() {
	st := Status{AgentRunning: !r.result.AgentExited, IdleTimeout: r.opts.IdleTimeout, IdleInterrupts: r.result.IdleInterrupts}
	if r.inTurn || r.starting {
		st.TurnSince = r.turnSince
	}
	st.IdleDeadline, _ = r.idleDeadline()
	for id, t := range r.tools {
		if t.status == mapper.StatusRunning {
			st.Tools = append(st.Tools, ToolActivity{CallID: id, Tool: t.tool, Since: t.since})
		}
	}
	slices.SortFunc(st.Tools, func(a, b ToolActivity) int {
		return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.CallID, b.CallID))
	})
	for _, k := range r.pendingInOrder() {
		p := r.pending[k]
		a := ToolActivity{CallID: p.callID, Since: p.since, Question: p.question}
		if t := r.tools[p.callID]; t != nil {
			a.Tool = t.tool
		}
		st.Waiting = append(st.Waiting, a)
	}
	r.statusMu.Lock()
	r.status = st
	r.statusMu.Unlock()
}

// Status returns what the session is doing now. Safe for concurrent use
// (the local event API calls it); the idle deadline moves with every
// agent event, so it is computed from the last one.
func (r *Runner) Status() Status {
	r.statusMu.Lock()
	st := r.status
	r.statusMu.Unlock()
	st.Tools, st.Waiting = slices.Clone(st.Tools), slices.Clone(st.Waiting)
	if n := r.lastAgent.Load(); n != 0 {
		st.LastAgentEvent = time.Unix(0, n)
		if !st.IdleDeadline.IsZero() && st.LastAgentEvent.Add(st.IdleTimeout).After(st.IdleDeadline) {
			st.IdleDeadline = st.LastAgentEvent.Add(st.IdleTimeout)
		}
	}
	return st
}
