package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// Metadata is the relay session metadata, with the reference's field names
// so the reference apps can list our sessions (DESIGN.md "Session
// metadata").
type Metadata struct {
	Path            string   `json:"path"`
	Host            string   `json:"host"`
	OS              string   `json:"os"`
	Version         string   `json:"version"`
	HomeDir         string   `json:"homeDir"`
	HappyHomeDir    string   `json:"happyHomeDir"`
	MachineID       string   `json:"machineId,omitempty"`
	Flavor          string   `json:"flavor"`
	Summary         *Summary `json:"summary,omitempty"`
	LifecycleState  string   `json:"lifecycleState"`
	StartedBy       string   `json:"startedBy"`
	HostPid         int      `json:"hostPid"`
	ClaudeSessionID string   `json:"claudeSessionId,omitempty"`
	CodexThreadID   string   `json:"codexThreadId,omitempty"`
}

// Summary is the session's one-line summary in the metadata.
type Summary struct {
	Text      string `json:"text"`
	UpdatedAt int64  `json:"updatedAt"`
}

// Lifecycle states of the metadata.
const (
	LifecycleRunning  = "running"
	LifecycleArchived = "archived"
)

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
	Rules             []mapper.PermissionRule
	StartedBy         string // "terminal" | "daemon" | "ci"
	ProviderID        string // "anthropic", "openai", …
	// OnCreated is called once the relay session exists, with its id.
	OnCreated func(id string)
	// WaitCreated, when positive, bounds a wait for the relay session to
	// exist before the agent starts (RunSessionWith).
	WaitCreated time.Duration
	// OnBus sees every bus event (terminal rendering).
	OnBus func([]mapper.BusEvent)
}

// SessionResult is how a session run ended.
type SessionResult struct {
	session.Result
	SessionID  string // relay session id ("" when the relay never answered)
	Tag        string
	FinalText  string // text of the last assistant message
	Transcript mapper.Transcript
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

// StartFunc starts the agent of a session; tag is the session's tag (the
// relay session's stable name, usable for per-session state folders).
type StartFunc func(ctx context.Context, tag string) (agent.Agent, error)

// RunSessionWith is RunSession for an agent started once the relay session
// is open: with opts.WaitCreated, OnCreated runs before start (so a notice
// can be printed before an interactive agent takes the terminal). The
// agent start returns is closed when the run ends.
func RunSessionWith(ctx context.Context, env Env, conn *Conn, opts SessionOptions, start StartFunc) (SessionResult, error) {
	tag, err := NewTag()
	if err != nil {
		return SessionResult{}, err
	}
	res := SessionResult{Tag: tag}
	meta, err := json.Marshal(buildMetadata(env, opts))
	if err != nil {
		return res, err
	}
	sess, err := conn.Client.OpenSession(ctx, relay.SessionOptions{Tag: tag, Metadata: meta})
	if err != nil {
		return res, fmt.Errorf("%w: open relay session: %w", ErrRelay, err)
	}
	defer sess.Close()

	created := false
	if opts.WaitCreated > 0 {
		wctx, wcancel := context.WithTimeout(ctx, opts.WaitCreated)
		id, err := sess.WaitCreated(wctx)
		wcancel()
		if err == nil && opts.OnCreated != nil {
			opts.OnCreated(id)
			created = true
		}
	}
	ag, err := start(ctx, tag)
	if err != nil {
		return res, err
	}
	defer ag.Close()

	red := mapper.NewReducer(mapper.Config{SessionID: tag, ProjectID: opts.Dir, Directory: opts.Dir,
		Agent: "build", ProviderID: opts.ProviderID, Rules: opts.Rules, Source: opts.Flavor})
	sink := session.NewSink(sess, red)
	runner := session.NewRunner(session.Options{
		Agent: ag, Reducer: red, Sink: sink, Rules: opts.Rules,
		PermissionTimeout: opts.PermissionTimeout, OneShot: opts.OneShot,
		Log: env.Log, OnBus: opts.OnBus, Now: env.Now,
	})

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	registerControl(runCtx, sess, runner)
	go receivePrompts(runCtx, env, sess, runner)
	if !created {
		go func() {
			id, err := sess.WaitCreated(runCtx)
			if err == nil && opts.OnCreated != nil {
				opts.OnCreated(id)
			}
		}()
	}
	if opts.Prompt != "" {
		if err := runner.Control(runCtx, session.ControlPrompt{Prompt: agent.Prompt{Text: opts.Prompt}}); err != nil {
			return res, err
		}
	}
	rr, runErr := runner.Run(runCtx)
	res.Result = rr
	res.Transcript = red.Transcript()
	res.FinalText = finalText(res.Transcript)

	// Leave the relay a complete picture: the lifecycle, session-end, and
	// every version acknowledged (bounded; what is left stays in the outbox).
	endCtx, endCancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer endCancel()
	if err := sess.UpdateMetadata(endCtx, func(cur json.RawMessage) (json.RawMessage, error) {
		var m map[string]any
		if err := json.Unmarshal(cur, &m); err != nil || m == nil {
			m = map[string]any{}
		}
		m["lifecycleState"] = LifecycleArchived
		return json.Marshal(m)
	}); err != nil {
		env.Log.Warn().Err(err).Msg("update lifecycle state")
	}
	_ = sess.End(endCtx)
	if err := sess.Flush(endCtx); err != nil {
		env.Log.Warn().Err(err).Msg("not every version reached the relay yet; they stay in the outbox")
		if env.Stderr != nil {
			fmt.Fprintln(env.Stderr, "happy: the relay has not acknowledged everything yet; the rest is kept and sent on the next start")
		}
	}
	res.SessionID = sess.ID()
	logUsage(env)
	return res, runErr
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
	startedBy := opts.StartedBy
	if startedBy == "" {
		startedBy = "terminal"
	}
	return Metadata{
		Path: opts.Dir, Host: host, OS: runtime.GOOS, Version: buildinfo.Version, HomeDir: uh,
		HappyHomeDir: env.Home.Path(), MachineID: machineID, Flavor: opts.Flavor,
		LifecycleState: LifecycleRunning, StartedBy: startedBy, HostPid: os.Getpid(),
	}
}

// registerControl registers the session RPCs that reach the runner.
func registerControl(ctx context.Context, sess *relay.Session, runner *session.Runner) {
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
	sess.RegisterRPC(session.MethodPermission, func(_ context.Context, params json.RawMessage) (any, error) {
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
	sess.RegisterRPC(session.MethodAbort, func(_ context.Context, _ json.RawMessage) (any, error) {
		return call(func(r chan<- error) session.Control { return session.ControlAbort{Reply: r} })
	})
}

// receivePrompts hands prompts other devices wrote to the relay to the
// runner; everything else on the stream is for readers.
func receivePrompts(ctx context.Context, env Env, sess *relay.Session, runner *session.Runner) {
	for inc := range sess.Receive() {
		if inc.Err != nil {
			env.Log.Warn().Err(inc.Err).Int64("seq", inc.Seq).Msg("relay message could not be decrypted")
			continue
		}
		p, ok, err := session.DecodePrompt(inc.Plaintext)
		if err != nil {
			env.Log.Warn().Err(err).Int64("seq", inc.Seq).Msg("relay message refused")
			continue
		}
		if !ok {
			continue
		}
		reply := make(chan error, 1)
		if err := runner.Control(ctx, session.ControlPrompt{Prompt: p, Key: "relay:" + inc.ID, Reply: reply}); err != nil {
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
