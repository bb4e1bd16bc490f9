package localapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// ErrBadChange wraps every refusal of DecodeChange and PublishEncoded.
var ErrBadChange = errors.New("localapi: bad change")

// Change is one decoded frame of another event API's stream: a reducer
// change (Event set) or a removal (Removed set).
type Change struct {
	// Event is the change, for every name but the two removals.
	Event mapper.BusEvent
	// Removed is message.removed or message.part.removed.
	Removed *Removal
}

// Removal is message.removed {sessionID, messageID} or
// message.part.removed {sessionID, messageID, partID} (PartID "" for a
// message).
type Removal struct {
	SessionID, MessageID, PartID string
}

// DecodeChange reads one frame of GET /event: event is the SSE event line
// (it alone names the change, seed 002's rule) and data the data line,
// {"type": event, "properties": {…}} as mapper.EncodeChange and the hub's
// removals write it. Parts and messages go through mapper's decoders, so
// what is accepted is what the canonical codec accepts. Errors wrap
// ErrBadChange and say what is wrong: an unknown event name, data that is
// not that JSON object, a "type" other than event, a missing id, an
// invalid part or message.
func DecodeChange(event string, data []byte) (Change, error) {
	bad := func(format string, a ...any) (Change, error) {
		return Change{}, fmt.Errorf("%w: %s: %s", ErrBadChange, event, fmt.Sprintf(format, a...))
	}
	if !utf8.Valid(data) {
		return bad("data is not UTF-8")
	}
	var env struct {
		Type       *string         `json:"type"`
		Properties json.RawMessage `json:"properties"`
	}
	if err := strictJSON(data, &env); err != nil {
		return bad("data is not {\"type\",\"properties\"}: %v", err)
	}
	if env.Type == nil || *env.Type != event {
		got := "none"
		if env.Type != nil {
			got = fmt.Sprintf("%q", *env.Type)
		}
		return bad("data type %s differs from the event name", got)
	}
	p := env.Properties
	if len(bytes.TrimSpace(p)) == 0 || p[0] != '{' {
		return bad("properties is not an object")
	}
	need := func(what string, vs ...string) error {
		for _, v := range vs {
			if v == "" {
				return fmt.Errorf("%w: %s: %s missing", ErrBadChange, event, what)
			}
		}
		return nil
	}
	type ids struct {
		SessionID string `json:"sessionID"`
		MessageID string `json:"messageID"`
		PartID    string `json:"partID"`
	}
	var ev mapper.BusEvent
	var err error
	switch event {
	case mapper.EvSessionCreated, mapper.EvSessionUpdated:
		var v struct {
			Info *mapper.Session `json:"info"`
		}
		if err = strictJSON(p, &v); err != nil || v.Info == nil {
			return bad("info is not a session: %v", err)
		}
		if err = need("info.id", v.Info.ID); err != nil {
			return Change{}, err
		}
		if event == mapper.EvSessionCreated {
			ev = &mapper.SessionCreated{Info: *v.Info}
		} else {
			ev = &mapper.SessionUpdated{Info: *v.Info}
		}
	case mapper.EvSessionStatus:
		var v struct {
			SessionID string                    `json:"sessionID"`
			Status    *mapper.SessionStatusInfo `json:"status"`
		}
		if err = strictJSON(p, &v); err != nil || v.Status == nil {
			return bad("not {sessionID, status}: %v", err)
		}
		if err = need("sessionID, status.type", v.SessionID, string(v.Status.Type)); err != nil {
			return Change{}, err
		}
		ev = &mapper.SessionStatus{SessionID: v.SessionID, Status: *v.Status}
	case mapper.EvSessionError:
		var v struct {
			SessionID string              `json:"sessionID"`
			Error     *agent.MessageError `json:"error"`
		}
		if err = strictJSON(p, &v); err != nil || v.Error == nil {
			return bad("not {sessionID, error}: %v", err)
		}
		if err = need("sessionID", v.SessionID); err != nil {
			return Change{}, err
		}
		ev = &mapper.SessionError{SessionID: v.SessionID, Error: *v.Error}
	case mapper.EvSessionCompacted:
		var v ids
		if err = strictJSON(p, &v); err != nil {
			return bad("not {sessionID}: %v", err)
		}
		if err = need("sessionID", v.SessionID); err != nil {
			return Change{}, err
		}
		ev = &mapper.SessionCompacted{SessionID: v.SessionID}
	case mapper.EvMessageUpdated:
		var v struct {
			Info json.RawMessage `json:"info"`
		}
		if err = strictJSON(p, &v); err != nil {
			return bad("not {info}: %v", err)
		}
		m, err := mapper.DecodeMessage(v.Info)
		if err != nil {
			return bad("info: %v", err)
		}
		ev = &mapper.MessageUpdated{Info: m}
	case mapper.EvMessagePartUpdated:
		var v struct {
			Part json.RawMessage `json:"part"`
		}
		if err = strictJSON(p, &v); err != nil {
			return bad("not {part}: %v", err)
		}
		part, err := mapper.DecodePart(v.Part)
		if err != nil {
			return bad("part: %v", err)
		}
		b := part.Base()
		if err = need("part.sessionID, part.messageID, part.id", b.SessionID, b.MessageID, b.ID); err != nil {
			return Change{}, err
		}
		ev = &mapper.MessagePartUpdated{Part: part}
	case mapper.EvMessagePartDelta:
		var v struct {
			ids
			Field string  `json:"field"`
			Delta *string `json:"delta"`
		}
		if err = strictJSON(p, &v); err != nil || v.Delta == nil {
			return bad("not {sessionID, messageID, partID, field, delta}: %v", err)
		}
		if err = need("sessionID, messageID, partID, field", v.SessionID, v.MessageID, v.PartID, v.Field); err != nil {
			return Change{}, err
		}
		ev = &mapper.MessagePartDelta{SessionID: v.SessionID, MessageID: v.MessageID, PartID: v.PartID, Field: v.Field, Delta: *v.Delta}
	case mapper.EvTodoUpdated:
		var v struct {
			SessionID string       `json:"sessionID"`
			Todos     []agent.Todo `json:"todos"`
		}
		if err = strictJSON(p, &v); err != nil {
			return bad("not {sessionID, todos}: %v", err)
		}
		if err = need("sessionID", v.SessionID); err != nil {
			return Change{}, err
		}
		ev = &mapper.TodoUpdated{SessionID: v.SessionID, Todos: v.Todos}
	case EvMessageRemoved, EvMessagePartRemoved:
		var v ids
		if err = strictJSON(p, &v); err != nil {
			return bad("not {sessionID, messageID, partID?}: %v", err)
		}
		if err = need("sessionID, messageID", v.SessionID, v.MessageID); err != nil {
			return Change{}, err
		}
		if event == EvMessagePartRemoved {
			if err = need("partID", v.PartID); err != nil {
				return Change{}, err
			}
		} else {
			v.PartID = ""
		}
		return Change{Removed: &Removal{SessionID: v.SessionID, MessageID: v.MessageID, PartID: v.PartID}}, nil
	default:
		return bad("not an event of the local event API")
	}
	return Change{Event: ev}, nil
}

// strictJSON decodes one JSON value and refuses trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// PublishEncoded decodes one frame of another event API's stream
// (DecodeChange) and publishes it as Publish, RemoveMessage or RemovePart
// would: the documents fold it and subscribers get it re-encoded in the
// canonical form. A frame that does not decode changes nothing and is
// returned as an error wrapping ErrBadChange (the caller counts and logs
// it: docs/ARCHITECTURE.md, section "Local event API").
func (h *Hub) PublishEncoded(event string, data []byte) (Change, error) {
	c, err := DecodeChange(event, data)
	if err != nil {
		return c, err
	}
	h.PublishChange(c)
	return c, nil
}

// PublishChange publishes a decoded change: Publish for a reducer change,
// RemoveMessage or RemovePart for a removal. A zero Change is ignored.
func (h *Hub) PublishChange(c Change) {
	switch {
	case c.Removed != nil && c.Removed.PartID != "":
		h.RemovePart(c.Removed.SessionID, c.Removed.MessageID, c.Removed.PartID)
	case c.Removed != nil:
		h.RemoveMessage(c.Removed.SessionID, c.Removed.MessageID)
	case c.Event != nil:
		h.Publish([]mapper.BusEvent{c.Event})
	}
}
