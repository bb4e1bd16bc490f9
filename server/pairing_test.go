package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store/sqlite"
)

// clock is an injected clock for the relay under test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func startClocked(t *testing.T, ttl time.Duration) (*servertest.Relay, *clock) {
	clk := &clock{now: time.UnixMilli(1_800_000_000_000)}
	r := servertest.StartConfig(t, server.Config{
		Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		Now:    clk.Now, PairingTTL: ttl,
		// The sweeper must not remove requests behind the test's back.
		SweepInterval: time.Hour,
	})
	return r, clk
}

func boxKey(t *testing.T) ([32]byte, string) {
	t.Helper()
	pub, _, err := crypto.NewBoxKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return pub, base64.StdEncoding.EncodeToString(pub[:])
}

// boxPair is boxKey with the secret key.
func boxPair(t *testing.T) (secret [32]byte, pk string) {
	t.Helper()
	pub, sec, err := crypto.NewBoxKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	return sec, base64.StdEncoding.EncodeToString(pub[:])
}

// openToken opens the sealedToken of an authorized answer with secret.
func openToken(t *testing.T, m map[string]any, secret [32]byte) string {
	t.Helper()
	s, _ := m["sealedToken"].(string)
	bundle, err := crypto.DecodeBase64(s)
	if err != nil {
		t.Fatalf("sealedToken of %v: %v", m, err)
	}
	tok, err := crypto.OpenSealedToken(bundle, secret)
	if err != nil {
		t.Fatalf("open the sealed token: %v", err)
	}
	return tok
}

func statusPath(pk string) string {
	return "/v1/auth/request/status?publicKey=" + url.QueryEscape(pk)
}

// TestPairingTokenSealed: the answer's token is sealed for the request's
// key and never sent in plain; every poll gets the answer until the holder
// of the key says it collected it with the token it opened.
func TestPairingTokenSealed(t *testing.T) {
	r := servertest.Start(t)
	app, other := newAPI(t, r), newAPI(t, r)
	cli := api{t: t, base: r.URL}
	sec, pk := boxPair(t)
	req := map[string]any{"publicKey": pk, "supportsV2": true}
	eq(t, "request", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
	eq(t, "answer", app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "bundle-1"}), map[string]any{"success": true})
	m := cli.must(200, "POST", "/v1/auth/request", req)
	eq(t, "fields of the answer", keys(m), []string{"response", "sealedToken", "state"})
	eq(t, "delivered", []any{m["state"], m["response"]}, []any{"authorized", "bundle-1"})
	first := openToken(t, m, sec)
	api{t: t, base: r.URL, token: first}.must(200, "GET", "/v1/sessions", nil)

	// Not collected yet: the next poll gets the answer again, with a token
	// sealed afresh.
	m2 := cli.must(200, "POST", "/v1/auth/request", req)
	eq(t, "second poll", []any{m2["state"], m2["response"]}, []any{"authorized", "bundle-1"})
	if m2["sealedToken"] == m["sealedToken"] {
		t.Fatal("the same sealed bytes twice")
	}
	term := api{t: t, base: r.URL, token: openToken(t, m2, sec)}
	eq(t, "status before collection", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "authorized", "supportsV2": false})

	eq(t, "collected without a token", cli.must(401, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": pk}), map[string]any{"error": "Missing authorization header"})
	eq(t, "collected by another account", other.must(404, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": pk}), map[string]any{"error": "Request not found"})
	eq(t, "collected", term.must(200, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": pk}), map[string]any{"success": true})
	eq(t, "collected twice", term.must(404, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": pk}), map[string]any{"error": "Request not found"})
	eq(t, "collected with a bad key", term.must(401, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": "AAAA"}), map[string]any{"error": "Invalid public key"})
	eq(t, "status after collection", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "not_found", "supportsV2": false})
	eq(t, "poll after collection", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
	eq(t, "status of the new request", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "pending", "supportsV2": true})
}

// TestPairingPlainTokenDeliveredOnce: with PairingPlainToken (the
// reference CLI's migration) the answer carries the plain token too and is
// delivered once.
func TestPairingPlainTokenDeliveredOnce(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{PairingPlainToken: true})
	app := newAPI(t, r)
	cli := api{t: t, base: r.URL}
	sec, pk := boxPair(t)
	req := map[string]any{"publicKey": pk, "supportsV2": true}
	eq(t, "request", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
	eq(t, "answer", app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "bundle-1"}), map[string]any{"success": true})
	m := cli.must(200, "POST", "/v1/auth/request", req)
	eq(t, "fields of the answer", keys(m), []string{"response", "sealedToken", "state", "token"})
	eq(t, "delivered", []any{m["state"], m["response"]}, []any{"authorized", "bundle-1"})
	tok, _ := m["token"].(string)
	api{t: t, base: r.URL, token: tok}.must(200, "GET", "/v1/sessions", nil)
	api{t: t, base: r.URL, token: openToken(t, m, sec)}.must(200, "GET", "/v1/sessions", nil)
	// Delivered: the request is gone, the same key starts a new one.
	eq(t, "status after delivery", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "not_found", "supportsV2": false})
	eq(t, "second poll gets no token", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
	eq(t, "status of the new request", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "pending", "supportsV2": true})
	eq(t, "third poll", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
}

func TestPairingPlainTokenDeliveredOnceUnderRace(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{PairingPlainToken: true})
	app := newAPI(t, r)
	_, pk := boxKey(t)
	req := map[string]any{"publicKey": pk}
	cli := api{t: t, base: r.URL}
	cli.must(200, "POST", "/v1/auth/request", req)
	app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "b"})
	const n = 8
	// Racing requests make the client dial spare connections that never
	// carry a request; the relay's shutdown would wait 5 s for them.
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	states := make(chan any, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, v := cli.do("POST", "/v1/auth/request", req)
			states <- obj(t, v)["state"]
		}()
	}
	wg.Wait()
	close(states)
	got := map[any]int{}
	for s := range states {
		got[s]++
	}
	eq(t, "states of 8 racing polls", got, map[any]int{"authorized": 1, "requested": n - 1})
}

func TestPairingAnsweredOnce(t *testing.T) {
	r := servertest.Start(t)
	app, other := newAPI(t, r), newAPI(t, r)
	cli := api{t: t, base: r.URL}
	_, pk := boxKey(t)
	cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk})
	eq(t, "first answer", app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "mine"}), map[string]any{"success": true})
	eq(t, "same account again", app.must(409, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "again"}), map[string]any{"error": "Request already answered"})
	eq(t, "another account", other.must(409, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "theirs"}), map[string]any{"error": "Request already answered"})
	m := cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk})
	eq(t, "the first answer is delivered", m["response"], "mine")
	eq(t, "answer after delivery", app.must(409, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "late"}), map[string]any{"error": "Request already answered"})
	app.must(200, "POST", "/v1/auth/request/collected", map[string]any{"publicKey": pk})
	eq(t, "answer after collection", app.must(404, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "late"}), map[string]any{"error": "Request not found"})
}

func TestPairingExpires(t *testing.T) {
	r, clk := startClocked(t, 3*time.Minute)
	app := newAPI(t, r)
	cli := api{t: t, base: r.URL}
	_, pk := boxKey(t)
	req := map[string]any{"publicKey": pk, "supportsV2": true}

	// A pending request past its lifetime cannot be answered.
	cli.must(200, "POST", "/v1/auth/request", req)
	clk.add(3*time.Minute - time.Millisecond)
	eq(t, "status just before expiry", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "pending", "supportsV2": true})
	clk.add(time.Millisecond)
	eq(t, "status at expiry", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "not_found", "supportsV2": false})
	eq(t, "answer at expiry", app.must(404, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "late"}), map[string]any{"error": "Request not found"})

	// A poll after expiry opens a new request, which lives its own lifetime.
	eq(t, "poll after expiry", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
	clk.add(time.Minute)
	eq(t, "answer the new request", app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "fresh"}), map[string]any{"success": true})

	// An answer nobody collected in time is never delivered.
	clk.add(2 * time.Minute)
	eq(t, "answered but expired", cli.must(200, "POST", "/v1/auth/request", req), map[string]any{"state": "requested"})
	eq(t, "status", cli.must(200, "GET", statusPath(pk), nil), map[string]any{"status": "pending", "supportsV2": true})
}

func TestPairingLookup(t *testing.T) {
	r, clk := startClocked(t, 5*time.Minute)
	app := newAPI(t, r)
	cli := api{t: t, base: r.URL}
	pub, pk := boxKey(t)
	_, otherPK := boxKey(t)
	code := crypto.PairingCode(pub)
	path := "/v1/auth/request/lookup?code=" + url.QueryEscape(code)

	eq(t, "nothing pending", app.must(200, "GET", path, nil), map[string]any{"requests": []any{}})
	created := clk.Now().UnixMilli()
	cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk, "supportsV2": true})
	cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": otherPK})
	want := map[string]any{"requests": []any{map[string]any{"publicKey": pk, "supportsV2": true, "createdAt": float64(created), "expiresAt": float64(created + 300_000)}}}
	eq(t, "lookup", app.must(200, "GET", path, nil), want)
	lower := "/v1/auth/request/lookup?code=" + url.QueryEscape(" "+toLower(code[:5])+code[6:])
	eq(t, "lookup with a typed code", app.must(200, "GET", lower, nil), want)
	eq(t, "no token", cli.must(401, "GET", path, nil), map[string]any{"error": "Missing authorization header"})
	eq(t, "bad code", app.must(400, "GET", "/v1/auth/request/lookup?code=ABC", nil), map[string]any{"error": "code must be a pairing code of 10 base32 characters (XXXXX-XXXXX)"})

	clk.add(5 * time.Minute)
	eq(t, "expired requests are not found", app.must(200, "GET", path, nil), map[string]any{"requests": []any{}})
	cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk})
	app.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "x"})
	eq(t, "answered requests are not listed", app.must(200, "GET", path, nil), map[string]any{"requests": []any{}})
}

func toLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func TestRevokeTokens(t *testing.T) {
	r := servertest.Start(t)
	acct := servertest.NewAccount(t, r.URL)
	a := api{t: t, base: r.URL, token: acct.Token}
	// A second token of the same account (a paired terminal).
	cli := api{t: t, base: r.URL}
	sec, pk := boxPair(t)
	cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk})
	a.must(200, "POST", "/v1/auth/response", map[string]any{"publicKey": pk, "response": "x"})
	paired := api{t: t, base: r.URL, token: openToken(t, cli.must(200, "POST", "/v1/auth/request", map[string]any{"publicKey": pk}), sec)}
	paired.must(200, "GET", "/v1/sessions", nil)
	other := newAPI(t, r)

	sock := userSocket(t, r.URL, acct.Token)
	lost := make(chan string, 1)
	sock.OnDisconnect(func(reason string) { lost <- reason })

	eq(t, "revoke", a.must(200, "POST", "/v1/auth/revoke", map[string]any{}), map[string]any{"success": true, "generation": 1.0, "disconnected": 1.0})
	for name, c := range map[string]api{"the revoking token": a, "the paired token": paired} {
		eq(t, name+" on HTTP", c.must(401, "GET", "/v1/sessions", nil), map[string]any{"error": "Invalid token"})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cl, err := sio.Dial(ctx, r.URL, sio.Options{Auth: map[string]any{"token": c.token}, ConnectTimeout: 3 * time.Second})
		cancel()
		var ce *sio.ConnectError
		if err == nil {
			_ = cl.Close()
			t.Fatalf("%s: socket accepted after revoke", name)
		}
		if !errors.As(err, &ce) || ce.Message != "Invalid authentication token" {
			t.Fatalf("%s: socket error %v", name, err)
		}
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the account's socket stayed connected after revoke")
	}
	other.must(200, "GET", "/v1/sessions", nil) // another account is untouched

	// Signing in again gives a token of the new generation, which works.
	fresh := servertest.SignIn(t, r.URL, acct.Key)
	b := api{t: t, base: r.URL, token: fresh.Token}
	b.must(200, "GET", "/v1/sessions", nil)
	userSocket(t, r.URL, fresh.Token)
	eq(t, "revoke again", b.must(200, "POST", "/v1/auth/revoke", nil), map[string]any{"success": true, "generation": 2.0, "disconnected": 1.0})
	eq(t, "the new token is revoked too", b.must(401, "GET", "/v1/sessions", nil), map[string]any{"error": "Invalid token"})
}

// TestRevocationSeenByAnotherRelay: two relays on one store and one signing
// secret; a revocation made through one is refused by the other once its
// cached generation is older than RevocationRefresh.
func TestRevocationSeenByAnotherRelay(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "happy.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	dirA, dirB := t.TempDir(), t.TempDir()
	a := servertest.StartConfig(t, server.Config{DataDir: dirA, Store: st})
	secret, err := os.ReadFile(filepath.Join(dirA, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "secret.key"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	b := servertest.StartConfig(t, server.Config{DataDir: dirB, Store: st, Now: clk.Now, RevocationRefresh: 10 * time.Second})
	tok := servertest.NewAccount(t, a.URL).Token
	onA, onB := api{t: t, base: a.URL, token: tok}, api{t: t, base: b.URL, token: tok}
	onB.must(200, "GET", "/v1/sessions", nil) // B caches the generation
	onA.must(200, "POST", "/v1/auth/revoke", nil)
	onA.must(401, "GET", "/v1/sessions", nil)
	clk.add(10*time.Second - time.Millisecond)
	onB.must(200, "GET", "/v1/sessions", nil) // within the refresh time
	clk.add(time.Millisecond)
	eq(t, "B after the refresh time", onB.must(401, "GET", "/v1/sessions", nil), map[string]any{"error": "Invalid token"})
}
