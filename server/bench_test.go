package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/sio"
)

// benchRelay runs a relay in this process on a loopback port; wrap, when
// set, wraps its handler.
// noLimits turns the rate limits and the connection cap of cfg off.
func noLimits(cfg *Config) {
	cfg.MaxConnsPerAddr = -1
	cfg.AuthRate, cfg.AccountRate, cfg.PairingRate, cfg.LookupRate, cfg.SessionRate = Unlimited, Unlimited, Unlimited, Unlimited, Unlimited
}

func benchRelay(b testing.TB, cfg Config, wrap func(http.Handler) http.Handler) (*Server, string) {
	b.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = b.TempDir()
	}
	cfg.Logger = zerolog.Nop()
	// A load generator is one address and one account doing what many
	// would: the relay's abuse limits would measure themselves.
	noLimits(&cfg)
	if os.Getenv("HAPPY_SERVER_BENCH_LOG") != "" {
		// Diagnosing a benchmark: the relay's debug log on stderr.
		cfg.Logger = zerolog.New(os.Stderr).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	}
	srv, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	hs := &http.Server{Handler: h}
	go func() { _ = hs.Serve(l) }()
	b.Cleanup(func() {
		_ = srv.Close()
		_ = hs.Close()
	})
	return srv, "http://" + l.Addr().String()
}

func batchOf(prefix string, n, size int) []sentMessage {
	body := strings.Repeat("A", size)
	out := make([]sentMessage, n)
	for i := range out {
		out[i] = sentMessage{LocalID: fmt.Sprintf("%s-%d", prefix, i), Content: body}
	}
	return out
}

// BenchmarkIngest: POST /v3/sessions/:id/messages with batches of 50 × 1 KiB
// over loopback HTTP, each acknowledged only after its transaction
// committed; msgs/s is the throughput. sync=NORMAL (WAL) survives kill -9 of
// the relay (TestDurabilityKill9); sync=FULL also survives a power loss.
func BenchmarkIngest(b *testing.B) {
	for _, mode := range []string{"NORMAL", "FULL"} {
		for _, clients := range []int{1, 8} {
			b.Run(fmt.Sprintf("sync=%s/clients=%d", mode, clients), func(b *testing.B) {
				_, base := benchRelay(b, Config{Synchronous: mode}, nil)
				token := newTestAccount(b, base)
				sids := make([]string, clients)
				for i := range sids {
					sids[i] = newTestSession(b, base, token, fmt.Sprint("bench-", i))
				}
				per := (b.N + clients - 1) / clients
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, clients)
				for c := 0; c < clients; c++ {
					wg.Add(1)
					go func(c int) {
						defer wg.Done()
						cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
						for i := 0; i < per; i++ {
							st, err := httpJSON(context.Background(), cl, "POST", base+"/v3/sessions/"+sids[c]+"/messages", token,
								map[string]any{"messages": batchOf(fmt.Sprintf("c%d-b%d", c, i), 50, 1024)}, nil)
							if err != nil || st != 200 {
								errs <- fmt.Errorf("post: %d %v", st, err)
								return
							}
						}
					}(c)
				}
				wg.Wait()
				el := time.Since(start)
				b.StopTimer()
				select {
				case err := <-errs:
					b.Fatal(err)
				default:
				}
				b.ReportMetric(float64(per*clients*50)/el.Seconds(), "msgs/s")
			})
		}
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

// BenchmarkFanout: one message POSTed to a session with 100 session-scoped
// sockets held by Go clients in a separate process. Reported:
// server-p50/p99-ms from POST received to the last socket write (the
// websocket frame handed to the kernel), e2e-p50/p99-ms from POST sent to
// the last client decoding the update.
func BenchmarkFanout(b *testing.B) {
	const sockets = 100
	// Start from a quiet machine: the ingest benchmarks leave the kernel
	// writing back their data and this process with a large heap.
	syscall.Sync()
	runtime.GC()
	debug.FreeOSMemory()
	var mu sync.Mutex
	var recvAt time.Time
	var drains []time.Time
	// allWritten gets a value when the write to the last socket is seen.
	allWritten := make(chan struct{}, 1)
	wrap := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/v3/") {
				mu.Lock()
				recvAt = time.Now()
				drains = drains[:0]
				select { // a report left from before this post
				case <-allWritten:
				default:
				}
				mu.Unlock()
			}
			h.ServeHTTP(w, r)
		})
	}
	srv, base := benchRelay(b, Config{}, wrap)
	onWrite := func() {
		now := time.Now()
		mu.Lock()
		drains = append(drains, now)
		if len(drains) == sockets {
			select {
			case allWritten <- struct{}{}:
			default:
			}
		}
		mu.Unlock()
	}
	srv.testWrite.Store(&onWrite)
	token := newTestAccount(b, base)
	sid := newTestSession(b, base, token, "fanout")
	c := startChild(b, "clients", "HAPPY_SERVER_TEST_URL="+base, "HAPPY_SERVER_TEST_TOKEN="+token, "HAPPY_SERVER_TEST_SID="+sid, "HAPPY_SERVER_TEST_N="+strconv.Itoa(sockets))
	if l := c.line(b); l != "READY" {
		b.Fatalf("clients said %q", l)
	}
	acct, err := srv.tok.Verify(token)
	if err != nil {
		b.Fatal(err)
	}
	waitUntil(b, 10*time.Second, "every client socket in the session's room", func() bool {
		set, ok := srv.io.Sockets().Adapter().Rooms().Load(roomSession(acct, sid))
		return ok && set.Len() == sockets
	})
	// At least 1000 posts, so that p99 is not just the third-worst sample.
	n := b.N
	if n < 1000 {
		n = 1000
	}
	var server, e2e []time.Duration
	cl := &http.Client{}
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	b.ResetTimer()
	for i := 0; i < n; i++ {
		t0 := time.Now()
		st, err := httpJSON(context.Background(), cl, "POST", base+"/v3/sessions/"+sid+"/messages", token,
			map[string]any{"messages": []sentMessage{{LocalID: fmt.Sprint("f", i), Content: strings.Repeat("B", 1024)}}}, nil)
		if err != nil || st != 200 {
			b.Fatalf("post: %d %v", st, err)
		}
		f := strings.Fields(c.line(b))
		if len(f) != 3 || f[0] != "GOT" || f[1] != strconv.Itoa(i+1) {
			b.Fatalf("clients said %v", f)
		}
		ns, _ := strconv.ParseInt(f[2], 10, 64)
		e2e = append(e2e, time.Unix(0, ns).Sub(t0))
		// A client can decode a frame before the server's writer goroutine
		// reports the write done: wait for the last report.
		select {
		case <-allWritten:
		case <-time.After(5 * time.Second):
			mu.Lock()
			seen := len(drains)
			mu.Unlock()
			b.Fatalf("%d socket writes seen, want %d", seen, sockets)
		}
		mu.Lock()
		server = append(server, drains[sockets-1].Sub(recvAt))
		mu.Unlock()
	}
	b.StopTimer()
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(float64(ms1.NumGC-ms0.NumGC)/float64(n), "gc/msg")
	b.ReportMetric(ms(percentile(server, 0.50)), "server-p50-ms")
	b.ReportMetric(ms(percentile(server, 0.99)), "server-p99-ms")
	b.ReportMetric(ms(percentile(e2e, 0.50)), "e2e-p50-ms")
	b.ReportMetric(ms(percentile(e2e, 0.99)), "e2e-p99-ms")
}

func rssMiB(b *testing.B, pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkRSS: resident memory of a relay process (the test binary
// re-executed as a relay): idle after start and one account, and loaded
// with 100 sockets connected to one session that received 500 fanned-out
// messages, after 10,000 × 1 KiB messages were ingested into another session.
func BenchmarkRSS(b *testing.B) {
	c, base := startRelayChild(b, b.TempDir(), "NORMAL")
	token := newTestAccount(b, base)
	sid := newTestSession(b, base, token, "rss")
	bulk := newTestSession(b, base, token, "rss-bulk")
	idle := rssMiB(b, c.cmd.Process.Pid)
	t0 := time.Now()
	const sockets, fannedOut = 100, 500
	var socks []*sio.Client
	// received is closed once every socket has every fanned-out message.
	var mu sync.Mutex
	updates := 0
	received := make(chan struct{})
	for i := 0; i < sockets; i++ {
		s, err := sio.Dial(context.Background(), base, sio.Options{Auth: map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid}})
		if err != nil {
			b.Fatal(err)
		}
		s.On("update", func([]any, func(...any)) {
			mu.Lock()
			if updates++; updates == sockets*fannedOut {
				close(received)
			}
			mu.Unlock()
		})
		socks = append(socks, s)
	}
	defer func() {
		for _, s := range socks {
			_ = s.Close()
		}
	}()
	b.Logf("%d sockets connected in %s", sockets, time.Since(t0))
	t0 = time.Now()
	cl := &http.Client{}
	for i := 0; i < 210; i++ {
		target := bulk
		if i%21 == 0 {
			target = sid // 10 batches (500 messages) fan out to the 100 sockets
		}
		st, err := httpJSON(context.Background(), cl, "POST", base+"/v3/sessions/"+target+"/messages", token, map[string]any{"messages": batchOf(fmt.Sprint("r", i), 50, 1024)}, nil)
		if err != nil || st != 200 {
			b.Fatalf("post: %d %v", st, err)
		}
	}
	b.Logf("10,500 messages ingested in %s", time.Since(t0))
	select {
	case <-received:
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("%d of %d fanned-out updates received", updates, sockets*fannedOut)
	}
	loaded := rssMiB(b, c.cmd.Process.Pid)
	for i := 0; i < b.N; i++ {
	}
	b.ReportMetric(idle, "idle-MiB")
	b.ReportMetric(loaded, "loaded-MiB")
}

// BenchmarkVerifyToken is the token check every request and handshake
// pays: the signature (cached after the first use) and, since revocation,
// the account's generation (cached for RevocationRefresh). "signature"
// is the cached signature check alone, for comparison.
func BenchmarkVerifyToken(b *testing.B) {
	srv, base := benchRelay(b, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(b, base)
	ctx := context.Background()
	b.Run("signature", func(b *testing.B) {
		for b.Loop() {
			if _, err := srv.tok.Verify(token); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("signature+generation", func(b *testing.B) {
		for b.Loop() {
			if _, err := srv.verifyToken(ctx, token); err != nil {
				b.Fatal(err)
			}
		}
	})
}
