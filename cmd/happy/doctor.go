//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/daemon"
	"github.com/happy-dev/happy/internal/home"
)

func newDoctorCmd(f *factory) *cobra.Command {
	var asJSON bool
	var eventsAddrs []string
	cmd := &cobra.Command{
		Use:   "doctor [--json] | doctor SESSION [--events ADDR]",
		Short: "Check the agents, the relay, the account, the clock, the outbox, orphaned sessions and the logs",
		Long: `Check what happy needs, each with what was seen and, when it is not ok, the fix:

  agent …   each agent found (as its command would find it) and its --version
  relay     the relay answers (and its version)
  clock     the difference between this machine's clock and the relay's
  account   logged in, and the relay accepts the account
  outbox    record versions still waiting for the relay
  orphans   sessions left running by a happy that died
  logs      the size of the log folder
  platform  guarantees this operating system lacks

It changes nothing. Exit status 1 when a check fails (warnings do not fail).

With SESSION (a relay session id, or a unique prefix of one), say in one line
what that session, running on this machine, is doing: whether its agent runs,
its turn, the agent's last event, the tools running, what waits for a person,
and when the idle watch (--idle-timeout) would interrupt a silent turn. It asks
the session's local event API: a session the daemon started always serves one;
for a session started in a terminal with --events-listen ADDR, pass
--events ADDR. Exit status 1 when no running happy serves the session.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			if len(args) == 1 {
				return doctorSession(cmd, f, h, args[0], eventsAddrs)
			}
			log, logErr := f.log("doctor")
			env := app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Now: f.now}
			var agents []app.AgentProbe
			pathNote, pathShown := " ("+app.PathOf(f.getenv)+")", false
			for _, a := range []agentExe{claudeExe, codexExe, geminiExe, opencodeExe} {
				p := app.AgentProbe{Name: a.def, Fix: "install " + a.title + ", or set " + a.env + " to its executable"}
				path, err := a.find(f, "")
				if err != nil {
					p.Missing, _, _ = strings.Cut(strings.TrimPrefix(err.Error(), a.title+" not found: "), "; ")
					// The PATH searched is shown once, with the first agent
					// missing from it.
					if trimmed, ok := strings.CutSuffix(p.Missing, pathNote); ok {
						if pathShown {
							p.Missing = trimmed + " either"
						}
						pathShown = true
					}
				} else {
					p.Path = path
				}
				agents = append(agents, p)
			}
			checks := app.Doctor(cmd.Context(), env, app.DoctorOptions{Agents: agents})
			if logErr != nil {
				checks = append(checks, app.Check{Name: "log settings", Status: app.CheckWarn, Detail: logErr.Error(), Fix: "fix the variable; the defaults apply meanwhile"})
			}
			failed := 0
			for _, c := range checks {
				if c.Status == app.CheckFail {
					failed++
				}
			}
			if asJSON {
				enc := json.NewEncoder(f.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(checks); err != nil {
					return err
				}
			} else {
				printChecks(f, checks)
			}
			if failed > 0 {
				return &exitError{code: exitFailed, err: fmt.Errorf("%d check(s) failed", failed)}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as a JSON array of {name, status, detail, fix}")
	cmd.Flags().StringArrayVar(&eventsAddrs, "events", nil, "with SESSION: also ask the local event API at this loopback `ADDR` (a session's --events-listen; repeatable)")
	return cmd
}

// doctorSession prints the one line of happy doctor SESSION: it asks the
// local event APIs of --events and of the sessions the home's daemon runs.
func doctorSession(cmd *cobra.Command, f *factory, h home.Dir, sess string, addrs []string) error {
	if st, err := daemon.ReadState(h); err == nil {
		for _, c := range st.Sessions {
			if c.Events != "" && (c.SessionID == "" || strings.HasPrefix(c.SessionID, sess)) {
				addrs = append(addrs, c.Events)
			}
		}
	}
	log, _ := f.log("doctor")
	env := app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Now: f.now}
	st, err := app.SessionStatus(cmd.Context(), env, sess, addrs)
	if err != nil {
		return &exitError{code: exitFailed, err: fmt.Errorf("session %s: %w; a session started in a terminal serves its status only with --events-listen ADDR (then: happy doctor %s --events ADDR)", sess, err, sess)}
	}
	fmt.Fprintln(f.stdout, app.DescribeStatus(st))
	return nil
}

// printChecks prints one line per check, and its fix indented under it.
func printChecks(f *factory, checks []app.Check) {
	width := 0
	for _, c := range checks {
		width = max(width, len(c.Name))
	}
	for _, c := range checks {
		fmt.Fprintf(f.stdout, "%-4s  %-*s  %s\n", c.Status, width, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(f.stdout, "      %s  fix: %s\n", strings.Repeat(" ", width), c.Fix)
		}
	}
}
