//go:build unix

package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/mapper"
)

// completionTimeout bounds the relay calls a completion makes: a shell
// waits for them on every Tab.
const completionTimeout = 3 * time.Second

// completeSessions completes the first argument (every argument with
// many) with the account's session ids, newest activity first, each
// described by its title, agent and state; liveOnly keeps the running ones
// (the only ones a control command can reach). Without a relay or a login
// it offers nothing.
func completeSessions(f *factory, liveOnly, many bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 && !many {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		conn, _, err := connect(ctx, f, "completion")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		defer conn.Close()
		list, err := app.ListSessions(ctx, conn, f.now())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, s := range list {
			if !strings.HasPrefix(s.ID, toComplete) || (liveOnly && s.State != app.LifecycleRunning) || slices.Contains(args, s.ID) {
				continue
			}
			out = append(out, cobra.CompletionWithDesc(s.ID, fmt.Sprintf("%s (%s, %s)", s.Title, s.Agent, s.State)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWaitingCalls completes SESSION with the running sessions, then
// CALL_ID with the tool calls of that session that wait for a person
// (question is true for happy answer: calls blocked on a question).
func completeWaitingCalls(f *factory, question bool) cobra.CompletionFunc {
	sessions := completeSessions(f, true, false)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return sessions(cmd, args, toComplete)
		}
		if len(args) > 1 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
		defer cancel()
		conn, _, err := connect(ctx, f, "completion")
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		defer conn.Close()
		o, err := app.FindSession(ctx, conn, args[0])
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		rb, _, err := app.ReadTranscript(ctx, conn, o, app.ReadOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		return waitingCalls(rb.Transcript(), question, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// waitingCalls lists the blocked tool calls of every session of t (root and
// children) whose call id starts with prefix, described by tool and title.
func waitingCalls(t mapper.Transcript, question bool, prefix string) []cobra.Completion {
	var out []cobra.Completion
	var walk func(t mapper.Transcript)
	walk = func(t mapper.Transcript) {
		for _, m := range t.Messages {
			for _, p := range m.Parts {
				tp, ok := p.(*mapper.ToolPart)
				if !ok || tp.State.Status != mapper.StatusBlocked || tp.State.Block == nil || !strings.HasPrefix(tp.CallID, prefix) {
					continue
				}
				if (tp.State.Block.Type == mapper.BlockQuestion) != question {
					continue
				}
				desc := tp.Tool
				if tp.State.Title != "" {
					desc += " " + tp.State.Title
				}
				out = append(out, cobra.CompletionWithDesc(tp.CallID, desc))
			}
		}
		for _, c := range t.Children {
			walk(c)
		}
	}
	walk(t)
	return out
}
