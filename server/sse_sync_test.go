package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/sse"
)

// pipeListener hands out in-memory connections (net.Pipe), so that a relay
// and its clients run inside a synctest bubble: a heartbeat interval or a
// write timeout passes in no real time, and a client that stops reading
// blocks the relay's writes at once (a pipe buffers nothing).
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	srv, cli := net.Pipe()
	select {
	case l.conns <- srv:
		return cli, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// bubbleRelay is a relay served over pipes inside a synctest bubble, with
// one account and one session.
type bubbleRelay struct {
	t       *testing.T
	srv     *Server
	hc      *http.Client
	token   string
	sid     string
	streams []*http.Response
}

// startBubbleRelay must run inside synctest.Test; everything it starts is
// stopped by the returned function.
func startBubbleRelay(t *testing.T, cfg Config) (*bubbleRelay, func()) {
	cfg.DataDir = t.TempDir()
	cfg.Logger = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l := newPipeListener()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, l) }()
	tr := &http.Transport{DialContext: l.dial}
	b := &bubbleRelay{t: t, srv: srv, hc: &http.Client{Transport: tr}}
	acct, err := srv.st.UpsertAccount(context.Background(), strings.Repeat("ab", 32), srv.nowMs())
	if err != nil {
		t.Fatal(err)
	}
	b.token = srv.IssueToken(acct.ID)
	var out struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	b.call("POST", "/v1/sessions", map[string]any{"tag": "t1", "metadata": "m"}, &out)
	b.sid = out.Session.ID
	return b, func() {
		for _, resp := range b.streams {
			_ = resp.Body.Close()
		}
		tr.CloseIdleConnections()
		// Close shuts the HTTP server down and waits; cancelling first
		// would leave Serve's own shutdown polling after the bubble ends.
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		<-served
		cancel()
		_ = l.Close()
	}
}

// call sends a JSON request and decodes the 200 answer into out.
func (b *bubbleRelay) call(method, path string, in, out any) {
	b.t.Helper()
	body, _ := json.Marshal(in)
	req, _ := http.NewRequest(method, "http://relay"+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// post stores n messages of size bytes each, in batches of up to 100.
func (b *bubbleRelay) post(from, n, size int) {
	b.t.Helper()
	for i := 0; i < n; i += 100 {
		var msgs []map[string]string
		for j := i; j < min(n, i+100); j++ {
			msgs = append(msgs, map[string]string{"localId": fmt.Sprintf("l%d", from+j), "content": strings.Repeat("c", size)})
		}
		b.call("POST", "/v3/sessions/"+b.sid+"/messages", map[string]any{"messages": msgs}, nil)
	}
}

// open starts a stream after lastID; the body is closed when the test ends.
func (b *bubbleRelay) open(lastID string) *http.Response {
	b.t.Helper()
	req, _ := http.NewRequest("GET", "http://relay/v3/sessions/"+b.sid+"/messages/stream", nil)
	req.Header.Set("Authorization", "Bearer "+b.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.streams = append(b.streams, resp)
	if resp.StatusCode != 200 {
		b.t.Fatalf("stream: status %d", resp.StatusCode)
	}
	return resp
}

// timedBytes records what a stream sent and when (fake time since start).
type timedBytes struct {
	start time.Time
	mu    sync.Mutex
	log   []string
}

func (tb *timedBytes) Write(p []byte) (int, error) {
	tb.mu.Lock()
	tb.log = append(tb.log, fmt.Sprintf("%s %q", time.Since(tb.start), p))
	tb.mu.Unlock()
	return len(p), nil
}

// The stream announces retry once, sends a comment every StreamHeartbeat,
// and rows as they are stored.
func TestStreamHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, stop := startBubbleRelay(t, Config{StreamHeartbeat: 15 * time.Second, StreamRetry: 1500 * time.Millisecond})
		defer stop()
		start := time.Now()
		resp := b.open("")
		raw := &timedBytes{start: start}
		rd, _ := sse.NewReader(io.TeeReader(resp.Body, raw), sse.Options{})
		frames := make(chan sse.Frame, 16)
		go func() {
			defer close(frames)
			for {
				f, ref, err := rd.Next()
				if err != nil {
					return
				}
				if ref != nil {
					t.Errorf("refusal %v", ref)
					continue
				}
				frames <- f
			}
		}()
		f := <-frames
		if !f.HasRetry || f.Retry != 1500 || f.HasData || time.Since(start) != 0 {
			t.Fatalf("first frame %+v at %s, want retry 1500 at once", f, time.Since(start))
		}
		time.Sleep(20 * time.Second)
		b.post(0, 1, 3)
		f = <-frames
		if f.Type() != "message" || f.ID != "1" || time.Since(start) != 20*time.Second {
			t.Fatalf("row frame %+v at %s", f, time.Since(start))
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		raw.mu.Lock()
		got := strings.Join(raw.log, "\n")
		raw.mu.Unlock()
		want := strings.Join([]string{
			`0s "retry: 1500\n\n"`,
			`15s ": heartbeat\n\n"`,
			`20s "event: message\nid: 1\ndata: ` + rowJSON(t, b, 1) + `\n\n"`,
			`30s ": heartbeat\n\n"`,
		}, "\n")
		if got != want {
			t.Fatalf("stream bytes:\n%s\nwant\n%s", got, want)
		}
		_ = resp.Body.Close()
		for range frames {
		}
	})
}

// rowJSON is the GET /v3/sessions/:id/messages row of seq, as JSON text.
func rowJSON(t *testing.T, b *bubbleRelay, seq int64) string {
	t.Helper()
	var out struct {
		Messages []json.RawMessage `json:"messages"`
	}
	b.call("GET", "/v3/sessions/"+b.sid+"/messages?after_seq="+strconv.FormatInt(seq-1, 10)+"&limit=1", nil, &out)
	if len(out.Messages) != 1 {
		t.Fatalf("no row %d", seq)
	}
	var buf bytes.Buffer
	_ = json.Compact(&buf, out.Messages[0])
	return strings.ReplaceAll(buf.String(), `"`, `\"`)
}

// A reader that stops reading is dropped after StreamWriteTimeout, while
// the relay goes on storing rows; it resumes from its last id and gets
// every row once.
func TestStreamSlowReaderDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, stop := startBubbleRelay(t, Config{StreamWriteTimeout: 30 * time.Second, StreamHeartbeat: time.Hour})
		defer stop()
		resp := b.open("")
		rd, _ := sse.NewReader(resp.Body, sse.Options{})
		if f, _, err := rd.Next(); err != nil || !f.HasRetry {
			t.Fatalf("first frame %+v %v", f, err)
		}
		seen := map[int64]int{}
		var order []int64
		read := func(rd *sse.Reader, until int64) error {
			for {
				f, ref, err := rd.Next()
				if err != nil {
					return err
				}
				if ref != nil {
					if ref.Reason != sse.ReasonTruncated {
						t.Fatalf("refusal %v", ref)
					}
					continue
				}
				if !f.HasData || f.Type() != "message" {
					continue // the retry frame
				}
				seq, _ := strconv.ParseInt(f.ID, 10, 64)
				seen[seq]++
				order = append(order, seq)
				if seq == until {
					return nil
				}
			}
		}
		// The reader takes 10 rows, then stops reading while 390 more
		// arrive.
		b.post(0, 10, 1024)
		if err := read(rd, 10); err != nil {
			t.Fatal(err)
		}
		b.post(10, 390, 1024)
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if st := b.srv.StreamStats(); st.Dropped != 0 || st.Open != 1 {
			t.Fatalf("before the timeout: %+v", st)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := b.srv.StreamStats(); st.Dropped != 1 || st.Open != 0 {
			t.Fatalf("after the timeout: %+v", st)
		}
		// Storing goes on while nobody reads.
		b.post(400, 100, 1024)
		// The dropped reader gets what was written before the drop, then
		// the stream ends; it resumes with its last id.
		err := read(rd, 500)
		if err == nil {
			t.Fatal("the dropped stream went on")
		}
		// A pipe buffers nothing: the blocked write delivered no row.
		before := len(order)
		if before != 10 {
			t.Fatalf("the dropped stream delivered %d rows before ending (%v)", before, err)
		}
		_ = resp.Body.Close()
		resp = b.open(rd.LastEventID())
		defer resp.Body.Close()
		rd2, _ := sse.NewReader(resp.Body, sse.Options{})
		if err := read(rd2, 500); err != nil {
			t.Fatal(err)
		}
		for seq := int64(1); seq <= 500; seq++ {
			if seen[seq] != 1 {
				t.Fatalf("seq %d seen %d times (%d rows before the drop)", seq, seen[seq], before)
			}
		}
		for i := 1; i < len(order); i++ {
			if order[i] != order[i-1]+1 {
				t.Fatalf("seq %d after %d", order[i], order[i-1])
			}
		}
	})
}
