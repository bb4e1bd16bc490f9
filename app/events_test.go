package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/mapper"
)

// idHash is the hash half of a canonical id (mapper.MakeID): it derives
// from the random session tag, so the golden file keeps only the position.
var idHash = regexp.MustCompile(`\b((?:ses|msg|prt|per|q)_[0-9a-f]{12})[0-9a-f]{16}\b`)

// TestEventAPIFollowsALiveSession runs a fake-agent session with
// --events-listen's wiring: a tool blocks, is approved from another device,
// completes, and the final text streams. The stream, followed with
// internal/sse's reader, is the golden event sequence; GET /session and GET
// /session/{id}/message equal the runner's transcript.
func TestEventAPIFollowsALiveSession(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		goleak.VerifyNone(t, ignore)
	})
	envA, connA, connB := twoDevices(t)
	clock := time.UnixMilli(1_753_120_000_000)
	envA.Now = func() time.Time { return clock }
	es, err := StartEvents(envA, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	if _, err := StartEvents(envA, "0.0.0.0:0"); !errors.Is(err, localapi.ErrNotLoopback) {
		t.Fatalf("non-loopback: %v", err)
	}
	if es.TokenPath != filepath.Join(envA.Home.Path(), "events.token") {
		t.Fatalf("token path %s", es.TokenPath)
	}
	raw, err := os.ReadFile(es.TokenPath)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	call := func(ctx context.Context, path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", es.Server.URL()+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultClient.Do(req)
	}
	resp, err := call(t.Context(), "/event")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	type frame struct {
		f   sse.Frame
		err error
	}
	frames := make(chan frame, 256)
	rd, _ := sse.NewReader(resp.Body, sse.Options{})
	go func() {
		defer close(frames)
		for {
			f, ref, err := rd.Next()
			if ref != nil {
				err = ref
			}
			frames <- frame{f, err}
			if err != nil {
				return
			}
		}
	}()
	next := func() sse.Frame {
		t.Helper()
		select {
		case fr, ok := <-frames:
			if !ok || fr.err != nil {
				t.Fatalf("stream ended: %v", fr.err)
			}
			return fr.f
		case <-time.After(20 * time.Second):
			t.Fatal("no event within 20 s")
			return sse.Frame{}
		}
	}
	var got []string
	record := func(f sse.Frame) {
		if f.HasRetry && !f.HasData {
			got = append(got, fmt.Sprintf("retry: %d", f.Retry))
			return
		}
		got = append(got, "event: "+f.Event+"\ndata: "+idHash.ReplaceAllString(f.Data, "$1…"))
	}
	// The retry frame is written after the subscription: from here on,
	// nothing is missed.
	record(next())

	ag := newScriptedAgent()
	ag.deltas = true
	sid := make(chan string, 1)
	type out struct {
		res SessionResult
		err error
	}
	done := make(chan out, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		res, err := RunSession(ctx, envA, connA, ag, SessionOptions{
			Flavor: "fake", Dir: "/project", Prompt: "first task", ProviderID: "test", OneShot: true,
			Events:    es.Hub,
			OnCreated: func(id string) { sid <- id },
		})
		done <- out{res, err}
	}()

	// Follow the stream until the tool blocks; approve it from device B.
	for {
		f := next()
		record(f)
		if f.Event == mapper.EvMessagePartUpdated && strings.Contains(f.Data, `"status":"blocked"`) {
			break
		}
	}
	var id string
	select {
	case id = <-sid:
	case <-time.After(20 * time.Second):
		t.Fatal("relay session never created")
	}
	o, err := FindSession(ctx, connB, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := Approve(ctx, connB, o, "call-1", agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	var r out
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("session did not end")
	}
	if r.err != nil {
		t.Fatalf("RunSession: %v", r.err)
	}

	// The documents equal the transcript the runner built.
	tr := r.res.Transcript
	wantSessions, _ := localapi.EncodeSessions([]mapper.Session{tr.Session})
	wantMessages, err := localapi.EncodeMessages(tr.Messages)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want []byte
	}{
		{"/session", wantSessions},
		{"/session/" + tr.Session.ID + "/message", wantMessages},
	} {
		resp, err := call(ctx, tc.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != string(tc.want)+"\n" {
			t.Errorf("GET %s: %d\n got %s\nwant %s", tc.path, resp.StatusCode, b, tc.want)
		}
	}
	if len(tr.Messages) != 3 {
		t.Errorf("transcript has %d messages", len(tr.Messages))
	}

	// Closing the API sends what is queued, then ends the stream.
	if err := es.Close(); err != nil {
		t.Fatal(err)
	}
	for fr := range frames {
		if fr.err != nil {
			if !errors.Is(fr.err, io.EOF) && !strings.Contains(fr.err.Error(), "EOF") {
				t.Fatalf("stream end: %v", fr.err)
			}
			break
		}
		record(fr.f)
	}
	golden.Check(t, filepath.Join("testdata", "events", "blocked-approved.sse"), []byte(strings.Join(got, "\n\n")+"\n"))

	// A tool becoming blocked or answered is a message.part.updated, never
	// an event of its own; every name is seed 001's.
	seed := map[string]bool{}
	for _, n := range []string{"session.created", "session.updated", "session.status", "session.error", "session.compacted",
		"message.updated", "message.removed", "message.part.updated", "message.part.delta", "message.part.removed", "todo.updated"} {
		seed[n] = true
	}
	statuses := []string{}
	for _, g := range got {
		name, _, _ := strings.Cut(strings.TrimPrefix(g, "event: "), "\n")
		if strings.HasPrefix(g, "retry: ") {
			continue
		}
		if !seed[name] {
			t.Errorf("event %q is not one of seed 001's", name)
		}
		if m := regexp.MustCompile(`"callID":"call-1".*?"state":\{"status":"(\w+)"`).FindStringSubmatch(g); m != nil {
			statuses = append(statuses, m[1])
		}
	}
	if s := strings.Join(statuses, ","); s != "pending,running,blocked,running,completed" {
		t.Errorf("tool states on the stream: %s", s)
	}
}
