package mapper

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// BusEvent is one change the reducer reports (closed union): Reducer.Apply
// returns the changes each agent event made, in order. The names, and the
// JSON shapes {"type": EventType(), "properties": {…}} the golden tests
// pin (testdata/reducer/*/bus.jsonl), are seed 001's SSE events, so a live
// stream forwards them as they are. Every change but MessagePartDelta is
// a state change, to be delivered to every watcher in order; a
// MessagePartDelta only speeds up what the next change of its part (or
// message) shows anyway, so a stream under backpressure may coalesce or
// drop it.
//
// Values held by an event (parts, message infos, sessions) are snapshots:
// the reducer never changes them after returning them, and consumers must
// not change them either.
type BusEvent interface {
	// EventType is the seed-001 name, e.g. "message.part.updated".
	EventType() string
	isBusEvent()
}

// SessionStatusType is the state of a session in session.status.
type SessionStatusType string

// Session states.
const (
	SessionIdle  SessionStatusType = "idle"  // no turn running
	SessionBusy  SessionStatusType = "busy"  // a turn is running
	SessionRetry SessionStatusType = "retry" // a provider call is being retried
)

// SessionStatusInfo is the status of session.status:
// {"type":"retry","attempt":2,"message":"overloaded"}; Attempt and Message
// only for retry.
type SessionStatusInfo struct {
	Type    SessionStatusType `json:"type"`
	Attempt int               `json:"attempt,omitempty"`
	Message string            `json:"message,omitempty"`
}

// SessionCreated is "session.created": a root or child session exists.
type SessionCreated struct{ Info Session }

// SessionUpdated is "session.updated": title, directory or summary changed.
type SessionUpdated struct{ Info Session }

// SessionStatus is "session.status": the session became idle, busy or
// is retrying.
type SessionStatus struct {
	SessionID string
	Status    SessionStatusInfo
}

// SessionError is "session.error": the current step of the session failed
// (the assistant message carries the same error).
type SessionError struct {
	SessionID string
	Error     agent.MessageError
}

// SessionCompacted is "session.compacted": the agent compacted its context.
type SessionCompacted struct{ SessionID string }

// MessageUpdated is "message.updated": a message was created or its info
// changed (finish, tokens, cost, error, time.completed).
type MessageUpdated struct{ Info Message }

// MessagePartUpdated is "message.part.updated": a part was created or
// changed (a tool's every state transition, a final text, …). Part is the
// whole part.
type MessagePartUpdated struct{ Part Part }

// MessagePartDelta is "message.part.delta": Delta was appended to the
// string field Field ("text", or "state.raw" of a pending tool) of a part.
// A stream may coalesce or drop it (see BusEvent).
type MessagePartDelta struct {
	SessionID string
	MessageID string
	PartID    string
	Field     string
	Delta     string
}

// TodoUpdated is "todo.updated": the session's todo list was replaced.
type TodoUpdated struct {
	SessionID string
	Todos     []agent.Todo
}

// Change event names (seed 001).
const (
	EvSessionCreated     = "session.created"
	EvSessionUpdated     = "session.updated"
	EvSessionStatus      = "session.status"
	EvSessionError       = "session.error"
	EvSessionCompacted   = "session.compacted"
	EvMessageUpdated     = "message.updated"
	EvMessagePartUpdated = "message.part.updated"
	EvMessagePartDelta   = "message.part.delta"
	EvTodoUpdated        = "todo.updated"
)

// EventType implementations.
func (*SessionCreated) EventType() string     { return EvSessionCreated }
func (*SessionUpdated) EventType() string     { return EvSessionUpdated }
func (*SessionStatus) EventType() string      { return EvSessionStatus }
func (*SessionError) EventType() string       { return EvSessionError }
func (*SessionCompacted) EventType() string   { return EvSessionCompacted }
func (*MessageUpdated) EventType() string     { return EvMessageUpdated }
func (*MessagePartUpdated) EventType() string { return EvMessagePartUpdated }
func (*MessagePartDelta) EventType() string   { return EvMessagePartDelta }
func (*TodoUpdated) EventType() string        { return EvTodoUpdated }

func (*SessionCreated) isBusEvent()     {}
func (*SessionUpdated) isBusEvent()     {}
func (*SessionStatus) isBusEvent()      {}
func (*SessionError) isBusEvent()       {}
func (*SessionCompacted) isBusEvent()   {}
func (*MessageUpdated) isBusEvent()     {}
func (*MessagePartUpdated) isBusEvent() {}
func (*MessagePartDelta) isBusEvent()   {}
func (*TodoUpdated) isBusEvent()        {}

// EncodeChange writes a change event as seed 001's SSE payload,
// {"type":"message.part.updated","properties":{"part":{…}}}, with parts and
// messages in the codec's canonical form: the lines of the golden
// bus.jsonl files and the data of the local event API's frames
// (docs/ARCHITECTURE.md, section "Local event API"). It fails (wrapping
// ErrInvalid) when a part or message does not encode or ev is not one of
// this package's changes.
func EncodeChange(ev BusEvent) ([]byte, error) {
	var props any
	switch e := ev.(type) {
	case *SessionCreated:
		props = struct {
			Info Session `json:"info"`
		}{e.Info}
	case *SessionUpdated:
		props = struct {
			Info Session `json:"info"`
		}{e.Info}
	case *SessionStatus:
		props = struct {
			SessionID string            `json:"sessionID"`
			Status    SessionStatusInfo `json:"status"`
		}{e.SessionID, e.Status}
	case *SessionError:
		props = struct {
			SessionID string             `json:"sessionID"`
			Error     agent.MessageError `json:"error"`
		}{e.SessionID, e.Error}
	case *SessionCompacted:
		props = struct {
			SessionID string `json:"sessionID"`
		}{e.SessionID}
	case *MessageUpdated:
		raw, err := EncodeMessage(e.Info)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
		}
		props = struct {
			Info json.RawMessage `json:"info"`
		}{raw}
	case *MessagePartUpdated:
		raw, err := EncodePart(e.Part)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
		}
		props = struct {
			Part json.RawMessage `json:"part"`
		}{raw}
	case *MessagePartDelta:
		props = struct {
			SessionID string `json:"sessionID"`
			MessageID string `json:"messageID"`
			PartID    string `json:"partID"`
			Field     string `json:"field"`
			Delta     string `json:"delta"`
		}{e.SessionID, e.MessageID, e.PartID, e.Field, e.Delta}
	case *TodoUpdated:
		todos := e.Todos
		if todos == nil {
			todos = []agent.Todo{}
		}
		props = struct {
			SessionID string       `json:"sessionID"`
			Todos     []agent.Todo `json:"todos"`
		}{e.SessionID, todos}
	default:
		return nil, fmt.Errorf("encode change %T: %w", ev, ErrInvalid)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(struct {
		Type       string `json:"type"`
		Properties any    `json:"properties"`
	}{ev.EventType(), props})
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ev.EventType(), err)
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}
