//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// connect opens the relay for a reading or controlling command: it never
// creates an account, and relay or login problems exit with code 3.
func connect(ctx context.Context, f *factory, name string) (*app.Conn, app.Env, error) {
	log, _ := f.log(name)
	h, err := f.home()
	if err != nil {
		return nil, app.Env{}, &exitError{code: exitRelay, err: err}
	}
	env := app.Env{Home: h, Getenv: f.getenv, Log: log.Logger, Stderr: f.stderr, Now: f.now}
	conn, err := app.Connect(ctx, env, app.ConnectOptions{NoResume: true})
	if err != nil {
		return nil, env, &exitError{code: exitRelay, err: err}
	}
	return conn, env, nil
}

func newSessionsCmd(f *factory) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the account's sessions (decrypted titles, agent, path, state, last activity)",
		Long: `List the account's sessions, newest activity first, with their decrypted
title, agent, folder and state:

  running   a happy process runs it (its heartbeat is fresh)
  ended     it ended (its happy ended it, or the next happy on the same
            home settled it after a crash)
  archived  someone archived it (happy archive)
  stale     still marked running, but no heartbeat for more than 90s: its
            happy stopped and no happy on its home has settled it yet, or it
            cannot reach the relay`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			conn, _, err := connect(ctx, f, "sessions")
			if err != nil {
				return err
			}
			defer conn.Close()
			list, err := app.ListSessions(ctx, conn, f.now())
			if err != nil {
				return &exitError{code: exitRelay, err: err}
			}
			if asJSON {
				if list == nil {
					list = []app.SessionSummary{}
				}
				return writeJSON(f.stdout, list)
			}
			tw := tabwriter.NewWriter(f.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tAGENT\tSTATE\tLAST ACTIVITY\tTITLE\tPATH")
			for _, s := range list {
				title := s.Title
				if s.Error != "" {
					title = "(unreadable: " + s.Error + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Agent, s.State, s.LastActivity.Local().Format(time.DateTime), title, s.Path)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newLogCmd(f *factory) *cobra.Command {
	var asJSON, events, follow bool
	var interval, staleTimeout time.Duration
	cmd := &cobra.Command{
		Use:               "log SESSION",
		ValidArgsFunction: completeSessions(f, false, false),
		Short:             "Print a session's decrypted transcript (readable, --json document, or --events flat stream)",
		Long: `Print the decrypted transcript of SESSION (a relay session id, or a unique
prefix of one: happy sessions lists them).

  default   a readable rendering: prompts, answers, tool calls with CALL_IDs,
            permission decisions, subagents, todos
  --json    the transcript document {session, messages, children, todos, dropped}
  --events  the flat append-only event stream (turn-start, text, tool-call-start,
            permission-request, permission-response, tool-call-end, turn-end, …)

A stale session (still marked running, but no heartbeat for more than 90s:
its happy stopped, or cannot reach the relay) is printed as it stands, with
how long its heartbeat has been missing; its tools still running and its
unfinished message are shown as interrupted (the stored transcript is left
as it is).

With --follow, what is new is printed as it arrives until the session ends (in
the readable layout: each part once it is settled, a text once the agent went
on past it, a streaming text as it grows, from the live text the session
sends, a tool that waits for a person when it starts waiting);
then a last line on stderr says how it ended. A session that goes stale is
followed on (a network cut heals, and the next happy on its home ends a
session whose happy stopped): a line on stderr says so, and another when its
heartbeat comes back. --stale-timeout D stops following once no heartbeat came
for D. Exit status: 0 the session ended or was archived, 5 no heartbeat for
--stale-timeout, 130 interrupted (Ctrl-C).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON && events {
				return &usageError{err: errors.New("--json and --events exclude each other")}
			}
			ctx, _, stop := signalContext(cmd.Context())
			defer stop()
			conn, _, err := connect(ctx, f, "log")
			if err != nil {
				return err
			}
			defer conn.Close()
			o, err := app.FindSession(ctx, conn, args[0])
			if err != nil {
				return sessionErr(err)
			}
			if asJSON && !follow {
				// Streamed: what it holds does not grow with the session.
				t, err := app.WriteTranscriptJSON(ctx, conn, o, f.stdout)
				if errors.Is(err, app.ErrRelayRead) {
					return &exitError{code: exitRelay, err: err}
				} else if err != nil {
					return err
				}
				// The document lists the dropped inputs; a script reading
				// only the exit status and stderr learns of them too.
				warnDropped(f, t)
				warnStale(f, o, o.State(f.now()))
				return nil
			}
			rb, after, err := app.ReadTranscript(ctx, conn, o, app.ReadOptions{})
			if err != nil {
				return &exitError{code: exitRelay, err: err}
			}
			if !follow {
				t := rb.Transcript()
				st := o.State(f.now())
				switch {
				case events:
					warnDropped(f, t)
					warnStale(f, o, st)
					return writeEvents(f.stdout, export.Flat(t), nil)
				default:
					return export.Text(f.stdout, t, logTextOptions(f, o, t.Session, st))
				}
			}
			if !asJSON && !events {
				root := rb.Transcript().Session
				if err := export.Header(f.stdout, root, logTextOptions(f, o, root, o.State(f.now()))); err != nil {
					return err
				}
			}
			return followLog(ctx, f, conn, o, rb, after, followOptions{asJSON: asJSON || events, interval: interval, staleTimeout: staleTimeout})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the transcript document")
	cmd.Flags().BoolVar(&events, "events", false, "print the flat event stream (JSON lines)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until the session ends")
	cmd.Flags().DurationVar(&staleTimeout, "stale-timeout", 0, "with --follow, stop (exit 5) once the session had no heartbeat for this long (0: follow a stale session until it ends)")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "how often --follow checks the relay")
	_ = cmd.Flags().MarkHidden("interval")
	return cmd
}

// writeEvents prints flat events as JSON lines, skipping ids in seen (and
// adding the printed ones to it).
func writeEvents(w io.Writer, evs []export.FlatEvent, seen map[string]bool) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, ev := range evs {
		if seen != nil {
			if seen[ev.ID] {
				continue
			}
			seen[ev.ID] = true
		}
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	return nil
}

// logTextOptions are happy log's readable rendering options for o, whose
// transcript's root session is root, in state st: its title
// (app.Opened.TitleOf), a stale or ended session's open parts show as interrupted, and
// a stale one says how long its heartbeat has been missing.
func logTextOptions(f *factory, o app.Opened, root mapper.Session, st string) export.TextOptions {
	opts := export.TextOptions{SessionID: o.Info.ID, Title: o.TitleOf(root), Stopped: app.Ended(st)}
	if st == app.StateStale {
		opts.Status = staleText(o, f.now())
	}
	return opts
}

// warnStale says on stderr that o is stale (state st), for the forms that
// have no room for it on stdout.
func warnStale(f *factory, o app.Opened, st string) {
	if st == app.StateStale {
		fmt.Fprintf(f.stderr, "happy: %s\n", staleText(o, f.now()))
	}
}

// followOptions are happy log --follow's choices.
type followOptions struct {
	asJSON   bool          // JSON lines (--json, --events) rather than readable lines
	interval time.Duration // how often the relay is checked
	// staleTimeout stops following once the session had no heartbeat for
	// this long; 0 follows a stale session until it ends.
	staleTimeout time.Duration
}

// followLog prints the events seen so far, then new ones as they arrive
// (as JSON lines with --json or --events, else as readable lines), until
// the session is over (ended or archived; stale for opts.staleTimeout when
// set) and nothing new came, or ctx ends. Going stale and coming back are
// said on stderr. The last line, on stderr, says how it ended; a stale
// timeout exits with exitStale, an interruption with exitInterrupted.
func followLog(ctx context.Context, f *factory, conn *app.Conn, o app.Opened, rb *session.Readback, after int64, opts followOptions) error {
	interval := opts.interval
	wasStale := false
	warned := 0
	// The readable form is happy log's layout, written as it grows; live
	// text deltas extend the text growing on screen.
	printer := app.NewFollowPrinter(f.stdout, rb, app.FollowPrinterOptions{JSON: opts.asJSON,
		Text: export.TextOptions{SessionID: o.Info.ID, Title: o.TitleOf(rb.Transcript().Session)},
		OnPrint: func(tr mapper.Transcript) {
			if n, r := countDropped(tr); n+r > warned {
				printDropped(f, n, r)
				warned = n + r
			}
		}})
	emit := printer.Print
	if err := emit(false); err != nil {
		return err
	}
	// New rows and live text come over the relay's message stream while
	// it has one; the ticker checks the session's state (stale, ended),
	// and polls for rows on a relay without the stream or once the stream
	// has ended. The buffer holds live deltas while a row is printed.
	rows := make(chan app.RowEvent, 256)
	streamDone := make(chan error, 1)
	sctx, stopStream := context.WithCancel(ctx)
	go func() { streamDone <- app.FollowSessionEvents(sctx, conn, o, after, rows) }()
	streaming := true
	stop := func() {
		if streaming {
			stopStream()
			<-streamDone
			streaming = false
		}
	}
	defer stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return &exitError{code: exitInterrupted}
		case ev := <-rows:
			after = max(after, ev.Seq)
			if ev.LiveErr != nil {
				if lg, _ := f.log("log"); lg != nil {
					lg.Debug().Err(ev.LiveErr).Str("session", o.Info.ID).Msg("live text delta skipped")
				}
			}
			if err := printer.Take(ev); err != nil {
				return err
			}
			continue
		case err := <-streamDone:
			streaming = false
			if err != nil && !errors.Is(err, relay.ErrStreamUnsupported) && ctx.Err() == nil {
				if lg, _ := f.log("log"); lg != nil {
					lg.Info().Err(err).Str("session", o.Info.ID).Msg("message stream ended; polling the relay")
				}
			}
		case <-tick.C:
		}
		o2, err := app.FindSession(ctx, conn, o.Info.ID)
		if err == nil {
			o = o2
		}
		now := f.now()
		st := o.State(now)
		switch stale := st == app.StateStale; {
		case stale && !wasStale:
			follow := "following on until it ends"
			if opts.staleTimeout > 0 {
				follow = fmt.Sprintf("following on until it ends, or for --stale-timeout %s without a heartbeat", opts.staleTimeout)
			}
			fmt.Fprintf(f.stderr, "happy: %s; %s\n", staleText(o, now), follow)
		case !stale && wasStale && !app.Ended(st):
			fmt.Fprintf(f.stderr, "happy: session %s has a heartbeat again\n", o.Info.ID)
		}
		wasStale = st == app.StateStale
		over := st == app.LifecycleEnded || st == app.LifecycleArchived ||
			wasStale && opts.staleTimeout > 0 && now.Sub(o.LastHeartbeat()) >= opts.staleTimeout
		if streaming && !over {
			continue
		}
		// Polling, or the session is over: stop the stream and read what it
		// may not have delivered yet.
		stop()
		_, next, err := app.ReadTranscript(ctx, conn, o, app.ReadOptions{AfterSeq: after, Into: rb})
		if err != nil {
			continue // the relay may come back
		}
		changed := next != after
		after = next
		if changed {
			if err := emit(false); err != nil {
				return err
			}
			continue
		}
		if over {
			if err := emit(true); err != nil {
				return err
			}
			return followEnd(f, o, st)
		}
	}
}

// followEnd prints how a followed session ended and returns the exit status.
func followEnd(f *factory, o app.Opened, state string) error {
	since := ""
	if o.Metadata.LifecycleStateSince > 0 {
		since = " at " + time.UnixMilli(o.Metadata.LifecycleStateSince).Local().Format(time.DateTime)
	}
	switch state {
	case app.LifecycleArchived:
		fmt.Fprintf(f.stderr, "happy: session %s was archived%s\n", o.Info.ID, since)
	case app.StateStale:
		fmt.Fprintf(f.stderr, "happy: %s; stopped following (--stale-timeout)\n", staleText(o, f.now()))
		return &exitError{code: exitStale}
	default:
		fmt.Fprintf(f.stderr, "happy: session %s ended%s\n", o.Info.ID, since)
	}
	return nil
}

// warnDropped tells, on stderr, that a transcript is incomplete: the flat
// event stream has no place for dropped inputs, so they would vanish there.
// Control inputs the session refused (replays and the like) are said
// apart: they were not acted on, and the transcript is whole.
func warnDropped(f *factory, t mapper.Transcript) int {
	n, r := countDropped(t)
	printDropped(f, n, r)
	return n
}

func printDropped(f *factory, dropped, refused int) {
	if dropped > 0 {
		fmt.Fprintf(f.stderr, "happy: warning: %d input(s) were dropped; this transcript is incomplete (happy log --json lists them)\n", dropped)
	}
	if refused > 0 {
		fmt.Fprintf(f.stderr, "happy: warning: %d control input(s) were refused and not acted on: replayed, for another target, too old or unsealed (happy log lists them)\n", refused)
	}
}

// countDropped counts the transcript's dropped inputs and, apart, the
// control inputs it refused (source agent.SourceControl).
func countDropped(t mapper.Transcript) (dropped, refused int) {
	for _, d := range t.Dropped {
		if d.Source == agent.SourceControl {
			refused++
		} else {
			dropped++
		}
	}
	for _, c := range t.Children {
		d, r := countDropped(c)
		dropped, refused = dropped+d, refused+r
	}
	return dropped, refused
}

func sessionErr(err error) error {
	if errors.Is(err, app.ErrNoSession) || errors.Is(err, app.ErrAmbiguousSession) {
		return &exitError{code: exitFailed, err: err}
	}
	return &exitError{code: exitRelay, err: err}
}
