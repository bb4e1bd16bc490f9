//go:build unix

package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
)

// maxAge is the longest --older-than: a hundred years (far below where a
// time.Duration overflows).
const maxAge = 100 * 365 * 24 * time.Hour

// minAge is the shortest --older-than: session activity is kept to the
// millisecond, but an age below a minute is a typo (1ms for 1m).
const minAge = time.Minute

// plainDuration is one number and one unit of time.ParseDuration, the
// shape whose only possible fault is its size.
var plainDuration = regexp.MustCompile(`^\+?[0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h)$`)

// parseAge reads a --older-than duration: Go's units (90m, 36h) plus d
// (days) and w (weeks) as whole numbers, e.g. 7d or 2w. It must be at least
// minAge and at most maxAge. Errors quote at most 40 bytes of the input.
func parseAge(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	quoted := strconv.Quote(agent.CutUTF8(s, 40))
	if len(s) > 40 {
		quoted += "…"
	}
	if s == "" {
		return 0, fmt.Errorf("--older-than is empty: want an age such as 90m, 36h, 7d or 2w")
	}
	for suffix, unit := range map[string]time.Duration{"d": 24 * time.Hour, "w": 7 * 24 * time.Hour} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			name := map[string]string{"d": "days", "w": "weeks"}[suffix]
			v, err := strconv.ParseUint(n, 10, 64)
			if err == nil && v > uint64(maxAge/unit) {
				return 0, fmt.Errorf("--older-than %s: at most %d %s", quoted, maxAge/unit, name)
			}
			if err != nil || v == 0 {
				return 0, fmt.Errorf("--older-than %s: want a positive whole number of %s (e.g. 7d, 2w) or a duration like 36h", quoted, name)
			}
			return time.Duration(v) * unit, nil
		}
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && plainDuration.MatchString(s), err == nil && d > maxAge:
		// time.ParseDuration refuses what overflows: that is too long too.
		return 0, fmt.Errorf("--older-than %s: at most %d days (%s)", quoted, maxAge/(24*time.Hour), maxAge)
	case err != nil, d <= 0:
		return 0, fmt.Errorf("--older-than %s: want a positive duration such as 90m, 36h, 7d or 2w", quoted)
	case d < minAge:
		return 0, fmt.Errorf("--older-than %s: at least %s (did you mean %dm?)", quoted, minAge, max(1, int64(d/time.Millisecond)))
	}
	return d, nil
}

// bulkOptions are the selectors of happy archive and happy delete.
type bulkOptions struct {
	ended     bool
	olderThan string
	dryRun    bool
}

func (b *bulkOptions) bind(cmd *cobra.Command, verb, over string) {
	cmd.Flags().BoolVar(&b.ended, "ended", false, verb+" every session that is over ("+over+")")
	cmd.Flags().StringVar(&b.olderThan, "older-than", "", verb+" every session whose last activity is older than `AGE` (90m, 36h, 7d, 2w)")
	cmd.Flags().BoolVar(&b.dryRun, "dry-run", false, "list what would be done, do nothing")
}

// manageSessions resolves SESSION arguments or selectors and applies do to
// each session, printing one line per session ("<verb> <id>  <title>").
// Running sessions are refused (named, exit 1); the rest is still done.
func manageSessions(cmd *cobra.Command, f *factory, name, verb string, args []string, b *bulkOptions, includeArchived bool,
	do func(conn *app.Conn, o app.Opened, now time.Time) error) error {
	sel := app.Selector{Ended: b.ended, IncludeArchived: includeArchived}
	if b.olderThan != "" || cmd.Flags().Changed("older-than") {
		d, err := parseAge(b.olderThan)
		if err != nil {
			return &usageError{err: err}
		}
		sel.OlderThan = d
	}
	switch {
	case len(args) > 0 && !sel.Empty():
		return &usageError{err: errors.New("name sessions or use --ended / --older-than, not both")}
	case len(args) == 0 && sel.Empty():
		return &usageError{err: fmt.Errorf("happy %s needs SESSION… or --ended / --older-than", name)}
	}
	ctx := cmd.Context()
	conn, _, err := connect(ctx, f, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	now := f.now()
	var targets []app.Opened
	if len(args) > 0 {
		seen := map[string]bool{}
		for _, ref := range args {
			o, err := app.FindSession(ctx, conn, ref)
			if err != nil {
				return sessionErr(err)
			}
			if !seen[o.Info.ID] { // the same session named twice (or by two prefixes) once
				seen[o.Info.ID] = true
				targets = append(targets, o)
			}
		}
	} else {
		targets, err = app.SelectSessions(ctx, conn, sel, now)
		if err != nil {
			return &exitError{code: exitRelay, err: err}
		}
		if len(targets) == 0 {
			fmt.Fprintln(f.stderr, "happy: no session matches")
			return nil
		}
	}
	var refused []string
	for _, o := range targets {
		if b.dryRun {
			if o.State(now) == app.LifecycleRunning { // what the real run would refuse
				refused = append(refused, o.Info.ID)
				fmt.Fprintf(f.stderr, "happy: %s: %v\n", o.Info.ID, app.ErrRunning)
				continue
			}
			fmt.Fprintf(f.stdout, "would %s %s  %s\n", verb, o.Info.ID, o.Title())
			continue
		}
		if err := do(conn, o, now); err != nil {
			if errors.Is(err, app.ErrRunning) {
				refused = append(refused, o.Info.ID)
				fmt.Fprintf(f.stderr, "happy: %v\n", err)
				continue
			}
			return &exitError{code: exitRelay, err: err}
		}
		fmt.Fprintf(f.stdout, "%sd %s  %s\n", verb, o.Info.ID, o.Title())
	}
	if len(refused) > 0 {
		return &exitError{code: exitFailed, err: fmt.Errorf("%d session(s) not %sd: still running", len(refused), verb)}
	}
	return nil
}

func newArchiveCmd(f *factory) *cobra.Command {
	var b bulkOptions
	cmd := &cobra.Command{
		Use:   "archive [SESSION…] [--ended] [--older-than AGE]",
		Short: "Archive sessions that are over (lifecycleState archived, inactive on the relay)",
		Long: `Archive sessions: their metadata says lifecycleState "archived" (with
lifecycleStateSince, archivedBy and archiveReason) and the relay marks them
inactive; the reference apps move them out of the active list. Messages stay.

Name sessions (ids or unique prefixes, as happy sessions shows them), or
select them: --ended picks every ended or stale session, --older-than AGE
every one whose last activity is older than AGE; both together pick those
that match both. A running session is never archived (exit 1 names it).`,
		ValidArgsFunction: completeSessions(f, false, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			return manageSessions(cmd, f, "archive", "archive", args, &b, false, func(conn *app.Conn, o app.Opened, now time.Time) error {
				return app.Archive(cmd.Context(), conn, o, now)
			})
		},
	}
	b.bind(cmd, "archive", "ended or stale")
	return cmd
}

func newDeleteCmd(f *factory) *cobra.Command {
	var b bulkOptions
	cmd := &cobra.Command{
		Use:   "delete [SESSION…] [--ended] [--older-than AGE]",
		Short: "Delete sessions and all their messages from the relay",
		Long: `Delete sessions from the relay, with all their messages (this cannot be
undone). Name sessions, or select them: --ended picks every ended, stale or
archived session, --older-than AGE every one (not running) whose last
activity is older than AGE; both together pick those that match both. A
running session is never deleted (exit 1 names it). --dry-run lists them.`,
		ValidArgsFunction: completeSessions(f, false, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			return manageSessions(cmd, f, "delete", "delete", args, &b, true, func(conn *app.Conn, o app.Opened, now time.Time) error {
				return app.Delete(cmd.Context(), conn, o, now)
			})
		},
	}
	b.bind(cmd, "delete", "ended, stale or archived")
	return cmd
}
