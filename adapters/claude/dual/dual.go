// Package dual runs one Claude Code session in both of its modes, as one
// agent.Agent, switching between them as docs/ARCHITECTURE.md
// ("Claude's two modes") describes: a prompt from the relay while in local
// mode hands the session to remote mode, space pressed twice in the
// terminal hands it back, and the transcript continues as one session.
//
//   - It starts in local mode (package local: Claude's own terminal UI in a
//     proxied PTY).
//   - A prompt from another device (Prompt) in local mode: local mode is
//     stopped cleanly (local.Agent.Handoff: Claude ends, its transcript is
//     read to the end), remote mode starts (package remote: SDK mode) with
//     --resume <Claude session id> (--session-id <id> while Claude has not
//     written the session yet: nothing was typed, and a session without a
//     transcript cannot be resumed), and the prompt goes to it. Once local mode
//     has given the terminal back, one line tells the person at the terminal
//     that Claude continues in remote mode and that space pressed twice
//     takes control back; the terminal is then in raw mode until then.
//   - Space on the terminal in remote mode: one line asks for a second space
//     within Options.ConfirmWindow, and says that it interrupts the turn from
//     the other device when one runs; Ctrl-C counts as both spaces; every
//     other key is ignored (read and discarded). The second space: a
//     running remote turn is interrupted (and its end awaited, up to
//     Options.InterruptWait),
//     remote mode is stopped, the terminal is restored, and local mode starts
//     again resuming the same Claude session (local.Options.Resume), reading
//     its transcript from its size at that moment (ResumeOffset): what remote
//     mode wrote there was reported already from its stream-json output.
//     Keys typed after the second space, while Claude restarts, are kept
//     and given to the new local Claude (local.Options.Typeahead).
//   - Options.Terminal is told when the terminal is happy's (remote mode) and
//     when it is about to be Claude's again, so the caller can show the
//     remote turn meanwhile.
//   - Remote mode ending by itself (Claude crashed, or failed to resume) also
//     brings the session back to local mode, with a one-line notice.
//
// Events is one channel across modes, in order: each mode's events are
// forwarded until its own stream closes, and the next mode starts only after
// that. It closes when the person ends Claude in local mode (its stream
// closes without a switch), when Claude cannot be started again, when happy
// gets SIGINT, SIGTERM or SIGHUP while in remote mode (the terminal is raw
// then, so no key sends them), or on Close. Decide, AnswerQuestion and
// Interrupt go to the current mode. Every switch is logged.
package dual

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/claude/local"
	"github.com/happy-dev/happy/adapters/claude/remote"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/queue"
)

// Mode is the mode Claude runs in.
type Mode string

// Modes reported by Agent.Mode.
const (
	ModeLocal  Mode = "local"  // Claude's terminal UI owns the terminal
	ModeRemote Mode = "remote" // SDK mode; the terminal waits for a key
	ModeEnded  Mode = "ended"  // the session is over (Events closed or closing)
)

// DefaultConfirmWindow is how long after a first space in remote mode a
// second one takes control back.
const DefaultConfirmWindow = 2 * time.Second

// DefaultInterruptWait bounds the wait for an interrupted remote turn to end
// before remote mode is stopped anyway.
const DefaultInterruptWait = 10 * time.Second

// Notices printed on the terminal (one line each) when it is not Claude's.
const (
	NoticeRemote = "happy: a prompt came from another device; Claude continues in remote mode. Press space twice (or Ctrl-C) to take control back here."
	// NoticeConfirm follows a first space in remote mode;
	// NoticeConfirmTurn is added (before the final period) while a turn
	// from another device runs.
	NoticeConfirm     = "happy: press space again to take control back here."
	NoticeConfirmTurn = " (this interrupts the turn from the other device)"
	noticeBack        = "happy: Claude's remote mode ended (%s); back to local mode."
	noticeFailed      = "happy: Claude could not be started again in local mode: %v"
)

// Errors callers branch on.
var (
	// ErrEnded: the session is over (Claude was ended in local mode, or
	// Close was called); nothing more can be sent.
	ErrEnded = errors.New("claude session has ended")
	// ErrNoClaudeSession: local mode ended before Claude reported its
	// session id (its SessionStart hook), so there is nothing to resume in
	// remote mode.
	ErrNoClaudeSession = errors.New("claude has not reported its session id yet")
)

// Options configure Start.
type Options struct {
	// Local configures local mode. The first start uses it as given
	// (SessionID or Resume/ResumeOffset included); later starts set
	// Resume to the Claude session id and ResumeOffset to its transcript's
	// size (or, when Claude has not written the session yet, SessionID to
	// its id). In is the terminal whose key press takes control back in
	// remote mode.
	Local local.Options
	// Remote configures remote mode. "--resume <Claude session id>" (or
	// "--session-id <id>" for a session Claude has not written yet) is put
	// in front of Remote.SDK.Args on every start.
	Remote remote.Options
	// Notice receives the notices for the person at the terminal (one line
	// each, printed only while no mode draws on the terminal); Local.Out
	// when nil.
	Notice io.Writer
	// Log receives a record of every switch and of errors nobody else sees.
	Log zerolog.Logger
	// InterruptWait bounds the wait for a remote turn interrupted by a key
	// press to end; DefaultInterruptWait when zero.
	InterruptWait time.Duration
	// ConfirmWindow is how long after a first space in remote mode a
	// second one takes control back; DefaultConfirmWindow when zero.
	ConfirmWindow time.Duration
	// Terminal, when set, is told who owns the terminal, from the
	// controller: ModeRemote once remote mode's notice is printed (happy
	// may write on it, "\r\n" line ends, until the next call), ModeLocal
	// just before Claude's terminal UI starts again, ModeEnded when the
	// session ends. It must return soon; nothing may be written on the
	// terminal after the ModeLocal call returns.
	Terminal func(Mode)
}

// Agent is one Claude Code session that moves between local and remote
// mode. It implements agent.Agent.
type Agent struct {
	opts   Options
	ctx    context.Context // modes started later run under the context Start got
	log    zerolog.Logger
	notice io.Writer

	// q holds events between the modes' forwarders and Events without
	// bound, so a mode is never blocked by a runner that is busy (the
	// runner itself waits in Prompt while local mode hands over).
	q    *queue.Unbounded[agent.Event]
	reqs chan promptReq
	stop chan struct{} // Close asked
	done chan struct{} // the controller returned and Events is closing

	// switches are mode switches asked by another device (SwitchMode).
	switches chan switchReq

	closeOnce sync.Once
	closeErr  error

	mu      sync.Mutex // guards cur, mode and changed
	cur     *instance
	mode    Mode
	changed chan struct{} // closed (and replaced) when mode changes

	// exitCode is Claude's exit status when the session ended because
	// Claude exited by itself in local mode before it ever started its
	// session (it refused its arguments, say); -1 otherwise (it did not,
	// it was killed by a signal, or it had run a session, which ends
	// however its person quits it). Written by the controller before done
	// closes.
	exitCode int

	// Owned by the controller goroutine.
	keys       *keyWait
	spaceAt    time.Time // a first space was pressed in remote mode (zero: none)
	sessionID  string    // Claude's session id
	transcript string    // its transcript (as the SessionStart hook gave it)
}

var _ agent.Agent = (*Agent)(nil)

// promptReq is a prompt handed to the controller.
type promptReq struct {
	ctx   context.Context
	p     agent.Prompt
	reply chan error
}

// switchReq is a mode switch handed to the controller.
type switchReq struct {
	ctx   context.Context
	to    Mode
	reply chan bool
}

// instance is one run of one mode and the goroutine forwarding its events.
type instance struct {
	mode   Mode
	agent  agent.Agent
	loc    *local.Agent       // local mode
	cancel context.CancelFunc // ends a remote Claude (its process group)
	fwd    chan struct{}      // closed once its Events closed and all were queued

	mu        sync.Mutex
	turnOpen  bool          // a root turn runs
	awaiting  bool          // a prompt was sent and its turn has not started
	turnEnded chan struct{} // signalled (cap 1) at each root TurnEnded
	sessionID string        // Claude's session id as this run reported it
}

// Start starts Claude in local mode and returns the agent. ctx bounds the
// whole session: every mode started later runs under it. Errors: those of
// local.Start (Claude cannot be started; the terminal is restored then).
func Start(ctx context.Context, opts Options) (*Agent, error) {
	if opts.InterruptWait <= 0 {
		opts.InterruptWait = DefaultInterruptWait
	}
	if opts.ConfirmWindow <= 0 {
		opts.ConfirmWindow = DefaultConfirmWindow
	}
	notice := opts.Notice
	if notice == nil {
		notice = opts.Local.Out
	}
	if notice == nil {
		notice = io.Discard
	}
	a := &Agent{
		opts: opts, ctx: ctx, log: opts.Log, notice: notice,
		reqs: make(chan promptReq), switches: make(chan switchReq), stop: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{}), exitCode: -1,
	}
	loc, err := local.Start(ctx, opts.Local)
	if err != nil {
		return nil, err
	}
	a.q = queue.New[agent.Event]()
	a.setCurrent(a.attachLocal(loc), ModeLocal)
	a.log.Info().Str("mode", string(ModeLocal)).Msg("claude started in local mode")
	go a.control()
	return a, nil
}

// ExitCode is Claude's exit status when the session ended because Claude
// exited by itself in its terminal (local mode) before it started its
// session (it refused its arguments, say), and ok true; ok is false when
// the session ended otherwise (Close, a signal, a signal killing Claude,
// Claude quit after it ran a session) or has not ended yet.
func (a *Agent) ExitCode() (code int, ok bool) {
	select {
	case <-a.done:
		return a.exitCode, a.exitCode >= 0
	default:
		return 0, false
	}
}

// Events implements agent.Agent: the events of every mode, in order.
func (a *Agent) Events() <-chan agent.Event { return a.q.Out() }

// Mode is the mode Claude runs in now.
func (a *Agent) Mode() Mode {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mode
}

// SessionID is Claude's session id, once known ("" before).
func (a *Agent) SessionID() string {
	a.mu.Lock()
	cur := a.cur
	a.mu.Unlock()
	if cur != nil {
		if id := cur.id(); id != "" {
			return id
		}
	}
	return ""
}

// Prompt implements agent.Agent. In local mode it hands the session to
// remote mode first (see the package documentation); the prompt then goes
// to remote mode. Errors: ErrEnded; the switch failed (local mode is
// started again when it can be); remote mode refused the prompt.
func (a *Agent) Prompt(ctx context.Context, p agent.Prompt) error {
	r := promptReq{ctx: ctx, p: p, reply: make(chan error, 1)}
	select {
	case a.reqs <- r:
	case <-a.done:
		return ErrEnded
	case <-ctx.Done():
		return fmt.Errorf("claude prompt: %w", ctx.Err())
	}
	return <-r.reply
}

// Decide implements agent.Agent: the current mode answers.
func (a *Agent) Decide(ctx context.Context, callID string, d agent.Verdict) error {
	cur, err := a.current()
	if err != nil {
		return err
	}
	return cur.agent.Decide(ctx, callID, d)
}

// AnswerQuestion implements agent.Agent: the current mode answers.
func (a *Agent) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	cur, err := a.current()
	if err != nil {
		return err
	}
	return cur.agent.AnswerQuestion(ctx, callID, answers)
}

// Interrupt implements agent.Agent: the current mode's turn is
// interrupted.
func (a *Agent) Interrupt(ctx context.Context) error {
	cur, err := a.current()
	if err != nil {
		return err
	}
	return cur.agent.Interrupt(ctx)
}

// Close implements agent.Agent: it stops the current mode, restores the
// terminal, and waits until every event was delivered (events nobody reads
// any more are discarded) and Events is closed. Safe to call more than once.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		go func() { // the runner may have stopped reading
			for range a.q.Out() {
			}
		}()
		close(a.stop)
	})
	<-a.done
	a.q.Wait()
	return a.closeErr
}

func (a *Agent) current() (*instance, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mode == ModeEnded || a.cur == nil {
		return nil, ErrEnded
	}
	return a.cur, nil
}

func (a *Agent) setCurrent(in *instance, m Mode) {
	a.mu.Lock()
	if m != a.mode {
		close(a.changed)
		a.changed = make(chan struct{})
	}
	a.cur, a.mode = in, m
	a.mu.Unlock()
}

// modeWatch returns the mode and a channel closed when it next changes.
func (a *Agent) modeWatch() (Mode, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.mode, a.changed
}

// SwitchMode moves the session to mode to ("local" or "remote"), as a
// prompt from another device (to remote) or a key press (to local) would,
// for the reference app's switch RPC. It reports whether the session is in
// that mode afterwards: false for another mode name, a failed switch (local
// mode before Claude reported its session id cannot be handed over), or an
// ended session.
func (a *Agent) SwitchMode(ctx context.Context, to string) (bool, error) {
	m := Mode(to)
	if m != ModeLocal && m != ModeRemote {
		return false, nil
	}
	r := switchReq{ctx: ctx, to: m, reply: make(chan bool, 1)}
	select {
	case a.switches <- r:
	case <-a.done:
		return false, ErrEnded
	case <-ctx.Done():
		return false, fmt.Errorf("claude switch: %w", ctx.Err())
	}
	return <-r.reply, nil
}

// switchTo handles a SwitchMode on the controller; false when the session
// ended.
func (a *Agent) switchTo(r switchReq) (alive bool) {
	cur := a.cur
	switch {
	case cur.mode == r.to:
		r.reply <- true
	case r.to == ModeRemote:
		err := a.toRemote(r.ctx)
		if err != nil {
			a.log.Warn().Err(err).Msg("switch to remote mode from another device failed")
		}
		r.reply <- err == nil
		return !errors.Is(err, ErrEnded)
	default:
		a.log.Info().Msg("switch from another device: claude goes back to local mode")
		ok := a.toLocal("switch from another device", nil)
		r.reply <- ok
		return ok
	}
	return true
}

// control is the one goroutine that switches modes: prompts, key presses,
// a mode ending by itself and Close are handled one at a time.
func (a *Agent) control() {
	defer close(a.done)
	defer a.q.Close()
	for {
		cur := a.cur // only this goroutine changes it
		var keys <-chan keyResult
		var sigs <-chan os.Signal
		if a.keys != nil {
			keys, sigs = a.keys.keys, a.keys.sigs
		}
		select {
		case r := <-a.reqs:
			err := a.prompt(r)
			r.reply <- err
			if errors.Is(err, ErrEnded) {
				return
			}
		case r := <-a.switches:
			if !a.switchTo(r) {
				return
			}
		case k := <-keys:
			if k.err != nil {
				// No key will come (input closed): remote mode goes on
				// until it ends or Close.
				a.log.Warn().Err(k.err).Msg("terminal input ended; claude stays in remote mode")
				a.stopKeys()
				continue
			}
			typed, ok := a.space(cur, k.key)
			if !ok {
				continue
			}
			a.log.Info().Int("typeahead", len(typed)).Msg("space pressed twice: claude goes back to local mode")
			if !a.toLocal("key press", typed) {
				return
			}
		case sig := <-sigs:
			a.log.Info().Str("signal", sig.String()).Msg("signal in remote mode: ending the session")
			a.end()
			return
		case <-cur.fwd:
			if cur.mode == ModeLocal {
				a.log.Info().Msg("claude ended in local mode: the session ends")
				// Only a Claude that never started its session failed: one
				// that ran ends however its person quits it (Ctrl-C while
				// it restarts after remote mode exits non-zero).
				if res, _ := cur.loc.Result(); res.State != nil && res.Signal == nil && a.sessionID == "" && cur.id() == "" {
					a.exitCode = res.State.ExitCode() // -1 when a signal killed it
				}
				a.end()
				return
			}
			a.log.Warn().Msg("claude's remote mode ended by itself: back to local mode")
			fmt.Fprintf(a.notice, noticeBack+"\r\n", "claude exited")
			if !a.toLocal("remote mode ended", nil) {
				return
			}
		case <-a.stop:
			a.end()
			return
		}
	}
}

// space follows the keys read in remote mode: a space asks for a second one
// (one line on the terminal), a second space within ConfirmWindow reports
// ok and the bytes typed after it; Ctrl-C, what a person presses to stop
// what runs, reports ok at once; every other key is ignored and cancels a
// first space.
func (a *Agent) space(cur *instance, key []byte) (typed []byte, ok bool) {
	for i, b := range key {
		if b == 0x03 {
			a.spaceAt = time.Time{}
			return append([]byte(nil), key[i+1:]...), true
		}
		if b != ' ' {
			a.spaceAt = time.Time{}
			continue
		}
		now := time.Now()
		if !a.spaceAt.IsZero() && now.Sub(a.spaceAt) <= a.opts.ConfirmWindow {
			a.spaceAt = time.Time{}
			return append([]byte(nil), key[i+1:]...), true
		}
		a.spaceAt = now
		cur.mu.Lock()
		running := cur.turnOpen || cur.awaiting
		cur.mu.Unlock()
		line := NoticeConfirm
		if running {
			line = strings.TrimSuffix(line, ".") + NoticeConfirmTurn + "."
		}
		fmt.Fprint(a.notice, line+"\r\n")
	}
	return nil, false
}

// prompt sends a prompt, switching to remote mode first when in local mode.
func (a *Agent) prompt(r promptReq) error {
	cur := a.cur
	if cur.mode == ModeLocal {
		select {
		case <-cur.fwd: // the person ended Claude just now
			a.log.Info().Msg("claude ended in local mode: the session ends")
			a.end()
			return fmt.Errorf("claude prompt: %w", ErrEnded)
		default:
		}
		if err := a.toRemote(r.ctx); err != nil {
			return err
		}
		cur = a.cur
	}
	cur.mu.Lock()
	cur.awaiting = true
	cur.mu.Unlock()
	if err := cur.agent.Prompt(r.ctx, r.p); err != nil {
		cur.mu.Lock()
		cur.awaiting = false
		cur.mu.Unlock()
		return err
	}
	return nil
}

// toRemote hands the session from local to remote mode. On failure local
// mode is started again (resuming the same Claude session) when it can be;
// ErrEnded when it cannot.
func (a *Agent) toRemote(ctx context.Context) error {
	loc := a.cur
	start := time.Now()
	h, err := loc.loc.Handoff(ctx)
	<-loc.fwd
	if err != nil {
		a.log.Warn().Err(err).Msg("local mode did not end cleanly")
	}
	if h.SessionID == "" {
		h.SessionID = loc.id()
	}
	if h.TranscriptPath != "" {
		a.transcript = h.TranscriptPath
	}
	if h.SessionID == "" {
		// Nothing happened yet: local mode starts again as it first did.
		a.log.Warn().Msg("local mode ended before claude reported its session id")
		if !a.startLocal(a.opts.Local) {
			return fmt.Errorf("hand claude to remote mode: %w (%w)", ErrNoClaudeSession, ErrEnded)
		}
		return fmt.Errorf("hand claude to remote mode: %w", ErrNoClaudeSession)
	}
	a.sessionID = h.SessionID
	ro := a.opts.Remote
	if a.transcript != "" && !hasTranscript(a.transcript) {
		// Nothing was typed yet: Claude has not written the session, and
		// cannot resume it. Remote mode starts it, under the same id.
		ro.SDK.Args = slices.Concat([]string{"--session-id", h.SessionID}, ro.SDK.Args)
	} else {
		ro.SDK.Args = withResume(h.SessionID, ro.SDK.Args)
	}
	rctx, cancel := context.WithCancel(a.ctx)
	rem, err := remote.Start(rctx, ro)
	if err != nil {
		cancel()
		a.log.Error().Err(err).Msg("remote mode could not start; back to local mode")
		if !a.startLocal(a.localOptions(h.SessionID, h.Offset, a.transcript == "" || hasTranscript(a.transcript))) {
			return fmt.Errorf("hand claude to remote mode: %w (%w)", err, ErrEnded)
		}
		return fmt.Errorf("hand claude to remote mode: %w", err)
	}
	in := a.attach(ModeRemote, rem, cancel)
	in.mu.Lock()
	if in.sessionID == "" {
		in.sessionID = h.SessionID
	}
	in.mu.Unlock()
	a.setCurrent(in, ModeRemote)
	// Local mode gave the terminal back when Handoff returned.
	fmt.Fprint(a.notice, NoticeRemote+"\r\n")
	a.terminal(ModeRemote)
	if a.keys, err = waitKey(a.opts.Local.In); err != nil {
		a.log.Warn().Err(err).Msg("cannot wait for a key on the terminal")
		a.keys = nil
	}
	a.log.Info().Str("from", string(ModeLocal)).Str("to", string(ModeRemote)).Str("claudeSession", h.SessionID).
		Int64("transcriptOffset", h.Offset).Dur("took", time.Since(start)).Msg("claude switched to remote mode (prompt from another device)")
	return nil
}

// toLocal hands the session from remote back to local mode; false when
// local mode cannot be started (the session has ended then). typed is
// non-nil when the person took control back: it and the keys typed while
// remote mode stops are given to the new local Claude.
func (a *Agent) toLocal(why string, typed []byte) bool {
	rem := a.cur
	start := time.Now()
	a.stopRemote(rem, true)
	// The keys are read until remote mode has stopped (the terminal stays
	// raw meanwhile: nothing typed is echoed or lost).
	if left := a.stopKeys(); typed != nil {
		typed = append(typed, left...)
	}
	sid := rem.id()
	if sid == "" {
		sid = a.sessionID
	}
	a.sessionID = sid
	var offset int64
	resume := true
	if a.transcript != "" {
		// A resumed session keeps its transcript, or (when Claude gave it a
		// new id) gets one next to it.
		path := filepath.Join(filepath.Dir(a.transcript), sid+".jsonl")
		a.transcript = path
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			offset = fi.Size()
		} else {
			resume = false // remote mode wrote nothing: nothing to resume
		}
	}
	lo := a.localOptions(sid, offset, resume)
	lo.Typeahead = typed
	if !a.startLocal(lo) {
		return false
	}
	a.log.Info().Str("from", string(ModeRemote)).Str("to", string(ModeLocal)).Str("why", why).Str("claudeSession", sid).Int("typeahead", len(typed)).
		Int64("transcriptOffset", offset).Dur("took", time.Since(start)).Msg("claude switched to local mode")
	return true
}

// stopRemote ends remote mode and waits until all its events were queued.
// With interrupt, a running turn is interrupted first and its end awaited.
func (a *Agent) stopRemote(rem *instance, interrupt bool) {
	rem.mu.Lock()
	open := rem.turnOpen
	if open {
		select { // a signal left by an earlier turn
		case <-rem.turnEnded:
		default:
		}
	}
	rem.mu.Unlock()
	if interrupt && open {
		ctx, cancel := context.WithTimeout(context.Background(), a.opts.InterruptWait)
		if err := rem.agent.Interrupt(ctx); err != nil {
			a.log.Warn().Err(err).Msg("interrupt the remote turn")
		}
		select {
		case <-rem.turnEnded:
			a.log.Info().Msg("the remote turn ended after the interrupt")
		case <-rem.fwd:
			a.log.Info().Msg("remote mode ended after the interrupt")
		case <-ctx.Done():
			a.log.Warn().Dur("waited", a.opts.InterruptWait).Msg("the interrupted remote turn did not end; stopping claude")
		}
		cancel()
	}
	// Ending the process group (not remote.Agent.Close, which would discard
	// events this forwarder has not read yet) lets every event through:
	// the stream closes after the exit is reported.
	rem.cancel()
	<-rem.fwd
	if err := rem.agent.Close(); err != nil {
		a.log.Debug().Err(err).Msg("remote mode closed")
	}
	rem.mu.Lock()
	awaiting := rem.awaiting
	rem.mu.Unlock()
	if awaiting {
		// A prompt was sent but no turn started: end it, so the runner does
		// not wait for it forever.
		a.q.Push(&agent.TurnEnded{Reason: agent.TurnAgentExited, Error: "claude's remote mode ended before the prompt's turn started"})
	}
}

// localOptions are the options of a later local start: with resume,
// resuming sid from offset; else a new Claude session with the id sid. The
// terminal's keys wait until the new Claude reads them (the person may be
// typing already).
func (a *Agent) localOptions(sid string, offset int64, resume bool) local.Options {
	lo := a.opts.Local
	lo.HoldInput, lo.Typeahead = true, nil
	lo.SessionID, lo.Resume, lo.ResumeOffset = "", sid, offset
	if !resume {
		lo.SessionID, lo.Resume, lo.ResumeOffset = sid, "", 0
	}
	return lo
}

// terminal tells Options.Terminal who owns the terminal.
func (a *Agent) terminal(m Mode) {
	if a.opts.Terminal != nil {
		a.opts.Terminal(m)
	}
}

// startLocal starts local mode again. On failure the session ends (false).
func (a *Agent) startLocal(lo local.Options) bool {
	a.terminal(ModeLocal)
	loc, err := local.Start(a.ctx, lo)
	if err != nil {
		a.log.Error().Err(err).Msg("claude could not be started again in local mode: the session ends")
		fmt.Fprintf(a.notice, noticeFailed+"\r\n", err)
		a.setCurrent(nil, ModeEnded)
		a.terminal(ModeEnded)
		return false
	}
	a.setCurrent(a.attachLocal(loc), ModeLocal)
	return true
}

// end stops whatever runs; the controller returns next (Events closes).
func (a *Agent) end() {
	a.stopKeys()
	cur := a.cur
	a.setCurrent(nil, ModeEnded)
	defer a.terminal(ModeEnded)
	if cur == nil {
		return
	}
	switch cur.mode {
	case ModeLocal:
		if _, err := cur.loc.Handoff(context.Background()); err != nil {
			a.closeErr = err
		}
		<-cur.fwd
	case ModeRemote:
		a.stopRemote(cur, false)
	}
}

// stopKeys stops reading keys and gives the terminal back; it returns the
// keys read but not handled yet.
func (a *Agent) stopKeys() []byte {
	a.spaceAt = time.Time{}
	if a.keys == nil {
		return nil
	}
	left, err := a.keys.stop()
	if err != nil {
		a.log.Warn().Err(err).Msg("terminal settings")
	}
	a.keys = nil
	return left
}

func (a *Agent) attachLocal(loc *local.Agent) *instance {
	in := a.attach(ModeLocal, loc, func() {})
	in.loc = loc
	return in
}

// attach starts forwarding a mode's events into the queue.
func (a *Agent) attach(m Mode, ag agent.Agent, cancel context.CancelFunc) *instance {
	in := &instance{mode: m, agent: ag, cancel: cancel, fwd: make(chan struct{}), turnEnded: make(chan struct{}, 1)}
	go func() {
		defer close(in.fwd)
		for ev := range ag.Events() {
			in.observe(ev)
			a.q.Push(ev)
		}
	}()
	return in
}

// observe follows the root turn and Claude's session id.
func (in *instance) observe(ev agent.Event) {
	if ev.Base().Session != "" {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	switch e := ev.(type) {
	case *agent.TurnStarted:
		in.turnOpen, in.awaiting = true, false
	case *agent.TurnEnded:
		in.turnOpen, in.awaiting = false, false
		select {
		case in.turnEnded <- struct{}{}:
		default:
		}
	case *agent.SessionInfo:
		if e.ProviderSessionID != "" {
			in.sessionID = e.ProviderSessionID
		}
	}
}

func (in *instance) id() string {
	if in.loc != nil {
		if id := in.loc.SessionID(); id != "" {
			return id
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.sessionID
}

// hasTranscript reports whether Claude has written the session's
// transcript (it does so from the first prompt on): a session without one
// cannot be resumed.
func hasTranscript(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// withResume returns args with "--resume id" in front.
func withResume(id string, args []string) []string {
	return slices.Concat([]string{"--resume", id}, args)
}
