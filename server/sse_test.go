package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// noLeaks checks, after every other cleanup of the test (the relay's
// included), that no goroutine started by the test is left.
func noLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
}

// streamTest is one account on a test relay, with the calls the stream
// tests need.
type streamTest struct {
	t     *testing.T
	base  string
	token string
}

func newStreamTest(t *testing.T, r *servertest.Relay) *streamTest {
	return &streamTest{t: t, base: r.URL, token: servertest.NewAccount(t, r.URL).Token}
}

// json sends a JSON request and returns the status and the answer's bytes.
func (st *streamTest) json(method, path string, in any) (int, []byte) {
	st.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, st.base+path, body)
	req.Header.Set("Authorization", "Bearer "+st.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		st.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (st *streamTest) session(tag string) string {
	st.t.Helper()
	code, b := st.json("POST", "/v1/sessions", map[string]any{"tag": tag, "metadata": "m"})
	var out struct {
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
	}
	if code != 200 || json.Unmarshal(b, &out) != nil {
		st.t.Fatalf("create session: %d %s", code, b)
	}
	return out.Session.ID
}

// post stores messages from..from+n-1 (localIds "l<i>", content "c<i>").
func (st *streamTest) post(sid string, from, n int) {
	st.t.Helper()
	for i := from; i < from+n; i += 100 {
		var msgs []map[string]string
		for j := i; j < min(from+n, i+100); j++ {
			msgs = append(msgs, map[string]string{"localId": fmt.Sprintf("l%d", j), "content": fmt.Sprintf("c%d", j)})
		}
		if code, b := st.json("POST", "/v3/sessions/"+sid+"/messages", map[string]any{"messages": msgs}); code != 200 {
			st.t.Fatalf("post: %d %s", code, b)
		}
	}
}

// rows is GET /v3/sessions/:id/messages?after_seq=0 (all pages), each row
// as decoded JSON.
func (st *streamTest) rows(sid string) []any {
	st.t.Helper()
	var all []any
	after := 0.0
	for {
		code, b := st.json("GET", fmt.Sprintf("/v3/sessions/%s/messages?after_seq=%d&limit=500", sid, int64(after)), nil)
		var out struct {
			Messages []any `json:"messages"`
			HasMore  bool  `json:"hasMore"`
		}
		if code != 200 || json.Unmarshal(b, &out) != nil {
			st.t.Fatalf("get rows: %d %s", code, b)
		}
		all = append(all, out.Messages...)
		if !out.HasMore || len(out.Messages) == 0 {
			return all
		}
		after = out.Messages[len(out.Messages)-1].(map[string]any)["seq"].(float64)
	}
}

// open starts GET …/messages/stream with the given Last-Event-ID (none when
// empty) and query; it returns the response (any status).
func (st *streamTest) open(ctx context.Context, sid, lastID, query string) *http.Response {
	st.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", st.base+"/v3/sessions/"+sid+"/messages/stream"+query, nil)
	req.Header.Set("Authorization", "Bearer "+st.token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		st.t.Fatalf("open stream: %v", err)
	}
	st.t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// readStream reads a stream's frames and refusals on a goroutine; the
// channel's last item carries the reader's final error.
type streamItem struct {
	frame sse.Frame
	ref   *sse.Refusal
	err   error
}

func readStream(body io.Reader) (*sse.Reader, <-chan streamItem) {
	rd, _ := sse.NewReader(body, sse.Options{})
	ch := make(chan streamItem, 64)
	go func() {
		defer close(ch)
		for {
			f, ref, err := rd.Next()
			ch <- streamItem{frame: f, ref: ref, err: err}
			if err != nil {
				return
			}
		}
	}()
	return rd, ch
}

func nextItem(t *testing.T, ch <-chan streamItem) streamItem {
	t.Helper()
	select {
	case it, ok := <-ch:
		if !ok {
			t.Fatal("stream already over")
		}
		return it
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10 s")
		return streamItem{}
	}
}

// nextData returns the next frame with data (skipping retry).
func nextData(t *testing.T, ch <-chan streamItem) streamItem {
	t.Helper()
	for {
		it := nextItem(t, ch)
		if it.err != nil || it.ref != nil || it.frame.HasData {
			return it
		}
		if !it.frame.HasRetry || it.frame.HasID || it.frame.HasEvent {
			t.Fatalf("unexpected frame %+v", it.frame)
		}
	}
}

// nextRow returns the next row frame's seq and decoded data.
func nextRow(t *testing.T, ch <-chan streamItem) (int64, any) {
	t.Helper()
	it := nextData(t, ch)
	if it.err != nil || it.ref != nil || it.frame.Event != "message" {
		t.Fatalf("want a row, got %+v", it)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(it.frame.Data), &row); err != nil {
		t.Fatalf("row data %q: %v", it.frame.Data, err)
	}
	seq, err := strconv.ParseInt(it.frame.ID, 10, 64)
	if err != nil || float64(seq) != row["seq"] {
		t.Fatalf("id %q does not match the row's seq %v", it.frame.ID, row["seq"])
	}
	return seq, row
}

// nextEnd checks that the next data frame is `end` with reason and lastSeq,
// and that the stream then ends cleanly.
func nextEnd(t *testing.T, ch <-chan streamItem, reason string, lastSeq int64) {
	t.Helper()
	it := nextData(t, ch)
	want := fmt.Sprintf(`{"lastSeq":%d,"reason":%q}`, lastSeq, reason)
	if it.err != nil || it.ref != nil || it.frame.Event != "end" || it.frame.HasID || it.frame.Data != want {
		t.Fatalf("want end %s, got %+v", want, it)
	}
	if it := nextItem(t, ch); it.err != io.EOF {
		t.Fatalf("after end: %+v", it)
	}
}

// Each stored row is one `message` frame with the seq as id and the v3 GET
// row as data, live rows included; `retry` comes first, once.
func TestStreamRows(t *testing.T) {
	noLeaks(t)
	r := servertest.Start(t)
	st := newStreamTest(t, r)
	sid := st.session("rows")
	st.post(sid, 0, 3)
	resp := st.open(t.Context(), sid, "", "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
	_, ch := readStream(resp.Body)
	first := nextItem(t, ch)
	if first.err != nil || first.ref != nil || !reflect.DeepEqual(first.frame, sse.Frame{Retry: server.DefaultStreamRetry.Milliseconds(), HasRetry: true}) {
		t.Fatalf("first frame %+v", first)
	}
	var got []any
	for want := int64(1); want <= 3; want++ {
		seq, row := nextRow(t, ch)
		if seq != want {
			t.Fatalf("seq %d, want %d", seq, want)
		}
		got = append(got, row)
	}
	st.post(sid, 3, 2) // live
	for want := int64(4); want <= 5; want++ {
		seq, row := nextRow(t, ch)
		if seq != want {
			t.Fatalf("seq %d, want %d", seq, want)
		}
		got = append(got, row)
	}
	if rows := st.rows(sid); !reflect.DeepEqual(got, rows) {
		t.Fatalf("stream rows\n%v\nGET rows\n%v", got, rows)
	}
	// A second stream of the same session, from after_seq=3.
	_, ch2 := readStream(st.open(t.Context(), sid, "", "?after_seq=3").Body)
	if seq, _ := nextRow(t, ch2); seq != 4 {
		t.Fatalf("after_seq=3: first seq %d", seq)
	}
}

// A stream killed at any point and resumed with the reader's last id loses
// nothing and repeats nothing, while rows keep arriving.
func TestStreamResumeAcrossKilledConnections(t *testing.T) {
	noLeaks(t)
	r := servertest.Start(t)
	st := newStreamTest(t, r)
	sid := st.session("resume")
	const total = 600
	posted := make(chan struct{})
	go func() {
		defer close(posted)
		for i := 0; i < total; i += 20 {
			st.post(sid, i, 20)
		}
	}()
	seen := make([]int, total+1)
	var order []int64
	lastID := ""
	kills := 0
	for len(order) < total {
		ctx, cancel := context.WithCancel(t.Context())
		resp := st.open(ctx, sid, lastID, "?after_seq=0") // Last-Event-ID wins over after_seq
		_, ch := readStream(resp.Body)
		// Kill the connection after a varying number of rows; the frames
		// read ahead into ch are lost with it, so the resume id is the last
		// row taken (what a client that processes each frame as it reads
		// it has as LastEventID).
		for n := 0; n < 17+kills*13 && len(order) < total; n++ {
			seq, _ := nextRow(t, ch)
			seen[seq]++
			order = append(order, seq)
			lastID = strconv.FormatInt(seq, 10)
		}
		cancel()
		for range ch {
		}
		kills++
	}
	<-posted
	for seq := 1; seq <= total; seq++ {
		if seen[seq] != 1 {
			t.Fatalf("seq %d seen %d times over %d connections", seq, seen[seq], kills)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] != order[i-1]+1 {
			t.Fatalf("seq %d after %d", order[i], order[i-1])
		}
	}
	t.Logf("%d rows over %d connections", total, kills)
}

// A relay restarted on the same data folder resumes a stream from its
// last id: nothing lost, nothing repeated.
func TestStreamResumeAcrossRelayRestart(t *testing.T) {
	if os.Getenv(servertest.EnvStore) == "postgres" {
		t.Skip("restarts on the data folder; with " + servertest.EnvStore + "=postgres each relay gets a fresh database")
	}
	noLeaks(t)
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)}
	r1 := servertest.StartConfig(t, cfg)
	st := newStreamTest(t, r1)
	sid := st.session("restart")
	st.post(sid, 0, 50)
	rd, ch := readStream(st.open(t.Context(), sid, "", "").Body)
	seen := map[int64]int{}
	for range 20 {
		seq, _ := nextRow(t, ch)
		seen[seq]++
	}
	if err := r1.Server.Close(); err != nil {
		t.Fatal(err)
	}
	// The stream ends with the relay, without `end`: rows already sent
	// are read, then the body ends.
	for {
		it := nextItem(t, ch)
		if it.err != nil {
			break
		}
		if it.ref != nil || (it.frame.HasData && it.frame.Event != "message") {
			t.Fatalf("while the relay closed: %+v", it)
		}
		if it.frame.HasData {
			seq, _ := strconv.ParseInt(it.frame.ID, 10, 64)
			seen[seq]++
		}
	}
	r2 := servertest.StartConfig(t, cfg)
	st.base = r2.URL // same account token: the signing secret is in the folder
	st.post(sid, 50, 50)
	_, ch2 := readStream(st.open(t.Context(), sid, rd.LastEventID(), "").Body)
	for len(seen) < 100 {
		seq, _ := nextRow(t, ch2)
		seen[seq]++
	}
	for seq := int64(1); seq <= 100; seq++ {
		if seen[seq] != 1 {
			t.Fatalf("seq %d seen %d times", seq, seen[seq])
		}
	}
}

func TestStreamRefusals(t *testing.T) {
	noLeaks(t)
	r := servertest.Start(t)
	st := newStreamTest(t, r)
	sid := st.session("refusals")
	other := newStreamTest(t, r)
	for _, tc := range []struct {
		name   string
		token  string
		sid    string
		lastID string
		query  string
		status int
		body   string
	}{
		{"no token", "", sid, "", "", 401, `{"error":"Missing authorization header"}`},
		{"bad token", "nope", sid, "", "", 401, `{"error":"Invalid token"}`},
		{"unknown session", st.token, "cnosuchsession0000000000", "", "", 404, `{"error":"Session not found"}`},
		{"another account's session", other.token, sid, "", "", 404, `{"error":"Session not found"}`},
		{"bad Last-Event-ID", st.token, sid, "x1", "", 400, `{"error":"Last-Event-ID must be a message seq (an integer from 0 to 9007199254740992), got \"x1\""}`},
		{"negative after_seq", st.token, sid, "", "?after_seq=-1", 400, `{"error":"after_seq must be between 0 and 9007199254740992, got -1"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &streamTest{t: t, base: st.base, token: tc.token}
			req, _ := http.NewRequest("GET", c.base+"/v3/sessions/"+tc.sid+"/messages/stream"+tc.query, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || strings.TrimSpace(string(b)) != tc.body || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %s (%s), want %d %s", resp.StatusCode, b, resp.Header.Get("Content-Type"), tc.status, tc.body)
			}
		})
	}
}

// `end` follows the last row once the session goes inactive (archive,
// session-end) or is deleted; a stream opened on an inactive session sends
// its rows, then end.
func TestStreamEnd(t *testing.T) {
	noLeaks(t)
	r := servertest.Start(t)
	st := newStreamTest(t, r)

	t.Run("archive", func(t *testing.T) {
		sid := st.session("archive")
		st.post(sid, 0, 2)
		_, ch := readStream(st.open(t.Context(), sid, "", "").Body)
		nextRow(t, ch)
		nextRow(t, ch)
		st.post(sid, 2, 1)
		if code, b := st.json("POST", "/v1/sessions/"+sid+"/archive", struct{}{}); code != 200 {
			t.Fatalf("archive: %d %s", code, b)
		}
		if seq, _ := nextRow(t, ch); seq != 3 {
			t.Fatalf("seq %d", seq)
		}
		nextEnd(t, ch, "inactive", 3)
		// Opened on the inactive session: its rows after the cursor, then end.
		_, ch = readStream(st.open(t.Context(), sid, "1", "").Body)
		nextRow(t, ch)
		nextRow(t, ch)
		nextEnd(t, ch, "inactive", 3)
	})

	t.Run("session-end", func(t *testing.T) {
		sid := st.session("session-end")
		st.post(sid, 0, 1)
		_, ch := readStream(st.open(t.Context(), sid, "", "").Body)
		nextRow(t, ch)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, err := sio.Dial(ctx, r.URL, sio.Options{Auth: map[string]any{"token": st.token, "clientType": "session-scoped", "sessionId": sid}, ConnectTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		res, err := c.Call(ctx, "session-end", map[string]any{"sid": sid, "time": float64(time.Now().UnixMilli())})
		if err != nil || len(res) == 0 || res[0].(map[string]any)["result"] != "success" {
			t.Fatalf("session-end: %v %v", res, err)
		}
		nextEnd(t, ch, "inactive", 1)
	})

	t.Run("delete", func(t *testing.T) {
		sid := st.session("delete")
		st.post(sid, 0, 2)
		_, ch := readStream(st.open(t.Context(), sid, "", "").Body)
		nextRow(t, ch)
		nextRow(t, ch)
		if code, b := st.json("DELETE", "/v1/sessions/"+sid, nil); code != 200 {
			t.Fatalf("delete: %d %s", code, b)
		}
		nextEnd(t, ch, "deleted", 2)
	})

	if got := r.Server.StreamStats(); got.Ended != 4 || got.Dropped != 0 {
		t.Fatalf("stats %+v", got)
	}
}

// `end` reports the session's real last seq, also when the client's cursor
// lies past it (or no row follows the cursor).
func TestStreamEndReportsTheRealLastSeq(t *testing.T) {
	noLeaks(t)
	r := servertest.Start(t)
	st := newStreamTest(t, r)
	sid := st.session("cursor-past-end")
	st.post(sid, 0, 2)
	empty := st.session("empty")
	for _, s := range []string{sid, empty} {
		if code, b := st.json("POST", "/v1/sessions/"+s+"/archive", struct{}{}); code != 200 {
			t.Fatalf("archive: %d %s", code, b)
		}
	}
	for _, tc := range []struct {
		name, sid, lastID, query string
		want                     int64
	}{
		{"after_seq past the end", sid, "", "?after_seq=100", 2},
		{"Last-Event-ID past the end", sid, "50", "", 2},
		{"after_seq at the end", sid, "", "?after_seq=2", 2},
		{"empty session, after_seq 5", empty, "", "?after_seq=5", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ch := readStream(st.open(t.Context(), tc.sid, tc.lastID, tc.query).Body)
			nextEnd(t, ch, "inactive", tc.want)
		})
	}
	// Live: the cursor past the end, then the session ends.
	live := st.session("live")
	st.post(live, 0, 3)
	_, ch := readStream(st.open(t.Context(), live, "", "?after_seq=9").Body)
	if it := nextItem(t, ch); !it.frame.HasRetry {
		t.Fatalf("first frame %+v", it)
	}
	if code, b := st.json("POST", "/v1/sessions/"+live+"/archive", struct{}{}); code != 200 {
		t.Fatalf("archive: %d %s", code, b)
	}
	nextEnd(t, ch, "inactive", 3)
}
