//go:build unix

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/adapters/openclaw"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/buildinfo"
	"github.com/happy-dev/happy/internal/private"
)

// openclawOptions are the flags of `happy openclaw` beside agentOptions.
type openclawOptions struct {
	gateway      string
	token        string
	agentID      string
	session      string
	startGateway bool
	openclawPath string
	gatewayLog   string
}

// openclawTune, when set (by tests), adjusts the client's options just
// before it connects.
var openclawTune func(*openclaw.Options)

// openclawExe is where --start-gateway looks for the openclaw CLI.
var openclawExe = fromCommand(app.OpenclawCommand)

// newOpenclawCmd builds `happy openclaw`.
func newOpenclawCmd(f *factory) *cobra.Command {
	var o agentOptions
	var oo openclawOptions
	cmd := &cobra.Command{
		Use:   "openclaw [-p PROMPT] [--gateway URL] [--token T] [--agent ID] [flags]",
		Short: "Drive an OpenClaw gateway's agent under happy",
		Long: `Connect to an OpenClaw gateway (its WebSocket protocol, as an operator client),
open a session (or continue --session KEY) and run prompts on one of its agents.
Everything the agent does is mapped to the canonical transcript, encrypted and
sent to the relay, where another device can follow it (happy log), answer the
command approvals the gateway asks for (happy approve / deny) and send the next
prompt (happy send).

The gateway is --gateway (default $OPENCLAW_GATEWAY_URL, else ws://127.0.0.1:18789)
with the shared token --token (default $OPENCLAW_GATEWAY_TOKEN). With
--start-gateway, happy runs openclaw gateway itself on a free loopback port, in
its own process group, and stops the whole group at the end.

With -p, one turn runs: the final answer is printed and the exit status tells
the outcome (0 completed, 1 failed or a permission was rejected, 2 usage, 3 relay
or login unusable, 130 interrupted). Without -p, the session waits for prompts
sent from other devices until interrupted. A gateway that goes away (and cannot
be reached again) ends the turn as a transport error; a session serving prompts
then ends with exit 1, saying so on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkFlags(cmd); err != nil {
				return err
			}
			if o.recover {
				return &usageError{err: errors.New("--recover restarts the agent in its own session, and OpenClaw has no resume")}
			}
			gatewayFrom := "--gateway"
			if oo.gateway == "" {
				oo.gateway = f.getenv("OPENCLAW_GATEWAY_URL")
				gatewayFrom = "$OPENCLAW_GATEWAY_URL"
			}
			if oo.token == "" {
				oo.token = f.getenv("OPENCLAW_GATEWAY_TOKEN")
			}
			if oo.startGateway && cmd.Flags().Changed("gateway") {
				return &usageError{err: errors.New("--start-gateway runs its own gateway: it does not take --gateway")}
			}
			if !oo.startGateway && oo.gateway != "" {
				if err := checkGatewayURL(oo.gateway); err != nil {
					return &usageError{err: fmt.Errorf("%s %q: %w", gatewayFrom, oo.gateway, err)}
				}
			}
			if oo.startGateway {
				path, err := openclawExe.find(f, oo.openclawPath)
				if err != nil {
					return err
				}
				oo.openclawPath = path
			}
			return runOpenclaw(cmd.Context(), f, &o, &oo)
		},
	}
	o.bind(cmd)
	cmd.Flags().StringVar(&oo.gateway, "gateway", "", "the gateway's WebSocket `URL` (default $OPENCLAW_GATEWAY_URL, else "+openclaw.DefaultURL+")")
	cmd.Flags().StringVar(&oo.token, "token", "", "the gateway's shared token (default $OPENCLAW_GATEWAY_TOKEN)")
	cmd.Flags().StringVar(&oo.agentID, "agent", "", "the OpenClaw agent `ID` to run (default: the gateway's default agent)")
	cmd.Flags().StringVar(&oo.session, "session", "", "continue the gateway session `KEY` (default: a new one, agent:<agent>:happy-<random>)")
	cmd.Flags().BoolVar(&oo.startGateway, "start-gateway", false, "run openclaw gateway on a free loopback port for this session and stop it at the end")
	cmd.Flags().StringVar(&oo.openclawPath, "openclaw-path", "", "the openclaw executable for --start-gateway (default $HAPPY_OPENCLAW_PATH, else openclaw on PATH)")
	cmd.Flags().StringVar(&oo.gatewayLog, "gateway-log", "", "with --start-gateway, write the gateway's output to `FILE`")
	return cmd
}

// runOpenclaw runs one gateway session: -p runs one turn and exits with its
// outcome; without it the session serves prompts from the relay until
// interrupted.
func runOpenclaw(parent context.Context, f *factory, o *agentOptions, oo *openclawOptions) error {
	ctx, interrupted, stop := signalContext(parent)
	defer stop()
	run, err := prepareAgentRun(f, o, "openclaw")
	if err != nil {
		return err
	}
	env, dir, rules := run.env, run.dir, run.rules
	opts := openclaw.Options{URL: oo.gateway, Token: oo.token, AgentID: oo.agentID, SessionKey: oo.session, Version: buildinfo.Version}
	if id := o.resumeID(); id != "" {
		opts.SessionKey = id
	}
	if oo.startGateway {
		if opts.Token == "" {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			opts.Token = hex.EncodeToString(b)
		}
		gopts := openclaw.GatewayOptions{Command: []string{oo.openclawPath}, Token: opts.Token, Dir: dir}
		if oo.gatewayLog != "" {
			lf, err := private.Create(oo.gatewayLog)
			if err != nil {
				return &usageError{err: fmt.Errorf("--gateway-log: %w", err)}
			}
			defer lf.Close()
			gopts.Log = lf
		}
		g, err := openclaw.StartGateway(ctx, gopts)
		if err != nil {
			if interrupted() {
				return &exitError{code: exitInterrupted}
			}
			if startFailed(err) {
				return openclawExe.cannotStart(oo.openclawPath, err)
			}
			if oo.gatewayLog != "" {
				err = fmt.Errorf("%w; see %s", err, oo.gatewayLog)
			} else {
				err = fmt.Errorf("%w; --gateway-log FILE keeps its output", err)
			}
			return &exitError{code: exitFailed, err: err}
		}
		defer g.Stop()
		opts.URL = g.URL
	}
	conn, es, err := o.connectRun(ctx, f, env)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer es.Close()
	if o.record != "" {
		record, err := private.Create(o.record)
		if err != nil {
			return &usageError{err: err}
		}
		defer record.Close()
		opts.Record = record
	}
	if openclawTune != nil {
		openclawTune(&opts)
	}
	client, err := openclaw.Start(ctx, opts)
	if err != nil {
		if interrupted() {
			return &exitError{code: exitInterrupted}
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			err = fmt.Errorf("%w (nothing listens there: start it with openclaw gateway, or let happy run one with --start-gateway)", err)
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("connect to the OpenClaw gateway: %w", err)}
	}
	defer client.Close()

	return runAgentSession(ctx, f, agentSession{
		env: env, conn: conn, events: es, agent: client, flags: o,
		session: app.SessionOptions{Flavor: "openclaw", Dir: dir, Rules: rules},
		name:    "openclaw", interrupted: interrupted,
		exited: func() error { return gatewayGone(opts.URL, client.Gone()) },
	})
}

// gatewayGone is the error of a served session whose gateway went away
// (why: the client's Gone, nil when it is not known).
func gatewayGone(url string, why error) error {
	if url == "" {
		url = openclaw.DefaultURL
	}
	if why == nil {
		return fmt.Errorf("the OpenClaw gateway went away (%s)", url)
	}
	return fmt.Errorf("the OpenClaw gateway went away (%s): %w", url, why)
}

// checkGatewayURL accepts a ws:// or wss:// URL with a host.
func checkGatewayURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return errors.New("a ws:// or wss:// URL is needed (the gateway's WebSocket address, e.g. " + openclaw.DefaultURL + ")")
	}
	return nil
}
