package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
		eq(t, c.kind+" reply", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev), map[string]any{"success": true, "result": "no_tokens", "tokens": float64(0), "delivered": float64(0)})
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

// fakeExpo is Expo's push API on a loopback port: it records each request
// (the raw JSON) and answers a ticket per message: ok, except for tokens
// named in errs (ticket error with that details.error), or answers status
// to every request when status is set.
type fakeExpo struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	errs   map[string]string
	status int
}

func startExpo(t *testing.T, errs map[string]string) *fakeExpo {
	f := &fakeExpo{errs: errs}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, b)
		f.heads = append(f.heads, r.Header.Clone())
		status := f.status
		f.mu.Unlock()
		if r.Method != http.MethodPost || r.URL.Path != "/--/api/v2/push/send" {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		if status != 0 {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"errors":[{"code":"INTERNAL_SERVER_ERROR","message":"An unknown error occurred."}]}`))
			return
		}
		var msgs []map[string]any
		if err := json.Unmarshal(b, &msgs); err != nil {
			http.Error(w, "not a JSON array", http.StatusBadRequest)
			return
		}
		tickets := make([]map[string]any, len(msgs))
		for i, m := range msgs {
			to, _ := m["to"].(string)
			if e, ok := f.errs[to]; ok {
				tickets[i] = map[string]any{"status": "error", "message": to + " failed", "details": map[string]any{"error": e}}
			} else {
				tickets[i] = map[string]any{"status": "ok", "id": fmt.Sprintf("ticket-%d", i)}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": tickets})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeExpo) url() string { return f.srv.URL + "/--/api/v2/push/send" }

func (f *fakeExpo) requests() ([][]byte, []http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.bodies...), append([]http.Header(nil), f.heads...)
}

func expoToken(i int) string { return fmt.Sprintf("ExponentPushToken[tok-%03d]", i) }

// TestExpoPush: a push-event goes to every Expo token of the account, in
// batches of at most 100, as exactly the JSON the reference relay sends
// but with nothing of the session in it (a fixed title by kind, the
// folder's last name from happy's CLI or a fixed text from another CLI,
// data with the session id); a DeviceNotRegistered ticket removes its
// token, other errors are counted by reason, and /metrics shows it all.
func TestExpoPush(t *testing.T) {
	expo := startExpo(t, map[string]string{expoToken(7): "DeviceNotRegistered", expoToken(150): "MessageTooBig"})
	r := servertest.StartConfig(t, server.Config{ExpoPushURL: expo.url()})
	a := newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	const n = 205
	for i := range n {
		a.must(200, "POST", "/v1/push-tokens", map[string]any{"token": expoToken(i)})
	}
	a.must(200, "POST", "/v1/push-tokens", map[string]any{"token": "not-an-expo-token"})

	// happy's CLI: the folder's last name, a sealed part (which Expo never gets).
	ev := map[string]any{"kind": "permission", "title": "anything the CLI says", "body": "proj", "sealed": "c2VhbGVk",
		"data": map[string]any{"sessionId": sid, "sessionTitle": "Fix the login bug"}}
	eq(t, "reply", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev), map[string]any{"success": true, "result": "sent",
		"tokens": float64(n + 1), "delivered": float64(n - 2), "reason": "Expo refused a push: " + expoToken(150) + " failed"})
	bodies, heads := expo.requests()
	if len(bodies) != 3 {
		t.Fatalf("%d requests to Expo, want 3 batches", len(bodies))
	}
	var sizes []int
	var sent []string
	for _, b := range bodies {
		var msgs []map[string]any
		if err := json.Unmarshal(b, &msgs); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(msgs))
		for _, m := range msgs {
			sent = append(sent, m["to"].(string))
		}
	}
	eq(t, "batch sizes", sizes, []int{100, 100, 5})
	eq(t, "content type", heads[0].Get("Content-Type"), "application/json")
	// Every token once; the malformed one is never sent.
	want := make([]string, n)
	for i := range n {
		want[i] = expoToken(i)
	}
	slices.Sort(sent)
	eq(t, "recipients", sent, want)
	firstMessage := func(b []byte) (string, string) {
		var msgs []json.RawMessage
		if err := json.Unmarshal(b, &msgs); err != nil || len(msgs) == 0 {
			t.Fatalf("batch %.200s: %v", b, err)
		}
		var m struct{ To string }
		_ = json.Unmarshal(msgs[0], &m)
		return string(msgs[0]), m.To
	}
	got, to := firstMessage(bodies[0])
	eq(t, "the exact message", got, `{"to":"`+to+`","title":"Permission request","body":"proj","data":{"sessionId":"`+sid+`","kind":"permission","url":"/session/`+sid+`"},"sound":"default"}`)
	for _, b := range bodies {
		for _, secret := range []string{"Fix the login bug", "anything the CLI says", "c2VhbGVk"} {
			if strings.Contains(string(b), secret) {
				t.Fatalf("Expo got %q", secret)
			}
		}
	}
	toks := a.must(200, "GET", "/v1/push-tokens", nil)["tokens"].([]any)
	if len(toks) != n {
		t.Fatalf("%d tokens left, want %d", len(toks), n)
	}
	for _, x := range toks {
		if x.(map[string]any)["token"] == expoToken(7) {
			t.Fatal("the DeviceNotRegistered token is still there")
		}
	}
	metric(t, r.URL, `happy_relay_push_sent_total{service="expo"} 203`)
	metric(t, r.URL, `happy_relay_push_removed_total{service="expo"} 1`)
	metric(t, r.URL, `happy_relay_push_errors_total{reason="DeviceNotRegistered",service="expo"} 1`)
	metric(t, r.URL, `happy_relay_push_errors_total{reason="MessageTooBig",service="expo"} 1`)
	metric(t, r.URL, `happy_relay_push_errors_total{reason="invalid_token",service="expo"} 1`)

	// Another CLI (no sealed part) sends the session title as the body:
	// Expo gets a fixed text instead.
	ev = map[string]any{"kind": "done", "title": "It's ready!", "body": "Fix the login bug"}
	a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev)
	bodies, _ = expo.requests()
	if len(bodies) != 6 {
		t.Fatalf("%d requests to Expo, want 6", len(bodies))
	}
	got, to = firstMessage(bodies[3])
	eq(t, "the fixed body", got, `{"to":"`+to+`","title":"It's ready!","body":"A session needs you","data":{"sessionId":"`+sid+`","kind":"done","url":"/session/`+sid+`"},"sound":"default"}`)

	// Expo down: the event is still taken, the reply says why, nothing is removed.
	expo.mu.Lock()
	expo.status = http.StatusInternalServerError
	expo.mu.Unlock()
	eq(t, "Expo down", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "question", "title": "t", "body": "proj", "sealed": "c2VhbGVk"}),
		map[string]any{"success": true, "result": "failed", "tokens": float64(n), "delivered": float64(0),
			"reason": "Expo push failed: the Expo push API answered 500: INTERNAL_SERVER_ERROR: An unknown error occurred."})
	metric(t, r.URL, `happy_relay_push_errors_total{reason="request",service="expo"} 204`)
	if toks := a.must(200, "GET", "/v1/push-tokens", nil)["tokens"].([]any); len(toks) != n {
		t.Fatalf("%d tokens after Expo failed, want %d", len(toks), n)
	}
	eq(t, "status", a.must(200, "GET", "/v1/push/status", nil), map[string]any{
		"expo": map[string]any{"configured": true, "tokens": float64(n)}, "webPush": map[string]any{"subscriptions": float64(0)}})
}

// TestExpoPushOff: without an Expo URL the relay sends nothing and says so.
func TestExpoPushOff(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{})
	a := newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	a.must(200, "POST", "/v1/push-tokens", map[string]any{"token": expoToken(1)})
	eq(t, "reply", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "done", "title": "t", "body": "b"}),
		map[string]any{"success": true, "result": "failed", "tokens": float64(1), "delivered": float64(0), "reason": "Expo push is not configured on this relay"})
	eq(t, "status", a.must(200, "GET", "/v1/push/status", nil), map[string]any{
		"expo": map[string]any{"configured": false, "tokens": float64(1)}, "webPush": map[string]any{"subscriptions": float64(0)}})
	eq(t, "bad sealed", a.must(400, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "done", "title": "t", "body": "b", "sealed": "not base64!"}),
		map[string]any{"error": "sealed must be base64 of at most 3000 characters"})
}
