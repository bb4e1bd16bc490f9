package codex

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// Agent is a Codex Client as the session runner drives it. The runner
// records prompts and answers in the transcript itself, so the Agent's
// events leave out their echo (the user prompts Codex reports, and the
// resolutions read back from happy's own answers); a recorded traffic log
// still replays with them.
type Agent struct {
	*Client
}

var _ agent.Agent = (*Agent)(nil)

// NewAgent wraps a started Client (call it before the first prompt).
func NewAgent(c *Client) *Agent {
	c.runnerOwnsControl.Store(true)
	return &Agent{Client: c}
}

// Prompt implements agent.Agent: the text, and image files as image
// inputs (a data: or http(s) URL as is, a file:// URL as a local path);
// other attachments are not sent (Codex takes images only) and are logged.
func (a *Agent) Prompt(ctx context.Context, p agent.Prompt) error {
	cp := Prompt{Text: p.Text}
	for _, f := range p.Files {
		switch {
		case !strings.HasPrefix(f.Mime, "image/"):
			a.opts.Logger.Warn().Str("mime", f.Mime).Str("file", f.Filename).Msg("codex takes images only; attachment not sent")
		case strings.HasPrefix(f.URL, "file://"):
			cp.Images = append(cp.Images, Image{Path: strings.TrimPrefix(f.URL, "file://")})
		default:
			cp.Images = append(cp.Images, Image{URL: f.URL})
		}
	}
	return a.Client.Prompt(ctx, cp)
}

// Decide implements agent.Agent. A rejection because the turn is being
// aborted (reason cancelled) is sent as Codex's cancel (abort). A call that
// waits for no answer (never did, or was answered) gives agent.ErrStale.
func (a *Agent) Decide(ctx context.Context, callID string, d agent.Verdict) error {
	var err error
	if d.Decision == agent.DecisionReject && d.Reason == agent.ReasonCancelled {
		err = a.cancel(ctx, callID)
	} else {
		err = a.Answer(ctx, callID, d.Decision)
	}
	if errors.Is(err, ErrNoPendingRequest) {
		return fmt.Errorf("%w: %w", agent.ErrStale, err)
	}
	return err
}

// AnswerQuestion implements agent.Agent.
func (a *Agent) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	err := a.Client.AnswerQuestion(ctx, callID, answers)
	if errors.Is(err, ErrNoPendingRequest) {
		return fmt.Errorf("%w: %w", agent.ErrStale, err)
	}
	return err
}
