//go:build unix

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/buildinfo"
)

// newRootCmd builds the `happy` command tree. Subcommands are added here, one
// constructor per file.
func newRootCmd(f *factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "happy",
		Short: "Wrap a coding agent and follow or control it from another device",
		Long: `happy wraps a coding agent (Claude Code, Codex, any Agent Client Protocol agent),
turns everything it does into one transcript of messages and parts, encrypts it
end to end and pushes it to a relay, so that a phone, a browser or another
terminal can follow the session, answer its permission prompts and send the
next prompt.`,
		Version:       buildinfo.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(f.stdin)
	root.SetOut(f.stdout)
	root.SetErr(f.stderr)
	root.SetVersionTemplate("happy {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// An agent command's unknown flag is most often one of the
		// agent's own: say where those go.
		if strings.HasPrefix(err.Error(), "unknown flag: ") || strings.HasPrefix(err.Error(), "unknown shorthand flag: ") {
			if _, agentCmd := app.AgentByName(c.Name()); agentCmd || c.Name() == "acp" {
				flag := strings.Fields(err.Error())[len(strings.Fields(err.Error()))-1]
				err = fmt.Errorf("%w (flags of %s itself go after --: happy %s -- %s …)", err, c.Name(), c.Name(), flag)
			}
		}
		return &usageError{err: err}
	})
	// happy completion bash|zsh|fish|powershell prints the shell's script;
	// session ids and waiting call ids complete from the relay.
	root.CompletionOptions.HiddenDefaultCmd = false
	// An unknown word is a usage error (exit 2), not a silent help screen.
	root.Args = func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return &usageError{err: fmt.Errorf("unknown command %q (see happy help)", args[0])}
		}
		return nil
	}
	claudeCmd := newClaudeCmd(f)
	// Bare `happy` runs Claude Code interactively, as `happy claude` does.
	root.RunE = func(cmd *cobra.Command, _ []string) error {
		claudeCmd.SetContext(cmd.Context())
		return claudeCmd.RunE(claudeCmd, nil)
	}

	root.AddCommand(newVersionCmd(f))
	root.AddCommand(newAuthCmd(f), newWebCmd(f, "web"))
	root.AddCommand(claudeCmd)
	root.AddCommand(newACPCmd(f), newGeminiCmd(f), newOpencodeCmd(f))
	root.AddCommand(newCodexCmd(f))
	root.AddCommand(newOpenclawCmd(f))
	root.AddCommand(newSessionsCmd(f), newLogCmd(f), newArchiveCmd(f), newDeleteCmd(f), newResumeCmd(f))
	root.AddCommand(newSendCmd(f), newWaitCmd(f), newAttachmentCmd(f), newApproveCmd(f), newDenyCmd(f), newAnswerCmd(f), newAbortCmd(f))
	root.AddCommand(newDoctorCmd(f), newOutboxCmd(f))
	root.AddCommand(newDaemonCmd(f), newMachinesCmd(f), newSpawnCmd(f), newStopCmd(f))
	root.AddCommand(newHookCmd(f))
	root.AddCommand(newReplayCmd(f))
	serverCmd := newServerCmd(f)
	serverCmd.AddCommand(newServerStopCmd(f))
	root.AddCommand(serverCmd)
	return root
}
