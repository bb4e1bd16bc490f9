package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// ProtocolVersion is the Agent Client Protocol version this client speaks
// (the "protocolVersion" of initialize).
const ProtocolVersion = 1

// Source is the Dropped.Source of everything this package refuses.
const Source = "acp-rpc"

// Frame is one record of ACP traffic, in the traffic log's terms: T in Unix
// ms, Dir c2a (happy to the agent), a2c (the agent to happy), stderr, exit
// or note, and Msg the JSON message as written on the pipe (a JSON string
// for stderr lines and for a2c lines that were not JSON).
type Frame struct {
	T   int64
	Dir trafficlog.Dir
	Msg json.RawMessage
}

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

// ReadFrames reads a traffic log (one {"t","dir","msg"} object per line,
// lines of any length). A line that is not a valid record becomes a
// DroppedInput event at its place, in the returned map keyed by the index
// of the frame it precedes. Only a read error of r is returned as an error.
func ReadFrames(r io.Reader) ([]Frame, map[int][]agent.Event, error) {
	var frames []Frame
	bad := map[int][]agent.Event{}
	err := trafficlog.Scan(r, func(line int64, rec trafficlog.Record, derr error, data []byte) {
		if derr != nil {
			bad[len(frames)] = append(bad[len(frames)], dropped(0, "traffic-log", trafficlog.DropReason(derr), derr.Error(), data))
			return
		}
		frames = append(frames, Frame{T: rec.T, Dir: rec.Dir, Msg: append(json.RawMessage(nil), rec.Msg...)})
	})
	if err != nil {
		return frames, bad, fmt.Errorf("acp: read traffic log: %w", err)
	}
	return frames, bad, nil
}

// rawPrefix cuts raw input to the 512 bytes a Dropped keeps, on a UTF-8
// boundary.
func rawPrefix(b []byte) string {
	const max = 512
	if len(b) <= max {
		return string(b)
	}
	n := max
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n])
}

func dropped(t int64, kind string, reason agent.DropReason, detail string, raw []byte) *agent.DroppedInput {
	return &agent.DroppedInput{
		EventBase: agent.EventBase{Time: t},
		Dropped:   agent.Dropped{Source: Source, Kind: kind, Reason: reason, Detail: detail, Raw: rawPrefix(raw)},
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
	o, err := mapper.DecodeObject(b)
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
