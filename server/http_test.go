package server_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/internal/buildinfo"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

func TestHealth(t *testing.T) {
	r := servertest.Start(t)
	a := api{t: t, base: r.URL}
	m := a.must(200, "GET", "/health", nil)
	eq(t, "keys", keys(m), []string{"service", "status", "timestamp", "version"})
	eq(t, "status", m["status"], "ok")
	eq(t, "version", m["version"], buildinfo.Version)
	eq(t, "service", m["service"], "happy-server")
	if ts, ok := m["timestamp"].(float64); !ok || ts < 1.7e12 {
		t.Fatalf("timestamp = %v, want Unix ms", m["timestamp"])
	}
}

func TestAuthChallenge(t *testing.T) {
	r := servertest.Start(t)
	a := api{t: t, base: r.URL}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	ch := []byte("0123456789abcdef0123456789abcdef")
	b64 := base64.StdEncoding.EncodeToString
	body := map[string]string{"publicKey": b64(pub), "challenge": b64(ch), "signature": b64(ed25519.Sign(priv, ch))}
	m1 := a.must(200, "POST", "/v1/auth", body)
	eq(t, "success", m1["success"], true)
	tok1, _ := m1["token"].(string)
	if strings.Count(tok1, ".") != 2 {
		t.Fatalf("token %q is not a compact JWS", tok1)
	}
	hdr, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok1, ".")[0])
	eq(t, "token header", string(hdr), `{"alg":"EdDSA"}`)

	// Same key again: same account (a session made with token 1 is listed with token 2).
	u1 := api{t: t, base: r.URL, token: tok1}
	u1.createSession("tag-1", "meta")
	// (A challenge mints one token: the second sign-in signs another.)
	ch2 := []byte("fedcba9876543210fedcba9876543210")
	body2 := map[string]string{"publicKey": b64(pub), "challenge": b64(ch2), "signature": b64(ed25519.Sign(priv, ch2))}
	tok2, _ := a.must(200, "POST", "/v1/auth", body2)["token"].(string)
	u2 := api{t: t, base: r.URL, token: tok2}
	eq(t, "sessions seen by second token", len(arr(t, u2.must(200, "GET", "/v1/sessions", nil)["sessions"])), 1)

	bad := map[string]string{"publicKey": b64(pub), "challenge": b64(ch), "signature": b64(make([]byte, 64))}
	eq(t, "bad signature", a.must(401, "POST", "/v1/auth", bad), map[string]any{"error": "Invalid signature"})
	eq(t, "missing fields", a.must(400, "POST", "/v1/auth", map[string]string{"publicKey": b64(pub)}), map[string]any{"error": "publicKey, challenge and signature are required strings"})
	m := a.must(400, "POST", "/v1/auth", []byte(`{"publicKey": `))
	if !strings.HasPrefix(m["error"].(string), "Invalid JSON") {
		t.Fatalf("malformed JSON error = %q", m["error"])
	}
	m = a.must(400, "POST", "/v1/auth", []byte(`{"publicKey": 5}`))
	eq(t, "type error", m["error"], "Invalid JSON: publicKey must be a string, got number")
	eq(t, "empty body", a.must(400, "POST", "/v1/auth", []byte(``)), map[string]any{"error": "Request body is empty (want a JSON object)"})
}

// protectedRoutes lists every route that needs a token, with a body where it takes one.
func protectedRoutes(sid, mid string) [][3]any {
	return [][3]any{
		{"POST", "/v1/auth/response", map[string]any{"publicKey": base64.StdEncoding.EncodeToString(make([]byte, 32)), "response": "x"}},
		{"POST", "/v1/sessions", map[string]any{"tag": "t", "metadata": "m"}},
		{"GET", "/v1/sessions", nil},
		{"GET", "/v2/sessions/active", nil},
		{"POST", "/v1/sessions/" + sid + "/archive", map[string]any{}},
		{"DELETE", "/v1/sessions/" + sid, nil},
		{"GET", "/v1/sessions/" + sid + "/messages", nil},
		{"POST", "/v3/sessions/" + sid + "/messages", map[string]any{"messages": []any{map[string]any{"localId": "l", "content": "c"}}}},
		{"GET", "/v3/sessions/" + sid + "/messages", nil},
		{"POST", "/v1/sessions/" + sid + "/push-event", map[string]any{"kind": "done", "title": "t", "body": "b"}},
		{"POST", "/v1/sessions/" + sid + "/attachments/request-upload", map[string]any{"filename": "a.png", "size": 3}},
		{"POST", "/v1/sessions/" + sid + "/attachments/request-download", map[string]any{"ref": "sessions/" + sid + "/attachments/x.enc"}},
		{"PUT", "/v1/sessions/" + sid + "/attachments/x.enc", []byte("abc")},
		{"GET", "/v1/sessions/" + sid + "/attachments/x.enc", nil},
		{"POST", "/v1/machines", map[string]any{"id": mid, "metadata": "m"}},
		{"GET", "/v1/machines", nil},
		{"GET", "/v1/machines/" + mid, nil},
		{"GET", "/v1/push-tokens", nil},
		{"POST", "/v1/push-tokens", map[string]any{"token": "x"}},
		{"DELETE", "/v1/push-tokens/x", nil},
		{"GET", "/v1/friends", nil},
		{"GET", "/v1/account/settings", nil},
		{"GET", "/v1/account/profile", nil},
		{"GET", "/v1/artifacts", nil},
		{"GET", "/v1/feed", nil},
	}
}

// TestReferenceAppRoutes: the routes the reference app reads at start that
// this relay has nothing behind answer in the reference relay's shapes,
// empty, for the token's account only (never 404).
func TestReferenceAppRoutes(t *testing.T) {
	r := servertest.Start(t)
	a, b := newAPI(t, r), newAPI(t, r)
	eq(t, "friends", a.must(200, "GET", "/v1/friends", nil), map[string]any{"friends": []any{}})
	eq(t, "settings", a.must(200, "GET", "/v1/account/settings", nil), map[string]any{"settings": nil, "settingsVersion": 0.0})
	eq(t, "feed", a.must(200, "GET", "/v1/feed", nil), map[string]any{"items": []any{}, "hasMore": false})
	eq(t, "feed page", a.must(200, "GET", "/v1/feed?limit=10&before=x", nil), map[string]any{"items": []any{}, "hasMore": false})
	code, v := a.do("GET", "/v1/artifacts", nil)
	eq(t, "artifacts", []any{code, v}, []any{200, []any{}})
	pa, pb := a.must(200, "GET", "/v1/account/profile", nil), b.must(200, "GET", "/v1/account/profile", nil)
	id, _ := pa["id"].(string)
	ts, _ := pa["timestamp"].(float64)
	if id == "" || id == pb["id"] || ts <= 0 {
		t.Fatalf("profile id %v (the other account's %v), timestamp %v", pa["id"], pb["id"], pa["timestamp"])
	}
	delete(pa, "timestamp")
	eq(t, "profile", pa, map[string]any{"id": id, "firstName": nil, "lastName": nil, "username": nil, "avatar": nil, "github": nil, "connectedServices": []any{}})
}

func TestEveryRouteNeedsAToken(t *testing.T) {
	r := servertest.Start(t)
	other := servertest.Start(t) // a second relay: its tokens are signed with another secret
	foreign := servertest.NewAccount(t, other.URL).Token
	a := newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "m1", "metadata": "m"})
	for _, rt := range protectedRoutes(sid, "m1") {
		method, path, body := rt[0].(string), rt[1].(string), rt[2]
		t.Run(method+" "+path, func(t *testing.T) {
			for _, c := range []struct {
				token, want string
			}{
				{"", "Missing authorization header"},
				{"not-a-token", "Invalid token"},
				{foreign, "Invalid token"},
				{a.token[:len(a.token)-4] + "AAAA", "Invalid token"},
			} {
				anon := api{t: t, base: r.URL, token: c.token}
				eq(t, fmt.Sprintf("token %.10q", c.token), anon.must(401, method, path, body), map[string]any{"error": c.want})
			}
		})
	}
}

func TestTerminalPairing(t *testing.T) {
	r := servertest.Start(t)
	app := newAPI(t, r)
	cli := api{t: t, base: r.URL}
	sec, pk := boxPair(t)
	q := statusPath(pk)

	eq(t, "status before", cli.must(200, "GET", q, nil), map[string]any{"status": "not_found", "supportsV2": false})
	eq(t, "request", cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk, "supportsV2": true}), map[string]any{"state": "requested"})
	eq(t, "request again", cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk, "supportsV2": true}), map[string]any{"state": "requested"})
	eq(t, "status pending", cli.must(200, "GET", q, nil), map[string]any{"status": "pending", "supportsV2": true})
	eq(t, "bad key", cli.must(401, "POST", "/v1/auth/request", map[string]any{"publicKey": "AAAA"}), map[string]any{"error": "Invalid public key"})
	eq(t, "bad key status", cli.must(200, "GET", "/v1/auth/request/status?publicKey=AAAA", nil), map[string]any{"status": "not_found", "supportsV2": false})
	other := base64.StdEncoding.EncodeToString([]byte("another-terminal-public-key-32by"))
	eq(t, "answer unknown", app.must(404, "POST", "/v1/auth/response", map[string]any{"publicKey": other, "response": "x"}), map[string]any{"error": "Request not found"})

	eq(t, "answer", app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "bundle-1"}), map[string]any{"success": true})
	eq(t, "second answer refused", app.must(409, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "bundle-2"}), map[string]any{"error": "Request already answered"})
	eq(t, "status authorized", cli.must(200, "GET", q, nil), map[string]any{"status": "authorized", "supportsV2": false})
	m := cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk, "supportsV2": true})
	eq(t, "state", m["state"], "authorized")
	eq(t, "response", m["response"], "bundle-1")
	// The terminal's token belongs to the app's account.
	app.createSession("from-app", "m")
	term := api{t: t, base: r.URL, token: openToken(t, m, sec)}
	eq(t, "terminal sees app sessions", len(arr(t, term.must(200, "GET", "/v1/sessions", nil)["sessions"])), 1)
}

func TestSessions(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	s := obj(t, a.must(200, "POST", "/v1/sessions", map[string]any{"tag": "T1", "metadata": "meta-v0", "agentState": "ignored", "dataEncryptionKey": "AGVrZXk="})["session"])
	eq(t, "keys", keys(s), []string{"active", "activeAt", "agentState", "agentStateVersion", "createdAt", "dataEncryptionKey", "id", "lastMessage", "metadata", "metadataVersion", "seq", "updatedAt"})
	eq(t, "metadata", s["metadata"], "meta-v0")
	eq(t, "metadataVersion", s["metadataVersion"], 0.0)
	eq(t, "agentState (ignored on create)", s["agentState"], nil)
	eq(t, "agentStateVersion", s["agentStateVersion"], 0.0)
	eq(t, "dataEncryptionKey", s["dataEncryptionKey"], "AGVrZXk=")
	eq(t, "active", s["active"], true)
	eq(t, "seq", s["seq"], 0.0)
	eq(t, "lastMessage", s["lastMessage"], nil)
	if id := s["id"].(string); len(id) != 25 || id[0] != 'c' {
		t.Fatalf("id %q is not cuid-shaped", id)
	}
	// Same tag: the original, unchanged.
	again := obj(t, a.must(200, "POST", "/v1/sessions", map[string]any{"tag": "T1", "metadata": "other", "dataEncryptionKey": nil})["session"])
	eq(t, "same tag", again, s)
	eq(t, "missing metadata", a.must(400, "POST", "/v1/sessions", map[string]any{"tag": "x"}), map[string]any{"error": "tag (non-empty) and metadata are required strings"})

	s2 := a.createSession("T2", "meta-2")
	list := arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])
	eq(t, "list length", len(list), 2)
	eq(t, "newest first", obj(t, list[0])["id"], s2["id"])
	active := arr(t, a.must(200, "GET", "/v2/sessions/active", nil)["sessions"])
	eq(t, "active length", len(active), 2)
	if _, has := obj(t, active[0])["lastMessage"]; has {
		t.Fatal("v2 active sessions carry no lastMessage")
	}
	eq(t, "limit 0", a.must(400, "GET", "/v2/sessions/active?limit=0", nil), map[string]any{"error": "limit must be between 1 and 500, got 0"})
	eq(t, "limit 1", len(arr(t, a.must(200, "GET", "/v2/sessions/active?limit=1", nil)["sessions"])), 1)

	eq(t, "archive", a.must(200, "POST", "/v1/sessions/"+s["id"].(string)+"/archive", map[string]any{}), map[string]any{"success": true})
	active = arr(t, a.must(200, "GET", "/v2/sessions/active", nil)["sessions"])
	eq(t, "active after archive", len(active), 1)
	eq(t, "remaining active", obj(t, active[0])["id"], s2["id"])
	eq(t, "archive unknown", a.must(404, "POST", "/v1/sessions/nope/archive", nil), map[string]any{"error": "Session not found"})

	a.postMessages(s2["id"].(string), [2]string{"l1", "c1"})
	eq(t, "delete", a.must(200, "DELETE", "/v1/sessions/"+s2["id"].(string), nil), map[string]any{"success": true})
	eq(t, "delete again", a.must(404, "DELETE", "/v1/sessions/"+s2["id"].(string), nil), map[string]any{"error": "Session not found or not owned by user"})
	eq(t, "messages of deleted", a.must(404, "GET", "/v3/sessions/"+s2["id"].(string)+"/messages", nil), map[string]any{"error": "Session not found"})
	eq(t, "list after delete", len(arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])), 1)
	// The same tag after delete creates a new session.
	s3 := a.createSession("T2", "meta-3")
	if s3["id"] == s2["id"] {
		t.Fatal("a deleted session came back")
	}
}

func TestMessagesV3(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	sid := a.createSession("tag", "m")["id"].(string)
	path := "/v3/sessions/" + sid + "/messages"

	odd := "ünï\u2028côdé \x00 \"quoted\" " + strings.Repeat("z", 1000)
	rows := a.postMessages(sid, [2]string{"a", "A"}, [2]string{"b", odd}, [2]string{"c", "C"})
	for i, lid := range []string{"a", "b", "c"} {
		row := obj(t, rows[i])
		eq(t, "row keys", keys(row), []string{"createdAt", "id", "localId", "new", "seq", "updatedAt"})
		eq(t, "localId", row["localId"], lid)
		eq(t, "stored by this post", row["new"], true)
		eq(t, "seq", row["seq"], float64(i+1))
	}
	first := obj(t, rows[0])

	// Retry with an overlap, an in-batch duplicate and new ids: old rows keep
	// their seq and content, duplicates collapse (first wins), new rows follow;
	// only the rows this post stored say "new".
	rows2 := a.postMessages(sid, [2]string{"d", "D"}, [2]string{"a", "A-changed"}, [2]string{"d", "D-dup"}, [2]string{"e", "E"})
	var got []string
	for _, x := range rows2 {
		o := obj(t, x)
		got = append(got, fmt.Sprintf("%s=%v %v", o["localId"], o["seq"], o["new"]))
	}
	eq(t, "retry rows (sorted by seq)", got, []string{"a=1 <nil>", "d=4 true", "e=5 true"})
	delete(first, "new")
	eq(t, "original row returned", obj(t, rows2[0]), first)

	page := a.must(200, "GET", path, nil)
	eq(t, "hasMore", page["hasMore"], false)
	msgs := arr(t, page["messages"])
	var contents []string
	for i, x := range msgs {
		o := obj(t, x)
		eq(t, "message keys", keys(o), []string{"content", "createdAt", "id", "localId", "seq", "updatedAt"})
		eq(t, "seq ascending", o["seq"], float64(i+1))
		c := obj(t, o["content"])
		eq(t, "content.t", c["t"], "encrypted")
		contents = append(contents, c["c"].(string))
	}
	eq(t, "contents byte for byte", contents, []string{"A", odd, "C", "D", "E"})

	// Pagination.
	for _, c := range []struct {
		q       string
		seqs    []float64
		hasMore bool
	}{
		{"?after_seq=0&limit=2", []float64{1, 2}, true},
		{"?after_seq=2&limit=2", []float64{3, 4}, true},
		{"?after_seq=4&limit=2", []float64{5}, false},
		{"?after_seq=5", nil, false},
		{"?before_seq=6&limit=2", []float64{5, 4}, true},
		{"?before_seq=4&limit=2", []float64{3, 2}, true},
		{"?before_seq=2&limit=2", []float64{1}, false},
		{"?before_seq=3", []float64{2, 1}, false},
		{"?limit=500", []float64{1, 2, 3, 4, 5}, false},
	} {
		p := a.must(200, "GET", path+c.q, nil)
		var seqs []float64
		for _, x := range arr(t, p["messages"]) {
			seqs = append(seqs, obj(t, x)["seq"].(float64))
		}
		eq(t, c.q+" seqs", seqs, c.seqs)
		eq(t, c.q+" hasMore", p["hasMore"], c.hasMore)
	}
	for _, c := range []struct{ q, err string }{
		{"?after_seq=1&before_seq=3", "after_seq and before_seq are mutually exclusive"},
		{"?limit=0", "limit must be between 1 and 500, got 0"},
		{"?limit=501", "limit must be between 1 and 500, got 501"},
		{"?after_seq=-1", "after_seq must be between 0 and 9007199254740992, got -1"},
		{"?before_seq=0", "before_seq must be between 1 and 9007199254740992, got 0"},
		{"?after_seq=x", `after_seq must be an integer, got "x"`},
	} {
		eq(t, c.q, a.must(400, "GET", path+c.q, nil), map[string]any{"error": c.err})
	}

	// Batch size and shape.
	eq(t, "empty batch", a.must(400, "POST", path, map[string]any{"messages": []any{}}), map[string]any{"error": "messages must hold 1 to 100 items, got 0"})
	big := make([]map[string]string, 101)
	for i := range big {
		big[i] = map[string]string{"localId": fmt.Sprint(i), "content": "x"}
	}
	eq(t, "101 messages", a.must(400, "POST", path, map[string]any{"messages": big}), map[string]any{"error": "messages must hold 1 to 100 items, got 101"})
	eq(t, "empty localId", a.must(400, "POST", path, map[string]any{"messages": []any{map[string]any{"localId": "", "content": "x"}}}),
		map[string]any{"error": "messages[0]: content and localId (non-empty) are required strings"})
	eq(t, "no messages", a.must(400, "POST", path, map[string]any{}), map[string]any{"error": "messages is required (an array of 1 to 100 {content, localId})"})
	eq(t, "unknown session", a.must(404, "POST", "/v3/sessions/nope/messages", map[string]any{"messages": []any{map[string]any{"localId": "x", "content": "x"}}}), map[string]any{"error": "Session not found"})
	eq(t, "unknown session GET", a.must(404, "GET", "/v3/sessions/nope/messages", nil), map[string]any{"error": "Session not found"})

	// 100 messages is allowed; seqs stay gapless.
	hundred := make([][2]string, 100)
	for i := range hundred {
		hundred[i] = [2]string{fmt.Sprintf("h%03d", i), fmt.Sprint(i)}
	}
	rows3 := a.postMessages(sid, hundred...)
	eq(t, "100 rows", len(rows3), 100)
	eq(t, "first of 100", obj(t, rows3[0])["seq"], 6.0)
	eq(t, "last of 100", obj(t, rows3[99])["seq"], 105.0)
	s := obj(t, arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])[0])
	eq(t, "session seq is last message seq", s["seq"], 105.0)

	// Legacy listing: newest first, at most 150.
	for i := 0; i < 50; i++ {
		a.postMessages(sid, [2]string{fmt.Sprintf("x%02d", i), "x"})
	}
	legacy := arr(t, a.must(200, "GET", "/v1/sessions/"+sid+"/messages", nil)["messages"])
	eq(t, "legacy count", len(legacy), 150)
	eq(t, "legacy newest", obj(t, legacy[0])["seq"], 155.0)
	eq(t, "legacy oldest", obj(t, legacy[149])["seq"], 6.0)
}

func TestMachines(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	m := obj(t, a.must(200, "POST", "/v1/machines", map[string]any{"id": "m-1", "metadata": "mm", "daemonState": "ds", "dataEncryptionKey": "k"})["machine"])
	eq(t, "keys", keys(m), []string{"active", "activeAt", "createdAt", "daemonState", "daemonStateVersion", "dataEncryptionKey", "id", "metadata", "metadataVersion", "updatedAt"})
	eq(t, "fields", []any{m["id"], m["metadata"], m["metadataVersion"], m["daemonState"], m["daemonStateVersion"], m["dataEncryptionKey"], m["active"]},
		[]any{"m-1", "mm", 1.0, "ds", 1.0, "k", false})
	again := obj(t, a.must(200, "POST", "/v1/machines", map[string]any{"id": "m-1", "metadata": "changed"})["machine"])
	eq(t, "existing unchanged", again, m)
	m2 := obj(t, a.must(200, "POST", "/v1/machines", map[string]any{"id": "m-2", "metadata": "m2"})["machine"])
	eq(t, "no daemon state", []any{m2["daemonState"], m2["daemonStateVersion"], m2["dataEncryptionKey"]}, []any{nil, 0.0, nil})
	_, v := a.do("GET", "/v1/machines", nil)
	list := arr(t, v)
	eq(t, "list length", len(list), 2)
	eq(t, "list has seq", obj(t, list[0])["seq"], 0.0)
	one := obj(t, a.must(200, "GET", "/v1/machines/m-1", nil)["machine"])
	eq(t, "get one", one["metadata"], "mm")
	eq(t, "unknown", a.must(404, "GET", "/v1/machines/zz", nil), map[string]any{"error": "Machine not found"})
	eq(t, "bad body", a.must(400, "POST", "/v1/machines", map[string]any{"metadata": "x"}), map[string]any{"error": "id (non-empty) and metadata are required strings"})
}

func TestPush(t *testing.T) {
	r := servertest.Start(t)
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	eq(t, "no tokens", a.must(200, "GET", "/v1/push-tokens", nil), map[string]any{"tokens": []any{}})
	ev := map[string]any{"kind": "done", "title": "Ready", "body": "It's ready"}
	eq(t, "push without tokens", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev), map[string]any{"success": true, "result": "no_tokens", "tokens": float64(0), "delivered": float64(0)})
	eq(t, "register", a.must(200, "POST", "/v1/push-tokens", map[string]any{"token": "ExponentPushToken[x]"}), map[string]any{"success": true})
	a.must(200, "POST", "/v1/push-tokens", map[string]any{"token": "ExponentPushToken[x]"})
	toks := arr(t, a.must(200, "GET", "/v1/push-tokens", nil)["tokens"])
	eq(t, "one token", len(toks), 1)
	eq(t, "token keys", keys(obj(t, toks[0])), []string{"createdAt", "id", "token", "updatedAt"})
	eq(t, "push with tokens", a.must(200, "POST", "/v1/sessions/"+sid+"/push-event", ev),
		map[string]any{"success": true, "result": "failed", "tokens": float64(1), "delivered": float64(0), "reason": "Expo push is not configured on this relay"})
	eq(t, "bad kind", a.must(400, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "other", "title": "t", "body": "b"}), map[string]any{"error": `kind must be "done", "permission" or "question"`})
	eq(t, "long title", a.must(400, "POST", "/v1/sessions/"+sid+"/push-event", map[string]any{"kind": "done", "title": strings.Repeat("t", 201), "body": "b"}), map[string]any{"error": "title must be a string of 1 to 200 characters"})
	eq(t, "unknown session", a.must(404, "POST", "/v1/sessions/nope/push-event", ev), map[string]any{"error": "Session not found"})
	eq(t, "unregister", a.must(200, "DELETE", "/v1/push-tokens/ExponentPushToken[x]", nil), map[string]any{"success": true})
	eq(t, "no tokens again", a.must(200, "GET", "/v1/push-tokens", nil), map[string]any{"tokens": []any{}})
}

func TestAttachments(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{MaxAttachmentBytes: 1000})
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	base := "/v1/sessions/" + sid + "/attachments"
	up := a.must(200, "POST", base+"/request-upload", map[string]any{"filename": "shot.png", "size": 5})
	ref := up["ref"].(string)
	if !strings.HasPrefix(ref, "sessions/"+sid+"/attachments/") || !strings.HasSuffix(ref, ".enc") {
		t.Fatalf("ref = %q", ref)
	}
	file := strings.TrimPrefix(ref, "sessions/"+sid+"/attachments/")
	eq(t, "uploadUrl", up["uploadUrl"], r.URL+base+"/"+file)
	eq(t, "method", up["method"], "PUT")
	blob := []byte{0, 1, 2, 0xff, 'x'}
	eq(t, "put", a.must(200, "PUT", base+"/"+file, blob), map[string]any{"ok": true})
	eq(t, "download url", a.must(200, "POST", base+"/request-download", map[string]any{"ref": ref}), map[string]any{"downloadUrl": r.URL + base + "/" + file})
	st, got := a.raw("GET", base+"/"+file, nil)
	eq(t, "get status", st, 200)
	eq(t, "bytes", got, blob)
	eq(t, "too large (declared)", a.must(413, "POST", base+"/request-upload", map[string]any{"filename": "x", "size": 1001}), map[string]any{"error": "File too large (max 1000 bytes)"})
	eq(t, "too large (sent)", a.must(413, "PUT", base+"/big.enc", make([]byte, 1001)), map[string]any{"error": "File too large (max 1000 bytes)"})
	eq(t, "foreign ref", a.must(400, "POST", base+"/request-download", map[string]any{"ref": "sessions/other/attachments/x.enc"}), map[string]any{"error": "Ref does not belong to this session"})
	eq(t, "traversal ref", a.must(400, "POST", base+"/request-download", map[string]any{"ref": "sessions/" + sid + "/attachments/..%2f.."}), map[string]any{"error": "Invalid attachment ref"})
	eq(t, "missing", a.must(404, "GET", base+"/missing.enc", nil), map[string]any{"error": "Attachment not found"})
	a.must(200, "DELETE", "/v1/sessions/"+sid, nil)
	sid2 := a.createSession("t2", "m")["id"].(string)
	_ = sid2
	eq(t, "gone with session", a.must(404, "GET", base+"/"+file, nil), map[string]any{"error": "Session not found"})
}

func TestLimitsAndMalformedJSON(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{MaxBodyBytes: 2048})
	a := newAPI(t, r)
	sid := a.createSession("t", "m")["id"].(string)
	big := map[string]any{"messages": []any{map[string]any{"localId": "l", "content": strings.Repeat("x", 4096)}}}
	eq(t, "oversized body", a.must(413, "POST", "/v3/sessions/"+sid+"/messages", big), map[string]any{"error": "Request body too large (limit 2048 bytes)"})
	m := a.must(400, "POST", "/v3/sessions/"+sid+"/messages", []byte(`{"messages": [`))
	if !strings.HasPrefix(m["error"].(string), "Invalid JSON") {
		t.Fatalf("truncated JSON: %v", m)
	}
	eq(t, "wrong type", a.must(400, "POST", "/v3/sessions/"+sid+"/messages", []byte(`{"messages": "x"}`)),
		map[string]any{"error": "Invalid JSON: messages must be an array, got string"})
	eq(t, "invalid UTF-8", a.must(400, "POST", "/v3/sessions/"+sid+"/messages", []byte("{\"messages\": [{\"localId\": \"l\", \"content\": \"a\xff\xfe\"}]}")),
		map[string]any{"error": "Request body is not valid UTF-8 (byte 45)"})
	eq(t, "nothing stored", a.must(200, "GET", "/v3/sessions/"+sid+"/messages", nil)["messages"], []any{})
	eq(t, "unknown route", a.must(404, "GET", "/v9/nothing", nil), map[string]any{"error": "Route GET /v9/nothing not found"})
}

// TestIsolationHTTP: a token of account B can neither read, write, list nor
// delete account A's sessions, messages, machines, attachments or tokens.
func TestIsolationHTTP(t *testing.T) {
	r := servertest.Start(t)
	a, b := newAPI(t, r), newAPI(t, r)
	sid := a.createSession("shared-tag", "A-meta")["id"].(string)
	a.postMessages(sid, [2]string{"l1", "A-secret"})
	a.must(200, "POST", "/v1/machines", map[string]any{"id": "mA", "metadata": "A-machine"})
	a.must(200, "POST", "/v1/push-tokens", map[string]any{"token": "A-token"})
	up := a.must(200, "POST", "/v1/sessions/"+sid+"/attachments/request-upload", map[string]any{"filename": "f", "size": 1})
	file := strings.TrimPrefix(up["ref"].(string), "sessions/"+sid+"/attachments/")
	a.must(200, "PUT", "/v1/sessions/"+sid+"/attachments/"+file, []byte("A"))

	notFound := map[string]any{"error": "Session not found"}
	for _, c := range []struct {
		method, path string
		body         any
		want         map[string]any
	}{
		{"GET", "/v3/sessions/" + sid + "/messages", nil, notFound},
		{"POST", "/v3/sessions/" + sid + "/messages", map[string]any{"messages": []any{map[string]any{"localId": "b1", "content": "B"}}}, notFound},
		{"GET", "/v1/sessions/" + sid + "/messages", nil, notFound},
		{"POST", "/v1/sessions/" + sid + "/archive", map[string]any{}, notFound},
		{"DELETE", "/v1/sessions/" + sid, nil, map[string]any{"error": "Session not found or not owned by user"}},
		{"POST", "/v1/sessions/" + sid + "/push-event", map[string]any{"kind": "done", "title": "t", "body": "b"}, notFound},
		{"POST", "/v1/sessions/" + sid + "/attachments/request-upload", map[string]any{"filename": "f", "size": 1}, notFound},
		{"POST", "/v1/sessions/" + sid + "/attachments/request-download", map[string]any{"ref": up["ref"]}, notFound},
		{"PUT", "/v1/sessions/" + sid + "/attachments/" + file, []byte("B"), notFound},
		{"GET", "/v1/sessions/" + sid + "/attachments/" + file, nil, notFound},
		{"GET", "/v1/machines/mA", nil, map[string]any{"error": "Machine not found"}},
	} {
		eq(t, "B "+c.method+" "+c.path, b.must(404, c.method, c.path, c.body), c.want)
	}
	eq(t, "B lists no sessions", b.must(200, "GET", "/v1/sessions", nil), map[string]any{"sessions": []any{}})
	eq(t, "B lists no active sessions", b.must(200, "GET", "/v2/sessions/active", nil), map[string]any{"sessions": []any{}})
	_, ms := b.do("GET", "/v1/machines", nil)
	eq(t, "B lists no machines", ms, []any{})
	eq(t, "B lists no push tokens", b.must(200, "GET", "/v1/push-tokens", nil), map[string]any{"tokens": []any{}})
	b.must(200, "DELETE", "/v1/push-tokens/A-token", nil)
	eq(t, "A's token survives B's delete", len(arr(t, a.must(200, "GET", "/v1/push-tokens", nil)["tokens"])), 1)

	// Same tag and machine id in B: B gets its own rows, A's stay untouched.
	sb := b.createSession("shared-tag", "B-meta")
	if sb["id"] == sid || sb["metadata"] != "B-meta" {
		t.Fatalf("B's session with A's tag = %v", sb)
	}
	mb := obj(t, b.must(200, "POST", "/v1/machines", map[string]any{"id": "mA", "metadata": "B-machine"})["machine"])
	eq(t, "B's machine with A's id", mb["metadata"], "B-machine")
	eq(t, "A's machine intact", obj(t, a.must(200, "GET", "/v1/machines/mA", nil)["machine"])["metadata"], "A-machine")
	msgs := arr(t, a.must(200, "GET", "/v3/sessions/"+sid+"/messages", nil)["messages"])
	eq(t, "A's messages intact", len(msgs), 1)
	eq(t, "A's content", obj(t, obj(t, msgs[0])["content"])["c"], "A-secret")
	eq(t, "A's session still active", obj(t, arr(t, a.must(200, "GET", "/v1/sessions", nil)["sessions"])[0])["active"], true)
	st, blob := a.raw("GET", "/v1/sessions/"+sid+"/attachments/"+file, nil)
	eq(t, "A's attachment intact", []any{st, string(blob)}, []any{200, "A"})
}
