package acp

import (
	"context"
	"fmt"

	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
)

// Agent is a Client as the session runner drives it.
type Agent struct {
	*Client
}

var _ agent.Agent = (*Agent)(nil)

// NewAgent wraps a started Client (call it before the first prompt). The
// runner records prompts and answers in the transcript itself, so from now
// on Events leaves out their echo (happy's prompt and the resolutions read
// back from its own answers); a recorded traffic log still replays with
// them.
func NewAgent(c *Client) *Agent {
	c.s.RunnerRecordsControl()
	return &Agent{Client: c}
}

// Prompt implements agent.Agent: the text and the attachments (see
// Client.Prompt).
func (a *Agent) Prompt(ctx context.Context, p agent.Prompt) error {
	return a.Client.Prompt(ctx, Prompt{Text: p.Text, Files: p.Files})
}

// Decide implements agent.Agent: the decision and its reason go to
// Client.Decide. A call that waits for no answer (never did, or was
// answered) gives agent.ErrStale.
func (a *Agent) Decide(ctx context.Context, callID string, d agent.Verdict) error {
	return rpcagent.Stale(a.Client.Decide(ctx, callID, Answer{Decision: d.Decision, Reason: d.Reason}))
}

// AnswerQuestion implements agent.Agent. ACP agents ask no questions
// (elicitation is not offered), so no call ever waits for an answer.
func (a *Agent) AnswerQuestion(_ context.Context, callID string, _ [][]string) error {
	return fmt.Errorf("%w: %s: ACP agents ask no questions", agent.ErrStale, callID)
}
