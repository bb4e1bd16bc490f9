// Package mapper holds happy's canonical transcript model and the reducer that
// builds it from provider-neutral agent events.
//
// The model is the messages-and-parts shape of the "provider envelope
// redesign" (seed 001): a Session has Messages (UserMessage or
// AssistantMessage, a union on "role"); each message has ordered Parts (a
// union on "type"); a tool part carries a ToolState (a union on "status") that
// may hold a PermissionBlock or QuestionBlock while "blocked" and keeps the
// resolved block afterwards. JSON field names are exactly the seed's
// (camelCase, sessionID, messageID, callID, parentID).
//
// Deviations from the seed, all in docs/ARCHITECTURE.md: token counts, cost and
// durations are optional (absent is not zero), a resolved block may carry a
// "reason" when nobody decided (cancelled, agent-exited, timeout,
// answered-in-agent), and a part type unknown to this version decodes as an
// UnknownPart that keeps its raw JSON. Two more, from this package: a
// running state may keep the resolved block that let it run (the seed only
// shows it on completed and error), and a resolved permission block keeps
// its "always" patterns when it has any, so the runtime rules an "always"
// answer added can be rebuilt from the transcript alone.
//
// The JSON codec (EncodeTranscript, DecodeTranscript, … in codec_*.go) is
// the only way these types are written and read: every type's MarshalJSON
// and UnmarshalJSON go through it. Tool states change only through the
// state machine (Transition and the ToolState methods in state.go);
// permission rules are evaluated by Evaluate and Ruleset (rules.go).
//
// Times are Unix milliseconds (int64) throughout.
package mapper

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// Role discriminates Message.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is a UserMessage or an AssistantMessage (closed union).
type Message interface {
	// MessageRole is the "role" discriminator.
	MessageRole() Role
	// MessageID is the message's "id".
	MessageID() string
	isMessage()
}

// ModelRef names a model: {"providerID":"anthropic","modelID":"claude-sonnet-4-6"}.
type ModelRef struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

// UserTime is a user message's time block (Unix ms). Created is seed 001's.
// Received, Handed and Started are the receipts of a prompt another device
// sent (written by the running session on its own version of the row; nil
// on prompts typed where the agent runs, and on a row the session has not
// taken up yet): when the session received it from the relay, when it
// handed it to the agent (later than Received when the prompt waited for
// the turn before it), and when the agent's first event of the turn it
// started came. Readers that do not know them ignore them.
type UserTime struct {
	Created  int64  `json:"created"`
	Received *int64 `json:"received,omitempty"`
	Handed   *int64 `json:"handed,omitempty"`
	Started  *int64 `json:"started,omitempty"`
}

// UserSummary is the optional summary of a user message's turn.
type UserSummary struct {
	Title string           `json:"title,omitempty"`
	Body  string           `json:"body,omitempty"`
	Diffs []agent.FileDiff `json:"diffs"`
}

// UserMessage is a prompt: role "user".
type UserMessage struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionID"`
	Role      Role            `json:"role"` // always RoleUser
	Time      UserTime        `json:"time"`
	Agent     string          `json:"agent"`
	Model     ModelRef        `json:"model"`
	Format    json.RawMessage `json:"format,omitempty"` // OutputFormat, kept opaque
	System    string          `json:"system,omitempty"`
	Tools     map[string]bool `json:"tools,omitempty"`
	Variant   string          `json:"variant,omitempty"`
	Summary   *UserSummary    `json:"summary,omitempty"`
}

// MessageRole implements Message.
func (*UserMessage) MessageRole() Role { return RoleUser }

// MessageID implements Message.
func (m *UserMessage) MessageID() string { return m.ID }
func (*UserMessage) isMessage()          {}

// AssistantTime is an assistant message's time block; Completed is nil while
// the message is still being produced.
type AssistantTime struct {
	Created   int64  `json:"created"`
	Completed *int64 `json:"completed,omitempty"`
}

// MessagePath is the working folder and project root of an assistant message.
type MessagePath struct {
	Cwd  string `json:"cwd"`
	Root string `json:"root"`
}

// AssistantMessage is one model step: role "assistant".
type AssistantMessage struct {
	ID         string              `json:"id"`
	SessionID  string              `json:"sessionID"`
	Role       Role                `json:"role"` // always RoleAssistant
	Time       AssistantTime       `json:"time"`
	ParentID   string              `json:"parentID"` // the UserMessage that triggered it
	ModelID    string              `json:"modelID"`
	ProviderID string              `json:"providerID"`
	Agent      string              `json:"agent"`
	Path       MessagePath         `json:"path"`
	Cost       *float64            `json:"cost,omitempty"`   // USD; nil when not reported
	Tokens     *agent.Tokens       `json:"tokens,omitempty"` // nil when not reported
	Finish     string              `json:"finish,omitempty"` // one of the Finish* constants
	Error      *agent.MessageError `json:"error,omitempty"`
	Summary    *bool               `json:"summary,omitempty"` // true for a compaction summary
	Variant    string              `json:"variant,omitempty"`
}

// MessageRole implements Message.
func (*AssistantMessage) MessageRole() Role { return RoleAssistant }

// MessageID implements Message.
func (m *AssistantMessage) MessageID() string { return m.ID }
func (*AssistantMessage) isMessage()          {}

// APIError is the error of a retry part (same shape as MessageError).
type APIError = agent.MessageError

// PartType discriminates Part.
type PartType string

// Part types of seed 001, plus PartUnknown for types this version does not know.
const (
	PartText       PartType = "text"
	PartReasoning  PartType = "reasoning"
	PartTool       PartType = "tool"
	PartFile       PartType = "file"
	PartStepStart  PartType = "step-start"
	PartStepFinish PartType = "step-finish"
	PartSubtask    PartType = "subtask"
	PartAgent      PartType = "agent"
	PartSnapshot   PartType = "snapshot"
	PartPatch      PartType = "patch"
	PartCompaction PartType = "compaction"
	PartRetry      PartType = "retry"
)

// Part is one ordered piece of a message (closed union; the marker method
// lets a type switch list every variant).
type Part interface {
	// PartType is the "type" discriminator (for UnknownPart, the raw type).
	PartType() PartType
	// Base returns the id, sessionID and messageID every part carries.
	Base() *PartBase
	isPart()
}

// PartBase is embedded in every part.
type PartBase struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	MessageID string `json:"messageID"`
}

// Base implements Part.
func (b *PartBase) Base() *PartBase { return b }

// PartTime is the time block of text and reasoning parts.
type PartTime struct {
	Start int64  `json:"start"`
	End   *int64 `json:"end,omitempty"`
}

// TextPart is text written by the user or the model.
type TextPart struct {
	PartBase
	Text      string       `json:"text"`
	Synthetic bool         `json:"synthetic,omitempty"` // injected by the system
	Ignored   bool         `json:"ignored,omitempty"`   // excluded from model context
	Time      *PartTime    `json:"time,omitempty"`
	Metadata  agent.Object `json:"metadata,omitempty"`
}

// ReasoningPart is the model's thinking (a Claude signature goes in metadata).
type ReasoningPart struct {
	PartBase
	Text     string       `json:"text"`
	Time     PartTime     `json:"time"`
	Metadata agent.Object `json:"metadata,omitempty"`
}

// ToolPart is one tool call and its state.
type ToolPart struct {
	PartBase
	CallID   string       `json:"callID"`
	Tool     string       `json:"tool"`
	State    ToolState    `json:"state"`
	Metadata agent.Object `json:"metadata,omitempty"`
}

// FilePartSource says where a file part came from; kept opaque.
type FilePartSource = json.RawMessage

// FilePart is an attachment: inline data: URL or a reference to an encrypted blob.
type FilePart struct {
	PartBase
	Mime     string         `json:"mime"`
	Filename string         `json:"filename,omitempty"`
	URL      string         `json:"url"`
	Source   FilePartSource `json:"source,omitempty"`
}

// StepStartPart opens a model step; Snapshot is a git commit hash when known.
type StepStartPart struct {
	PartBase
	Snapshot string `json:"snapshot,omitempty"`
}

// StepFinishPart closes a model step with its finish reason and usage.
type StepFinishPart struct {
	PartBase
	Reason   string        `json:"reason"` // one of the Finish* constants
	Snapshot string        `json:"snapshot,omitempty"`
	Cost     *float64      `json:"cost,omitempty"`
	Tokens   *agent.Tokens `json:"tokens,omitempty"`
}

// SubtaskPart is a delegation request (prompt for a subagent).
type SubtaskPart struct {
	PartBase
	Prompt      string    `json:"prompt"`
	Description string    `json:"description"`
	Agent       string    `json:"agent"`
	Model       *ModelRef `json:"model,omitempty"`
	Command     string    `json:"command,omitempty"`
}

// AgentPart names the agent that produced what follows.
type AgentPart struct {
	PartBase
	Name string `json:"name"`
}

// SnapshotPart records a working-tree snapshot.
type SnapshotPart struct {
	PartBase
	Snapshot string `json:"snapshot"`
}

// PatchPart records the files a step changed.
type PatchPart struct {
	PartBase
	Hash  string   `json:"hash"`
	Files []string `json:"files"`
}

// CompactionPart marks a context compaction.
type CompactionPart struct {
	PartBase
	Auto     bool  `json:"auto"`
	Overflow *bool `json:"overflow,omitempty"`
}

// RetryTime is the time block of a retry part.
type RetryTime struct {
	Created int64 `json:"created"`
}

// RetryPart records a retried provider call.
type RetryPart struct {
	PartBase
	Attempt int       `json:"attempt"`
	Error   APIError  `json:"error"`
	Time    RetryTime `json:"time"`
}

// UnknownPart is a part whose type this version does not know. Raw is the
// whole part object as received; it is written back unchanged, so a newer
// writer never breaks an older reader.
type UnknownPart struct {
	PartBase
	Type string          `json:"-"`
	Raw  json.RawMessage `json:"-"`
}

// PartType implementations.
func (*TextPart) PartType() PartType       { return PartText }
func (*ReasoningPart) PartType() PartType  { return PartReasoning }
func (*ToolPart) PartType() PartType       { return PartTool }
func (*FilePart) PartType() PartType       { return PartFile }
func (*StepStartPart) PartType() PartType  { return PartStepStart }
func (*StepFinishPart) PartType() PartType { return PartStepFinish }
func (*SubtaskPart) PartType() PartType    { return PartSubtask }
func (*AgentPart) PartType() PartType      { return PartAgent }
func (*SnapshotPart) PartType() PartType   { return PartSnapshot }
func (*PatchPart) PartType() PartType      { return PartPatch }
func (*CompactionPart) PartType() PartType { return PartCompaction }
func (*RetryPart) PartType() PartType      { return PartRetry }
func (p *UnknownPart) PartType() PartType  { return PartType(p.Type) }

func (*TextPart) isPart()       {}
func (*ReasoningPart) isPart()  {}
func (*ToolPart) isPart()       {}
func (*FilePart) isPart()       {}
func (*StepStartPart) isPart()  {}
func (*StepFinishPart) isPart() {}
func (*SubtaskPart) isPart()    {}
func (*AgentPart) isPart()      {}
func (*SnapshotPart) isPart()   {}
func (*PatchPart) isPart()      {}
func (*CompactionPart) isPart() {}
func (*RetryPart) isPart()      {}
func (*UnknownPart) isPart()    {}

// ToolStatus discriminates ToolState.
type ToolStatus string

// Tool statuses (seed 001 tool state machine).
const (
	StatusPending   ToolStatus = "pending"
	StatusRunning   ToolStatus = "running"
	StatusBlocked   ToolStatus = "blocked"
	StatusCompleted ToolStatus = "completed"
	StatusError     ToolStatus = "error"
)

// Open reports whether the status is not terminal (pending, running, blocked).
func (s ToolStatus) Open() bool {
	return s == StatusPending || s == StatusRunning || s == StatusBlocked
}

// ToolTime is the time block of a tool state: Start when it began running,
// End when it reached completed or error, Compacted when its output was
// compacted away.
type ToolTime struct {
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
	Compacted *int64 `json:"compacted,omitempty"`
}

// ToolState is the state of a tool call. It is one Go struct for all five
// statuses; which fields are present on the wire depends on Status (seed 001):
//
//	pending:   status, input, raw
//	running:   status, input, title?, metadata?, time{start}
//	blocked:   status, input, title?, metadata?, time{start}, block (unresolved)
//	completed: status, input, output, title, metadata, time{start,end,compacted?}, attachments?, block? (resolved)
//	error:     status, input, error, metadata?, time{start,end}, block? (resolved)
//
// A running state may also keep the resolved block that let it run. Input
// is always a JSON object (never an array); Metadata nil means absent, an
// empty non-nil Object is written as {}. Validate checks a state against
// this table. Change a state only through Transition (or the ToolState
// methods built on it), which refuses illegal moves.
type ToolState struct {
	Status      ToolStatus
	Input       agent.Object
	Raw         string // pending: input text as it streams in
	Title       string
	Output      string // completed
	Error       string // error
	Metadata    agent.Object
	Time        ToolTime
	Attachments []FilePart
	Block       *Block
}

// BlockType discriminates Block.
type BlockType string

// Block types.
const (
	BlockPermission BlockType = "permission"
	BlockQuestion   BlockType = "question"
)

// Block is a PermissionBlock or QuestionBlock, unresolved (on a blocked tool)
// or resolved (kept on the completed or error state). One Go struct; the wire
// fields depend on Type and on whether DecidedAt is set:
//
//	permission:          type, id, permission, patterns, always, metadata
//	permission resolved: type, id, permission, patterns, always?, metadata, decision, decidedAt, reason?, rule?
//	question:            type, id, questions
//	question resolved:   type, id, questions, answers, decidedAt, decision?, reason?
//
// A question settled without answers (cancelled, timeout) has decision
// "reject", a reason and empty answers. A permission a rule answered has
// reason "rule" and the rule that matched (action allow with decision once
// or always, deny with reject), so the audit trail tells a rule's answer
// from a person's.
type Block struct {
	Type BlockType
	ID   string
	// permission
	Permission string
	Patterns   []string
	Always     []string
	Metadata   agent.Object
	// question
	Questions []agent.QuestionInfo
	// resolution
	Decision  agent.Decision  // "" while unresolved (and for answered questions)
	Answers   [][]string      // question: per question, the selected labels
	DecidedAt *int64          // nil while unresolved
	Reason    string          // why it was settled without a decision, if it was
	Rule      *PermissionRule // permission resolved by a rule (Reason "rule"): the rule
}

// Resolved reports whether the block carries a decision or answers.
func (b *Block) Resolved() bool { return b != nil && b.DecidedAt != nil }

// Action is what a permission rule does.
type Action string

// Rule actions.
const (
	ActionAllow Action = "allow"
	ActionDeny  Action = "deny"
	ActionAsk   Action = "ask"
)

// PermissionRule is {permission, pattern, action}: for tools of kind
// Permission ("edit", "bash", "*" …) whose pattern matches the glob Pattern,
// do Action. Rules are evaluated in order; see Evaluate.
type PermissionRule struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
	Action     Action `json:"action"`
}

// Matched returns the rule as an agent event carries it (ToolResolved.Rule).
func (r PermissionRule) Matched() *agent.MatchedRule {
	return &agent.MatchedRule{Permission: r.Permission, Pattern: r.Pattern, Action: string(r.Action)}
}

// String renders the rule as the --allow and --deny flags take it:
// "permission:pattern".
func (r PermissionRule) String() string { return r.Permission + ":" + r.Pattern }

// SessionTime is a session's time block.
type SessionTime struct {
	Created    int64  `json:"created"`
	Updated    int64  `json:"updated"`
	Compacting *int64 `json:"compacting,omitempty"`
}

// SessionSummary counts a session's file changes.
type SessionSummary struct {
	Additions int              `json:"additions"`
	Deletions int              `json:"deletions"`
	Files     int              `json:"files"`
	Diffs     []agent.FileDiff `json:"diffs,omitempty"`
}

// Session is a root session or a child session (a subagent, ParentID set).
type Session struct {
	ID         string           `json:"id"`
	ProjectID  string           `json:"projectID"`
	Directory  string           `json:"directory"`
	ParentID   string           `json:"parentID,omitempty"`
	Title      string           `json:"title"`
	Time       SessionTime      `json:"time"`
	Permission []PermissionRule `json:"permission,omitempty"`
	Summary    *SessionSummary  `json:"summary,omitempty"`
}

// MessageWithParts is one message and its ordered parts:
// {"info": Message, "parts": [Part, …]}.
type MessageWithParts struct {
	Info  Message
	Parts []Part
}

// Transcript is the transcript document, the one JSON shape every command
// that prints a session uses:
//
//	{"session": Session, "messages": [MessageWithParts…], "children": [Transcript…],
//	 "todos": [Todo…], "dropped": [Dropped…]}
//
// Arrays are always present (empty, never null).
type Transcript struct {
	Session  Session            `json:"session"`
	Messages []MessageWithParts `json:"messages"`
	Children []Transcript       `json:"children"`
	Todos    []agent.Todo       `json:"todos"`
	Dropped  []agent.Dropped    `json:"dropped"`
}

// BlobSource is the source of a file part whose URL is a relay blob
// reference (docs/ARCHITECTURE.md, section "Attachments"):
// {"type":"blob","size":N,"sha256"?,"width"?,"height"?,"thumbhash"?,"key"?}.
// Size is the plaintext's length in bytes; sha256 the standard base64 of
// the plaintext's SHA-256, which binds the blob to the (authenticated)
// record that references it, so a blob replaced on the relay by another of
// the same session is noticed (VerifyBlob); width and height are pixels and
// thumbhash the base64 ThumbHash, for images only. Key says which key
// sealed the blob: "" the session's record cipher (happy's own blobs),
// BlobKeyReference the session's blob key (crypto.BlobCipherOf), as the
// reference app seals the files it sends.
type BlobSource struct {
	Type      string `json:"type"` // always "blob"
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256,omitempty"`
	Width     int    `json:"width,omitempty"`
	Height    int    `json:"height,omitempty"`
	Thumbhash string `json:"thumbhash,omitempty"`
	Key       string `json:"key,omitempty"`
}

// BlobKeyReference is BlobSource.Key of a blob sealed with the session's
// blob key (secretbox), the reference app's way.
const BlobKeyReference = "blob"

// ErrBlobMismatch is returned (wrapped) by BlobSource.Verify when a blob's
// plaintext is not the one its file part describes.
var ErrBlobMismatch = errors.New("the attachment's bytes are not the ones its message references (replaced or damaged on the relay)")

// BlobDigest is the BlobSource.SHA256 of plaintext: standard base64 of its
// SHA-256.
func BlobDigest(plaintext []byte) string {
	sum := sha256.Sum256(plaintext)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Verify checks a blob's plaintext against the source: its SHA-256 when
// the source has one (happy's own blobs), else its size (the reference
// app's file events announce only that). Errors wrap ErrBlobMismatch.
func (b BlobSource) Verify(plaintext []byte) error {
	if b.SHA256 != "" {
		if got := BlobDigest(plaintext); got != b.SHA256 {
			return fmt.Errorf("%w: SHA-256 %s, the message says %s", ErrBlobMismatch, got, b.SHA256)
		}
		return nil
	}
	if int64(len(plaintext)) != b.Size {
		return fmt.Errorf("%w: %d bytes, the message says %d", ErrBlobMismatch, len(plaintext), b.Size)
	}
	return nil
}

// ParseBlobSource reads a file part's source as a BlobSource; ok is false
// for any other source (absent, another type, not an object).
func ParseBlobSource(raw json.RawMessage) (BlobSource, bool) {
	var b BlobSource
	if len(raw) == 0 || json.Unmarshal(raw, &b) != nil || b.Type != "blob" {
		return BlobSource{}, false
	}
	return b, true
}
