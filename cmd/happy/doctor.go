//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/app"
)

func newDoctorCmd(f *factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
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

It changes nothing. Exit status 1 when a check fails (warnings do not fail).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := f.home()
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			log, logErr := f.log("doctor")
			env := app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Now: f.now}
			var agents []app.AgentProbe
			for _, a := range []agentExe{claudeExe, codexExe, geminiExe, opencodeExe} {
				p := app.AgentProbe{Name: a.def, Fix: "install " + a.title + ", or set " + a.env + " to its executable"}
				path, err := a.find(f, "")
				if err != nil {
					p.Missing, _, _ = strings.Cut(strings.TrimPrefix(err.Error(), a.title+" not found: "), "; ")
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
	return cmd
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
