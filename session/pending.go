package session

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// pending is a tool waiting for a person. The runner keys them by
// pendingKey: the same call id may wait in two sessions (two subagents of
// an agent that numbers calls per thread), and one's end or answer never
// settles the other's.
type pending struct {
	callID string
	// session is the key of the session the tool belongs to ("" the
	// root, else a subagent's child session): its resolution is applied
	// there, and its turn's end settles it.
	session  string
	question bool
	always   []string
	deadline time.Time // zero: no timeout
	since    time.Time // when it started waiting
	order    int       // arrival order, so settling is the same in every run
	// questions are a question block's questions (for the reference
	// app's answers, which name them).
	questions []agent.QuestionInfo
}

// pendingKey is the key of a waiting tool: its session's key and its call
// id.
func pendingKey(session, callID string) string { return session + "\x00" + callID }

// waiting finds the tool call callID that waits for a person's answer of
// the kind question says, in whichever session it waits. Errors: a
// StaleError when none waits; a refusal (ErrBadControl) when it waits in
// more than one session, for an answer that names only the call cannot
// tell which one it is for, and the agent would take it for both.
func (r *Runner) waiting(callID string, question bool) (string, *pending, error) {
	var key string
	var found *pending
	n := 0
	for k, p := range r.pending {
		if p.callID == callID && p.question == question {
			key, found = k, p
			n++
		}
	}
	switch {
	case n == 0:
		return "", nil, r.stale(callID, question)
	case n > 1:
		return "", nil, refuse("tool call %q waits in %d sessions (subagents reuse the id): an answer cannot tell which it is for", callID, n)
	}
	return key, found, nil
}

// answerAgentFromState tells the agent what the transcript now says about a
// tool it was waiting on.
func (r *Runner) answerAgentFromState(tp *mapper.ToolPart, p *pending) {
	ctx, cancel := r.answerCtx()
	defer cancel()
	if p.question {
		if tp.State.Block != nil && tp.State.Status != mapper.StatusError {
			_ = r.opts.Agent.AnswerQuestion(ctx, tp.CallID, tp.State.Block.Answers)
		}
		return
	}
	d := agent.Verdict{Decision: agent.DecisionReject}
	if b := tp.State.Block; b != nil && b.Decision != "" {
		d.Decision, d.Reason = b.Decision, b.Reason
	}
	if tp.State.Status == mapper.StatusRunning && d.Decision == agent.DecisionReject {
		d.Decision = agent.DecisionOnce
	}
	if d.Decision == agent.DecisionAlways {
		d.Always = p.always
	}
	if d.Decision == agent.DecisionReject {
		r.result.Rejected++
	}
	if err := r.opts.Agent.Decide(ctx, tp.CallID, d); err != nil {
		r.opts.Log.Warn().Err(err).Str("callID", tp.CallID).Msg("answer the agent")
	}
}

func (r *Runner) deadline() time.Time {
	if r.opts.PermissionTimeout <= 0 {
		return time.Time{}
	}
	return r.opts.Now().Add(r.opts.PermissionTimeout)
}

// permissionAsked applies the permission policy to a request. A rule's
// answer is recorded like a person's: the tool is blocked, then resolved
// with reason "rule" and the rule that matched, so the transcript tells
// which calls a rule decided.
func (r *Runner) permissionAsked(ctx context.Context, e *agent.ToolBlocked) {
	rules := append(append([]mapper.PermissionRule(nil), r.opts.Rules...), r.opts.Reducer.RuntimeRules(r.opts.Reducer.RootID())...)
	action, rule, _ := mapper.EvaluateRule(rules, e.Permission.Permission, e.Permission.Patterns)
	switch action {
	case mapper.ActionAllow:
		err := r.opts.Agent.Decide(ctx, e.CallID, agent.Verdict{Decision: agent.DecisionOnce, Reason: agent.ReasonRule})
		if err == nil {
			// The request and the rule's answer reach every observer in one
			// change, so none announces a wait nobody has (a terminal
			// printing "asks to use" for a call the rule allowed).
			r.applyTogether(e, &agent.ToolResolved{EventBase: r.at(e.Session), CallID: e.CallID,
				Decision: agent.DecisionOnce, Reason: agent.ReasonRule, Rule: rule.Matched()})
			return
		}
		// The agent did not take the rule's answer: ask a person instead
		// (and let the permission timeout apply), never leave it waiting.
		r.opts.Log.Warn().Err(err).Str("callID", e.CallID).Msg("allow by rule failed; asking")
		r.apply(e)
		r.addPending(&pending{callID: e.CallID, session: e.Session, always: e.Permission.Always, deadline: r.deadline()})
		return
	case mapper.ActionDeny:
		r.applyTogether(e, &agent.ToolResolved{EventBase: r.at(e.Session), CallID: e.CallID,
			Decision: agent.DecisionReject, Reason: agent.ReasonRule, Rule: rule.Matched()})
		r.result.Rejected++
		if err := r.opts.Agent.Decide(ctx, e.CallID, agent.Verdict{Decision: agent.DecisionReject, Reason: "denied by rule " + rule.String()}); err != nil {
			r.opts.Log.Warn().Err(err).Str("callID", e.CallID).Msg("deny by rule")
		}
		return
	}
	r.apply(e)
	r.addPending(&pending{callID: e.CallID, session: e.Session, always: e.Permission.Always, deadline: r.deadline()})
}

// addPending records a tool waiting for a person (p.callID in p.session).
func (r *Runner) addPending(p *pending) {
	r.arrivals++
	p.order, p.since = r.arrivals, r.opts.Now()
	r.pending[pendingKey(p.session, p.callID)] = p
	if r.opts.OnWaiting != nil {
		r.opts.OnWaiting(p.callID)
	}
}

// pendingInOrder returns the keys of the waiting tools (see pendingKey) in
// arrival order, so settling them (and so the transcript) is the same in
// every run and in a replay.
func (r *Runner) pendingInOrder() []string {
	ids := make([]string, 0, len(r.pending))
	for id := range r.pending {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(r.pending[a].order, r.pending[b].order) })
	return ids
}

// stale is the refusal of an answer to callID, naming the calls that wait
// for the same kind of answer.
func (r *Runner) stale(callID string, question bool) error {
	e := &StaleError{CallID: callID, Question: question}
	for _, k := range r.pendingInOrder() {
		if p := r.pending[k]; p.question == question {
			e.Waiting = append(e.Waiting, p.callID)
		}
	}
	return e
}

// answerCtx is the context of one answer the runner owes the agent outside
// a control input: it outlives Run's cancellation, bounded by AnswerTimeout.
func (r *Runner) answerCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.base, r.opts.AnswerTimeout)
}

// answer applies a person's permission decision; the first answer wins.
func (r *Runner) answer(ctx context.Context, a Answer) error {
	key, p, err := r.waiting(a.CallID, false)
	if err != nil {
		return err
	}
	if a.Abort {
		return r.abortTurn(ctx, a.Reason)
	}
	delete(r.pending, key)
	d := agent.Verdict{Decision: a.Decision, Reason: a.Reason}
	if a.Decision == agent.DecisionAlways {
		d.Always = p.always
	}
	if a.Decision == agent.DecisionReject {
		r.result.Rejected++
	}
	err = r.opts.Agent.Decide(ctx, a.CallID, d)
	r.apply(&agent.ToolResolved{EventBase: r.at(p.session), CallID: a.CallID, Decision: a.Decision, Reason: a.Reason})
	return err
}

// abortTurn rejects every pending permission with reason and interrupts
// the agent.
func (r *Runner) abortTurn(ctx context.Context, reason string) error {
	r.settleAllPending(reason, true)
	if !r.inTurn {
		return nil
	}
	return r.opts.Agent.Interrupt(ctx)
}

// settleAllPending answers every waiting tool, of every session, with a
// reject for reason. The transcript side is settled by the reducer at
// TurnEnded; when tellAgent is set the agent is answered too (it is still
// waiting).
func (r *Runner) settleAllPending(reason string, tellAgent bool) {
	r.settle(func(*pending) bool { return true }, reason, tellAgent)
}

// settlePending settles the tools one session waits on (its turn ended:
// the agent no longer waits for them).
func (r *Runner) settlePending(session, reason string) {
	r.settle(func(p *pending) bool { return p.session == session }, reason, false)
}

func (r *Runner) settle(which func(*pending) bool, reason string, tellAgent bool) {
	for _, k := range r.pendingInOrder() {
		p := r.pending[k]
		if !which(p) {
			continue
		}
		id := p.callID
		delete(r.pending, k)
		if tellAgent && !p.question {
			r.result.Rejected++
			ctx, cancel := r.answerCtx()
			if err := r.opts.Agent.Decide(ctx, id, agent.Verdict{Decision: agent.DecisionReject, Reason: reason}); err != nil {
				r.opts.Log.Warn().Err(err).Str("callID", id).Msg("reject on settle")
			}
			cancel()
		}
		r.apply(&agent.ToolResolved{EventBase: r.at(p.session), CallID: id, Decision: agent.DecisionReject, Reason: reason})
	}
}

// expirePending rejects permissions whose deadline passed.
func (r *Runner) expirePending() {
	now := r.opts.Now()
	for _, k := range r.pendingInOrder() {
		p := r.pending[k]
		if p.deadline.IsZero() || p.deadline.After(now) {
			continue
		}
		id := p.callID
		delete(r.pending, k)
		if !p.question {
			r.result.Rejected++
			ctx, cancel := r.answerCtx()
			if err := r.opts.Agent.Decide(ctx, id, agent.Verdict{Decision: agent.DecisionReject, Reason: agent.ReasonTimeout}); err != nil {
				r.opts.Log.Warn().Err(err).Str("callID", id).Msg("reject on timeout")
			}
			cancel()
		}
		r.apply(&agent.ToolResolved{EventBase: agent.EventBase{Session: p.session, Time: now.UnixMilli()}, CallID: id, Decision: agent.DecisionReject, Reason: agent.ReasonTimeout})
	}
}
