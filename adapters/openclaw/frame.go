package openclaw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// Frame is one WebSocket text message of the gateway protocol
// (packages/gateway-protocol/src/schema/frames.ts of the openclaw package):
//
//	request   {type:"req", id, method, params?}
//	response  {type:"res", id, ok, payload?, error?: {code, message, details?, retryable?, retryAfterMs?}}
//	event     {type:"event", event, payload?, seq?, stateVersion?}
//
// Members this version does not read are ignored. Seq is the per-connection
// sequence number of an event (nil when the gateway gave none).
type Frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	OK      *bool           `json:"ok,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Error   *ErrorShape     `json:"error,omitempty"`
	Event   string          `json:"event,omitempty"`
	Seq     *int64          `json:"seq,omitempty"`
}

// ErrorShape is the error of a failed response: a code such as
// "INVALID_REQUEST", "UNAVAILABLE" or "NOT_PAIRED", and a message.
type ErrorShape struct {
	Code         string `json:"code"`
	Message      string `json:"message"`
	Retryable    bool   `json:"retryable,omitempty"`
	RetryAfterMs int64  `json:"retryAfterMs,omitempty"`
}

// Frame types.
const (
	TypeReq   = "req"
	TypeRes   = "res"
	TypeEvent = "event"
)

// FrameError says why bytes are not a gateway frame; Reason is the drop
// reason a decoder records.
type FrameError struct {
	Reason agent.DropReason
	Detail string
}

// Error renders "openclaw frame: <reason>: <detail>".
func (e *FrameError) Error() string { return fmt.Sprintf("openclaw frame: %s: %s", e.Reason, e.Detail) }

// ErrFrame is wrapped by every *FrameError.
var ErrFrame = errors.New("not a gateway frame")

// Unwrap returns ErrFrame.
func (e *FrameError) Unwrap() error { return ErrFrame }

// DecodeFrame parses one gateway message. Errors are *FrameError:
// unparseable_json (not JSON), not_an_object, unknown_type (a type other
// than req, res, event), missing_id (a request or response without id, an
// event without name, a request without method), invalid_field (a member
// of the wrong JSON type, a response without ok, a negative seq).
func DecodeFrame(data []byte) (Frame, error) {
	t := bytes.TrimSpace(data)
	if !json.Valid(t) {
		return Frame{}, &FrameError{Reason: agent.DropUnparseableJSON, Detail: "not JSON"}
	}
	if len(t) == 0 || t[0] != '{' {
		return Frame{}, &FrameError{Reason: agent.DropNotAnObject, Detail: "a JSON value that is not an object"}
	}
	var f Frame
	if err := json.Unmarshal(t, &f); err != nil {
		return Frame{}, &FrameError{Reason: agent.DropInvalidField, Detail: err.Error()}
	}
	switch f.Type {
	case TypeReq:
		if f.ID == "" {
			return Frame{}, &FrameError{Reason: agent.DropMissingID, Detail: "request without id"}
		}
		if f.Method == "" {
			return Frame{}, &FrameError{Reason: agent.DropMissingID, Detail: "request without method"}
		}
	case TypeRes:
		if f.ID == "" {
			return Frame{}, &FrameError{Reason: agent.DropMissingID, Detail: "response without id"}
		}
		if f.OK == nil {
			return Frame{}, &FrameError{Reason: agent.DropInvalidField, Detail: "response without ok"}
		}
	case TypeEvent:
		if f.Event == "" {
			return Frame{}, &FrameError{Reason: agent.DropMissingID, Detail: "event without name"}
		}
		if f.Seq != nil && *f.Seq < 0 {
			return Frame{}, &FrameError{Reason: agent.DropInvalidField, Detail: "negative seq"}
		}
	case "":
		return Frame{}, &FrameError{Reason: agent.DropMissingID, Detail: "frame without type"}
	default:
		return Frame{}, &FrameError{Reason: agent.DropUnknownType, Detail: fmt.Sprintf("frame type %q", f.Type)}
	}
	return f, nil
}

// Succeeded reports whether a response frame says ok.
func (f Frame) Succeeded() bool { return f.OK != nil && *f.OK }
