package bench_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
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
	tg, _ := stoppableRelay(t)
	// This process is the relay: its /proc entry is the relay's.
	tg.Pid = os.Getpid()
	return tg
}

// stoppableRelay is relay without a pid, and a function that stops it
// (at most once; the test's cleanup stops it otherwise), for the tests of
// a relay that goes mid-run.
func stoppableRelay(t *testing.T) (bench.Target, func()) {
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
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cl.CloseIdleConnections()
			cancel()
			<-done
			_ = srv.Close()
		})
	}
	t.Cleanup(stop)
	return bench.Target{URL: "http://" + l.Addr().String(), HTTP: cl}, stop
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

// notARelay serves 200 {"ok":true} to every request, as a stub or a
// proxy's page might: a run against it must not report it as a relay.
func notARelay(t *testing.T) bench.Target {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/sessions" {
			_, _ = w.Write([]byte(`{"session":{"id":"s1"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	})}
	go func() { _ = hs.Serve(l) }()
	cl := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(func() { cl.CloseIdleConnections(); _ = hs.Close() })
	return bench.Target{URL: "http://" + l.Addr().String(), Token: "t", HTTP: cl}
}

// TestAnswersAreChecked: a server that answers 200 to every post but is
// not a relay gives no ops; every post is an error with the answer in
// its text, and the run stops once 50 failed in a row.
func TestAnswersAreChecked(t *testing.T) {
	tg := notARelay(t)
	r, err := bench.Ingest(context.Background(), tg, bench.IngestOptions{Clients: 2, Batch: 3, Size: 10, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != 0 || r.Errors < 50 {
		t.Errorf("ops %d errors %d, want 0 and at least 50", r.Ops, r.Errors)
	}
	if want := `not a relay's answer (want 3 stored messages): {"ok":true}`; r.FirstError != want {
		t.Errorf("first error %q, want %q", r.FirstError, want)
	}
	if r.Stopped != "50 failures in a row" {
		t.Errorf("stopped %q, want 50 failures in a row", r.Stopped)
	}
	if r.Seconds > 30 {
		t.Errorf("ran %.1fs, want it stopped long before its minute", r.Seconds)
	}
	if !strings.Contains(r.String(), "  stopped early: 50 failures in a row\n  first error: not a relay's answer") {
		t.Errorf("text form does not say why:\n%s", r)
	}
}

// TestRelayGoneMidRun: a relay that stops answering part way through an
// rpc run ends the run early (50 failures in a row), instead of counting
// failures until the last call.
func TestRelayGoneMidRun(t *testing.T) {
	tg, stopRelay := stoppableRelay(t)
	// The relay goes once a few calls were answered (the fan-out's
	// Posting hook would do for fanout; for rpc, a timer).
	time.AfterFunc(300*time.Millisecond, stopRelay)
	r, err := bench.RPC(context.Background(), tg, bench.RPCOptions{Calls: 100_000_000, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stopped != "50 failures in a row" || r.FirstError == "" {
		t.Errorf("stopped %q first error %q, want 50 failures in a row with the first error", r.Stopped, r.FirstError)
	}
	if r.Ops == 0 || r.Ops >= 100_000_000 {
		t.Errorf("ops %d, want the calls answered before the relay went", r.Ops)
	}
}

// TestInterruptedCountsNoCutWork: a fan-out interrupted part way (its
// context cancelled, as SIGINT does) says so and counts none of the
// messages it did not post, nor their deliveries, as errors.
func TestInterruptedCountsNoCutWork(t *testing.T) {
	tg := relay(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := bench.Fanout(ctx, tg, bench.FanoutOptions{Sockets: 3, Messages: 1_000_000, Size: 16, Gap: time.Millisecond,
		Posting: func() { time.AfterFunc(200*time.Millisecond, cancel) }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Stopped != "interrupted" || r.Errors != 0 || r.Ops == 0 {
		t.Errorf("stopped %q errors %d ops %d, want interrupted, 0 errors and some deliveries", r.Stopped, r.Errors, r.Ops)
	}
}

// TestSlowRelayDoesNotStretchTheRun: posts still unanswered a grace
// after the run's end are cut off and counted as failed, so a relay
// that answers in 30 s does not make a 200 ms run last 30 s.
func TestSlowRelayDoesNotStretchTheRun(t *testing.T) {
	defer bench.SetEndGrace(300 * time.Millisecond)()
	release := make(chan struct{})
	defer close(release)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/sessions" {
			_, _ = w.Write([]byte(`{"session":{"id":"s1"}}`))
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})}
	go func() { _ = hs.Serve(l) }()
	cl := &http.Client{Transport: &http.Transport{}}
	defer func() { cl.CloseIdleConnections(); _ = hs.Close() }()
	start := time.Now()
	r, err := bench.Ingest(context.Background(), bench.Target{URL: "http://" + l.Addr().String(), Token: "t", HTTP: cl},
		bench.IngestOptions{Clients: 2, Batch: 1, Size: 8, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the run took %s, want about its 200 ms and the 300 ms grace", took)
	}
	if r.Ops != 0 || r.Errors != 2 || r.FirstError != "a post still unanswered 300ms after the run's end" {
		t.Errorf("ops %d errors %d first error %q, want 0, 2 and the cut-off posts", r.Ops, r.Errors, r.FirstError)
	}
}

// TestEndlessAnswerRefused: an answer that never ends is read up to
// 4 MiB and refused, not held in memory until the HTTP timeout.
func TestEndlessAnswerRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"token":"`))
		chunk := []byte(strings.Repeat("a", 64<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	go func() { _ = hs.Serve(l) }()
	cl := &http.Client{Transport: &http.Transport{}}
	defer func() { cl.CloseIdleConnections(); _ = hs.Close() }()
	_, err = bench.NewAccount(context.Background(), bench.Target{URL: "http://" + l.Addr().String(), HTTP: cl})
	if err == nil || err.Error() != "bench: create account: POST /v1/auth: answer longer than 4194304 bytes: not a relay's" {
		t.Fatalf("err %v, want the answer refused for its length", err)
	}
}

// TestSocketsLostDuringTheHold: sockets the relay closes while they are
// held are errors with a first error that says so, and the hold ends
// once every socket is gone; the connects are still counted as ops.
func TestSocketsLostDuringTheHold(t *testing.T) {
	tg, stopRelay := stoppableRelay(t)
	// The relay goes once the sockets are held (ten connect in a few ms).
	time.AfterFunc(500*time.Millisecond, stopRelay)
	start := time.Now()
	r, err := bench.Sockets(context.Background(), tg, bench.SocketsOptions{Sockets: 10, Hold: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("held %s, want the hold ended once every socket was gone", took)
	}
	if r.Ops != 10 || r.Errors != 10 || r.FirstError != "the relay closed 10 of the 10 sockets while they were held" || r.Throughput <= 0 {
		t.Errorf("ops %d errors %d first error %q throughput %v, want 10 connects, 10 lost, said so", r.Ops, r.Errors, r.FirstError, r.Throughput)
	}
}
