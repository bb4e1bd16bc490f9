//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/adapters/acp"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/private"
)

// acpOptions are the flags of the ACP commands, beside agentOptions.
type acpOptions struct {
	mode        string
	authMethod  string
	resume      string
	mcpServers  string
	cancelGrace time.Duration
}

func (o *acpOptions) bind(cmd *cobra.Command) {
	o.bindSession(cmd)
	cmd.Flags().StringVar(&o.resume, "resume", "", "continue the agent's session `ID` (session/resume, else session/load)")
}

// bindSession binds the flags that shape the agent's session (also those
// of happy resume).
func (o *acpOptions) bindSession(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.mode, "mode", "", "session mode to select (one the agent lists, e.g. default, plan)")
	cmd.Flags().StringVar(&o.authMethod, "auth-method", "", "authentication method to use when the agent asks for one")
	cmd.Flags().StringVar(&o.mcpServers, "mcp-servers", "", "JSON `FILE` with the MCP servers to give the agent: [{name, command, args, env} | {type: http|sse, name, url, headers}]")
	cmd.Flags().DurationVar(&o.cancelGrace, "cancel-grace", acp.DefaultCancelGrace, "how long the agent gets to end a cancelled turn before happy restarts it")
}

// acpPreset is what differs between `happy acp`, `happy gemini` and
// `happy opencode`.
type acpPreset struct {
	flavor     string   // session metadata flavor
	providerID string   // model provider, when the agent has one
	command    []string // argv; empty for `happy acp` (taken from the arguments)
	authMethod string   // default --auth-method
}

// newACPCmd builds `happy acp -- CMD [ARGS…]`.
func newACPCmd(f *factory) *cobra.Command {
	var o agentOptions
	var ao acpOptions
	cmd := &cobra.Command{
		Use:   "acp [flags] -- CMD [ARGS…]",
		Short: "Run any Agent Client Protocol agent under happy",
		Long: `Run an agent that speaks the Agent Client Protocol (ACP) over its stdio, e.g.
happy acp -- gemini --acp. Everything the agent does is mapped to the canonical
transcript, encrypted and sent to the relay, where another device can follow it
(happy log), answer its permission prompts (happy approve / deny) and send the
next prompt (happy send).

With -p, one turn runs: the final answer is printed and the exit status tells
the outcome (0 completed, 1 failed or a permission was rejected, 2 usage, 3 relay
or login unusable, 130 interrupted). Without -p, the session waits for prompts
sent from other devices until interrupted.

happy offers the agent file reads and writes inside the working folder and
terminals (each command in its own process group).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &usageError{err: errors.New("acp needs the agent's command after --, e.g. happy acp -- gemini --acp")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkFlags(cmd); err != nil {
				return err
			}
			if _, err := (agentExe{title: "ACP agent", def: args[0]}).find(f, args[0]); err != nil {
				return err
			}
			return runACP(cmd.Context(), f, &o, &ao, acpPreset{flavor: "acp", command: args})
		},
	}
	cmd.Flags().SetInterspersed(false)
	o.bind(cmd)
	ao.bind(cmd)
	return cmd
}

// acpAgent is an ACP agent with a command of its own (happy gemini, happy
// opencode): its executable, model provider and ACP-mode arguments.
type acpAgent struct {
	exe      agentExe
	provider string
	acpArgs  []string
}

// acpAgents are the ACP agents by session flavor.
var acpAgents = map[string]acpAgent{
	"gemini":   {exe: geminiExe, provider: "google", acpArgs: []string{"--acp"}},
	"opencode": {exe: opencodeExe, acpArgs: []string{"acp"}},
}

// preset is the run of agent a (flavor name) with executable bin (from a
// --…-path flag, "" for the default) and the arguments after --. Errors:
// the executable is not found (agentExe.find).
func (a acpAgent) preset(f *factory, name, bin string, args []string) (acpPreset, error) {
	bin, err := a.exe.find(f, bin)
	if err != nil {
		return acpPreset{}, err
	}
	p := acpPreset{flavor: name, providerID: a.provider,
		command: append(append([]string{bin}, a.acpArgs...), args...)}
	if name == "gemini" && f.getenv("GEMINI_API_KEY") != "" {
		p.authMethod = "gemini-api-key"
	}
	return p, nil
}

// newGeminiCmd builds `happy gemini`: Gemini CLI's ACP mode (gemini --acp).
func newGeminiCmd(f *factory) *cobra.Command {
	return newACPPresetCmd(f, "gemini")
}

// newOpencodeCmd builds `happy opencode`: OpenCode's ACP mode (opencode acp).
func newOpencodeCmd(f *factory) *cobra.Command {
	return newACPPresetCmd(f, "opencode")
}

func newACPPresetCmd(f *factory, name string) *cobra.Command {
	a := acpAgents[name]
	exe, acpArgs := a.exe, a.acpArgs
	title, pathEnv, binary := exe.title, exe.env, exe.def
	var o agentOptions
	var ao acpOptions
	var bin string
	cmd := &cobra.Command{
		Use:   name + " [flags] [-- " + name + " args…]",
		Short: "Run " + title + " under happy (through the Agent Client Protocol)",
		Long: `Run ` + title + ` in its Agent Client Protocol mode (` + binary + ` ` + acpArgs[0] + `) wrapped by
happy: the same as happy acp -- ` + binary + ` ` + acpArgs[0] + `. Arguments after -- go to ` + binary + `.
See happy acp --help.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkFlags(cmd); err != nil {
				return err
			}
			p, err := a.preset(f, name, bin, args)
			if err != nil {
				return err
			}
			return runACP(cmd.Context(), f, &o, &ao, p)
		},
	}
	o.bind(cmd)
	ao.bind(cmd)
	cmd.Flags().StringVar(&bin, name+"-path", "", "the "+binary+" executable (default $"+pathEnv+", else "+binary+" on PATH)")
	return cmd
}

// runACP runs one ACP session: -p runs one turn and exits with its
// outcome; without it the session serves prompts from the relay until
// interrupted.
func runACP(parent context.Context, f *factory, o *agentOptions, ao *acpOptions, p acpPreset) error {
	// Orphans of the agent's tools come to us, not to a PID 1 that may not
	// reap them; the process groups we end are reaped (internal/proc).
	ctx, interrupted, stop := signalContext(parent)
	defer stop()
	run, err := prepareAgentRun(f, o, p.flavor)
	if err != nil {
		return err
	}
	env, dir, rules := run.env, run.dir, run.rules
	// --resume starts a new relay session from the agent's session: the
	// conversation session/load replays enters its transcript. happy
	// resume continues the relay session that holds it already.
	loadID := ao.resume
	if id := o.resumeID(); id != "" {
		loadID = id
	}
	opts := acp.Options{
		Command: p.command, Cwd: dir, Mode: ao.mode, AuthMethod: ao.authMethod, LoadSessionID: loadID, HistoryKnown: o.resume != nil,
		CancelGrace: ao.cancelGrace, Settings: rpcagent.Settings{ClientName: "happy", Logger: env.Log, Now: f.now},
	}
	if opts.AuthMethod == "" {
		opts.AuthMethod = p.authMethod
	}
	if ao.mcpServers != "" {
		b, err := os.ReadFile(ao.mcpServers)
		if err != nil {
			return &usageError{err: fmt.Errorf("--mcp-servers: %w", err)}
		}
		if err := json.Unmarshal(b, &opts.MCPServers); err != nil {
			return &usageError{err: fmt.Errorf("--mcp-servers %s: %w", ao.mcpServers, err)}
		}
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
	client, err := acp.Start(ctx, opts)
	if err != nil {
		if interrupted() {
			return &exitError{code: exitInterrupted}
		}
		return &exitError{code: exitFailed, err: fmt.Errorf("start %s: %w", p.command[0], err)}
	}
	ag := acp.NewAgent(client)
	defer ag.Close()

	return runAgentSession(ctx, f, agentSession{
		env: env, conn: conn, events: es, agent: ag, flags: o,
		session: app.SessionOptions{Flavor: p.flavor, Dir: dir, ProviderID: p.providerID, Rules: rules},
		name:    p.command[0], interrupted: interrupted,
		restart: func(ctx context.Context, id string) (agent.Agent, error) {
			// The transcript holds the conversation: a load's replay is
			// left out of it (HistoryKnown), as for happy resume.
			ro := opts
			ro.LoadSessionID, ro.HistoryKnown, ro.Record = id, true, nil
			c, err := acp.Start(ctx, ro)
			if err != nil {
				return nil, err
			}
			return acp.NewAgent(c), nil
		},
		canRecover: func() error {
			// What the agent offers is known once it started.
			if info := client.Info(); !info.LoadSession && !info.Resume {
				return fmt.Errorf("%s offers neither session/resume nor session/load", p.command[0])
			}
			return nil
		},
	})
}
