package app

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/webpushtest"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// pushes listens, as an app does, for the session-event ephemerals of the
// account.
func pushes(t *testing.T, conn *Conn) <-chan map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sock, err := relay.SIODialer(10*time.Second)(ctx, conn.URL, map[string]any{"token": conn.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	ch := make(chan map[string]any, 64)
	sock.On("ephemeral", func(args []any, _ func(...any)) {
		if m, ok := args[0].(map[string]any); ok && m["type"] == "session-event" {
			delete(m, "timestamp")
			ch <- m
		}
	})
	return ch
}

func nextPush(t *testing.T, ch <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no push event")
		return nil
	}
}

func TestPushEvents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "myproj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		ag    func() agent.Agent
		kinds []string
	}{
		{"permission then done", func() agent.Agent { return newScriptedAgent() }, []string{"permission", "done"}},
		{"question then done", func() agent.Agent { return &questionAgent{scriptedAgent: newScriptedAgent()} }, []string{"question", "done"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ag := c.ag()
			o, b, _ := runIn(t, ag, dir, nil, "")
			ch := pushes(t, b)
			if _, err := Send(context.Background(), b, o, "go", time.Now()); err != nil {
				t.Fatal(err)
			}
			want := func(kind, title string) map[string]any {
				return map[string]any{"type": "session-event", "sessionId": o.Info.ID, "kind": kind, "title": title, "body": "myproj"}
			}
			if got := nextPush(t, ch); !reflect.DeepEqual(got, want(c.kinds[0], pushTitles[c.kinds[0]])) {
				t.Fatalf("first push %v", got)
			}
			_, call := blocked(t, b, func() string { return o.Info.ID })
			var err error
			if c.kinds[0] == "question" {
				_, err = CallRPC(context.Background(), b, o, "communication", map[string]any{"id": call, "kind": "form", "status": "answered",
					"answers": map[string]any{"0": map[string]any{"options": []string{"red"}}}}, 0)
			} else {
				err = Approve(context.Background(), b, o, call, agent.DecisionOnce, "")
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := nextPush(t, ch); !reflect.DeepEqual(got, want("done", "It's ready!")) {
				t.Fatalf("second push %v", got)
			}
		})
	}
}

func TestPushEventsOff(t *testing.T) {
	o, b, _ := runIn(t, newScriptedAgent(), t.TempDir(), map[string]string{EnvPushEvents: "0"}, "")
	ch := pushes(t, b)
	if _, err := Send(context.Background(), b, o, "go", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, call := blocked(t, b, func() string { return o.Info.ID })
	if err := Approve(context.Background(), b, o, call, agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, b, o, 1)
	// An event sent after the turn's push would have been reaches the app
	// after it: the relay keeps the order of one socket's ephemerals.
	if _, err := b.API.PushEvent(context.Background(), o.Info.ID, relay.PushEvent{Kind: "done", Title: "marker", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	if got := nextPush(t, ch); got["title"] != "marker" {
		t.Fatalf("a push was sent with pushEvents off: %v", got)
	}
}

// TestWebPushSealed: a push-event's detail reaches the web app's push
// service sealed with the session's key. What the relay and the push
// service see (the request, the encrypted message and its plaintext for
// the browser) holds neither the session's title nor the tool's command;
// the sealed part opens with the session's cipher, on another device, to
// the kind, title, tool, command, call id, session id and time; the turn's
// end says how it ended and how the answer starts.
func TestWebPushSealed(t *testing.T) {
	noLeaks(t)
	ps := webpushtest.Start(t)
	r := servertest.StartConfig(t, server.Config{WebPushServices: []string{"127.0.0.1"}})
	envA, connA, connB := twoDevicesOn(t, r)
	p256dh, auth := ps.Keys()
	body, _ := json.Marshal(map[string]any{"endpoint": ps.URL + "/sub/phone", "keys": map[string]any{"p256dh": p256dh, "auth": auth}})
	req, _ := http.NewRequest(http.MethodPost, r.URL+"/v1/web-push/subscriptions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+connB.Creds.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("subscribe: %v %v", resp, err)
	}
	resp.Body.Close()

	dir := filepath.Join(t.TempDir(), "myproj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const title = "Rotate the production database password"
	ids := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	t.Cleanup(func() { cancel(); <-finished })
	before := time.Now().UnixMilli()
	go func() {
		defer close(finished)
		_, _ = RunSession(ctx, envA, connA, newScriptedAgent(), SessionOptions{Flavor: "fake", Dir: dir, Prompt: title, ProviderID: "test",
			OnCreated: func(id string) { ids <- id }})
	}()
	var sid string
	select {
	case sid = <-ids:
	case <-time.After(20 * time.Second):
		t.Fatal("session not created")
	}
	o, err := FindSession(context.Background(), connB, sid)
	if err != nil {
		t.Fatal(err)
	}

	open := func(m webpushtest.Message) relay.PushDetail {
		t.Helper()
		if m.Err != nil {
			t.Fatal(m.Err)
		}
		for _, secret := range []string{title, "touch f1", "Rotate", "production", "Turn 1"} {
			if bytes.Contains(m.Body, []byte(secret)) || bytes.Contains(m.Payload, []byte(secret)) {
				t.Fatalf("the push service carries %q: %s", secret, m.Payload)
			}
		}
		var p struct {
			V         int    `json:"v"`
			SessionID string `json:"sessionId"`
			Kind      string `json:"kind"`
			Sealed    string `json:"sealed"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.V != 1 || p.SessionID != sid || p.Sealed == "" {
			t.Fatalf("payload %s", m.Payload)
		}
		sealed, err := crypto.DecodeBase64(p.Sealed)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := o.Cipher.Open(sealed)
		if err != nil {
			t.Fatalf("the sealed part does not open with the session's key: %v", err)
		}
		var d relay.PushDetail
		if err := json.Unmarshal(plain, &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind != p.Kind {
			t.Fatalf("sealed kind %q, clear %q", d.Kind, p.Kind)
		}
		if d.Time < before || d.Time > time.Now().UnixMilli() {
			t.Fatalf("time %d not within the test", d.Time)
		}
		d.Time = 0
		return d
	}
	got := open(ps.Next(t, 20*time.Second))
	if want := (relay.PushDetail{HappyPush: 1, Kind: "permission", SessionID: sid, Title: title, CallID: "call-1", Tool: "bash", Summary: "touch f1"}); got != want {
		t.Fatalf("permission detail\n got  %+v\n want %+v", got, want)
	}
	_, call := blocked(t, connB, func() string { return sid })
	if err := Approve(context.Background(), connB, o, call, agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	got = open(ps.Next(t, 20*time.Second))
	if want := (relay.PushDetail{HappyPush: 1, Kind: "done", SessionID: sid, Title: title, Status: "completed", Summary: "Turn 1: once"}); got != want {
		t.Fatalf("done detail\n got  %+v\n want %+v", got, want)
	}
}

// TestSealPushDetailFits: a detail whose strings are long (and escape to
// six bytes a rune in JSON) is shortened until its sealed form fits the
// relay's bound, never refused.
func TestSealPushDetailFits(t *testing.T) {
	var key [32]byte
	ci := crypto.NewDataKeyCipher(key)
	long := strings.Repeat("\x01", 5000)
	sealed, err := sealPushDetail(ci, relay.PushDetail{Kind: "permission", SessionID: "s", Title: long, Summary: long, Tool: "bash"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sealed) > pushSealedMax {
		t.Fatalf("%d base64 characters", len(sealed))
	}
	raw, _ := crypto.DecodeBase64(sealed)
	plain, err := ci.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	var d relay.PushDetail
	if err := json.Unmarshal(plain, &d); err != nil {
		t.Fatal(err)
	}
	if d.HappyPush != 1 || d.Kind != "permission" || len([]rune(d.Title)) == 0 || len([]rune(d.Title)) > pushTitleMax || !strings.HasSuffix(d.Title, "…") {
		t.Fatalf("detail %+v", d)
	}
}

// TestPushDetailOfATurn: the detail of a finished turn is the root
// session's title and how its last answer went: the start of its text, or
// its error; a new prompt forgets the last turn's; an earlier message that
// changes late does not take the answer's place; a question names its
// first question.
func TestPushDetailOfATurn(t *testing.T) {
	p := &pusher{ch: make(chan relay.PushDetail, 16), rootID: "root", tools: map[string]pushTool{}}
	next := func() relay.PushDetail {
		t.Helper()
		d := <-p.ch
		d.Time = 0
		return d
	}
	p.observe([]mapper.BusEvent{
		&mapper.SessionCreated{Info: mapper.Session{ID: "root", Title: "Fix the build"}},
		&mapper.SessionCreated{Info: mapper.Session{ID: "child", ParentID: "root", Title: "a subagent"}},
		&mapper.MessageUpdated{Info: &mapper.UserMessage{ID: "u1", SessionID: "root"}},
		&mapper.MessageUpdated{Info: &mapper.AssistantMessage{ID: "a1", SessionID: "root", Time: mapper.AssistantTime{Created: 10}}},
		&mapper.MessagePartUpdated{Part: &mapper.TextPart{PartBase: mapper.PartBase{SessionID: "root", MessageID: "a1"}, Text: "\n  All green.\nDetails follow."}},
		&mapper.MessageUpdated{Info: &mapper.AssistantMessage{ID: "a2", SessionID: "child", Time: mapper.AssistantTime{Created: 11}}},
		&mapper.MessagePartUpdated{Part: &mapper.TextPart{PartBase: mapper.PartBase{SessionID: "child", MessageID: "a2"}, Text: "child text"}},
	})
	p.turnDone()
	if d, want := next(), (relay.PushDetail{Kind: "done", Title: "Fix the build", Status: "completed", Summary: "All green."}); d != want {
		t.Fatalf("completed turn %+v, want %+v", d, want)
	}
	p.observe([]mapper.BusEvent{
		&mapper.MessageUpdated{Info: &mapper.UserMessage{ID: "u2", SessionID: "root"}},
		&mapper.MessageUpdated{Info: &mapper.AssistantMessage{ID: "a3", SessionID: "root", Time: mapper.AssistantTime{Created: 20},
			Error: &agent.MessageError{Name: agent.ErrNameAPI, Data: agent.ErrorData{Message: "rate limited"}}}},
		&mapper.MessageUpdated{Info: &mapper.AssistantMessage{ID: "a1", SessionID: "root", Time: mapper.AssistantTime{Created: 10}, Finish: agent.FinishStop}},
	})
	p.turnDone()
	if d, want := next(), (relay.PushDetail{Kind: "done", Title: "Fix the build", Status: "failed", Summary: "rate limited"}); d != want {
		t.Fatalf("failed turn %+v, want %+v", d, want)
	}
	p.observe([]mapper.BusEvent{&mapper.MessageUpdated{Info: &mapper.UserMessage{ID: "u3", SessionID: "root"}}})
	p.turnDone()
	if d, want := next(), (relay.PushDetail{Kind: "done", Title: "Fix the build", Status: "completed"}); d != want {
		t.Fatalf("a turn without an answer %+v, want %+v", d, want)
	}
	p.observe([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: &mapper.ToolPart{CallID: "q1", Tool: "question", State: mapper.ToolState{Status: mapper.StatusBlocked,
		Block: &mapper.Block{Type: mapper.BlockQuestion, Questions: []agent.QuestionInfo{{Question: "Which colour?"}, {Question: "How big?"}}}}}}})
	p.waiting("q1")
	if d, want := next(), (relay.PushDetail{Kind: "question", Title: "Fix the build", CallID: "q1", Tool: "question", Summary: "Which colour? (+1 more)"}); d != want {
		t.Fatalf("question %+v, want %+v", d, want)
	}
}
