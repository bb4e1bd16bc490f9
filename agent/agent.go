package agent

import (
	"context"
	"errors"
)

// Agent is a running agent as the session runner drives it. Adapters
// implement it (Claude SDK, local and dual modes, Codex app-server and MCP,
// ACP). Its methods are safe for concurrent use.
type Agent interface {
	// Events delivers the agent's events in order. The channel is closed
	// when the agent has exited and nothing more will come.
	Events() <-chan Event
	// Prompt starts a turn with the prompt (or queues it while one runs).
	Prompt(ctx context.Context, p Prompt) error
	// Decide answers a permission the agent asked for: the tool call callID
	// was announced with a ToolBlocked event carrying a PermissionRequest.
	Decide(ctx context.Context, callID string, v Verdict) error
	// AnswerQuestion answers a question the agent asked (ToolBlocked with a
	// QuestionRequest): per question, the selected labels.
	AnswerQuestion(ctx context.Context, callID string, answers [][]string) error
	// Interrupt aborts the running turn; the agent ends it with TurnEnded.
	Interrupt(ctx context.Context) error
	// Close stops the agent and reaps its processes.
	Close() error
}

// ExitExplainer is an Agent that can say why its process ended when it
// ended with a failure: its exit status and the last words it wrote on
// stderr (e.g. "claude exit status 1: error: option … is invalid"), "" for
// a clean exit or while it runs. The runner adds it to the answer of a
// prompt the agent exited without answering, so the person reads the
// agent's own reason.
type ExitExplainer interface {
	ExitDetail() string
}

// Verdict is what the runner tells an agent about a permission: the
// canonical decision, the patterns an "always" covers (from the block), and
// why (for rejections nobody typed: a rule, a timeout, a cancelled turn).
type Verdict struct {
	Decision Decision
	Always   []string
	Reason   string
}

// ErrStale is returned by Agent.Decide and Agent.AnswerQuestion when the
// tool call is not waiting for an answer (it never was, or it was answered
// already: the first answer wins).
var ErrStale = errors.New("stale answer: the tool call is not waiting for one")

// ErrUnsupportedInput is returned (wrapped, naming what) by Prompt for an
// attachment the agent does not take (an image for an agent without image
// input, a file type it cannot read): the runner records the prompt and the
// refusal in the transcript, and the agent goes on.
var ErrUnsupportedInput = errors.New("the agent does not take this input")

// Prompt is a user prompt for the agent: typed in another happy, sent from
// the web or reference app over the relay, or given with -p.
type Prompt struct {
	// MessageID is the canonical user message id when the sender wrote one
	// (canonical shape); "" for the reference app's legacy shape.
	MessageID string
	Text      string
	Files     []PromptFile
}
