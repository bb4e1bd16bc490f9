package relay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/happy-dev/happy/control"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/sio"
)

// TestMain lets the kill test re-execute this test binary as a client
// process (RELAY_TEST_CHILD set) that it can kill with SIGKILL.
func TestMain(m *testing.M) {
	if os.Getenv("RELAY_TEST_CHILD") != "" {
		os.Exit(childMain())
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

// planRecord is the record of the i-th version the producers write: seven
// records in turn, so every record gets many versions.
func planRecord(i int) string { return fmt.Sprintf("msg_%d", i%7) }

// planWant is the last version of every record after n versions of the plan.
func planWant(n int) map[string]int64 {
	want := map[string]int64{}
	for i := range n {
		want[planRecord(i)]++
	}
	return want
}

// produce enqueues versions from..to-1 of the plan.
func produce(t testing.TB, s *Session, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		rec := planRecord(i)
		v, err := s.Enqueue(context.Background(), rec, func(v int64) ([]byte, error) { return envelope(rec, v), nil })
		if err != nil {
			t.Fatalf("enqueue %d: %v", i, err)
		}
		if want := planWant(i + 1)[rec]; v != want {
			t.Fatalf("enqueue %d: version %d, want %d", i, v, want)
		}
	}
}

// foreignWriter writes user messages "f<from>".."f<to-1>" directly to the
// relay in batches of three — the other device of the tests. prefix makes
// their localIds.
func foreignWriter(t testing.TB, api *API, sid string, ci crypto.Cipher, prefix string, from, to int) {
	t.Helper()
	for i := from; i < to; i += 3 {
		var msgs []OutgoingMessage
		for j := i; j < i+3 && j < to; j++ {
			plain, _ := json.Marshal(map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": fmt.Sprintf("f%03d", j)}})
			sealed, _ := ci.Seal(plain)
			msgs = append(msgs, OutgoingMessage{Content: b64(sealed), LocalID: fmt.Sprintf("%s-%d", prefix, j)})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := api.SendMessages(ctx, sid, msgs)
		cancel()
		if err != nil {
			t.Fatalf("foreign messages from %d: %v", i, err)
		}
	}
}

// receiveForeign reads n messages from Receive and checks they are the
// foreign writer's f000..f(n-1), once each and in order, and that nothing
// else waits behind them (expectNoMore).
func receiveForeign(t testing.TB, s *Session, api *API, n int) {
	t.Helper()
	got := receiveN(t, s, n)
	last := int64(0)
	for i, in := range got {
		if txt := userText(t, in); txt != fmt.Sprintf("f%03d", i) {
			t.Fatalf("message %d is %q (seq %d)", i, txt, in.Seq)
		}
		if in.Seq <= last {
			t.Fatalf("seq %d after %d", in.Seq, last)
		}
		last = in.Seq
	}
	expectNoMore(t, s, api)
}

// readOwn is readAll without the foreign writer's messages.
func readOwn(t testing.TB, api *API, sid string, ci crypto.Cipher) []relayMessage {
	t.Helper()
	var own []relayMessage
	for _, m := range readAll(t, api, sid, ci) {
		if m.Record != "" {
			own = append(own, m)
		}
	}
	return own
}

// testNetworkCutLosesNothing runs a session through a TCP proxy that drops
// every connection six times. Each cut lands right after a burst of
// versions was enqueued (its sends are in flight), more versions are
// enqueued and the other device writes while the network is down, and the
// network comes back only once the client has been refused. The relay ends
// with every version exactly once, the session receives every foreign
// message exactly once in order, and RPC works again after the reconnects.
func testNetworkCutLosesNothing(t *testing.T, url string) {
	if !strings.HasPrefix(url, "http://") {
		t.Skip("the TCP proxy needs a plain http relay URL")
	}
	const versions, foreign, cuts = 300, 60, 6
	const perCut, foreignPerCut = versions / (cuts + 1), foreign / (cuts + 1)
	proxy := newCutProxy(t, url)
	creds := newAccount(t, url)
	c := newTestClient(t, testConfig(t, proxy.URL, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	var pings atomic.Int64
	s.RegisterRPC("ping", func(ctx context.Context, p json.RawMessage) (any, error) {
		pings.Add(1)
		return map[string]string{"pong": string(p)}, nil
	})
	direct, _ := NewAPI(HTTPConfig{BaseURL: url, Token: creds.Token})
	prefix := newTag(t)

	for i := range cuts {
		// Cut only while the socket is up, so every cut also breaks a live
		// socket.
		waitFor(t, func() bool { return s.Stats().Connects >= int64(i+1) }, "socket connected before the cut")
		produce(t, s, i*perCut, i*perCut+perCut/2)
		refused := proxy.Refused()
		proxy.Cut()
		produce(t, s, i*perCut+perCut/2, (i+1)*perCut)
		foreignWriter(t, direct, s.ID(), s.Cipher(), prefix, i*foreignPerCut, (i+1)*foreignPerCut)
		waitFor(t, func() bool { return proxy.Refused() > refused }, "the client refused during the cut")
		proxy.Restore()
	}
	produce(t, s, cuts*perCut, versions)
	foreignWriter(t, direct, s.ID(), s.Cipher(), prefix, cuts*foreignPerCut, foreign)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readOwn(t, direct, s.ID(), s.Cipher()), planWant(versions))
	receiveForeign(t, s, direct, foreign)
	// The socket reconnects on its own schedule (a dial through the cut
	// proxy fails only at its connect timeout); wait for it.
	waitFor(t, func() bool {
		sk, _ := s.conn.current()
		return s.Stats().Connects >= cuts+1 && sk != nil && sk.Connected()
	}, "reconnected")
	waitFor(t, func() bool { return s.Stats().Echoes == versions }, "every own message seen in the stream")
	st := s.Stats()
	if st.Sent != versions || st.Pending != 0 || st.Enqueued != versions || st.Delivered != foreign+1 || st.Echoes != versions {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("after %d cuts: %+v", cuts, st)

	// RPC methods were registered again on the last connection.
	app, err := sio.Dial(ctx, url, sio.Options{Auth: map[string]any{"token": creds.Token, "clientType": "user-scoped"}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	env := envelopeFor(t, s.ID(), "ping", "hi", time.Now())
	res, err := app.Call(ctx, "rpc-call", map[string]any{"method": s.ID() + ":ping", "params": seal(t, s.Cipher(), env)})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := res[0].(map[string]any)
	plain, err := openPayload(s.Cipher(), "result", 0, fmt.Sprint(m["result"]))
	if err != nil {
		t.Fatal(err)
	}
	out, err := control.OpenAnswer(plain, env.ID)
	if m["ok"] != true || err != nil || string(out) != `{"pong":"\"hi\""}` {
		t.Fatalf("rpc after reconnect: %v %s %v (handler ran %d times)", m, out, err, pings.Load())
	}
}

// TestRelayRestartLosesNothing stops and restarts the relay (same data,
// same port) twice. Each stop lands right after a burst of versions was
// enqueued and the other device wrote; more versions are enqueued while
// the relay is down, and it comes back only once a send has failed.
func TestRelayRestartLosesNothing(t *testing.T) {
	const versions, foreign, restarts = 300, 60, 2
	const perRestart, foreignPerRestart = versions / (restarts + 1), foreign / (restarts + 1)
	r := newRestartableRelay(t)
	creds := newAccount(t, r.URL)
	c := newTestClient(t, testConfig(t, r.URL, creds, t.TempDir()))
	s := openTestSession(t, c, SessionOptions{Tag: newTag(t)})
	api := c.API()
	prefix := newTag(t)
	for i := range restarts {
		// Restart only while the socket is up, so each restart also breaks
		// a live connection.
		waitFor(t, func() bool { return s.Stats().Connects >= int64(i+1) }, "socket connected before the restart")
		foreignWriter(t, api, s.ID(), s.Cipher(), prefix, i*foreignPerRestart, (i+1)*foreignPerRestart)
		produce(t, s, i*perRestart, i*perRestart+perRestart/2)
		failures := s.Stats().SendFailures
		r.Stop()
		produce(t, s, i*perRestart+perRestart/2, (i+1)*perRestart)
		waitFor(t, func() bool { return s.Stats().SendFailures > failures }, "a send failed while the relay was down")
		r.Start()
	}
	produce(t, s, restarts*perRestart, versions)
	foreignWriter(t, api, s.ID(), s.Cipher(), prefix, restarts*foreignPerRestart, foreign)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, readOwn(t, api, s.ID(), s.Cipher()), planWant(versions))
	receiveForeign(t, s, api, foreign)
	waitFor(t, func() bool { return s.Stats().Connects >= restarts+1 }, "a reconnection after each restart")
	waitFor(t, func() bool { return s.Stats().Echoes == versions }, "every own message seen in the stream")
	st := s.Stats()
	if st.Sent != versions || st.Delivered != foreign+1 || st.Echoes != versions {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("after %d restarts: %+v", restarts, st)
}

// testKilledClientResumes runs the producer in a child process and kills it
// with SIGKILL twice mid-stream. The child waits for a go-ahead on stdin
// after each acknowledged version, so each kill lands after exactly the
// versions counted, with their sends possibly in flight. After the first
// kill the parent (another process of the same home) drains the dead
// session's outbox as an orphan; after the second the restarted child
// itself resumes. Every version ends on the relay exactly once.
func testKilledClientResumes(t *testing.T, url string) {
	const total = 400
	creds := newAccount(t, url)
	home := t.TempDir()
	keyPath := filepath.Join(home, "access.key")
	if err := creds.Save(keyPath); err != nil {
		t.Fatal(err)
	}
	outboxDir := filepath.Join(home, "outbox")
	tag := newTag(t)
	run := func(killAfter int) (acked int, flushed bool) {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RELAY_TEST_CHILD=1", "CHILD_URL="+url, "CHILD_KEY="+keyPath,
			"CHILD_OUTBOX="+outboxDir, "CHILD_TAG="+tag, "CHILD_TOTAL="+strconv.Itoa(total))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		goAhead, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "enq "):
				acked++
				if killAfter > 0 && acked == killAfter {
					_ = cmd.Process.Signal(syscall.SIGKILL)
				} else {
					_, _ = goAhead.Write([]byte{'\n'})
				}
			case line == "flushed":
				flushed = true
			case strings.HasPrefix(line, "error "):
				t.Errorf("child: %s", line)
			}
		}
		_ = goAhead.Close()
		_ = cmd.Wait()
		return acked, flushed
	}

	first, _ := run(150)
	if first != 150 {
		t.Fatalf("first child acknowledged %d versions, want 150", first)
	}
	// The parent drains the dead child's outbox as an orphan: one session,
	// unless the child's sender had the relay acknowledge all 150 before
	// the kill landed (a loaded machine reads the child's lines late), when
	// nothing is pending and there is nothing to resume.
	cfg := testConfig(t, url, creds, outboxDir)
	c := newTestClient(t, cfg)
	pending, err := c.Outbox().Count(context.Background(), tag)
	if err != nil {
		t.Fatal(err)
	}
	if n, want := c.ResumeOrphans(context.Background()), min(pending, 1); n != want {
		t.Fatalf("resumed %d orphan sessions with %d versions pending, want %d", n, pending, want)
	}
	t.Logf("%d versions pending after the first kill", pending)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitOrphans(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Outbox().Count(ctx, tag); n != 0 {
		t.Fatalf("%d rows left after the orphan drain", n)
	}
	_, raw, _, _ := c.Outbox().Session(ctx, tag)
	st, err := decodeSessionState(raw)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.sessionCipher(st)
	if err != nil {
		t.Fatal(err)
	}
	sid, _, _, _ := c.Outbox().Session(ctx, tag)
	versions, _ := c.Outbox().LastVersions(ctx, tag)
	stored := 0
	for _, v := range versions {
		stored += int(v)
	}
	if stored != first {
		t.Fatalf("outbox knows %d versions, the child acknowledged %d", stored, first)
	}
	checkExactlyOnce(t, readOwn(t, c.API(), sid, ci), versions)
	_ = c.Close()

	second, _ := run(100)
	if second != 100 {
		t.Fatalf("second child acknowledged %d versions, want 100", second)
	}
	third, flushed := run(0)
	if !flushed {
		t.Fatalf("third child did not finish (%d versions)", third)
	}
	if stored+second+third != total {
		t.Fatalf("children acknowledged %d+%d+%d versions, want %d", stored, second, third, total)
	}
	api, _ := NewAPI(HTTPConfig{BaseURL: url, Token: creds.Token})
	checkExactlyOnce(t, readOwn(t, api, sid, ci), planWant(total))
}

// childMain is the killable client: it opens the session, continues the
// plan from what the outbox already holds, prints "enq <record> <version>"
// after each durable enqueue and waits for a line on stdin before the next,
// and prints "flushed" once the relay acknowledged everything.
func childMain() int {
	creds, err := crypto.LoadCredentials(os.Getenv("CHILD_KEY"))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	total, _ := strconv.Atoi(os.Getenv("CHILD_TOTAL"))
	cfg := Config{BaseURL: os.Getenv("CHILD_URL"), Credentials: creds, OutboxDir: os.Getenv("CHILD_OUTBOX"),
		Backoff: Backoff{Min: 20 * time.Millisecond, Max: 400 * time.Millisecond}, NoResume: true}
	ctx := context.Background()
	c, err := New(ctx, cfg)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	s, err := c.OpenSession(ctx, SessionOptions{Tag: os.Getenv("CHILD_TAG")})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	done := 0
	for i := range 7 {
		done += int(s.LastVersion(planRecord(i)))
	}
	goAhead := bufio.NewReader(os.Stdin)
	for i := done; i < total; i++ {
		rec := planRecord(i)
		v, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) { return envelope(rec, v), nil })
		if err != nil {
			fmt.Println("error", err)
			return 1
		}
		fmt.Println("enq", rec, v)
		if _, err := goAhead.ReadString('\n'); err != nil {
			fmt.Println("error no go-ahead:", err)
			return 1
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.Flush(fctx); err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("flushed")
	_ = s.Close()
	_ = c.Close()
	return 0
}
