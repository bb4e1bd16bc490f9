package jsonrpc

// The frame decoder as it was before the one-pass scan (frame_scan.go):
// the reference the new path is compared with, frame by frame, on every
// recorded capture and under fuzzing (frame_scan_test.go).

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// DecodeFrame decodes one line of line-delimited JSON-RPC 2.0, parsing it
// once. The "jsonrpc" member is optional (Codex omits it) but, when
// present, must be "2.0"; member names are matched exactly. Batches
// (arrays) are refused: none of the agents we speak to sends them. Errors
// are *FrameError values (wrapping ErrBadFrame) with the drop reason:
// unparseable_json, not_an_object, invalid_field (a member of the wrong
// type, both result and error, a bad id) or missing_id (a response whose
// id is absent or null, which can never be matched to a call). DecodeFrame
// never panics, whatever the input.
func refDecodeFrame(data []byte) (Message, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Message{}, frameErr(agent.DropUnparseableJSON, "", "empty frame")
	}
	if data[0] != '{' {
		if jsonlex.Valid(data) {
			return Message{}, frameErr(agent.DropNotAnObject, "", "frame is JSON but not an object")
		}
		return Message{}, frameErr(agent.DropUnparseableJSON, "", "frame is not JSON")
	}
	// One validating scan, then a structural split: the members are
	// sub-slices of data, which the message keeps anyway (Raw).
	if !jsonlex.Valid(data) {
		var members map[string]json.RawMessage
		err := json.Unmarshal(data, &members) // for its message
		return Message{}, frameErr(agent.DropUnparseableJSON, "", "%v", err)
	}
	version, method, rawID, params, result, rawErr, members, split := refSplitFrame(data)
	if !split {
		// A member name with an escape: names decoded the long way.
		var err error
		if members, err = jsonlex.ObjectMap(data); err != nil {
			return Message{}, frameErr(agent.DropUnparseableJSON, "", "%v", err)
		}
		version, method, rawID = members["jsonrpc"], members["method"], members["id"]
		params, result, rawErr = members["params"], members["result"], members["error"]
		for _, k := range [...]string{"jsonrpc", "method", "id", "params", "result", "error"} {
			delete(members, k)
		}
	}
	m := Message{Raw: json.RawMessage(data)}
	if len(members) > 0 {
		m.Extra = members
	}
	if version != nil {
		if v, ok := jsonlex.StringOf(version); !ok || v != "2.0" {
			return Message{}, frameErr(agent.DropInvalidField, "", "jsonrpc member is %s, want \"2.0\"", cut(version))
		}
		m.Version = true
	}
	hasID := rawID != nil && string(rawID) != "null"
	if hasID {
		id, err := decodeID(rawID)
		if err != nil {
			return Message{}, frameErr(agent.DropInvalidField, methodOf(method), "%v", err)
		}
		m.ID = id
	}
	if method != nil {
		return m.request(method, params, result, rawErr, hasID)
	}
	return m.response(result, rawErr, hasID)
}

// splitFrame reads the members of a valid frame object in one pass, as
// jsonlex.ObjectMap would (exact names, the last of a repeated name wins):
// the six JSON-RPC members, and the others in extra (nil when there are
// none). ok is false when a member name has an escape or is not UTF-8
// (left to ObjectMap, which decodes names).
func refSplitFrame(data []byte) (version, method, id, params, result, rawErr json.RawMessage, extra map[string]json.RawMessage, ok bool) {
	escaped := false
	_ = jsonlex.Members(data, func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			escaped = true
			return false
		}
		switch string(name) {
		case "jsonrpc":
			version = v
		case "method":
			method = v
		case "id":
			id = v
		case "params":
			params = v
		case "result":
			result = v
		case "error":
			rawErr = v
		default:
			if extra == nil {
				extra = map[string]json.RawMessage{}
			}
			extra[string(name)] = v
		}
		return true
	})
	return version, method, id, params, result, rawErr, extra, !escaped
}
