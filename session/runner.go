package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Errors of control inputs.
var (
	// ErrNotRunning: the runner has stopped.
	ErrNotRunning = errors.New("session runner is not running")
	// ErrAgentExited is the reply to a prompt handed over when the agent
	// had exited: the prompt is recorded, with an answer saying so.
	ErrAgentExited = errors.New("the agent has exited")
)

// NoAnswer is the error of the assistant message the runner writes when the
// agent exited with a prompt it never started a turn for (e.g. an agent
// binary that exits at once): the prompt is in the transcript, and so is why
// nothing answers it.
const NoAnswer = "the agent exited without answering"

// Control is an input from a controlling device or the local user.
type Control interface{ isControl() }

// ControlPrompt starts a turn with a prompt.
type ControlPrompt struct {
	Prompt agent.Prompt
	// Key identifies the prompt (e.g. the relay message id) so the same
	// prompt delivered twice starts one turn; "" means always new.
	Key   string
	Reply chan<- error
	// Dropped are files that came with the prompt but cannot be given to
	// the agent (PromptReader): each is recorded, and the agent reads a
	// note for it after the prompt's text.
	Dropped []agent.Dropped
	// recovery marks RecoverPrompt (Options.Recover): it does not start
	// the count of recoveries again.
	recovery bool
	// received is when the runner got a prompt another device sent (one
	// with a MessageID), Unix ms by Options.Now: its first receipt.
	received int64
}

// ControlAnswer answers a blocked permission.
type ControlAnswer struct {
	Answer Answer
	Reply  chan<- error
}

// ControlQuestion answers a blocked question.
type ControlQuestion struct {
	Answer QuestionAnswer
	Reply  chan<- error
}

// ControlAbort aborts the running turn.
type ControlAbort struct {
	Reply chan<- error
}

// ControlEnd ends Run as soon as no turn runs, none is starting and no
// prompt waits (the person at the terminal is done: the prompt line's
// input ended); at once when the session is idle. Prompts that arrive
// before then still run, and nothing running is interrupted.
type ControlEnd struct {
	Reply chan<- error
}

// ControlRefused records a control input the session refused (a replayed,
// wrong-target, stale or unsealed prompt or RPC, docs/ARCHITECTURE.md
// "Trust") as a Dropped record on the transcript, where every reader
// counts it. It has no reply: the sender was answered already.
type ControlRefused struct {
	Dropped agent.Dropped
}

func (ControlPrompt) isControl()   {}
func (ControlAnswer) isControl()   {}
func (ControlQuestion) isControl() {}
func (ControlAbort) isControl()    {}
func (ControlEnd) isControl()      {}
func (ControlRefused) isControl()  {}

// Options configure a Runner.
type Options struct {
	Agent   agent.Agent
	Reducer *mapper.Reducer
	// Sink sends changed records to the relay; nil runs without a relay.
	Sink *Sink
	// Rules are evaluated for every permission the agent asks for: allow
	// answers at once, deny rejects at once, ask blocks the tool and waits.
	// Runtime "always" answers are added by the reducer.
	Rules []mapper.PermissionRule
	// PermissionTimeout rejects a permission nobody answered in time (reason
	// "timeout"); 0 waits forever.
	PermissionTimeout time.Duration
	// AnswerTimeout bounds each answer the runner writes to the agent on its
	// own (a rule, a timeout, settling at the end); 10 s when 0.
	AnswerTimeout time.Duration
	// OneShot ends Run after the first turn ends (happy <agent> -p).
	OneShot bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives diagnostics.
	Log zerolog.Logger
	// OnBus, when set, sees every bus event (terminal rendering, SSE).
	OnBus func([]mapper.BusEvent)
	// OnWaiting, when set, is called on the runner goroutine when a tool
	// call starts waiting for a person (a permission no rule decided, or a
	// question), after the bus events that show it blocked.
	OnWaiting func(callID string)
	// OnControl, when set, sees every control input before it is applied,
	// for the traffic log (happy replay reproduces a live session).
	OnControl func(Control)
	// OnActivity, when set, is called on the runner goroutine each time
	// the session starts working (a prompt was sent, or the agent started a
	// turn: true) or stops (no turn runs and none is starting: false). It
	// feeds the heartbeat's "thinking"; it must not block.
	OnActivity func(thinking bool)
	// IdleTimeout, when positive, interrupts a turn whose agent stayed
	// silent this long (no event at all) while no tool call runs and
	// nobody is asked for a permission or an answer; the turn's assistant
	// message gets the error IdleNote (docs/ARCHITECTURE.md, section
	// "Stalled agents"). 0 turns the watch off.
	IdleTimeout time.Duration
	// Recover, when set, restarts a hung agent in place (--recover): when
	// the idle watch trips, the runner stops reading the old agent's
	// events, settles what is open (the turn ends interrupted, waiting
	// tools are rejected), calls Recover with the old agent (Recover stops
	// it and starts a new one that resumes the agent's own session), then
	// reads the new agent's events and sends it RecoverPrompt, recorded as
	// a user message so every device sees it. A turn is recovered at most
	// RecoverMax times (a person's prompt starts the count again); after
	// that the silent agent is interrupted as without Recover. An error of
	// Recover is written on the transcript and ends the run as an agent
	// exit. Nil: a silent agent is interrupted only.
	Recover func(ctx context.Context, old agent.Agent) (agent.Agent, error)
	// CanRecover, when set, says whether Recover can work now (nil) or why
	// not (e.g. an agent that can resume no session): the silent agent is
	// then interrupted and the reason written on the transcript.
	CanRecover func() error
	// RecoverMax bounds the recoveries of one turn; DefaultRecoverMax
	// when 0.
	RecoverMax int
	// OnEvent, when set, sees every agent event before it is applied (on
	// the runner goroutine; it must not block), e.g. to record the agent's
	// own session id for a later resume.
	OnEvent func(agent.Event)
	// OnFlushFailing, when set, is called on the runner goroutine when
	// writing to the relay sink starts failing (err, the first failure) and
	// when it works again (nil). Failures in between are neither logged nor
	// reported again: the records stay dirty in memory and are retried at
	// each flush. It must not block.
	OnFlushFailing func(err error)
	// Attachments, when set, downloads the blobs a prompt references for
	// the agent and stores the inline files of tool results and of prompts
	// typed in the agent's terminal as blobs, so no record holds their
	// bytes. Nil hands files on as they are.
	Attachments Attachments
}

// Result is how a run ended.
type Result struct {
	// TurnReason is the reason of the last TurnEnded (mapper.Turn*), or ""
	// when no turn ended.
	TurnReason string
	// TurnError is the error text of a failed turn.
	TurnError string
	// AgentExited is set when the agent's event stream closed.
	AgentExited bool
	// Rejected counts permissions that ended rejected during the run.
	Rejected int
	// Unanswered counts prompts the agent exited without starting a turn
	// for (each is recorded, followed by an error message NoAnswer).
	Unanswered int
	// IdleInterrupts counts the turns the idle watch interrupted
	// (Options.IdleTimeout).
	IdleInterrupts int
	// Recoveries counts the agents restarted by Options.Recover.
	Recoveries int
}

// defaultAnswerTimeout bounds one answer written to the agent outside a
// control input (rules, timeouts, settling at the end): an agent that stops
// reading its input must not hold the runner.
const defaultAnswerTimeout = 10 * time.Second

// Runner drives one session: agent events go through the permission policy
// into the reducer, whose changes go to the sink; control inputs go back to
// the agent. One goroutine (Run) owns the reducer, the sink and all state.
type Runner struct {
	opts    Options
	control chan Control
	pending map[string]*pending // by pendingKey (session, call id)
	prompts map[string]bool
	result  Result
	inTurn  bool
	// starting is set from sending a prompt until the agent starts (or
	// ends) the turn; queued holds prompts that arrive meanwhile or during
	// a turn, so a prompt is recorded where its turn begins, never under the
	// previous turn's output.
	starting bool
	queued   []ControlPrompt
	seq      int
	// base is Run's context without its cancellation: answers the runner
	// owes the agent (settling at shutdown) are still delivered, each bounded
	// by Options.AnswerTimeout.
	base context.Context
	// arrivals counts pending entries, for their order.
	arrivals int
	// thinking is what OnActivity was last told.
	thinking bool
	// ending is set by ControlEnd: Run returns once the session is idle.
	ending bool
	// lost holds prompts the agent refused since its last turn started;
	// recorded as unanswered if it exits before starting another.
	lost []ControlPrompt
	// unstarted is the key of the prompt with receipts last handed to the
	// agent, until the agent's first event stamps its start
	// (Reducer.PromptStarted); "" when none waits.
	unstarted string

	// tools are the open tool calls of the transcript (trackTools).
	tools map[string]*openTool
	// turnSince is when the running (or starting) turn began.
	turnSince time.Time
	// The idle watch (status.go): the clock runs (idleOn) from quietFrom;
	// idleTripped is set once it interrupted, until the agent speaks.
	idleOn, idleTripped bool
	quietFrom           time.Time
	// events is the current agent's event channel (Options.Recover
	// replaces the agent).
	events <-chan agent.Event
	// recoveries counts the recoveries since a person's last prompt.
	recoveries int
	// lastAgent is the time of the agent's last event (Unix ns; 0 none),
	// read by Status from other goroutines.
	lastAgent atomic.Int64
	// status is the snapshot Status returns.
	statusMu sync.Mutex
	status   Status
	// flushFailing is set from a failed sink flush until one succeeds.
	flushFailing bool
}

// NewRunner returns a runner; call Run to start it.
func NewRunner(opts Options) *Runner {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AnswerTimeout <= 0 {
		opts.AnswerTimeout = defaultAnswerTimeout
	}
	r := &Runner{base: context.Background(), opts: opts, control: make(chan Control, 64), pending: map[string]*pending{}, prompts: map[string]bool{}, tools: map[string]*openTool{}}
	r.publishStatus()
	return r
}

// Control hands a control input to the running runner. It blocks while the
// queue is full and fails with ErrNotRunning after ctx ends.
func (r *Runner) Control(ctx context.Context, c Control) error {
	select {
	case r.control <- c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotRunning, ctx.Err())
	}
}

// Run drives the session until the agent exits, the first turn ends in
// OneShot mode, the session is idle after a ControlEnd, or ctx is
// cancelled (then the turn is interrupted and open tools are settled).
// Whatever happens, the sink is flushed before Run returns; a flush error
// is returned with the result.
func (r *Runner) Run(ctx context.Context) (Result, error) {
	r.base = context.WithoutCancel(ctx)
	r.events = r.opts.Agent.Events()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.noteActivity()
		r.watchIdle()
		r.publishStatus()
		if r.ending && !r.inTurn && !r.starting && len(r.queued) == 0 {
			return r.finish(ctx)
		}
		// Agent events already waiting are handled before any control
		// input, so a prompt is recorded after what the agent said first
		// (e.g. the model it announced at start).
		select {
		case ev, ok := <-r.events:
			if done, res, err := r.agentOrExit(ctx, ev, ok); done {
				return res, err
			}
			continue
		default:
		}
		// No event waits: what is due now (a state change) is written now,
		// not at the timer's next tick (at least a millisecond away); events
		// that arrived together share one flush.
		r.flushDue(ctx)
		r.armTimer(timer)
		select {
		case ev, ok := <-r.events:
			if done, res, err := r.agentOrExit(ctx, ev, ok); done {
				return res, err
			}
		case c := <-r.control:
			if r.opts.OnControl != nil {
				r.opts.OnControl(c)
			}
			r.controlInput(ctx, c)
		case <-timer.C:
			r.expirePending()
			r.watchIdle() // a permission that expired resumes the clock
			if r.checkIdle() && !r.recover(ctx) {
				if done, res, err := r.agentOrExit(ctx, nil, false); done {
					return res, err
				}
			}
			r.flushDue(ctx)
		case <-ctx.Done():
			r.abortTurn(context.WithoutCancel(ctx), agent.ReasonCancelled)
			if r.inTurn || r.starting {
				// A prompt the agent had not started a turn for yet is
				// stopped too: the transcript says so, not a bare prompt.
				r.apply(&agent.TurnEnded{Reason: agent.TurnInterrupted})
			}
			return r.finish(context.WithoutCancel(ctx))
		}
	}
}

// agentOrExit handles one receive from the agent's event channel: an event,
// or (ok false) the agent's exit. done reports that Run must return.
func (r *Runner) agentOrExit(ctx context.Context, ev agent.Event, ok bool) (done bool, res Result, err error) {
	if !ok {
		r.result.AgentExited = true
		defer r.publishStatus()
		if r.inTurn {
			r.apply(&agent.TurnEnded{Reason: agent.TurnAgentExited})
		}
		r.settleAllPending(agent.ReasonAgentExited, false)
		r.unanswered(ctx)
		res, err = r.finish(ctx)
		return true, res, err
	}
	r.sawAgent()
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(ev)
	}
	r.agentEvent(ctx, ev)
	if r.opts.OneShot && r.result.TurnReason != "" && !r.inTurn {
		res, err = r.finish(ctx)
		return true, res, err
	}
	return false, Result{}, nil
}

// unanswered records, once the agent has exited, the prompts it never
// started a turn for: the one sent last (while the turn was starting), the
// ones queued behind it, and the ones still waiting in the control queue
// (their senders get ErrAgentExited; other control inputs there are handled
// as usual, which tells them nothing waits). When there is one, an
// assistant message with the error NoAnswer follows them, so the transcript
// says why nothing answers.
func (r *Runner) unanswered(ctx context.Context) {
	n := 0
	if r.starting {
		n++
		r.starting = false
	}
	for _, c := range r.lost { // their senders had the error already
		r.recordPrompt(c, 0)
		n++
	}
	queued := r.queued
	r.lost, r.queued = nil, nil
	for more := true; more; {
		select {
		case c := <-r.control:
			if r.opts.OnControl != nil {
				r.opts.OnControl(c)
			}
			if p, ok := c.(ControlPrompt); ok {
				r.receive(&p)
				if r.keyPrompt(&p) {
					queued = append(queued, p)
				} else {
					reply(p.Reply, nil)
				}
				continue
			}
			r.controlInput(ctx, c)
		default:
			more = false
		}
	}
	for _, c := range queued {
		r.recordPrompt(c, 0)
		reply(c.Reply, ErrAgentExited)
		n++
	}
	if n == 0 {
		return
	}
	r.result.Unanswered = n
	why := NoAnswer
	if ex, ok := r.opts.Agent.(agent.ExitExplainer); ok {
		if d := ex.ExitDetail(); d != "" {
			why += ": " + d
		}
	}
	r.result.TurnError = why
	now := agent.EventBase{Time: r.opts.Now().UnixMilli()}
	r.apply(&agent.AgentError{EventBase: now, Text: why, Kind: agent.ErrorInternal})
	r.apply(&agent.TurnEnded{EventBase: now, Reason: agent.TurnAgentExited, Error: why})
}

// noteActivity tells OnActivity when the session started or stopped working.
func (r *Runner) noteActivity() {
	busy := r.inTurn || r.starting
	if busy == r.thinking {
		return
	}
	r.thinking = busy
	if r.opts.OnActivity != nil {
		r.opts.OnActivity(busy)
	}
}

// finish flushes everything and returns the result.
func (r *Runner) finish(ctx context.Context) (Result, error) {
	r.noteActivity()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	err := r.flushAll(fctx)
	r.noteFlush(err)
	return r.result, err
}

// flushDue writes what is due to the sink, then reports the outcome
// (noteFlush): a sink that cannot write (a full disk) fails at every
// event, and one line per event would fill the log. Nothing due is no
// outcome.
func (r *Runner) flushDue(ctx context.Context) {
	if r.opts.Sink == nil {
		return
	}
	now := r.opts.Now()
	if due, ok := r.opts.Sink.NextDue(now); !ok || due.After(now) {
		return
	}
	r.noteFlush(r.opts.Sink.Flush(ctx, now, false))
}

// noteFlush logs and reports (OnFlushFailing) a flush's outcome when it
// differs from the last one's, so the end of a run that writes again after
// a failure says so too.
func (r *Runner) noteFlush(err error) {
	switch {
	case err != nil && !r.flushFailing:
		r.flushFailing = true
		r.opts.Log.Warn().Err(err).Msg("relay sink flush failed; will retry at each change (further failures are not logged)")
	case err == nil && r.flushFailing:
		r.flushFailing = false
		r.opts.Log.Info().Msg("relay sink flush works again")
	default:
		return
	}
	if r.opts.OnFlushFailing != nil {
		r.opts.OnFlushFailing(err)
	}
}

// flushAll writes every dirty record to the sink (the end of a run).
func (r *Runner) flushAll(ctx context.Context) error {
	if r.opts.Sink == nil {
		return nil
	}
	return r.opts.Sink.Flush(ctx, r.opts.Now(), true)
}

// armTimer sets the timer to the earliest of the sink's next due time and
// the earliest permission deadline.
func (r *Runner) armTimer(t *time.Timer) {
	now := r.opts.Now()
	next := now.Add(time.Hour)
	if r.opts.Sink != nil {
		if due, ok := r.opts.Sink.NextDue(now); ok && due.Before(next) {
			next = due
		}
	}
	for _, p := range r.pending {
		if !p.deadline.IsZero() && p.deadline.Before(next) {
			next = p.deadline
		}
	}
	if due, ok := r.idleDeadline(); ok && due.Before(next) {
		next = due
	}
	if !t.Stop() {
		select {
		case <-t.C:
		default:
		}
	}
	t.Reset(max(next.Sub(now), time.Millisecond))
}

// apply folds one event into the reducer and hands its bus events on.
func (r *Runner) apply(ev agent.Event) []mapper.BusEvent {
	before := r.opts.Reducer.DroppedTotal()
	bus := r.opts.Reducer.Apply(ev)
	return r.publish(bus, r.opts.Reducer.DroppedTotal() != before)
}

// applyTogether folds events into the transcript in order and hands their
// changes on as one (see apply).
func (r *Runner) applyTogether(evs ...agent.Event) []mapper.BusEvent {
	before := r.opts.Reducer.DroppedTotal()
	var bus []mapper.BusEvent
	for _, ev := range evs {
		bus = append(bus, r.opts.Reducer.Apply(ev)...)
	}
	return r.publish(bus, r.opts.Reducer.DroppedTotal() != before)
}

// publish hands the reducer's change events on (tool tracking, sink,
// OnBus; dropped: the reducer's dropped records changed too) and answers on
// the agent side what the reducer resolved on its own.
func (r *Runner) publish(bus []mapper.BusEvent, dropped bool) []mapper.BusEvent {
	r.trackTools(bus)
	if r.opts.Sink != nil {
		r.opts.Sink.Observe(bus)
		if dropped {
			r.opts.Sink.MarkDropped(r.opts.Reducer.DroppedSessions())
		}
	}
	if r.opts.OnBus != nil && len(bus) > 0 {
		r.opts.OnBus(bus)
	}
	// Tools the reducer resolved on its own (an "always" unblocking others,
	// a reject cascade, a settle) must be answered on the agent side too.
	for _, b := range bus {
		pu, ok := b.(*mapper.MessagePartUpdated)
		if !ok {
			continue
		}
		tp, ok := pu.Part.(*mapper.ToolPart)
		if !ok {
			continue
		}
		if tp.State.Status == mapper.StatusBlocked {
			continue
		}
		session, ok := r.opts.Reducer.Key(tp.SessionID)
		if !ok {
			continue
		}
		if p, waiting := r.pending[pendingKey(session, tp.CallID)]; waiting {
			delete(r.pending, pendingKey(session, tp.CallID))
			r.answerAgentFromState(tp, p)
		}
	}
	return bus
}

// agentEvent handles one event from the agent.
func (r *Runner) agentEvent(ctx context.Context, ev agent.Event) {
	if r.unstarted != "" && !agent.IsNilEvent(ev) && ev.Base().Session == "" {
		// The agent's first event since it took a prompt with receipts:
		// the turn started.
		r.publish(r.opts.Reducer.PromptStarted(r.unstarted, r.opts.Now().UnixMilli()), false)
		r.unstarted = ""
	}
	ev = r.storedEvent(ctx, ev)
	switch e := ev.(type) {
	case *agent.ToolBlocked:
		if e.Permission != nil {
			r.permissionAsked(ctx, e)
			return
		}
		r.apply(e)
		var qs []agent.QuestionInfo
		if e.Question != nil {
			qs = e.Question.Questions
		}
		r.addPending(&pending{callID: e.CallID, session: e.Session, question: true, deadline: r.deadline(), questions: qs})
		return
	case *agent.SubagentEnded:
		if e.Child == "" {
			// Names the root, not a child: the reducer refuses it, and the
			// root's waiting tools stay the root turn's to settle.
			break
		}
		r.settlePending(e.Child, agent.ReasonCancelled)
	case *agent.ToolResolved:
		// Answered inside the agent (typed in its own terminal): the first
		// answer wins, so nothing more is sent to the agent.
		delete(r.pending, pendingKey(e.Session, e.CallID))
	case *agent.UserPrompt:
		// A prompt typed in the agent's own terminal (local mode).
		r.apply(e)
		if e.Session == "" && !e.Synthetic {
			r.titleFrom(e.Text)
		}
		return
	case *agent.TurnStarted:
		if e.Session != "" {
			break // a subagent's turn: its start is its own, never the session's turn
		}
		r.inTurn, r.starting = true, false
		r.lost = nil // the agent is there: their senders were told

	case *agent.TurnEnded:
		if e.Session != "" {
			// A subagent's turn: it settles what that subagent waits on,
			// nothing of the session's own turn or of other subagents.
			r.settlePending(e.Session, agent.ReasonCancelled)
			r.apply(ev)
			return
		}
		r.inTurn, r.starting = false, false
		r.result.TurnReason, r.result.TurnError = e.Reason, e.Error
		// The turn's end settled the root's waiting tools in the agent too;
		// a subagent's may outlive it (a background subagent), and the
		// agent is told, never left waiting for an answer nobody gives.
		r.settle(func(p *pending) bool { return p.session != "" }, agent.ReasonCancelled, true)
		r.settleAllPending(agent.ReasonCancelled, false)
		r.apply(ev)
		r.nextQueued(ctx)
		return
	}
	r.apply(ev)
}

// nextQueued sends the oldest queued prompt, if any, now that no turn runs.
func (r *Runner) nextQueued(ctx context.Context) {
	for len(r.queued) > 0 && !r.inTurn && !r.starting {
		c := r.queued[0]
		r.queued = r.queued[1:]
		if err := r.sendPrompt(ctx, c); err != nil {
			r.opts.Log.Warn().Err(err).Msg("queued prompt")
		}
	}
}

// at is the base of an event the runner makes for session (a child's key,
// or "" the root), stamped now.
func (r *Runner) at(session string) agent.EventBase {
	return agent.EventBase{Session: session, Time: r.opts.Now().UnixMilli()}
}

// controlInput handles one control input and replies to its sender.
func (r *Runner) controlInput(ctx context.Context, c Control) {
	switch c := c.(type) {
	case ControlPrompt:
		r.receive(&c)
		reply(c.Reply, r.prompt(ctx, c))
	case ControlAnswer:
		reply(c.Reply, r.answer(ctx, c.Answer))
	case ControlQuestion:
		key, p, err := r.waiting(c.Answer.CallID, true)
		if err != nil {
			reply(c.Reply, err)
			return
		}
		delete(r.pending, key)
		err = r.opts.Agent.AnswerQuestion(ctx, c.Answer.CallID, c.Answer.Answers)
		r.apply(&agent.ToolResolved{EventBase: r.at(p.session), CallID: c.Answer.CallID, Answers: c.Answer.Answers})
		reply(c.Reply, err)
	case ControlCommunication:
		reply(c.Reply, r.communicate(c.Communication))
	case ControlAbort:
		reply(c.Reply, r.abortTurn(ctx, agent.ReasonCancelled))
	case ControlEnd:
		r.ending = true
		reply(c.Reply, nil)
	case ControlRefused:
		r.opts.Log.Warn().Str("reason", string(c.Dropped.Reason)).Str("kind", c.Dropped.Kind).Str("detail", c.Dropped.Detail).Msg("control input refused")
		r.apply(&agent.DroppedInput{EventBase: agent.EventBase{Time: r.opts.Now().UnixMilli()}, Dropped: c.Dropped})
	}
}

func reply(ch chan<- error, err error) {
	if ch != nil {
		ch <- err
	}
}

// receive stamps a prompt another device sent (it has a MessageID) with
// when the runner got it.
func (r *Runner) receive(c *ControlPrompt) {
	if c.Prompt.MessageID != "" && c.received == 0 {
		c.received = r.opts.Now().UnixMilli()
	}
}

// keyPrompt gives a prompt without a key one of its own; it reports false
// for a prompt whose key was seen already (the same prompt delivered twice).
func (r *Runner) keyPrompt(c *ControlPrompt) bool {
	if c.Key != "" {
		if r.prompts[c.Key] {
			return false
		}
		r.prompts[c.Key] = true
		return true
	}
	r.seq++
	c.Key = fmt.Sprintf("local-%d", r.seq)
	return true
}

func (r *Runner) prompt(ctx context.Context, c ControlPrompt) error {
	if !r.keyPrompt(&c) {
		return nil
	}
	if r.inTurn || r.starting {
		r.queued = append(r.queued, c)
		return nil
	}
	return r.sendPrompt(ctx, c)
}

// sendPrompt hands a prompt to the agent and records it.
func (r *Runner) sendPrompt(ctx context.Context, c ControlPrompt) error {
	p := c.Prompt
	dropped := c.Dropped
	if r.opts.Attachments != nil && len(p.Files) > 0 {
		files, more, err := r.fetchFiles(ctx, p.Files)
		if err != nil {
			r.refusePrompt(c, err)
			return err
		}
		p.Files = files
		dropped = append(dropped, more...)
	}
	if len(dropped) > 0 {
		now := agent.EventBase{Time: r.opts.Now().UnixMilli()}
		notes := make([]string, 0, len(dropped)+1)
		if p.Text != "" {
			notes = append(notes, p.Text)
		}
		for _, d := range dropped {
			r.opts.Log.Warn().Str("reason", string(d.Reason)).Str("detail", d.Detail).Msg("attachment left out of the prompt")
			r.apply(&agent.DroppedInput{EventBase: now, Dropped: d})
			notes = append(notes, fileNote(d))
		}
		p.Text = strings.Join(notes, "\n\n")
	}
	if !c.recovery {
		r.recoveries = 0
	}
	if err := r.opts.Agent.Prompt(ctx, p); err != nil {
		if errors.Is(err, agent.ErrUnsupportedInput) {
			r.refusePrompt(c, err)
			return err
		}
		// Kept for the agent's exit, which records it as unanswered;
		// an agent that is still there gets the next prompt as usual.
		r.lost = append(r.lost, c)
		return fmt.Errorf("send prompt to agent: %w", err)
	}
	r.starting = true
	r.recordPrompt(c, r.opts.Now().UnixMilli())
	if c.received != 0 {
		r.unstarted = c.Key
	}
	return nil
}

// recordPrompt records a prompt as the root session's user message and
// titles an untitled session with it; handed is when the agent took it
// (Unix ms; 0: it never did), a receipt of a prompt with one.
func (r *Runner) recordPrompt(c ControlPrompt, handed int64) {
	up := &agent.UserPrompt{EventBase: agent.EventBase{Time: r.opts.Now().UnixMilli()}, PromptID: c.Key, Text: c.Prompt.Text, Files: c.Prompt.Files, MessageID: c.Prompt.MessageID}
	if c.received != 0 {
		up.Received, up.Handed = c.received, handed
	}
	r.apply(up)
	r.titleFrom(c.Prompt.Text)
}

// titleFrom gives an untitled root session a title from a prompt.
func (r *Runner) titleFrom(prompt string) {
	if root, ok := r.opts.Reducer.Session(r.opts.Reducer.RootID()); ok && root.Title == "" {
		if title := TitleFromPrompt(prompt); title != "" {
			r.apply(&agent.SessionInfo{Title: title})
		}
	}
}

// TitleFromPrompt makes a session title from a prompt: its first non-empty
// line, at most 60 characters (cut on a word boundary when it can, with
// "…").
func TitleFromPrompt(text string) string {
	line := ""
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			line = l
			break
		}
	}
	r := []rune(line)
	if len(r) <= 60 {
		return line
	}
	cut := string(r[:60])
	if i := strings.LastIndex(cut, " "); i > 30 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ,.;:") + "…"
}
