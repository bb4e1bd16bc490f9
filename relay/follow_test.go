package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/server/servertest"
)

// followLeaks checks, after the test's other cleanups, that no goroutine
// it started is left.
func followLeaks(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
}

// followAPI is an API client for a fresh account of the relay at url (the
// account is created on accountURL, which may differ when url is a proxy).
func followAPI(t *testing.T, url, accountURL string) *API {
	t.Helper()
	api, err := NewAPI(HTTPConfig{BaseURL: url, Token: servertest.NewAccount(t, accountURL).Token, ClientName: "cli/test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.CloseIdleConnections)
	return api
}

func followSession(t *testing.T, api *API) string {
	t.Helper()
	s, err := api.CreateSession(t.Context(), SessionCreate{Tag: newTag(t), Metadata: "bWV0YQ=="})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// send stores messages from..from+n-1, retrying while the relay is away.
func send(t *testing.T, api *API, sid string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i += MaxBatch {
		var msgs []OutgoingMessage
		for j := i; j < min(from+n, i+MaxBatch); j++ {
			msgs = append(msgs, OutgoingMessage{Content: fmt.Sprintf("Yy%d", j), LocalID: fmt.Sprintf("m.%d", j)})
		}
		for attempt := 0; ; attempt++ {
			_, err := api.SendMessages(t.Context(), sid, msgs)
			if err == nil {
				break
			}
			if !errors.Is(err, ErrUnavailable) || attempt > 200 {
				t.Fatalf("send: %v", err)
			}
			sleep(t.Context(), 20*time.Millisecond)
		}
	}
}

// follow runs FollowMessages on a goroutine; rows go to the channel, the
// outcome to done.
type followRun struct {
	rows chan StoredMessage
	done chan struct{}
	res  FollowResult
	err  error
}

func startFollow(ctx context.Context, api *API, sid string, opts FollowOptions) *followRun {
	fr := &followRun{rows: make(chan StoredMessage, 1024), done: make(chan struct{})}
	go func() {
		defer close(fr.done)
		fr.res, fr.err = api.FollowMessages(ctx, sid, opts, func(m StoredMessage) error {
			fr.rows <- m
			return nil
		})
	}()
	return fr
}

// take receives n rows, failing after 10 s without one.
func (fr *followRun) take(t *testing.T, n int) []StoredMessage {
	t.Helper()
	var out []StoredMessage
	for len(out) < n {
		select {
		case m := <-fr.rows:
			out = append(out, m)
		case <-fr.done:
			// Rows delivered before the end are still in the buffer; select
			// picks among ready cases at random, so take them first.
			select {
			case m := <-fr.rows:
				out = append(out, m)
				continue
			default:
			}
			t.Fatalf("follow ended after %d of %d rows: %v", len(out), n, fr.err)
		case <-time.After(10 * time.Second):
			t.Fatalf("no row within 10 s (%d of %d)", len(out), n)
		}
	}
	return out
}

func (fr *followRun) wait(t *testing.T) {
	t.Helper()
	select {
	case <-fr.done:
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not return within 10 s")
	}
}

// fetchAll is every row of the session over GET.
func fetchAll(t *testing.T, api *API, sid string) []StoredMessage {
	t.Helper()
	var out []StoredMessage
	after := int64(0)
	for {
		p, err := api.FetchMessages(t.Context(), sid, after, MaxFetchLimit)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Messages...)
		if !p.HasMore || len(p.Messages) == 0 {
			return out
		}
		after = p.Messages[len(p.Messages)-1].Seq
	}
}

// FollowMessages delivers the stored rows, then the live ones, exactly as
// GET returns them, and returns nil at `end`.
func TestFollowMessages(t *testing.T) {
	followLeaks(t)
	r := servertest.Start(t)
	api := followAPI(t, r.URL, r.URL)
	sid := followSession(t, api)
	send(t, api, sid, 0, 5)
	fr := startFollow(t.Context(), api, sid, FollowOptions{})
	got := fr.take(t, 5)
	send(t, api, sid, 5, 5)
	got = append(got, fr.take(t, 5)...)
	if err := api.ArchiveSession(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	fr.wait(t)
	if fr.err != nil || fr.res.End != "inactive" || fr.res.LastSeq != 10 || fr.res.Connections != 1 || len(fr.res.Drops) != 0 {
		t.Fatalf("result %+v, %v", fr.res, fr.err)
	}
	if want := fetchAll(t, api, sid); !reflect.DeepEqual(got, want) {
		t.Fatalf("followed\n%+v\nGET\n%+v", got, want)
	}
	// From a seq on: the rest, then end again.
	fr = startFollow(t.Context(), api, sid, FollowOptions{AfterSeq: 8})
	if rows := fr.take(t, 2); rows[0].Seq != 9 || rows[1].Seq != 10 {
		t.Fatalf("after 8: %+v", rows)
	}
	fr.wait(t)
	if fr.err != nil || fr.res.End != "inactive" || fr.res.LastSeq != 10 {
		t.Fatalf("after 8: %+v, %v", fr.res, fr.err)
	}
}

// Cut connections and a relay restart cost nothing: every row once, in
// order, each reconnection resuming after the last row delivered.
func TestFollowResumesAcrossCutsAndRestart(t *testing.T) {
	followLeaks(t)
	relay := newRestartableRelay(t)
	proxy := newCutProxy(t, relay.URL)
	api := followAPI(t, proxy.URL, relay.URL)
	sid := followSession(t, api)
	send(t, api, sid, 0, 100)
	var mu sync.Mutex
	var resumes []int64
	fr := startFollow(t.Context(), api, sid, FollowOptions{Backoff: Backoff{Min: 5 * time.Millisecond, Max: 50 * time.Millisecond},
		OnConnect: func(after int64) { mu.Lock(); resumes = append(resumes, after); mu.Unlock() }})
	got := fr.take(t, 50)
	proxy.Cut()
	proxy.Restore()
	got = append(got, fr.take(t, 50)...)
	send(t, api, sid, 100, 100)
	got = append(got, fr.take(t, 50)...)
	relay.Stop()
	relay.Start()
	send(t, api, sid, 200, 100)
	got = append(got, fr.take(t, 150)...)
	if err := api.ArchiveSession(t.Context(), sid); err != nil {
		t.Fatal(err)
	}
	fr.wait(t)
	if fr.err != nil || fr.res.End != "inactive" || fr.res.LastSeq != 300 || len(fr.res.Drops) != 0 {
		t.Fatalf("result %+v, %v", fr.res, fr.err)
	}
	for i, m := range got {
		if m.Seq != int64(i+1) || m.LocalIDOrEmpty() != fmt.Sprintf("m.%d", i) {
			t.Fatalf("row %d: seq %d localId %q", i, m.Seq, m.LocalIDOrEmpty())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(resumes) < 3 || resumes[0] != 0 || fr.res.Connections != len(resumes) {
		t.Fatalf("connections resumed after %v (%d connections)", resumes, fr.res.Connections)
	}
	for _, after := range resumes[1:] {
		if after < 50 {
			t.Fatalf("a reconnection resumed after %d (resumes %v)", after, resumes)
		}
	}
}

// A relay without the stream route (the reference relay answers 404 with
// its own body) is ErrStreamUnsupported; an unknown session stays
// ErrNotFound; a relay answering 200 with something else is unsupported.
func TestFollowUnsupported(t *testing.T) {
	followLeaks(t)
	r := servertest.Start(t)
	h := r.Server.Handler()
	ref := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasSuffix(req.URL.Path, "/messages/stream") {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"message":"Route GET:%s not found","error":"Not Found","statusCode":404}`, req.URL.Path)
			return
		}
		h.ServeHTTP(w, req)
	}))
	defer ref.Close()
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>welcome</html>")
	}))
	defer html.Close()

	token := servertest.NewAccount(t, r.URL).Token
	mk := func(base string) *API {
		a, err := NewAPI(HTTPConfig{BaseURL: base, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.CloseIdleConnections)
		return a
	}
	api := mk(ref.URL)
	sid := followSession(t, api)
	never := func(StoredMessage) error { t.Error("row delivered"); return nil }

	res, err := api.FollowMessages(t.Context(), sid, FollowOptions{}, never)
	if !errors.Is(err, ErrStreamUnsupported) || res.Connections != 0 {
		t.Fatalf("reference-like relay: %+v, %v", res, err)
	}
	_, err = api.FollowMessages(t.Context(), "cnosuchsession0000000000", FollowOptions{}, never)
	var se *StatusError
	if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrStreamUnsupported) || !errors.As(err, &se) || se.Status != 404 {
		t.Fatalf("unknown session: %v", err)
	}
	_, err = mk(html.URL).FollowMessages(t.Context(), sid, FollowOptions{}, never)
	if !errors.Is(err, ErrStreamUnsupported) || !strings.Contains(err.Error(), `"text/html"`) {
		t.Fatalf("html answer: %v", err)
	}
	// On the relay itself: unknown session and a refused token are final.
	_, err = mk(r.URL).FollowMessages(t.Context(), "cnosuchsession0000000000", FollowOptions{}, never)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "Session not found") {
		t.Fatalf("unknown session on the relay: %v", err)
	}
	bad, _ := NewAPI(HTTPConfig{BaseURL: r.URL, Token: "nope"})
	defer bad.CloseIdleConnections()
	if _, err = bad.FollowMessages(t.Context(), sid, FollowOptions{}, never); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("bad token: %v", err)
	}
}

// The caller's error stops the follow at once, with the last row it took.
func TestFollowCallbackError(t *testing.T) {
	followLeaks(t)
	r := servertest.Start(t)
	api := followAPI(t, r.URL, r.URL)
	sid := followSession(t, api)
	send(t, api, sid, 0, 3)
	stop := errors.New("stop here")
	n := 0
	res, err := api.FollowMessages(t.Context(), sid, FollowOptions{}, func(m StoredMessage) error {
		n++
		if m.Seq == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || res.LastSeq != 1 || n != 2 {
		t.Fatalf("%+v, %v after %d rows", res, err, n)
	}
}

// scriptedStream answers each stream request with the next script (raw SSE
// text) and records the Last-Event-ID it was sent.
type scriptedStream struct {
	mu      sync.Mutex
	scripts []string
	lastIDs []string
}

func (s *scriptedStream) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	s.lastIDs = append(s.lastIDs, req.Header.Get("Last-Event-ID"))
	script := "event: end\ndata: {\"reason\":\"inactive\"}\n\n"
	if len(s.scripts) > 0 {
		script, s.scripts = s.scripts[0], s.scripts[1:]
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = io.WriteString(w, script)
}

func row(seq int64) string {
	return fmt.Sprintf(`{"id":"r%d","seq":%d,"content":{"t":"encrypted","c":"Yw=="},"localId":null,"createdAt":1,"updatedAt":2}`, seq, seq)
}

// Frames that cannot be delivered are counted and reported, never skipped
// silently; a stream that breaks is resumed after the last row delivered.
func TestFollowDrops(t *testing.T) {
	followLeaks(t)
	srv := &scriptedStream{scripts: []string{
		"retry: 10\n\n" +
			"event: message\nid: 1\ndata: " + row(1) + "\n\n" +
			"event: message\nid: 2\ndata: {not json\n\n" +
			"event: message\nid: 7\ndata: " + row(2) + "\n\n" +
			"event: message\nid: 1\ndata: " + row(1) + "\n\n" +
			"event: surprise\ndata: {}\n\n" +
			"event: message\ndata: \xff\n\n" +
			"event: message\nid: 2\ndata: " + row(2) + "\n\n" +
			"event: message\nid: 3\ndata: " + row(3)[:20], // cut inside a frame
		"event: message\nid: 3\ndata: " + row(3) + "\n\n" + "event: end\ndata: {\"reason\":\"deleted\",\"lastSeq\":3}\n\n",
	}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	api, _ := NewAPI(HTTPConfig{BaseURL: hs.URL, Token: "t"})
	defer api.CloseIdleConnections()
	var drops []FollowDrop
	var seqs []int64
	res, err := api.FollowMessages(t.Context(), "s1", FollowOptions{Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond},
		OnDrop: func(d FollowDrop) { d.Detail = ""; drops = append(drops, d) }},
		func(m StoredMessage) error { seqs = append(seqs, m.Seq); return nil })
	if err != nil || res.End != "deleted" || res.LastSeq != 3 || res.Connections != 2 {
		t.Fatalf("%+v, %v", res, err)
	}
	if !reflect.DeepEqual(seqs, []int64{1, 2, 3}) {
		t.Fatalf("rows %v", seqs)
	}
	wantDrops := []FollowDrop{
		{Reason: DropRowUnparseable},
		{Reason: DropRowBadID, Seq: 2},
		{Reason: DropRowRepeated, Seq: 1},
		{Reason: DropUnknownEvent},
		{Reason: "invalid_utf8"},
	}
	if !reflect.DeepEqual(drops, wantDrops) {
		t.Fatalf("drops %+v", drops)
	}
	if want := map[string]int64{DropRowUnparseable: 1, DropRowBadID: 1, DropRowRepeated: 1, DropUnknownEvent: 1, "invalid_utf8": 1}; !reflect.DeepEqual(res.Drops, want) {
		t.Fatalf("counts %v", res.Drops)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if !reflect.DeepEqual(srv.lastIDs, []string{"0", "2"}) {
		t.Fatalf("Last-Event-ID sent %q", srv.lastIDs)
	}
}

// pipeTransport answers every request in-process with a stream whose
// bytes the test writes; the body ends when the request's context does.
type pipeTransport struct {
	conns chan *pipeConn
}

type pipeConn struct {
	req *http.Request
	w   *io.PipeWriter
	at  time.Time
}

func (p *pipeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	context.AfterFunc(req.Context(), func() { _ = pw.CloseWithError(req.Context().Err()) })
	p.conns <- &pipeConn{req: req, w: pw, at: time.Now()}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: pr, Request: req}, nil
}

// A stream that goes silent (no heartbeat either) for Idle is made again,
// resuming after the last row; heartbeats keep it alive.
func TestFollowIdleReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &pipeTransport{conns: make(chan *pipeConn)}
		api, _ := NewAPI(HTTPConfig{BaseURL: "http://relay.test", Token: "t", HTTPClient: &http.Client{Transport: tr}})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		var rows []int64
		done := make(chan struct{})
		var res FollowResult
		var err error
		go func() {
			defer close(done)
			res, err = api.FollowMessages(ctx, "s1", FollowOptions{Idle: time.Minute, Backoff: Backoff{Min: time.Second, Max: time.Second}},
				func(m StoredMessage) error { rows = append(rows, m.Seq); return nil })
		}()
		c := <-tr.conns
		_, _ = io.WriteString(c.w, "retry: 3000\n\nevent: message\nid: 1\ndata: "+row(1)+"\n\n")
		for range 3 { // 90 s of heartbeats only: the stream stays
			time.Sleep(30 * time.Second)
			_, _ = io.WriteString(c.w, ": heartbeat\n\n")
		}
		// Then silence: the client drops it after a minute and comes back
		// (after a backoff of 0.5 to 1 s) with the last row's id.
		c2 := <-tr.conns
		if got := c2.at.Sub(start); got < 150*time.Second+500*time.Millisecond || got > 151*time.Second {
			t.Errorf("reconnected at %s, want 150.5 s to 151 s", got)
		}
		if id := c2.req.Header.Get("Last-Event-ID"); id != "1" {
			t.Errorf("Last-Event-ID %q", id)
		}
		_, _ = io.WriteString(c2.w, "event: message\nid: 2\ndata: "+row(2)+"\n\nevent: end\ndata: {\"reason\":\"inactive\"}\n\n")
		<-done
		if err != nil || res.Connections != 2 || res.End != "inactive" || !reflect.DeepEqual(rows, []int64{1, 2}) {
			t.Fatalf("%+v %v rows %v", res, err, rows)
		}
	})
}

// FuzzFollowStream feeds arbitrary bytes to the follower as one stream:
// nothing panics, delivered rows strictly ascend, and every frame with data
// is a row, the end, or a counted drop.
func FuzzFollowStream(f *testing.F) {
	f.Add([]byte("retry: 10\n\nevent: message\nid: 1\ndata: " + row(1) + "\n\nevent: end\ndata: {\"reason\":\"inactive\"}\n\n"))
	f.Add([]byte("event: message\nid: 2\ndata: " + row(2) + "\r\n\r\nevent: message\nid: 1\ndata: " + row(1) + "\n\n"))
	f.Add([]byte("event: message\nid: 3\ndata: {\"seq\":3}\n\nevent: x\ndata: y\n\ndata: \xff\n\n"))
	f.Add([]byte("event: message\nid: 9\ndata: {\"seq\":\"9\"}\n\nevent: end\ndata\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fl := &follower{opts: FollowOptions{AfterSeq: 0}, res: FollowResult{Drops: map[string]int64{}}}
		var seqs []int64
		fl.fn = func(m StoredMessage) error { seqs = append(seqs, m.Seq); return nil }
		rd, _ := sse.NewReader(bytes.NewReader(data), sse.Options{})
		err := fl.consume(rd)
		var re *readError
		if err != nil && !errors.As(err, &re) {
			t.Fatalf("consume: %v", err)
		}
		if (err == nil) != (fl.res.End != "") {
			t.Fatalf("err %v with end %q", err, fl.res.End)
		}
		last := int64(0)
		for _, s := range seqs {
			if s <= last {
				t.Fatalf("seq %d after %d", s, last)
			}
			last = s
		}
		if fl.res.LastSeq != last {
			t.Fatalf("LastSeq %d, last delivered %d", fl.res.LastSeq, last)
		}
		var dropped int64
		for _, n := range fl.res.Drops {
			dropped += n
		}
		st := rd.Stats()
		var refused int64
		for reason, n := range st.Refused {
			if reason != sse.ReasonTruncated {
				refused += n
			}
		}
		if dropped < refused {
			t.Fatalf("%d drops for %d refusals", dropped, refused)
		}
	})
}

// The end of a stream names the session's last seq; rows up to it that the
// stream did not carry (stored after the relay last read) are fetched and
// delivered before the end is reported, so a follower never stops short.
func TestFollowEndWaitsForItsLastSeq(t *testing.T) {
	followLeaks(t)
	stream := &scriptedStream{scripts: []string{
		"event: message\nid: 1\ndata: " + row(1) + "\n\n" +
			"event: end\ndata: {\"reason\":\"inactive\",\"lastSeq\":3}\n\n",
	}}
	mux := http.NewServeMux()
	mux.Handle("GET /v3/sessions/s1/messages/stream", stream)
	mux.HandleFunc("GET /v3/sessions/s1/messages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		var rows []string
		if r.URL.Query().Get("after_seq") == "1" {
			rows = []string{row(2), row(3)}
		}
		fmt.Fprintf(w, `{"messages":[%s],"hasMore":false}`, strings.Join(rows, ","))
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	api, _ := NewAPI(HTTPConfig{BaseURL: hs.URL, Token: "t"})
	defer api.CloseIdleConnections()
	var seqs []int64
	res, err := api.FollowMessages(t.Context(), "s1", FollowOptions{Backoff: Backoff{Min: time.Millisecond, Max: time.Millisecond}},
		func(m StoredMessage) error { seqs = append(seqs, m.Seq); return nil })
	if err != nil || res.End != "inactive" || res.LastSeq != 3 || !reflect.DeepEqual(seqs, []int64{1, 2, 3}) {
		t.Fatalf("%+v, %v, rows %v", res, err, seqs)
	}
}
