package agent

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
//	         (Claude content index, Codex item id); "" means the message's
//	         last part when that is a block of the same kind, else a new
//	         block (so text streamed around a tool call becomes two parts)
//	CallID   the provider's tool call id
//
// Time is the provider's own timestamp in Unix ms; 0 means the stream
// carried none, and the reducer then uses the latest time it has seen.
// The reducer derives ids from keys and order of first appearance, never
// from time.
//
// Deltas (TextDelta, ReasoningDelta, ToolInputDelta) are appends and so the
// one kind of event that is not an upsert by itself: the final that follows
// them (TextFinal, ReasoningFinal, ToolCall with Input) replaces what they
// built, and a delta that arrives after its block's final is stale and
// ignored, so a re-delivered delta-then-final sequence changes nothing.
//
// Every event has a JSON form (EncodeEvent, DecodeEvent):
// {"type":"ToolCall","session":…,"time":…,<fields>} with the field names of
// the json tags below; the type names are the Go type names and are part of
// the contract.

// Event is one agent event (closed union).
type Event interface {
	// Base returns the fields every event has. (A method named EventBase
	// would be shadowed by the embedded field of the same name, and no
	// event type would implement Event.)
	Base() *EventBase
	isEvent()
}

// EventBase is embedded in every event.
type EventBase struct {
	Session string `json:"session,omitempty"` // child session key; "" is the root
	Time    int64  `json:"time,omitempty"`    // Unix ms from the provider; 0 = unknown
}

// Base implements Event.
func (b *EventBase) Base() *EventBase { return b }

// SessionInfo reports what the agent said about its session: provider
// session id, model, working folder, title. Empty fields leave what is known
// unchanged.
type SessionInfo struct {
	EventBase
	ProviderSessionID string `json:"providerSessionID,omitempty"` // Claude session_id, Codex thread id, ACP sessionId
	ProviderID        string `json:"providerID,omitempty"`        // "anthropic", "openai", "google", …
	ModelID           string `json:"modelID,omitempty"`
	Agent             string `json:"agent,omitempty"` // agent mode or name ("build", "default", …)
	Cwd               string `json:"cwd,omitempty"`
	Title             string `json:"title,omitempty"`
}

// TurnStarted opens a turn (one prompt → response cycle).
type TurnStarted struct {
	EventBase
	TurnID string `json:"turnID,omitempty"` // provider turn id, or a key the adapter chose
}

// UserPrompt is a prompt: typed by the user, sent from another device, or
// injected by the system (Synthetic).
type UserPrompt struct {
	EventBase
	PromptID  string       `json:"promptID,omitempty"` // provider identity of the prompt (Claude uuid, …); required
	Text      string       `json:"text,omitempty"`
	Files     []PromptFile `json:"files,omitempty"`
	Synthetic bool         `json:"synthetic,omitempty"`
	// MessageID, when set, is the canonical id of the user message: the
	// prompt already exists on the relay under that id (written by the
	// device that sent it), and the transcript adopts it instead of deriving
	// a new one, so it appears once.
	MessageID string `json:"messageID,omitempty"`
	// Received and Handed, when set (Unix ms), are when the running session
	// received this prompt from another device and when it handed it to
	// the agent (unset: never handed, the agent exited first); the
	// transcript keeps them as the user message's receipts
	// (mapper.UserTime).
	Received int64 `json:"received,omitempty"`
	Handed   int64 `json:"handed,omitempty"`
}

// PromptFile is an attachment of a prompt or of a tool result (an image or
// another file): a seed-001 file part. URL is an inline data: URL, a
// file:// or http(s) URL, or a relay blob reference
// ("sessions/<sid>/attachments/<file>.enc", docs/ARCHITECTURE.md, section
// "Attachments"). An agent's Prompt only ever gets data:, file:// and
// http(s) URLs: the runner downloads blob references first.
type PromptFile struct {
	Mime     string `json:"mime,omitempty"`
	Filename string `json:"filename,omitempty"`
	URL      string `json:"url,omitempty"`
	// Source is the file part's source (seed 001 FilePartSource), opaque
	// here; for a blob {"type":"blob","size":N,"width"?,"height"?,"thumbhash"?}.
	Source json.RawMessage `json:"source,omitempty"`
}

// MessageStarted announces an assistant message (a model step) before its
// content, with the model that produced it. Content events for an unknown
// Message key create the message implicitly, so this event is optional.
type MessageStarted struct {
	EventBase
	Message    string `json:"message,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
	ModelID    string `json:"modelID,omitempty"`
}

// TextDelta appends streamed text to a text block.
type TextDelta struct {
	EventBase
	Message string `json:"message,omitempty"`
	Block   string `json:"block,omitempty"`
	Delta   string `json:"delta,omitempty"`
}

// TextFinal sets the complete text of a text block, replacing any deltas.
type TextFinal struct {
	EventBase
	Message string `json:"message,omitempty"`
	Block   string `json:"block,omitempty"`
	Text    string `json:"text,omitempty"`
}

// ReasoningDelta appends streamed reasoning to a reasoning block.
type ReasoningDelta struct {
	EventBase
	Message string `json:"message,omitempty"`
	Block   string `json:"block,omitempty"`
	Delta   string `json:"delta,omitempty"`
}

// ReasoningFinal sets the complete reasoning text (and metadata such as a
// Claude signature) of a reasoning block.
type ReasoningFinal struct {
	EventBase
	Message  string `json:"message,omitempty"`
	Block    string `json:"block,omitempty"`
	Text     string `json:"text,omitempty"`
	Metadata Object `json:"metadata,omitempty"`
}

// ToolCall announces a tool call, or updates its announcement (upsert by
// CallID): tool name, title and input. A repeated announcement merges
// (non-empty fields win). The tool part starts "pending". Tool is a
// canonical tool name and Input its canonical input (tools.go); Metadata
// carries the agent's own tool name and input (ToolMetadata).
type ToolCall struct {
	EventBase
	Message  string          `json:"message,omitempty"`
	CallID   string          `json:"callID,omitempty"`
	Tool     string          `json:"tool,omitempty"`     // canonical tool name (ToolBash, ToolEdit, MCPTool(…), …)
	Title    string          `json:"title,omitempty"`    // short human-readable title
	Input    json.RawMessage `json:"input,omitempty"`    // the canonical input, a JSON object; nil when not known yet
	Metadata Object          `json:"metadata,omitempty"` // provider detail kept on the tool part (providerTool, providerInput, …)
}

// ToolInputDelta appends raw input text to a pending tool call.
type ToolInputDelta struct {
	EventBase
	CallID string `json:"callID,omitempty"`
	Delta  string `json:"delta,omitempty"`
}

// ToolRunning says the tool has started executing.
type ToolRunning struct {
	EventBase
	CallID string `json:"callID,omitempty"`
}

// PermissionRequest is what a tool needs permission for.
type PermissionRequest struct {
	ID         string   `json:"id,omitempty"`         // stable request id from the provider; "" = derived (per_…)
	Permission string   `json:"permission,omitempty"` // the canonical tool name ("bash", "edit", "read", …)
	Patterns   []string `json:"patterns,omitempty"`   // what is accessed: file paths, the command
	Always     []string `json:"always,omitempty"`     // patterns to auto-approve on "always"
	Metadata   Object   `json:"metadata,omitempty"`   // diff payload, file path, provider suggestions
}

// QuestionRequest is a question the agent asks the user.
type QuestionRequest struct {
	ID        string         `json:"id,omitempty"` // stable request id from the provider; "" = derived (q_…)
	Questions []QuestionInfo `json:"questions,omitempty"`
}

// ToolBlocked says the tool waits for a person: exactly one of Permission
// and Question is set. A blocked event for an unknown CallID creates the
// tool part (some agents ask before announcing the tool).
type ToolBlocked struct {
	EventBase
	Message    string             `json:"message,omitempty"`
	CallID     string             `json:"callID,omitempty"`
	Tool       string             `json:"tool,omitempty"`  // canonical name, used when the part must be created
	Input      json.RawMessage    `json:"input,omitempty"` // canonical input, as in ToolCall
	Permission *PermissionRequest `json:"permission,omitempty"`
	Question   *QuestionRequest   `json:"question,omitempty"`
}

// ToolResolved records the answer to a blocked tool: a Decision for a
// permission, Answers for a question, or Decision reject with a Reason when
// nobody decided (cancelled, agent-exited, timeout, answered-in-agent). A
// permission rule's answer has Reason ReasonRule and the Rule that matched
// (allow: once or always; deny: reject).
type ToolResolved struct {
	EventBase
	CallID   string       `json:"callID,omitempty"`
	Decision Decision     `json:"decision,omitempty"`
	Answers  [][]string   `json:"answers,omitempty"`
	Reason   string       `json:"reason,omitempty"`
	Rule     *MatchedRule `json:"rule,omitempty"`
}

// ToolCompleted says the tool finished successfully.
type ToolCompleted struct {
	EventBase
	CallID   string       `json:"callID,omitempty"`
	Output   string       `json:"output,omitempty"`
	Title    string       `json:"title,omitempty"`
	Metadata Object       `json:"metadata,omitempty"` // structured result (Claude toolUseResult, exit code, …)
	Files    []PromptFile `json:"files,omitempty"`
}

// ToolFailed says the tool finished with an error (including a refusal).
type ToolFailed struct {
	EventBase
	CallID   string `json:"callID,omitempty"`
	Error    string `json:"error,omitempty"`
	Metadata Object `json:"metadata,omitempty"`
}

// Usage reports token usage and cost of an assistant message (a model step).
// Nil fields are unknown, not zero. Figures are totals for the message, not
// increments: each non-nil field replaces what was known, so a repeated
// report changes nothing.
type Usage struct {
	EventBase
	Message string   `json:"message,omitempty"`
	Tokens  *Tokens  `json:"tokens,omitempty"`
	Cost    *float64 `json:"cost,omitempty"`
}

// StepFinished closes an assistant message (a model step) with its finish
// reason (one of the Finish* constants).
type StepFinished struct {
	EventBase
	Message string `json:"message,omitempty"`
	Finish  string `json:"finish,omitempty"`
}

// SubagentStarted opens a child session for a subagent launched by the tool
// call CallID in session Session.
type SubagentStarted struct {
	EventBase
	CallID      string `json:"callID,omitempty"`
	Child       string `json:"child,omitempty"` // key of the child session; events for it carry Session: Child
	Title       string `json:"title,omitempty"`
	Agent       string `json:"agent,omitempty"` // subagent type ("explore", "general-purpose", …)
	Prompt      string `json:"prompt,omitempty"`
	Description string `json:"description,omitempty"`
}

// SubagentEnded closes a child session.
type SubagentEnded struct {
	EventBase
	Child string `json:"child,omitempty"`
}

// TodosUpdated replaces the session's todo list.
type TodosUpdated struct {
	EventBase
	Todos []Todo `json:"todos,omitempty"`
}

// Compaction says the agent compacted its context; it becomes a compaction
// part of the message (the current one when Message is "").
type Compaction struct {
	EventBase
	ID       string `json:"id,omitempty"` // provider identity of the compaction; "" = one per message
	Message  string `json:"message,omitempty"`
	Auto     bool   `json:"auto,omitempty"`
	Overflow *bool  `json:"overflow,omitempty"`
}

// Retry says a provider call failed and is being retried. (Message,
// Attempt) identifies it: the same attempt reported twice is one retry part.
type Retry struct {
	EventBase
	Message string       `json:"message,omitempty"`
	Attempt int          `json:"attempt,omitempty"`
	Error   MessageError `json:"error,omitempty"`
}

// AgentError is an error of the current step: it sets the assistant
// message's error (kind degraded to internal when unknown).
type AgentError struct {
	EventBase
	Message    string    `json:"message,omitempty"`
	Kind       ErrorKind `json:"kind,omitempty"`
	Text       string    `json:"text,omitempty"`
	StatusCode *int      `json:"statusCode,omitempty"`
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
	TurnID string `json:"turnID,omitempty"`
	Reason string `json:"reason,omitempty"` // one of the Turn* constants
	Error  string `json:"error,omitempty"`  // for failed turns
}

// DroppedInput records a native frame the adapter refused.
type DroppedInput struct {
	EventBase
	Dropped Dropped `json:"dropped,omitempty"`
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
