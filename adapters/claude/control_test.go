package claude

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// The live control API: each request the caller took off the control
// channel blocks one call (the one it names, one with its tool and input,
// else one of its own) exactly once; a request nobody could be asked for
// is dropped for the caller to refuse; a withdrawal settles a call still
// blocked, once.
func TestDecoderAskedAndWithdrawn(t *testing.T) {
	d, err := NewDecoder(FormStreamJSON, Options{ControlChannel: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	add := func(evs []agent.Event) {
		for _, ev := range evs {
			b, err := agent.EncodeEvent(ev)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, string(b))
		}
	}
	ask := func(n int64, a PermissionAsk) string {
		raw, _ := json.Marshal(map[string]any{"type": "control_request", "request_id": a.RequestID})
		callID, evs := d.Asked(linereader.Line{Number: n, Data: raw}, a)
		add(evs)
		return callID
	}
	ls := json.RawMessage(`{"command":"ls"}`)
	add(d.Decode([]byte(s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"ls"}}]},"parent_tool_use_id":null`)), 1))
	calls := []string{
		ask(2, PermissionAsk{RequestID: "r1", ToolName: "Bash", Input: ls, DecisionReason: "asked by rule"}),
		ask(3, PermissionAsk{RequestID: "r2", ToolName: "Bash", Input: ls, ToolUseID: "b1"}),
		ask(4, PermissionAsk{RequestID: "r3", ToolName: "Write", Input: json.RawMessage(`{"file_path":"/w/a","content":"x"}`)}),
	}
	add(d.Withdrawn("r3"))
	add(d.Withdrawn("r3"))
	add(d.Decode([]byte(s(`"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"b1","content":"a.txt"}]},"parent_tool_use_id":null`)), 5))
	calls = append(calls, ask(6, PermissionAsk{RequestID: "r4", ToolName: "Bash", Input: ls, ToolUseID: "b1"}))
	if want := []string{"b1", "", "r3", ""}; !reflect.DeepEqual(calls, want) {
		t.Errorf("call ids %q, want %q", calls, want)
	}
	want := []string{
		`{"type":"TurnStarted","turnID":"turn-1"}`,
		`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
		`{"type":"ToolCall","message":"m1","callID":"b1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"providerTool":"Bash"}}`,
		`{"type":"ToolRunning","callID":"b1"}`,
		`{"type":"ToolBlocked","message":"m1","callID":"b1","tool":"bash","input":{"command":"ls"},"permission":{"id":"r1","permission":"bash","patterns":["ls"],"metadata":{"decisionReason":"asked by rule","tool":"Bash"}}}`,
		`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":3,"kind":"control_request/can_use_tool","reason":"illegal_transition","detail":"can_use_tool for b1, which waits for an answer already or was refused; denied","raw":"{\"request_id\":\"r2\",\"type\":\"control_request\"}"}}`,
		`{"type":"ToolCall","callID":"r3","tool":"write","title":"/w/a","input":{"path":"/w/a","content":"x"},"metadata":{"providerInput":{"content":"x","file_path":"/w/a"},"providerTool":"Write"}}`,
		`{"type":"ToolBlocked","callID":"r3","tool":"write","input":{"path":"/w/a","content":"x"},"permission":{"id":"r3","permission":"write","patterns":["/w/a"],"metadata":{"tool":"Write"}}}`,
		`{"type":"ToolResolved","callID":"r3","decision":"reject","reason":"cancelled"}`,
		`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
		// Nobody answered r1 through Decide here (it would have told the
		// decoder): the result says Claude's own UI allowed it.
		`{"type":"ToolResolved","callID":"b1","decision":"once","reason":"answered-in-agent"}`,
		`{"type":"ToolCompleted","callID":"b1","output":"a.txt","title":"ls"}`,
		`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":6,"kind":"control_request/can_use_tool","reason":"illegal_transition","detail":"can_use_tool for b1 after the call was settled; denied","raw":"{\"request_id\":\"r4\",\"type\":\"control_request\"}"}}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
}
