// Package hooks connects Claude Code's hooks to the running happy in local
// (interactive) mode.
//
// Claude runs a command for each hook event and reads its answer on stdout.
// happy passes Claude a settings file (--settings, merged by Claude with the
// user's own settings, which are never rewritten) whose hook commands are
// `happy hook <event>`. That command (Forward) posts the payload to a
// loopback HTTP endpoint of the running happy (Server), whose address and a
// per-session secret it finds in its environment (EnvURL, EnvSecret, which
// happy puts in Claude's environment and Claude passes on to its hooks),
// and prints the answer.
//
// The Server turns each payload into a Go value (the Event types below) and
// answers at once, except a PermissionRequest: that one waits for the
// runner's Answer, and whoever answers first wins — the runner through the
// hook, or the person in Claude's own dialog (Claude then cancels the hook
// process, and the request settles as OutcomeHookGone). A PermissionRequest
// carries no tool_use_id; the Server matches it to the pending PreToolUse
// with the same tool name, input and agent (first in, first out when
// identical calls run in parallel).
//
// Payload shapes are those of Claude Code 2.1.197 (captured hook payloads):
// every payload has session_id, transcript_path, cwd and hook_event_name.
package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Hook event names, as Claude names them.
const (
	EventSessionStart       = "SessionStart"
	EventUserPromptSubmit   = "UserPromptSubmit"
	EventPreToolUse         = "PreToolUse"
	EventPermissionRequest  = "PermissionRequest"
	EventPostToolUse        = "PostToolUse"
	EventPostToolUseFailure = "PostToolUseFailure"
	EventStop               = "Stop"
	EventSubagentStart      = "SubagentStart"
	EventSubagentStop       = "SubagentStop"
	EventSessionEnd         = "SessionEnd"
	EventNotification       = "Notification"
)

// Errors of Parse; callers branch on them.
var (
	ErrPayloadSyntax   = errors.New("hook payload is not valid JSON")
	ErrPayloadNotObj   = errors.New("hook payload is not a JSON object")
	ErrPayloadField    = errors.New("hook payload field missing or of the wrong type")
	ErrEventNameClash  = errors.New("hook payload names another event")
	ErrEventNameFormat = errors.New("hook event name is not a plain name")
)

// Event is one hook call, as a Go value (closed union): *SessionStart,
// *UserPromptSubmit, *PreToolUse, *PermissionRequest, *PostToolUse,
// *PostToolUseFailure, *Stop, *SubagentStart, *SubagentStop, *SessionEnd,
// *Notification, *Other; and, from the Server only, *PermissionSettled and
// *Invalid.
type Event interface {
	// Base returns the fields every payload has (zero for *Invalid and
	// *PermissionSettled).
	Base() *Common
	isEvent()
}

// Common holds the fields every payload has, and those many have.
type Common struct {
	Event          string          `json:"hook_event_name"`
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	PermissionMode string          `json:"permission_mode"`
	PromptID       string          `json:"prompt_id"`
	AgentID        string          `json:"agent_id"`   // set when a subagent triggered the hook
	AgentType      string          `json:"agent_type"` // "general-purpose", …
	Raw            json.RawMessage `json:"-"`          // the whole payload as received
}

// Base implements Event.
func (c *Common) Base() *Common { return c }

// SessionStart: Claude started, resumed, cleared or compacted a session.
type SessionStart struct {
	Common
	Source string `json:"source"` // startup | resume | clear | compact
	Model  string `json:"model"`
}

// UserPromptSubmit: a prompt was submitted in Claude's own input box.
type UserPromptSubmit struct {
	Common
	Prompt string `json:"prompt"`
}

// PreToolUse: Claude is about to use a tool (before any permission check).
type PreToolUse struct {
	Common
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`
	ToolUseID string          `json:"tool_use_id"`
}

// PostToolUse: a tool finished.
type PostToolUse struct {
	Common
	ToolName     string          `json:"tool_name"`
	ToolInput    json.RawMessage `json:"tool_input"`
	ToolResponse json.RawMessage `json:"tool_response"`
	ToolUseID    string          `json:"tool_use_id"`
	DurationMS   *int64          `json:"duration_ms"`
}

// PostToolUseFailure: a tool failed.
type PostToolUseFailure struct {
	Common
	ToolName    string          `json:"tool_name"`
	ToolInput   json.RawMessage `json:"tool_input"`
	ToolUseID   string          `json:"tool_use_id"`
	Error       json.RawMessage `json:"error"`
	IsInterrupt bool            `json:"is_interrupt"`
}

// Stop: the main agent finished its turn.
type Stop struct {
	Common
	StopHookActive       bool   `json:"stop_hook_active"`
	LastAssistantMessage string `json:"last_assistant_message"`
}

// SubagentStart: a subagent started (AgentID, AgentType in Common).
type SubagentStart struct {
	Common
}

// SubagentStop: a subagent finished.
type SubagentStop struct {
	Common
	AgentTranscriptPath  string `json:"agent_transcript_path"`
	LastAssistantMessage string `json:"last_assistant_message"`
}

// SessionEnd: the session ended.
type SessionEnd struct {
	Common
	Reason string `json:"reason"` // prompt_input_exit, clear, logout, other, …
}

// Notification: Claude shows a notification (permission_prompt after 6 s,
// idle_prompt after 60 s).
type Notification struct {
	Common
	Message          string `json:"message"`
	NotificationType string `json:"notification_type"`
}

// Other is a hook event this version does not model; Common.Raw keeps it.
type Other struct {
	Common
}

func (*SessionStart) isEvent()       {}
func (*UserPromptSubmit) isEvent()   {}
func (*PreToolUse) isEvent()         {}
func (*PermissionRequest) isEvent()  {}
func (*PostToolUse) isEvent()        {}
func (*PostToolUseFailure) isEvent() {}
func (*Stop) isEvent()               {}
func (*SubagentStart) isEvent()      {}
func (*SubagentStop) isEvent()       {}
func (*SessionEnd) isEvent()         {}
func (*Notification) isEvent()       {}
func (*Other) isEvent()              {}

// validName reports whether name can be a hook event name (letters only, as
// all of Claude's are).
func validName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// Parse decodes the payload of hook event name. The payload's own
// hook_event_name, when present, must agree with name. A name this version
// does not model gives *Other. Errors wrap ErrPayloadSyntax,
// ErrPayloadNotObj, ErrPayloadField, ErrEventNameClash or
// ErrEventNameFormat. A PermissionRequest is returned without its answer
// channel (the Server adds it).
func Parse(name string, body []byte) (Event, error) {
	if !validName(name) {
		return nil, fmt.Errorf("%w: %q", ErrEventNameFormat, name)
	}
	trimmed := bytes.TrimSpace(body)
	if !json.Valid(trimmed) {
		return nil, fmt.Errorf("parse %s payload: %w", name, ErrPayloadSyntax)
	}
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("parse %s payload: %w", name, ErrPayloadNotObj)
	}
	var ev Event
	switch name {
	case EventSessionStart:
		ev = &SessionStart{}
	case EventUserPromptSubmit:
		ev = &UserPromptSubmit{}
	case EventPreToolUse:
		ev = &PreToolUse{}
	case EventPermissionRequest:
		ev = &PermissionRequest{}
	case EventPostToolUse:
		ev = &PostToolUse{}
	case EventPostToolUseFailure:
		ev = &PostToolUseFailure{}
	case EventStop:
		ev = &Stop{}
	case EventSubagentStart:
		ev = &SubagentStart{}
	case EventSubagentStop:
		ev = &SubagentStop{}
	case EventSessionEnd:
		ev = &SessionEnd{}
	case EventNotification:
		ev = &Notification{}
	default:
		ev = &Other{}
	}
	if err := json.Unmarshal(trimmed, ev); err != nil {
		return nil, fmt.Errorf("parse %s payload: %w: %w", name, ErrPayloadField, err)
	}
	c := ev.Base()
	if c.Event != "" && c.Event != name {
		return nil, fmt.Errorf("parse %s payload: %w (%q)", name, ErrEventNameClash, c.Event)
	}
	c.Event = name
	c.Raw = append(json.RawMessage(nil), trimmed...)
	switch e := ev.(type) {
	case *PreToolUse:
		if e.ToolName == "" || !isObject(e.ToolInput) {
			return nil, fmt.Errorf("parse %s payload: %w: tool_name and an object tool_input are required", name, ErrPayloadField)
		}
	case *PermissionRequest:
		if e.ToolName == "" || !isObject(e.ToolInput) {
			return nil, fmt.Errorf("parse %s payload: %w: tool_name and an object tool_input are required", name, ErrPayloadField)
		}
	}
	return ev, nil
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{'
}

// canonicalJSON re-encodes a JSON value with sorted object keys and no
// insignificant space, keeping numbers exactly as written, so that two
// encodings of the same input compare equal.
func canonicalJSON(raw json.RawMessage) (string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
