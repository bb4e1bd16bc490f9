package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrBadEvent is wrapped by every error of DecodeEvent, EncodeEvent and
// ValidateEvent; the details are in an *EventError.
var ErrBadEvent = errors.New("bad agent event")

// EventError says why an agent event was refused: the event type when it is
// known, a DropReason to count it by, and specifics. It unwraps to
// ErrBadEvent and, when there is one, the underlying error.
type EventError struct {
	Type   string     // event type name ("ToolCall"), "" when not known
	Reason DropReason // why it was refused
	Msg    string     // specifics, e.g. "callID is empty"
	Err    error      // underlying error, may be nil
}

// Error implements error: "agent event ToolCall: missing_id: callID is empty".
func (e *EventError) Error() string {
	t := e.Type
	if t == "" {
		t = "(untyped)"
	}
	return fmt.Sprintf("agent event %s: %s: %s", t, e.Reason, e.Msg)
}

// Unwrap returns ErrBadEvent and the underlying error, if any.
func (e *EventError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadEvent, e.Err}
	}
	return []error{ErrBadEvent}
}

// Dropped turns the refusal into a Dropped record for a transcript: source
// names the stream ("traffic-log", …), line is the 1-based record number
// (0 when unknown) and raw the refused bytes (cut to 512 bytes on a UTF-8
// boundary).
func (e *EventError) Dropped(source string, line int64, raw []byte) Dropped {
	return Dropped{
		Source: source,
		Line:   line,
		Kind:   e.Type,
		Reason: e.Reason,
		Detail: e.Msg,
		Raw:    CutUTF8(string(raw), DroppedRawMax),
	}
}

// EventName returns the type name of an event as used in its JSON form
// ("ToolCall", "TurnEnded", …), or "" for nil or a type this package does
// not define.
func EventName(ev Event) string {
	switch ev.(type) {
	case *SessionInfo:
		return "SessionInfo"
	case *TurnStarted:
		return "TurnStarted"
	case *UserPrompt:
		return "UserPrompt"
	case *MessageStarted:
		return "MessageStarted"
	case *TextDelta:
		return "TextDelta"
	case *TextFinal:
		return "TextFinal"
	case *ReasoningDelta:
		return "ReasoningDelta"
	case *ReasoningFinal:
		return "ReasoningFinal"
	case *ToolCall:
		return "ToolCall"
	case *ToolInputDelta:
		return "ToolInputDelta"
	case *ToolRunning:
		return "ToolRunning"
	case *ToolBlocked:
		return "ToolBlocked"
	case *ToolResolved:
		return "ToolResolved"
	case *ToolCompleted:
		return "ToolCompleted"
	case *ToolFailed:
		return "ToolFailed"
	case *Usage:
		return "Usage"
	case *StepFinished:
		return "StepFinished"
	case *SubagentStarted:
		return "SubagentStarted"
	case *SubagentEnded:
		return "SubagentEnded"
	case *TodosUpdated:
		return "TodosUpdated"
	case *Compaction:
		return "Compaction"
	case *Retry:
		return "Retry"
	case *AgentError:
		return "AgentError"
	case *TurnEnded:
		return "TurnEnded"
	case *DroppedInput:
		return "DroppedInput"
	}
	return ""
}

// newEventByName returns a zero event of the named type, or nil.
func newEventByName(name string) Event {
	switch name {
	case "SessionInfo":
		return &SessionInfo{}
	case "TurnStarted":
		return &TurnStarted{}
	case "UserPrompt":
		return &UserPrompt{}
	case "MessageStarted":
		return &MessageStarted{}
	case "TextDelta":
		return &TextDelta{}
	case "TextFinal":
		return &TextFinal{}
	case "ReasoningDelta":
		return &ReasoningDelta{}
	case "ReasoningFinal":
		return &ReasoningFinal{}
	case "ToolCall":
		return &ToolCall{}
	case "ToolInputDelta":
		return &ToolInputDelta{}
	case "ToolRunning":
		return &ToolRunning{}
	case "ToolBlocked":
		return &ToolBlocked{}
	case "ToolResolved":
		return &ToolResolved{}
	case "ToolCompleted":
		return &ToolCompleted{}
	case "ToolFailed":
		return &ToolFailed{}
	case "Usage":
		return &Usage{}
	case "StepFinished":
		return &StepFinished{}
	case "SubagentStarted":
		return &SubagentStarted{}
	case "SubagentEnded":
		return &SubagentEnded{}
	case "TodosUpdated":
		return &TodosUpdated{}
	case "Compaction":
		return &Compaction{}
	case "Retry":
		return &Retry{}
	case "AgentError":
		return &AgentError{}
	case "TurnEnded":
		return &TurnEnded{}
	case "DroppedInput":
		return &DroppedInput{}
	}
	return nil
}

// EncodeEvent writes an event as one JSON object,
// {"type":"<EventName>",<the event's fields>}, with map keys sorted and no
// HTML escaping, so the same event always gives the same bytes. It fails
// (wrapping ErrBadEvent) for a nil or foreign event and for values JSON
// cannot carry (NaN cost, a malformed raw input).
func EncodeEvent(ev Event) ([]byte, error) {
	name := EventName(ev)
	if name == "" || IsNilEvent(ev) {
		return nil, &EventError{Reason: DropUnknownType, Msg: fmt.Sprintf("cannot encode %T", ev)}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, &EventError{Type: name, Reason: DropInvalidField, Msg: "encode: " + err.Error(), Err: err}
	}
	body := bytes.TrimSpace(buf.Bytes()) // "{…}"
	out := make([]byte, 0, len(body)+len(name)+12)
	out = append(out, `{"type":"`...)
	out = append(out, name...)
	out = append(out, '"')
	if len(body) > 2 {
		out = append(out, ',')
	}
	out = append(out, body[1:]...)
	return out, nil
}

// DecodeEvent reads one event in the form EncodeEvent writes. It never
// panics; a refusal is an *EventError (wrapping ErrBadEvent) whose Reason
// says why:
//
//	unparseable_json  not JSON
//	not_an_object     JSON, but not an object
//	invalid_field     "type" absent or not a string, a field of the wrong
//	                  JSON type, or a value ValidateEvent refuses
//	unknown_type      a "type" this version does not know
//	missing_id        an identity the event needs is empty (see ValidateEvent)
//	unknown_decision  a ToolResolved decision other than once/always/reject
//
// Members the event type does not have are ignored, so a newer writer's
// additions do not break this reader. Numbers inside metadata keep their
// exact text (json.Number); a tool input is kept as raw JSON.
func DecodeEvent(data []byte) (Event, error) {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		return nil, &EventError{Reason: DropUnparseableJSON, Msg: "not valid JSON"}
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, &EventError{Reason: DropNotAnObject, Msg: "an agent event is a JSON object"}
	}
	var head struct {
		Type json.RawMessage `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, &EventError{Reason: DropInvalidField, Msg: "read type: " + err.Error(), Err: err}
	}
	var name string
	if len(head.Type) == 0 || json.Unmarshal(head.Type, &name) != nil {
		return nil, &EventError{Reason: DropInvalidField, Msg: `"type" must be a string`}
	}
	ev := newEventByName(name)
	if ev == nil {
		return nil, &EventError{Type: name, Reason: DropUnknownType, Msg: fmt.Sprintf("unknown event type %q", name)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(ev); err != nil {
		return nil, &EventError{Type: name, Reason: DropInvalidField, Msg: err.Error(), Err: err}
	}
	if err := ValidateEvent(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// ValidateEvent checks what every consumer of an event relies on, returning
// an *EventError (wrapping ErrBadEvent) for the first problem:
//
//   - missing_id: UserPrompt.PromptID, the CallID of every tool event,
//     SubagentStarted.Child and SubagentEnded.Child are required;
//   - unknown_decision: ToolResolved.Decision is "", once, always or reject
//     ("" only for a question answered with Answers);
//   - invalid_field: a negative Time; a ToolBlocked without exactly one of
//     Permission and Question; a ToolResolved with neither a decision nor
//     answers, or with a Rule whose action does not give its decision
//     (allow: once or always, deny: reject), without a permission, or
//     without reason "rule"; a StepFinished whose Finish is not a Finish* constant; a
//     negative Retry.Attempt.
//
// The reducer applies the same checks and records a Dropped for a refused
// event.
func ValidateEvent(ev Event) error {
	name := EventName(ev)
	if name == "" || IsNilEvent(ev) {
		return &EventError{Reason: DropUnknownType, Msg: fmt.Sprintf("not an agent event: %T", ev)}
	}
	bad := func(reason DropReason, format string, args ...any) error {
		return &EventError{Type: name, Reason: reason, Msg: fmt.Sprintf(format, args...)}
	}
	if t := ev.Base().Time; t < 0 {
		return bad(DropInvalidField, "time %d is negative", t)
	}
	switch e := ev.(type) {
	case *UserPrompt:
		if e.PromptID == "" {
			return bad(DropMissingID, "promptID is empty")
		}
	case *ToolCall:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
	case *ToolInputDelta:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
	case *ToolRunning:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
	case *ToolBlocked:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
		if (e.Permission == nil) == (e.Question == nil) {
			return bad(DropInvalidField, "exactly one of permission and question must be set")
		}
	case *ToolResolved:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
		switch e.Decision {
		case DecisionOnce, DecisionAlways, DecisionReject:
		case "":
			if e.Answers == nil {
				return bad(DropInvalidField, "neither a decision nor answers")
			}
		default:
			return bad(DropUnknownDecision, "decision %q is not once, always or reject", e.Decision)
		}
		if r := e.Rule; r != nil {
			switch {
			case e.Reason != ReasonRule:
				return bad(DropInvalidField, "a rule's answer has reason %q, not %q", ReasonRule, e.Reason)
			case r.Permission == "":
				return bad(DropInvalidField, "rule has no permission")
			case r.Action == "allow" && (e.Decision == DecisionOnce || e.Decision == DecisionAlways):
			case r.Action == "deny" && e.Decision == DecisionReject:
			default:
				return bad(DropInvalidField, "rule action %q does not give decision %q", r.Action, e.Decision)
			}
		}
	case *ToolCompleted:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
	case *ToolFailed:
		if e.CallID == "" {
			return bad(DropMissingID, "callID is empty")
		}
	case *StepFinished:
		switch e.Finish {
		case FinishStop, FinishToolCalls, FinishLength, FinishAborted, FinishError:
		default:
			return bad(DropInvalidField, "finish %q is not a finish reason", e.Finish)
		}
	case *SubagentStarted:
		if e.Child == "" {
			return bad(DropMissingID, "child is empty")
		}
	case *SubagentEnded:
		if e.Child == "" {
			return bad(DropMissingID, "child is empty")
		}
	case *Retry:
		if e.Attempt < 0 {
			return bad(DropInvalidField, "attempt %d is negative", e.Attempt)
		}
	}
	return nil
}
