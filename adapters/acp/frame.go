package acp

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// ProtocolVersion is the Agent Client Protocol version this client speaks
// (the "protocolVersion" of initialize).
const ProtocolVersion = 1

// Source is the Dropped.Source of everything this package refuses.
const Source = "acp-rpc"

// Notes the live client records in the traffic (dir "note", a JSON object
// {"happy": <kind>, …}) so that a replay knows what only the client knew.
const (
	// noteDecision precedes happy's answer to a permission request:
	// {"happy":"decision","request":<id>,"decision":"once|always|reject","reason":…}.
	noteDecision = "decision"
	// noteFSWrite precedes happy's answer to fs/write_text_file:
	// {"happy":"fs-write","request":<id>,"path":…,"existed":bool,"before":…,"beforeOmitted":N}.
	noteFSWrite = "fs-write"
	// noteAbandoned says the client gave up on a turn the agent never
	// ended after session/cancel: {"happy":"turn-abandoned","reason":…}.
	noteAbandoned = "turn-abandoned"
	// noteRestart says the client is restarting the agent process; the
	// exit that follows is expected: {"happy":"restart","reason":…}.
	noteRestart = "restart"
	// noteHistoryKnown precedes a session/load of a session whose
	// conversation the transcript already holds (happy resume, the restart
	// of a given-up turn): the history the agent replays before it answers
	// the load is left out, counted, instead of entering the transcript a
	// second time: {"happy":"history-known"}.
	noteHistoryKnown = "history-known"
)

// happyNote is a note frame written by the live client.
type happyNote struct {
	Happy         string          `json:"happy"`
	Request       json.RawMessage `json:"request,omitempty"`
	Decision      string          `json:"decision,omitempty"`
	Reason        string          `json:"reason,omitempty"`
	Path          string          `json:"path,omitempty"`
	Existed       bool            `json:"existed,omitempty"`
	Before        string          `json:"before,omitempty"`
	BeforeOmitted int64           `json:"beforeOmitted,omitempty"`
}

func dropped(t int64, kind string, reason agent.DropReason, detail string, raw []byte) *agent.DroppedInput {
	return &agent.DroppedInput{
		EventBase: agent.EventBase{Time: t},
		Dropped:   agent.Dropped{Source: Source, Kind: kind, Reason: reason, Detail: detail, Raw: agent.CutUTF8(string(raw), agent.DroppedRawMax)},
	}
}

// idKey renders a JSON-RPC id as a map key: 7, or "abc" quoted.
func idKey(id jsonrpc.ID) string { return id.String() }

// rawIDKey renders a raw JSON id (from a note) the way idKey does.
func rawIDKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.Quote(s)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// toObject turns a Go value into a agent.Object by way of JSON, so that
// numbers are json.Number values as everywhere else in the transcript.
// Values that are not objects give nil.
func toObject(v any) agent.Object {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	o, err := jsonlex.DecodeObject(b)
	if err != nil {
		return nil
	}
	return o
}

// objectOr returns raw when it is a JSON object, else {"value": raw} (tool
// input must be an object), or nil for nothing.
func objectOr(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '{' {
		return raw
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"value": raw})
	return b
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}
