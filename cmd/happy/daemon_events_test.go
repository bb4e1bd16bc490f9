//go:build unix

package main

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

	"github.com/happy-dev/happy/daemon"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/internal/waitfor"
)

// sseFrames follows GET url+"/event" with the bearer token and sends one
// string per frame ("retry: N", or "event: NAME\ndata: DATA"); the channel
// closes when the stream ends (an error other than the end is sent as
// "error: …").
func sseFrames(t *testing.T, url, token string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/event", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("GET %s/event: %v %v", url, resp, err)
	}
	out := make(chan string, 1024)
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
					out <- "error: " + err.Error()
				}
				return
			case ref != nil:
				out <- "error: " + ref.Error()
			case f.HasRetry && !f.HasData:
				out <- fmt.Sprintf("retry: %d", f.Retry)
			default:
				out <- "event: " + f.Event + "\ndata: " + f.Data
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done; http.DefaultClient.CloseIdleConnections() })
	return out
}

// nextSSE is the next frame of ch; the test fails after 30 s or at the
// stream's end.
func nextSSE(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s, ok := <-ch:
		if !ok {
			t.Fatalf("the stream ended before %s", what)
		}
		if strings.HasPrefix(s, "error: ") {
			t.Fatalf("stream: %s", s)
		}
		return s
	case <-time.After(30 * time.Second):
		t.Fatalf("no frame within 30 s while waiting for %s", what)
	}
	return ""
}

func apiGet(t *testing.T, url, token, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

var (
	// eventIDHash is the hash half of a canonical id (mapper.MakeID),
	// which derives from the random session tag.
	eventIDHash = regexp.MustCompile(`\b((?:ses|msg|prt|per|q)_[0-9a-f]{12})[0-9a-f]{16}\b`)
	// eventTime is a Unix ms time of the wall clock.
	eventTime = regexp.MustCompile(`":1[0-9]{12}\b`)
	// sentID is the id of a message sent from another device (happy
	// send), made of the time it was sent and random hex.
	sentID    = regexp.MustCompile(`\bmsg_1[0-9]{12}[0-9a-f]+\b`)
	toolState = regexp.MustCompile(`"type":"tool","callID":"([^"]+)".*?"state":\{"status":"(\w+)"`)
)

// A session the daemon starts is followed through the daemon's local event
// API: a client of the daemon's GET /event sees the session's documents,
// then exactly the frames of the session's own stream (a prompt, the tool
// blocked, approved from another home, completed, the answer); GET
// /session lists it; happy stop ends it, and the stream says it ended and
// the daemon forgets it. Without the token the API answers 401.
func TestDaemonEventAPIFollowsASpawnedSession(t *testing.T) {
	fc := interactiveCodex(t)
	envA, envB := daemonHomes(t, fc)
	st := startDaemon(t, envA)
	if st.Events == "" {
		t.Fatalf("daemon.json has no event API address: %+v", st)
	}
	h := testHome(t, envA)
	code, stdout, _ := runHappy(t, envA, "daemon", "status")
	if want := "events: http://" + st.Events + "/event (bearer token in " + h.EventsToken() + ")\n"; code != exitOK || !strings.Contains(stdout, want) {
		t.Fatalf("daemon status = %d %q; want a line %q", code, stdout, want)
	}
	raw, err := os.ReadFile(h.EventsToken())
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	api := "http://" + st.Events
	for _, path := range []string{"/event", "/session"} {
		if code, body := apiGet(t, api, "", path); code != http.StatusUnauthorized || !strings.Contains(body, "missing Authorization") {
			t.Fatalf("GET %s without the token = %d %s", path, code, body)
		}
		if code, _ := apiGet(t, api, strings.Repeat("0", 64), path); code != http.StatusUnauthorized {
			t.Fatalf("GET %s with a wrong token = %d", path, code)
		}
	}
	daemonStream := sseFrames(t, api, token)
	if f := nextSSE(t, daemonStream, "retry"); f != "retry: 3000" {
		t.Fatalf("first frame %q", f)
	}

	waitFor(t, "the machine", func() bool { return len(machines(t, envB)) == 1 })
	dir := t.TempDir()
	code, stdout, stderr := runHappy(t, envB, "spawn", "--machine", st.MachineID, "--dir", dir, "--agent", "codex")
	if code != exitOK {
		t.Fatalf("spawn = %d %q %q", code, stdout, stderr)
	}
	sid, pid := strings.TrimSpace(stdout), spawnPID(t, stderr)
	s, err := daemon.ReadState(h)
	if err != nil || len(s.Sessions) != 1 || s.Sessions[0].SessionID != sid || s.Sessions[0].Events == "" {
		t.Fatalf("daemon state %+v %v", s, err)
	}
	child := "http://" + s.Sessions[0].Events
	childStream := sseFrames(t, child, token)
	if f := nextSSE(t, childStream, "the session's retry"); f != "retry: 3000" {
		t.Fatalf("the session's first frame %q", f)
	}
	// The spawn reply came once the session's documents were in the
	// daemon's hub: they come first.
	seed := nextSSE(t, daemonStream, "the seeded session")
	if !strings.HasPrefix(seed, "event: session.created\ndata: ") {
		t.Fatalf("first event %q", seed)
	}
	got := []string{"retry: 3000", seed}

	if code, _, stderr := runHappy(t, envB, "send", sid, "Run `echo hi > hi.txt` in the shell and tell me what happened"); code != exitOK {
		t.Fatalf("happy send: %d %s", code, stderr)
	}
	var live []string
	callID := ""
	for callID == "" {
		f := nextSSE(t, daemonStream, "a blocked tool")
		live = append(live, f)
		if m := toolState.FindStringSubmatch(f); m != nil && m[2] == "blocked" {
			callID = m[1]
		}
	}
	if code, stdout, stderr := runHappy(t, envB, "approve", sid, callID); code != exitOK {
		t.Fatalf("happy approve: %d %s %s", code, stdout, stderr)
	}
	for {
		f := nextSSE(t, daemonStream, "the end of the turn")
		live = append(live, f)
		if strings.HasPrefix(f, "event: session.status\n") && strings.Contains(f, `"status":{"type":"idle"}`) {
			break
		}
	}
	// The daemon's documents are the session's own, once the daemon has
	// the events the session sent after the idle status (its session
	// document's update comes next: the golden stream below has it).
	for _, path := range []string{"/session", "/session/" + eventIDHash.FindString(seed) + "/message"} {
		var dc, cc int
		var db, cb string
		same := func() bool {
			dc, db = apiGet(t, api, token, path)
			cc, cb = apiGet(t, child, token, path)
			return dc == 200 && cc == 200 && db == cb && len(db) >= 10
		}
		if !(waitfor.Poll{Within: 30 * time.Second}).True(same) {
			t.Fatalf("GET %s: daemon %d %s\nsession %d %s", path, dc, db, cc, cb)
		}
	}
	if m := fc.mismatch(t); m != "" {
		t.Fatalf("happy's traffic differs from the script:\n%s", m)
	}

	// Stopped: the session's stream ends; the daemon's says it ended.
	if code, stdout, stderr := runHappy(t, envB, "stop", sid); code != exitOK {
		t.Fatalf("happy stop = %d %q %q", code, stdout, stderr)
	}
	waitFor(t, "the session's process group to go", func() bool { return groupGone(pid) })
	var childLive []string
	for f := range childStream {
		if strings.HasPrefix(f, "error: ") {
			t.Fatalf("the session's stream: %s", f)
		}
		childLive = append(childLive, f)
	}
	ended := `event: session.status` + "\n" + `data: {"type":"session.status","properties":{"sessionID":"` + eventIDHash.FindString(seed) + `","status":{"type":"ended"}}}`
	for {
		f := nextSSE(t, daemonStream, "the session's end")
		if f == ended {
			break
		}
		live = append(live, f)
	}
	// After the documents, the daemon's stream is the session's own,
	// frame for frame.
	if strings.Join(live, "\n\n") != strings.Join(childLive, "\n\n") {
		t.Fatalf("the daemon's stream differs from the session's:\n%s", golden.Diff([]byte(strings.Join(childLive, "\n\n")), []byte(strings.Join(live, "\n\n"))))
	}
	if code, body := apiGet(t, api, token, "/session"); code != 200 || body != "[]" {
		t.Fatalf("GET /session after the end = %d %s", code, body)
	}

	got = append(got, live...)
	got = append(got, ended)
	var tools []string
	for _, f := range got {
		if m := toolState.FindStringSubmatch(f); m != nil {
			tools = append(tools, m[2])
		}
	}
	if s := strings.Join(tools, ","); s != "pending,running,blocked,running,completed" {
		t.Errorf("tool states on the daemon's stream: %s", s)
	}
	text := strings.Join(got, "\n\n") + "\n"
	text = strings.ReplaceAll(text, dir, "/project")
	text = eventIDHash.ReplaceAllString(text, "$1…")
	text = eventTime.ReplaceAllString(text, `":0`)
	text = sentID.ReplaceAllString(text, "msg_sent")
	golden.Check(t, filepath.Join("testdata", "events", "daemon-codex.sse"), []byte(text))

	if code, _, stderr := runHappy(t, envA, "daemon", "stop"); code != exitOK {
		t.Fatalf("daemon stop: %d %s", code, stderr)
	}
	b, _ := os.ReadFile(daemon.LogPath(h))
	if !strings.Contains(string(b), `"refused":0,"skippedDeltas":0,"reconnects":0,"forgotten":["`) {
		t.Errorf("the daemon log lacks the follower's totals:\n%s", b)
	}
}
