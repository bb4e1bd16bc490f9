package localapi

import "testing"

// GET /status serves every session's AgentStatus from its source, in the
// order the sources were set; a removed source is gone, and none is [].
func TestStatusEndpoint(t *testing.T) {
	h := NewHub(HubOptions{})
	s := startServer(t, h)
	auth := "Bearer " + testToken
	if code, body, _ := get(t, s.URL()+"/status", auth); code != 200 || body != "[]\n" {
		t.Fatalf("no session: %d %q", code, body)
	}
	if code, _, _ := get(t, s.URL()+"/status", ""); code != 401 {
		t.Fatalf("without the token: %d", code)
	}
	h.SetStatus("ses_1", func() AgentStatus {
		return AgentStatus{SessionID: "ses_1", RelaySessionID: "cmabc", Agent: "codex", AgentRunning: true, LastAgentEvent: 1000, TurnSince: 500,
			Tools: []ToolActivity{{CallID: "c1", Tool: "bash", Since: 900}}, Waiting: []ToolActivity{{CallID: "c2", Tool: "question", Since: 950, Question: true}},
			IdleTimeoutMs: 600000, Now: 2000}
	})
	h.SetStatus("ses_2", func() AgentStatus { return AgentStatus{SessionID: "ses_2", Now: 2000} })
	want := `[{"sessionID":"ses_1","relaySessionID":"cmabc","agent":"codex","agentRunning":true,"lastAgentEvent":1000,"turnSince":500,` +
		`"tools":[{"callID":"c1","tool":"bash","since":900}],"waiting":[{"callID":"c2","tool":"question","since":950,"question":true}],"idleTimeoutMs":600000,"now":2000},` +
		`{"sessionID":"ses_2","agentRunning":false,"tools":null,"waiting":null,"idleTimeoutMs":0,"now":2000}]` + "\n"
	if code, body, _ := get(t, s.URL()+"/status", auth); code != 200 || body != want {
		t.Fatalf("got %d %s\nwant %s", code, body, want)
	}
	h.SetStatus("ses_1", nil)
	want = `[{"sessionID":"ses_2","agentRunning":false,"tools":null,"waiting":null,"idleTimeoutMs":0,"now":2000}]` + "\n"
	if code, body, _ := get(t, s.URL()+"/status", auth); code != 200 || body != want {
		t.Fatalf("after removing ses_1: %d %s", code, body)
	}
}
