package acp

import (
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// script turns compact lines into frames: "< msg" the agent wrote, "> msg"
// happy wrote, "# note" a note, "! exit" an exit record. Frame times are
// 1, 2, 3, …
func script(lines ...string) []jsonrpc.Frame {
	var out []jsonrpc.Frame
	for i, l := range lines {
		dir := map[byte]trafficlog.Dir{'<': trafficlog.A2C, '>': trafficlog.C2A, '#': trafficlog.Note, '!': trafficlog.Exit}[l[0]]
		out = append(out, frame(int64(i+1), dir, strings.TrimSpace(l[1:])))
	}
	return out
}

// upd is an agent session/update for session "s".
func upd(update string) string {
	return `< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":` + update + `}}`
}

// opened is a session "s" opened and a prompt (id 2) in flight.
var opened = []string{
	`> {"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
	`< {"jsonrpc":"2.0","id":1,"result":{"sessionId":"s","modes":{"currentModeId":"default","availableModes":[]}}}`,
	`> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"},{"type":"resource_link","uri":"file:///w/a.txt","name":"a.txt"}]}}`,
}

const openedEvents = `{"type":"SessionInfo","providerSessionID":"s","agent":"default","cwd":"/w"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"UserPrompt","promptID":"prompt-1","text":"hi","files":[{"filename":"a.txt","url":"file:///w/a.txt"}]}`

// eventLines renders events as JSON lines without times.
func eventLines(t *testing.T, evs []agent.Event) string {
	t.Helper()
	var lines []string
	for _, e := range evs {
		e.Base().Time = 0
		b, err := agent.EncodeEvent(e)
		if err != nil {
			t.Fatalf("encode %T: %v", e, err)
		}
		lines = append(lines, string(b))
	}
	return strings.Join(lines, "\n")
}

func TestDecoderCases(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		want  string // events after openedEvents, one JSON line each
	}{
		{
			name:  "text, thought and image chunks",
			lines: []string{upd(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}`), upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}`), upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Hi"},"messageId":"m1"}`), upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AAAA","mimeType":"image/png"}}`)},
			want: `{"type":"ReasoningDelta","delta":"hmm"}
{"type":"TextDelta","block":"m1","delta":"Hi"}
{"type":"TextDelta","delta":"![image/png](data:image/png;base64,AAAA)"}`,
		},
		{
			name: "tool call upserts: a repeat merges, an update for an unknown id creates the part",
			lines: []string{
				upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Terminal","kind":"execute","status":"pending","rawInput":{}}`),
				upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"ls","kind":"execute","status":"pending","rawInput":{"command":"ls"},"content":[{"type":"content","content":{"type":"text","text":"List files"}}]}`),
				upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress"}`),
				upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"a.txt"}}],"rawOutput":{"code":0}}`),
				upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t2","status":"failed","locations":[{"path":"/w/x","line":3}],"rawOutput":"boom"}`),
			},
			want: `{"type":"ToolCall","callID":"t1","tool":"bash","title":"Terminal","input":{},"metadata":{"providerTool":"execute"}}
{"type":"ToolCall","callID":"t1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"description":"List files","providerTool":"execute"}}
{"type":"ToolRunning","callID":"t1"}
{"type":"ToolCompleted","callID":"t1","output":"a.txt","metadata":{"rawOutput":{"code":0}}}
{"type":"ToolCall","callID":"t2","tool":"other","metadata":{"locations":[{"line":3,"path":"/w/x"}],"providerTool":"other"}}
{"type":"ToolFailed","callID":"t2","error":"boom","metadata":{"rawOutput":"boom"}}`,
		},
		{
			name: "diff content becomes diffs; a terminal's output becomes the tool's",
			lines: []string{
				`< {"jsonrpc":"2.0","id":5,"method":"terminal/create","params":{"sessionId":"s","command":"ls"}}`,
				`> {"jsonrpc":"2.0","id":5,"result":{"terminalId":"term-1"}}`,
				`< {"jsonrpc":"2.0","id":6,"method":"terminal/wait_for_exit","params":{"sessionId":"s","terminalId":"term-1"}}`,
				`> {"jsonrpc":"2.0","id":6,"result":{"exitCode":2,"signal":null}}`,
				`< {"jsonrpc":"2.0","id":7,"method":"terminal/output","params":{"sessionId":"s","terminalId":"term-1"}}`,
				`> {"jsonrpc":"2.0","id":7,"result":{"output":"no such file\n","truncated":false,"exitStatus":{"exitCode":2}}}`,
				upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"ls","kind":"execute","status":"completed","content":[{"type":"terminal","terminalId":"term-1"},{"type":"diff","path":"/w/a","oldText":"x\n","newText":"x\ny\n"}]}`),
			},
			want: `{"type":"ToolCall","callID":"t1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"diffs":[{"additions":1,"after":"x\ny\n","before":"x\n","deletions":0,"file":"/w/a","status":"modified"}],"providerTool":"execute","terminals":["term-1"]}}
{"type":"ToolCompleted","callID":"t1","output":"no such file\n","metadata":{"diffs":[{"additions":1,"after":"x\ny\n","before":"x\n","deletions":0,"file":"/w/a","status":"modified"}],"terminals":[{"exitCode":2,"terminalId":"term-1"}]}}`,
		},
		{
			name: "a write happy made for the agent is recorded on the tool working on that path",
			lines: []string{
				upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Write a","kind":"edit","status":"in_progress","locations":[{"path":"/w/a"}]}`),
				`< {"jsonrpc":"2.0","id":9,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/w/a","content":"one\ntwo\n"}}`,
				`# {"happy":"fs-write","request":9,"path":"/w/a","existed":true,"before":"one\n"}`,
				`> {"jsonrpc":"2.0","id":9,"result":{}}`,
			},
			want: `{"type":"ToolCall","callID":"t1","tool":"edit","title":"Write a","input":{"path":"/w/a"},"metadata":{"locations":[{"path":"/w/a"}],"providerTool":"edit"}}
{"type":"ToolRunning","callID":"t1"}
{"type":"ToolCall","callID":"t1","tool":"edit","title":"Write a","input":{"path":"/w/a"},"metadata":{"diffs":[{"additions":1,"after":"one\ntwo\n","before":"one\n","deletions":0,"file":"/w/a","status":"modified"}],"locations":[{"path":"/w/a"}],"providerTool":"edit"}}`,
		},
		{
			name: "permission for a tool never announced, answered by kind; a second request of the call gets its own id",
			lines: []string{
				`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1","title":"rm x","kind":"execute","rawInput":{"command":"rm x"}},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"},{"optionId":"A","name":"Always","kind":"allow_always"},{"optionId":"r","name":"Reject","kind":"reject_once"}]}}`,
				`> {"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"A"}}}`,
				`< {"jsonrpc":"2.0","id":1,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`,
				`# {"happy":"decision","request":1,"decision":"reject","reason":"timeout"}`,
				`> {"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"}}}`,
			},
			want: `{"type":"ToolCall","callID":"t1","tool":"bash","title":"rm x","input":{"command":"rm x"},"metadata":{"providerTool":"execute"}}
{"type":"ToolBlocked","callID":"t1","tool":"bash","input":{"command":"rm x"},"permission":{"permission":"bash","patterns":["rm x"],"always":["rm x"],"metadata":{"options":[{"kind":"allow_once","name":"Allow","optionId":"a"},{"kind":"allow_always","name":"Always","optionId":"A"},{"kind":"reject_once","name":"Reject","optionId":"r"}],"title":"rm x"}}}
{"type":"ToolResolved","callID":"t1","decision":"always"}
{"type":"ToolBlocked","callID":"t1","tool":"bash","input":{"command":"rm x"},"permission":{"id":"t1#permission-2","permission":"bash","patterns":["rm x"],"always":["rm x"],"metadata":{"options":[{"kind":"allow_once","name":"Allow","optionId":"a"}],"title":"rm x"}}}
{"type":"ToolResolved","callID":"t1","decision":"reject","reason":"timeout"}`,
		},
		{
			name: "an answer naming no offered option is refused, never taken as allow",
			lines: []string{
				`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1","title":"x"},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`,
				`> {"jsonrpc":"2.0","id":0,"result":{"outcome":"approved"}}`,
			},
			want: `{"type":"ToolCall","callID":"t1","tool":"other","title":"x","metadata":{"providerTool":"other"}}
{"type":"ToolBlocked","callID":"t1","tool":"other","permission":{"permission":"other","patterns":["x"],"always":["x"],"metadata":{"options":[{"kind":"allow_once","name":"Allow","optionId":"a"}],"title":"x"}}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/request_permission","reason":"unknown_decision","detail":"happy's answer selects no offered option","raw":"{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"outcome\":\"approved\"}}"}}`,
		},
		{
			name: "the agent withdraws a permission request",
			lines: []string{
				`< {"jsonrpc":"2.0","id":"p1","method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1","title":"x"},"options":[]}}`,
				`< {"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"p1"}}`,
			},
			want: `{"type":"ToolCall","callID":"t1","tool":"other","title":"x","metadata":{"providerTool":"other"}}
{"type":"ToolBlocked","callID":"t1","tool":"other","permission":{"permission":"other","patterns":["x"],"always":["x"],"metadata":{"options":[],"title":"x"}}}
{"type":"ToolResolved","callID":"t1","decision":"reject","reason":"cancelled"}`,
		},
		{
			name: "plan, mode, title, config, commands",
			lines: []string{
				upd(`{"sessionUpdate":"plan","entries":[{"content":"a","status":"completed","priority":"high"},{"content":"b","status":"in_progress","priority":"low"}]}`),
				upd(`{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`),
				upd(`{"sessionUpdate":"session_info_update","title":"Fix the bug","updatedAt":"2026-01-01T00:00:00Z"}`),
				upd(`{"sessionUpdate":"session_info_update","title":null}`),
				upd(`{"sessionUpdate":"config_option_update","configOptions":[{"id":"m","name":"Model","category":"model","type":"select","currentValue":"gpt-x","options":[]},{"id":"t","name":"Think","category":"thought_level","type":"select","currentValue":"high","options":[]}]}`),
				upd(`{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"Init"}]}`),
			},
			want: `{"type":"TodosUpdated","todos":[{"content":"a","status":"completed","priority":"high"},{"content":"b","status":"in_progress","priority":"low"}]}
{"type":"SessionInfo","agent":"plan"}
{"type":"SessionInfo","title":"Fix the bug"}
{"type":"SessionInfo","modelID":"gpt-x"}`,
		},
		{
			name: "usage: held until the step exists; cost is the step's share of the cumulative cost",
			lines: []string{
				upd(`{"sessionUpdate":"usage_update","used":100,"size":1000,"cost":{"amount":0.5,"currency":"USD"}}`),
				upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}`),
				upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"x","status":"completed"}`),
				upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"b"}}`),
				upd(`{"sessionUpdate":"usage_update","used":150,"size":1000,"cost":{"amount":0.75,"currency":"USD"}}`),
				upd(`{"sessionUpdate":"usage_update","used":160,"size":1000,"cost":{"amount":3,"currency":"EUR"}}`),
			},
			want: `{"type":"TextDelta","delta":"a"}
{"type":"Usage","tokens":{"input":100,"cache":{}},"cost":0.5}
{"type":"ToolCall","callID":"t1","tool":"other","title":"x","metadata":{"providerTool":"other"}}
{"type":"ToolCompleted","callID":"t1"}
{"type":"TextDelta","delta":"b"}
{"type":"Usage","tokens":{"input":150,"cache":{}},"cost":0.25}
{"type":"Usage","tokens":{"input":160,"cache":{}}}`,
		},
		{
			// codex-acp reports usage for a turn it refuses, or one that only
			// asks a question: the usage is the turn's (the reducer opens its
			// step), never dropped; its cost is what the turn spent, counted
			// from the turn's start, not from the previous turn's last step.
			name: "usage of a turn without output is the turn's",
			lines: []string{
				upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a"}}`),
				upd(`{"sessionUpdate":"usage_update","used":100,"size":1000,"cost":{"amount":0.5,"currency":"USD"}}`),
				`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
				`> {"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"again"}]}}`,
				upd(`{"sessionUpdate":"usage_update","used":180,"size":1000,"cost":{"amount":0.75,"currency":"USD"}}`),
				`< {"jsonrpc":"2.0","id":3,"result":{"stopReason":"refusal"}}`,
			},
			want: `{"type":"TextDelta","delta":"a"}
{"type":"Usage","tokens":{"input":100,"cache":{}},"cost":0.5}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}
{"type":"TurnStarted","turnID":"turn-2"}
{"type":"UserPrompt","promptID":"prompt-2","text":"again"}
{"type":"Usage","tokens":{"input":180,"cache":{}},"cost":0.25}
{"type":"AgentError","kind":"internal","text":"the agent refused to continue (stop reason refusal)"}
{"type":"TurnEnded","turnID":"turn-2","reason":"failed","error":"the agent refused to continue (stop reason refusal)"}`,
		},
		{
			name:  "end_turn",
			lines: []string{upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}`), `< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`},
			want: `{"type":"TextDelta","delta":"ok"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`,
		},
		{
			name:  "max_tokens finishes the step with length",
			lines: []string{upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}`), `< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"max_tokens"}}`},
			want: `{"type":"TextDelta","delta":"ok"}
{"type":"StepFinished","finish":"length"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`,
		},
		{
			name:  "max_turn_requests without output opens the step it finishes",
			lines: []string{`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"max_turn_requests"}}`},
			want: `{"type":"MessageStarted"}
{"type":"StepFinished","finish":"length"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`,
		},
		{
			name:  "refusal is an error",
			lines: []string{`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"refusal"}}`},
			want: `{"type":"AgentError","kind":"internal","text":"the agent refused to continue (stop reason refusal)"}
{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"the agent refused to continue (stop reason refusal)"}`,
		},
		{
			name:  "cancelled is aborted",
			lines: []string{`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`},
			want:  `{"type":"TurnEnded","turnID":"turn-1","reason":"interrupted"}`,
		},
		{
			name:  "an unknown stop reason is refused and the turn fails",
			lines: []string{`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"nap_time"}}`},
			want: `{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"stopReason:nap_time","reason":"unknown_type","detail":"unknown stop reason","raw":"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"stopReason\":\"nap_time\"}}"}}
{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"unknown stop reason \"nap_time\""}`,
		},
		{
			name:  "an error response fails the turn",
			lines: []string{`< {"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"Authentication required"}}`},
			want: `{"type":"AgentError","kind":"auth","text":"Authentication required"}
{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"Authentication required"}`,
		},
		{
			name:  "after session/cancel any response ends the turn interrupted",
			lines: []string{`> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`, `< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`},
			want:  `{"type":"TurnEnded","turnID":"turn-1","reason":"interrupted"}`,
		},
		{
			name:  "a turn the client gave up ends, and its late response changes nothing",
			lines: []string{`> {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`, `# {"happy":"turn-abandoned","reason":"no answer to session/cancel within 1s"}`, `< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`},
			want:  `{"type":"TurnEnded","turnID":"turn-1","reason":"interrupted","error":"no answer to session/cancel within 1s"}`,
		},
		{
			name:  "the agent exits mid-turn",
			lines: []string{`! {"code":1,"sig":null}`},
			want:  `{"type":"TurnEnded","turnID":"turn-1","reason":"agent-exited","error":"the agent exited with code 1"}`,
		},
		{
			name:  "an expected exit during a restart ends nothing",
			lines: []string{`# {"happy":"restart"}`, `! {"code":null,"sig":"SIGTERM"}`},
			want:  ``,
		},
		{
			name: "refusals: unknown kind, bad frames, unknown session, late output",
			lines: []string{
				upd(`{"sessionUpdate":"agent_dance","content":{}}`),
				`< {"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"other","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x"}}}}`,
				`< {"jsonrpc":"2.0","method":"session/update","params":[1]}`,
				upd(`{"content":{"type":"text","text":"x"}}`),
				upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"hologram"}}`),
				upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA"}}`),
				upd(`{"sessionUpdate":"tool_call","title":"no id"}`),
				`< "not json at all"`,
				`< [1,2]`,
				`< {"jsonrpc":"2.0","id":99,"result":{}}`,
				`< {"jsonrpc":"2.0","method":"mystery/notify","params":{}}`,
				`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
				upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late"}}`),
			},
			want: `{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update:agent_dance","reason":"unknown_type","detail":"unknown session update kind","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"agent_dance\",\"content\":{}}}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update","reason":"orphan","detail":"session \"other\" was never opened","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"other\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"x\"}}}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update","reason":"invalid_field","detail":"params is not a SessionNotification object","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":[1]}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update","reason":"invalid_field","detail":"update without a sessionUpdate string","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"content\":{\"type\":\"text\",\"text\":\"x\"}}}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update:agent_message_chunk","reason":"unknown_type","detail":"unknown content type \"hologram\"","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"hologram\"}}}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update:agent_message_chunk","reason":"invalid_field","detail":"image block needs data and mimeType","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"image\",\"data\":\"AA\"}}}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update:tool_call","reason":"missing_id","detail":"tool call without toolCallId","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"tool_call\",\"title\":\"no id\"}}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","reason":"unparseable_json","detail":"the agent wrote a line that is not JSON","raw":"not json at all"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","reason":"not_an_object","detail":"frame is JSON but not an object","raw":"[1,2]"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"response","reason":"orphan","detail":"response to request id 99 that happy never sent","raw":"{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}"}}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"mystery/notify","reason":"unknown_type","detail":"unknown notification","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"mystery/notify\",\"params\":{}}"}}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update:agent_message_chunk","reason":"orphan","detail":"output outside a prompt turn","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"late\"}}}}"}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := decodeAll(script(append(append([]string{}, opened...), tc.lines...)...))
			want := openedEvents
			if tc.want != "" {
				want += "\n" + tc.want
			}
			if got := eventLines(t, evs); got != want {
				t.Errorf("events differ:\n%s", firstDiff(want, got))
			}
		})
	}
}

func TestDecoderSessionLoad(t *testing.T) {
	evs := decodeAll(script(
		`> {"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[]}}`,
		upd(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"first "}}`),
		upd(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"prompt"}}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"answer"}}`),
		upd(`{"sessionUpdate":"user_message_chunk","content":{"type":"image","data":"AA","mimeType":"image/png"}}`),
		`< {"jsonrpc":"2.0","id":1,"result":{"modes":null}}`,
		// The replay goes on after the answer, until the next prompt.
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"late answer"}}`),
		`> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"next"}]}}`,
		`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
		upd(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"stray"}}`),
	))
	want := `{"type":"UserPrompt","promptID":"load-1","text":"first "}
{"type":"UserPrompt","promptID":"load-1","text":"first prompt"}
{"type":"TextDelta","delta":"answer"}
{"type":"UserPrompt","promptID":"load-2","files":[{"mime":"image/png","url":"data:image/png;base64,AA"}]}
{"type":"SessionInfo","providerSessionID":"s","cwd":"/w"}
{"type":"TextDelta","delta":"late answer"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"UserPrompt","promptID":"prompt-1","text":"next"}
{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}
{"type":"DroppedInput","dropped":{"source":"acp-rpc","kind":"session/update:user_message_chunk","reason":"orphan","detail":"user message outside a prompt turn or a session load","raw":"{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"sessionId\":\"s\",\"update\":{\"sessionUpdate\":\"user_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"stray\"}}}}"}}`
	if got := eventLines(t, evs); got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
}

func TestDecoderVersionRefusal(t *testing.T) {
	evs := decodeAll(script(
		`> {"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`,
		`< {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2}}`,
	))
	want := `{"type":"AgentError","kind":"protocol","text":"acp: agent protocol version 2 is too new: happy speaks version 1 (too_new)"}`
	if got := eventLines(t, evs); got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
}

// TestToolTodos: OpenCode sends no plan update; its todowrite tool carries
// the list (rawInput.todos, the whole list each time), so the list is
// replaced when that tool completes, as Claude's TodoWrite is. A todo tool
// without a list (todoread) leaves it alone, an item with an unknown status
// is left out with a Dropped record, a missing priority is medium (as for
// Claude 2.x). Once the agent sends plan updates, they alone set the list.
func TestToolTodos(t *testing.T) {
	todowrite := func(id, todos string) []string {
		return []string{
			upd(`{"sessionUpdate":"tool_call","toolCallId":"` + id + `","title":"todowrite","kind":"other","status":"pending","locations":[],"rawInput":{}}`),
			upd(`{"sessionUpdate":"tool_call_update","toolCallId":"` + id + `","status":"in_progress","kind":"other","title":"todowrite","locations":[],"rawInput":{"todos":` + todos + `}}`),
			upd(`{"sessionUpdate":"tool_call_update","toolCallId":"` + id + `","status":"completed","title":"n todos","content":[{"type":"content","content":{"type":"text","text":"[]"}}]}`),
		}
	}
	lines := []string{
		`> {"id":1,"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}`,
		`< {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"OpenCode","version":"1.18.33"}}}`,
		`> {"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}`,
		`< {"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}}`,
		`> {"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"plan"}]}}`,
	}
	lines = append(lines, todowrite("t1", `[{"content":"Write spec","id":"1","priority":"high","status":"in_progress"},{"content":"Ship","id":"2","status":"cancelled"},{"content":"Odd","id":"3","priority":"low","status":"someday"}]`)...)
	lines = append(lines,
		upd(`{"sessionUpdate":"tool_call","toolCallId":"t2","title":"todoread","kind":"other","status":"pending","locations":[],"rawInput":{}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t2","status":"completed","title":"todoread","rawInput":{}}`),
		upd(`{"sessionUpdate":"plan","entries":[{"content":"From the plan","status":"pending","priority":"medium"}]}`),
	)
	lines = append(lines, todowrite("t3", `[{"content":"Ignored","status":"pending","priority":"low"}]`)...)
	var got []string
	for _, e := range decodeAll(script(lines...)) {
		switch e := e.(type) {
		case *agent.TodosUpdated:
			got = append(got, eventLines(t, []agent.Event{e}))
		case *agent.DroppedInput:
			got = append(got, "dropped "+e.Dropped.Kind+" "+string(e.Dropped.Reason)+": "+e.Dropped.Detail)
		}
	}
	want := `dropped session/update:tool_call_update invalid_field: todo "Odd" has unknown status "someday"; left out
{"type":"TodosUpdated","todos":[{"content":"Write spec","status":"in_progress","priority":"high"},{"content":"Ship","status":"cancelled","priority":"medium"}]}
{"type":"TodosUpdated","todos":[{"content":"From the plan","status":"pending","priority":"medium"}]}`
	if g := strings.Join(got, "\n"); g != want {
		t.Errorf("todo events differ:\n%s", firstDiff(want, g))
	}
}
