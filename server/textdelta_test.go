package server_test

import (
	"strings"
	"testing"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// TestTextDeltaForwarded: a text-delta from the session's socket reaches the
// session's sockets and the account's apps that announced liveText in their
// handshake (happy's web app) as an ephemeral, as it came and unstored; a
// socket that did not (the reference app, which logs every ephemeral it
// does not know) gets nothing, nor does another account, even announcing
// it; bad parameters get an error.
func TestTextDeltaForwarded(t *testing.T) {
	r := servertest.Start(t)
	a, other := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	writer := sessionSocket(t, r.URL, a.token, sid)
	app := listen(t, dial(t, r.URL, map[string]any{"token": a.token, "clientType": "user-scoped", "liveText": true}), "ephemeral", "update")
	reader := listen(t, dial(t, r.URL, map[string]any{"token": a.token, "clientType": "session-scoped", "sessionId": sid, "liveText": true}), "ephemeral", "update")
	refApp := listen(t, userSocket(t, r.URL, a.token), "ephemeral", "update")
	refReader := listen(t, sessionSocket(t, r.URL, a.token, sid), "ephemeral", "update")
	notTrue := listen(t, dial(t, r.URL, map[string]any{"token": a.token, "clientType": "user-scoped", "liveText": "yes"}), "ephemeral", "update")
	stranger := listen(t, dial(t, r.URL, map[string]any{"token": other.token, "clientType": "user-scoped", "liveText": true}), "ephemeral", "update")

	eq(t, "reply", call(t, writer, "text-delta", map[string]any{"sid": sid, "message": "c2VhbGVk"}), map[string]any{"result": "success"})
	want := map[string]any{"type": "text-delta", "id": sid, "message": "c2VhbGVk"}
	eq(t, "to the app", app.nextObj("ephemeral"), want)
	eq(t, "to the session's reader", reader.nextObj("ephemeral"), want)
	for name, bad := range map[string]map[string]any{
		"no sid":       {"message": "x"},
		"no message":   {"sid": sid},
		"empty":        {"sid": sid, "message": ""},
		"not a string": {"sid": sid, "message": 5},
		"too large":    {"sid": sid, "message": strings.Repeat("a", server.MaxTextDelta+1)},
	} {
		eq(t, name, call(t, writer, "text-delta", bad), map[string]any{"result": "error", "message": "Invalid parameters"})
	}
	// Nothing was stored.
	eq(t, "rows", len(a.must(200, "GET", "/v3/sessions/"+sid+"/messages", nil)["messages"].([]any)), 0)
	for _, in := range []*inbox{app, reader, refApp, refReader, notTrue, stranger} {
		in.none()
	}
}
