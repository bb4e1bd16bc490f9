package mapper

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// BusEvent is one event the reducer publishes (closed union). The names and
// the JSON shapes, {"type": EventType(), "properties": {…}}, are seed 001's
// SSE events. Every event but MessagePartDelta is a state event: a bus
// delivers it to every subscriber, in order, never dropped. A
// MessagePartDelta only speeds up what the next state event of its part
// (or message) shows anyway, so a bus may coalesce or drop it.
//
// Values held by an event (parts, message infos, sessions) are snapshots:
// the reducer never changes them after publishing, and subscribers must
// not change them either.
type BusEvent interface {
	// EventType is the seed-001 name, e.g. "message.part.updated".
	EventType() string
	// MayDrop reports whether a bus may coalesce or drop the event under
	// backpressure (true only for message.part.delta).
	MayDrop() bool
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

// MessageRemoved is "message.removed".
type MessageRemoved struct{ SessionID, MessageID string }

// MessagePartUpdated is "message.part.updated": a part was created or
// changed (a tool's every state transition, a final text, …). Part is the
// whole part.
type MessagePartUpdated struct{ Part Part }

// MessagePartDelta is "message.part.delta": Delta was appended to the
// string field Field ("text", or "state.raw" of a pending tool) of a part.
// A bus may coalesce or drop it.
type MessagePartDelta struct {
	SessionID string
	MessageID string
	PartID    string
	Field     string
	Delta     string
}

// MessagePartRemoved is "message.part.removed".
type MessagePartRemoved struct{ SessionID, MessageID, PartID string }

// TodoUpdated is "todo.updated": the session's todo list was replaced.
type TodoUpdated struct {
	SessionID string
	Todos     []agent.Todo
}

// FileEdited is "file.edited": the agent changed a file on disk. File is
// the path as the agent reported it.
type FileEdited struct{ File string }

// Bus event names (seed 001).
const (
	EvSessionCreated     = "session.created"
	EvSessionUpdated     = "session.updated"
	EvSessionStatus      = "session.status"
	EvSessionError       = "session.error"
	EvSessionCompacted   = "session.compacted"
	EvMessageUpdated     = "message.updated"
	EvMessageRemoved     = "message.removed"
	EvMessagePartUpdated = "message.part.updated"
	EvMessagePartDelta   = "message.part.delta"
	EvMessagePartRemoved = "message.part.removed"
	EvTodoUpdated        = "todo.updated"
	EvFileEdited         = "file.edited"
)

// EventType implementations.
func (*SessionCreated) EventType() string     { return EvSessionCreated }
func (*SessionUpdated) EventType() string     { return EvSessionUpdated }
func (*SessionStatus) EventType() string      { return EvSessionStatus }
func (*SessionError) EventType() string       { return EvSessionError }
func (*SessionCompacted) EventType() string   { return EvSessionCompacted }
func (*MessageUpdated) EventType() string     { return EvMessageUpdated }
func (*MessageRemoved) EventType() string     { return EvMessageRemoved }
func (*MessagePartUpdated) EventType() string { return EvMessagePartUpdated }
func (*MessagePartDelta) EventType() string   { return EvMessagePartDelta }
func (*MessagePartRemoved) EventType() string { return EvMessagePartRemoved }
func (*TodoUpdated) EventType() string        { return EvTodoUpdated }
func (*FileEdited) EventType() string         { return EvFileEdited }

// MayDrop implementations: only a delta may be dropped.
func (*SessionCreated) MayDrop() bool     { return false }
func (*SessionUpdated) MayDrop() bool     { return false }
func (*SessionStatus) MayDrop() bool      { return false }
func (*SessionError) MayDrop() bool       { return false }
func (*SessionCompacted) MayDrop() bool   { return false }
func (*MessageUpdated) MayDrop() bool     { return false }
func (*MessageRemoved) MayDrop() bool     { return false }
func (*MessagePartUpdated) MayDrop() bool { return false }
func (*MessagePartDelta) MayDrop() bool   { return true }
func (*MessagePartRemoved) MayDrop() bool { return false }
func (*TodoUpdated) MayDrop() bool        { return false }
func (*FileEdited) MayDrop() bool         { return false }

func (*SessionCreated) isBusEvent()     {}
func (*SessionUpdated) isBusEvent()     {}
func (*SessionStatus) isBusEvent()      {}
func (*SessionError) isBusEvent()       {}
func (*SessionCompacted) isBusEvent()   {}
func (*MessageUpdated) isBusEvent()     {}
func (*MessageRemoved) isBusEvent()     {}
func (*MessagePartUpdated) isBusEvent() {}
func (*MessagePartDelta) isBusEvent()   {}
func (*MessagePartRemoved) isBusEvent() {}
func (*TodoUpdated) isBusEvent()        {}
func (*FileEdited) isBusEvent()         {}

// EncodeBusEvent writes a bus event as seed 001's SSE payload,
// {"type":"message.part.updated","properties":{"part":{…}}}, with parts and
// messages in the transcript codec's canonical form. It fails when a part
// or message is invalid (the codec's error) or the event is nil.
func EncodeBusEvent(ev BusEvent) ([]byte, error) {
	var props any
	switch e := ev.(type) {
	case *SessionCreated:
		if e == nil {
			break
		}
		props = struct {
			Info Session `json:"info"`
		}{e.Info}
	case *SessionUpdated:
		if e == nil {
			break
		}
		props = struct {
			Info Session `json:"info"`
		}{e.Info}
	case *SessionStatus:
		if e == nil {
			break
		}
		props = struct {
			SessionID string            `json:"sessionID"`
			Status    SessionStatusInfo `json:"status"`
		}{e.SessionID, e.Status}
	case *SessionError:
		if e == nil {
			break
		}
		props = struct {
			SessionID string             `json:"sessionID"`
			Error     agent.MessageError `json:"error"`
		}{e.SessionID, e.Error}
	case *SessionCompacted:
		if e == nil {
			break
		}
		props = struct {
			SessionID string `json:"sessionID"`
		}{e.SessionID}
	case *MessageUpdated:
		if e == nil {
			break
		}
		raw, err := EncodeMessage(e.Info)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
		}
		props = struct {
			Info json.RawMessage `json:"info"`
		}{raw}
	case *MessageRemoved:
		if e == nil {
			break
		}
		props = struct {
			SessionID string `json:"sessionID"`
			MessageID string `json:"messageID"`
		}{e.SessionID, e.MessageID}
	case *MessagePartUpdated:
		if e == nil {
			break
		}
		raw, err := EncodePart(e.Part)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", e.EventType(), err)
		}
		props = struct {
			Part json.RawMessage `json:"part"`
		}{raw}
	case *MessagePartDelta:
		if e == nil {
			break
		}
		props = struct {
			SessionID string `json:"sessionID"`
			MessageID string `json:"messageID"`
			PartID    string `json:"partID"`
			Field     string `json:"field"`
			Delta     string `json:"delta"`
		}{e.SessionID, e.MessageID, e.PartID, e.Field, e.Delta}
	case *MessagePartRemoved:
		if e == nil {
			break
		}
		props = struct {
			SessionID string `json:"sessionID"`
			MessageID string `json:"messageID"`
			PartID    string `json:"partID"`
		}{e.SessionID, e.MessageID, e.PartID}
	case *TodoUpdated:
		if e == nil {
			break
		}
		todos := e.Todos
		if todos == nil {
			todos = []agent.Todo{}
		}
		props = struct {
			SessionID string       `json:"sessionID"`
			Todos     []agent.Todo `json:"todos"`
		}{e.SessionID, todos}
	case *FileEdited:
		if e == nil {
			break
		}
		props = struct {
			File string `json:"file"`
		}{e.File}
	}
	if props == nil {
		return nil, fmt.Errorf("encode bus event %T: %w", ev, ErrInvalid)
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
