//go:build unix

package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/settings"
	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/localapi"
)

// fakeTokenEnv names the home's events.token for a fake session.
const fakeTokenEnv = "HAPPY_DAEMON_TEST_TOKEN"

// The fake session's documents and frames.
const (
	fakeSessionDoc = `{"id":"ses_f","projectID":"/p","directory":"/p","title":"","time":{"created":1,"updated":1}}`
	fakeMessage    = `{"id":"msg_1","sessionID":"ses_f","role":"user","time":{"created":1},"agent":"build","model":{"providerID":"test","modelID":""}}`
	fakePartFirst  = `{"id":"prt_1","sessionID":"ses_f","messageID":"msg_1","type":"text","text":"seeded"}`
	fakePartAfter  = `{"id":"prt_1","sessionID":"ses_f","messageID":"msg_1","type":"text","text":"seeded!?"}`
	fakeDelta      = `{"type":"message.part.delta","properties":{"sessionID":"ses_f","messageID":"msg_1","partID":"prt_1","field":"text","delta":"?"}}`
	fakeUpdated    = `{"type":"session.updated","properties":{"info":{"id":"ses_f","projectID":"/p","directory":"/p","title":"again","time":{"created":1,"updated":2}}}}`
)

// fakeEventsSession is a session whose event API is scripted: its first
// stream sends three frames that are not changes, a delta the document
// already holds, an update and a delta, then ends; later streams send
// session.updated and stay open. It exits on SIGTERM.
func fakeEventsSession(sig <-chan os.Signal) int {
	fmt.Fprintf(os.Stderr, "fake session args: %q\n", os.Args[1:])
	tok, err := localapi.LoadOrCreateToken(os.Getenv(fakeTokenEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake session:", err)
		return 3
	}
	var streams atomic.Int32
	part := func() string {
		if streams.Load() > 1 {
			return fakePartAfter
		}
		return fakePartFirst
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /session", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "["+fakeSessionDoc+"]") })
	mux.HandleFunc("GET /session/ses_f/message", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `[{"info":%s,"parts":[%s]}]`+"\n", fakeMessage, part())
	})
	mux.HandleFunc("GET /session/ses_f/todo", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "[]") })
	mux.HandleFunc("GET /event", func(w http.ResponseWriter, r *http.Request) {
		n := streams.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		if n == 1 {
			fmt.Fprint(w, "retry: 3000\n\n",
				"event: message.part.delta\ndata: {\"type\":\"error\",\"properties\":{}}\n\n",
				"event: file.edited\ndata: {\"type\":\"file.edited\",\"properties\":{}}\n\n",
				"event: session.status\ndata: {\"type\":\"session.status\xff\"}\n\n",
				"event: message.part.delta\ndata: "+strings.Replace(fakeDelta, `"?"`, `"!"`, 1)+"\n\n",
				"event: message.part.updated\ndata: {\"type\":\"message.part.updated\",\"properties\":{\"part\":"+strings.Replace(fakePartAfter, "!?", "!", 1)+"}}\n\n",
				"event: message.part.delta\ndata: "+fakeDelta+"\n\n")
			return
		}
		fmt.Fprint(w, "retry: 3000\n\nevent: session.updated\ndata: "+fakeUpdated+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 3
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+tok {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			mux.ServeHTTP(w, r)
		}))
	}()
	fd, _ := strconv.Atoi(os.Getenv(app.SpawnReportEnv))
	f := os.NewFile(uintptr(fd), "report")
	fmt.Fprintf(f, `{"sessionId":"fake-events","pid":%d,"events":%q}`+"\n", os.Getpid(), ln.Addr().String())
	f.Close()
	<-sig
	return 0
}

// follow reads GET /event of the daemon's API and returns its frames
// ("retry N" or "event data"), one by one.
func followAPI(t *testing.T, addr, token string) (<-chan string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/event", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		cancel()
		t.Fatalf("GET /event: %v %v", resp, err)
	}
	out := make(chan string, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(out)
		defer resp.Body.Close()
		rd, _ := sse.NewReader(resp.Body, sse.Options{})
		for {
			f, ref, err := rd.Next()
			switch {
			case err != nil:
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					out <- "error " + err.Error()
				}
				return
			case ref != nil:
				out <- "refused " + ref.Error()
			case f.HasRetry && !f.HasData:
				out <- "retry " + strconv.FormatInt(f.Retry, 10)
			default:
				out <- f.Event + " " + f.Data
			}
		}
	}()
	return out, func() { cancel(); <-done; http.DefaultClient.CloseIdleConnections() }
}

func nextFrame(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("no frame within 20 s")
	}
	return ""
}

func getAPI(t *testing.T, addr, token, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(b))
}

// The daemon's event API follows a session's own: the documents first,
// then the stream; frames that are not changes are refused and counted,
// a delta the document may already hold waits for the part's update, the
// stream that ends while the session runs is followed again (documents
// read again), and a stopped session is said ended and forgotten.
func TestDaemonFollowsSessionEvents(t *testing.T) {
	conn, h, finish := runDaemon(t, "events", 10*time.Second)
	ctx := context.Background()
	st, err := ReadState(h)
	if err != nil || st.Events == "" {
		t.Fatalf("state %+v %v", st, err)
	}
	tok, err := localapi.LoadOrCreateToken(h.EventsToken())
	if err != nil {
		t.Fatal(err)
	}
	if code, body := getAPI(t, st.Events, "", "/session"); code != http.StatusUnauthorized || !strings.Contains(body, "missing Authorization") {
		t.Fatalf("GET /session without the token = %d %s", code, body)
	}
	frames, stop := followAPI(t, st.Events, tok)
	defer stop()
	if f := nextFrame(t, frames); f != "retry 3000" {
		t.Fatalf("first frame %q", f)
	}
	rep, err := SpawnOn(ctx, conn, machineID(t, h), SpawnRequest{Agent: "codex", Directory: t.TempDir()})
	if err != nil || rep.Type != SpawnSuccess {
		t.Fatalf("spawn = %+v, %v", rep, err)
	}
	created := `{"type":"session.created","properties":{"info":` + fakeSessionDoc + `}}`
	updatedSeed := strings.Replace(created, "session.created", "session.updated", 1)
	msg := `{"type":"message.updated","properties":{"info":` + fakeMessage + `}}`
	part := func(p string) string { return `{"type":"message.part.updated","properties":{"part":` + p + `}}` }
	want := []string{
		"session.created " + created,
		"message.updated " + msg,
		"message.part.updated " + part(fakePartFirst),
		"message.part.updated " + part(strings.Replace(fakePartAfter, "!?", "!", 1)),
		"message.part.delta " + fakeDelta,
		// followed again: the documents, then the stream
		"session.updated " + updatedSeed,
		"message.updated " + msg,
		"message.part.updated " + part(fakePartAfter),
		"session.updated " + fakeUpdated,
	}
	for i, w := range want {
		if got := nextFrame(t, frames); got != w {
			t.Fatalf("frame %d:\n got %s\nwant %s", i, got, w)
		}
	}
	if code, body := getAPI(t, st.Events, tok, "/session"); code != 200 || body != `[`+strings.TrimSuffix(strings.TrimPrefix(fakeUpdated, `{"type":"session.updated","properties":{"info":`), "}}")+`]` {
		t.Fatalf("GET /session = %d %s", code, body)
	}
	if code, body := getAPI(t, st.Events, tok, "/session/ses_f/message"); code != 200 || body != `[{"info":`+fakeMessage+`,"parts":[`+fakePartAfter+`]}]` {
		t.Fatalf("GET /session/ses_f/message = %d %s", code, body)
	}
	if s, _ := ReadState(h); len(s.Sessions) != 1 || s.Sessions[0].Events == "" || s.Sessions[0].SessionID != "fake-events" {
		t.Fatalf("state sessions %+v", s.Sessions)
	}

	var stopRep StopReply
	if err := Call(ctx, conn, machineID(t, h), MethodStopSession, map[string]string{"sessionId": rep.SessionID}, &stopRep, 0); err != nil || !stopRep.Success {
		t.Fatalf("stop-session = %+v, %v", stopRep, err)
	}
	if got, w := nextFrame(t, frames), `session.status {"type":"session.status","properties":{"sessionID":"ses_f","status":{"type":"ended"}}}`; got != w {
		t.Fatalf("after the stop:\n got %s\nwant %s", got, w)
	}
	if code, body := getAPI(t, st.Events, tok, "/session"); code != 200 || body != "[]" {
		t.Fatalf("GET /session after the stop = %d %s", code, body)
	}
	if code, _ := getAPI(t, st.Events, tok, "/session/ses_f/message"); code != http.StatusNotFound {
		t.Fatalf("messages of the forgotten session: %d", code)
	}
	stop()
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(testLog(h))
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, w := range []string{
		`"reason":"localapi: bad change: message.part.delta: data type \"error\" differs from the event name","event":"message.part.delta","message":"event from a session refused"`,
		`"reason":"localapi: bad change: file.edited: not an event of the local event API","event":"file.edited","message":"event from a session refused"`,
		`"sse":"invalid_utf8"`,
		`"message":"the session's event stream ended while it runs; following it again"`,
		`"frames":6,"refused":3,"skippedDeltas":1,"reconnects":1,"forgotten":["ses_f"],"message":"the session's events are no longer followed"`,
		`"forgotten":1,`,
	} {
		if !strings.Contains(log, w) {
			t.Errorf("the daemon log lacks %s", w)
		}
	}
	if t.Failed() {
		t.Log(log)
	}
}

// With the event API off, the daemon serves none, passes no
// --events-listen to its sessions and follows none.
func TestDaemonEventsOff(t *testing.T) {
	conn, h, finish := runDaemon(t, "events", 10*time.Second, func(o *Options) { o.EventsListen = EventsOff })
	rep, err := SpawnOn(context.Background(), conn, machineID(t, h), SpawnRequest{Agent: "codex", Directory: t.TempDir()})
	if err != nil || rep.Type != SpawnSuccess {
		t.Fatalf("spawn = %+v, %v", rep, err)
	}
	st, err := ReadState(h)
	if err != nil || st.Events != "" || len(st.Sessions) != 1 {
		t.Fatalf("state %+v %v", st, err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(st.Sessions[0].Log)
	if want := `fake session args: ["codex" "--started-by" "daemon"]`; !strings.Contains(string(out), want) {
		t.Fatalf("the session's output %q lacks %s", out, want)
	}
	log, _ := os.ReadFile(testLog(h))
	if strings.Contains(string(log), "local event API") || strings.Contains(string(log), "followed") {
		t.Fatalf("the daemon log speaks of an event API:\n%s", log)
	}
}

func TestEventsAddr(t *testing.T) {
	parse := func(s string) settings.Settings {
		st, err := settings.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	for _, tc := range []struct {
		flag, settings, want, wantErr string
	}{
		{"", `{}`, DefaultEventsListen, ""},
		{"", `{"daemonEventsListen":"127.0.0.1:4097"}`, "127.0.0.1:4097", ""},
		{"", `{"daemonEventsListen":"off"}`, EventsOff, ""},
		{"[::1]:5000", `{"daemonEventsListen":"off"}`, "[::1]:5000", ""},
		{"off", `{}`, EventsOff, ""},
		{"", `{"daemonEventsListen":false}`, "", "malformed settings: daemonEventsListen is not a string (host:port on loopback, or \"off\")"},
		{"0.0.0.0:1", `{}`, "", `the local event API listens on loopback only: "0.0.0.0:1" would listen on 0.0.0.0; use 127.0.0.1:1 or [::1]:1`},
	} {
		got, err := EventsAddr(tc.flag, parse(tc.settings))
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("EventsAddr(%q, %s) error %v, want %s", tc.flag, tc.settings, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("EventsAddr(%q, %s) = %q, %v; want %q", tc.flag, tc.settings, got, err, tc.want)
		}
	}
}
