package app

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/relay"
)

func TestState(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	cases := []struct {
		name    string
		state   string
		since   int64
		active  int64
		created int64
		want    string
	}{
		{"fresh heartbeat", LifecycleRunning, ms(time.Hour), ms(time.Second), ms(time.Hour), LifecycleRunning},
		{"heartbeat at the limit", LifecycleRunning, ms(time.Hour), ms(StaleAfter), ms(time.Hour), LifecycleRunning},
		{"heartbeat past the limit", LifecycleRunning, ms(time.Hour), ms(StaleAfter + time.Millisecond), ms(time.Hour), StateStale},
		{"resumed a moment ago", LifecycleRunning, ms(time.Second), ms(time.Hour), ms(2 * time.Hour), LifecycleRunning},
		{"created a moment ago", "", 0, 0, ms(time.Second), LifecycleRunning},
		{"no lifecycle, old", "", 0, ms(time.Hour), ms(time.Hour), StateStale},
		{"ended long ago", LifecycleEnded, ms(time.Hour), ms(time.Hour), ms(time.Hour), LifecycleEnded},
		{"archived", LifecycleArchived, ms(time.Hour), ms(time.Hour), ms(time.Hour), LifecycleArchived},
	}
	for _, tc := range cases {
		got := State(relay.SessionInfo{ActiveAt: tc.active, CreatedAt: tc.created}, Metadata{LifecycleState: tc.state, LifecycleStateSince: tc.since}, now)
		if got != tc.want {
			t.Errorf("%s: State = %q, want %q", tc.name, got, tc.want)
		}
		if Ended(got) != (tc.want != LifecycleRunning) {
			t.Errorf("%s: Ended(%q) = %v", tc.name, got, Ended(got))
		}
	}
}

// mergeFields keeps every field it does not set, byte for byte.
func TestMergeFields(t *testing.T) {
	cur := json.RawMessage(`{"path":"/w","hostPid":12345,"tools":["a"],"lifecycleState":"running"}`)
	got, err := mergeFields(lifecycleFields(LifecycleEnded, time.UnixMilli(1754000000123)))(cur)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"hostPid":12345,"lifecycleState":"ended","lifecycleStateSince":1754000000123,"path":"/w","tools":["a"]}`
	if string(got) != want {
		t.Fatalf("merged %s\nwant   %s", got, want)
	}
	for _, bad := range []json.RawMessage{nil, json.RawMessage(`null`), json.RawMessage(`[1]`)} {
		got, err := mergeFields(map[string]json.RawMessage{"a": json.RawMessage(`1`)})(bad)
		if err != nil || string(got) != `{"a":1}` {
			t.Errorf("merge into %s = %s %v", bad, got, err)
		}
	}
}

// The heartbeat tells other devices the session is thinking while a turn
// runs (here: blocked on a permission) and not once it ended.
func TestHeartbeatCarriesThinking(t *testing.T) {
	envA, connA, connB := twoDevices(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sock, err := relay.SIODialer(10*time.Second)(ctx, connB.URL, map[string]any{"token": connB.Creds.Token, "clientType": "user-scoped"})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	type activity struct {
		id       string
		thinking bool
	}
	seen := make(chan activity, 256)
	sock.On("ephemeral", func(args []any, _ func(...any)) {
		if m, ok := args[0].(map[string]any); ok && m["type"] == "activity" && m["active"] == true {
			id, _ := m["id"].(string)
			th, _ := m["thinking"].(bool)
			seen <- activity{id, th}
		}
	})
	ag := newScriptedAgent()
	ids := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		_, err := RunSession(ctx, envA, connA, ag, SessionOptions{Flavor: "fake", Dir: "/proj", Prompt: "task", ProviderID: "test",
			OnCreated: func(id string) { ids <- id }})
		done <- err
	}()
	sid := <-ids
	wait := func(thinking bool) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case a := <-seen:
				if a.id == sid && a.thinking == thinking {
					return
				}
			case <-deadline:
				t.Fatalf("no heartbeat with thinking=%v", thinking)
			}
		}
	}
	o, call := blocked(t, connB, func() string { return sid })
	wait(true)
	if err := Approve(ctx, connB, o, call, agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 1)
	// Heartbeats sent before the turn ended may still arrive: wait for one
	// that says the session is idle.
	wait(false)
	cancel()
	<-done
}
