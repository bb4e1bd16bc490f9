package bench_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/bench"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetTimeout.func1"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"), goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"))
}

// relay serves an in-process relay on a loopback port.
func relay(t *testing.T) bench.Target {
	t.Helper()
	srv, err := server.New(server.Config{DataDir: t.TempDir(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, l); close(done) }()
	cl := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() {
		cl.CloseIdleConnections()
		cancel()
		<-done
		_ = srv.Close()
	})
	// This process is the relay: its /proc entry is the relay's.
	return bench.Target{URL: "http://" + l.Addr().String(), Pid: os.Getpid(), HTTP: cl}
}

// roundTrip checks that r survives the --json encoding with its fields.
func roundTrip(t *testing.T, r bench.Result) map[string]any {
	t.Helper()
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func checkCommon(t *testing.T, r bench.Result, kind, unit string, wantOps int64) {
	t.Helper()
	m := roundTrip(t, r)
	if m["kind"] != kind || m["unit"] != unit {
		t.Errorf("kind/unit %v %v, want %s %s", m["kind"], m["unit"], kind, unit)
	}
	if r.Errors != 0 {
		t.Errorf("errors = %d, want 0", r.Errors)
	}
	if r.Ops < wantOps {
		t.Errorf("ops = %d, want at least %d", r.Ops, wantOps)
	}
	if r.Seconds <= 0 || r.Throughput <= 0 {
		t.Errorf("seconds %v throughput %v, want > 0", r.Seconds, r.Throughput)
	}
	lat := m["latency_ms"].(map[string]any)
	for _, k := range []string{"p50", "p90", "p99", "max", "samples"} {
		if v, _ := lat[k].(float64); v <= 0 {
			t.Errorf("latency %s = %v, want > 0", k, lat[k])
		}
	}
	if r.Latency.P50 > r.Latency.P90 || r.Latency.P90 > r.Latency.P99 || r.Latency.P99 > r.Latency.Max {
		t.Errorf("percentiles out of order: %+v", r.Latency)
	}
	rel, ok := m["relay"].(map[string]any)
	if !ok {
		t.Fatalf("no relay figures with a pid: %v", m)
	}
	if v, _ := rel["rss_kib"].(float64); v <= 0 {
		t.Errorf("relay rss_kib = %v", rel["rss_kib"])
	}
	if _, ok := rel["cpu_percent"].(float64); !ok {
		t.Errorf("relay cpu_percent missing: %v", rel)
	}
}

func TestIngest(t *testing.T) {
	tg := relay(t)
	r, err := bench.Ingest(context.Background(), tg, bench.IngestOptions{Clients: 2, Batch: 5, Size: 100, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, r, "ingest", "msg/s", 10)
	if r.Ops%5 != 0 || int64(r.Latency.Samples)*5 != r.Ops {
		t.Errorf("ops %d for %d posts of 5", r.Ops, r.Latency.Samples)
	}
	if r.Params["clients"] != 2 || r.Params["batch"] != 5 {
		t.Errorf("params %v", r.Params)
	}
}

func TestFanout(t *testing.T) {
	tg := relay(t)
	for _, account := range []bool{false, true} {
		r, err := bench.Fanout(context.Background(), tg, bench.FanoutOptions{Sockets: 5, Messages: 20, Size: 64, Account: account})
		if err != nil {
			t.Fatal(err)
		}
		checkCommon(t, r, "fanout", "deliveries/s", 100)
		if r.Ops != 100 || r.Latency.Samples != 20 {
			t.Errorf("account=%v: %d deliveries, %d messages timed; want 100, 20", account, r.Ops, r.Latency.Samples)
		}
	}
}

func TestSockets(t *testing.T) {
	tg := relay(t)
	r, err := bench.Sockets(context.Background(), tg, bench.SocketsOptions{Sockets: 20, Hold: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, r, "sockets", "connects/s", 20)
	if r.Ops != 20 || r.Latency.Samples != 20 {
		t.Errorf("ops %d samples %d, want 20", r.Ops, r.Latency.Samples)
	}
}

func TestRPC(t *testing.T) {
	tg := relay(t)
	r, err := bench.RPC(context.Background(), tg, bench.RPCOptions{Calls: 30, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, r, "rpc", "calls/s", 30)
	if r.Ops != 30 {
		t.Errorf("ops %d, want 30", r.Ops)
	}
}

func TestRefusedToken(t *testing.T) {
	tg := relay(t)
	tg.Token = "not-a-token"
	if _, err := bench.Fanout(context.Background(), tg, bench.FanoutOptions{Sockets: 1, Messages: 1}); err == nil {
		t.Fatal("a bad token ran")
	}
}
