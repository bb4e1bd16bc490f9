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
// the apps' notification as is. The relay reads all of these in clear:
// they must name nothing of the transcript. Sealed (happy's relay; others
// ignore it) is the event's detail sealed with the session's cipher
// (PushDetail, base64, at most 3000 characters), which the relay forwards
// to the web app's Web Push subscriptions and cannot read.
type PushEvent struct {
	Kind   string         `json:"kind"`
	Title  string         `json:"title"`
	Body   string         `json:"body"`
	Data   map[string]any `json:"data,omitempty"`
	Sealed string         `json:"sealed,omitempty"`
}

// PushDetail is the plaintext of PushEvent.Sealed, what only the
// account's devices read: Kind and SessionID as in clear (a reader checks
// they match the clear ones), the session's Title, for a blocked tool its
// CallID, Tool (canonical name) and Summary (its command, path, question,
// …), for a finished turn its Status ("completed", "failed", "cancelled")
// and Summary (the start of the last answer, or the error), and Time (Unix
// ms). Fields that do not apply are left out.
type PushDetail struct {
	HappyPush int    `json:"happyPush"` // 1
	Kind      string `json:"kind"`
	SessionID string `json:"sessionId"`
	Title     string `json:"title,omitempty"`
	CallID    string `json:"callID,omitempty"`
	Tool      string `json:"tool,omitempty"`
	Summary   string `json:"summary,omitempty"`
	Status    string `json:"status,omitempty"`
	Time      int64  `json:"time"`
}

// PushResult is the relay's answer: Result "no_tokens", "sent", "failed",
// "suppressed", … with Reason for a failure; Tokens is how many device
// push targets the account has, Delivered how many a push service took
// (fields the relay leaves out are zero).
type PushResult struct {
	Success   bool   `json:"success"`
	Result    string `json:"result"`
	Reason    string `json:"reason,omitempty"`
	Tokens    int    `json:"tokens,omitempty"`
	Delivered int    `json:"delivered,omitempty"`
}

// PushEvent is POST /v1/sessions/:id/push-event: the relay tells the
// account's apps (an ephemeral session-event) and sends a device push when
// it is configured to. Errors: those of every call (HTTPError, …).
func (a *API) PushEvent(ctx context.Context, sessionID string, ev PushEvent) (PushResult, error) {
	var out PushResult
	err := a.do(ctx, http.MethodPost, "/v1/sessions/"+url.PathEscape(sessionID)+"/push-event", nil, ev, &out)
	return out, err
}

// PushStatus is happy's relay's GET /v1/push/status: whether it sends
// Expo pushes (the reference app) and how many Expo tokens and Web Push
// subscriptions the account has there.
type PushStatus struct {
	Expo struct {
		Configured bool `json:"configured"`
		Tokens     int  `json:"tokens"`
	} `json:"expo"`
	WebPush struct {
		Subscriptions int `json:"subscriptions"`
	} `json:"webPush"`
}

// PushStatus is GET /v1/push/status. Errors: those of every call; a relay
// without the route gives a *StatusError wrapping ErrNotFound.
func (a *API) PushStatus(ctx context.Context) (PushStatus, error) {
	var out PushStatus
	err := a.do(ctx, http.MethodGet, "/v1/push/status", nil, nil, &out)
	return out, err
}
