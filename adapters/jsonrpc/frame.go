package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// Kind says what a JSON-RPC message is.
type Kind uint8

// Message kinds. A request carries a method and an id, a notification a
// method and no id (or a null id), a response an id and exactly one of
// result and error.
const (
	KindRequest Kind = iota + 1
	KindNotification
	KindResponse
)

// String names the kind ("request", "notification", "response").
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// ID is a JSON-RPC request id: a non-negative integer or a string.
type ID struct {
	Num      uint64
	Str      string
	IsString bool
}

// String renders the id as it appears on the wire: 7 or "abc" (quoted).
func (id ID) String() string {
	if id.IsString {
		return strconv.Quote(id.Str)
	}
	return strconv.FormatUint(id.Num, 10)
}

// MarshalJSON writes the id as a JSON number or string.
func (id ID) MarshalJSON() ([]byte, error) {
	if id.IsString {
		return json.Marshal(id.Str)
	}
	return []byte(strconv.FormatUint(id.Num, 10)), nil
}

// ErrorObject is the error member of a response: {code, message, data?}.
type ErrorObject struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Message is one decoded frame. Params, Result and Data keep the raw JSON of
// the wire; Raw is the whole frame. A frame is decoded once, on its way in
// (or built from what was sent, on its way out): the adapters read these
// fields and never parse Raw again.
type Message struct {
	Kind    Kind
	Version bool // the frame carried "jsonrpc":"2.0"
	// emitted is the value of the top-level "emittedAtMs" member, a
	// sub-slice of Raw, nil when absent (see EmittedAtMs).
	emitted json.RawMessage
	Method  string          // requests and notifications
	ID      ID              // requests and responses
	Params  json.RawMessage // nil when absent
	Result  json.RawMessage // responses without error; "null" is kept as null
	Error   *ErrorObject    // error responses
	// Extra holds the top-level members JSON-RPC does not define other
	// than emittedAtMs; nil when there are none (the usual case: no map is
	// built per frame).
	Extra map[string]json.RawMessage
	Raw   json.RawMessage
}

// EmittedAtMs returns the raw value of the frame's top-level "emittedAtMs"
// member, which Codex stamps its notifications with (Unix ms as the peer
// wrote it, unchecked: any JSON value), or nil when the frame has none. It
// is a sub-slice of Raw.
func (m *Message) EmittedAtMs() json.RawMessage { return m.emitted }

// ErrBadFrame is wrapped by every *FrameError.
var ErrBadFrame = errors.New("bad json-rpc frame")

// FrameError refuses one frame: the drop reason a reader counts it under
// and what is wrong.
type FrameError struct {
	Reason agent.DropReason
	Kind   string // the method of the frame, when it had one
	Msg    string
}

// Error renders "json-rpc frame: <reason>: <msg>".
func (e *FrameError) Error() string { return "json-rpc frame: " + string(e.Reason) + ": " + e.Msg }

// Unwrap returns ErrBadFrame.
func (e *FrameError) Unwrap() error { return ErrBadFrame }

// DropOf reads a decode error as a drop: the kind, reason and detail a
// *FrameError carries (found with errors.As, so a wrapped one counts too);
// any other error is invalid_field with its text.
func DropOf(err error) (kind string, reason agent.DropReason, detail string) {
	var fe *FrameError
	if errors.As(err, &fe) {
		return fe.Kind, fe.Reason, fe.Msg
	}
	return "", agent.DropInvalidField, err.Error()
}

func frameErr(reason agent.DropReason, kind, format string, args ...any) *FrameError {
	return &FrameError{Reason: reason, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// DecodeFrame decodes one line of line-delimited JSON-RPC 2.0. The
// "jsonrpc" member is optional (Codex omits it) but, when
// present, must be "2.0"; member names are matched exactly. Batches
// (arrays) are refused: none of the agents we speak to sends them. Errors
// are *FrameError values (wrapping ErrBadFrame) with the drop reason:
// unparseable_json, not_an_object, invalid_field (a member of the wrong
// type, both result and error, a bad id) or missing_id (a response whose
// id is absent or null, which can never be matched to a call). DecodeFrame
// never panics, whatever the input.
//
// A valid frame costs two scans (jsonlex.Valid, then the split of its
// members by structure) and no allocation beyond the method name, a
// string id and an error object; Extra is built only for a frame with a
// member JSON-RPC does not define other than emittedAtMs.
func DecodeFrame(data []byte) (Message, error) {
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
	if !jsonlex.Valid(data) {
		var members map[string]json.RawMessage
		err := json.Unmarshal(data, &members) // for its message
		return Message{}, frameErr(agent.DropUnparseableJSON, "", "%v", err)
	}
	// The members, split by structure (data is valid): sub-slices of data,
	// which the message keeps anyway (Raw). A repeated name keeps its last
	// value, as json.Unmarshal into a map does.
	m := Message{Raw: json.RawMessage(data)}
	var version, method, id, params, result, rawErr json.RawMessage
	var kerr error
	_ = jsonlex.Members(data, func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			s, err := jsonlex.Unquote(k)
			if err != nil {
				kerr = err
				return false
			}
			name = []byte(s)
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
		case "emittedAtMs":
			m.emitted = v
		default:
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[string(name)] = v
		}
		return true
	})
	if kerr != nil {
		return Message{}, frameErr(agent.DropUnparseableJSON, "", "%v", kerr)
	}
	if version != nil {
		if v, ok := jsonlex.StringOf(version); !ok || v != "2.0" {
			return Message{}, frameErr(agent.DropInvalidField, "", "jsonrpc member is %s, want \"2.0\"", cut(version))
		}
		m.Version = true
	}
	hasID := id != nil && string(id) != "null"
	if hasID {
		id, err := decodeID(id)
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

// request completes a frame with a method: a request or a notification.
func (m Message) request(method, params, result, rawErr json.RawMessage, hasID bool) (Message, error) {
	var ok bool
	if m.Method, ok = jsonlex.StringOf(method); !ok || m.Method == "" {
		return Message{}, frameErr(agent.DropInvalidField, "", "method is %s, want a non-empty string", cut(method))
	}
	if result != nil || rawErr != nil {
		return Message{}, frameErr(agent.DropInvalidField, m.Method, "a request must not carry result or error")
	}
	if params != nil && string(params) != "null" && params[0] != '{' && params[0] != '[' {
		return Message{}, frameErr(agent.DropInvalidField, m.Method, "params is %s, want an object or array", cut(params))
	}
	m.Params = params
	m.Kind = KindNotification
	if hasID {
		m.Kind = KindRequest
	}
	return m, nil
}

// response completes a frame without a method: a response.
func (m Message) response(result, rawErr json.RawMessage, hasID bool) (Message, error) {
	switch {
	case result != nil && rawErr != nil && string(rawErr) != "null":
		return Message{}, frameErr(agent.DropInvalidField, "", "response carries both result and error")
	case rawErr != nil && string(rawErr) != "null":
		var e ErrorObject
		if err := json.Unmarshal(rawErr, &e); err != nil || rawErr[0] != '{' {
			return Message{}, frameErr(agent.DropInvalidField, "", "error is %s, want {code, message}", cut(rawErr))
		}
		m.Error = &e
	case result != nil:
		m.Result = result
	default:
		return Message{}, frameErr(agent.DropInvalidField, "", "neither method nor result nor error")
	}
	if !hasID {
		detail := "response without id"
		if m.Error != nil {
			detail += ": " + m.Error.Message
		}
		return Message{}, frameErr(agent.DropMissingID, "", "%s", detail)
	}
	m.Kind = KindResponse
	return m, nil
}

func methodOf(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// ParseID reads a JSON-RPC id written as raw JSON (a request id quoted in
// a params object, such as $/cancel_request's requestId); ok is false for
// anything but a non-negative integer or a string.
func ParseID(raw json.RawMessage) (id ID, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ID{}, false
	}
	id, err := decodeID(raw)
	return id, err == nil
}

// decodeID accepts a non-negative integer that fits in 63 bits (so it
// survives any peer's signed arithmetic) or a string.
func decodeID(raw json.RawMessage) (ID, error) {
	switch raw[0] {
	case '"':
		s, err := jsonlex.Unquote(raw)
		if err != nil || !jsonlex.Valid(raw) {
			return ID{}, fmt.Errorf("id is %s: not a valid string", cut(raw))
		}
		return ID{Str: s, IsString: true}, nil
	default:
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n < 0 {
			return ID{}, fmt.Errorf("id is %s, want a non-negative integer or a string", cut(raw))
		}
		return ID{Num: uint64(n)}, nil
	}
}

// cut shortens raw JSON for an error message.
func cut(b []byte) string {
	const max = 40
	if len(b) <= max {
		return string(b)
	}
	return agent.CutUTF8(string(b), max) + "…"
}

// setParams marshals params into m.Params; nil params leave the member
// out.
func (m *Message) setParams(params any) error {
	if params == nil {
		return nil
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("encode params: %w", err)
	}
	m.Params = raw
	return nil
}

// encode writes an outgoing message as one line of JSON, byte for byte as
// happy has always written them (recorded traffic logs keep these bytes):
// requests and notifications with their members in alphabetical order,
// {"id","jsonrpc","method","params"}; responses as
// {"id","result"|"error","jsonrpc"}, or without the version {"id","result"}
// and {"error","id"}.
func encode(m *Message) []byte {
	var b bytes.Buffer
	id, _ := m.ID.MarshalJSON()
	b.WriteByte('{')
	if m.Kind != KindResponse {
		if m.Kind == KindRequest {
			b.WriteString(`"id":`)
			b.Write(id)
			b.WriteByte(',')
		}
		if m.Version {
			b.WriteString(`"jsonrpc":"2.0",`)
		}
		method, _ := json.Marshal(m.Method)
		b.WriteString(`"method":`)
		b.Write(method)
		if m.Params != nil {
			b.WriteString(`,"params":`)
			b.Write(m.Params)
		}
		b.WriteByte('}')
		return b.Bytes()
	}
	member := append([]byte(`"result":`), m.Result...)
	if m.Error != nil {
		e, _ := json.Marshal(m.Error)
		member = append([]byte(`"error":`), e...)
	}
	if !m.Version && m.Error != nil {
		b.Write(member)
		b.WriteString(`,"id":`)
		b.Write(id)
		b.WriteByte('}')
		return b.Bytes()
	}
	b.WriteString(`"id":`)
	b.Write(id)
	b.WriteByte(',')
	b.Write(member)
	if m.Version {
		b.WriteString(`,"jsonrpc":"2.0"`)
	}
	b.WriteByte('}')
	return b.Bytes()
}
