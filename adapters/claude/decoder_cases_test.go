package claude

import (
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

var end = &EndOfStream{}

func TestDecoderRecords(t *testing.T) {
	runDecoderCases(t, []decoderCase{
		{name: "synthetic auth error then turn_duration", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u1","promptId":"p1","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":"hi"}`),
			j(`"type":"assistant","uuid":"u2","timestamp":"2026-01-01T00:00:02Z","isApiErrorMessage":true,"apiErrorStatus":401,"error":"authentication_failed","message":{"id":"e1","model":"<synthetic>","role":"assistant","stop_reason":"stop_sequence","content":[{"type":"text","text":"API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}"}]}`),
			j(`"type":"system","subtype":"turn_duration","uuid":"u3","timestamp":"2026-01-01T00:00:03Z","durationMs":5`),
		}, want: []string{
			`{"type":"SessionInfo","time":1767225601000,"providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","time":1767225601000,"promptID":"u1","text":"hi"}`,
			`{"type":"TurnStarted","time":1767225601000,"turnID":"p1"}`,
			`{"type":"AgentError","time":1767225602000,"message":"e1","kind":"auth","text":"API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}","statusCode":401}`,
			`{"type":"TurnEnded","time":1767225603000,"turnID":"p1","reason":"failed","error":"API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"invalid x-api-key\"}}"}`,
		}},
		{name: "rate limit text without status", form: FormStreamJSON, lines: []string{
			s(`"type":"system","subtype":"init","model":"m","cwd":"/w"`),
			s(`"type":"assistant","uuid":"a1","error":"rate_limit","message":{"id":"e2","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"You've hit your limit · resets 1:20am"}]},"parent_tool_use_id":null`),
			s(`"type":"result","subtype":"success","is_error":true,"result":"You've hit your limit · resets 1:20am","api_error_status":429`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"AgentError","message":"e2","kind":"rate_limit","text":"You've hit your limit · resets 1:20am"}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"You've hit your limit · resets 1:20am"}`,
		}},
		{name: "api retries", form: FormStreamJSON, lines: []string{
			s(`"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600,"error_status":529,"error":"overloaded"`),
			s(`"type":"system","subtype":"api_retry","attempt":2,"error_status":401,"error":"authentication_failed"`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"Retry","attempt":1,"error":{"name":"APIError","data":{"message":"overloaded","kind":"rate_limit","providerID":"anthropic","statusCode":529,"isRetryable":true}}}`,
			`{"type":"Retry","attempt":2,"error":{"name":"APIError","data":{"message":"authentication_failed","kind":"auth","providerID":"anthropic","statusCode":401,"isRetryable":true}}}`,
		}},
		{name: "jsonl api_error retry", form: FormSessionJSONL, lines: []string{
			j(`"type":"system","subtype":"api_error","uuid":"r1","retryAttempt":3,"retryInMs":2000,"error":{"status":503,"error":{"type":"error","error":{"type":"api_error","message":"upstream unavailable"}}}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"Retry","attempt":3,"error":{"name":"APIError","data":{"message":"upstream unavailable","kind":"transport","providerID":"anthropic","statusCode":503,"isRetryable":true}}}`,
		}},
		{name: "compaction", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u1","message":{"role":"user","content":"go on"}`),
			j(`"type":"system","subtype":"compact_boundary","uuid":"c1","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":150000}`),
			j(`"type":"user","uuid":"u2","isCompactSummary":true,"isVisibleInTranscriptOnly":true,"message":{"role":"user","content":"This session is being continued. Summary: …"}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u1","text":"go on"}`,
			`{"type":"TurnStarted","turnID":"u1"}`,
			`{"type":"Compaction","id":"c1","auto":true}`,
			`{"type":"UserPrompt","promptID":"u2","text":"This session is being continued. Summary: …","synthetic":true}`,
		}},
		{name: "terminal commands open no turn", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u1","message":{"role":"user","content":"<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"}`),
			j(`"type":"user","uuid":"u2","message":{"role":"user","content":"<local-command-stdout></local-command-stdout>"}`),
			j(`"type":"user","uuid":"u3","message":{"role":"user","content":"<bash-input>ls</bash-input>"}`),
			j(`"type":"user","uuid":"u4","message":{"role":"user","content":"<bash-stdout>a.go</bash-stdout><bash-stderr></bash-stderr>"}`),
			j(`"type":"user","uuid":"u5","message":{"role":"user","content":"<command-name>/review</command-name>"}`),
			j(`"type":"user","uuid":"u6","isMeta":true,"message":{"role":"user","content":"Review the current diff…"}`),
			j(`"type":"assistant","uuid":"a7","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"end_turn","content":[{"type":"text","text":"Looks good."}]}`),
			j(`"type":"system","subtype":"compact_boundary","uuid":"c8","compactMetadata":{"trigger":"manual"}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u1","text":"<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>"}`,
			`{"type":"UserPrompt","promptID":"u2","text":"<local-command-stdout></local-command-stdout>","synthetic":true}`,
			`{"type":"UserPrompt","promptID":"u3","text":"<bash-input>ls</bash-input>"}`,
			`{"type":"UserPrompt","promptID":"u4","text":"<bash-stdout>a.go</bash-stdout><bash-stderr></bash-stderr>","synthetic":true}`,
			`{"type":"UserPrompt","promptID":"u5","text":"<command-name>/review</command-name>"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","message":"m1","block":"0","text":"Looks good."}`,
			`{"type":"Compaction","id":"c8"}`,
			`{"type":"StepFinished","message":"m1","finish":"stop"}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`,
		}, end: end},
		{name: "ask user question in the transcript", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u1","message":{"role":"user","content":"which language?"}`),
			j(`"type":"assistant","uuid":"u2","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"tool_use","content":[{"type":"tool_use","id":"q1","name":"AskUserQuestion","input":{"questions":[{"question":"Which language?","header":"Lang","multiSelect":false,"options":[{"label":"Go","description":"compiled"},{"label":"Rust","description":"also compiled"}]},{"question":"Which extras?","header":"Extras","multiSelect":true,"options":[{"label":"tests","description":""},{"label":"docs","description":""}]}]}}]}`),
			j(`"type":"user","uuid":"u3","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"q1","content":"User has answered your questions: \"Which language?\"=\"Go\". You can now continue."}]},"toolUseResult":{"questions":[],"answers":{"Which language?":"Go","Which extras?":"tests, docs"}}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u1","text":"which language?"}`,
			`{"type":"TurnStarted","turnID":"u1"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"q1","tool":"question","input":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":"compiled"},{"label":"Rust","description":"also compiled"}],"multiple":false},{"question":"Which extras?","header":"Extras","options":[{"label":"tests","description":""},{"label":"docs","description":""}],"multiple":true}]},"metadata":{"providerInput":{"questions":[{"header":"Lang","multiSelect":false,"options":[{"description":"compiled","label":"Go"},{"description":"also compiled","label":"Rust"}],"question":"Which language?"},{"header":"Extras","multiSelect":true,"options":[{"description":"","label":"tests"},{"description":"","label":"docs"}],"question":"Which extras?"}]},"providerTool":"AskUserQuestion"}}`,
			`{"type":"ToolRunning","callID":"q1"}`,
			`{"type":"ToolBlocked","message":"m1","callID":"q1","tool":"question","input":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":"compiled"},{"label":"Rust","description":"also compiled"}],"multiple":false},{"question":"Which extras?","header":"Extras","options":[{"label":"tests","description":""},{"label":"docs","description":""}],"multiple":true}]},"question":{"id":"question-q1","questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":"compiled"},{"label":"Rust","description":"also compiled"}],"multiple":false},{"question":"Which extras?","header":"Extras","options":[{"label":"tests","description":""},{"label":"docs","description":""}],"multiple":true}]}}`,
			`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
			`{"type":"ToolResolved","callID":"q1","answers":[["Go"],["tests","docs"]]}`,
			`{"type":"ToolCompleted","callID":"q1","output":"User has answered your questions: \"Which language?\"=\"Go\". You can now continue.","metadata":{"toolUseResult":{"questions":[],"answers":{"Which language?":"Go","Which extras?":"tests, docs"}}}}`,
		}},
		{name: "ask user question through the sdk", form: FormTrafficLog, lines: []string{
			`{"t":1,"dir":"a2c","msg":` + s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"q1","name":"AskUserQuestion","input":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":""},{"label":"Rust","description":""}]}]}}]},"parent_tool_use_id":null`) + `}`,
			`{"t":2,"dir":"a2c","msg":{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"AskUserQuestion","input":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":""},{"label":"Rust","description":""}]}]},"tool_use_id":"q1"}}}`,
			`{"t":3,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"allow","updatedInput":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":""},{"label":"Rust","description":""}]}],"answers":{"Which language?":"Rust"}}}}}}`,
		}, want: []string{
			`{"type":"TurnStarted","time":1,"turnID":"turn-1"}`,
			`{"type":"MessageStarted","time":1,"message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","time":1,"message":"m1","callID":"q1","tool":"question","input":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":""},{"label":"Rust","description":""}]}]},"metadata":{"providerTool":"AskUserQuestion"}}`,
			`{"type":"ToolRunning","time":1,"callID":"q1"}`,
			`{"type":"ToolBlocked","time":2,"message":"m1","callID":"q1","tool":"question","input":{"questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":""},{"label":"Rust","description":""}]}]},"question":{"id":"r1","questions":[{"question":"Which language?","header":"Lang","options":[{"label":"Go","description":""},{"label":"Rust","description":""}]}]}}`,
			`{"type":"ToolResolved","time":3,"callID":"q1","answers":[["Rust"]]}`,
		}},
		{name: "task tools edit the todo list", form: FormStreamJSON, lines: []string{
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"TaskCreate","input":{"subject":"Write the spec","description":"d"}}]},"parent_tool_use_id":null`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"Task #1 created successfully: Write the spec"}]},"parent_tool_use_id":null`),
			s(`"type":"assistant","message":{"id":"m2","model":"m","role":"assistant","content":[{"type":"tool_use","id":"t2","name":"TaskCreate","input":{"subject":"Run the tests","description":"d"}}]},"parent_tool_use_id":null`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t2","content":"ok"}]},"tool_use_result":{"task":{"id":"7","subject":"Run the tests"}},"parent_tool_use_id":null`),
			s(`"type":"assistant","message":{"id":"m3","model":"m","role":"assistant","content":[{"type":"tool_use","id":"t3","name":"TaskUpdate","input":{"taskId":"1","status":"completed"}},{"type":"tool_use","id":"t4","name":"TaskUpdate","input":{"taskId":"9","status":"completed"}}]},"parent_tool_use_id":null`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t3","content":"Updated task #1 status"}]},"parent_tool_use_id":null`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t4","content":"Updated task #9 status"}]},"parent_tool_use_id":null`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"t1","tool":"todo","title":"Write the spec","input":{"todos":[{"content":"Write the spec","status":"pending"}]},"metadata":{"providerInput":{"description":"d","subject":"Write the spec"},"providerTool":"TaskCreate"}}`,
			`{"type":"ToolRunning","callID":"t1"}`,
			`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
			`{"type":"TodosUpdated","todos":[{"content":"Write the spec","status":"pending","priority":"medium"}]}`,
			`{"type":"ToolCompleted","callID":"t1","output":"Task #1 created successfully: Write the spec","title":"Write the spec"}`,
			`{"type":"MessageStarted","message":"m2","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m2","callID":"t2","tool":"todo","title":"Run the tests","input":{"todos":[{"content":"Run the tests","status":"pending"}]},"metadata":{"providerInput":{"description":"d","subject":"Run the tests"},"providerTool":"TaskCreate"}}`,
			`{"type":"ToolRunning","callID":"t2"}`,
			`{"type":"StepFinished","message":"m2","finish":"tool-calls"}`,
			`{"type":"TodosUpdated","todos":[{"content":"Write the spec","status":"pending","priority":"medium"},{"content":"Run the tests","status":"pending","priority":"medium"}]}`,
			`{"type":"ToolCompleted","callID":"t2","output":"ok","title":"Run the tests","metadata":{"toolUseResult":{"task":{"id":"7","subject":"Run the tests"}}}}`,
			`{"type":"MessageStarted","message":"m3","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m3","callID":"t3","tool":"todo","input":{"todos":[{"id":"1","status":"completed"}]},"metadata":{"providerInput":{"status":"completed","taskId":"1"},"providerTool":"TaskUpdate"}}`,
			`{"type":"ToolRunning","callID":"t3"}`,
			`{"type":"ToolCall","message":"m3","callID":"t4","tool":"todo","input":{"todos":[{"id":"9","status":"completed"}]},"metadata":{"providerInput":{"status":"completed","taskId":"9"},"providerTool":"TaskUpdate"}}`,
			`{"type":"ToolRunning","callID":"t4"}`,
			`{"type":"StepFinished","message":"m3","finish":"tool-calls"}`,
			`{"type":"TodosUpdated","todos":[{"content":"Write the spec","status":"completed","priority":"medium"},{"content":"Run the tests","status":"pending","priority":"medium"}]}`,
			`{"type":"ToolCompleted","callID":"t3","output":"Updated task #1 status"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":7,"kind":"user/tool_result","reason":"orphan","detail":"TaskUpdate of task \"9\" this stream never created","raw":"{\"session_id\":\"S\",\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t4\",\"content\":\"Updated task #9 status\"}]},\"parent_tool_use_id\":null}"}}`,
			`{"type":"ToolCompleted","callID":"t4","output":"Updated task #9 status"}`,
		}},
		{name: "permission request without tool_use_id and an always answer", form: FormTrafficLog, lines: []string{
			`{"t":1,"dir":"a2c","msg":` + s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"w1","name":"Write","input":{"file_path":"/w/a.txt","content":"x"}}]},"parent_tool_use_id":null`) + `}`,
			`{"t":2,"dir":"a2c","msg":{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Write","input":{"content":"x","file_path":"/w/a.txt"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Write"}],"behavior":"allow","destination":"session"},{"type":"setMode","mode":"acceptEdits","destination":"session"}]}}}`,
			`{"t":3,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"allow","updatedInput":{"file_path":"/w/a.txt","content":"x"},"updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Write"}],"behavior":"allow","destination":"session"}]}}}}`,
		}, want: []string{
			`{"type":"TurnStarted","time":1,"turnID":"turn-1"}`,
			`{"type":"MessageStarted","time":1,"message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","time":1,"message":"m1","callID":"w1","tool":"write","title":"/w/a.txt","input":{"path":"/w/a.txt","content":"x"},"metadata":{"providerInput":{"content":"x","file_path":"/w/a.txt"},"providerTool":"Write"}}`,
			`{"type":"ToolRunning","time":1,"callID":"w1"}`,
			`{"type":"ToolBlocked","time":2,"message":"m1","callID":"w1","tool":"write","input":{"path":"/w/a.txt","content":"x"},"permission":{"id":"r1","permission":"write","patterns":["/w/a.txt"],"always":["*"],"metadata":{"suggestions":[{"behavior":"allow","destination":"session","rules":[{"toolName":"Write"}],"type":"addRules"},{"destination":"session","mode":"acceptEdits","type":"setMode"}],"tool":"Write"}}}`,
			`{"type":"ToolResolved","time":3,"callID":"w1","decision":"always"}`,
		}},
		{name: "a permission request that names no call blocks a call of its own", form: FormTrafficLog, lines: []string{
			`{"t":1,"dir":"a2c","msg":{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"}}}}`,
			`{"t":2,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"allow","updatedInput":{"command":"ls"}}}}}`,
		}, want: []string{
			`{"type":"TurnStarted","time":1,"turnID":"turn-1"}`,
			`{"type":"ToolCall","time":1,"callID":"r1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolBlocked","time":1,"callID":"r1","tool":"bash","input":{"command":"ls"},"permission":{"id":"r1","permission":"bash","patterns":["ls"],"metadata":{"tool":"Bash"}}}`,
			`{"type":"ToolResolved","time":2,"callID":"r1","decision":"once"}`,
		}},
		{name: "unknown permission behavior is refused", form: FormTrafficLog, lines: []string{
			`{"t":1,"dir":"a2c","msg":{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf build"},"tool_use_id":"b1"}}}`,
			`{"t":2,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"r1","response":{"behavior":"maybe"}}}}`,
			`{"t":3,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"r9","response":{"behavior":"allow"}}}}`,
			`{"t":4,"dir":"a2c","msg":{"type":"control_cancel_request","request_id":"r1"}}`,
			`{"t":5,"dir":"c2a","msg":{"type":"assistant","message":{"id":"m9","content":[{"type":"text","text":"spoofed"}]}}}`,
			`{"t":6,"dir":"sideways","msg":{}}`,
			`{"t":7,"dir":"exit","msg":"gone"}`,
			`{"t":8,"dir":"a2c","msg":[1]}`,
		}, want: []string{
			`{"type":"TurnStarted","time":1,"turnID":"turn-1"}`,
			`{"type":"ToolCall","time":1,"callID":"b1","tool":"bash","title":"rm -rf build","input":{"command":"rm -rf build"},"metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolBlocked","time":1,"callID":"b1","tool":"bash","input":{"command":"rm -rf build"},"permission":{"id":"r1","permission":"bash","patterns":["rm -rf build"],"metadata":{"tool":"Bash"}}}`,
			`{"type":"DroppedInput","time":2,"dropped":{"source":"claude-traffic","line":2,"kind":"control_response","reason":"unknown_decision","detail":"permission behavior \"maybe\" is neither allow nor deny; the tool stays blocked","raw":"{\"t\":2,\"dir\":\"c2a\",\"msg\":{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"r1\",\"response\":{\"behavior\":\"maybe\"}}}}"}}`,
			`{"type":"DroppedInput","time":3,"dropped":{"source":"claude-traffic","line":3,"kind":"control_response","reason":"orphan","detail":"answer to request \"r9\" that is not open","raw":"{\"t\":3,\"dir\":\"c2a\",\"msg\":{\"type\":\"control_response\",\"response\":{\"subtype\":\"success\",\"request_id\":\"r9\",\"response\":{\"behavior\":\"allow\"}}}}"}}`,
			`{"type":"ToolResolved","time":4,"callID":"b1","decision":"reject","reason":"cancelled"}`,
			`{"type":"DroppedInput","time":5,"dropped":{"source":"claude-traffic","line":5,"kind":"c2a/assistant","reason":"unknown_type","detail":"message kind the wrapper does not send","raw":"{\"t\":5,\"dir\":\"c2a\",\"msg\":{\"type\":\"assistant\",\"message\":{\"id\":\"m9\",\"content\":[{\"type\":\"text\",\"text\":\"spoofed\"}]}}}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-traffic","line":6,"reason":"unknown_type","detail":"trafficlog: unknown dir \"sideways\"","raw":"{\"t\":6,\"dir\":\"sideways\",\"msg\":{}}"}}`,
			`{"type":"DroppedInput","time":7,"dropped":{"source":"claude-traffic","line":7,"kind":"exit","reason":"invalid_field","detail":"trafficlog: field has the wrong type: exit msg is \"gone\"","raw":"{\"t\":7,\"dir\":\"exit\",\"msg\":\"gone\"}"}}`,
			`{"type":"DroppedInput","time":8,"dropped":{"source":"claude-traffic","line":8,"kind":"a2c","reason":"not_an_object","detail":"message is not a JSON object","raw":"{\"t\":8,\"dir\":\"a2c\",\"msg\":[1]}"}}`,
		}},
		{name: "refused lines", form: FormStreamJSON, lines: []string{
			`[1,2]`,
			`{"type":"assistant","message":{"id":"m1"`,
			`{"no":"type"}`,
			s(`"type":"mystery"`),
			s(`"type":"system","subtype":"mystery"`),
			s(`"type":"assistant","message":{"id":"","role":"assistant","content":[]}`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`),
			s(`"type":"assistant","message":"not an object"`),
			s(`"type":"keep_alive"`),
			s(`"type":"rate_limit_event","rate_limit_info":{}`),
			s(`"type":"system","subtype":"status","status":"requesting"`),
		}, want: []string{
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":1,"reason":"not_an_object","detail":"record is JSON but not an object","raw":"[1,2]"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":2,"kind":"assistant","reason":"unparseable_json","detail":"record is not valid JSON: unexpected end of JSON input","raw":"{\"type\":\"assistant\",\"message\":{\"id\":\"m1\""}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":3,"reason":"missing_id","detail":"record has no type","raw":"{\"no\":\"type\"}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":4,"kind":"mystery","reason":"unknown_type","detail":"record kind not known to this version","raw":"{\"session_id\":\"S\",\"type\":\"mystery\"}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":5,"kind":"system/mystery","reason":"unknown_type","detail":"system subtype not known to this version","raw":"{\"session_id\":\"S\",\"type\":\"system\",\"subtype\":\"mystery\"}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":6,"kind":"assistant","reason":"missing_id","detail":"assistant message has no id","raw":"{\"session_id\":\"S\",\"type\":\"assistant\",\"message\":{\"id\":\"\",\"role\":\"assistant\",\"content\":[]}}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":7,"kind":"stream_event/content_block_delta","reason":"orphan","detail":"stream event outside a streamed message","raw":"{\"session_id\":\"S\",\"type\":\"stream_event\",\"event\":{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":8,"kind":"assistant","reason":"invalid_field","detail":"assistant record has no message object (field message is string, want claude.apiMessage)","raw":"{\"session_id\":\"S\",\"type\":\"assistant\",\"message\":\"not an object\"}"}}`,
		}},
	})
}

func TestDecoderMerging(t *testing.T) {
	asst := func(uuid, content string) string {
		return j(`"type":"assistant","uuid":"` + uuid + `","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"tool_use","content":[` + content + `],"usage":{"input_tokens":3,"output_tokens":7,"cache_read_input_tokens":100}}`)
	}
	think := `{"type":"thinking","thinking":"plan","signature":"sig"}`
	text := `{"type":"text","text":"Running it."}`
	tool := `{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"ls"}}`
	runDecoderCases(t, []decoderCase{
		{name: "a message written per block, then again whole", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u0","message":{"role":"user","content":"list"}`),
			asst("a1", think), asst("a2", text), asst("a3", tool),
			asst("a2", text),                    // the same record again
			asst("a4", think+","+text+","+tool), // the whole message written again
			j(`"type":"user","uuid":"u5","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"b1","content":"a\nb"}]}`),
			asst("a6", text), // after its step ended
			j(`"type":"assistant","uuid":"a7","message":{"id":"m2","model":"m","role":"assistant","stop_reason":"end_turn","content":[{"type":"text","text":"Two files."}]}`),
			j(`"type":"system","subtype":"turn_duration","uuid":"u7"`),
			asst("a8", text), // after its turn ended
			j(`"type":"user","uuid":"u9","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"b1","content":"again"}]}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u0","text":"list"}`,
			`{"type":"TurnStarted","turnID":"u0"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ReasoningFinal","message":"m1","block":"0","text":"plan","metadata":{"signature":"sig"}}`,
			`{"type":"Usage","message":"m1","tokens":{"input":3,"output":7,"cache":{"read":100}}}`,
			`{"type":"TextFinal","message":"m1","block":"1","text":"Running it."}`,
			`{"type":"ToolCall","message":"m1","callID":"b1","tool":"bash","title":"ls","input":{"command":"ls"},"metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolRunning","callID":"b1"}`,
			`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
			`{"type":"ToolCompleted","callID":"b1","output":"a\nb","title":"ls"}`,
			`{"type":"MessageStarted","message":"m2","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","message":"m2","block":"0","text":"Two files."}`,
			`{"type":"StepFinished","message":"m2","finish":"stop"}`,
			`{"type":"TurnEnded","turnID":"u0","reason":"completed"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-jsonl","line":12,"kind":"user/tool_result","reason":"illegal_transition","detail":"tool_result for b1 after the call was settled; ignored","raw":"{\"sessionId\":\"S\",\"cwd\":\"/w\",\"type\":\"user\",\"uuid\":\"u9\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"b1\",\"content\":\"again\"}]}}"}}`,
		}},
		{name: "old sidechain records in the main file", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u0","message":{"role":"user","content":"delegate"}`),
			j(`"type":"assistant","uuid":"a1","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"task1","name":"Task","input":{"description":"Look","prompt":"look around","subagent_type":"Explore"}}]}`),
			j(`"type":"user","uuid":"s1","isSidechain":true,"parentUuid":null,"message":{"role":"user","content":"look around"}`),
			j(`"type":"assistant","uuid":"s2","isSidechain":true,"parentUuid":"s1","message":{"id":"sm1","model":"m","role":"assistant","content":[{"type":"text","text":"Found it."}],"stop_reason":"end_turn"}`),
			j(`"type":"user","uuid":"u3","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"task1","content":[{"type":"text","text":"Found it."}]}]}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u0","text":"delegate"}`,
			`{"type":"TurnStarted","turnID":"u0"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"task1","tool":"task","title":"Look","input":{"description":"Look","prompt":"look around","agent":"Explore"},"metadata":{"providerInput":{"description":"Look","prompt":"look around","subagent_type":"Explore"},"providerTool":"Task"}}`,
			`{"type":"ToolRunning","callID":"task1"}`,
			`{"type":"SubagentStarted","callID":"task1","child":"task1","title":"Look","agent":"Explore","prompt":"look around","description":"Look"}`,
			`{"type":"TurnStarted","session":"task1","turnID":"s1"}`,
			`{"type":"MessageStarted","session":"task1","message":"sm1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","session":"task1","message":"sm1","block":"0","text":"Found it."}`,
			`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
			`{"type":"StepFinished","session":"task1","message":"sm1","finish":"stop"}`,
			`{"type":"TurnEnded","session":"task1","turnID":"s1","reason":"completed"}`,
			`{"type":"SubagentEnded","child":"task1"}`,
			`{"type":"ToolCompleted","callID":"task1","output":"Found it.","title":"Look"}`,
			`{"type":"TurnEnded","turnID":"u0","reason":"truncated","error":"the transcript ends with the turn still open"}`,
		}, end: end},
		{name: "an unlinked subagent keeps its content", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"s1","isSidechain":true,"agentId":"abc","message":{"role":"user","content":"orphan task"}`),
			j(`"type":"assistant","uuid":"s2","isSidechain":true,"agentId":"abc","message":{"id":"sm1","model":"m","role":"assistant","content":[{"type":"text","text":"done"}],"stop_reason":"end_turn"}`),
		}, want: []string{
			`{"type":"SubagentStarted","child":"agent-abc"}`,
			`{"type":"UserPrompt","session":"agent-abc","promptID":"s1","text":"orphan task"}`,
			`{"type":"TurnStarted","session":"agent-abc","turnID":"s1"}`,
			`{"type":"MessageStarted","session":"agent-abc","message":"sm1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","session":"agent-abc","message":"sm1","block":"0","text":"done"}`,
			`{"type":"StepFinished","session":"agent-abc","message":"sm1","finish":"stop"}`,
			`{"type":"TurnEnded","session":"agent-abc","turnID":"s1","reason":"truncated","error":"stream ended before the subagent finished"}`,
			`{"type":"SubagentEnded","child":"agent-abc"}`,
		}, end: end},
		{name: "background subagent ends on its notification", form: FormStreamJSON, lines: []string{
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"ag1","name":"Agent","input":{"description":"Watch","prompt":"watch the logs","subagent_type":"general-purpose","run_in_background":true}}]},"parent_tool_use_id":null`),
			s(`"type":"system","subtype":"task_started","task_id":"x1","tool_use_id":"ag1","description":"Watch"`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"ag1","content":"Async agent launched successfully."}]},"tool_use_result":{"status":"async_launched","agentId":"x1"},"parent_tool_use_id":null`),
			s(`"type":"assistant","message":{"id":"c1","model":"m","role":"assistant","content":[{"type":"text","text":"tail -f"}]},"parent_tool_use_id":"ag1"`),
			s(`"type":"system","subtype":"task_notification","task_id":"x1","tool_use_id":"ag1","status":"completed"`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"ag1","tool":"task","title":"Watch","input":{"description":"Watch","prompt":"watch the logs","agent":"general-purpose"},"metadata":{"providerInput":{"description":"Watch","prompt":"watch the logs","run_in_background":true,"subagent_type":"general-purpose"},"providerTool":"Agent"}}`,
			`{"type":"ToolRunning","callID":"ag1"}`,
			`{"type":"SubagentStarted","callID":"ag1","child":"ag1","title":"Watch","agent":"general-purpose","prompt":"watch the logs","description":"Watch"}`,
			`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
			`{"type":"ToolCompleted","callID":"ag1","output":"Async agent launched successfully.","title":"Watch","metadata":{"toolUseResult":{"status":"async_launched","agentId":"x1"}}}`,
			`{"type":"TurnStarted","session":"ag1","turnID":"turn-2"}`,
			`{"type":"MessageStarted","session":"ag1","message":"c1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","session":"ag1","message":"c1","block":"0","text":"tail -f"}`,
			`{"type":"TurnEnded","session":"ag1","turnID":"turn-2","reason":"completed"}`,
			`{"type":"SubagentEnded","child":"ag1"}`,
		}},
	})
}

func TestDecoderPermissionsInTheTerminal(t *testing.T) {
	call := j(`"type":"assistant","uuid":"a1","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"tool_use","content":[{"type":"tool_use","id":"e1","name":"Edit","input":{"file_path":"/w/a.go","old_string":"a","new_string":"b"}}]}`)
	runDecoderCases(t, []decoderCase{
		{name: "a hook allowed the call", form: FormSessionJSONL, lines: []string{
			call,
			j(`"type":"attachment","uuid":"h1","attachment":{"type":"hook_permission_decision","decision":"allow","toolUseID":"e1","hookEvent":"PermissionRequest"}`),
			j(`"type":"attachment","uuid":"h2","attachment":{"type":"hook_permission_decision","decision":"ask","toolUseID":"e1","hookEvent":"PermissionRequest"}`),
			j(`"type":"attachment","uuid":"h3","attachment":{"type":"hook_permission_decision","decision":"allow","toolUseID":"zz","hookEvent":"PermissionRequest"}`),
			j(`"type":"attachment","uuid":"h4","attachment":{"type":"skill_listing","content":"…"}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"e1","tool":"edit","title":"/w/a.go","input":{"path":"/w/a.go","oldString":"a","newString":"b"},"metadata":{"providerInput":{"file_path":"/w/a.go","new_string":"b","old_string":"a"},"providerTool":"Edit"}}`,
			`{"type":"ToolRunning","callID":"e1"}`,
			`{"type":"ToolBlocked","message":"m1","callID":"e1","tool":"edit","input":{"path":"/w/a.go","oldString":"a","newString":"b"},"permission":{"id":"hook-e1","permission":"edit","patterns":["/w/a.go"],"metadata":{"tool":"Edit"}}}`,
			`{"type":"ToolResolved","callID":"e1","decision":"once"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-jsonl","line":3,"kind":"attachment/hook_permission_decision","reason":"unknown_decision","detail":"hook decision \"ask\" is neither allow nor deny","raw":"{\"sessionId\":\"S\",\"cwd\":\"/w\",\"type\":\"attachment\",\"uuid\":\"h2\",\"attachment\":{\"type\":\"hook_permission_decision\",\"decision\":\"ask\",\"toolUseID\":\"e1\",\"hookEvent\":\"PermissionRequest\"}}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-jsonl","line":4,"kind":"attachment/hook_permission_decision","reason":"orphan","detail":"permission decision for \"zz\", a call that is not open","raw":"{\"sessionId\":\"S\",\"cwd\":\"/w\",\"type\":\"attachment\",\"uuid\":\"h3\",\"attachment\":{\"type\":\"hook_permission_decision\",\"decision\":\"allow\",\"toolUseID\":\"zz\",\"hookEvent\":\"PermissionRequest\"}}"}}`,
		}},
	})
}

func TestDecoderObserveAndIdle(t *testing.T) {
	dec, _ := NewDecoder(FormSessionJSONL, Options{})
	lines := []string{
		j(`"type":"user","uuid":"u1","message":{"role":"user","content":"edit it"}`),
		j(`"type":"assistant","uuid":"a1","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"tool_use","content":[{"type":"tool_use","id":"e1","name":"Edit","input":{"file_path":"/w/a.go","old_string":"a","new_string":"b"}}]}`),
	}
	for i, l := range lines {
		dec.Decode([]byte(l), int64(i+1))
	}
	// A hook said the call waits for a person; nothing is closed on Idle.
	dec.Observe(&agent.ToolBlocked{CallID: "e1", Permission: &agent.PermissionRequest{ID: "p1", Permission: "edit"}})
	if evs := dec.Idle(); len(evs) != 0 {
		t.Fatalf("idle with an open tool: %s", mustEncode(t, evs))
	}
	// The person says No in the terminal.
	rej := j(`"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"e1","is_error":true,"content":"The user doesn't want to proceed with this tool use."}]},"toolUseResult":"User rejected tool use"`)
	got := strings.Split(strings.TrimSpace(mustEncode(t, dec.Decode([]byte(rej), 3))), "\n")
	want := []string{
		`{"type":"StepFinished","message":"m1","finish":"tool-calls"}`,
		`{"type":"ToolResolved","callID":"e1","decision":"reject","reason":"answered-in-agent"}`,
		`{"type":"ToolFailed","callID":"e1","error":"The user doesn't want to proceed with this tool use.","metadata":{"toolUseResult":"User rejected tool use"}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rejection in the terminal:\n%s", strings.Join(got, "\n"))
	}
	dec.Decode([]byte(j(`"type":"assistant","uuid":"a3","message":{"id":"m2","model":"m","role":"assistant","stop_reason":"end_turn","content":[{"type":"text","text":"OK, not editing."}]}`)), 4)
	// Quiet after a finished step: the turn is complete.
	got = strings.Split(strings.TrimSpace(mustEncode(t, dec.Idle())), "\n")
	want = []string{
		`{"type":"StepFinished","message":"m2","finish":"stop"}`,
		`{"type":"TurnEnded","turnID":"u1","reason":"completed"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("idle:\n%s", strings.Join(got, "\n"))
	}
	if evs := dec.Finish(EndOfStream{}); len(evs) != 0 {
		t.Fatalf("finish after idle: %s", mustEncode(t, evs))
	}
	evs := dec.Decode([]byte(lines[0]), 9)
	if d := eventsOf[*agent.DroppedInput](evs); len(d) != 1 || d[0].Dropped.Detail != "line after the end of the stream" {
		t.Fatalf("line after finish: %s", mustEncode(t, evs))
	}
}

func TestDecoderBlocksAndResults(t *testing.T) {
	runDecoderCases(t, []decoderCase{
		{name: "partial thinking and server tools", form: FormStreamJSON, lines: []string{
			s(`"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"m","role":"assistant","content":[],"usage":{"input_tokens":5}}}`),
			s(`"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"zz"}}`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"weird_delta"}}`),
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"zz"}]}`),
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"redacted_thinking","data":"opaque"}]}`),
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"server_tool_use","id":"srv1","name":"web_search","input":{"query":"go json"}}]}`),
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"web_search_tool_result","tool_use_id":"srv1","content":[{"type":"web_search_result","url":"https://go.dev","title":"Go"}]}]}`),
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"hologram","id":"h"}]}`),
			s(`"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`),
			s(`"type":"stream_event","event":{"type":"message_stop"}`),
			s(`"type":"stream_event","event":{"type":"teleport"}`),
			s(`"type":"stream_event","event":{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			s(`"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":3`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"Usage","message":"m1","tokens":{"input":5,"cache":{}}}`,
			`{"type":"ReasoningDelta","message":"m1","block":"0","delta":"hmm"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":5,"kind":"stream_event/content_block_delta/weird_delta","reason":"unknown_type","detail":"delta type not known to this version","raw":"{\"session_id\":\"S\",\"type\":\"stream_event\",\"event\":{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"weird_delta\"}}}"}}`,
			`{"type":"ReasoningFinal","message":"m1","block":"0","text":"hmm","metadata":{"signature":"zz"}}`,
			`{"type":"ReasoningFinal","message":"m1","block":"1","metadata":{"redacted":true}}`,
			`{"type":"ToolCall","message":"m1","callID":"srv1","tool":"search","input":{"query":"go json"},"metadata":{"providerTool":"web_search"}}`,
			`{"type":"ToolRunning","callID":"srv1"}`,
			`{"type":"ToolCompleted","callID":"srv1","output":"[{\"type\":\"web_search_result\",\"url\":\"https://go.dev\",\"title\":\"Go\"}]"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":10,"kind":"assistant/hologram","reason":"unknown_type","detail":"content block type not known to this version","raw":"{\"session_id\":\"S\",\"type\":\"assistant\",\"message\":{\"id\":\"m1\",\"model\":\"m\",\"role\":\"assistant\",\"content\":[{\"type\":\"hologram\",\"id\":\"h\"}]}}"}}`,
			`{"type":"Usage","message":"m1","tokens":{"input":5,"output":9,"cache":{}}}`,
			`{"type":"StepFinished","message":"m1","finish":"stop"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-stream-json","line":13,"kind":"stream_event/teleport","reason":"unknown_type","detail":"stream event type not known to this version","raw":"{\"session_id\":\"S\",\"type\":\"stream_event\",\"event\":{\"type\":\"teleport\"}}"}}`,
			`{"type":"AgentError","kind":"rate_limit","text":"Overloaded"}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"maximum number of turns reached"}`,
		}},
		{name: "odd inputs and stop reasons", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u1","message":{"role":"user","content":[{"type":"text","text":"look \udc00 at this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}`),
			j(`"type":"user","uuid":"u2","isMeta":true,"message":{"role":"user","content":"<command-caveat>ignore</command-caveat>"}`),
			j(`"type":"assistant","uuid":"a1","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"time_travel","content":[{"type":"tool_use","id":"x1","name":"mcp__db__query","input":["not","an","object"]}]}`),
			j(`"type":"summary","summary":"Old title","leafUuid":"a1"`),
			j(`"type":"custom-title","customTitle":"My title"`),
			j(`"type":"ai-title","aiTitle":"AI title"`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u1","text":"look � at this","files":[{"mime":"image/png","url":"data:image/png;base64,iVBORw0KGgo="}]}`,
			`{"type":"TurnStarted","turnID":"u1"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-jsonl","line":3,"kind":"assistant","reason":"invalid_field","detail":"unknown stop_reason \"time_travel\"; the step keeps no finish reason","raw":"{\"sessionId\":\"S\",\"cwd\":\"/w\",\"type\":\"assistant\",\"uuid\":\"a1\",\"message\":{\"id\":\"m1\",\"model\":\"m\",\"role\":\"assistant\",\"stop_reason\":\"time_travel\",\"content\":[{\"type\":\"tool_use\",\"id\":\"x1\",\"name\":\"mcp__db__query\",\"input\":[\"not\",\"an\",\"object\"]}]}}"}}`,
			`{"type":"DroppedInput","dropped":{"source":"claude-jsonl","line":3,"kind":"assistant/tool_use","reason":"invalid_field","detail":"tool_use input of x1 is not a JSON object; recorded as {}","raw":"{\"sessionId\":\"S\",\"cwd\":\"/w\",\"type\":\"assistant\",\"uuid\":\"a1\",\"message\":{\"id\":\"m1\",\"model\":\"m\",\"role\":\"assistant\",\"stop_reason\":\"time_travel\",\"content\":[{\"type\":\"tool_use\",\"id\":\"x1\",\"name\":\"mcp__db__query\",\"input\":[\"not\",\"an\",\"object\"]}]}}"}}`,
			`{"type":"ToolCall","message":"m1","callID":"x1","tool":"mcp:db/query","input":{},"metadata":{"providerTool":"mcp__db__query"}}`,
			`{"type":"ToolRunning","callID":"x1"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w","title":"Old title"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w","title":"My title"}`,
			`{"type":"ToolFailed","callID":"x1","error":"the transcript ends with the turn still open"}`,
			`{"type":"TurnEnded","turnID":"u1","reason":"truncated","error":"the transcript ends with the turn still open"}`,
		}, end: end},
		{name: "interrupted in sdk mode", form: FormStreamJSON, opts: Options{ControlChannel: true}, lines: []string{
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"sleep 9"}},{"type":"tool_use","id":"q1","name":"AskUserQuestion","input":{"questions":[]}}]},"parent_tool_use_id":null`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"parent_tool_use_id":null`),
			s(`"type":"result","subtype":"error_during_execution","is_error":true`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"b1","tool":"bash","title":"sleep 9","input":{"command":"sleep 9"},"metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolRunning","callID":"b1"}`,
			`{"type":"ToolCall","message":"m1","callID":"q1","tool":"question","input":{"questions":[]},"metadata":{"providerTool":"AskUserQuestion"}}`,
			`{"type":"ToolRunning","callID":"q1"}`,
			`{"type":"StepFinished","message":"m1","finish":"aborted"}`,
			`{"type":"ToolFailed","callID":"b1","error":"interrupted by user"}`,
			`{"type":"ToolFailed","callID":"q1","error":"interrupted by user"}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"interrupted"}`,
		}},
		// A person's stop marks the turn's last step aborted, as the other
		// adapters do (their step is still open when the turn is cancelled),
		// even when the step had finished with its tool calls.
		{name: "an interrupted turn's last step is aborted", form: FormStreamJSON, opts: Options{ControlChannel: true}, lines: []string{
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"text","text":"Running it."},{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"sleep 9"}}]},"parent_tool_use_id":null`),
			s(`"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]},"parent_tool_use_id":null`),
			s(`"type":"result","subtype":"error_during_execution","is_error":true`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","message":"m1","block":"0","text":"Running it."}`,
			`{"type":"ToolCall","message":"m1","callID":"b1","tool":"bash","title":"sleep 9","input":{"command":"sleep 9"},"metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolRunning","callID":"b1"}`,
			`{"type":"StepFinished","message":"m1","finish":"aborted"}`,
			`{"type":"ToolFailed","callID":"b1","error":"interrupted by user"}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"interrupted"}`,
		}},
		{name: "an interrupted turn in the session transcript", form: FormSessionJSONL, lines: []string{
			j(`"type":"user","uuid":"u1","message":{"role":"user","content":"count slowly"}`),
			j(`"type":"assistant","uuid":"a1","message":{"id":"m1","model":"m","role":"assistant","stop_reason":null,"content":[{"type":"text","text":"One, two"}]}`),
			j(`"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]}`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","cwd":"/w"}`,
			`{"type":"UserPrompt","promptID":"u1","text":"count slowly"}`,
			`{"type":"TurnStarted","turnID":"u1"}`,
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextFinal","message":"m1","block":"0","text":"One, two"}`,
			`{"type":"StepFinished","message":"m1","finish":"aborted"}`,
			`{"type":"TurnEnded","turnID":"u1","reason":"interrupted"}`,
		}},
		// Claude refuses and has no fallback model: the turn ends as an
		// error that carries the refusal (the result that follows says
		// only that the turn failed).
		{name: "a refusal without fallback is the step's error", form: FormStreamJSON, lines: []string{
			s(`"type":"system","subtype":"init","model":"m","cwd":"/w"`),
			s(`"type":"system","subtype":"model_refusal_no_fallback","original_model":"claude-opus-5","request_id":"req_1","api_refusal_category":"cyber","content":"Claude Opus 5 declined this request (cyber) and no fallback model is configured.","uuid":"r1"`),
			s(`"type":"result","subtype":"success","is_error":true,"result":""`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m","cwd":"/w"}`,
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"AgentError","kind":"internal","text":"Claude Opus 5 declined this request (cyber) and no fallback model is configured."}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"Claude Opus 5 declined this request (cyber) and no fallback model is configured."}`,
		}},
		{name: "a refusal without content is named from its fields", form: FormStreamJSON, lines: []string{
			s(`"type":"system","subtype":"model_refusal_no_fallback","original_model":"claude-opus-5","request_id":null,"api_refusal_category":"bio","uuid":"r1"`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"AgentError","kind":"internal","text":"claude-opus-5 refused the request (bio) and no fallback model is configured"}`,
		}},
		// A stream that breaks and is retried: the failed attempt's partial
		// text and thinking are emptied (Claude discards them: the retry
		// asks again and they are in no transcript of Claude's), the tool
		// call whose input was still streaming fails, and the retry part
		// stands in the failed attempt's step.
		{name: "a broken stream retried", form: FormStreamJSON, lines: []string{
			s(`"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"m","role":"assistant","content":[]}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_stop","index":0},"parent_tool_use_id":null`),
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"thinking","thinking":"Let me","signature":"sig"}]},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"The answ"}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"t1","name":"Bash","input":{}}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}},"parent_tool_use_id":null`),
			s(`"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":600,"error_status":529,"error":"overloaded"`),
			s(`"type":"stream_event","event":{"type":"message_start","message":{"id":"m2","model":"m","role":"assistant","content":[]}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The answer is 4."}},"parent_tool_use_id":null`),
			s(`"type":"assistant","message":{"id":"m2","model":"m","role":"assistant","content":[{"type":"text","text":"The answer is 4."}]},"parent_tool_use_id":null`),
			s(`"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":null`),
			s(`"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn"`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ReasoningDelta","message":"m1","block":"0","delta":"Let me"}`,
			`{"type":"ReasoningFinal","message":"m1","block":"0","text":"Let me","metadata":{"signature":"sig"}}`,
			`{"type":"TextDelta","message":"m1","block":"1","delta":"The answ"}`,
			`{"type":"ToolCall","message":"m1","callID":"t1","tool":"bash","metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolInputDelta","callID":"t1","delta":"{\"comm"}`,
			`{"type":"TextFinal","message":"m1","block":"1"}`,
			`{"type":"ToolFailed","callID":"t1","error":"the model call broke off and Claude retried it"}`,
			`{"type":"Retry","message":"m1","attempt":1,"error":{"name":"APIError","data":{"message":"overloaded","kind":"rate_limit","providerID":"anthropic","statusCode":529,"isRetryable":true}}}`,
			`{"type":"MessageStarted","message":"m2","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TextDelta","message":"m2","block":"0","delta":"The answer is 4."}`,
			`{"type":"TextFinal","message":"m2","block":"0","text":"The answer is 4."}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"completed"}`,
		}},
		// Claude reports a long shell command it keeps running as a task
		// too: no subagent, so no child session (it would print an empty
		// "subagent" header under the Bash call).
		{name: "a background shell task is no subagent", form: FormStreamJSON, lines: []string{
			s(`"type":"assistant","message":{"id":"m1","model":"m","role":"assistant","content":[{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"make test"}}]},"parent_tool_use_id":null`),
			s(`"type":"system","subtype":"task_started","task_id":"bx1","tool_use_id":"b1","description":"make test","task_type":"local_bash"`),
			s(`"type":"system","subtype":"task_started","task_id":"bx2","tool_use_id":"b1","description":"make test"`),
			s(`"type":"system","subtype":"task_notification","task_id":"bx1","tool_use_id":"b1","status":"completed"`),
		}, want: []string{
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"MessageStarted","message":"m1","providerID":"anthropic","modelID":"m"}`,
			`{"type":"ToolCall","message":"m1","callID":"b1","tool":"bash","title":"make test","input":{"command":"make test"},"metadata":{"providerTool":"Bash"}}`,
			`{"type":"ToolRunning","callID":"b1"}`,
		}},
		{name: "failed during execution", form: FormStreamJSON, lines: []string{
			s(`"type":"system","subtype":"init","model":"m"`),
			s(`"type":"result","subtype":"error_during_execution","is_error":true,"errors":["tool crashed","and again"]`),
		}, want: []string{
			`{"type":"SessionInfo","providerSessionID":"S","providerID":"anthropic","modelID":"m"}`,
			`{"type":"TurnStarted","turnID":"turn-1"}`,
			`{"type":"AgentError","kind":"internal","text":"tool crashed; and again"}`,
			`{"type":"TurnEnded","turnID":"turn-1","reason":"failed","error":"tool crashed; and again"}`,
		}},
	})
}

// The broken-off attempt's words are gone from the transcript: its text is
// empty, its retry part stays on its step, and the retried answer is the
// only text of the turn.
func TestBrokenStreamTranscript(t *testing.T) {
	lines := []string{
		s(`"type":"stream_event","event":{"type":"message_start","message":{"id":"m1","model":"m","role":"assistant","content":[]}},"parent_tool_use_id":null`),
		s(`"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"parent_tool_use_id":null`),
		s(`"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"The answ"}},"parent_tool_use_id":null`),
		s(`"type":"system","subtype":"api_retry","attempt":1,"error_status":529,"error":"overloaded"`),
		s(`"type":"stream_event","event":{"type":"message_start","message":{"id":"m2","model":"m","role":"assistant","content":[]}},"parent_tool_use_id":null`),
		s(`"type":"assistant","message":{"id":"m2","model":"m","role":"assistant","content":[{"type":"text","text":"The answer is 4."}]},"parent_tool_use_id":null`),
		s(`"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":null`),
		s(`"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn"`),
	}
	dec, _ := NewDecoder(FormStreamJSON, Options{})
	var evs []agent.Event
	for i, l := range lines {
		evs = append(evs, dec.Decode([]byte(l), int64(i+1))...)
	}
	tr, _ := transcriptOf(t, evs)
	var texts []string
	retries := 0
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			switch pt := p.(type) {
			case *mapper.TextPart:
				texts = append(texts, pt.Text)
			case *mapper.RetryPart:
				retries++
				if m.Info.MessageID() != tr.Messages[0].Info.MessageID() {
					t.Errorf("the retry part is not on the broken-off step")
				}
			}
		}
	}
	if strings.Join(texts, "|") != "|The answer is 4." || retries != 1 || len(tr.Messages) != 2 {
		t.Fatalf("%d messages, texts %q, %d retry parts", len(tr.Messages), texts, retries)
	}
}

// A call happy answered through its PermissionRequest hook (Observe of the
// block and of the answer, a rule's say): the transcript's
// hook_permission_decision attachment is the echo of that answer, whether
// Claude writes it before the call's result or after. It neither blocks and
// resolves the call again (which took the rule's answer for one given in
// Claude) nor is dropped as an orphan.
func TestDecoderSkipsTheEchoOfHappysHookAnswer(t *testing.T) {
	for _, after := range []bool{false, true} {
		dec, _ := NewDecoder(FormSessionJSONL, Options{})
		dec.Decode([]byte(j(`"type":"user","uuid":"u1","message":{"role":"user","content":"create it"}`)), 1)
		dec.Decode([]byte(j(`"type":"assistant","uuid":"a1","message":{"id":"m1","model":"m","role":"assistant","stop_reason":"tool_use","content":[{"type":"tool_use","id":"b1","name":"Bash","input":{"command":"echo hi > hi.txt"}}]}`)), 2)
		dec.Observe(&agent.ToolBlocked{CallID: "b1", Permission: &agent.PermissionRequest{ID: "p1", Permission: "bash"}})
		dec.Observe(&agent.ToolResolved{CallID: "b1", Decision: agent.DecisionOnce, Reason: agent.ReasonRule})
		echo := j(`"type":"attachment","uuid":"h1","attachment":{"type":"hook_permission_decision","decision":"allow","toolUseID":"b1","hookEvent":"PermissionRequest"}`)
		result := j(`"type":"user","uuid":"u2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"b1","content":""}]}`)
		lines := []string{echo, result}
		if after {
			lines = []string{result, echo}
		}
		var evs []agent.Event
		for i, l := range lines {
			evs = append(evs, dec.Decode([]byte(l), int64(3+i))...)
		}
		for _, ev := range evs {
			switch ev.(type) {
			case *agent.ToolBlocked, *agent.ToolResolved, *agent.DroppedInput:
				t.Fatalf("echo after the result %v: %s", after, mustEncode(t, evs))
			}
		}
		if len(eventsOf[*agent.ToolCompleted](evs)) != 1 {
			t.Fatalf("echo after the result %v: no completion: %s", after, mustEncode(t, evs))
		}
	}
}
