//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/happy-dev/happy/internal/fdlimit"
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
		Long: `Drive a running relay (happy's or the reference relay) through its public
contract only: the HTTP routes and Socket.IO at /v1/updates. Each command
prints p50/p90/p99/max latency, throughput and errors; with --pid of a relay
process on this machine also the relay's CPU use and resident memory (from
/proc). --json prints one JSON object instead, for scripts.

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
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.Ingest(ctx, t, ing)
			})
		},
	}
	ingest.Flags().IntVar(&ing.Clients, "clients", 8, "concurrent clients, each on its own session")
	ingest.Flags().IntVar(&ing.Batch, "batch", 50, "messages per POST (the relay takes 1 to 100)")
	ingest.Flags().IntVar(&ing.Size, "size", 1024, "bytes of content per message")
	ingest.Flags().DurationVar(&ing.Duration, "duration", 10*time.Second, "how long to post")

	var fan bench.FanoutOptions
	fanout := &cobra.Command{
		Use:   "fanout",
		Short: "Sockets on one session (or, with --account, an account's apps) receive posted messages",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.Fanout(ctx, t, fan)
			})
		},
	}
	fanout.Flags().IntVar(&fan.Sockets, "sockets", 100, "sockets receiving the messages")
	fanout.Flags().IntVar(&fan.Messages, "messages", 1000, "messages posted, one per request")
	fanout.Flags().IntVar(&fan.Size, "size", 1024, "bytes of content per message")
	fanout.Flags().DurationVar(&fan.Gap, "gap", 0, "pause between posts")
	fanout.Flags().BoolVar(&fan.Account, "account", false, "user-scoped sockets (an app's: every session of the account) instead of session-scoped ones")

	var so bench.SocketsOptions
	sockets := &cobra.Command{
		Use:   "sockets",
		Short: "Ramp idle sockets to N; with --pid, the relay's memory per socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.Sockets(ctx, t, so)
			})
		},
	}
	sockets.Flags().IntVar(&so.Sockets, "sockets", 1000, "idle sockets to connect")
	sockets.Flags().DurationVar(&so.Hold, "hold", 2*time.Second, "how long to hold them before the memory is read")

	var ro bench.RPCOptions
	rpc := &cobra.Command{
		Use:   "rpc",
		Short: "Round trips through the relay: one socket registers a method, another calls it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), f, opts, func(ctx context.Context, t bench.Target) (bench.Result, error) {
				return bench.RPC(ctx, t, ro)
			})
		},
	}
	rpc.Flags().IntVar(&ro.Calls, "calls", 5000, "round trips")
	rpc.Flags().IntVar(&ro.Concurrency, "concurrency", 1, "calls in flight at once")

	cmd.AddCommand(ingest, fanout, sockets, rpc)
	return cmd
}

// runBench runs one generator until it ends or SIGINT/SIGTERM, and prints
// its result.
func runBench(ctx context.Context, f *factory, opts *benchOptions, run func(context.Context, bench.Target) (bench.Result, error)) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Thousands of sockets need as many descriptors on this side too.
	_, _, _ = fdlimit.Raise()
	res, err := run(ctx, bench.Target{URL: opts.url, Token: opts.token, Pid: opts.pid})
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	if opts.json {
		enc := json.NewEncoder(f.stdout)
		return enc.Encode(res)
	}
	_, err = fmt.Fprint(f.stdout, res.String())
	return err
}
