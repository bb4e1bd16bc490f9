package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/bus/natstest"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

// relayProc is a relay child process (the test binary, see main_test.go)
// in its own process group.
type relayProc struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

func startRelayProc(t *testing.T, db, busURL string) *relayProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "HAPPY_SERVER_TEST_CHILD=relay", "HAPPY_SERVER_TEST_DIR="+t.TempDir(),
		"HAPPY_SERVER_TEST_DB="+db, "HAPPY_SERVER_TEST_BUS="+busURL)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		p.kill()
	})
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("relay child ended before listening")
	}
	addr, ok := strings.CutPrefix(sc.Text(), "LISTEN ")
	if !ok {
		t.Fatalf("relay child said %q", sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	p.url = "http://" + addr
	return p
}

// kill ends the child's whole process group with SIGKILL and reaps it.
func (p *relayProc) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// writer posts batches of messages with unique localIds to the first
// relay of its list that answers, trying the same batch again (on the
// next relay after a connection failure, on the same after a 503) until
// it is acknowledged: a batch is idempotent by localId.
type writer struct {
	t     *testing.T
	token string
	sid   string
	urls  []string
	cur   int

	mu       sync.Mutex
	acked    []string
	refused  int // 503 answers
	failures int // connection errors
}

func (w *writer) post(batch []string) {
	msgs := make([]map[string]string, len(batch))
	for i, l := range batch {
		msgs[i] = map[string]string{"localId": l, "content": "c-" + l}
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var out struct {
			Messages []struct {
				LocalID string `json:"localId"`
			} `json:"messages"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := postJSON(ctx, w.urls[w.cur]+"/v3/sessions/"+w.sid+"/messages", w.token, map[string]any{"messages": msgs}, &out)
		cancel()
		switch {
		case err != nil:
			w.mu.Lock()
			w.failures++
			w.mu.Unlock()
			w.cur = (w.cur + 1) % len(w.urls)
		case st == http.StatusServiceUnavailable:
			w.mu.Lock()
			w.refused++
			w.mu.Unlock()
			time.Sleep(50 * time.Millisecond) // the answer's Retry-After, shortened
		case st == http.StatusOK && len(out.Messages) == len(batch):
			w.mu.Lock()
			for _, m := range out.Messages {
				w.acked = append(w.acked, m.LocalID)
			}
			w.mu.Unlock()
			return
		default:
			w.t.Errorf("post: status %d", st)
			return
		}
	}
	w.t.Errorf("batch %v never acknowledged", batch)
}

func postJSON(ctx context.Context, url, token string, body, out any) (int, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(string(b)))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(rb, out); err != nil {
			return 0, err
		}
	}
	return resp.StatusCode, nil
}

// storedLocalIDs reads every message of the session and returns the
// localIds in seq order.
func storedLocalIDs(t *testing.T, a api, sid string) []string {
	t.Helper()
	return storedAfter(t, a, sid, 0)
}

// storedAfter is storedLocalIDs from after seq on.
func storedAfter(t *testing.T, a api, sid string, after float64) []string {
	t.Helper()
	var out []string
	for {
		page := a.must(200, "GET", fmt.Sprintf("/v3/sessions/%s/messages?after_seq=%d&limit=500", sid, int64(after)), nil)
		for _, m := range arr(t, page["messages"]) {
			mm := obj(t, m)
			out = append(out, mm["localId"].(string))
			after = mm["seq"].(float64)
		}
		if page["hasMore"] != true {
			return out
		}
	}
}

// checkExactlyOnce fails unless stored holds each of sent once and
// nothing else, and every acknowledged id is among them.
func checkExactlyOnce(t *testing.T, sent, acked, stored []string) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range stored {
		seen[l]++
	}
	for l, n := range seen {
		if n != 1 {
			t.Errorf("%s stored %d times", l, n)
		}
	}
	for _, l := range acked {
		if seen[l] != 1 {
			t.Errorf("acknowledged %s is stored %d times", l, seen[l])
		}
	}
	if len(stored) != len(sent) || len(acked) != len(sent) {
		t.Errorf("sent %d, acknowledged %d, stored %d", len(sent), len(acked), len(stored))
	}
}

// One relay process of two is killed with SIGKILL while a client writes
// through it and another reads its updates: the writer goes on through
// the other relay, the reader reconnects there and catches up from its
// last seq; every acknowledged message is stored once, and the reader
// has each exactly once.
func TestClusterKill9(t *testing.T) {
	db := pgtest.URL(t)
	natsURL := natstest.Start(t)
	a, b := startRelayProc(t, db, natsURL), startRelayProc(t, db, natsURL)
	acct := servertest.NewAccount(t, a.url)
	cl := api{t: t, base: b.url, token: acct.Token}
	sid := api{t: t, base: a.url, token: acct.Token}.createSession("k9", "m")["id"].(string)

	// The reader: a session socket on a; on its loss, one on b and a
	// catch-up over HTTP from the last seq the first one saw. Each
	// socket must deliver a message at most once; together they must
	// deliver every one.
	var rmu sync.Mutex
	perSocket := []map[string]int{{}, {}}
	seqOn := []float64{0, 0}
	union := map[string]bool{}
	onUpdate := func(i int) func([]any, func(...any)) {
		return func(args []any, _ func(...any)) {
			u, _ := args[0].(map[string]any)
			body, _ := u["body"].(map[string]any)
			if body["t"] != "new-message" {
				return
			}
			m, _ := body["message"].(map[string]any)
			rmu.Lock()
			defer rmu.Unlock()
			lid := m["localId"].(string)
			perSocket[i][lid]++
			union[lid] = true
			seqOn[i] = max(seqOn[i], m["seq"].(float64))
		}
	}
	lost := make(chan struct{})
	var once sync.Once
	ra := sessionSocket(t, a.url, acct.Token, sid)
	ra.On("update", onUpdate(0))
	ra.OnDisconnect(func(string) { once.Do(func() { close(lost) }) })

	w := &writer{t: t, token: acct.Token, sid: sid, urls: []string{a.url, b.url}}
	var sent []string
	batch := func(i int) []string {
		var out []string
		for j := range 5 {
			out = append(out, fmt.Sprintf("k9-%03d-%d", i, j))
		}
		sent = append(sent, out...)
		return out
	}
	for i := range 20 {
		w.post(batch(i))
	}
	killed := make(chan struct{})
	go func() { a.kill(); close(killed) }()
	for i := 20; i < 40; i++ {
		w.post(batch(i))
	}
	<-killed
	select {
	case <-lost:
	case <-time.After(30 * time.Second):
		t.Fatal("the reader never noticed its relay died")
	}
	rb := sessionSocket(t, b.url, acct.Token, sid)
	rb.On("update", onUpdate(1))
	rmu.Lock()
	from := seqOn[0]
	rmu.Unlock()
	for _, m := range storedAfter(t, cl, sid, from) {
		rmu.Lock()
		union[m] = true
		rmu.Unlock()
	}
	for i := 40; i < 50; i++ {
		w.post(batch(i))
	}
	stored := storedLocalIDs(t, cl, sid)
	checkExactlyOnce(t, sent, w.acked, stored)
	// The updates of the last batches reach b's socket.
	waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}.True(func() bool {
		rmu.Lock()
		defer rmu.Unlock()
		return len(union) == len(sent)
	})
	rmu.Lock()
	defer rmu.Unlock()
	if len(union) != len(sent) {
		t.Errorf("the reader has %d messages, want %d", len(union), len(sent))
	}
	for i, m := range perSocket {
		for l, n := range m {
			if n != 1 {
				t.Errorf("socket %d delivered %s %d times", i, l, n)
			}
		}
	}
	if len(perSocket[0]) == 0 || len(perSocket[1]) == 0 {
		t.Errorf("socket deliveries: %d on the killed relay, %d on the other; want some on both", len(perSocket[0]), len(perSocket[1]))
	}
	t.Logf("writer: %d connection failures, %d refusals", w.failures, w.refused)
}

// The PostgreSQL server is stopped and started again while a client
// writes: writes are refused with 503 (and Retry-After) meanwhile, /ready
// says 503, and once the database is back the writes resume; every
// acknowledged message is stored once. The test runs its own PostgreSQL
// server (stopping the shared one would fail other tests).
func TestClusterDatabaseRestart(t *testing.T) {
	pgtest.ServerURL(t) // the PostgreSQL binaries are there (or CI fails)
	script, err := filepath.Abs("../scripts/postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	outb, err := exec.Command(script, "start").Output()
	if err != nil {
		t.Fatalf("postgres.sh start: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(outb), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			env[k] = strings.Trim(v, "'")
		}
	}
	dir, url := env["HAPPY_TEST_POSTGRES_DIR"], env["HAPPY_TEST_POSTGRES"]
	if dir == "" || url == "" {
		t.Fatalf("postgres.sh start said %q", outb)
	}
	t.Cleanup(func() { _ = exec.Command(script, "stop", dir).Run() })

	r := servertest.StartConfig(t, server.Config{Database: url, BusURL: url})
	waitReady(t, r.URL)
	acct := servertest.NewAccount(t, r.URL)
	a := api{t: t, base: r.URL, token: acct.Token}
	sid := a.createSession("pg", "m")["id"].(string)
	w := &writer{t: t, token: acct.Token, sid: sid, urls: []string{r.URL}}
	var sent []string
	batch := func(i int) []string {
		var out []string
		for j := range 3 {
			out = append(out, fmt.Sprintf("pg-%03d-%d", i, j))
		}
		sent = append(sent, out...)
		return out
	}
	for i := range 10 {
		w.post(batch(i))
	}
	if out, err := exec.Command(script, "pause", dir).CombinedOutput(); err != nil {
		t.Fatalf("postgres.sh pause: %v %s", err, out)
	}
	// Down: writes are refused as retryable, and the relay is not ready.
	st, body := a.raw("POST", "/v3/sessions/"+sid+"/messages", map[string]any{"messages": []map[string]string{{"localId": "down", "content": "x"}}})
	eq(t, "write while down", []any{st, string(body)}, []any{503, `{"error":"Storage unavailable, retry"}`})
	// The public body names what is away, not its address or user.
	st, body = a.raw("GET", "/ready", nil)
	eq(t, "/ready while down", []any{st, string(body)}, []any{503, `{"error":"database unavailable","status":"unavailable"}`})
	resumed := make(chan error, 1)
	go func() {
		// The writer below meets the outage; the server comes back under it.
		time.Sleep(500 * time.Millisecond)
		out, err := exec.Command(script, "resume", dir).CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		resumed <- err
	}()
	for i := 10; i < 30; i++ {
		w.post(batch(i))
	}
	if err := <-resumed; err != nil {
		t.Fatalf("postgres.sh resume: %v", err)
	}
	waitReady(t, r.URL)
	stored := storedLocalIDs(t, a, sid)
	checkExactlyOnce(t, sent, w.acked, stored)
	if w.refused == 0 {
		t.Error("the writer never met the outage (no 503)")
	}
}
