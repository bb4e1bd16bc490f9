package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	rtmetrics "runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/relay/wire"
)

// The test binary doubles as a child process for the durability test and
// the benchmarks: HAPPY_SERVER_TEST_CHILD=relay runs a relay, =clients runs
// Socket.IO clients.
const childEnv = "HAPPY_SERVER_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "relay":
		if os.Getenv("HAPPY_SERVER_TEST_HEAPPROFILE") != "" {
			runtime.MemProfileRate = 1 // every allocation, for an exact profile
		}
		os.Exit(childRelay())
	case "clients":
		os.Exit(childClients())
	case "fanout":
		os.Exit(childFanout())
	}
	// IgnoreCurrent: goroutines alive before any test ran were started by
	// package init, not by a test; the Socket.IO engine client starts its
	// network monitor (a 3 s interval that never stops) that way.
	// The Socket.IO library arms its own timers (ping timeouts, reconnect
	// delays) on goroutines that end when the timer fires or is cleared; one
	// armed by the last test's clients can outlive the run by seconds on a
	// loaded machine. Those are the library's, never ours: only they are
	// ignored.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetTimeout.func1"))
}

// childRelay serves a relay on a loopback port from HAPPY_SERVER_TEST_DIR
// (with HAPPY_SERVER_TEST_DB and HAPPY_SERVER_TEST_BUS: on that database
// and bus) and prints "LISTEN <addr>"; it runs until killed or stdin
// closes.
func childRelay() int {
	if path := os.Getenv("HAPPY_SERVER_TEST_RELAY_CPUPROFILE"); path != "" {
		// Profiling the relay of a benchmark: the profile covers the run
		// until stdin closes.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	cfg := Config{DataDir: os.Getenv("HAPPY_SERVER_TEST_DIR"), Synchronous: os.Getenv("HAPPY_SERVER_TEST_SYNC"), Logger: zerolog.Nop(),
		Database: os.Getenv("HAPPY_SERVER_TEST_DB"), BusURL: os.Getenv("HAPPY_SERVER_TEST_BUS")}
	noLimits(&cfg) // thousands of sockets from one address
	srv, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("LISTEN %s\n", l.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Each "MEM" line is answered with the heap after a GC (memLine);
		// anything else is ignored until stdin closes.
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if in.Text() == "MEM" {
				fmt.Println(memLine())
			}
		}
		cancel()
	}()
	_ = srv.Serve(ctx, l)
	_ = srv.Close()
	return 0
}

// memLine forces a GC and returns "MEM <heap live bytes> <heap objects>
// <goroutines> <goroutine stack bytes>" (runtime/metrics) for the relay
// child's memory breakdown (BenchmarkGenIdleSockets); with
// HAPPY_SERVER_TEST_HEAPPROFILE it also writes a heap profile there
// and the goroutines' stacks next to it (".goroutines").
func memLine() string {
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/objects:objects"},
		{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	rtmetrics.Read(s)
	if path := os.Getenv("HAPPY_SERVER_TEST_HEAPPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("heap").WriteTo(f, 0)
			_ = f.Close()
		}
		if f, err := os.Create(path + ".goroutines"); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 1)
			_ = f.Close()
		}
	}
	return fmt.Sprintf("MEM %d %d %d %d", s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64())
}

// mem asks a relay child for its memLine and returns its four figures.
func (c *child) mem(tb testing.TB) (live, objects, goroutines, stacks float64) {
	tb.Helper()
	if _, err := io.WriteString(c.stdin, "MEM\n"); err != nil {
		tb.Fatal(err)
	}
	if _, err := fmt.Sscanf(c.line(tb), "MEM %g %g %g %g", &live, &objects, &goroutines, &stacks); err != nil {
		tb.Fatalf("relay child's memory line: %v", err)
	}
	return
}

// childClients connects HAPPY_SERVER_TEST_N session-scoped sockets and, for
// each new-message seq that all of them received, prints
// "GOT <seq> <unix ns of the last receipt>". It prints "READY" once all are
// connected and exits when stdin closes.
func childClients() int {
	url, token, sid := os.Getenv("HAPPY_SERVER_TEST_URL"), os.Getenv("HAPPY_SERVER_TEST_TOKEN"), os.Getenv("HAPPY_SERVER_TEST_SID")
	n, _ := strconv.Atoi(os.Getenv("HAPPY_SERVER_TEST_N"))
	if path := os.Getenv("HAPPY_SERVER_TEST_CPUPROFILE"); path != "" {
		// Profiling the clients of a benchmark: the profile covers the
		// run until stdin closes.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	var mu sync.Mutex
	counts := map[float64]int{}
	out := bufio.NewWriter(os.Stdout)
	var clients []*sio.Client
	for i := 0; i < n; i++ {
		c, err := sio.Dial(context.Background(), url, sio.Options{Auth: map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "dial:", err)
			return 1
		}
		c.OnDisconnect(func(reason string) {
			if reason != "io client disconnect" { // not the end of the run
				fmt.Fprintf(os.Stderr, "clients: socket %d disconnected: %s\n", i, reason)
			}
		})
		c.On("update", func(args []any, _ func(...any)) {
			now := time.Now().UnixNano()
			u, _ := args[0].(map[string]any)
			body, _ := u["body"].(map[string]any)
			msg, _ := body["message"].(map[string]any)
			seq, _ := msg["seq"].(float64)
			mu.Lock()
			counts[seq]++
			if counts[seq] == n {
				delete(counts, seq)
				fmt.Fprintf(out, "GOT %d %d\n", int64(seq), now)
				_ = out.Flush()
			}
			mu.Unlock()
		})
		clients = append(clients, c)
	}
	mu.Lock()
	fmt.Fprintln(out, "READY")
	_ = out.Flush()
	mu.Unlock()
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range clients {
		_ = c.Close()
	}
	return 0
}

// child is a running child process of the test binary.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

func startChild(tb testing.TB, mode string, env ...string) *child {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	cmd.Stderr = os.Stderr
	// Its own process group, reaped as a group at the end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start child %s: %v", mode, err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	tb.Cleanup(func() {
		// Closing stdin asks the child to finish; it is killed if it has
		// not within two seconds.
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever of the group is left
	})
	return c
}

func (c *child) line(tb testing.TB) string {
	tb.Helper()
	if !c.lines.Scan() {
		tb.Fatalf("child ended: %v", c.lines.Err())
	}
	return c.lines.Text()
}

// startRelayChild runs a relay process on dir and returns its base URL.
func startRelayChild(tb testing.TB, dir, sync string) (*child, string) {
	tb.Helper()
	c := startChild(tb, "relay", "HAPPY_SERVER_TEST_DIR="+dir, "HAPPY_SERVER_TEST_SYNC="+sync)
	l := c.line(tb)
	addr, ok := strings.CutPrefix(l, "LISTEN ")
	if !ok {
		tb.Fatalf("relay child said %q", l)
	}
	return c, "http://" + addr
}

// httpJSON sends a JSON request and decodes a JSON answer into out.
func httpJSON(ctx context.Context, cl *http.Client, method, url, token string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %q: %w", b, err)
		}
	}
	return resp.StatusCode, nil
}

// newTestAccount creates an account through POST /v1/auth and returns its token.
func newTestAccount(tb testing.TB, base string) string {
	tb.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	ch := make([]byte, 32)
	_, _ = rand.Read(ch)
	b64 := base64.StdEncoding.EncodeToString
	var out struct{ Token string }
	st, err := httpJSON(context.Background(), http.DefaultClient, "POST", base+"/v1/auth", "", map[string]string{"publicKey": b64(pub), "challenge": b64(ch), "signature": b64(ed25519.Sign(priv, ch))}, &out)
	if err != nil || st != 200 || out.Token == "" {
		tb.Fatalf("create account: %d %v", st, err)
	}
	return out.Token
}

func newTestSession(tb testing.TB, base, token, tag string) string {
	tb.Helper()
	var out struct{ Session struct{ ID string } }
	st, err := httpJSON(context.Background(), http.DefaultClient, "POST", base+"/v1/sessions", token, map[string]any{"tag": tag, "metadata": "m"}, &out)
	if err != nil || st != 200 {
		tb.Fatalf("create session: %d %v", st, err)
	}
	return out.Session.ID
}

type sentMessage struct {
	LocalID string `json:"localId"`
	Content string `json:"content"`
}

type ackedRow struct {
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	LocalID string `json:"localId"`
}

// TestDurabilityKill9: messages the relay acknowledged survive kill -9 of
// the relay process, with their seqs and contents.
func TestDurabilityKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	c, base := startRelayChild(t, dir, "NORMAL")
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "durable")

	var mu sync.Mutex
	acked := map[string]ackedRow{}
	// enough is closed once killAfter messages were acknowledged: the kill
	// lands while the writers are still posting.
	const killAfter = 400
	enough := make(chan struct{})
	content := func(lid string) string { return "ct-" + lid + "-" + strings.Repeat("q", 200) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			cl := &http.Client{}
			for b := 0; ctx.Err() == nil; b++ {
				batch := make([]sentMessage, 20)
				for i := range batch {
					lid := fmt.Sprintf("w%d-b%d-%d", w, b, i)
					batch[i] = sentMessage{LocalID: lid, Content: content(lid)}
				}
				var out struct{ Messages []ackedRow }
				st, err := httpJSON(ctx, cl, "POST", base+"/v3/sessions/"+sid+"/messages", token, map[string]any{"messages": batch}, &out)
				if err != nil || st != 200 {
					return // the relay died mid-request: not acknowledged
				}
				mu.Lock()
				before := len(acked)
				for _, r := range out.Messages {
					acked[r.LocalID] = r
				}
				if before < killAfter && len(acked) >= killAfter {
					close(enough)
				}
				mu.Unlock()
			}
		}(w)
	}
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		cancel()
		wg.Wait()
		t.Fatalf("fewer than %d messages acknowledged within 30 s", killAfter)
	}
	if err := c.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = c.cmd.Wait()
	cancel()
	wg.Wait()
	mu.Lock()
	n := len(acked)
	mu.Unlock()

	_, base2 := startRelayChild(t, dir, "NORMAL")
	got := map[string]wire.Message{}
	for after := int64(0); ; {
		var page struct {
			Messages []wire.Message
			HasMore  bool
		}
		st, err := httpJSON(context.Background(), http.DefaultClient, "GET", fmt.Sprintf("%s/v3/sessions/%s/messages?after_seq=%d&limit=500", base2, sid, after), token, nil, &page)
		if err != nil || st != 200 {
			t.Fatalf("read after restart: %d %v", st, err)
		}
		for _, m := range page.Messages {
			got[*m.LocalID] = m
			after = m.Seq
		}
		if !page.HasMore {
			break
		}
	}
	for lid, r := range acked {
		m, ok := got[lid]
		if !ok {
			t.Fatalf("acknowledged message %s (seq %d) lost", lid, r.Seq)
		}
		if m.Seq != r.Seq || m.ID != r.ID || m.Content.C != content(lid) {
			t.Fatalf("message %s after restart: seq %d id %s, want seq %d id %s (content ok: %v)", lid, m.Seq, m.ID, r.Seq, r.ID, m.Content.C == content(lid))
		}
	}
	// Seqs stay gapless from 1.
	seqs := map[int64]bool{}
	for _, m := range got {
		seqs[m.Seq] = true
	}
	for i := int64(1); i <= int64(len(got)); i++ {
		if !seqs[i] {
			t.Fatalf("seq %d missing among %d stored messages", i, len(got))
		}
	}
	t.Logf("%d acknowledged, %d stored after kill -9", n, len(got))
}
