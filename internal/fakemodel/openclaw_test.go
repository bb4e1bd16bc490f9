package fakemodel

import "testing"

// OpenClaw sends its runtime context as a user message of its own after the
// user's turn and after tool results: the request is read from the turn
// before it.
func TestAnthropicSkipsOpenclawContext(t *testing.T) {
	ctx := `{"role":"user","content":[{"type":"text","text":"<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nActive exec sessions: none\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"}]}`
	for _, tc := range []struct {
		name     string
		body     string
		text     string
		toolDone bool
	}{
		{"prompt", `{"model":"m","tools":[{}],"messages":[{"role":"user","content":"run it"},` + ctx + `]}`, "run it", false},
		{"tool result", `{"model":"m","tools":[{}],"messages":[{"role":"user","content":"run it"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"exec","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]},` + ctx + `]}`, "", true},
		{"context as a string", `{"model":"m","messages":[{"role":"user","content":"hello"},{"role":"user","content":"<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> x"}]}`, "hello", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r, err := parseAnthropic([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if r.LastText != tc.text || r.ToolDone != tc.toolDone {
				t.Fatalf("LastText %q ToolDone %v, want %q %v", r.LastText, r.ToolDone, tc.text, tc.toolDone)
			}
		})
	}
}
