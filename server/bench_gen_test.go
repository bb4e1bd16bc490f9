package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/bench"
)

// Benchmarks driven by the load generator of `happy server bench`
// (server/bench), against a relay in this process (its pid is this
// process's, so the relay figures include the generator) or, for memory,
// in a child process. Each runs its generator once, for a fixed time or
// count, and reports the generator's figures; ns/op means nothing here.

// genTarget is an in-process relay as a bench.Target with a new account.
func genTarget(b *testing.B, cfg Config) (*Server, bench.Target) {
	srv, base := benchRelay(b, cfg, nil)
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(cl.CloseIdleConnections)
	t := bench.Target{URL: base, HTTP: cl}
	tok, err := bench.NewAccount(context.Background(), t)
	if err != nil {
		b.Fatal(err)
	}
	t.Token = tok
	return srv, t
}

// genDuration is how long a timed generator runs
// (HAPPY_BENCH_DURATION, 3 s when unset).
func genDuration() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("HAPPY_BENCH_DURATION")); err == nil && d > 0 {
		return d
	}
	return 3 * time.Second
}

// checkGen fails b on a generator's error or errors, logs its result
// and returns it: checkGen(b)(bench.Ingest(…)).
func checkGen(b *testing.B) func(bench.Result, error) bench.Result {
	return func(r bench.Result, err error) bench.Result {
		b.Helper()
		if err != nil {
			b.Fatal(err)
		}
		if r.Errors != 0 {
			b.Fatalf("%d errors: %s", r.Errors, r)
		}
		b.Log(strings.TrimSpace(r.String()))
		return r
	}
}

// BenchmarkGenIngest: `happy server bench ingest --clients 1|8 --batch 50
// --size 1024`; msg/s of acknowledged (committed) messages and the POST
// p50/p99.
func BenchmarkGenIngest(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			srv, t := genTarget(b, Config{})
			for range b.N {
				r := checkGen(b)(bench.Ingest(context.Background(), t, bench.IngestOptions{Clients: clients, Batch: 50, Size: 1024, Duration: genDuration()}))
				b.ReportMetric(r.Throughput, "msg/s")
				b.ReportMetric(r.Latency.P50, "post-p50-ms")
				b.ReportMetric(r.Latency.P99, "post-p99-ms")
				if cs, ok := srv.st.(interface{ CommitStats() (int64, int64) }); ok {
					commits, appends := cs.CommitStats()
					b.ReportMetric(float64(appends)/float64(max(commits, 1)), "posts/commit")
				}
			}
		})
	}
}

// BenchmarkGenFanout: `happy server bench fanout --sockets 100 --messages
// 2000`: from a message's POST to its delivery on the last of 100
// session-scoped sockets.
func BenchmarkGenFanout(b *testing.B) {
	_, t := genTarget(b, Config{})
	for range b.N {
		r := checkGen(b)(bench.Fanout(context.Background(), t, bench.FanoutOptions{Sockets: 100, Messages: 2000, Size: 1024}))
		b.ReportMetric(r.Latency.P50, "p50-ms")
		b.ReportMetric(r.Latency.P99, "p99-ms")
		b.ReportMetric(r.Throughput, "deliveries/s")
	}
}

// BenchmarkGenFanoutPaced: `happy server bench fanout --sockets 100
// --messages 400 --gap 5ms`: the same delivery at 200 posts a second
// (20,000 deliveries a second), below what the relay can do, so that the
// latency is that of one message rather than of a queue.
func BenchmarkGenFanoutPaced(b *testing.B) {
	_, t := genTarget(b, Config{})
	for range b.N {
		r := checkGen(b)(bench.Fanout(context.Background(), t, bench.FanoutOptions{Sockets: 100, Messages: 400, Size: 1024, Gap: 5 * time.Millisecond}))
		b.ReportMetric(r.Latency.P50, "p50-ms")
		b.ReportMetric(r.Latency.P99, "p99-ms")
		b.ReportMetric(r.Throughput, "deliveries/s")
	}
}

// BenchmarkGenAccountFanout: `happy server bench fanout --account
// --sockets 1000 --messages 500`: deliveries per second to 1,000
// user-scoped sockets of one account.
func BenchmarkGenAccountFanout(b *testing.B) {
	_, t := genTarget(b, Config{})
	for range b.N {
		r := checkGen(b)(bench.Fanout(context.Background(), t, bench.FanoutOptions{Sockets: 1000, Messages: 500, Size: 1024, Account: true, Wait: 30 * time.Second}))
		b.ReportMetric(r.Throughput, "deliveries/s")
		b.ReportMetric(r.Latency.P50, "p50-ms")
		b.ReportMetric(r.Latency.P99, "p99-ms")
	}
}

// BenchmarkGenIdleSockets: `happy server bench sockets --sockets 2000
// --pid RELAY` against a relay child process: its resident memory growth
// per idle socket, and what it is made of: the relay's live heap, heap
// objects, goroutines and goroutine stacks per socket, read after a GC
// while the sockets are held.
func BenchmarkGenIdleSockets(b *testing.B) {
	c, base := startRelayChild(b, b.TempDir(), "NORMAL")
	t := bench.Target{URL: base, Pid: c.cmd.Process.Pid}
	const n = 2000
	for range b.N {
		live0, obj0, gor0, stk0 := c.mem(b)
		var live, obj, gor, stk float64
		r := checkGen(b)(bench.Sockets(context.Background(), t, bench.SocketsOptions{Sockets: n, Hold: 2 * time.Second,
			Held: func() { live, obj, gor, stk = c.mem(b) }}))
		b.ReportMetric(r.Relay.KiBPerSocket, "KiB/socket")
		b.ReportMetric(r.Latency.P99, "connect-p99-ms")
		// The breakdown, from the relay's runtime after a GC.
		b.ReportMetric((live-live0)/n/1024, "heap-KiB/socket")
		b.ReportMetric((obj-obj0)/n, "objects/socket")
		b.ReportMetric((gor-gor0)/n, "goroutines/socket")
		b.ReportMetric((stk-stk0)/n/1024, "stack-KiB/socket")
	}
}

// BenchmarkGenRPC: `happy server bench rpc --calls 3000`: round trips
// through the relay.
func BenchmarkGenRPC(b *testing.B) {
	_, t := genTarget(b, Config{})
	for range b.N {
		r := checkGen(b)(bench.RPC(context.Background(), t, bench.RPCOptions{Calls: 3000, Concurrency: 1}))
		b.ReportMetric(r.Latency.P50, "p50-ms")
		b.ReportMetric(r.Latency.P99, "p99-ms")
		b.ReportMetric(r.Throughput, "calls/s")
	}
}

// BenchmarkGenFairness: account B ingests (1 client, batches of 50 × 1
// KiB) alone, then while account A fans messages out to 1,000 of its own
// sockets as fast as it can post them, against a relay child process (so
// that A's 1,000 client sockets do not share the relay's scheduler).
// Reported: B's msg/s alone (before and after A's load) and under A's
// load, the loaded figure over the mean of the two alone, and A's
// deliveries/s; and where the two cores went while A loaded the relay:
// the relay's CPU (alone and loaded), A's client process's and this
// process's (B's client), in % of one core.
func BenchmarkGenFairness(b *testing.B) {
	relay, base := startRelayChild(b, b.TempDir(), "NORMAL")
	t := bench.Target{URL: base, Pid: relay.cmd.Process.Pid}
	other := t
	tok, err := bench.NewAccount(context.Background(), t)
	if err != nil {
		b.Fatal(err)
	}
	other.Token = tok
	d := genDuration()
	for range b.N {
		alone := checkGen(b)(bench.Ingest(context.Background(), other, bench.IngestOptions{Clients: 1, Batch: 50, Size: 1024, Duration: d}))
		// Account A's sockets and posts run in another process, so that
		// B's client does not share a scheduler with A's 1,000 sockets.
		heavy := startChild(b, "fanout", "HAPPY_SERVER_TEST_URL="+base, "HAPPY_SERVER_TEST_N=1000")
		if l := heavy.line(b); l != "POSTING" {
			b.Fatalf("fan-out child said %q", l)
		}
		aBefore, selfBefore, t0 := procCPU(b, heavy.cmd.Process.Pid), procCPU(b, os.Getpid()), time.Now()
		loaded := checkGen(b)(bench.Ingest(context.Background(), other, bench.IngestOptions{Clients: 1, Batch: 50, Size: 1024, Duration: d}))
		aCPU, selfCPU, wall := procCPU(b, heavy.cmd.Process.Pid)-aBefore, procCPU(b, os.Getpid())-selfBefore, time.Since(t0)
		_ = heavy.stdin.Close()
		var deliveries, secs float64
		if _, err := fmt.Sscanf(heavy.line(b), "DONE %g %g", &deliveries, &secs); err != nil || secs <= 0 {
			b.Fatalf("fan-out child: %v", err)
		}
		// B alone once more, after A: each run stores B's messages in the
		// same database, so a later run is slower by the database's growth
		// alone; loaded is held against the mean of the runs before and
		// after it.
		after := checkGen(b)(bench.Ingest(context.Background(), other, bench.IngestOptions{Clients: 1, Batch: 50, Size: 1024, Duration: d}))
		b.ReportMetric(alone.Throughput, "B-alone-msg/s")
		b.ReportMetric(after.Throughput, "B-alone-after-msg/s")
		b.ReportMetric(loaded.Throughput, "B-loaded-msg/s")
		b.ReportMetric(loaded.Throughput/((alone.Throughput+after.Throughput)/2), "B-ratio")
		b.ReportMetric(deliveries/secs, "A-deliveries/s")
		if alone.Relay != nil && loaded.Relay != nil {
			b.ReportMetric(alone.Relay.CPUPercent, "relay-cpu%-alone")
			b.ReportMetric(loaded.Relay.CPUPercent, "relay-cpu%-loaded")
		}
		b.ReportMetric(100*aCPU.Seconds()/wall.Seconds(), "A-clients-cpu%")
		b.ReportMetric(100*selfCPU.Seconds()/wall.Seconds(), "B-client-cpu%")
	}
}

// procCPU is pid's user+system CPU time so far (/proc/<pid>/stat fields
// 14 and 15, in USER_HZ ticks of 1/100 s).
func procCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / 100
}

// childFanout is account A of BenchmarkGenFairness: a new account's
// HAPPY_SERVER_TEST_N user-scoped sockets receive messages posted as fast
// as the relay takes them. It prints "POSTING" when the posts start and,
// once stdin closes, "DONE <deliveries> <seconds>".
func childFanout() int {
	n, _ := strconv.Atoi(os.Getenv("HAPPY_SERVER_TEST_N"))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	r, err := bench.Fanout(ctx, bench.Target{URL: os.Getenv("HAPPY_SERVER_TEST_URL")}, bench.FanoutOptions{Sockets: n, Messages: 1 << 20, Size: 1024, Account: true,
		Wait: time.Millisecond, Posting: func() { fmt.Println("POSTING") }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fanout:", err)
		return 1
	}
	fmt.Printf("DONE %d %f\n", r.Ops, r.Seconds)
	return 0
}

// BenchmarkGenLinear: one session ingested to 100, 10,000 and 100,000
// message versions (batches of 100 × 512 B), then read back whole through
// GET /v3/sessions/:id/messages pages of 500: the cost per message of
// both should stay flat as the session grows.
func BenchmarkGenLinear(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("versions=%d", n), func(b *testing.B) {
			_, t := genTarget(b, Config{})
			for range b.N {
				sid, err := bench.NewSession(context.Background(), t, t.Token, "linear")
				if err != nil {
					b.Fatal(err)
				}
				body := strings.Repeat("C", 512)
				url := t.URL + "/v3/sessions/" + sid + "/messages"
				t0 := time.Now()
				for i := 0; i < n; i += 100 {
					msgs := make([]sentMessage, min(100, n-i))
					for k := range msgs {
						msgs[k] = sentMessage{LocalID: fmt.Sprintf("r%d.%d", i+k, 1), Content: body}
					}
					if st, err := httpJSON(context.Background(), t.HTTP, "POST", url, t.Token, map[string]any{"messages": msgs}, nil); err != nil || st != 200 {
						b.Fatalf("post: %d %v", st, err)
					}
				}
				ingest := time.Since(t0)
				t0 = time.Now()
				after, got := int64(0), 0
				for {
					var page struct {
						Messages []wire.Message `json:"messages"`
						HasMore  bool           `json:"hasMore"`
					}
					if st, err := httpJSON(context.Background(), t.HTTP, "GET", fmt.Sprintf("%s?after_seq=%d&limit=500", url, after), t.Token, nil, &page); err != nil || st != 200 {
						b.Fatalf("get: %d %v", st, err)
					}
					got += len(page.Messages)
					if len(page.Messages) > 0 {
						after = page.Messages[len(page.Messages)-1].Seq
					}
					if !page.HasMore {
						break
					}
				}
				read := time.Since(t0)
				if got != n {
					b.Fatalf("read back %d messages, want %d", got, n)
				}
				b.ReportMetric(float64(ingest.Microseconds())/float64(n), "ingest-us/msg")
				b.ReportMetric(float64(read.Microseconds())/float64(n), "read-us/msg")
			}
		})
	}
}
