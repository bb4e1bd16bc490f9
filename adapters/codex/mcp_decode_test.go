package codex

import (
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// decodeMCP decodes mcp-server frames; a frame starting with ">" is
// happy's own (client to Codex).
func decodeMCP(frames []string) []agent.Event {
	dec := NewMCPDecoder()
	var evs []agent.Event
	for i, fr := range frames {
		dir := trafficlog.A2C
		if s, ok := strings.CutPrefix(fr, ">"); ok {
			dir, fr = trafficlog.C2A, s
		}
		evs = append(evs, dec.Decode(jsonrpc.NewFrame(int64(i+1), dir, []byte(fr)))...)
	}
	return evs
}

// codexEvent is a codex/event notification of msg (a JSON object), with
// _meta.requestId when req is not "".
func codexEvent(req, id, msg string) string {
	meta := ""
	if req != "" {
		meta = `"_meta":{"requestId":` + req + `},`
	}
	return `{"jsonrpc":"2.0","method":"codex/event","params":{` + meta + `"id":"` + id + `","msg":` + msg + `}}`
}

// Codex before _meta.requestId: its events carry no request id. They
// belong to the turn of happy's tools/call that is open (or about to
// start), so each prompt is one turn, and the deltas and the final message
// that follows them are one text part.
func TestMCPEventsWithoutRequestID(t *testing.T) {
	evs := decodeMCP([]string{
		`>{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"codex","arguments":{"prompt":"say hello"}}}`,
		codexEvent("", "s1", `{"type":"session_configured","session_id":"conv-1","model":"m"}`),
		codexEvent("", "s1", `{"type":"agent_message_delta","delta":"Hel"}`),
		codexEvent("", "s1", `{"type":"agent_message_delta","delta":"lo."}`),
		codexEvent("", "s1", `{"type":"agent_message","message":"Hello."}`),
		codexEvent("", "s1", `{"type":"task_complete","last_agent_message":"Hello."}`),
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Hello."}]}}`,
		`>{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"codex-reply","arguments":{"prompt":"and goodbye","conversationId":"conv-1"}}}`,
		codexEvent("", "s2", `{"type":"task_started"}`),
		codexEvent("", "s2", `{"type":"agent_message_delta","delta":"Good"}`),
		codexEvent("", "s2", `{"type":"agent_message_delta","delta":"bye."}`),
		codexEvent("", "s2", `{"type":"agent_message","message":"Goodbye."}`),
		codexEvent("", "s2", `{"type":"task_complete"}`),
		`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"Goodbye."}]}}`,
	})
	var turns []string
	for _, e := range evs {
		switch e := e.(type) {
		case *agent.TurnStarted:
			turns = append(turns, "start:"+e.TurnID)
		case *agent.TurnEnded:
			turns = append(turns, "end:"+e.TurnID+":"+e.Reason)
		case *agent.DroppedInput:
			t.Errorf("dropped %+v", e.Dropped)
		}
	}
	if want := "[start:tools/call#3 end:tools/call#3:completed start:tools/call#4 end:tools/call#4:completed]"; fmt.Sprint(turns) != want {
		t.Errorf("turns %v, want %s", turns, want)
	}
	tr, _ := reduce(t, "relay-no-request-id", evs)
	var got []string
	for _, m := range tr.Messages {
		var texts []string
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				texts = append(texts, tp.Text)
			}
		}
		got = append(got, string(m.Info.MessageRole())+":"+strings.Join(texts, "|"))
	}
	if want := "[user:say hello assistant:Hello. user:and goodbye assistant:Goodbye.]"; fmt.Sprint(got) != want {
		t.Errorf("messages %q, want %s", got, want)
	}
}

// An elicitation that names its call only through codex_event_id blocks
// the call that the approval event with that id announced (with the
// event's detail); one that names no call happy knows blocks a tool part
// of its own, which completes once approved. Nothing is dropped and
// nothing is decided by the decoder.
func TestMCPElicitationCorrelation(t *testing.T) {
	evs := decodeMCP([]string{
		`>{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"codex","arguments":{"prompt":"write hi.txt"}}}`,
		codexEvent("3", "ev-1", `{"type":"task_started","turn_id":"ev-1"}`),
		codexEvent("3", "ev-1", `{"type":"exec_approval_request","call_id":"call_1","turn_id":"ev-1","command":["/bin/bash","-lc","echo hi > hi.txt"],"cwd":"/w","reason":"write hi.txt"}`),
		`{"jsonrpc":"2.0","id":0,"method":"elicitation/create","params":{"message":"Allow?","codex_elicitation":"exec-approval","codex_mcp_tool_call_id":"3","codex_event_id":"ev-1"}}`,
		`>{"jsonrpc":"2.0","id":0,"result":{"decision":"approved"}}`,
		codexEvent("3", "ev-1", `{"type":"exec_command_begin","call_id":"call_1","command":["/bin/bash","-lc","echo hi > hi.txt"],"cwd":"/w"}`),
		codexEvent("3", "ev-1", `{"type":"exec_command_end","call_id":"call_1","exit_code":0,"aggregated_output":""}`),
		`{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"Allow?","codex_elicitation":"exec-approval","codex_event_id":"ev-9","codex_command":["bash","-lc","rm -rf build"],"codex_cwd":"/w"}}`,
		`>{"jsonrpc":"2.0","id":1,"result":{"decision":"approved"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"elicitation/create","params":{"message":"Allow?","codex_elicitation":"exec-approval","codex_command":["git","push"]}}`,
		`>{"jsonrpc":"2.0","id":2,"result":{"decision":"denied"}}`,
		codexEvent("3", "ev-1", `{"type":"task_complete"}`),
	})
	var got []string
	for _, e := range evs {
		switch e := e.(type) {
		case *agent.ToolCall:
			got = append(got, fmt.Sprintf("call %s %s %s", e.CallID, e.Title, e.Input))
		case *agent.ToolBlocked:
			got = append(got, fmt.Sprintf("blocked %s %q %v %v", e.CallID, e.Permission.Patterns, e.Permission.Metadata["reason"], e.Permission.Metadata["uncorrelatedApproval"]))
		case *agent.ToolResolved:
			got = append(got, "resolved "+e.CallID+" "+string(e.Decision))
		case *agent.ToolCompleted:
			got = append(got, "completed "+e.CallID)
		case *agent.DroppedInput:
			got = append(got, "dropped "+e.Dropped.Kind+" "+e.Dropped.Detail)
		}
	}
	want := []string{
		// The approval announces the call (canonical bash input), then
		// blocks it.
		`call call_1 echo hi > hi.txt {"command":"echo hi > hi.txt","cwd":"/w"}`,
		`blocked call_1 ["echo hi > hi.txt"] write hi.txt <nil>`,
		`resolved call_1 once`,
		`completed call_1`,
		`call elicitation-1 rm -rf build {"command":"rm -rf build","cwd":"/w"}`,
		`blocked elicitation-1 ["rm -rf build"] <nil> true`,
		`resolved elicitation-1 once`,
		`completed elicitation-1`,
		`call elicitation-2 git push {"command":"git push"}`,
		`blocked elicitation-2 ["git push"] <nil> true`,
		`resolved elicitation-2 reject`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tr, _ := reduce(t, "relay-elicitation", evs)
	for call, w := range map[string]string{
		"call_1":        "completed: [permission once  []]",
		"elicitation-1": "completed: [permission once  []]",
		"elicitation-2": "error:rejected [permission reject  []]",
	} {
		if s := state(tools(tr)[call]); s != w {
			t.Errorf("%s: %s, want %s", call, s, w)
		}
	}
}

func TestMCPApprovalsCall(t *testing.T) {
	var a MCPApprovals
	ev := func(id, typ, call string) {
		a.Event([]byte(`{"id":"` + id + `","msg":{"type":"` + typ + `","call_id":"` + call + `"}}`))
	}
	ev("e1", "exec_approval_request", "c1")
	ev("e1", "exec_approval_request", "c2")
	ev("e1", "apply_patch_approval_request", "p1")
	ev("e2", "exec_command_begin", "x1") // not an approval
	var got []string
	for _, e := range []Elicitation{
		{Kind: "patch-approval", EventID: "e1"},
		{Kind: "exec-approval", CallID: "c1"}, // named: claims c1
		{Kind: "exec-approval", EventID: "e1"},
		{Kind: "exec-approval", EventID: "e1"}, // nothing left under e1
		{Kind: "exec-approval", EventID: "e2"},
		{Kind: "exec-approval"},
		{Kind: "mcp-tool-approval", CallID: "m1"}, // not an approval happy shows
	} {
		id, synth := a.Call(e)
		got = append(got, fmt.Sprintf("%s/%v", id, synth))
	}
	if want := "[p1/false c1/false c2/false elicitation-1/true elicitation-2/true elicitation-3/true /false]"; fmt.Sprint(got) != want {
		t.Errorf("calls %v, want %s", got, want)
	}
}

// FuzzParseElicitation: any params give an elicitation or an error, never
// a panic, and naming its call never panics either.
func FuzzParseElicitation(f *testing.F) {
	for _, s := range []string{
		`{"codex_elicitation":"exec-approval","codex_call_id":"c1","codex_command":["ls"]}`,
		`{"codex_elicitation":"exec-approval","codex_event_id":"e1"}`,
		`{"codex_elicitation":"patch-approval","codex_changes":{"a.txt":{"add":{"content":"x"}}}}`,
		`{"codex_changes":[1]}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		e, err := ParseElicitation(params)
		var a MCPApprovals
		a.Event(params)
		id, synth := a.Call(e)
		if err == nil && synth && !strings.HasPrefix(id, "elicitation-") {
			t.Fatalf("synthesised id %q", id)
		}
	})
}
