package server_test

import (
	"testing"
	"time"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// TestPushEventFansOut: a push-event reaches every socket of the account as
// an ephemeral session-event (two apps and the session's own socket), and
// no socket of another account.
func TestPushEventFansOut(t *testing.T) {
	at := time.UnixMilli(1_760_000_000_000)
	r := servertest.StartConfig(t, server.Config{Now: func() time.Time { return at }})
	a, other := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	app1 := listen(t, userSocket(t, r.URL, a.token), "ephemeral", "update")
	app2 := listen(t, userSocket(t, r.URL, a.token), "ephemeral", "update")
	sess := listen(t, sessionSocket(t, r.URL, a.token, sid), "ephemeral", "update")
	stranger := listen(t, userSocket(t, r.URL, other.token), "ephemeral", "update")

	for _, c := range []struct {
		kind, title, body string
	}{
		{"permission", "Permission request", "proj"},
		{"question", "Clarification needed", "proj"},
		{"done", "It's ready!", "proj"},
	} {
		ev := map[string]any{"kind": c.kind, "title": c.title, "body": c.body,
			"data": map[string]any{"sessionId": sid, "kind": c.kind, "url": "/session/" + sid}}
		eq(t, c.kind+" reply", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev), map[string]any{"success": true, "result": "no_tokens"})
		want := map[string]any{"type": "session-event", "sessionId": sid, "kind": c.kind, "title": c.title, "body": c.body, "timestamp": float64(at.UnixMilli())}
		for name, in := range map[string]*inbox{"app 1": app1, "app 2": app2, "session socket": sess} {
			eq(t, c.kind+" to "+name, in.nextObj("ephemeral"), want)
		}
	}
	for _, c := range []struct {
		name string
		body any
		want string
	}{
		{"no kind", map[string]any{"title": "t", "body": "b"}, `kind must be "done", "permission" or "question"`},
		{"no body", map[string]any{"kind": "done", "title": "t"}, "body must be a string of 1 to 500 characters"},
		{"empty title", map[string]any{"kind": "done", "title": "", "body": "b"}, "title must be a string of 1 to 200 characters"},
	} {
		eq(t, c.name, a.must(400, "POST", "/v1/sessions/"+sid+"/push-event", c.body), map[string]any{"error": c.want})
	}
	// Another account cannot push to this session.
	eq(t, "foreign session", other.must(404, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "done", "title": "t", "body": "b"}),
		map[string]any{"error": "Session not found"})
	for _, in := range []*inbox{app1, app2, sess, stranger} {
		in.none()
	}
}
