package app

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/relay"
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
