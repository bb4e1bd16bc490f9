package openclaw

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// rec is a traffic record for the decoder tables.
func rec(dir Dir, msg string) Record { return Record{T: 7, Dir: dir, Msg: json.RawMessage(msg)} }

// prompt is happy's agent request of the tables (session S, key k1).
const prompt = `{"type":"req","id":"happy-2","method":"agent","params":{"message":"hi","sessionKey":"S","idempotencyKey":"k1","deliver":false}}`
const accepted = `{"type":"res","id":"happy-2","ok":true,"payload":{"runId":"k1","status":"accepted"}}`

// TestDecoderTable maps frames (most copied from traffic of openclaw
// 2026.9.6) to agent events, exactly.
func TestDecoderTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		recs []Record
		want string // encoded events, one a line
	}{
		{"prompt", []Record{rec(C2A, prompt)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}`},
		{"lifecycle model and error (real)", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","agentId":"main","sessionKey":"S","stream":"lifecycle","data":{"phase":"model","provider":"fake","model":"fake-model"},"seq":1,"ts":100},"seq":6}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"lifecycle","data":{"phase":"error","startedAt":1,"endedAt":2,"error":"No route-compatible authentication source is configured for openai.","executionSettled":true},"sessionKey":"S","seq":2,"ts":101},"seq":7}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"SessionInfo","time":100,"providerID":"fake","modelID":"fake-model"}
{"type":"MessageStarted","time":100,"providerID":"fake","modelID":"fake-model"}
{"type":"AgentError","time":101,"kind":"internal","text":"No route-compatible authentication source is configured for openai."}
{"type":"TurnEnded","time":101,"turnID":"k1","reason":"failed","error":"No route-compatible authentication source is configured for openai."}`},
		{"text, thinking, usage, end", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"thinking","data":{"text":"hm","delta":"hm"},"seq":1,"ts":100}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"thinking","data":{"progressTokens":4},"seq":2,"ts":100}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"text":"Hi"},"seq":3,"ts":101}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"usage","data":{"outputTokens":20},"seq":4,"ts":102}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"lifecycle","data":{"phase":"end","stopReason":"max_tokens"},"seq":5,"ts":103}}`),
			rec(A2C, `{"type":"res","id":"happy-2","ok":true,"payload":{"runId":"k1","status":"ok"}}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"ReasoningDelta","time":100,"delta":"hm"}
{"type":"TextFinal","time":101,"text":"Hi"}
{"type":"Usage","time":102,"tokens":{"output":20,"cache":{}}}
{"type":"StepFinished","time":103,"finish":"length"}
{"type":"TurnEnded","time":103,"turnID":"k1","reason":"completed"}`},
		{"ignored broadcasts and streams (real)", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"health","payload":{"ok":true,"ts":1}}`),
			rec(A2C, `{"type":"event","event":"task","payload":{"action":"upserted","task":{"id":"x"}}}`),
			rec(A2C, `{"type":"event","event":"chat.metadata.changed","payload":{},"seq":4}`),
			rec(A2C, `{"type":"event","event":"tick","payload":{"ts":5},"seq":5}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"item","data":{"itemId":"tool:t1","toolCallId":"t1","name":"exec","kind":"tool","phase":"start"},"sessionKey":"S","seq":4,"ts":1},"seq":15}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"command_output","data":{"itemId":"command:t1","phase":"end","output":"x"},"sessionKey":"S","seq":8,"ts":1},"seq":19}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}`},
		{"unknown event, stream and frame type are dropped", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"brand.new","payload":{}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"hologram","data":{},"seq":1,"ts":1}}`),
			rec(A2C, `{"type":"evt","event":"x"}`),
			rec(A2C, `{"type":"req","id":"g1","method":"node.invoke"}`),
			rec(A2C, `[1,2]`),
			rec(A2C, `{"type":"res","id":"nobody","ok":true}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event brand.new","reason":"unknown_type","detail":"an event this version does not know","raw":"{\"type\":\"event\",\"event\":\"brand.new\",\"payload\":{}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent/hologram","reason":"unknown_type","detail":"an agent stream this version does not know","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"stream\":\"hologram\",\"data\":{},\"seq\":1,\"ts\":1}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","reason":"unknown_type","detail":"frame type \"evt\"","raw":"{\"type\":\"evt\",\"event\":\"x\"}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"req node.invoke","reason":"unknown_type","detail":"the gateway sent a request to an operator client","raw":"{\"type\":\"req\",\"id\":\"g1\",\"method\":\"node.invoke\"}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","reason":"not_an_object","detail":"a JSON value that is not an object","raw":"[1,2]"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"res","reason":"orphan","detail":"a response to no request of ours: nobody","raw":"{\"type\":\"res\",\"id\":\"nobody\",\"ok\":true}"}}`},
		{"duplicate seq and other runs are skipped", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"a"},"seq":1,"ts":1},"seq":1}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"a"},"seq":1,"ts":1},"seq":1}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"a"},"seq":1,"ts":1},"seq":2}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"other","sessionKey":"T","stream":"assistant","data":{"delta":"x"},"seq":1,"ts":1},"seq":3}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"b"},"seq":2,"ts":2},"seq":4}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"TextDelta","time":1,"delta":"a"}
{"type":"TextDelta","time":2,"delta":"b"}`},
		{"a bad frame with a high seq hides no later event", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"a"},"seq":2,"ts":1},"seq":2}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"lifecycle","data":{"phase":"bogus"},"seq":99,"ts":2},"seq":99}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"b"},"seq":3,"ts":3},"seq":3}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"c"},"seq":4,"ts":4},"seq":4}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant","data":{"delta":"c"},"seq":4,"ts":4},"seq":5}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"lifecycle","data":{"phase":"end"},"seq":5,"ts":5},"seq":6}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"TextDelta","time":1,"delta":"a"}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent/lifecycle","reason":"invalid_field","detail":"lifecycle phase \"bogus\"","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"stream\":\"lifecycle\",\"data\":{\"phase\":\"bogus\"},\"seq\":99,\"ts\":2},\"seq\":99}"}}
{"type":"TextDelta","time":3,"delta":"b"}
{"type":"TextDelta","time":4,"delta":"c"}
{"type":"StepFinished","time":5,"finish":"stop"}
{"type":"TurnEnded","time":5,"turnID":"k1","reason":"completed"}`},
		{"malformed agent events", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"stream":"assistant","seq":1}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"assistant"}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","seq":"one"}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"tool","data":{"phase":"start","name":"exec"},"seq":3}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"tool","data":{"phase":"result","toolCallId":"never"},"seq":4}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"lifecycle","data":{"phase":"teleport"},"seq":5}}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent","reason":"missing_id","detail":"an agent event without runId","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"stream\":\"assistant\",\"seq\":1}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent","reason":"invalid_field","detail":"an agent event without seq or stream","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"stream\":\"assistant\"}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent","reason":"invalid_field","detail":"json: cannot unmarshal string into Go struct field agentEventPayload.seq of type int64","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"seq\":\"one\"}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent/tool","reason":"missing_id","detail":"a tool event without toolCallId","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"stream\":\"tool\",\"data\":{\"phase\":\"start\",\"name\":\"exec\"},\"seq\":3}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent/tool","reason":"orphan","detail":"a tool result for unknown call never","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"stream\":\"tool\",\"data\":{\"phase\":\"result\",\"toolCallId\":\"never\"},\"seq\":4}}"}}
{"type":"DroppedInput","time":7,"dropped":{"source":"openclaw-ws","kind":"event agent/lifecycle","reason":"invalid_field","detail":"lifecycle phase \"teleport\"","raw":"{\"type\":\"event\",\"event\":\"agent\",\"payload\":{\"runId\":\"k1\",\"stream\":\"lifecycle\",\"data\":{\"phase\":\"teleport\"},\"seq\":5}}"}}`},
		{"usage totals of the run become step figures (real)", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"usage","data":{"outputTokens":20},"seq":1,"ts":1}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"usage","data":{"outputTokens":40,"inputTokens":9},"seq":2,"ts":2}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"usage","data":{"outputTokens":65,"inputTokens":10},"seq":3,"ts":3}}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"Usage","time":1,"tokens":{"output":20,"cache":{}}}
{"type":"Usage","time":2,"tokens":{"input":9,"output":20,"cache":{}}}
{"type":"Usage","time":3,"tokens":{"input":1,"output":25,"cache":{}}}`},
		{"refused prompt", []Record{rec(C2A, prompt),
			rec(A2C, `{"type":"res","id":"happy-2","ok":false,"error":{"code":"INVALID_REQUEST","message":"invalid agent params"}}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"AgentError","time":7,"kind":"protocol","text":"INVALID_REQUEST: invalid agent params"}
{"type":"TurnEnded","time":7,"turnID":"k1","reason":"failed","error":"INVALID_REQUEST: invalid agent params"}`},
		{"approval answered elsewhere, tools canonical", []Record{rec(C2A, prompt), rec(A2C, accepted),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"tool","data":{"phase":"start","name":"read","toolCallId":"r1","args":{"path":"a.go","offset":2}},"seq":1,"ts":1}}`),
			rec(A2C, `{"type":"event","event":"agent","payload":{"runId":"k1","stream":"tool","data":{"phase":"result","name":"read","toolCallId":"r1","result":"text"},"seq":2,"ts":2}}`),
			rec(A2C, `{"type":"event","event":"exec.approval.requested","payload":{"id":"ap","request":{"commandArgv":["rm","-rf","x"],"sessionKey":"S"}}}`),
			rec(A2C, `{"type":"event","event":"exec.approval.requested","payload":{"id":"ap2","request":{"command":"ls","sessionKey":"elsewhere"}}}`),
			rec(A2C, `{"type":"event","event":"exec.approval.resolved","payload":{"id":"ap","decision":"deny"}}`),
			rec(C2A, `{"type":"req","id":"happy-9","method":"exec.approval.resolve","params":{"id":"ap","decision":"allow-once"}}`),
			rec(A2C, `{"type":"res","id":"happy-9","ok":false,"error":{"code":"INVALID_REQUEST","message":"approval already resolved"}}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"ToolCall","time":1,"callID":"r1","tool":"read","title":"read","input":{"path":"a.go","offset":2},"metadata":{"providerTool":"read"}}
{"type":"ToolRunning","time":1,"callID":"r1"}
{"type":"ToolCompleted","time":2,"callID":"r1","output":"text"}
{"type":"ToolBlocked","time":7,"callID":"approval-ap","tool":"bash","input":{"command":"rm -rf x"},"permission":{"id":"ap","permission":"bash","patterns":["rm -rf x"],"always":["rm -rf x"],"metadata":{"approvalId":"ap"}}}
{"type":"ToolResolved","time":7,"callID":"approval-ap","decision":"reject","reason":"answered-in-agent"}
{"type":"AgentError","time":7,"kind":"protocol","text":"INVALID_REQUEST: approval already resolved"}`},
		{"gateway gone note", []Record{rec(C2A, prompt), rec(A2C, accepted), rec(Note, `{"happy":"reconnect"}`), rec(Note, `{"happy":"gone","error":"dial: refused"}`)},
			`{"type":"SessionInfo","time":7,"providerSessionID":"S"}
{"type":"TurnStarted","time":7,"turnID":"k1"}
{"type":"UserPrompt","time":7,"promptID":"k1","text":"hi"}
{"type":"AgentError","time":7,"kind":"transport","text":"the gateway went away: dial: refused"}
{"type":"TurnEnded","time":7,"turnID":"k1","reason":"failed","error":"the gateway went away: dial: refused"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder()
			var evs []Record
			_ = evs
			var got bytes.Buffer
			for _, r := range tc.recs {
				got.Write(encodeEvents(t, d.Decode(r)))
			}
			if g := strings.TrimSpace(got.String()); g != tc.want {
				t.Errorf("events:\n%s\nwant:\n%s", g, tc.want)
			}
		})
	}
}

// TestCanonicalTools: OpenClaw's tool names and arguments in the canonical
// vocabulary.
func TestCanonicalTools(t *testing.T) {
	for _, tc := range []struct{ name, args, tool, input string }{
		{"exec", `{"command":"ls -la","workdir":"/w","timeout":5,"background":false}`, "bash", `{"command":"ls -la","cwd":"/w","timeout":5000}`},
		{"bash", `{"command":"pwd"}`, "bash", `{"command":"pwd"}`},
		{"read", `{"file_path":"a.txt","limit":3}`, "read", `{"path":"a.txt","limit":3}`},
		{"write", `{"path":"b.txt","content":""}`, "write", `{"path":"b.txt","content":""}`},
		{"edit", `{"path":"c.go","oldText":"a","newText":"b"}`, "edit", `{"path":"c.go","oldString":"a","newString":"b"}`},
		{"apply_patch", `{"input":"*** Begin Patch\n*** Update File: d.go\n@@\n-a\n+b\n*** End Patch"}`, "edit", `{"path":"d.go","diff":"*** Begin Patch\n*** Update File: d.go\n@@\n-a\n+b\n*** End Patch"}`},
		{"web_search", `{"query":"go"}`, "search", `{"query":"go"}`},
		{"web_fetch", `{"url":"https://example.com"}`, "fetch", `{"url":"https://example.com"}`},
		{"sessions_spawn", `{"task":"look","label":"scout","agentId":"helper"}`, "task", `{"description":"scout","prompt":"look","agent":"helper"}`},
		{"github__create_issue", `{"title":"x"}`, "mcp:github/create_issue", `{"title":"x"}`},
		{"browser", `{"action":"open"}`, "other", `{"action":"open"}`},
		{"canvas", `not json`, "other", `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool, input := canonicalTool(tc.name, json.RawMessage(tc.args))
			if tool != tc.tool || string(input) != tc.input {
				t.Errorf("got %s %s, want %s %s", tool, input, tc.tool, tc.input)
			}
		})
	}
}

// TestReadTrafficBadLines: lines that are not records are Dropped records
// of the traffic log, at their place, with their line numbers.
func TestReadTrafficBadLines(t *testing.T) {
	log := `{"t":1,"dir":"c2a","msg":` + prompt + `}
not json

{"t":2,"dir":"sideways","msg":{}}
{"t":"x","dir":"a2c","msg":{}}
["array"]
{"t":3,"dir":"a2c","msg":"<html>"}
`
	evs, err := Replay(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(string(encodeEvents(t, evs)))
	want := `{"type":"SessionInfo","time":1,"providerSessionID":"S"}
{"type":"TurnStarted","time":1,"turnID":"k1"}
{"type":"UserPrompt","time":1,"promptID":"k1","text":"hi"}
{"type":"DroppedInput","dropped":{"source":"traffic-log","line":2,"reason":"unparseable_json","detail":"trafficlog: not valid JSON","raw":"not json"}}
{"type":"DroppedInput","dropped":{"source":"traffic-log","line":4,"reason":"unknown_type","detail":"trafficlog: unknown dir \"sideways\"","raw":"{\"t\":2,\"dir\":\"sideways\",\"msg\":{}}"}}
{"type":"DroppedInput","dropped":{"source":"traffic-log","line":5,"reason":"invalid_field","detail":"trafficlog: field has the wrong type: t is \"x\"","raw":"{\"t\":\"x\",\"dir\":\"a2c\",\"msg\":{}}"}}
{"type":"DroppedInput","dropped":{"source":"traffic-log","line":6,"reason":"not_an_object","detail":"trafficlog: record is not a JSON object","raw":"[\"array\"]"}}
{"type":"DroppedInput","time":3,"dropped":{"source":"openclaw-ws","line":7,"reason":"not_an_object","detail":"a JSON value that is not an object","raw":"\"<html>\""}}
{"type":"TurnEnded","turnID":"k1","reason":"truncated","error":"the traffic log ends inside the turn"}`
	if got != want {
		t.Errorf("events:\n%s\nwant:\n%s", got, want)
	}
}
