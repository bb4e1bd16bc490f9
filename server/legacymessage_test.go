package server_test

import (
	"testing"

	"github.com/happy-dev/happy/server/servertest"
)

// TestLegacyMessageEvent: the socket event message {sid, message,
// localId?} (how happy-coder 0.13 sends agent output) is stored as a POST
// of that one message would be: the same account check, the same
// idempotency by localId, the same new-message fan-out; a message without
// localId is stored as a new row; another account's session is not found,
// bad parameters are refused, and nothing reaches another account.
func TestLegacyMessageEvent(t *testing.T) {
	r := servertest.Start(t)
	a, other := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	writer := sessionSocket(t, r.URL, a.token, sid)
	app := listen(t, userSocket(t, r.URL, a.token), "update")
	reader := listen(t, sessionSocket(t, r.URL, a.token, sid), "update")
	stranger := listen(t, userSocket(t, r.URL, other.token), "update")

	eq(t, "reply", call(t, writer, "message", map[string]any{"sid": sid, "message": "c2VhbGVk", "localId": "l1"}), map[string]any{"result": "success", "seq": 1.0, "localId": "l1"})
	for name, in := range map[string]*inbox{"app": app, "reader": reader} {
		body := obj(t, in.nextObj("update")["body"])
		msg := obj(t, body["message"])
		eq(t, name+" update", []any{body["t"], body["sid"], msg["seq"], msg["localId"], msg["content"]},
			[]any{"new-message", sid, 1.0, "l1", map[string]any{"t": "encrypted", "c": "c2VhbGVk"}})
	}
	// The same localId again: the row it holds, nothing new.
	eq(t, "again", call(t, writer, "message", map[string]any{"sid": sid, "message": "b3RoZXI=", "localId": "l1"}), map[string]any{"result": "success", "seq": 1.0, "localId": "l1"})
	// Without a localId: a new row, under a localId the relay gives it.
	got := call(t, writer, "message", map[string]any{"sid": sid, "message": "dHdv"})
	if got["result"] != "success" || got["seq"] != 2.0 || got["localId"] == "" || got["localId"] == nil {
		t.Fatalf("without localId: %v", got)
	}
	rows := a.must(200, "GET", "/v3/sessions/"+sid+"/messages", nil)["messages"].([]any)
	eq(t, "rows", len(rows), 2)
	eq(t, "first row", obj(t, rows[0])["content"], map[string]any{"t": "encrypted", "c": "c2VhbGVk"})
	eq(t, "second row", []any{obj(t, rows[1])["content"], obj(t, rows[1])["localId"]}, []any{map[string]any{"t": "encrypted", "c": "dHdv"}, got["localId"]})
	eq(t, "app's second update", obj(t, obj(t, app.nextObj("update")["body"])["message"])["seq"], 2.0)

	// Another account cannot write into the session.
	intruder := userSocket(t, r.URL, other.token)
	eq(t, "another account", call(t, intruder, "message", map[string]any{"sid": sid, "message": "eA==", "localId": "x"}), map[string]any{"result": "error", "message": "Session not found"})
	for name, bad := range map[string]map[string]any{
		"no sid":           {"message": "x"},
		"no message":       {"sid": sid},
		"not a string":     {"sid": sid, "message": 5},
		"localId not text": {"sid": sid, "message": "x", "localId": 5},
		"empty localId":    {"sid": sid, "message": "x", "localId": ""},
	} {
		eq(t, name, call(t, writer, "message", bad), map[string]any{"result": "error", "message": "Invalid parameters"})
	}
	eq(t, "rows after", len(a.must(200, "GET", "/v3/sessions/"+sid+"/messages", nil)["messages"].([]any)), 2)
	stranger.none()
}
