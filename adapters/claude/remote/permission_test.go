package remote

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/claude/sdk"
	"github.com/happy-dev/happy/agent"
)

// startScript starts the agent on the fake CLI replaying testdata/name.
// The returned context bounds the run: at its end the fake is killed, so a
// test that waits for something that never comes fails instead of hanging.
func startScript(t *testing.T, name string) (*Agent, context.Context) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	a, err := Start(ctx, Options{SDK: sdk.Options{Binary: os.Args[0], Env: append(os.Environ(), fakeScriptEnv+"="+script, "GORACE=atexit_sleep_ms=0"), Grace: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if err := a.Prompt(ctx, agent.Prompt{Text: "List the files"}); err != nil {
		t.Fatal(err)
	}
	return a, ctx
}

// encoded is the JSON of each event (agent.EncodeEvent), in order.
func encoded(t *testing.T, evs []agent.Event) []string {
	t.Helper()
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		b, err := agent.EncodeEvent(ev)
		if err != nil {
			t.Fatalf("encode %T: %v", ev, err)
		}
		out = append(out, string(b))
	}
	return out
}

// checkCleanExit fails the test unless the fake CLI exited 0: it exits 3
// when an answer differs from its script (or never came).
func checkCleanExit(t *testing.T, a *Agent) {
	t.Helper()
	if d := a.ExitDetail(); d != "" {
		t.Fatalf("the fake CLI did not get the answers of its script: %s", d)
	}
}

// A can_use_tool that names no call the transcript knows (no tool_use_id,
// no open call with its tool and input) still reaches the runner as a
// blocked tool, announced first, with the request id as its call id; the
// runner's answer reaches Claude.
func TestRequestAloneReachesTheRunner(t *testing.T) {
	a, ctx := startScript(t, "alone-allow.traffic.jsonl")
	var evs []agent.Event
	for ev := range a.Events() {
		evs = append(evs, ev)
		if b, ok := ev.(*agent.ToolBlocked); ok {
			if err := a.Decide(ctx, b.CallID, agent.Verdict{Decision: agent.DecisionOnce}); err != nil {
				t.Fatalf("decide: %v", err)
			}
		}
	}
	checkCleanExit(t, a)
	want := []string{
		`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"claude-opus-4-8","cwd":"/w"}`,
		`{"type":"TurnStarted","turnID":"turn-1"}`,
		`{"type":"ToolCall","callID":"perm-alone","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"providerTool":"Bash"}}`,
		`{"type":"ToolBlocked","callID":"perm-alone","tool":"bash","input":{"command":"ls"},"permission":{"id":"perm-alone","permission":"bash","patterns":["ls"],"always":["ls"],"metadata":{"suggestions":[{"behavior":"allow","destination":"session","rules":[{"ruleContent":"ls","toolName":"Bash"}],"type":"addRules"}],"tool":"Bash"}}}`,
		// The script's turn ends without the tool's result.
		`{"type":"ToolFailed","callID":"perm-alone","error":"the turn ended before the tool finished"}`,
		`{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`,
	}
	if got := encoded(t, evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if err := a.Decide(ctx, "perm-alone", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, ErrUnknownCall) || !errors.Is(err, agent.ErrStale) {
		t.Fatalf("a second answer: %v, want ErrUnknownCall", err)
	}
}

// Claude withdrawing a request (control_cancel_request) settles the tool
// that waited on it, rejected as cancelled, and the agent no longer takes
// an answer for it.
func TestWithdrawnRequestSettlesTheTool(t *testing.T) {
	for _, c := range []struct{ script, callID, rid string }{
		{"alone-cancel.traffic.jsonl", "perm-alone", "perm-alone"},
		{"call-cancel.traffic.jsonl", "toolu_1", "perm-1"},
	} {
		t.Run(c.script, func(t *testing.T) {
			a, ctx := startScript(t, c.script)
			blocked, settled := false, false
			for ev := range a.Events() {
				switch e := ev.(type) {
				case *agent.ToolBlocked:
					blocked = e.CallID == c.callID && e.Permission != nil && e.Permission.ID == c.rid
				case *agent.ToolResolved:
					if !blocked || settled {
						t.Fatalf("resolved %+v (blocked %v, settled %v)", e, blocked, settled)
					}
					want := agent.ToolResolved{CallID: c.callID, Decision: agent.DecisionReject, Reason: agent.ReasonCancelled}
					if got := *e; !reflect.DeepEqual(got, want) {
						t.Fatalf("resolved %+v, want %+v", got, want)
					}
					settled = true
					if err := a.Decide(ctx, c.callID, agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, ErrUnknownCall) || !errors.Is(err, agent.ErrStale) {
						t.Fatalf("answer after the withdrawal: %v, want ErrUnknownCall", err)
					}
				case *agent.DroppedInput:
					t.Errorf("dropped: %+v", e.Dropped)
				}
			}
			if !blocked || !settled {
				t.Fatalf("blocked %v, settled %v", blocked, settled)
			}
			checkCleanExit(t, a)
		})
	}
}

// A request for a call the transcript has already closed cannot be shown
// as a blocked tool: it is recorded as dropped and denied at once, so
// Claude does not wait for an answer that cannot come.
func TestRequestForAnEndedCallIsDenied(t *testing.T) {
	a, _ := startScript(t, "settled.traffic.jsonl")
	var dropped []agent.Dropped
	for ev := range a.Events() {
		switch e := ev.(type) {
		case *agent.ToolBlocked:
			t.Errorf("blocked %+v", e)
		case *agent.DroppedInput:
			dropped = append(dropped, e.Dropped)
		}
	}
	checkCleanExit(t, a)
	want := []agent.Dropped{{Source: "claude-stream-json", Line: 5, Kind: "control_request/can_use_tool", Reason: agent.DropIllegalTransition,
		Detail: "can_use_tool for toolu_1 after the call was settled; denied",
		Raw:    `{"type":"control_request","request_id":"perm-late","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"toolu_1"}}`}}
	if !reflect.DeepEqual(dropped, want) {
		t.Fatalf("dropped\n got %+v\nwant %+v", dropped, want)
	}
}

// A control request the client answers with an error (here a hook callback
// nobody registered) is visible in the transcript as a Dropped record.
func TestRefusedControlRequestIsDropped(t *testing.T) {
	a, _ := startScript(t, "refused.traffic.jsonl")
	var dropped []agent.Dropped
	for ev := range a.Events() {
		if e, ok := ev.(*agent.DroppedInput); ok {
			dropped = append(dropped, e.Dropped)
		}
	}
	checkCleanExit(t, a)
	want := []agent.Dropped{{Source: "claude-stream-json", Line: 3, Kind: "control_request/hook_callback", Reason: agent.DropUnknownType,
		Detail: `unsupported control request subtype "hook_callback"; answered with an error`,
		Raw:    `{"type":"control_request","request_id":"cli-1","request":{"subtype":"hook_callback","callback_id":"h1","input":{}}}`}}
	if !reflect.DeepEqual(dropped, want) {
		t.Fatalf("dropped\n got %+v\nwant %+v", dropped, want)
	}
}
