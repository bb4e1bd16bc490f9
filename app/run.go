package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/happy-dev/happy/app/remotefs"
	"github.com/happy-dev/happy/internal/queue"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/control"
	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// Metadata is the relay session metadata, with the reference's field names
// so the reference apps can list our sessions (docs/ARCHITECTURE.md,
// section "Session metadata"). LifecycleStateSince is Unix ms.
type Metadata struct {
	Path           string   `json:"path"`
	Host           string   `json:"host"`
	OS             string   `json:"os"`
	Version        string   `json:"version"`
	HomeDir        string   `json:"homeDir"`
	HappyHomeDir   string   `json:"happyHomeDir"`
	MachineID      string   `json:"machineId,omitempty"`
	Flavor         string   `json:"flavor"`
	Summary        *Summary `json:"summary,omitempty"`
	LifecycleState string   `json:"lifecycleState"`
	// LifecycleStateSince is when LifecycleState was set (Unix ms).
	LifecycleStateSince int64  `json:"lifecycleStateSince,omitempty"`
	StartedBy           string `json:"startedBy"`
	HostPid             int    `json:"hostPid"`
	ClaudeSessionID     string `json:"claudeSessionId,omitempty"`
	CodexThreadID       string `json:"codexThreadId,omitempty"`
	// OneShot marks a session that runs one prompt only (-p): other
	// devices cannot send it another.
	OneShot bool `json:"oneShot,omitempty"`
	// Yolo marks a session started with --yolo: every tool call was
	// allowed without asking.
	Yolo bool `json:"yolo,omitempty"`
	// PermissionMode is the permission mode the session was started with,
	// in the reference app's names (SessionOptions.PermissionMode).
	PermissionMode string `json:"permissionMode,omitempty"`
	// LastActivityAt is the session's last activity before it was archived
	// (Unix ms), written by the archive so that archiving, which is itself
	// a write, does not make an old session look recent.
	LastActivityAt int64 `json:"lastActivityAt,omitempty"`
}

// Summary is the session's one-line summary in the metadata: its title
// (Text) and when it was set (UpdatedAt, Unix ms).
type Summary struct {
	Text      string `json:"text"`
	UpdatedAt int64  `json:"updatedAt"`
}

// NewTag returns a random UUID (version 4) naming a new relay session.
func NewTag() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new session tag: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// SessionOptions describe a session to run.
type SessionOptions struct {
	Flavor            string // agent name: "claude", "codex", …
	Dir               string // the agent's working folder
	Prompt            string // first prompt (-p), "" for none
	OneShot           bool   // end after the first turn
	PermissionTimeout time.Duration
	// IdleTimeout interrupts a turn whose agent stayed silent this long
	// while no tool runs and nobody is asked (session.Options.IdleTimeout;
	// 0 off).
	IdleTimeout time.Duration
	// Recover, when set, restarts a hung agent in its own session when
	// the idle watch trips (--recover; session.Options.Recover): the
	// replaced agent is closed, then Recover starts one that resumes the
	// agent's own session id (the one the metadata records:
	// claudeSessionId, codexThreadId, acpSessionId). The agent it returns
	// is closed when the run ends.
	Recover func(ctx context.Context, providerSessionID string) (agent.Agent, error)
	// CanRecover says whether Recover can work now (session.Options.CanRecover).
	CanRecover func() error
	Rules      []mapper.PermissionRule
	StartedBy  string // "terminal" | "daemon" (anything else is written as terminal)
	ProviderID string // "anthropic", "openai", …
	// OnCreated is called once the relay session exists, with its id.
	OnCreated func(id string)
	// WaitCreated, when positive, bounds a wait for the relay session to
	// exist before the agent starts (RunSessionWith).
	WaitCreated time.Duration
	// OnBus sees every bus event (terminal rendering).
	OnBus func([]mapper.BusEvent)
	// Events, when set, receives every bus event of the session (the local
	// event API's hub: StartEvents). Publishing never blocks the runner.
	Events *localapi.Hub
	// OnTranscript, when set, sees the whole transcript after every change
	// (on the runner goroutine; it costs a copy of the transcript each
	// time, for --output stream-json).
	OnTranscript func(mapper.Transcript)
	// OnWaiting is called when a tool call starts waiting for a person
	// (session.Options.OnWaiting).
	OnWaiting func(callID string)
	// Resume, when set, continues an ended session (happy resume) instead
	// of opening a new one: see PrepareResume.
	Resume *Resume
	// Yolo records in the metadata that every tool call is allowed
	// without asking (the rule itself is in Rules).
	Yolo bool
	// PermissionMode is the agent's permission mode the session was
	// started with, in the reference app's names (Claude's default,
	// acceptEdits, plan, bypassPermissions; Codex's default, read-only,
	// safe-yolo, yolo), written to the metadata's permissionMode; "" is
	// default, or with Yolo bypassPermissions (Claude) or yolo.
	PermissionMode string
	// FlushTimeout bounds the wait, at the end, for the relay to
	// acknowledge every version; endTimeout when 0.
	FlushTimeout time.Duration
	// Local, when set, delivers the prompts typed at this terminal (a
	// PromptLine); they queue behind the running turn like prompts from
	// the relay. When it closes, the session ends as soon as no turn runs
	// and no prompt waits (session.ControlEnd).
	Local <-chan agent.Prompt
}

// SessionResult is how a session run ended.
type SessionResult struct {
	session.Result
	SessionID string // relay session id ("" when the relay never answered)
	// Undelivered is how many record versions the relay had not
	// acknowledged when the run ended; they stay in the outbox and the
	// next happy on this home sends them.
	Undelivered int
	Tag         string
	FinalText   string // text of the last assistant message
	Transcript  mapper.Transcript
}

// RunSession opens a relay session for an agent that is already started,
// runs the session runner until it ends, and closes everything but the
// agent (the caller closes it). Prompts written to the relay by other
// devices and the control RPCs (permission, answer, abort) reach the agent.
func RunSession(ctx context.Context, env Env, conn *Conn, ag agent.Agent, opts SessionOptions) (SessionResult, error) {
	return RunSessionWith(ctx, env, conn, opts, func(context.Context, string) (agent.Agent, error) { return callerCloses{ag}, nil })
}

// callerCloses leaves closing the agent to whoever started it.
type callerCloses struct{ agent.Agent }

func (callerCloses) Close() error { return nil }

// ExitDetail forwards agent.ExitExplainer to the wrapped agent.
func (c callerCloses) ExitDetail() string {
	if ex, ok := c.Agent.(agent.ExitExplainer); ok {
		return ex.ExitDetail()
	}
	return ""
}

// StartFunc starts the agent of a session; tag is the session's tag (the
// relay session's stable name, usable for per-session state folders).
type StartFunc func(ctx context.Context, tag string) (agent.Agent, error)

// RunSessionWith is RunSession for an agent started once the relay session
// is open: with opts.WaitCreated, OnCreated runs before start (so a notice
// can be printed before an interactive agent takes the terminal). The
// agent start returns is closed when the run ends.
//
// Whatever ends the run (the agent's exit or crash, ctx cancelled by a
// signal, an agent that cannot start), the session is ended on the relay
// before RunSessionWith returns: lifecycleState "ended", session-end, and
// every version acknowledged, each bounded (docs/ARCHITECTURE.md, section
// "A session's life"). What cannot reach the relay then is finished by the
// next happy on the same home.
func RunSessionWith(ctx context.Context, env Env, conn *Conn, opts SessionOptions, start StartFunc) (SessionResult, error) {
	var tag string
	var err error
	if opts.Resume != nil {
		tag = opts.Resume.Tag
	} else if tag, err = NewTag(); err != nil {
		return SessionResult{}, err
	}
	res := SessionResult{Tag: tag}
	meta, err := json.Marshal(buildMetadata(env, opts))
	if err != nil {
		return res, err
	}
	// CheckRecord: a row replayed under another localId never reaches the
	// runner as a prompt (docs/ARCHITECTURE.md, "Relay envelope and versions").
	sess, err := conn.Client.OpenSession(ctx, relay.SessionOptions{Tag: tag, Metadata: meta, CheckRecord: session.CheckRecord})
	if err != nil {
		return res, fmt.Errorf("%w: open relay session: %w", ErrRelay, err)
	}
	defer sess.Close()
	lc := beginLifecycle(ctx, env, sess, opts.FlushTimeout)
	if opts.Resume != nil {
		// The session exists: it is running again, in this process.
		f := lifecycleFields(LifecycleRunning, env.now())
		f["hostPid"], _ = json.Marshal(os.Getpid())
		lc.meta.set(f)
	}
	// end runs on every return below: the relay must learn that the
	// session is over, however it ended.
	end := func() {
		res.SessionID, res.Undelivered = lc.end(ctx)
	}

	created := false
	if opts.WaitCreated > 0 {
		wctx, wcancel := context.WithTimeout(ctx, opts.WaitCreated)
		id, err := sess.WaitCreated(wctx)
		wcancel()
		if err == nil {
			reportSpawned(id)
		}
		if err == nil && opts.OnCreated != nil {
			opts.OnCreated(id)
			created = true
		}
	}
	ag, err := start(ctx, tag)
	if err != nil {
		end()
		return res, err
	}
	defer ag.Close()
	var recovered []agent.Agent // agents Recover started, closed at the end

	rcfg := mapper.Config{SessionID: tag, ProjectID: opts.Dir, Directory: opts.Dir,
		Agent: "build", ProviderID: opts.ProviderID, Rules: opts.Rules, Source: opts.Flavor}
	if opts.Resume != nil {
		rcfg.Title, rcfg.FirstPosition = opts.Resume.Title, opts.Resume.FirstPosition
	}
	red := mapper.NewReducer(rcfg)
	sink := session.NewSink(sess, red)
	cw := startCompat(env, sess, sink, red.RootID(), opts.Flavor)
	titles := &titleWatcher{rootID: red.RootID(), w: lc.meta, now: env.now}
	if opts.Resume != nil {
		titles.last = opts.Resume.Title
	}
	push := startPusher(env, conn.API, sess, opts.Dir, red.RootID(), titles.last)
	defer push.stop()
	live := startLive(sess)
	defer live.stop()
	onBus := func(evs []mapper.BusEvent) {
		live.observe(evs)
		push.observe(evs)
		titles.observe(evs)
		if opts.Events != nil {
			opts.Events.Publish(evs)
		}
		if opts.OnBus != nil {
			opts.OnBus(evs)
		}
		if opts.OnTranscript != nil {
			opts.OnTranscript(red.Transcript())
		}
	}
	note := newNotifier(env, opts)
	defer note.wait()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	onActivity := func(thinking bool) {
		sess.SetThinking(thinking)
		note.activity(thinking)
		if !thinking && runCtx.Err() == nil {
			push.turnDone() // the turn ended and nothing is queued
		}
	}
	onWaiting := func(callID string) {
		note.waiting(callID)
		push.waiting(callID)
		if opts.OnWaiting != nil {
			opts.OnWaiting(callID)
		}
	}
	ids := providerSessionWatcher(opts.Flavor, lc.meta)
	if opts.Resume != nil {
		ids.last = opts.Resume.ProviderSessionID
	}
	var recoverAgent func(context.Context, agent.Agent) (agent.Agent, error)
	if opts.Recover != nil {
		recoverAgent = func(ctx context.Context, old agent.Agent) (agent.Agent, error) {
			return restartAgent(ctx, env, old, ids.last, opts.Recover, &recovered)
		}
	}
	defer func() {
		for _, a := range recovered {
			_ = a.Close()
		}
	}()
	runner := session.NewRunner(session.Options{
		Agent: ag, Reducer: red, Sink: sink, Rules: opts.Rules,
		PermissionTimeout: opts.PermissionTimeout, OneShot: opts.OneShot, IdleTimeout: opts.IdleTimeout,
		Recover: recoverAgent, CanRecover: opts.CanRecover,
		Log: env.Log, OnBus: onBus, Now: env.Now, OnActivity: onActivity,
		OnEvent: ids.observe, OnWaiting: onWaiting,
		Attachments: newBlobStore(conn.API, sess), OnFlushFailing: outboxNotice(env.Stderr),
	})

	if opts.Events != nil {
		// GET /status: what the session is doing (happy doctor SESSION).
		root := red.RootID()
		opts.Events.SetStatus(root, func() localapi.AgentStatus {
			return agentStatus(runner.Status(), root, sess.ID(), opts.Flavor, env.now())
		})
		defer opts.Events.SetStatus(root, nil)
	}
	if opts.Resume == nil {
		// The root session is on the relay before the first prompt, so
		// another device can send one at once (happy send waits for it),
		// whatever the agent says or does not say at start.
		evs := red.Apply(&agent.SessionInfo{})
		sink.Observe(evs)
		onBus(evs)
	}
	dialect := AppCompatEnabled(env)
	// Refusals reach the runner in the order they happened, and the
	// socket that reported one never waits for the runner.
	refusals := queue.New[relay.Refused]()
	defer refusals.Close()
	sess.OnRefused(func(r relay.Refused) { refusals.Push(r) })
	go func() {
		for r := range refusals.Out() {
			if runner.Control(runCtx, session.ControlRefused{Dropped: refusedDropped(r)}) != nil {
				return
			}
		}
	}()
	registerControl(runCtx, sess, runner, dialect)
	release := registerAppControl(runCtx, env, sess, runner, ag, opts.Dir, cancel, dialect)
	defer release()
	var echo func(string)
	if cw != nil {
		echo = cw.ExpectEcho
	}
	go receivePrompts(runCtx, env, sess, runner, echo, dialect)
	if opts.Local != nil {
		go localPrompts(runCtx, env, opts.Local, runner)
	}
	// The notice of the relay session may come after the agent is gone
	// (an agent that exits at once): it is waited for until the end has
	// flushed, which creates the session, so it is never lost.
	notified := make(chan struct{})
	notifyCtx, notifyCancel := context.WithCancel(context.WithoutCancel(runCtx))
	defer notifyCancel()
	if created {
		close(notified)
	} else {
		go func() {
			defer close(notified)
			id, err := sess.WaitCreated(notifyCtx)
			if err == nil {
				reportSpawned(id)
			}
			if err == nil && opts.OnCreated != nil {
				opts.OnCreated(id)
			}
		}()
	}
	if opts.Prompt != "" {
		if err := runner.Control(runCtx, session.ControlPrompt{Prompt: agent.Prompt{Text: opts.Prompt}}); err != nil {
			end()
			return res, err
		}
	}
	rr, runErr := runner.Run(runCtx)
	if cw != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), compatCloseTimeout)
		closeCompat(cctx, env, cw)
		if err := cw.Flush(cctx); err != nil {
			env.Log.Warn().Err(err).Msg("last legacy records not queued")
		}
		ccancel()
	}
	res.Result = rr
	res.Transcript = red.Transcript()
	res.FinalText = finalText(res.Transcript)
	cancel()
	end()
	notifyCancel()
	<-notified
	logUsage(env)
	return res, runErr
}

// lifecycle is the relay side of one running session's life: the live
// record in the outbox, the metadata writer, and the end.
type lifecycle struct {
	env     Env
	sess    *relay.Session
	meta    *metaWriter
	once    sync.Once
	id      string
	pending int
	timeout time.Duration
}

// beginLifecycle marks the session live in the outbox (so a crash leaves an
// orphan the next happy settles) and starts its metadata writer. The end is
// bounded by timeout (endTimeout when 0).
func beginLifecycle(ctx context.Context, env Env, sess *relay.Session, timeout time.Duration) *lifecycle {
	if err := sess.MarkLive(ctx); err != nil {
		env.Log.Warn().Err(err).Msg("session not marked live; a crash would leave it running")
	}
	if timeout <= 0 {
		timeout = endTimeout
	}
	return &lifecycle{env: env, sess: sess, meta: startMetaWriter(ctx, sess, env.Log), timeout: timeout}
}

// endTimeout is the default bound of the whole end of a session (metadata,
// session-end, the outbox flush): --flush-timeout's default.
const endTimeout = 10 * time.Second

// end waits until the relay acknowledged every version, then writes
// lifecycleState "ended" and sends session-end, all within the lifecycle's
// timeout of ctx without its cancellation; once all of it succeeded the
// live record goes. When versions are left over the session is not marked
// ended: the next happy on this home sends them and then ends it (an
// orphan), so a reader is never told the session ended before its last row. It returns the relay session id ("" when the relay never answered)
// and how many versions the relay has not acknowledged (they stay in the
// outbox for the next happy on this home, which is said on Env.Stderr).
func (l *lifecycle) end(ctx context.Context) (string, int) {
	l.once.Do(func() {
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
		defer cancel()
		// Every version first: the end is published only once the relay
		// holds every row of the session, so no reader is told "ended"
		// before the last row (docs/ARCHITECTURE.md, "A session's life").
		flushErr := l.sess.Flush(ectx)
		if flushErr != nil {
			l.env.Log.Warn().Err(flushErr).Msg("not every version reached the relay yet; they stay in the outbox, and the session is not marked ended until they land")
			st := l.sess.Stats()
			l.pending = max(int(st.Pending), 1)
			if l.env.Stderr != nil {
				last := ""
				if st.LastError != "" {
					last = " (last error: " + st.LastError + ")"
				}
				fmt.Fprintf(l.env.Stderr, "happy: %d version(s) of the transcript did not reach the relay within %s%s; they are kept and sent the next time happy runs on this home, which then ends the session\n",
					l.pending, l.timeout, last)
			}
			l.id = l.sess.ID()
			return
		}
		l.meta.set(lifecycleFields(LifecycleEnded, l.env.now()))
		metaErr := l.meta.flush(ectx)
		if metaErr != nil {
			l.env.Log.Warn().Err(metaErr).Msg("update lifecycle state")
		}
		if err := l.sess.End(ectx); err != nil {
			l.env.Log.Warn().Err(err).Msg("session-end not sent")
		}
		if metaErr == nil {
			if err := l.sess.MarkEnded(ectx); err != nil {
				l.env.Log.Warn().Err(err).Msg("live record not cleared; the next happy settles the session again")
			}
		}
		l.id = l.sess.ID()
	})
	return l.id, l.pending
}

// logUsage logs happy's own CPU time and peak memory (not the agent's: it
// is another process), for diagnostics and measurements.
func logUsage(env Env) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return
	}
	env.Log.Info().Int64("cpu_user_ms", ru.Utime.Nano()/1e6).Int64("cpu_system_ms", ru.Stime.Nano()/1e6).
		Int64("max_rss_kib", ru.Maxrss).Msg("session usage")
}

func buildMetadata(env Env, opts SessionOptions) Metadata {
	host, _ := os.Hostname()
	uh, _ := os.UserHomeDir()
	machineID, _ := settings.EnsureMachineID(env.Home.Settings())
	// The reference app's schema takes daemon or terminal only (one
	// other value makes it discard the whole metadata).
	startedBy := opts.StartedBy
	if startedBy != "daemon" {
		startedBy = "terminal"
	}
	return Metadata{
		Path: opts.Dir, Host: host, OS: runtime.GOOS, Version: buildinfo.Version, HomeDir: uh,
		HappyHomeDir: env.Home.Path(), MachineID: machineID, Flavor: opts.Flavor,
		LifecycleState: LifecycleRunning, LifecycleStateSince: env.now().UnixMilli(), StartedBy: startedBy, HostPid: os.Getpid(),
		OneShot: opts.OneShot, Yolo: opts.Yolo, PermissionMode: metadataPermissionMode(opts),
	}
}

// metadataPermissionMode is the permissionMode of a session's metadata:
// the mode it was started with, else what --yolo is called in the
// reference app for its agent, else default.
func metadataPermissionMode(opts SessionOptions) string {
	switch {
	case opts.PermissionMode != "":
		return opts.PermissionMode
	case opts.Yolo && opts.Flavor == "claude":
		return "bypassPermissions"
	case opts.Yolo:
		return "yolo"
	}
	return "default"
}

// AppShapes are the params the reference app sends, without an envelope,
// for the session methods it calls (docs/ARCHITECTURE.md, "The reference
// app" and "Trust"): with the appCompat setting they are accepted in that
// shape only, each ciphertext once. killSession (params {}) is not among
// them: {} cannot be told from other ciphertexts the relay holds, so it
// takes sealed envelopes only.
var AppShapes = map[string]control.Shape{
	session.MethodPermission:        {Required: []string{"id", "approved"}, Optional: []string{"reason", "mode", "allowTools", "updatedInput", "decision"}},
	session.MethodAbort:             {Required: []string{"reason"}},
	session.MethodCommunication:     {Required: []string{"id", "kind", "status"}, Optional: []string{"answers"}},
	session.MethodSwitch:            {Required: []string{"to"}},
	remotefs.MethodBash:             {Required: []string{"command"}, Optional: []string{"cwd", "timeout"}},
	remotefs.MethodReadFile:         {Required: []string{"path"}},
	remotefs.MethodWriteFile:        {Required: []string{"path", "content"}, Optional: []string{"expectedHash"}},
	remotefs.MethodListDirectory:    {Required: []string{"path"}},
	remotefs.MethodGetDirectoryTree: {Required: []string{"path"}, Optional: []string{"maxDepth"}},
	remotefs.MethodRipgrep:          {Required: []string{"args"}, Optional: []string{"cwd"}},
}

// refusedDropped is the Dropped record of a refused control input.
func refusedDropped(r relay.Refused) agent.Dropped {
	return agent.Dropped{Source: agent.SourceControl, Kind: r.Method, Reason: agent.DropReason(r.Reason), Detail: agent.CutUTF8(r.Detail, agent.DroppedRawMax)}
}

// registerControl registers the session RPCs that reach the runner;
// permission and abort also in the reference app's dialect when dialect is
// set (the appCompat setting).
func registerControl(ctx context.Context, sess *relay.Session, runner *session.Runner, dialect bool) {
	reg := func(name string, h relay.RPCHandler) {
		if shape, ok := AppShapes[name]; ok && dialect {
			sess.RegisterDialectRPC(name, shape, h)
			return
		}
		sess.RegisterRPC(name, h)
	}
	call := func(c func(reply chan<- error) session.Control) (any, error) {
		reply := make(chan error, 1)
		if err := runner.Control(ctx, c(reply)); err != nil {
			return nil, err
		}
		select {
		case err := <-reply:
			if err != nil {
				return nil, err
			}
			return map[string]any{"ok": true}, nil
		case <-ctx.Done():
			return nil, session.ErrNotRunning
		}
	}
	reg(session.MethodPermission, func(_ context.Context, params json.RawMessage) (any, error) {
		a, err := session.DecodePermission(params)
		if err != nil {
			return nil, err
		}
		return call(func(r chan<- error) session.Control { return session.ControlAnswer{Answer: a, Reply: r} })
	})
	sess.RegisterRPC(session.MethodAnswer, func(_ context.Context, params json.RawMessage) (any, error) {
		q, err := session.DecodeQuestionAnswer(params)
		if err != nil {
			return nil, err
		}
		return call(func(r chan<- error) session.Control { return session.ControlQuestion{Answer: q, Reply: r} })
	})
	reg(session.MethodAbort, func(_ context.Context, _ json.RawMessage) (any, error) {
		return call(func(r chan<- error) session.Control { return session.ControlAbort{Reply: r} })
	})
}

// compatCloseTimeout bounds the last agentState write at the end of a run.
const compatCloseTimeout = 5 * time.Second

// receivePrompts hands prompts other devices wrote to the relay to the
// runner; everything else on the stream is for readers. Every prompt row is
// a control input: it is checked (relay.Session.AcceptPrompt: sealed for
// this session, recent, never used before; the reference app's rows, when
// dialect is set, once per ciphertext) before the runner sees it, and a
// refused one is recorded as Dropped. echo, when set, is told the text of
// each of the reference app's own prompts.
//
// The reference app's file events wait for its next text and go with it
// (session.PromptReader).
func receivePrompts(ctx context.Context, env Env, sess *relay.Session, runner *session.Runner, echo func(string), dialect bool) {
	pr := session.PromptReader{MaxSize: MaxAttachmentSize}
	for inc := range sess.Receive() {
		if inc.Err != nil {
			env.Log.Warn().Err(inc.Err).Int64("seq", inc.Seq).Msg("relay message not read (it does not decrypt, or is not the record its localId names)")
			continue
		}
		if ctl, isControl, isDialect := promptControl(inc.Plaintext); isControl {
			if err := sess.AcceptPrompt(inc, ctl, dialect && isDialect); err != nil {
				env.Log.Warn().Err(err).Int64("seq", inc.Seq).Msg("prompt refused")
				continue
			}
		}
		c, ok, err := pr.Read(inc.Plaintext)
		if err != nil {
			env.Log.Warn().Err(err).Int64("seq", inc.Seq).Msg("relay message refused")
			continue
		}
		if !ok {
			continue
		}
		if echo != nil && legacyPrompt(inc.Plaintext) {
			echo(c.Prompt.Text)
		}
		reply := make(chan error, 1)
		c.Key, c.Reply = "relay:"+inc.ID, reply
		if err := runner.Control(ctx, c); err != nil {
			return
		}
		select {
		case err := <-reply:
			if err != nil {
				env.Log.Warn().Err(err).Msg("prompt from the relay")
			}
		case <-ctx.Done():
			return
		}
	}
}

// promptControl tells whether a decrypted row is a control input (a user
// message to the runner) and returns its "control" member: our canonical
// user message ({"kind":"message","info":{"role":"user"},…,"control":…}), or
// a row of the reference app's dialect (isDialect: a legacy user text, or
// one of its file events) which carries none. Rows for readers (assistant
// messages, sessions, todos, legacy agent records) are not control inputs.
func promptControl(plain []byte) (ctl json.RawMessage, isControl, isDialect bool) {
	var head struct {
		Kind    *string               `json:"kind"`
		Role    string                `json:"role"`
		Info    struct{ Role string } `json:"info"`
		Control json.RawMessage       `json:"control"`
	}
	if json.Unmarshal(plain, &head) != nil {
		return nil, false, false
	}
	switch {
	case head.Kind != nil && *head.Kind == session.KindMessage && head.Info.Role == string(mapper.RoleUser):
		return head.Control, true, false
	case head.Kind == nil && head.Role == "user":
		return nil, true, true
	}
	if _, isFile, _ := session.DecodeReferenceFile(plain); isFile {
		return nil, true, true
	}
	return nil, false, false
}

// localPrompts hands the prompts typed at this terminal to the runner, and
// ends the session once idle when the input ends.
func localPrompts(ctx context.Context, env Env, in <-chan agent.Prompt, runner *session.Runner) {
	for {
		select {
		case p, ok := <-in:
			if !ok {
				_ = runner.Control(ctx, session.ControlEnd{})
				return
			}
			reply := make(chan error, 1)
			if err := runner.Control(ctx, session.ControlPrompt{Prompt: p, Reply: reply}); err != nil {
				return
			}
			select {
			case err := <-reply:
				if err != nil {
					env.Log.Warn().Err(err).Msg("prompt typed at the terminal")
				}
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// finalText is the text of the last assistant message of the root session.
func finalText(t mapper.Transcript) string {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if _, ok := t.Messages[i].Info.(*mapper.AssistantMessage); !ok {
			continue
		}
		var parts []string
		for _, p := range t.Messages[i].Parts {
			if tp, ok := p.(*mapper.TextPart); ok && !tp.Synthetic && strings.TrimSpace(tp.Text) != "" {
				parts = append(parts, tp.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// IsRelayError reports whether err means the relay or the credentials
// cannot be used (exit code 3).
func IsRelayError(err error) bool {
	return errors.Is(err, ErrRelay) || errors.Is(err, ErrLoggedOut) || errors.Is(err, relay.ErrUnauthorized)
}
