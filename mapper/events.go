package mapper

import "encoding/json"

// Agent events are the provider-neutral vocabulary that adapters emit and
// the Reducer consumes. Nothing provider-specific appears here: an adapter
// translates each native frame (a Claude JSONL record, a Codex notification,
// an ACP session/update) into zero or more events.
//
// Every event is an idempotent upsert keyed by provider identity (a message
// key, a block key, a call id): applying the same event twice changes
// nothing, so re-reading a native transcript after a restart is safe.
//
// Keys are the provider's own identities, opaque to the mapper:
//
//	Session  "" for the root session, else the child session key of a
//	         subagent (as given in SubagentStarted.Child)
//	Message  the provider's message identity (Claude message.id, a Codex turn
//	         item, …); "" means "the current assistant message of the
//	         session": the reducer opens a new one when output follows tool
//	         results (one assistant message per model step)
//	Block    the identity of a text/reasoning block inside a message
//	         (Claude content index, Codex item id); "" means the last
//	         block of that kind in the message
//	CallID   the provider's tool call id
//
// Time is the provider's own timestamp in Unix ms; 0 means the stream
// carried none, and the reducer then uses the latest time it has seen.
// The reducer derives ids from keys and order of first appearance, never
// from time.

// Event is one agent event (closed union).
type Event interface {
	// EventBase returns the fields every event has.
	EventBase() *EventBase
	isEvent()
}

// EventBase is embedded in every event.
type EventBase struct {
	Session string `json:"session,omitempty"` // child session key; "" is the root
	Time    int64  `json:"time,omitempty"`    // Unix ms from the provider; 0 = unknown
}

// EventBase implements Event.
func (b *EventBase) EventBase() *EventBase { return b }

// SessionInfo reports what the agent said about its session: provider
// session id, model, working folder, title. Empty fields leave what is known
// unchanged.
type SessionInfo struct {
	EventBase
	ProviderSessionID string // Claude session_id, Codex thread id, ACP sessionId
	ProviderID        string // "anthropic", "openai", "google", …
	ModelID           string
	Agent             string // agent mode or name ("build", "default", …)
	Cwd               string
	Title             string
}

// TurnStarted opens a turn (one prompt → response cycle).
type TurnStarted struct {
	EventBase
	TurnID string // provider turn id, or a key the adapter chose
}

// UserPrompt is a prompt: typed by the user, sent from another device, or
// injected by the system (Synthetic).
type UserPrompt struct {
	EventBase
	PromptID  string // provider identity of the prompt (Claude uuid, …); required
	Text      string
	Files     []PromptFile
	Synthetic bool
}

// PromptFile is an attachment of a prompt (image or resource).
type PromptFile struct {
	Mime     string
	Filename string
	URL      string // data: URL or blob reference
}

// MessageStarted announces an assistant message (a model step) before its
// content, with the model that produced it. Content events for an unknown
// Message key create the message implicitly, so this event is optional.
type MessageStarted struct {
	EventBase
	Message    string
	ProviderID string
	ModelID    string
}

// TextDelta appends streamed text to a text block.
type TextDelta struct {
	EventBase
	Message string
	Block   string
	Delta   string
}

// TextFinal sets the complete text of a text block, replacing any deltas.
type TextFinal struct {
	EventBase
	Message string
	Block   string
	Text    string
}

// ReasoningDelta appends streamed reasoning to a reasoning block.
type ReasoningDelta struct {
	EventBase
	Message string
	Block   string
	Delta   string
}

// ReasoningFinal sets the complete reasoning text (and metadata such as a
// Claude signature) of a reasoning block.
type ReasoningFinal struct {
	EventBase
	Message  string
	Block    string
	Text     string
	Metadata Object
}

// ToolCall announces a tool call, or updates its announcement (upsert by
// CallID): tool name, title and input. A repeated announcement merges
// (non-empty fields win). The tool part starts "pending".
type ToolCall struct {
	EventBase
	Message  string
	CallID   string
	Tool     string          // canonical tool name ("bash", "edit", "task", …) or the provider's
	Title    string          // short human-readable title
	Input    json.RawMessage // a JSON object; nil when not known yet
	Metadata Object          // provider detail kept on the tool part
}

// ToolInputDelta appends raw input text to a pending tool call.
type ToolInputDelta struct {
	EventBase
	CallID string
	Delta  string
}

// ToolRunning says the tool has started executing.
type ToolRunning struct {
	EventBase
	CallID string
}

// PermissionRequest is what a tool needs permission for.
type PermissionRequest struct {
	ID         string   // stable request id from the provider, or derived
	Permission string   // "edit" | "bash" | "read" | "task" | … (the tool kind)
	Patterns   []string // what is accessed: file paths, the command
	Always     []string // patterns to auto-approve on "always"
	Metadata   Object   // diff payload, file path, provider suggestions
}

// QuestionRequest is a question the agent asks the user.
type QuestionRequest struct {
	ID        string
	Questions []QuestionInfo
}

// ToolBlocked says the tool waits for a person: exactly one of Permission
// and Question is set. A blocked event for an unknown CallID creates the
// tool part (some agents ask before announcing the tool).
type ToolBlocked struct {
	EventBase
	Message    string
	CallID     string
	Tool       string // used when the part must be created
	Input      json.RawMessage
	Permission *PermissionRequest
	Question   *QuestionRequest
}

// ToolResolved records the answer to a blocked tool: a Decision for a
// permission, Answers for a question, or Decision reject with a Reason when
// nobody decided (cancelled, agent-exited, timeout, answered-in-agent).
type ToolResolved struct {
	EventBase
	CallID   string
	Decision Decision
	Answers  [][]string
	Reason   string
}

// ToolCompleted says the tool finished successfully.
type ToolCompleted struct {
	EventBase
	CallID   string
	Output   string
	Title    string
	Metadata Object // structured result (Claude toolUseResult, exit code, …)
	Files    []PromptFile
}

// ToolFailed says the tool finished with an error (including a refusal).
type ToolFailed struct {
	EventBase
	CallID   string
	Error    string
	Metadata Object
}

// Usage reports token usage and cost of an assistant message (a model step).
// Nil fields are unknown, not zero.
type Usage struct {
	EventBase
	Message string
	Tokens  *Tokens
	Cost    *float64
}

// StepFinished closes an assistant message (a model step) with its finish
// reason (one of the Finish* constants).
type StepFinished struct {
	EventBase
	Message string
	Finish  string
}

// SubagentStarted opens a child session for a subagent launched by the tool
// call CallID in session Session.
type SubagentStarted struct {
	EventBase
	CallID      string
	Child       string // key of the child session; events for it carry Session: Child
	Title       string
	Agent       string // subagent type ("explore", "general-purpose", …)
	Prompt      string
	Description string
}

// SubagentEnded closes a child session.
type SubagentEnded struct {
	EventBase
	Child string
}

// TodosUpdated replaces the session's todo list.
type TodosUpdated struct {
	EventBase
	Todos []Todo
}

// Compaction says the agent compacted its context.
type Compaction struct {
	EventBase
	Message  string
	Auto     bool
	Overflow *bool
}

// Retry says a provider call failed and is being retried.
type Retry struct {
	EventBase
	Message string
	Attempt int
	Error   MessageError
}

// AgentError is an error of the current step: it sets the assistant
// message's error (kind degraded to internal when unknown).
type AgentError struct {
	EventBase
	Message    string
	Kind       ErrorKind
	Text       string
	StatusCode *int
}

// Turn end reasons.
const (
	TurnCompleted   = "completed"
	TurnInterrupted = "interrupted"
	TurnFailed      = "failed"
	TurnAgentExited = "agent-exited"
	TurnTruncated   = "truncated"
)

// TurnEnded closes the turn. Every tool still pending, running or blocked is
// settled to error with the reason, and every open assistant message gets
// time.completed and a finish.
type TurnEnded struct {
	EventBase
	TurnID string
	Reason string // one of the Turn* constants
	Error  string // for failed turns
}

// DroppedInput records a native frame the adapter refused.
type DroppedInput struct {
	EventBase
	Dropped Dropped
}

func (*SessionInfo) isEvent()     {}
func (*TurnStarted) isEvent()     {}
func (*UserPrompt) isEvent()      {}
func (*MessageStarted) isEvent()  {}
func (*TextDelta) isEvent()       {}
func (*TextFinal) isEvent()       {}
func (*ReasoningDelta) isEvent()  {}
func (*ReasoningFinal) isEvent()  {}
func (*ToolCall) isEvent()        {}
func (*ToolInputDelta) isEvent()  {}
func (*ToolRunning) isEvent()     {}
func (*ToolBlocked) isEvent()     {}
func (*ToolResolved) isEvent()    {}
func (*ToolCompleted) isEvent()   {}
func (*ToolFailed) isEvent()      {}
func (*Usage) isEvent()           {}
func (*StepFinished) isEvent()    {}
func (*SubagentStarted) isEvent() {}
func (*SubagentEnded) isEvent()   {}
func (*TodosUpdated) isEvent()    {}
func (*Compaction) isEvent()      {}
func (*Retry) isEvent()           {}
func (*AgentError) isEvent()      {}
func (*TurnEnded) isEvent()       {}
func (*DroppedInput) isEvent()    {}
