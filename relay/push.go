package relay

import (
	"context"
	"net/http"
	"net/url"
)

// Kinds of a push event (the reference CLI's SessionNotificationKind).
const (
	PushDone       = "done"       // a turn ended and nothing waits to run
	PushPermission = "permission" // a tool waits for a person's permission
	PushQuestion   = "question"   // the agent asked a question
)

// PushEvent is the body of POST /v1/sessions/:id/push-event: Kind one of
// the Push* kinds, Title 1–200 and Body 1–500 characters, Data passed to
// the apps' notification as is. The relay reads all of it in clear: it
// must name nothing of the transcript.
type PushEvent struct {
	Kind  string         `json:"kind"`
	Title string         `json:"title"`
	Body  string         `json:"body"`
	Data  map[string]any `json:"data,omitempty"`
}

// PushResult is the relay's answer: Result "no_tokens", "sent", "failed",
// "suppressed", … with Reason for a failure (fields the relay leaves out
// are zero).
type PushResult struct {
	Success bool   `json:"success"`
	Result  string `json:"result"`
	Reason  string `json:"reason,omitempty"`
}

// PushEvent is POST /v1/sessions/:id/push-event: the relay tells the
// account's apps (an ephemeral session-event) and sends a device push when
// it is configured to. Errors: those of every call (HTTPError, …).
func (a *API) PushEvent(ctx context.Context, sessionID string, ev PushEvent) (PushResult, error) {
	var out PushResult
	err := a.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/push-event", nil, ev, &out)
	return out, err
}
