//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/adapters/claude/dual"
	"github.com/happy-dev/happy/adapters/claude/local"
	"github.com/happy-dev/happy/adapters/claude/remote"
	"github.com/happy-dev/happy/adapters/claude/sdk"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"

	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/internal/proc"
	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// defaultIdleTimeout is --idle-timeout's default: far beyond a long model
// think, which streams something anyway.
const defaultIdleTimeout = 10 * time.Minute

// agentOptions are the flags every agent command shares.
type agentOptions struct {
	prompt            string
	permissionTimeout time.Duration
	// idleTimeout is --idle-timeout: a turn whose agent stays silent this
	// long (no tool running, nobody asked) is interrupted; 0 never.
	idleTimeout time.Duration
	// recover is --recover: after the idle watch tripped, the agent is
	// restarted in its own session and sent "continue".
	recover          bool
	record           string
	flushTimeout     time.Duration
	output           string
	yolo             bool
	allow, deny, ask []string
	agentArgs        []string
	// eventsListen is --events-listen: the loopback address of the local
	// event API ("" serves none).
	eventsListen string
	// startedBy is "terminal", or "daemon" for a session the daemon
	// started (hidden --started-by; written to the session's metadata).
	startedBy string
	// initialPrompt is the first prompt of a session that goes on after
	// it (hidden --initial-prompt, or read from the descriptor of hidden
	// --initial-prompt-fd: how the daemon passes a spawn's prompt, off the
	// command line).
	initialPrompt   string
	initialPromptFD int
	// resume, when set, continues an ended session in place (happy
	// resume): the agent resumes its own session and the transcript goes
	// on in the same relay session.
	resume *app.ResumeTarget
}

// resumeOpts is the SessionOptions.Resume of the run (nil for a new session).
func (o *agentOptions) resumeOpts() *app.Resume {
	if o.resume == nil {
		return nil
	}
	return &o.resume.Resume
}

// resumeID is the agent's own session id to resume ("" for a new session).
func (o *agentOptions) resumeID() string {
	if o.resume == nil {
		return ""
	}
	return o.resume.ProviderSessionID
}

func (o *agentOptions) bind(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.prompt, "print", "p", "", "run one turn with this prompt in remote mode, print the final answer and exit")
	cmd.Flags().DurationVar(&o.permissionTimeout, "permission-timeout", 10*time.Minute, "reject a permission nobody answered after this long (-p mode; 0 waits forever)")
	cmd.Flags().DurationVar(&o.idleTimeout, "idle-timeout", defaultIdleTimeout, "stalled-agent guard: interrupt a turn whose agent sent nothing for this long while no tool runs and no permission or question waits for a person, saying so in the session (0 never)")
	cmd.Flags().BoolVar(&o.recover, "recover", false, "when --idle-timeout trips, restart the agent resuming its own conversation (Claude --resume, Codex thread/resume, ACP session/resume or load) and send it \"continue\", saying so in the session; at most "+strconv.Itoa(session.DefaultRecoverMax)+" times per prompt; for Claude only with -p or --remote (its terminal UI cannot be restarted in place)")
	cmd.Flags().StringVar(&o.record, "record", "", "write a traffic log of the agent's protocol to `FILE` (for happy replay)")
	cmd.Flags().StringArrayVar(&o.allow, "allow", nil, "permission rule `permission:pattern` to allow (repeatable), e.g. 'bash:git status*'")
	cmd.Flags().StringArrayVar(&o.deny, "deny", nil, "permission rule `permission:pattern` to deny (repeatable)")
	cmd.Flags().StringArrayVar(&o.ask, "ask", nil, "permission rule `permission:pattern` to ask a person for (repeatable)")
	cmd.Flags().DurationVar(&o.flushTimeout, "flush-timeout", 10*time.Second, "at the end, wait this long for the relay to acknowledge the transcript (-p exits 4 when it has not)")
	cmd.Flags().StringVar(&o.output, "output", outputText, "with -p: text (the final answer), json (one result object at the end), stream-json (the flat events as JSON lines while the turn runs)")
	cmd.Flags().StringVar(&o.eventsListen, "events-listen", "", "serve the session's live events (SSE GET /event) and documents (GET /session) on this loopback `ADDR`, e.g. 127.0.0.1:4096; the bearer token is in the happy home's events.token")
	cmd.Flags().BoolVar(&o.yolo, "yolo", false, "allow every tool call without asking (the rule *:* allow; your own deny and ask rules still win); recorded in the session")
	cmd.Flags().StringVar(&o.startedBy, "started-by", "terminal", "who started the session: terminal or daemon (recorded in the session)")
	cmd.Flags().StringVar(&o.initialPrompt, "initial-prompt", "", "first prompt of a session that goes on taking prompts (without -p)")
	cmd.Flags().IntVar(&o.initialPromptFD, "initial-prompt-fd", 0, "read the first prompt (as --initial-prompt) from this inherited file `descriptor` (3 or more) to its end")
	_ = cmd.Flags().MarkHidden("started-by")
	_ = cmd.Flags().MarkHidden("initial-prompt")
	_ = cmd.Flags().MarkHidden("initial-prompt-fd")
}

// startedByValue is the metadata's startedBy: "daemon" or "terminal".
func (o *agentOptions) startedByValue() string {
	if o.startedBy == "daemon" {
		return "daemon"
	}
	return "terminal"
}

// checkFlags refuses, as usage errors, what the agent flags can tell
// before anything starts: an empty -p and a malformed rule flag.
func (o *agentOptions) checkFlags(cmd *cobra.Command) error {
	if cmd.Flags().Changed("print") && strings.TrimSpace(o.prompt) == "" {
		return &usageError{err: errors.New("-p needs a prompt (it is empty)")}
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if o.output != outputText && o.prompt == "" {
		return &usageError{err: fmt.Errorf("--output %s needs -p: it describes one turn", o.output)}
	}
	if err := o.checkEventsFlag(); err != nil {
		return err
	}
	if err := o.checkStartFlags(); err != nil {
		return err
	}
	return o.checkRuleFlags()
}

// checkEventsFlag refuses, as a usage error, an --events-listen address
// that is not on loopback.
func (o *agentOptions) checkEventsFlag() error {
	if o.eventsListen == "" {
		return nil
	}
	if err := localapi.CheckLoopback(o.eventsListen); err != nil {
		return &usageError{err: fmt.Errorf("--events-listen: %w", err)}
	}
	return nil
}

// checkStartFlags refuses a --started-by other than terminal or daemon,
// --initial-prompt together with -p, and a negative --permission-timeout;
// it reads the first prompt of --initial-prompt-fd.
func (o *agentOptions) checkStartFlags() error {
	if o.permissionTimeout < 0 {
		return &usageError{err: fmt.Errorf("--permission-timeout %s: want a duration ≥ 0 (0 waits forever)", o.permissionTimeout)}
	}
	if o.idleTimeout < 0 {
		return &usageError{err: fmt.Errorf("--idle-timeout %s: want a duration ≥ 0 (0 never interrupts)", o.idleTimeout)}
	}
	if o.recover && o.idleTimeout == 0 {
		return &usageError{err: errors.New("--recover restarts an agent the idle watch found silent: it needs --idle-timeout above 0")}
	}
	if o.startedBy != "terminal" && o.startedBy != "daemon" && o.startedBy != "" {
		return &usageError{err: fmt.Errorf("--started-by must be terminal or daemon, got %q", o.startedBy)}
	}
	if o.initialPromptFD != 0 {
		if o.initialPrompt != "" {
			return &usageError{err: errors.New("--initial-prompt and --initial-prompt-fd are two ways of giving one prompt; give one")}
		}
		p, err := app.ReadInitialPrompt(o.initialPromptFD)
		if err != nil {
			return &usageError{err: fmt.Errorf("--initial-prompt-fd: %w", err)}
		}
		o.initialPrompt, o.initialPromptFD = p, 0
	}
	if o.initialPrompt != "" && o.prompt != "" {
		return &usageError{err: errors.New("--initial-prompt is for a session without -p")}
	}
	return nil
}

// connectRun connects an agent command to the relay (creating the local
// account and relay when there is none; its error is exit status 3) and
// starts the local event API when --events-listen is set. Close both
// (es.Close is nil-safe).
func (o *agentOptions) connectRun(ctx context.Context, f *factory, env app.Env) (*app.Conn, *app.EventServer, error) {
	conn, err := app.Connect(ctx, env, app.ConnectOptions{AllowCreate: true})
	if err != nil {
		return nil, nil, &exitError{code: exitRelay, err: err}
	}
	es, err := o.startEvents(f, env)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, es, nil
}

// startEvents starts the local event API when --events-listen is set and
// says on stderr where it listens and where its token is. It runs before
// the agent takes the terminal, so the line never lands inside the
// agent's screen; the log has it too. Close the result (nil-safe).
func (o *agentOptions) startEvents(f *factory, env app.Env) (*app.EventServer, error) {
	if o.eventsListen == "" {
		return nil, nil
	}
	es, err := app.StartEvents(env, o.eventsListen)
	if err != nil {
		return nil, &exitError{code: exitFailed, err: err}
	}
	fmt.Fprintf(f.stderr, "happy: live events on %s/event (bearer token in %s): curl -N -H \"Authorization: Bearer $(cat %s)\" %s/event\n",
		es.Server.URL(), es.TokenPath, es.TokenPath, es.Server.URL())
	return es, nil
}

// events is the SessionOptions.Events of a run (nil without the API).
func events(es *app.EventServer) *localapi.Hub {
	if es == nil {
		return nil
	}
	return es.Hub
}

// checkRuleFlags refuses a malformed --allow, --deny or --ask as a usage
// error.
func (o *agentOptions) checkRuleFlags() error {
	for _, v := range slices.Concat(o.allow, o.deny, o.ask) {
		if _, err := app.ParseRuleFlag(v, mapper.ActionAsk); err != nil {
			return &usageError{err: err}
		}
	}
	return nil
}

// rules loads the config files' rules and appends the flags'.
func (o *agentOptions) rules(f *factory, dir string) ([]mapper.PermissionRule, error) {
	h, err := f.home()
	if err != nil {
		return nil, err
	}
	loaded, err := app.LoadRules(h.Path(), dir)
	if err != nil {
		return nil, &usageError{err: err}
	}
	var rules []mapper.PermissionRule
	if o.yolo {
		// First, so that every rule the user wrote (last match wins)
		// still decides the calls it names.
		rules = append(rules, mapper.PermissionRule{Permission: "*", Pattern: "*", Action: mapper.ActionAllow})
		fmt.Fprintln(f.stderr, "happy: --yolo: every tool call your rules do not deny or ask for is allowed without asking (recorded in the session)")
	}
	rules = append(rules, loaded...)
	for _, set := range []struct {
		vals   []string
		action mapper.Action
	}{{o.allow, mapper.ActionAllow}, {o.deny, mapper.ActionDeny}, {o.ask, mapper.ActionAsk}} {
		for _, v := range set.vals {
			r, err := app.ParseRuleFlag(v, set.action)
			if err != nil {
				return nil, &usageError{err: err}
			}
			rules = append(rules, r)
		}
	}
	return rules, nil
}

// agentRun is what every agent command prepares before it connects and
// starts its agent: the environment for package app, the working folder and
// the permission rules.
type agentRun struct {
	env   app.Env
	dir   string
	rules []mapper.PermissionRule
}

// prepareAgentRun makes happy a child subreaper (orphans of the agent's
// tools come to us, not to a PID 1 that may not reap them; the process groups
// we end are reaped by internal/proc), opens the log named name, and reads
// the working folder and the permission rules.
func prepareAgentRun(f *factory, o *agentOptions, name string) (*agentRun, error) {
	_ = proc.EnableSubreaper()
	log, _ := f.log(name)
	h, err := f.home()
	if err != nil {
		return nil, &exitError{code: exitRelay, err: err}
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if o.resume != nil {
		// A resumed session goes on in its own folder.
		if st, err := os.Stat(o.resume.Dir); err != nil || !st.IsDir() {
			return nil, &exitError{code: exitFailed, err: fmt.Errorf("resume: the session's folder %q is not there", o.resume.Dir)}
		}
		dir = o.resume.Dir
	}
	rules, err := o.rules(f, dir)
	if err != nil {
		return nil, err
	}
	return &agentRun{env: app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Stderr: f.stderr, Now: f.now}, dir: dir, rules: rules}, nil
}

// newClaudeCmd builds `happy claude`.
func newClaudeCmd(f *factory) *cobra.Command {
	var o agentOptions
	var claudePath, permissionMode, model string
	var remoteMode bool
	cmd := &cobra.Command{
		Use:   "claude [flags] [-- claude args…]",
		Short: "Run Claude Code under happy (interactive, or one turn with -p)",
		Long: `Run Claude Code wrapped by happy. Everything Claude does is mapped to the
canonical transcript, encrypted and sent to the relay, where another device can
follow it (happy log), answer its permission prompts (happy approve / deny) and
send the next prompt (happy send).

With -p, one turn runs in remote mode: the final answer is printed and the exit
status tells the outcome (0 completed, 1 failed or a permission was rejected,
2 usage, 3 relay or login unusable, 130 interrupted). Arguments after -- go to
claude unchanged.

With --remote (and no -p), Claude runs without its terminal UI and takes one
prompt after another from the relay (happy send, another device); a signal
ends the session. This is how the daemon starts Claude sessions.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.agentArgs = args
			if model != "" {
				o.agentArgs = append([]string{"--model", model}, args...)
			}
			if err := o.checkFlags(cmd); err != nil {
				return err
			}
			path, err := claudeExe.find(f, claudePath)
			if err != nil {
				return err
			}
			claudePath = path
			if remoteMode && o.prompt == "" {
				if !cmd.Flags().Changed("permission-timeout") {
					o.permissionTimeout = 0 // a served session waits for its person
				}
				return runClaudeRemote(cmd.Context(), f, &o, claudePath, permissionMode)
			}
			if o.prompt == "" {
				if o.recover {
					return &usageError{err: errors.New("--recover needs -p or --remote: Claude's own terminal UI cannot be restarted in place")}
				}
				if o.record != "" {
					return &usageError{err: errRecordInteractive}
				}
				if err := f.needTerminal("happy claude without -p"); err != nil {
					return err
				}
				return runClaudeInteractive(cmd.Context(), f, &o, claudePath)
			}
			return runClaudePrint(cmd.Context(), f, &o, claudePath, permissionMode)
		},
	}
	o.bind(cmd)
	cmd.Flags().StringVar(&claudePath, "claude-path", "", "the claude executable (default $HAPPY_CLAUDE_PATH, else claude on PATH)")
	cmd.Flags().StringVar(&permissionMode, "permission-mode", "", "Claude's permission mode: default, acceptEdits, plan, bypassPermissions")
	cmd.Flags().BoolVar(&remoteMode, "remote", false, "without -p: run Claude without its terminal UI, taking prompts from the relay")
	cmd.Flags().StringVar(&model, "model", "", "Claude's model for the session (passed to claude as --model), e.g. sonnet, opus or a full model name")
	return cmd
}

// errRecordInteractive refuses --record for Claude in its terminal UI: it
// speaks no protocol to record there.
var errRecordInteractive = errors.New("--record needs -p or --remote: Claude in its terminal UI speaks no protocol to record")

// runClaudeRemote runs Claude in remote mode (stream-json, no terminal UI)
// for as long as prompts come from the relay: the first one is
// --initial-prompt when given; SIGINT, SIGTERM, SIGHUP or the session's
// killSession end it.
func runClaudeRemote(parent context.Context, f *factory, o *agentOptions, claudePath, permissionMode string) error {
	ctx, interrupted, stop := signalContextOf(parent, []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}, nil)
	defer stop()
	run, err := prepareAgentRun(f, o, "claude")
	if err != nil {
		return err
	}
	env, dir, rules, log := run.env, run.dir, run.rules, run.env.Log
	conn, es, err := o.connectRun(ctx, f, env)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer es.Close()
	args := o.agentArgs
	if id := o.resumeID(); id != "" {
		args = append([]string{"--resume", id}, args...)
	}
	so := sdk.Options{Binary: claudePath, Args: args, Dir: dir,
		StderrLine: func(l string) { log.Info().Str("claude_stderr", l).Msg("") }}
	if o.record != "" {
		record, err := private.Create(o.record)
		if err != nil {
			return &usageError{err: err}
		}
		defer record.Close()
		so.Record = record
	}
	ag, err := remote.Start(context.WithoutCancel(ctx), remote.Options{SDK: so, PermissionMode: permissionMode})
	if err != nil {
		return err
	}
	defer ag.Close()
	return runAgentSession(ctx, f, agentSession{
		env: env, conn: conn, events: es, agent: ag, flags: o,
		session: app.SessionOptions{Flavor: "claude", Dir: dir, ProviderID: "anthropic", Rules: rules, PermissionMode: permissionMode},
		name:    "claude", interrupted: interrupted,
		quiet: true, sayEnded: true,
		restart: restartClaude(so, o.agentArgs, permissionMode),
	})
}

// signalContext is cancelled on SIGINT or SIGTERM; interrupted reports
// whether that happened.
func signalContext(parent context.Context) (ctx context.Context, interrupted func() bool, stop func()) {
	return signalContextOf(parent, []os.Signal{os.Interrupt, syscall.SIGTERM}, nil)
}

// signalContextOf is cancelled on any of the end signals; the caught
// signals are only kept from ending the process (someone else, e.g. the
// terminal proxy, passes them on). Every one of them stays caught until
// stop, so a second signal cannot kill happy while it ends the session on
// the relay.
func signalContextOf(parent context.Context, end, caught []os.Signal) (ctx context.Context, interrupted func() bool, stop func()) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, append(append([]os.Signal(nil), end...), caught...)...)
	var mu sync.Mutex
	var got bool
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-ch:
				if !slices.Contains(end, sig) {
					continue
				}
				mu.Lock()
				got = true
				mu.Unlock()
				cancel()
			case <-done:
				return
			}
		}
	}()
	var once sync.Once
	return ctx, func() bool { mu.Lock(); defer mu.Unlock(); return got }, func() {
		once.Do(func() { signal.Stop(ch); close(done); cancel() })
	}
}

func runClaudePrint(parent context.Context, f *factory, o *agentOptions, claudePath, permissionMode string) error {
	ctx, interrupted, stop := signalContext(parent)
	defer stop()
	run, err := prepareAgentRun(f, o, "claude")
	if err != nil {
		return err
	}
	env, dir, rules, log := run.env, run.dir, run.rules, run.env.Log
	conn, es, err := o.connectRun(ctx, f, env)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer es.Close()

	var record *os.File
	args := o.agentArgs
	if id := o.resumeID(); id != "" {
		args = append([]string{"--resume", id}, args...)
	}
	so := sdk.Options{Binary: claudePath, Args: args, Dir: dir,
		StderrLine: func(l string) { log.Info().Str("claude_stderr", l).Msg("") }}
	if o.record != "" {
		if record, err = private.Create(o.record); err != nil {
			return &usageError{err: err}
		}
		defer record.Close()
		so.Record = record
	}
	// Claude outlives the signal context: on Ctrl-C the runner still has to
	// answer its pending permission and interrupt the turn; agent.Close
	// (deferred) stops it after that.
	ag, err := remote.Start(context.WithoutCancel(ctx), remote.Options{SDK: so, PermissionMode: permissionMode})
	if err != nil {
		return claudeExe.cannotStart(claudePath, err) // else the adapter names claude and what failed
	}
	defer ag.Close()
	return runAgentSession(ctx, f, agentSession{
		env: env, conn: conn, events: es, agent: ag, flags: o,
		session: app.SessionOptions{Flavor: "claude", Dir: dir, ProviderID: "anthropic", Rules: rules, PermissionMode: permissionMode},
		name:    "claude", interrupted: interrupted,
		restart: restartClaude(so, o.agentArgs, permissionMode),
	})
}

// restartClaude is the start of a Claude in remote mode that resumes its
// session id (claude --resume ID) with the command's arguments and
// options: --recover's restart. The traffic log (--record) covers the
// first Claude only.
func restartClaude(so sdk.Options, args []string, permissionMode string) func(context.Context, string) (agent.Agent, error) {
	return func(ctx context.Context, id string) (agent.Agent, error) {
		so.Args = append([]string{"--resume", id}, args...)
		so.Record = nil
		return remote.Start(ctx, remote.Options{SDK: so, PermissionMode: permissionMode})
	}
}

// runClaudeInteractive runs Claude in its own terminal UI (local mode),
// proxied through a PTY, while the session goes to the relay. Notices are
// printed before Claude takes the terminal and after it gives it back, never
// while it runs.
//
// SIGTERM and SIGHUP end the session (Claude is stopped, the session ends on
// the relay) and happy exits 130; SIGINT is Claude's (the terminal proxy passes it on) and never
// ends happy by itself.
func runClaudeInteractive(parent context.Context, f *factory, o *agentOptions, claudePath string) error {
	ctx, interrupted, stop := signalContextOf(parent, []os.Signal{syscall.SIGTERM, syscall.SIGHUP}, []os.Signal{os.Interrupt})
	defer stop()
	run, err := prepareAgentRun(f, o, "claude")
	if err != nil {
		return err
	}
	env, dir, rules, log, h := run.env, run.dir, run.rules, run.env.Log, run.env.Home
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the happy binary for the hooks: %w", err)
	}
	conn, es, err := o.connectRun(ctx, f, env)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer es.Close()
	in, _ := f.stdin.(*os.File)
	if in == nil {
		in = os.Stdin
	}
	var sid string
	var claude *dual.Agent // the last one started (--recover starts another)
	// While Claude runs in remote mode, the terminal shows its turn.
	view := &app.TurnView{Out: f.stdout}
	res, err := app.RunSessionWith(ctx, env, conn, app.SessionOptions{
		Flavor: "claude", Dir: dir, ProviderID: "anthropic", Rules: rules, StartedBy: o.startedByValue(),
		WaitCreated: 3 * time.Second, Resume: o.resumeOpts(),
		FlushTimeout: o.flushTimeout, Yolo: o.yolo, Events: events(es), IdleTimeout: o.idleTimeout,
		OnBus: view.OnBus,
		OnCreated: func(id string) {
			sid = id
			fmt.Fprintf(f.stderr, "happy: session %s — follow it from another terminal with: happy log %s --follow\n", id, id)
		},
	}, func(ctx context.Context, tag string) (agent.Agent, error) {
		// Local mode first; a prompt from another device hands Claude to
		// remote mode, a key in this terminal brings it back.
		ag, err := dual.Start(ctx, dual.Options{
			Local: local.Options{
				Binary: claudePath, Args: o.agentArgs, Dir: dir,
				HookCommand: []string{exe, "hook"}, StateDir: h.Join("sessions", tag),
				In: in, Out: f.stdout, Resume: o.resumeID(),
			},
			Remote: remote.Options{SDK: sdk.Options{Binary: claudePath, Args: o.agentArgs, Dir: dir,
				StderrLine: func(l string) { log.Info().Str("claude_stderr", l).Msg("") }}},
			Notice:   view.Notices(f.stderr),
			Terminal: func(m dual.Mode) { view.SetActive(m == dual.ModeRemote) },
			Log:      log,
		})
		if err != nil {
			return nil, claudeExe.cannotStart(claudePath, err)
		}
		claude = ag
		return ag, nil
	})
	if sid == "" {
		sid = res.SessionID
	}
	if sid != "" {
		fmt.Fprintf(f.stderr, "happy: session %s ended; read it with: happy log %s\n", sid, sid)
	}
	switch {
	case interrupted():
		// Ended by SIGTERM or SIGHUP: as happy codex and -p, 130.
		return &exitError{code: exitInterrupted}
	case err != nil && !errors.Is(err, context.Canceled):
		return err
	}
	// Claude exited by itself with a failure (it refused its arguments,
	// say): its own words are on the screen; happy's status says it too.
	if claude != nil {
		if code, ok := claude.ExitCode(); ok && code != 0 {
			return &exitError{code: exitFailed, err: fmt.Errorf("claude exited with status %d", code)}
		}
	}
	return nil
}

var _ agent.Agent = (*remote.Agent)(nil)
