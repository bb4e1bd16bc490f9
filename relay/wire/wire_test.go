package wire

import (
	"encoding/json"
	"testing"
)

// TestJSONShapes pins every type's JSON byte for byte: field names, order,
// null for a nil pointer and the omitempty fields, both filled and empty.
func TestJSONShapes(t *testing.T) {
	s := func(v string) *string { return &v }
	n := func(v int64) *int64 { return &v }
	sess := Session{ID: "s1", Seq: 2, Metadata: "bWQ=", MetadataVersion: 3, AgentState: s("YXM="), AgentStateVersion: 4,
		DataEncryptionKey: s("ZGVr"), Active: true, ActiveAt: 5, CreatedAt: 6, UpdatedAt: 7}
	msg := Message{ID: "m1", Seq: 9, Content: Content{T: "encrypted", C: "Yw=="}, LocalID: s("r.1"), CreatedAt: 10, UpdatedAt: 11}
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"Content", Content{T: "encrypted", C: "Yw=="}, `{"t":"encrypted","c":"Yw=="}`},
		{"Message", msg, `{"id":"m1","seq":9,"content":{"t":"encrypted","c":"Yw=="},"localId":"r.1","createdAt":10,"updatedAt":11}`},
		{"Message/no localId", Message{ID: "m1", Seq: 9}, `{"id":"m1","seq":9,"content":{"t":"","c":""},"localId":null,"createdAt":0,"updatedAt":0}`},
		{"MessageRef/new", MessageRef{ID: "m1", Seq: 9, LocalID: s("r.1"), New: true, CreatedAt: 10, UpdatedAt: 11},
			`{"id":"m1","seq":9,"localId":"r.1","new":true,"createdAt":10,"updatedAt":11}`},
		{"Message/empty localId", Message{ID: "m1", Seq: 9, LocalID: s("")}, `{"id":"m1","seq":9,"content":{"t":"","c":""},"localId":"","createdAt":0,"updatedAt":0}`},
		{"MessageRef/stored before", MessageRef{ID: "m1", Seq: 9}, `{"id":"m1","seq":9,"localId":null,"createdAt":0,"updatedAt":0}`},
		{"MessageRef/taken", MessageRef{ID: "m1", Seq: 9, LocalID: s("r.1"), CreatedAt: 10, UpdatedAt: 11},
			`{"id":"m1","seq":9,"localId":"r.1","createdAt":10,"updatedAt":11}`},
		{"Session", sess, `{"id":"s1","seq":2,"metadata":"bWQ=","metadataVersion":3,"agentState":"YXM=","agentStateVersion":4,"dataEncryptionKey":"ZGVr","active":true,"activeAt":5,"createdAt":6,"updatedAt":7}`},
		{"Session/nulls", Session{ID: "s1"}, `{"id":"s1","seq":0,"metadata":"","metadataVersion":0,"agentState":null,"agentStateVersion":0,"dataEncryptionKey":null,"active":false,"activeAt":0,"createdAt":0,"updatedAt":0}`},
		{"ListedSession", ListedSession{Session: sess}, `{"id":"s1","seq":2,"metadata":"bWQ=","metadataVersion":3,"agentState":"YXM=","agentStateVersion":4,"dataEncryptionKey":"ZGVr","active":true,"activeAt":5,"createdAt":6,"updatedAt":7,"lastMessage":null}`},
		{"Machine/with seq", Machine{ID: "k1", Metadata: "bWQ=", MetadataVersion: 1, DaemonState: s("ZHM="), DaemonStateVersion: 2, DataEncryptionKey: s("ZGVr"), Seq: n(3), Active: true, ActiveAt: 4, CreatedAt: 5, UpdatedAt: 6},
			`{"id":"k1","metadata":"bWQ=","metadataVersion":1,"daemonState":"ZHM=","daemonStateVersion":2,"dataEncryptionKey":"ZGVr","seq":3,"active":true,"activeAt":4,"createdAt":5,"updatedAt":6}`},
		{"Machine/without seq", Machine{ID: "k1"}, `{"id":"k1","metadata":"","metadataVersion":0,"daemonState":null,"daemonStateVersion":0,"dataEncryptionKey":null,"active":false,"activeAt":0,"createdAt":0,"updatedAt":0}`},
		{"SessionCreate", SessionCreate{Tag: "t", Metadata: "bWQ="}, `{"tag":"t","metadata":"bWQ=","agentState":null,"dataEncryptionKey":null}`},
		{"MachineCreate", MachineCreate{ID: "k1", Metadata: "bWQ="}, `{"id":"k1","metadata":"bWQ="}`},
		{"MachineCreate/full", MachineCreate{ID: "k1", Metadata: "bWQ=", DaemonState: s("ZHM="), DataEncryptionKey: s("ZGVr")},
			`{"id":"k1","metadata":"bWQ=","daemonState":"ZHM=","dataEncryptionKey":"ZGVr"}`},
		{"OutgoingMessage", OutgoingMessage{Content: "Yw==", LocalID: "r.1"}, `{"content":"Yw==","localId":"r.1"}`},
		{"Update/new-message", Update{ID: "u1", Seq: 12, Body: BodyNewMessage{T: "new-message", SID: "s1", Message: msg}, CreatedAt: 13},
			`{"id":"u1","seq":12,"body":{"t":"new-message","sid":"s1","message":{"id":"m1","seq":9,"content":{"t":"encrypted","c":"Yw=="},"localId":"r.1","createdAt":10,"updatedAt":11}},"createdAt":13}`},
		{"BodyNewSession", BodyNewSession{T: "new-session", Session: sess},
			`{"t":"new-session","id":"s1","seq":2,"metadata":"bWQ=","metadataVersion":3,"agentState":"YXM=","agentStateVersion":4,"dataEncryptionKey":"ZGVr","active":true,"activeAt":5,"createdAt":6,"updatedAt":7}`},
		{"BodyUpdateSession/metadata", BodyUpdateSession{T: "update-session", ID: "s1", Metadata: &Versioned{Value: s("bWQ="), Version: 2}},
			`{"t":"update-session","id":"s1","metadata":{"value":"bWQ=","version":2}}`},
		{"BodyUpdateSession/cleared state", BodyUpdateSession{T: "update-session", ID: "s1", AgentState: &Versioned{Version: 3}},
			`{"t":"update-session","id":"s1","agentState":{"value":null,"version":3}}`},
		{"BodyDeleteSession", BodyDeleteSession{T: "delete-session", SID: "s1"}, `{"t":"delete-session","sid":"s1"}`},
		{"BodyNewMachine", BodyNewMachine{T: "new-machine", MachineID: "k1", Seq: 1, Metadata: "bWQ=", MetadataVersion: 2, DaemonStateVersion: 3, Active: true, ActiveAt: 4, CreatedAt: 5, UpdatedAt: 6},
			`{"t":"new-machine","machineId":"k1","seq":1,"metadata":"bWQ=","metadataVersion":2,"daemonState":null,"daemonStateVersion":3,"dataEncryptionKey":null,"active":true,"activeAt":4,"createdAt":5,"updatedAt":6}`},
		{"BodyUpdateMachine", BodyUpdateMachine{T: "update-machine", MachineID: "k1", DaemonState: &Versioned{Value: s("ZHM="), Version: 4}},
			`{"t":"update-machine","machineId":"k1","daemonState":{"value":"ZHM=","version":4}}`},
		{"Activity", Activity{Type: "activity", ID: "s1", Active: true, ActiveAt: 5, Thinking: true}, `{"type":"activity","id":"s1","active":true,"activeAt":5,"thinking":true}`},
		{"MachineActivity", MachineActivity{Type: "machine-activity", ID: "k1", ActiveAt: 5}, `{"type":"machine-activity","id":"k1","active":false,"activeAt":5}`},
		{"TextDelta", TextDelta{Type: "text-delta", ID: "s1", Message: "dGQ="}, `{"type":"text-delta","id":"s1","message":"dGQ="}`},
		{"Usage", Usage{Type: "usage", ID: "s1", Key: "k", Tokens: map[string]any{"total": 3}, Cost: nil, Timestamp: 7},
			`{"type":"usage","id":"s1","key":"k","tokens":{"total":3},"cost":null,"timestamp":7}`},
		{"SessionEvent", SessionEvent{Type: "session-event", SessionID: "s1", Kind: "done", Title: "T", Body: "B", Timestamp: 8},
			`{"type":"session-event","sessionId":"s1","kind":"done","title":"T","body":"B","timestamp":8}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(b) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, b, tc.want)
		}
	}
}

// TestLocalIDOrEmpty reads the localId of rows and receipts as a reader
// sees them: a row the relay stored without one (null, or absent from a
// relay that leaves it out) reads as "", as does an empty one.
func TestLocalIDOrEmpty(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		null     bool
		want     string
	}{
		{"set", `{"id":"m1","seq":9,"localId":"r.1"}`, false, "r.1"},
		{"null", `{"id":"m1","seq":9,"localId":null}`, true, ""},
		{"absent", `{"id":"m1","seq":9}`, true, ""},
		{"empty", `{"id":"m1","seq":9,"localId":""}`, false, ""},
	} {
		var m Message
		var r MessageRef
		if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
			t.Fatalf("%s: Message: %v", tc.name, err)
		}
		if err := json.Unmarshal([]byte(tc.in), &r); err != nil {
			t.Fatalf("%s: MessageRef: %v", tc.name, err)
		}
		if (m.LocalID == nil) != tc.null || m.LocalIDOrEmpty() != tc.want {
			t.Errorf("%s: Message.LocalID %v, LocalIDOrEmpty %q, want nil %v and %q", tc.name, m.LocalID, m.LocalIDOrEmpty(), tc.null, tc.want)
		}
		if (r.LocalID == nil) != tc.null || r.LocalIDOrEmpty() != tc.want {
			t.Errorf("%s: MessageRef.LocalID %v, LocalIDOrEmpty %q, want nil %v and %q", tc.name, r.LocalID, r.LocalIDOrEmpty(), tc.null, tc.want)
		}
	}
}

// TestMessageRefNew reads "new" as a reader sees it: true only when the
// relay says so; absent (the reference relay, or a row stored before) is
// false.
func TestMessageRefNew(t *testing.T) {
	for in, want := range map[string]bool{
		`{"id":"m1","seq":9,"localId":"r.1","new":true}`:  true,
		`{"id":"m1","seq":9,"localId":"r.1","new":false}`: false,
		`{"id":"m1","seq":9,"localId":"r.1"}`:             false,
	} {
		var r MessageRef
		if err := json.Unmarshal([]byte(in), &r); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if r.New != want {
			t.Errorf("%s: New %v, want %v", in, r.New, want)
		}
	}
}
