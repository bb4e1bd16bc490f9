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
	var claudePath, codexPath, codexProtocol string
	var remoteMode bool
	cmd := &cobra.Command{
		Use:               "resume SESSION [-p PROMPT] [flags] [-- agent args…]",
		ValidArgsFunction: completeSessions(f, false, false),
		Short:             "Continue an ended session in place, with the agent's own resume",
		Long: `Continue SESSION (ended, archived or stale) in the same relay session: the
agent resumes its own session (Claude with --resume, Codex with thread/resume)
in the session's folder, and the transcript goes on where it stopped, under
the same id and title. The session must have been run from this happy home.

Claude resumes interactively, or runs one turn with -p, or with --remote takes
prompts from the relay without its terminal UI (how the daemon resumes one). Codex needs -p (one
turn; an interactive resume of Codex is not supported yet).
Sessions of ACP agents (happy acp, gemini, opencode) cannot be resumed yet:
session/load replays the whole conversation, which would enter the transcript
a second time. The exit status is that of the agent command (0, 1, 2, 3, 130).`,
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.agentArgs = args[1:]
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
			return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w: resuming %s sessions is not supported (ACP session/load replays the conversation into the transcript again)",
				target.Opened.Info.ID, app.ErrNotResumable, target.Flavor)}
		},
	}
	o.bind(cmd)
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
