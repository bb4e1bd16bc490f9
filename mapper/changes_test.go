package mapper

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// encodeChange writes a change event as seed 001's SSE payload,
// {"type":"message.part.updated","properties":{"part":{…}}}, with parts and
// messages in the codec's canonical form: the lines of the golden
// bus.jsonl files. It fails when a part or message does not encode.
func encodeChange(ev BusEvent) ([]byte, error) {
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
