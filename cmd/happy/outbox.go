//go:build unix

package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
)

func newOutboxCmd(f *factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "outbox [--json]",
		Short: "List the versions this home's outbox still has to send to the relay",
		Long: `List, per session, the record versions this home's outbox has written and
the relay has not yet acknowledged: the relay they are for, how many, since
when, and whether a running happy holds the session (it sends them itself).
A happy that runs on this home while that relay answers sends the others.

happy outbox discard gives a session's versions up for good (a relay that
is gone); happy doctor counts them.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			env, err := outboxEnv(f)
			if err != nil {
				return err
			}
			list, err := app.Backlogs(cmd.Context(), env)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if asJSON {
				if list == nil {
					list = []app.Backlog{}
				}
				enc := json.NewEncoder(f.stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			if len(list) == 0 {
				fmt.Fprintln(f.stdout, "nothing waits for the relay")
				return nil
			}
			now := f.now()
			for _, b := range list {
				fmt.Fprintln(f.stdout, backlogLine(b, now))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {session, relayId, relay, waiting, oldest, running}")
	cmd.AddCommand(newOutboxDiscardCmd(f))
	return cmd
}

// backlogLine is one session of happy outbox: its key (and relay id),
// what waits, for which relay, since when, and whether it is held.
func backlogLine(b app.Backlog, now time.Time) string {
	id := b.Session
	if b.RelayID != "" {
		id += " (" + b.RelayID + ")"
	}
	relay := b.Relay
	if relay == "" {
		relay = "an unknown relay"
	}
	line := fmt.Sprintf("%s  %d version(s) for %s, the oldest written %s ago", id, b.Waiting, relay, now.Sub(b.Oldest).Round(time.Second))
	if b.Running {
		line += "; a running happy holds it"
	}
	return line
}

func newOutboxDiscardCmd(f *factory) *cobra.Command {
	var all, yes bool
	cmd := &cobra.Command{
		Use:   "discard SESSION… | --all [--yes]",
		Short: "Give up the waiting versions of sessions (they never reach the relay)",
		Long: `Give up the versions the outbox still has to send for the named sessions
(their keys, as happy outbox lists them), or for every session with --all:
they are never sent. They are not erased: each is kept among the outbox's
rejected rows with the reason and the time. A session a running happy holds
is refused (stop it first).

It asks for a confirmation on a terminal; --yes answers it (needed when
stdin is not a terminal).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return &usageError{err: errors.New("name the sessions to discard, or give --all")}
			}
			env, err := outboxEnv(f)
			if err != nil {
				return err
			}
			list, err := app.Backlogs(cmd.Context(), env)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			var pick []app.Backlog
			if all {
				pick = list
			} else {
				for _, name := range args {
					i := indexBacklog(list, name)
					if i < 0 {
						return &exitError{code: exitFailed, err: fmt.Errorf("no versions wait for session %q (happy outbox lists those that do)", name)}
					}
					pick = append(pick, list[i])
				}
			}
			if len(pick) == 0 {
				fmt.Fprintln(f.stdout, "nothing waits for the relay")
				return nil
			}
			total := 0
			for _, b := range pick {
				total += b.Waiting
			}
			if !yes {
				if !f.isTerminal(f.stdin) {
					return &usageError{err: errors.New("discarding needs a confirmation: give --yes when stdin is not a terminal")}
				}
				now := f.now()
				for _, b := range pick {
					fmt.Fprintln(f.stdout, backlogLine(b, now))
				}
				fmt.Fprintf(f.stdout, "Discard %d version(s) of %d session(s)? They will never reach the relay. [y/N] ", total, len(pick))
				answer, _ := bufio.NewReader(f.stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
					fmt.Fprintln(f.stdout, "nothing discarded")
					return nil
				}
			}
			failed := 0
			for _, b := range pick {
				n, err := app.DiscardBacklog(cmd.Context(), env, b.Session)
				if err != nil {
					failed++
					fmt.Fprintf(f.stderr, "happy: %s: not discarded: %v\n", b.Session, err)
					continue
				}
				fmt.Fprintf(f.stdout, "%s: %d version(s) discarded\n", b.Session, n)
			}
			if failed > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d session(s) not discarded", failed)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "every session with versions waiting")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for a confirmation")
	return cmd
}

// indexBacklog finds the session named name (its key or its relay id).
func indexBacklog(list []app.Backlog, name string) int {
	for i, b := range list {
		if b.Session == name || (b.RelayID != "" && b.RelayID == name) {
			return i
		}
	}
	return -1
}

// outboxEnv is the environment of the outbox commands: the home only.
func outboxEnv(f *factory) (app.Env, error) {
	h, err := f.home()
	if err != nil {
		return app.Env{}, &exitError{code: exitFailed, err: err}
	}
	log, _ := f.log("outbox")
	return app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Now: f.now}, nil
}
