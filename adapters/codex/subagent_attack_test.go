package codex

import (
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// decodeAttack decodes frames (">" prefix: happy's own, else Codex's) and
// summarizes the events: kind, session, and the field that matters.
func decodeAttack(frames []string) []string {
	d := NewAppServerDecoder()
	var out []string
	for _, fr := range frames {
		dir := trafficlog.A2C
		if s, ok := strings.CutPrefix(fr, ">"); ok {
			dir, fr = trafficlog.C2A, s
		}
		for _, e := range d.Decode(jsonrpc.NewFrame(0, dir, []byte(fr))) {
			s := e.Base().Session
			switch e := e.(type) {
			case *agent.DroppedInput:
				out = append(out, fmt.Sprintf("dropped[%s] %s/%s/%s", s, e.Dropped.Kind, e.Dropped.Reason, e.Dropped.Detail))
			case *agent.ToolBlocked:
				out = append(out, fmt.Sprintf("blocked[%s] %s", s, e.CallID))
			case *agent.ToolResolved:
				out = append(out, fmt.Sprintf("resolved[%s] %s:%s", s, e.CallID, e.Decision))
			case *agent.SubagentStarted:
				out = append(out, fmt.Sprintf("subagentStarted[%s] %s by %s", s, e.Child, e.CallID))
			case *agent.SubagentEnded:
				out = append(out, fmt.Sprintf("subagentEnded[%s] %s", s, e.Child))
			case *agent.TurnStarted:
				out = append(out, fmt.Sprintf("turnStarted[%s] %s", s, e.TurnID))
			case *agent.TurnEnded:
				out = append(out, fmt.Sprintf("turnEnded[%s] %s:%s", s, e.TurnID, e.Reason))
			case *agent.ToolFailed:
				out = append(out, fmt.Sprintf("failed[%s] %s: %s", s, e.CallID, e.Error))
			case *agent.ToolCompleted:
				out = append(out, fmt.Sprintf("completed[%s] %s", s, e.CallID))
			case *agent.SessionInfo:
				out = append(out, fmt.Sprintf("sessionInfo[%s] %s", s, e.ProviderSessionID))
			}
		}
	}
	return out
}

var attackStart = []string{
	`>{"id":1,"method":"thread/start","params":{}}`,
	`{"id":1,"result":{"thread":{"id":"th1"},"model":"m"}}`,
	`>{"id":2,"method":"turn/start","params":{"threadId":"th1"}}`,
	`{"id":2,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`,
}

func spawn(item, child string, status string) string {
	return fmt.Sprintf(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"collabAgentToolCall","id":%q,"tool":"spawnAgent","status":%q,"prompt":"do it","receiverThreadIds":[%q],"agentsStates":{}}}}`, item, status, child)
}

// TestAppServerHostileSubagents: hostile sub-agent traffic never ends,
// settles or blocks another session's turn or tool: a child announced with
// the main thread's id (or a sub-agent activity naming it) is not a child
// and ends nothing; the same child spawned twice is announced once; an
// unknown collab status fails the spawning call and ends no child; a
// child's turn ends on its own after the parent's; the same call id in two
// children stays two tools, each resolved in its own session.
func TestAppServerHostileSubagents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []string
		want   []string
	}{
		{"child-is-main", []string{
			spawn("sp1", "th1", "completed"),
			`{"method":"thread/started","params":{"thread":{"id":"th1","parentThreadId":"th1"}}}`,
			`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"collabAgentToolCall","id":"w1","tool":"wait","status":"completed","receiverThreadIds":["th1"],"agentsStates":{"th1":{"status":"completed"}}}}}`,
		}, []string{"completed[] sp1", "sessionInfo[] th1", "completed[] w1"}},
		{"sub-activity-names-main", []string{
			`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"subAgentActivity","id":"sa1","agentThreadId":"th1","kind":"completed"}}}`,
		}, nil},
		{"empty-receiver-thread", []string{
			spawn("sp1", "", "completed"),
		}, []string{"dropped[] item:collabAgentToolCall/missing_id/receiverThreadIds holds an empty thread id", "completed[] sp1"}},
		{"same-child-two-spawns", []string{
			spawn("sp1", "thA", "completed"),
			spawn("sp2", "thA", "completed"),
		}, []string{"subagentStarted[] thA by sp1", "completed[] sp1", "completed[] sp2"}},
		{"unknown-collab-status", []string{
			spawn("sp1", "thA", "weird"),
			`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"collabAgentToolCall","id":"w1","tool":"wait","status":"completed","receiverThreadIds":["thA"],"agentsStates":{"thA":{"status":"bogus"}}}}}`,
		}, []string{"subagentStarted[] thA by sp1", "failed[] sp1: subagent call weird", "completed[] w1"}},
		{"garbage-collab-items", []string{
			`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"collabAgentToolCall","id":"g1","tool":"spawnAgent","status":"completed","receiverThreadIds":[1,2]}}}`,
			`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"collabAgentToolCall","id":"g2","tool":"spawnAgent","status":"completed","agentsStates":["x"]}}}`,
			`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":"not an item"}}`,
			`{"id":9,"method":"item/commandExecution/requestApproval","params":["not","an","object"]}`,
		}, []string{
			"dropped[] item/invalid_field/json: cannot unmarshal number into Go struct field itemHead.receiverThreadIds of type string",
			"dropped[] item/invalid_field/json: cannot unmarshal array into Go struct field itemHead.agentsStates of type map[string]codex.collabAgentState",
			"dropped[] item/completed/invalid_field/item is not an object",
			"dropped[] item/commandExecution/requestApproval/invalid_field/request params are not an object of the expected shape",
		}},
		{"child-turn-after-parent", []string{
			spawn("sp1", "thA", "completed"),
			`{"method":"turn/started","params":{"threadId":"thA","turn":{"id":"tA","items":[],"status":"inProgress"}}}`,
			`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`,
			`{"method":"turn/completed","params":{"threadId":"thA","turn":{"id":"tA","items":[],"status":"completed"}}}`,
		}, []string{"subagentStarted[] thA by sp1", "completed[] sp1", "turnStarted[thA] tA", "turnEnded[] tu1:completed", "turnEnded[thA] tA:completed"}},
		{"same-call-two-children", []string{
			spawn("sp1", "thA", "completed"),
			spawn("sp2", "thB", "completed"),
			`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"thA","turnId":"tA","itemId":"c1","command":"ls"}}`,
			`{"id":8,"method":"item/commandExecution/requestApproval","params":{"threadId":"thB","turnId":"tB","itemId":"c1","command":"rm -rf /"}}`,
			`>{"id":8,"result":{"decision":"accept"}}`,
			`{"method":"serverRequest/resolved","params":{"threadId":"thA","requestId":7}}`,
		}, []string{"subagentStarted[] thA by sp1", "completed[] sp1", "subagentStarted[] thB by sp2", "completed[] sp2",
			"blocked[thA] c1", "blocked[thB] c1", "resolved[thB] c1:once", "resolved[thA] c1:reject"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decodeAttack(append(append([]string{}, attackStart...), tc.frames...))[2:]
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("events\n %q\nwant\n %q", got, tc.want)
			}
		})
	}
}

// TestAppServerOrphanThreadApproval: an approval of a thread no spawn and
// no thread/started announced is that thread's, in a child session of its
// own: never a tool of the main session, where it would share the call
// id of the main thread's own waiting command (one answer would approve
// both). The thread's later notifications go to the same child.
func TestAppServerOrphanThreadApproval(t *testing.T) {
	got := decodeAttack(append(append([]string{}, attackStart...),
		`{"id":6,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c1","command":"ls"}}`,
		`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"th-ghost","turnId":"tx","itemId":"c1","command":"rm -rf /"}}`,
		`>{"id":7,"result":{"decision":"decline"}}`,
		`{"method":"turn/completed","params":{"threadId":"th-ghost","turn":{"id":"tx","items":[],"status":"completed"}}}`,
	))
	want := []string{
		"sessionInfo[] th1", "turnStarted[] tu1",
		"blocked[] c1",
		"subagentStarted[] th-ghost by ", "blocked[th-ghost] c1",
		"resolved[th-ghost] c1:reject",
		"turnStarted[th-ghost] tx", "turnEnded[th-ghost] tx:completed",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n %q\nwant\n %q", got, want)
	}
}

// TestAppServerResolvedInRequestSession: Codex withdrawing a sub-agent's
// request (serverRequest/resolved) resolves the tool in the session of the
// request, whatever thread the notification names: a resolution in
// another session settles nothing there (and the request's own tool
// would wait on).
func TestAppServerResolvedInRequestSession(t *testing.T) {
	got := decodeAttack(append(append([]string{}, attackStart...),
		spawn("sp1", "thA", "completed"),
		`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"thA","turnId":"tA","itemId":"c1","command":"ls"}}`,
		`{"method":"serverRequest/resolved","params":{"threadId":"th1","requestId":7}}`,
	))[2:]
	want := []string{"subagentStarted[] thA by sp1", "completed[] sp1", "blocked[thA] c1", "resolved[thA] c1:reject"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events\n %q\nwant\n %q", got, want)
	}
}
