package agent

// Object is a JSON object with arbitrary values: tool input, metadata.
// Decoders in this package use json.Number for numbers so that integers of
// any size survive a round trip; maps marshal with sorted keys, so encoding
// is byte-stable.
type Object = map[string]any

// FileDiff is one file's change in a summary: before and after text and line
// counts (the shape of OpenCode's snapshot diff).
type FileDiff struct {
	File      string `json:"file"`
	Before    string `json:"before"`
	After     string `json:"after"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Status    string `json:"status,omitempty"` // "added" | "deleted" | "modified"
}

// CacheTokens counts prompt-cache reads and writes.
type CacheTokens struct {
	Read  *int64 `json:"read,omitempty"`
	Write *int64 `json:"write,omitempty"`
}

// Tokens is token usage. Every count is optional: a provider that does not
// report a figure leaves it nil, never 0 (docs/ARCHITECTURE.md "Absent is not zero").
type Tokens struct {
	Input     *int64      `json:"input,omitempty"`
	Output    *int64      `json:"output,omitempty"`
	Reasoning *int64      `json:"reasoning,omitempty"`
	Cache     CacheTokens `json:"cache"`
}

// Finish reasons of an assistant message (docs/ARCHITECTURE.md "Finish reasons").
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool-calls"
	FinishLength    = "length"
	FinishAborted   = "aborted"
	FinishError     = "error"
)

// ErrorKind selects the recovery a reader offers (seed 002 "Error Kinds").
// An unknown kind decodes as ErrorInternal.
type ErrorKind string

// Error kinds.
const (
	ErrorAuth      ErrorKind = "auth"       // credential rejected (HTTP 401 or 403)
	ErrorRateLimit ErrorKind = "rate_limit" // retrying is meaningful
	ErrorEmpty     ErrorKind = "empty"      // the agent produced no output
	ErrorTransport ErrorKind = "transport"  // the stream broke
	ErrorProtocol  ErrorKind = "protocol"   // client and agent disagree on the contract
	ErrorInternal  ErrorKind = "internal"   // anything else
)

// ParseErrorKind maps a kind string to an ErrorKind; anything unknown
// (including "") degrades to ErrorInternal.
func ParseErrorKind(s string) ErrorKind {
	switch k := ErrorKind(s); k {
	case ErrorAuth, ErrorRateLimit, ErrorEmpty, ErrorTransport, ErrorProtocol, ErrorInternal:
		return k
	}
	return ErrorInternal
}

// Names of MessageError (OpenCode's error union names).
const (
	ErrNameAPI          = "APIError"
	ErrNameProviderAuth = "ProviderAuthError"
	ErrNameAborted      = "MessageAbortedError"
	ErrNameOutputLength = "MessageOutputLengthError"
	ErrNameUnknown      = "UnknownError"
)

// MessageError is an assistant message's error, also used as a retry part's
// APIError: {"name":"APIError","data":{"message":…,"kind":"rate_limit",…}}.
type MessageError struct {
	Name string    `json:"name"` // one of the ErrName* constants
	Data ErrorData `json:"data"`
}

// ErrorData is the payload of a MessageError.
type ErrorData struct {
	Message      string    `json:"message"`
	Kind         ErrorKind `json:"kind"`
	ProviderID   string    `json:"providerID,omitempty"`
	StatusCode   *int      `json:"statusCode,omitempty"`
	IsRetryable  *bool     `json:"isRetryable,omitempty"`
	ResponseBody string    `json:"responseBody,omitempty"`
}

// Decision is a person's answer to a permission block (seed 001; docs/ARCHITECTURE.md
// "Vocabulary of a permission outcome"). Only these three exist; decode one
// with ParseDecision, which refuses anything else.
type Decision string

// Decisions.
const (
	DecisionOnce   Decision = "once"
	DecisionAlways Decision = "always"
	DecisionReject Decision = "reject"
)

// Reasons a block is resolved without anyone deciding (decision "reject").
// ReasonWrapperExited is also the error of every tool a happy process left
// open when it died (kill -9, power loss): the next happy on the same home
// settles them (docs/ARCHITECTURE.md, section "A session's life").
const (
	ReasonCancelled       = "cancelled"
	ReasonAgentExited     = "agent-exited"
	ReasonTimeout         = "timeout"
	ReasonAnsweredInAgent = "answered-in-agent"
	ReasonWrapperExited   = "wrapper-exited"
)

// ReasonRule is the reason of a block a permission rule answered (allow or
// deny) without asking anyone; the resolution names the rule (MatchedRule).
const ReasonRule = "rule"

// MatchedRule is the permission rule that decided a request: the rule as
// configured, {permission, pattern, action} with action "allow" or "deny"
// (the shape of seed 001's PermissionRule; mapper.PermissionRule converts
// to and from it).
type MatchedRule struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
	Action     string `json:"action"`
}

// String renders the rule as the --allow and --deny flags take it:
// "permission:pattern".
func (r MatchedRule) String() string { return r.Permission + ":" + r.Pattern }

// QuestionOption is one choice of a question.
type QuestionOption struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// QuestionInfo is one question of a question block.
type QuestionInfo struct {
	Question string           `json:"question"`
	Header   string           `json:"header"` // short label, at most 30 characters
	Options  []QuestionOption `json:"options"`
	Multiple *bool            `json:"multiple,omitempty"`
	Custom   *bool            `json:"custom,omitempty"` // free-text answers allowed (default true)
}

// TodoStatus is a todo's progress.
type TodoStatus string

// Todo statuses.
const (
	TodoPending    TodoStatus = "pending"
	TodoInProgress TodoStatus = "in_progress"
	TodoCompleted  TodoStatus = "completed"
	TodoCancelled  TodoStatus = "cancelled"
)

// TodoPriority is a todo's priority.
type TodoPriority string

// Todo priorities.
const (
	PriorityHigh   TodoPriority = "high"
	PriorityMedium TodoPriority = "medium"
	PriorityLow    TodoPriority = "low"
)

// Todo is one entry of a session's todo list.
type Todo struct {
	Content  string       `json:"content"`
	Status   TodoStatus   `json:"status"`
	Priority TodoPriority `json:"priority"`
}
