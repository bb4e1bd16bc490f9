//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
)

// newResumeCmd builds `happy resume SESSION`.
func newResumeCmd(f *factory) *cobra.Command {
	var o agentOptions
	var ao acpOptions
	var claudePath, codexPath, codexProtocol, geminiPath, opencodePath string
	var remoteMode bool
	cmd := &cobra.Command{
		Use:               "resume SESSION [-p PROMPT] [flags] [-- agent args…]",
		ValidArgsFunction: completeSessions(f, false, false),
		Short:             "Continue an ended session in place, with the agent's own resume",
		Long: `Continue SESSION (ended, archived or stale) in the same relay session: the
agent resumes its own session (Claude with --resume, Codex with thread/resume,
ACP agents with session/resume or session/load) in the session's folder, and
the transcript goes on where it stopped, under the same id and title. The
session must have been run from this happy home.

Claude resumes interactively, or runs one turn with -p, or with --remote takes
prompts from the relay without its terminal UI (how the daemon resumes one). Codex needs -p (one
turn; an interactive resume of Codex is not supported yet) and its app-server: codex mcp-server
(Codex up to 0.153) cannot continue a thread in a new process, so that resume is refused (exit 2).
Sessions of ACP agents (happy gemini, happy opencode, happy acp) run one turn
with -p, or without it serve prompts from the relay until interrupted. happy
uses session/resume when the agent offers it, else session/load: the
conversation the agent replays then is left out of the transcript, which has
it already. An agent that offers neither cannot be resumed (exit 1). A happy
acp session needs the agent's command again after --, e.g.
  happy resume SESSION -p "go on" -- claude-code-acp
The exit status is that of the agent command (0, 1, 2, 3, 130).`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.agentArgs = args[1:]
			// Every flavor: this also reads a daemon's first prompt from
			// --initial-prompt-fd.
			if err := o.checkFlags(cmd); err != nil {
				return err
			}
			target, err := prepareResume(cmd.Context(), f, args[0])
			if err != nil {
				return err
			}
			o.resume = &target
			switch target.Flavor {
			case "claude":
				claudePath, err := claudeExe.find(f, claudePath)
				if err != nil {
					return err
				}
				if o.prompt == "" && remoteMode {
					if !cmd.Flags().Changed("permission-timeout") {
						o.permissionTimeout = 0 // a served session waits for its person
					}
					return runClaudeRemote(cmd.Context(), f, &o, claudePath, "")
				}
				if o.prompt == "" {
					if o.record != "" {
						return &usageError{err: errRecordInteractive}
					}
					if err := f.needTerminal("happy resume of a Claude session without -p"); err != nil {
						return err
					}
					return runClaudeInteractive(cmd.Context(), f, &o, claudePath)
				}
				return runClaudePrint(cmd.Context(), f, &o, claudePath, "")
			case "codex":
				if o.prompt == "" {
					return &usageError{err: errors.New(`happy resume of a Codex session needs -p "PROMPT" (an interactive resume of Codex is not supported yet)`)}
				}
				co := codexOptions{agentOptions: o, codexPath: codexPath, protocol: codexProtocol, permissionMode: "default"}
				return runCodex(cmd.Context(), f, &co)
			}
			return resumeACP(cmd, f, &o, &ao, target, map[string]string{"gemini": geminiPath, "opencode": opencodePath})
		},
	}
	o.bind(cmd)
	ao.bindSession(cmd)
	cmd.Flags().StringVar(&geminiPath, "gemini-path", "", "the gemini executable (default $HAPPY_GEMINI_PATH, else gemini on PATH)")
	cmd.Flags().StringVar(&opencodePath, "opencode-path", "", "the opencode executable (default $HAPPY_OPENCODE_PATH, else opencode on PATH)")
	cmd.Flags().StringVar(&claudePath, "claude-path", "", "the claude executable (default $HAPPY_CLAUDE_PATH, else claude on PATH)")
	cmd.Flags().StringVar(&codexPath, "codex-path", "", "the codex executable (default $HAPPY_CODEX_PATH, else codex on PATH)")
	cmd.Flags().StringVar(&codexProtocol, "codex-protocol", "auto", "how to speak to Codex: app-server, mcp or auto")
	cmd.Flags().BoolVar(&remoteMode, "remote", false, "a Claude session without -p: resume it without Claude's terminal UI, taking prompts from the relay")
	return cmd
}

// prepareResume settles this home's orphaned sessions (so a stale session
// is ended before it goes on), then checks that ref can be resumed.
func prepareResume(ctx context.Context, f *factory, ref string) (app.ResumeTarget, error) {
	conn, env, err := connect(ctx, f, "resume")
	if err != nil {
		return app.ResumeTarget{}, err
	}
	defer conn.Close()
	if _, err := app.SettleOrphans(ctx, env, conn); err != nil {
		env.Log.Warn().Err(err).Msg("settle orphaned sessions before resume")
	}
	t, err := app.PrepareResume(ctx, conn, ref, f.now())
	switch {
	case err == nil:
		return t, nil
	case errors.Is(err, app.ErrRunning), errors.Is(err, app.ErrNotResumable):
		return t, &exitError{code: exitFailed, err: err}
	}
	return t, sessionErr(err)
}

// resumeACP continues a session of an ACP agent: a preset's own command
// (bins holds its --…-path flag by flavor), or for a happy acp session the
// command after -- (o.agentArgs). The agent continues its session with
// session/resume or session/load (adapters/acp); one that offers neither
// fails to start with an error naming it (exit 1, like any refusal).
func resumeACP(cmd *cobra.Command, f *factory, o *agentOptions, ao *acpOptions, target app.ResumeTarget, bins map[string]string) error {
	ctx := cmd.Context()
	if a, ok := acpAgents[target.Flavor]; ok {
		p, err := a.preset(f, target.Flavor, bins[target.Flavor], o.agentArgs)
		if err != nil {
			return err
		}
		return runACP(ctx, f, o, ao, p)
	}
	if target.Flavor != "acp" {
		return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w: happy does not know how to run a %q agent",
			target.Opened.Info.ID, app.ErrNotResumable, target.Flavor)}
	}
	if len(o.agentArgs) == 0 {
		return &usageError{err: fmt.Errorf("%s is a happy acp session: give the agent's command after --, e.g. happy resume %s -p PROMPT -- claude-code-acp",
			target.Opened.Info.ID, target.Opened.Info.ID)}
	}
	if _, err := (agentExe{title: "ACP agent", def: o.agentArgs[0]}).find(f, o.agentArgs[0]); err != nil {
		return err
	}
	return runACP(ctx, f, o, ao, acpPreset{flavor: "acp", command: o.agentArgs})
}
