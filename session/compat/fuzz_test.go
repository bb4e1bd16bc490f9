package compat

import (
	"encoding/json"
	"errors"
	"testing"
)

func FuzzValidateMetadata(f *testing.F) {
	for _, s := range []string{`{"path":"/w","host":"h"}`, `{"path":"/w","host":"h","summary":{"text":"t","updatedAt":1},"startedBy":"ci"}`,
		`{"path":1}`, `[]`, `null`, `{`, `{"path":"/w","host":"h","flavor":null,"tools":["a",2],"mcpServers":[null]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := ValidateMetadata(data)
		if err != nil && !errors.Is(err, ErrMetadata) {
			t.Fatalf("refusal not wrapped: %v", err)
		}
		if err == nil {
			var m map[string]any
			if json.Unmarshal(data, &m) != nil || m["path"] == nil || m["host"] == nil {
				t.Fatalf("accepted %s", data)
			}
		}
	})
}

// FuzzMerge: whatever agentState the relay holds, the merge is a JSON
// object carrying this writer's requests, and keeps a foreign key.
func FuzzMerge(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `{"controlledByUser":true,"completedRequests":{"x":{"tool":"Bash","arguments":{},"status":"approved"}}}`,
		`{"requests":[1],"completedRequests":"no"}`, `[1,2]`, `"s"`, `{"completedCommunications":null}`} {
		f.Add([]byte(s))
	}
	st := newState()
	st.Requests["c1"] = Request{Tool: "Bash", Arguments: map[string]any{"command": "ls"}, CreatedAt: 1, ToolUseID: "c1"}
	st.CompletedRequests["c0"] = CompletedRequest{Request: Request{Tool: "Read", Arguments: map[string]any{}}, Status: "denied", Decision: "denied"}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Merge(data, st)
		if err != nil {
			t.Fatalf("merge %s: %v", data, err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("merge of %s is not an object: %s", data, out)
		}
		var reqs map[string]Request
		var done map[string]json.RawMessage
		if json.Unmarshal(m["requests"], &reqs) != nil || reqs["c1"].Tool != "Bash" || json.Unmarshal(m["completedRequests"], &done) != nil || done["c0"] == nil {
			t.Fatalf("merge of %s lost ours: %s", data, out)
		}
		var in map[string]json.RawMessage
		if json.Unmarshal(data, &in) == nil && in["controlledByUser"] != nil && string(m["controlledByUser"]) != string(in["controlledByUser"]) {
			t.Fatalf("merge of %s lost controlledByUser: %s", data, out)
		}
	})
}

// FuzzSettle: whatever the relay holds, settling leaves nothing waiting and
// is idempotent.
func FuzzSettle(f *testing.F) {
	for _, s := range []string{`{"requests":{"c":{"tool":"Bash","arguments":{}}}}`, `{"communications":{"q":null}}`, `null`, `[]`, `{"requests":{"c":1}}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		out, changed, err := Settle(data, "wrapper-exited", 1)
		if err != nil {
			return
		}
		if !changed {
			return
		}
		again, changed2, err := Settle(out, "wrapper-exited", 1)
		if err != nil || changed2 || string(again) != string(out) {
			t.Fatalf("settle of %s not idempotent: %s → %s (%v)", data, out, again, err)
		}
	})
}
