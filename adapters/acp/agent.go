package acp

import (
	"context"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/session"
)

// Agent is a Client as the session runner drives it.
type Agent struct {
	*Client
}

var _ session.Agent = (*Agent)(nil)

// NewAgent wraps a started Client.
func NewAgent(c *Client) *Agent { return &Agent{Client: c} }

// Prompt implements session.Agent: the text and the attachments (see
// Client.Prompt).
func (a *Agent) Prompt(ctx context.Context, p session.Prompt) error {
	return a.Client.Prompt(ctx, Prompt{Text: p.Text, Files: p.Files})
}

// Decide implements session.Agent: the decision and its reason go to
// Client.Decide. A call that waits for no answer (never did, or was
// answered) gives session.ErrStale.
func (a *Agent) Decide(ctx context.Context, callID string, d session.Decision) error {
	err := a.Client.Decide(ctx, callID, Answer{Decision: d.Decision, Reason: d.Reason})
	if errors.Is(err, ErrNoPendingRequest) {
		return fmt.Errorf("%w: %w", session.ErrStale, err)
	}
	return err
}

// AnswerQuestion implements session.Agent. ACP agents ask no questions
// (elicitation is not offered), so no call ever waits for an answer.
func (a *Agent) AnswerQuestion(_ context.Context, callID string, _ [][]string) error {
	return fmt.Errorf("%w: %s: ACP agents ask no questions", session.ErrStale, callID)
}
