//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/app"
)

// controlErr maps a control call's error to an exit code: a refusal by the
// session (stale call id, …) is 1, an unusable relay 3.
func controlErr(err error) error {
	var ee *exitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		return err
	case errors.Is(err, app.ErrRPC), errors.Is(err, app.ErrNoSession), errors.Is(err, app.ErrAmbiguousSession):
		return &exitError{code: exitFailed, err: err}
	default:
		return &exitError{code: exitRelay, err: err}
	}
}

// errEnded is returned for control of a session whose process has ended:
// nothing would answer, so the call fails at once instead of waiting for the
// relay's RPC timeout.
var errEnded = errors.New("the session has ended: nothing is running to answer")

// withLiveSession is withSession for calls that need the session's process.
func withLiveSession(cmd *cobra.Command, f *factory, name, ref string, fn func(conn *app.Conn, o app.Opened) error) error {
	return withSession(cmd, f, name, ref, func(conn *app.Conn, o app.Opened) error {
		switch st := o.State(f.now()); {
		case st == app.StateStale:
			return &exitError{code: exitStale, err: errors.New(staleText(o, f.now()) + ": nothing is running to answer")}
		case app.Ended(st):
			return &exitError{code: exitFailed, err: fmt.Errorf("%s: %w", o.Info.ID, errEnded)}
		}
		return fn(conn, o)
	})
}

// staleText says what is known of a stale session o at now: how long no
// heartbeat came, since when, and the two causes a reader cannot tell
// apart (its happy stopped, or the network between it and the relay is
// cut).
func staleText(o app.Opened, now time.Time) string {
	last := o.LastHeartbeat()
	return fmt.Sprintf("session %s is stale: no heartbeat for %s (since %s; stale after %s): its happy stopped, or cannot reach the relay",
		o.Info.ID, now.Sub(last).Truncate(time.Second), last.Local().Format(time.DateTime), app.StaleAfter)
}

// withSession connects, finds SESSION and runs fn.
func withSession(cmd *cobra.Command, f *factory, name, ref string, fn func(conn *app.Conn, o app.Opened) error) error {
	ctx := cmd.Context()
	conn, _, err := connect(ctx, f, name)
	if err != nil {
		return err
	}
	defer conn.Close()
	o, err := app.FindSession(ctx, conn, ref)
	if err != nil {
		return sessionErr(err)
	}
	return controlErr(fn(conn, o))
}

func newSendCmd(f *factory) *cobra.Command {
	var files []string
	var wait bool
	var timeout, receiptTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "send SESSION [TEXT]",
		Short: "Send the next prompt to a running session",
		Long: `Send TEXT as the next prompt of SESSION. Each --file is checked (its type is
read from its bytes; an image must decode whole), encrypted with the session's
key and uploaded to the relay first; the prompt references the uploads, and the
running session downloads them and hands them to its agent. A file may be at
most 10 MiB less 40 bytes. TEXT may be left out when there are files.

It prints the prompt's receipts as they come: stored (the relay's seq for
its row), received by the session, handed to the agent, the agent started
(its first event of the turn). It waits for them at most --receipt-timeout
and then says which step has not come: a prompt that waits for the running
turn to end is received but not handed yet. The prompt stays sent whatever
the receipts say (exit 0).

  sent msg_…
  stored (seq 12)
  received by the session
  handed to claude
  claude started

With --wait the receipts go to stderr and it returns when that prompt's
turn has ended and prints its answer: exit 0 completed, 1 failed, rejected or cancelled (or the session
ended first), 5 the session went stale, 124 --timeout passed first.
Scripts and other agents drive a session this way.`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		ValidArgsFunction: completeSessions(f, true, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := ""
			if len(args) == 2 {
				text = args[1]
			}
			if strings.TrimSpace(text) == "" && len(files) == 0 {
				return &usageError{err: errors.New("the prompt is empty")}
			}
			return withLiveSession(cmd, f, "send", args[0], func(conn *app.Conn, o app.Opened) error {
				if o.Metadata.OneShot {
					return &exitError{code: exitFailed, err: fmt.Errorf("%s runs one prompt only (it was started with -p): start a session without -p, or continue this one with happy resume %s -p PROMPT once it has ended", o.Info.ID, o.Info.ID)}
				}
				if wait {
					if ref, err := app.IsReferenceSession(cmd.Context(), conn, o); err != nil {
						return err
					} else if ref {
						return &exitError{code: exitFailed, err: fmt.Errorf("%s is run by the reference CLI, whose turns happy cannot tell apart: send without --wait, then happy wait %s", o.Info.ID, o.Info.ID)}
					}
				}
				var blobs []app.Blob
				for _, path := range files {
					b, err := app.UploadFile(cmd.Context(), conn, o, path)
					if err != nil {
						return &exitError{code: exitFailed, err: fmt.Errorf("attach %s: %w", path, err)}
					}
					blobs = append(blobs, b)
				}
				sent, err := app.SendPrompt(cmd.Context(), conn, o, text, blobs, f.now())
				if err != nil {
					return err
				}
				id := sent.ID
				if !wait {
					fmt.Fprintf(f.stdout, "sent %s\n", id)
					printReceipts(cmd.Context(), f, f.stdout, "", conn, o, sent, receiptTimeout)
					return nil
				}
				fmt.Fprintf(f.stderr, "happy: sent %s; waiting for its turn to end\n", id)
				return waitResult(cmd.Context(), f, timeout, func(ctx context.Context) (app.TurnOutcome, error) {
					printReceipts(ctx, f, f.stderr, "happy: ", conn, o, sent, receiptTimeout)
					return app.WaitTurn(ctx, conn, o, id, f.now)
				})
			})
		},
	}
	cmd.Flags().StringArrayVar(&files, "file", nil, "attach a file (repeatable): uploaded encrypted, then referenced by the prompt")
	cmd.Flags().BoolVar(&wait, "wait", false, "return when the prompt's turn has ended, print its answer, and exit with how it went")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait: give up after this long (exit 124); 0 waits as long as it takes")
	cmd.Flags().DurationVar(&receiptTimeout, "receipt-timeout", 5*time.Second, "wait this long at most for the session's receipts; 0 prints the relay's only")
	return cmd
}

// printReceipts prints a sent prompt's receipts to w (each line after
// prefix) as the session writes them, for at most timeout (0: the relay's
// only), and then what has not come, on f.stderr. It returns early when
// ctx ends or the session stops running.
func printReceipts(ctx context.Context, f *factory, w io.Writer, prefix string, conn *app.Conn, o app.Opened, sent app.Sent, timeout time.Duration) {
	fmt.Fprintf(w, "%sstored (seq %d)\n", prefix, sent.Seq)
	if sent.Reference {
		fmt.Fprintf(w, "%s(the reference CLI runs this session: it sends no receipts)\n", prefix)
		return
	}
	if timeout <= 0 {
		return
	}
	agentName := o.Metadata.Flavor
	if agentName == "" {
		agentName = "the agent"
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var shown app.Receipt
	last, state, err := app.WatchReceipts(wctx, conn, o, sent.ID, f.now, func(r app.Receipt) {
		if r.Received != 0 && shown.Received == 0 {
			fmt.Fprintf(w, "%sreceived by the session\n", prefix)
		}
		if r.Handed != 0 && shown.Handed == 0 {
			fmt.Fprintf(w, "%shanded to %s\n", prefix, agentName)
		}
		if r.Started != 0 && shown.Started == 0 {
			fmt.Fprintf(w, "%s%s started\n", prefix, agentName)
		}
		shown = r
	})
	switch {
	case err == nil || ctx.Err() != nil:
		return
	case errors.Is(err, app.ErrSessionOver):
		fmt.Fprintf(f.stderr, "happy: session %s is %s: %s\n", o.Info.ID, state, missingReceipt(last, agentName))
	case errors.Is(err, context.DeadlineExceeded):
		fmt.Fprintf(f.stderr, "happy: after %s, %s\n", timeout, missingReceipt(last, agentName))
	default:
		fmt.Fprintf(f.stderr, "happy: receipts not read: %v\n", err)
	}
}

// missingReceipt says which step of a prompt has not come yet.
func missingReceipt(r app.Receipt, agentName string) string {
	switch {
	case r.Received == 0:
		return "the session has not received the prompt (its happy may be older than receipts, or cannot reach the relay)"
	case r.Handed == 0:
		return "the prompt waits for the running turn to end before " + agentName + " gets it"
	default:
		return agentName + " has not started on the prompt yet"
	}
}

// exitTimeout: a wait's --timeout passed first (as timeout(1)).
const exitTimeout = 124

// waitResult runs a wait bounded by timeout (0: none), prints the turn's
// answer and maps how it went to the exit status: 0 completed (or idle), 1
// failed, rejected, cancelled or the session ended first, 5 stale, 124
// timed out.
func waitResult(ctx context.Context, f *factory, timeout time.Duration, wait func(context.Context) (app.TurnOutcome, error)) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	out, err := wait(ctx)
	switch {
	case err != nil && timeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &exitError{code: exitTimeout, err: fmt.Errorf("still waiting after %s", timeout)}
	case errors.Is(err, app.ErrSessionOver) && out.State == app.StateStale:
		return &exitError{code: exitStale, err: err}
	case errors.Is(err, app.ErrSessionOver):
		return &exitError{code: exitFailed, err: err}
	case err != nil:
		return err
	}
	if out.FinalText != "" {
		fmt.Fprintln(f.stdout, out.FinalText)
	}
	switch out.Status {
	case "", "completed":
		return nil
	default:
		return &exitError{code: exitFailed, err: fmt.Errorf("the turn %s", out.Status)}
	}
}

func newWaitCmd(f *factory) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "wait SESSION",
		Short: "Wait until a session is idle (no turn runs) and print its last answer",
		Long: `Wait until SESSION is idle: its last prompt's turn has ended (or it has none),
or the session ended. Prints the last turn's answer. Exit 0 idle (or ended), 1
the last turn failed or was cancelled, 5 the session went stale, 124 --timeout
passed first.`,
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: completeSessions(f, true, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withSession(cmd, f, "wait", args[0], func(conn *app.Conn, o app.Opened) error {
				return waitResult(cmd.Context(), f, timeout, func(ctx context.Context) (app.TurnOutcome, error) {
					return app.WaitIdle(ctx, conn, o, f.now)
				})
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (exit 124); 0 waits as long as it takes")
	return cmd
}

func newApproveCmd(f *factory) *cobra.Command {
	var always bool
	cmd := &cobra.Command{
		Use:   "approve SESSION CALL_ID",
		Short: "Allow a tool call that waits for permission (once, or --always for the session)",
		Long: `Allow the tool call CALL_ID of SESSION, which waits for permission (happy log
shows waiting calls with their CALL_ID). The first answer wins, whether it comes
from here, another device or the agent's own terminal; a late one fails with
exit status 1.`,
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: completeWaitingCalls(f, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := agent.DecisionOnce
			if always {
				d = agent.DecisionAlways
			}
			return withLiveSession(cmd, f, "approve", args[0], func(conn *app.Conn, o app.Opened) error {
				if err := app.Approve(cmd.Context(), conn, o, args[1], d, ""); err != nil {
					return err
				}
				how := "once"
				if always {
					how = "and matching calls for the rest of the session"
				}
				fmt.Fprintf(f.stdout, "approved %s in session %s (%s)\n", args[1], o.Info.ID, how)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&always, "always", false, "also allow matching calls for the rest of the session")
	return cmd
}

func newDenyCmd(f *factory) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:               "deny SESSION CALL_ID",
		Short:             "Reject a tool call that waits for permission",
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: completeWaitingCalls(f, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withLiveSession(cmd, f, "deny", args[0], func(conn *app.Conn, o app.Opened) error {
				if err := app.Approve(cmd.Context(), conn, o, args[1], agent.DecisionReject, reason); err != nil {
					return err
				}
				fmt.Fprintf(f.stdout, "denied %s in session %s\n", args[1], o.Info.ID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown to the agent and kept in the transcript")
	return cmd
}

func newAnswerCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:               "answer SESSION CALL_ID LABEL…",
		Short:             "Answer a question the agent asked (one label per question, in order; a,b for several)",
		Args:              usageArgs(cobra.MinimumNArgs(3)),
		ValidArgsFunction: completeWaitingCalls(f, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			answers := make([][]string, 0, len(args)-2)
			for _, a := range args[2:] {
				var labels []string
				for _, l := range strings.Split(a, ",") {
					if l = strings.TrimSpace(l); l != "" {
						labels = append(labels, l)
					}
				}
				if len(labels) == 0 {
					return &usageError{err: fmt.Errorf("empty answer %q", a)}
				}
				answers = append(answers, labels)
			}
			return withLiveSession(cmd, f, "answer", args[0], func(conn *app.Conn, o app.Opened) error {
				if err := app.Answer(cmd.Context(), conn, o, args[1], answers); err != nil {
					return err
				}
				fmt.Fprintf(f.stdout, "answered %s in session %s\n", args[1], o.Info.ID)
				return nil
			})
		},
	}
}

func newAbortCmd(f *factory) *cobra.Command {
	return &cobra.Command{
		Use:               "abort SESSION",
		Short:             "Abort the running turn of a session (waiting permissions are rejected)",
		Args:              usageArgs(cobra.ExactArgs(1)),
		ValidArgsFunction: completeSessions(f, true, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withLiveSession(cmd, f, "abort", args[0], func(conn *app.Conn, o app.Opened) error {
				if err := app.Abort(cmd.Context(), conn, o); err != nil {
					return err
				}
				fmt.Fprintf(f.stdout, "aborted the running turn of session %s (waiting permissions rejected)\n", o.Info.ID)
				return nil
			})
		},
	}
}
