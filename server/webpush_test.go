package server_test

import (
	"encoding/base64"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/webpushtest"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

// subscription is the body a browser's PushSubscription.toJSON() gives.
func subscription(endpoint, p256dh, auth string) map[string]any {
	return map[string]any{"endpoint": endpoint, "expirationTime": nil, "keys": map[string]any{"p256dh": p256dh, "auth": auth}}
}

// TestWebPush: a browser subscribes with the relay's VAPID key; a
// push-event reaches its push service encrypted for it (RFC 8291, what the
// fake service decrypts with the subscription's private key) and signed
// with that key (RFC 8292), carrying only {v, sessionId, kind, sealed};
// a subscription the service says is gone (410) is removed; the VAPID key
// is kept (0600) across restarts; revoking the account's tokens drops its
// subscriptions.
func TestWebPush(t *testing.T) {
	ps := webpushtest.Start(t)
	dir := t.TempDir()
	// The embedded store: the key is a file of the data folder (on
	// PostgreSQL it lives in the database: TestWebPushKeySharedOnPostgres).
	db := "sqlite:" + filepath.Join(dir, "happy.db")
	cfg := server.Config{DataDir: dir, Database: db, WebPushServices: []string{"127.0.0.1"}, WebPushSubject: "mailto:ops@example.org"}
	r := servertest.StartConfig(t, cfg)
	a, other := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)

	key := a.must(200, "GET", "/v1/web-push/vapid-public-key", nil)["publicKey"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil || len(raw) != 65 || raw[0] != 4 {
		t.Fatalf("VAPID public key %q: %d bytes, %v", key, len(raw), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "vapid.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("vapid.key: %v %v", fi, err)
	}

	p256dh, auth := ps.Keys()
	a.must(200, "POST", "/v1/web-push/subscriptions", subscription(ps.URL+"/sub/phone", p256dh, auth))
	a.must(200, "POST", "/v1/web-push/subscriptions", subscription(ps.URL+"/sub/old-laptop", p256dh, auth))
	ps.SetStatus("/sub/old-laptop", http.StatusGone)
	eq(t, "status", a.must(200, "GET", "/v1/push/status", nil), map[string]any{
		"expo": map[string]any{"configured": false, "tokens": float64(0)}, "webPush": map[string]any{"subscriptions": float64(2)}})

	sealed := base64.StdEncoding.EncodeToString([]byte("ciphertext the relay cannot open"))
	ev := map[string]any{"kind": "permission", "title": "Permission request", "body": "proj", "sealed": sealed,
		"data": map[string]any{"sessionId": sid, "kind": "permission"}}
	eq(t, "reply", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev),
		map[string]any{"success": true, "result": "sent", "tokens": float64(2), "delivered": float64(1)})
	msgs := []webpushtest.Message{ps.Next(t, 10*time.Second), ps.Next(t, 10*time.Second)}
	paths := map[string]bool{}
	for _, m := range msgs {
		if m.Err != nil {
			t.Fatalf("message to %s: %v", m.Path, m.Err)
		}
		paths[m.Path] = true
		eq(t, "payload", string(m.Payload), `{"v":1,"sessionId":"`+sid+`","kind":"permission","sealed":"`+sealed+`"}`)
		eq(t, "signed with the relay's key", m.VAPIDKey, key)
		eq(t, "audience", m.Claims["aud"], ps.URL)
		eq(t, "subject", m.Claims["sub"], "mailto:ops@example.org")
		eq(t, "urgency", m.Header.Get("Urgency"), "high")
		eq(t, "ttl", m.Header.Get("TTL"), "3600")
		if strings.Contains(string(m.Body), "proj") || strings.Contains(string(m.Body), sid) {
			t.Fatal("the message is not encrypted")
		}
		// Padded to one record: its length tells nothing of the event.
		eq(t, "body size", len(m.Body), 4096)
	}
	eq(t, "both endpoints", paths, map[string]bool{"/sub/phone": true, "/sub/old-laptop": true})
	eq(t, "the gone one is removed", a.must(200, "GET", "/v1/push/status", nil)["webPush"], map[string]any{"subscriptions": float64(1)})
	metric(t, r.URL, `happy_relay_push_sent_total{service="webpush"} 1`)
	metric(t, r.URL, `happy_relay_push_removed_total{service="webpush"} 1`)
	metric(t, r.URL, `happy_relay_push_errors_total{reason="gone",service="webpush"} 1`)

	// A push-event without a sealed part (another CLI) carries no more.
	a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "done", "title": "It's ready!", "body": "Fix the login bug"})
	m := ps.Next(t, 10*time.Second)
	eq(t, "payload without sealed", string(m.Payload), `{"v":1,"sessionId":"`+sid+`","kind":"done"}`)
	eq(t, "urgency of done", m.Header.Get("Urgency"), "normal")

	// Refusals, each with its reason.
	for _, c := range []struct {
		name string
		body any
		want string
	}{
		{"no endpoint", map[string]any{"keys": map[string]any{"p256dh": p256dh, "auth": auth}}, "endpoint is a required string"},
		{"unknown service", subscription("https://push.evil.example/x", p256dh, auth), "endpoint must be an https URL of a known push service (127.0.0.1)"},
		{"plain http elsewhere", subscription("http://localhost:1/x", p256dh, auth), "endpoint must be an https URL of a known push service (127.0.0.1)"},
		{"no keys", map[string]any{"endpoint": ps.URL + "/sub/x"}, "keys.p256dh and keys.auth are required strings"},
		{"not a point", subscription(ps.URL+"/sub/x", base64.RawURLEncoding.EncodeToString(make([]byte, 65)), auth), "keys.p256dh is not a P-256 public key (65-byte uncompressed point)"},
		{"short auth", subscription(ps.URL+"/sub/x", p256dh, "AAAA"), "keys.auth must be base64url of 16 bytes"},
	} {
		eq(t, c.name, a.must(400, "POST", "/v1/web-push/subscriptions", c.body), map[string]any{"error": c.want})
	}
	anon := api{t: t, base: r.URL}
	eq(t, "unauthenticated", anon.must(401, "POST", "/v1/web-push/subscriptions", subscription(ps.URL+"/sub/x", p256dh, auth))["error"] != nil, true)

	// Another account's pushes never reach this subscription, nor can it delete it.
	other.must(200, "DELETE", "/v1/web-push/subscriptions?endpoint="+ps.URL+"/sub/phone", nil)
	osid := other.createSession("tag", "m")["id"].(string)
	eq(t, "other account", other.must(200, "POST", "/v1/sessions/"+osid+"/push-event", map[string]any{"kind": "done", "title": "t", "body": "b"})["result"], "no_tokens")
	eq(t, "still subscribed", a.must(200, "GET", "/v1/push/status", nil)["webPush"], map[string]any{"subscriptions": float64(1)})

	// Unsubscribe by body, then by query.
	a.must(200, "DELETE", "/v1/web-push/subscriptions", map[string]any{"endpoint": ps.URL + "/sub/phone"})
	eq(t, "unsubscribed", a.must(200, "GET", "/v1/push/status", nil)["webPush"], map[string]any{"subscriptions": float64(0)})
	a.must(200, "POST", "/v1/web-push/subscriptions", subscription(ps.URL+"/sub/phone", p256dh, auth))
	a.must(200, "DELETE", "/v1/web-push/subscriptions?endpoint="+ps.URL+"/sub/phone", nil)
	eq(t, "unsubscribed by query", a.must(200, "GET", "/v1/push/status", nil)["webPush"], map[string]any{"subscriptions": float64(0)})

	// Revoking the account's tokens drops its subscriptions: a device signed
	// in again (a new token of the same key) finds none.
	acct := servertest.NewAccount(t, r.URL)
	c := api{t: t, base: r.URL, token: acct.Token}
	c.must(200, "POST", "/v1/web-push/subscriptions", subscription(ps.URL+"/sub/phone", p256dh, auth))
	c.must(200, "POST", "/v1/auth/revoke", map[string]any{})
	c = api{t: t, base: r.URL, token: servertest.SignIn(t, r.URL, acct.Key).Token}
	eq(t, "after revoking", c.must(200, "GET", "/v1/push/status", nil)["webPush"], map[string]any{"subscriptions": float64(0)})

	// The same data folder, the same key.
	r.Server.Close()
	r2 := servertest.StartConfig(t, server.Config{DataDir: dir, Database: db})
	eq(t, "key after restart", newAPI(t, r2).must(200, "GET", "/v1/web-push/vapid-public-key", nil)["publicKey"], key)
}

// TestWebPushKeySharedOnPostgres: relays on one PostgreSQL database sign
// with one VAPID key (a browser subscribed through one of them gets pushes
// from any), the first relay's data folder key imported.
func TestWebPushKeySharedOnPostgres(t *testing.T) {
	db := pgtest.URL(t)
	dir := t.TempDir()
	first := servertest.StartConfig(t, server.Config{DataDir: dir, Database: "sqlite:" + filepath.Join(dir, "happy.db")})
	key := newAPI(t, first).must(200, "GET", "/v1/web-push/vapid-public-key", nil)["publicKey"]
	first.Server.Close()
	a := servertest.StartConfig(t, server.Config{Database: db, DataDir: first.DataDir})
	b := servertest.StartConfig(t, server.Config{Database: db})
	eq(t, "imported", newAPI(t, a).must(200, "GET", "/v1/web-push/vapid-public-key", nil)["publicKey"], key)
	eq(t, "shared", newAPI(t, b).must(200, "GET", "/v1/web-push/vapid-public-key", nil)["publicKey"], key)
}
