//go:build unix

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/adapters/claude/hooks"
)

// newHookCmd builds the hidden `happy hook EVENT`: the command Claude Code
// runs for each hook event in local mode (see the settings file written by
// package hooks). It forwards the payload on stdin to the running happy and
// prints the answer for Claude on stdout.
//
// Exit codes: 0 when the running happy got the payload, 1 otherwise (Claude
// treats that as a non-blocking hook error). Never 2: for a PreToolUse hook
// Claude reads exit code 2 as "block the tool", so a usage mistake must not
// produce it.
func newHookCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:                "hook EVENT",
		Short:              "Forward a Claude Code hook call to the running happy (used by Claude, not by people)",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitFailed, err: errors.New("usage: happy hook EVENT (payload on stdin)")}
			}
			if err := hooks.Forward(cmd.Context(), args[0], f.stdin, f.stdout, f.getenv, nil); err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return nil
		},
	}
}
