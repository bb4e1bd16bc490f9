//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/codex/appserver"
	"github.com/happy-dev/happy/adapters/codex/mcp"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/session"
)

// codexOptions are the flags of `happy codex` beyond the shared ones.
type codexOptions struct {
	agentOptions
	codexPath      string
	protocol       string
	permissionMode string
}

// newCodexCmd builds `happy codex`.
func newCodexCmd(f *factory) *cobra.Command {
	var o codexOptions
	cmd := &cobra.Command{
		Use:   "codex [-p PROMPT] [flags] [-- codex args…]",
		Short: "Run OpenAI Codex under happy (interactive, or one turn with -p)",
		Long: `Run OpenAI Codex wrapped by happy. Everything Codex does is mapped to the
canonical transcript, encrypted and sent to the relay, where another device can
follow it (happy log), answer its approval requests (happy approve / deny) and
send the next prompt (happy send).

Without -p, the session takes one prompt after another on one Codex thread:
typed at the prompt line happy shows in the terminal (one prompt a line;
answers are printed as they complete) or sent with happy send from any
device; a prompt sent during a turn waits for it. Ctrl-D at the prompt line
ends the session once the running turn is over (exit 0); Ctrl-C, SIGTERM or
SIGHUP end it at once, interrupting the turn (exit 130). Without a terminal
on stdin there is no prompt line: prompts come from happy send, and a signal
ends the session. A permission waits for an answer unless
--permission-timeout is given.

With -p, one turn runs: the final answer is printed and the exit status tells
the outcome (0 completed, 1 failed or a permission was rejected, 2 usage,
3 relay or login unusable, 130 interrupted).

--codex-protocol picks how happy speaks to Codex: app-server (current Codex),
mcp (codex mcp-server, Codex up to 0.153) or auto (app-server when the
installed Codex has it, read from codex --version).

--permission-mode sets Codex's approval policy and sandbox:
  default    asks before leaving the workspace sandbox (on-request, workspace-write)
  read-only  asks before any write (on-request, read-only)
  safe-yolo  never asks, stays in the workspace (never, workspace-write)
  yolo       never asks, no sandbox (never, danger-full-access)

Arguments after -- go to codex after its subcommand (app-server or mcp-server)
unchanged.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.agentArgs = args
			if o.prompt == "" && !cmd.Flags().Changed("permission-timeout") {
				o.permissionTimeout = 0 // an interactive session waits for its person
			}
			return runCodex(cmd.Context(), f, &o)
		},
	}
	o.bind(cmd)
	cmd.Flags().StringVar(&o.codexPath, "codex-path", "", "the codex executable (default $HAPPY_CODEX_PATH, else codex on PATH)")
	cmd.Flags().StringVar(&o.protocol, "codex-protocol", "auto", "how to speak to Codex: app-server, mcp or auto")
	cmd.Flags().StringVar(&o.permissionMode, "permission-mode", "default", "Codex's approvals and sandbox: default, read-only, safe-yolo, yolo")
	return cmd
}

// runCodex checks the command line, then runs one turn (-p) or an
// interactive session.
func runCodex(parent context.Context, f *factory, o *codexOptions) error {
	proto, err := codex.ParseProtocol(o.protocol)
	if err != nil {
		return &usageError{err: fmt.Errorf("--codex-protocol: %w", err)}
	}
	mode, err := codex.ParsePermissionMode(o.permissionMode)
	if err != nil {
		return &usageError{err: fmt.Errorf("--permission-mode: %w (want default, read-only, safe-yolo or yolo)", err)}
	}
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if o.output != outputText && o.prompt == "" {
		return &usageError{err: fmt.Errorf("--output %s needs -p: it describes one turn", o.output)}
	}
	if err := o.checkStartFlags(); err != nil {
		return err
	}
	if err := o.checkRuleFlags(); err != nil {
		return err
	}
	if err := o.checkEventsFlag(); err != nil {
		return err
	}
	path, err := codexExe.find(f, o.codexPath)
	if err != nil {
		return err
	}
	o.codexPath = path
	return runCodexSession(parent, f, o, proto, mode)
}

// runCodexSession runs Codex under happy: one turn with -p, else an
// interactive session (see the command's help) that ends with the prompt
// line's input (Ctrl-D) or a signal.
func runCodexSession(parent context.Context, f *factory, o *codexOptions, proto codex.Protocol, mode codex.PermissionMode) error {
	oneShot := o.prompt != ""
	ends := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !oneShot {
		ends = append(ends, syscall.SIGHUP)
	}
	ctx, interrupted, stop := signalContextOf(parent, ends, nil)
	defer stop()
	run, err := prepareAgentRun(f, &o.agentOptions, "codex")
	if err != nil {
		return err
	}
	env, dir, rules, log := run.env, run.dir, run.rules, run.env.Log
	if proto == codex.ProtocolAuto {
		p, version, err := codex.ChooseProtocol(ctx, o.codexPath)
		if startFailed(err) {
			return codexExe.cannotStart(o.codexPath, err)
		}
		if err != nil {
			return &exitError{code: exitFailed, err: fmt.Errorf("choose the codex protocol (use --codex-protocol app-server or mcp): %w", err)}
		}
		log.Info().Str("codex_version", version).Str("protocol", string(p)).Msg("codex protocol chosen")
		proto = p
	}
	if proto == codex.ProtocolMCP && o.resume != nil {
		// Refused before the session is touched: the prompt is not written.
		return &usageError{err: mcp.ErrCannotResume}
	}
	conn, es, err := o.connectRun(ctx, f, env)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer es.Close()

	co := codex.Options{
		Binary: o.codexPath, Args: o.agentArgs, Cwd: dir, Mode: mode,
		ResumeThreadID: o.resumeID(), TurnCheck: turnCheck(o.idleTimeout),
		Settings: rpcagent.Settings{ClientName: "happy", ClientVersion: buildinfo.Version, Logger: log},
	}
	if o.record != "" {
		record, err := private.Create(o.record)
		if err != nil {
			return &usageError{err: err}
		}
		defer record.Close()
		co.Record = record
	}
	// Codex outlives an interrupt long enough for the runner to abort the
	// turn (cancel the waiting approvals, turn/interrupt); an interrupt
	// while it starts stops it at once. Close stops it in the end.
	agentCtx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAgent()
	unwatch := context.AfterFunc(ctx, stopAgent)
	ag, err := startCodex(agentCtx, proto, co)
	unwatch()
	if err != nil {
		if interrupted() {
			return &exitError{code: exitInterrupted}
		}
		if startFailed(err) {
			return codexExe.cannotStart(o.codexPath, err)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("start codex: %w", err)}
	}
	defer ag.Close()

	r := agentSession{
		env: env, conn: conn, events: es, agent: ag, flags: &o.agentOptions,
		session: app.SessionOptions{Flavor: "codex", Dir: dir, ProviderID: "openai", Rules: rules, PermissionMode: string(mode)},
		name:    "codex", interrupted: interrupted,
		sayEnded: true,
		// --recover: a new app-server resumes the thread (thread/resume,
		// its turns left out: the transcript has them).
		restart: func(ctx context.Context, thread string) (agent.Agent, error) {
			ro := co
			ro.ResumeThreadID, ro.Record = thread, nil
			return startCodex(agentCtx, codex.ProtocolAppServer, ro)
		},
		canRecover: func() error {
			if proto == codex.ProtocolMCP {
				return mcp.ErrCannotResume
			}
			return nil
		},
	}
	if !oneShot && f.isTerminal(f.stdin) {
		r.line = &app.PromptLine{In: f.stdin, Out: f.stdout, Err: f.stderr, Agent: "codex", Marker: "codex> "}
	}
	return runAgentSession(ctx, f, r)
}

// turnCheck is how long a Codex turn stays silent before happy asks
// app-server whether its end was lost: codex.DefaultTurnCheck, or half the
// idle timeout when that is shorter, so a lost turn-end is found (and the
// turn ends completed) before the idle watch interrupts the turn.
func turnCheck(idle time.Duration) time.Duration {
	if idle > 0 && idle/2 < codex.DefaultTurnCheck {
		return max(idle/2, time.Millisecond)
	}
	return codex.DefaultTurnCheck
}

// startCodex starts Codex over protocol proto (app-server or mcp) as the
// runner's agent.
func startCodex(ctx context.Context, proto codex.Protocol, co codex.Options) (agent.Agent, error) {
	if proto == codex.ProtocolMCP {
		c, err := mcp.Start(ctx, co)
		if err != nil {
			return nil, err
		}
		return mcp.NewAgent(c), nil
	}
	c, err := appserver.Start(ctx, co)
	if err != nil {
		return nil, err
	}
	return appserver.NewAgent(c), nil
}

// turnExit maps how a one-turn session ended to the command's error (and so
// its exit code: the exit codes of happy <agent> -p).
func turnExit(flavor string, res app.SessionResult, err error, interrupted bool) error {
	switch {
	case interrupted:
		return &exitError{code: exitInterrupted}
	case err != nil && app.IsRelayError(err):
		return &exitError{code: exitRelay, err: err}
	case err != nil && !errors.Is(err, context.Canceled):
		return err
	case res.TurnReason == agent.TurnCompleted && res.Rejected == 0 && res.TurnError == "" && res.Undelivered > 0:
		return &exitError{code: exitUndelivered}
	case res.TurnReason == agent.TurnCompleted && res.Rejected == 0 && res.TurnError == "":
		return nil
	case res.TurnReason == agent.TurnInterrupted && res.IdleInterrupts > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("%s sent nothing for longer than --idle-timeout: the turn was interrupted", flavor)}
	case res.TurnReason == agent.TurnInterrupted:
		return &exitError{code: exitInterrupted, err: errors.New("the turn was interrupted")}
	case res.Rejected > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("%d permission request(s) were rejected", res.Rejected)}
	case res.AgentExited && res.Unanswered > 0:
		msg := fmt.Sprintf("%s exited without answering the prompt", flavor)
		if detail, ok := strings.CutPrefix(res.TurnError, session.NoAnswer+": "); ok {
			msg += "; " + detail
		}
		return &exitError{code: exitFailed, err: errors.New(msg)}
	case res.AgentExited && res.TurnReason == "":
		return &exitError{code: exitFailed, err: fmt.Errorf("%s exited before the turn ended", flavor)}
	default:
		msg := res.TurnError
		if msg == "" {
			msg = "turn ended: " + res.TurnReason
		}
		return &exitError{code: exitFailed, err: errors.New(msg)}
	}
}
