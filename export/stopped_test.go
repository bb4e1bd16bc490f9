package export

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// A session whose happy stopped mid-turn: a tool ran, another waited for
// permission, the message never finished. Read as running, it shows as
// stored; read as stopped (ended or stale), its open parts are
// interrupted and the header says why; the transcript is not changed.
func TestTextOfAStoppedSession(t *testing.T) {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-stop", Directory: "/w"})
	for _, ev := range []agent.Event{
		&agent.UserPrompt{PromptID: "p", Text: "Build it."}, &agent.TurnStarted{TurnID: "t"}, &agent.MessageStarted{Message: "m"},
		&agent.TextFinal{Message: "m", Block: "0", Text: "Building."},
		&agent.ToolCall{Message: "m", CallID: "c1", Tool: "bash", Input: json.RawMessage(`{"command":"make"}`)},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolCall{Message: "m", CallID: "c2", Tool: "bash", Input: json.RawMessage(`{"command":"rm x"}`)},
		&agent.ToolBlocked{CallID: "c2", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm x"}}},
	} {
		red.Apply(ev)
	}
	tr := red.Transcript()
	before, _ := json.Marshal(tr)
	var running, stopped bytes.Buffer
	if err := Text(&running, tr, TextOptions{SessionID: "relay-stop"}); err != nil {
		t.Fatal(err)
	}
	if err := Text(&stopped, tr, TextOptions{SessionID: "relay-stop", Stopped: true, Status: "session relay-stop is stale: no heartbeat for 2m10s"}); err != nil {
		t.Fatal(err)
	}
	const wantRunning = "session relay-stop — (untitled)\n  in /w\n> Build it.\nBuilding.\n" +
		"● bash make — running  [c1]\n" +
		"● bash rm x — blocked  [c2]\n  waiting for permission: bash rm x\n"
	const wantStopped = "session relay-stop — (untitled)\n  in /w\n  session relay-stop is stale: no heartbeat for 2m10s\n> Build it.\nBuilding.\n" +
		"● bash make — interrupted (its happy stopped)  [c1]\n" +
		"● bash rm x — interrupted (its happy stopped)  [c2]\n  was waiting for permission: bash rm x\n" +
		"(interrupted: its happy stopped before this message finished)\n"
	if running.String() != wantRunning {
		t.Errorf("running:\n%s\nwant\n%s", running.String(), wantRunning)
	}
	if stopped.String() != wantStopped {
		t.Errorf("stopped:\n%s\nwant\n%s", stopped.String(), wantStopped)
	}
	if after, _ := json.Marshal(red.Transcript()); !bytes.Equal(before, after) {
		t.Error("rendering changed the transcript")
	}

	// A follower's final update (the session is over) shows the same.
	f := NewFollower(TextOptions{})
	var out bytes.Buffer
	if err := f.Update(&out, tr, false); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(&out, tr, true); err != nil {
		t.Fatal(err)
	}
	const wantFollow = "> Build it.\nBuilding.\n" +
		"● bash make — interrupted (its happy stopped)  [c1]\n" +
		"● bash rm x — interrupted (its happy stopped)  [c2]\n  was waiting for permission: bash rm x\n" +
		"(interrupted: its happy stopped before this message finished)\n"
	if out.String() != wantFollow {
		t.Errorf("follower:\n%s\nwant\n%s", out.String(), wantFollow)
	}
}
