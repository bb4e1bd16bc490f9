package claude

import "testing"

// TestClaudeSubagentReusesCallID: a subagent's tool_use reusing the id of
// a call of the root session (which waits for a person's permission), and
// its tool_result for that id, are Dropped: never a second call merged
// into the root's, never a result that settles (and approves) the root's
// waiting tool with the subagent's output.
func TestClaudeSubagentReusesCallID(t *testing.T) {
	runDecoderCases(t, []decoderCase{{name: "subagent reuses a root call id", form: FormStreamJSON, lines: []string{
		s(`"type":"system","subtype":"init","model":"m","cwd":"/w"`),
		s(`"type":"assistant","uuid":"a1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"ls"}},{"type":"tool_use","id":"t1","name":"Task","input":{"description":"helper","prompt":"go"}}]},"parent_tool_use_id":null`),
		s(`"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"tool_use_id":"b1"}`),
		// the subagent reuses the root's call id b1 for a command of its own
		s(`"type":"assistant","uuid":"a2","message":{"id":"m2","role":"assistant","content":[{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"rm -rf /"}}]},"parent_tool_use_id":"t1"`),
		s(`"type":"control_request","request_id":"r2","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf /"},"tool_use_id":"b1","agent_id":"ag1"}`),
		s(`"type":"user","uuid":"u3","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"b1","content":"deleted everything"}]},"parent_tool_use_id":"t1"`),
		// a record whose parent is the root's Bash, not a Task: kept, in a
		// child session of that call
		s(`"type":"assistant","uuid":"a3","message":{"id":"m3","role":"assistant","content":[{"type":"text","text":"hi"}]},"parent_tool_use_id":"b1"`),
	}, want: []string{
		`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
		`{"type":"TurnStarted","turnID":"turn-1"}`,
		`{"type":"MessageStarted","message":"m1","providerID":"anthropic"}`,
		`{"type":"ToolCall","message":"m1","callID":"b1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"providerTool":"Bash"}}`,
		`{"type":"ToolRunning","callID":"b1"}`,
		`{"type":"ToolCall","message":"m1","callID":"t1","tool":"task","title":"helper","input":{"description":"helper","prompt":"go"},"metadata":{"providerTool":"Task"}}`,
		`{"type":"ToolRunning","callID":"t1"}`,
		`{"type":"SubagentStarted","callID":"t1","child":"t1","title":"helper","prompt":"go","description":"helper"}`,
		`{"type":"ToolBlocked","message":"m1","callID":"b1","tool":"bash","input":{"command":"ls"},"permission":{"id":"r1","permission":"bash","patterns":["ls"],"metadata":{"tool":"Bash"}}}`,
		`{"type":"TurnStarted","session":"t1","turnID":"turn-2"}`,
		`{"type":"MessageStarted","session":"t1","message":"m2","providerID":"anthropic"}`,
		`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":4,"kind":"assistant/tool_use","reason":"illegal_transition","detail":"tool_use b1 is a call of another session already; ignored","raw":"{\"session_id\":\"S\",\"type\":\"assistant\",\"uuid\":\"a2\",\"message\":{\"id\":\"m2\",\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"b1\",\"name\":\"Bash\",\"input\":{\"command\":\"rm -rf /\"}}]},\"parent_tool_use_id\":\"t1\"}"}}`,
		`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":6,"kind":"user/tool_result","reason":"illegal_transition","detail":"tool_result for b1, a call of another session; ignored","raw":"{\"session_id\":\"S\",\"type\":\"user\",\"uuid\":\"u3\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"b1\",\"content\":\"deleted everything\"}]},\"parent_tool_use_id\":\"t1\"}"}}`,
		`{"type":"SubagentStarted","callID":"b1","child":"b1"}`,
		`{"type":"TurnStarted","session":"b1","turnID":"turn-3"}`,
		`{"type":"MessageStarted","session":"b1","message":"m3","providerID":"anthropic"}`,
		`{"type":"TextFinal","session":"b1","message":"m3","block":"0","text":"hi"}`,
	}}})
}
