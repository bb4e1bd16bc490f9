//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/internal/fdlimit"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/bench"
)

// benchOptions are the flags every `happy server bench` command shares.
type benchOptions struct {
	url   string
	token string
	pid   int
	json  bool
}

// newServerBenchCmd builds `happy server bench`: load generators against a
// running relay (ours or the reference), through its public contract only.
func newServerBenchCmd(f *factory) *cobra.Command {
	opts := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a running relay: ingest, fan-out, idle sockets, RPC round trips",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		Long: `Drive a running relay (happy's or the reference relay) through its public
contract only: the HTTP routes and Socket.IO at /v1/updates. Each command
prints p50/p90/p99/max latency, throughput and errors; with --pid of a relay
process on this machine also the relay's CPU use and resident memory (from
/proc; CPU in percent of one core). --json prints one JSON object instead,
for scripts.

The exit status is 0 for a run without errors, 1 when any operation
failed (the first error is printed; 50 failures in a row stop the run, and a
post unanswered 5 s after the run's end is cut off), 2 for a flag out of
its range (a post is at most 8 MiB, what the relay takes), and
130 when interrupted (the partial result is printed).

An account is created with a fresh key through the auth routes unless
--token names one.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&opts.url, "url", "http://127.0.0.1:3005", "relay base URL")
	pf.StringVar(&opts.token, "token", "", "bearer token of the account to use (default: a new account)")
	pf.IntVar(&opts.pid, "pid", 0, "process id of the relay, to report its CPU and memory (Linux)")
	pf.BoolVar(&opts.json, "json", false, "print the result as JSON")

	var ing bench.IngestOptions
	ingest := &cobra.Command{
		Use:   "ingest",
		Short: "Concurrent clients POST message batches to their own sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRanges(
				intIn("--clients", ing.Clients, 1, maxClients), intIn("--batch", ing.Batch, 1, 100),
				intIn("--size", ing.Size, 1, maxSize), durationIn("--duration", ing.Duration, time.Millisecond, maxDuration),
				postSize(ing.Batch, ing.Size)); err != nil {
				return err
			}
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.Ingest(ctx, t, ing)
			})
		},
	}
	ingest.Flags().IntVar(&ing.Clients, "clients", 8, "concurrent clients, each on its own session (1 to 10000)")
	ingest.Flags().IntVar(&ing.Batch, "batch", 50, "messages per POST (1 to 100, what the relay takes)")
	ingest.Flags().IntVar(&ing.Size, "size", 1024, "bytes of content per message (1 to 1048576)")
	ingest.Flags().DurationVar(&ing.Duration, "duration", 10*time.Second, "how long to post")

	var fan bench.FanoutOptions
	fanout := &cobra.Command{
		Use:   "fanout",
		Short: "Sockets on one session (or, with --account, an account's apps) receive posted messages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRanges(
				intIn("--sockets", fan.Sockets, 1, maxSockets), intIn("--messages", fan.Messages, 1, maxMessages),
				intIn("--size", fan.Size, 1, maxSize), durationIn("--gap", fan.Gap, 0, maxDuration)); err != nil {
				return err
			}
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.Fanout(ctx, t, fan)
			})
		},
	}
	fanout.Flags().IntVar(&fan.Sockets, "sockets", 100, "sockets receiving the messages (1 to 100000)")
	fanout.Flags().IntVar(&fan.Messages, "messages", 1000, "messages posted, one per request (1 to 1000000)")
	fanout.Flags().IntVar(&fan.Size, "size", 1024, "bytes of content per message (1 to 1048576)")
	fanout.Flags().DurationVar(&fan.Gap, "gap", 0, "pause between posts")
	fanout.Flags().BoolVar(&fan.Account, "account", false, "user-scoped sockets (an app's: every session of the account) instead of session-scoped ones")

	var so bench.SocketsOptions
	sockets := &cobra.Command{
		Use:   "sockets",
		Short: "Ramp idle sockets to N; with --pid, the relay's memory per socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRanges(intIn("--sockets", so.Sockets, 1, maxSockets), durationIn("--hold", so.Hold, time.Millisecond, maxDuration)); err != nil {
				return err
			}
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.Sockets(ctx, t, so)
			})
		},
	}
	sockets.Flags().IntVar(&so.Sockets, "sockets", 1000, "idle sockets to connect (1 to 100000)")
	sockets.Flags().DurationVar(&so.Hold, "hold", 2*time.Second, "how long to hold them before the memory is read")

	var ro bench.RPCOptions
	rpc := &cobra.Command{
		Use:   "rpc",
		Short: "Round trips through the relay: one socket registers a method, another calls it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRanges(intIn("--calls", ro.Calls, 1, maxCalls), intIn("--concurrency", ro.Concurrency, 1, 64)); err != nil {
				return err
			}
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.RPC(ctx, t, ro)
			})
		},
	}
	rpc.Flags().IntVar(&ro.Calls, "calls", 5000, "round trips (1 to 100000000)")
	rpc.Flags().IntVar(&ro.Concurrency, "concurrency", 1, "calls in flight at once (1 to 64, what the relay lets a socket have waiting)")

	cmd.AddCommand(ingest, fanout, sockets, rpc)
	return cmd
}

// The bounds of the bench flags: what a relay on one machine can be asked
// without the generator itself running out of memory or descriptors
// first (a fan-out keeps 20 bytes per message; every socket is a
// descriptor on both sides).
const (
	maxClients  = 10_000
	maxSize     = 1 << 20
	maxSockets  = 100_000
	maxMessages = 1_000_000
	maxCalls    = 100_000_000
	maxDuration = 24 * time.Hour
)

// intIn refuses v outside [lo, hi] for flag name ("" when it is in).
func intIn(name string, v, lo, hi int) string {
	if v < lo || v > hi {
		return fmt.Sprintf("%s is %d, want %d to %d", name, v, lo, hi)
	}
	return ""
}

// durationIn refuses d outside [lo, hi] for flag name.
func durationIn(name string, d, lo, hi time.Duration) string {
	if d < lo || d > hi {
		return fmt.Sprintf("%s is %s, want %s to %s", name, d, lo, hi)
	}
	return ""
}

// maxPost is the largest body happy's relay takes by default (a relay
// set otherwise answers 413, counted as failed posts), and postOverhead the bytes a message adds
// to its content in a post (its JSON and localId).
const maxPost, postOverhead = server.DefaultMaxBodyBytes, 96

// postSize refuses a batch whose post the relay would refuse as too large.
func postSize(batch, size int) string {
	if n := int64(batch) * int64(size+postOverhead); n > maxPost {
		return fmt.Sprintf("--batch %d × --size %d make posts of about %d bytes; the relay takes at most %d", batch, size, n, maxPost)
	}
	return ""
}

// checkURL refuses a relay URL the generator cannot use: an http or
// https URL with a host, without query or fragment (a path is kept: a
// relay behind a prefix).
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "") {
		err = errors.New("want http://host:port or https://host[:port], without query or fragment")
	}
	if err != nil {
		return &usageError{err: fmt.Errorf("--url %q: %v", raw, err)}
	}
	return nil
}

// checkRanges returns a usage error (exit status 2) for the first
// complaint of intIn or durationIn, nil when there is none.
func checkRanges(complaints ...string) error {
	for _, c := range complaints {
		if c != "" {
			return &usageError{err: errors.New(c)}
		}
	}
	return nil
}

// runBench runs one generator until it ends or SIGINT/SIGTERM, and prints
// its result, also when the run failed part way (then before the error).
// Exit status: 1 for a failure or any failed operation, 130 when
// interrupted (the partial result printed).
func runBench(ctx context.Context, f *factory, opts *benchOptions, run func(context.Context, bench.Target) (bench.Result, error)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if opts.pid < 0 {
		return &usageError{err: fmt.Errorf("--pid is %d, want a process id", opts.pid)}
	}
	if err := checkURL(opts.url); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Thousands of sockets need as many descriptors on this side too.
	_, _, _ = fdlimit.Raise()
	res, err := run(ctx, bench.Target{URL: opts.url, Token: opts.token, Pid: opts.pid})
	if res.Seconds > 0 {
		if perr := printBench(f, opts, res); perr != nil && err == nil {
			err = perr
		}
	}
	switch {
	case res.Seconds == 0 && ctx.Err() != nil:
		return &exitError{code: exitInterrupted, err: errors.New("bench: interrupted before the run began")}
	case res.Stopped == "interrupted" || ctx.Err() != nil:
		return &exitError{code: exitInterrupted}
	case err != nil:
		return &exitError{code: exitFailed, err: err}
	case res.Stopped != "":
		return &exitError{code: exitFailed, err: fmt.Errorf("bench: stopped early: %s; first error: %s", res.Stopped, res.FirstError)}
	case res.Errors > 0:
		return &exitError{code: exitFailed, err: fmt.Errorf("bench: %d operations failed; first error: %s", res.Errors, res.FirstError)}
	}
	return nil
}

// printBench writes res as --json asks.
func printBench(f *factory, opts *benchOptions, res bench.Result) error {
	if opts.json {
		return json.NewEncoder(f.stdout).Encode(res)
	}
	_, err := fmt.Fprint(f.stdout, res.String())
	return err
}
