package server_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// metric fails t unless GET /metrics has the line want.
func metric(t *testing.T, base, want string) {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if l == want {
			return
		}
	}
	t.Fatalf("/metrics lacks %q", want)
}

// rawConn dials the relay of base over TCP.
func rawConn(t *testing.T, base string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// readAnswer reads one HTTP answer from c within 10 s and returns its
// status, Retry-After and body.
func readAnswer(t *testing.T, c net.Conn) (int, string, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
}

// waitClosed waits (10 s at most) until the relay closes c, reading and
// dropping what it sends.
func waitClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("%s: the relay did not close the connection: %v", what, err)
	}
}

func quiet(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

// A client trickling a request body is cut off once it falls behind the
// bound (BodyTimeout, then MinBodyRate): 408 and the connection closed;
// the refusal is counted.
func TestSlowBodyIsCutOff(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), BodyTimeout: 300 * time.Millisecond, MinBodyRate: 1000})
	a := newAPI(t, r)
	c := rawConn(t, r.URL)
	fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", a.token)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// One byte every 50 ms: 20 bytes a second, far below 1000.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	code, _, body := readAnswer(t, c)
	eq(t, "answer", []any{code, body}, []any{408, `{"error":"Request body too slow: the relay waits 300ms for a body, plus 1 s per 1000 bytes"}`})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cut off after %s", d)
	}
	waitClosed(t, c, "after the 408")
	metric(t, r.URL, `happy_relay_refusals_total{reason="slow_body"} 1`)
}

// The bounds leave long-lived and large requests alone: an upload that
// takes longer than BodyTimeout at a rate above MinBodyRate goes through,
// and a message stream and a socket outlive BodyTimeout many times.
func TestBodyBoundSparesUploadsStreamsAndSockets(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), BodyTimeout: 200 * time.Millisecond, MinBodyRate: 32 << 10, StreamHeartbeat: 50 * time.Millisecond})
	st := newStreamTest(t, r)
	sid := st.session("s")
	sock := sessionSocket(t, r.URL, st.token, sid)

	// 64 KiB in 4 KiB chunks every 40 ms: about 0.6 s, at 100 KiB/s.
	pr, pw := io.Pipe()
	go func() {
		chunk := make([]byte, 4<<10)
		pace := time.NewTicker(40 * time.Millisecond) // a slow link
		defer pace.Stop()
		for range 16 {
			<-pace.C
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	req, _ := http.NewRequest("PUT", r.URL+"/v1/sessions/"+sid+"/attachments/big.enc", pr)
	req.Header.Set("Authorization", "Bearer "+st.token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	eq(t, "slow upload", []any{resp.StatusCode, string(b)}, []any{200, `{"ok":true}`})
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("the upload took %s: not longer than the body's free time", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := st.open(ctx, sid, "", "")
	eq(t, "stream status", stream.StatusCode, 200)
	lines := bufio.NewScanner(stream.Body)
	beats := 0
	for beats < 20 { // 20 × 50 ms: five times BodyTimeout
		if !lines.Scan() {
			t.Fatalf("the stream ended after %d heartbeats: %v", beats, lines.Err())
		}
		if lines.Text() == ": heartbeat" {
			beats++
		}
	}
	eq(t, "socket ping after the stream", call(t, sock, "ping", map[string]any{}), map[string]any{})
}

// A connection that never completes its headers is closed after
// HeaderTimeout, and an idle keep-alive connection after IdleConnTimeout.
func TestHeaderAndIdleTimeouts(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), HeaderTimeout: 300 * time.Millisecond, IdleConnTimeout: 300 * time.Millisecond})
	slow := rawConn(t, r.URL)
	fmt.Fprint(slow, "GET /health HTTP/1.1\r\nHost: relay\r\n")
	waitClosed(t, slow, "headers never finished")

	idle := rawConn(t, r.URL)
	fmt.Fprint(idle, "GET /health HTTP/1.1\r\nHost: relay\r\n\r\n")
	code, _, _ := readAnswer(t, idle)
	eq(t, "health", code, 200)
	waitClosed(t, idle, "idle keep-alive connection")
	metric(t, r.URL, `happy_relay_limit{limit="header_timeout_seconds"} 0.3`)
	metric(t, r.URL, `happy_relay_limit{limit="idle_conn_timeout_seconds"} 0.3`)
}

// One address may hold MaxConnsPerAddr connections: the next is answered
// 429 and closed, counted; once one closes a new one is served.
func TestConnectionsPerAddressCap(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), MaxConnsPerAddr: 2})
	http.DefaultClient.CloseIdleConnections()
	server.WaitUntil(t, 5*time.Second, "no connection left", func() bool { return r.Server.ConnsFrom("127.0.0.1") == 0 })
	one, two := rawConn(t, r.URL), rawConn(t, r.URL)
	server.WaitUntil(t, 5*time.Second, "two connections counted", func() bool { return r.Server.ConnsFrom("127.0.0.1") == 2 })
	three := rawConn(t, r.URL)
	fmt.Fprint(three, "GET /health HTTP/1.1\r\nHost: relay\r\n\r\n")
	code, retry, body := readAnswer(t, three)
	eq(t, "third connection", []any{code, retry, body}, []any{429, "1", `{"error":"Too many connections from this address (limit 2); close some and retry"}`})
	waitClosed(t, three, "refused connection")
	_ = one.Close()
	server.WaitUntil(t, 5*time.Second, "the closed one released", func() bool { return r.Server.ConnsFrom("127.0.0.1") == 1 })
	fmt.Fprint(two, "GET /health HTTP/1.1\r\nHost: relay\r\nConnection: close\r\n\r\n")
	code, _, _ = readAnswer(t, two)
	eq(t, "a held connection is served", code, 200)
	server.WaitUntil(t, 5*time.Second, "all released", func() bool { return r.Server.ConnsFrom("127.0.0.1") == 0 })
	metric(t, r.URL, `happy_relay_refusals_total{reason="connections"} 1`)
	metric(t, r.URL, `happy_relay_limit{limit="conns_per_address"} 2`)
}

// Behind a trusted proxy every connection is the proxy's: the cap counts
// the requests in progress of each forwarded address, a message stream
// and a websocket for as long as they are open.
func TestConnectionsPerAddressCapBehindProxy(t *testing.T) {
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), MaxConnsPerAddr: 2, TrustProxy: true})
	st := newStreamTest(t, r)
	sid := st.session("s")
	const client = "203.0.113.7"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.URL+"/v3/sessions/"+sid+"/messages/stream", nil)
	req.Header.Set("Authorization", "Bearer "+st.token)
	req.Header.Set("X-Forwarded-For", client)
	stream, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	eq(t, "stream", stream.StatusCode, 200)
	sock, err := sio.Dial(ctx, r.URL, sio.Options{Auth: map[string]any{"token": st.token, "clientType": "user-scoped"}, Header: http.Header{"X-Forwarded-For": {client}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	eq(t, "two held", r.Server.ConnsFrom(client), 2)
	get := func(from string) (int, string, string) {
		req, _ := http.NewRequest("GET", r.URL+"/health", nil)
		req.Header.Set("X-Forwarded-For", from)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	code, retry, body := get(client)
	eq(t, "third request", []any{code, retry, body}, []any{429, "1", `{"error":"Too many connections from this address (limit 2); close some and retry"}`})
	code, _, _ = get("203.0.113.8")
	eq(t, "another address", code, 200)
	_ = sock.Close()
	server.WaitUntil(t, 5*time.Second, "the websocket's place given back", func() bool { return r.Server.ConnsFrom(client) == 1 })
	code, _, _ = get(client)
	eq(t, "after the websocket closed", code, 200)
}

// Each rate limit answers 429 with Retry-After once its burst is spent,
// per address or per account, and counts the refusal.
func TestRateLimits(t *testing.T) {
	now := time.UnixMilli(1_800_000_000_000)
	hour := server.Limit{Every: time.Hour, Burst: 2}
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), Now: func() time.Time { return now },
		AuthRate: server.Limit{Every: time.Hour, Burst: 4}, AccountRate: hour, PairingRate: hour, LookupRate: hour, SessionRate: hour})
	a := newAPI(t, r)                        // sign-in 1, new account 1
	bAcct := servertest.NewAccount(t, r.URL) // sign-in 2, new account 2
	key := bAcct.Key
	post := func(path string, body any) (int, string, string) {
		req, _ := http.NewRequest("POST", r.URL+path, strings.NewReader(mustJSON(t, body)))
		req.Header.Set("Authorization", "Bearer "+a.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	// A third new account from this address is refused (sign-in 3); the
	// existing key still signs in (sign-in 4), and the fifth sign-in is
	// refused.
	_, fresh, _ := ed25519.GenerateKey(rand.Reader)
	code, retry, body := post("/v1/auth", signChallenge(fresh, randomChallenge()))
	eq(t, "third new account", []any{code, retry, body}, []any{429, "3600", `{"error":"Too many new accounts from this address (limit 2 at once, then 1 every 1h0m0s); retry in 3600 s"}`})
	code, _, _ = post("/v1/auth", signChallenge(key, randomChallenge()))
	eq(t, "a known key signs in", code, 200)
	code, retry, body = post("/v1/auth", signChallenge(key, randomChallenge()))
	eq(t, "fifth sign-in", []any{code, retry, body}, []any{429, "3600", `{"error":"Too many sign-ins from this address (limit 4 at once, then 1 every 1h0m0s); retry in 3600 s"}`})

	pk := base64.StdEncoding.EncodeToString(make([]byte, 32))
	for range 2 {
		code, _, _ = post("/v1/auth/request", map[string]any{"publicKey": pk, "supportsV2": true})
		eq(t, "pairing poll", code, 200)
	}
	code, retry, body = post("/v1/auth/request", map[string]any{"publicKey": pk, "supportsV2": true})
	eq(t, "third pairing poll", []any{code, retry, body}, []any{429, "3600", `{"error":"Too many pairing requests from this address (limit 2 at once, then 1 every 1h0m0s); retry in 3600 s"}`})

	for range 2 {
		a.must(200, "GET", "/v1/auth/request/lookup?code=AAAAA-AAAAA", nil)
	}
	eq(t, "third lookup", a.must(429, "GET", "/v1/auth/request/lookup?code=AAAAA-AAAAA", nil),
		map[string]any{"error": "Too many pairing code lookups for this account (limit 2 at once, then 1 every 1h0m0s); retry in 3600 s"})

	a.createSession("s1", "m")
	a.createSession("s2", "m")
	code, retry, body = post("/v1/sessions", map[string]any{"tag": "s3", "metadata": "m"})
	eq(t, "third session", []any{code, retry, body}, []any{429, "3600", `{"error":"Too many session creations for this account (limit 2 at once, then 1 every 1h0m0s); retry in 3600 s"}`})
	// Per account: another account of the same address still may.
	api{t: t, base: r.URL, token: bAcct.Token}.createSession("b1", "m")
	for reason, n := range map[string]int{"rate_auth": 1, "rate_account": 1, "rate_pairing": 1, "rate_lookup": 1, "rate_session": 1} {
		metric(t, r.URL, fmt.Sprintf(`happy_relay_refusals_total{reason=%q} %d`, reason, n))
	}
	metric(t, r.URL, `happy_relay_limit{limit="session_burst"} 2`)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func randomChallenge() []byte {
	ch := make([]byte, 32)
	_, _ = rand.Read(ch)
	return ch
}

// timedChallenge is a challenge of the timed form drawn at at.
func timedChallenge(at time.Time) []byte {
	ch := randomChallenge()
	copy(ch, server.ChallengeMagic)
	binary.BigEndian.PutUint64(ch[len(server.ChallengeMagic):], uint64(at.UnixMilli()))
	return ch
}

// signChallenge is the body of POST /v1/auth signing ch with key.
func signChallenge(key ed25519.PrivateKey, ch []byte) map[string]string {
	return map[string]string{
		"publicKey": base64.StdEncoding.EncodeToString(key.Public().(ed25519.PublicKey)),
		"challenge": base64.StdEncoding.EncodeToString(ch),
		"signature": base64.StdEncoding.EncodeToString(ed25519.Sign(key, ch)),
	}
}

// A captured POST /v1/auth body mints one token: replayed, after the
// first use or after the account's tokens were revoked, it gets 401. A
// timed challenge is accepted only within the relay's window.
func TestAuthChallengeIsSingleUse(t *testing.T) {
	now := time.Now()
	r := servertest.StartConfig(t, server.Config{Logger: quiet(t), Now: func() time.Time { return now }})
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	anon := api{t: t, base: r.URL}
	captured := signChallenge(key, randomChallenge())
	first := anon.must(200, "POST", "/v1/auth", captured)
	a := api{t: t, base: r.URL, token: first["token"].(string)}
	used := map[string]any{"error": "Challenge already used: sign a new one"}
	eq(t, "replay", anon.must(401, "POST", "/v1/auth", captured), used)
	a.must(200, "POST", "/v1/auth/revoke", nil)
	eq(t, "replay after revoke", anon.must(401, "POST", "/v1/auth", captured), used)
	a.token = anon.must(200, "POST", "/v1/auth", signChallenge(key, randomChallenge()))["token"].(string)
	a.must(200, "GET", "/v1/sessions", nil)

	fresh := signChallenge(key, timedChallenge(now.Add(-9*time.Minute)))
	anon.must(200, "POST", "/v1/auth", fresh)
	eq(t, "timed replay", anon.must(401, "POST", "/v1/auth", fresh), used)
	eq(t, "too old", anon.must(401, "POST", "/v1/auth", signChallenge(key, timedChallenge(now.Add(-11*time.Minute)))),
		map[string]any{"error": fmt.Sprintf("Challenge time outside the relay's window (its time %s, the relay's %s, window ±10m0s): sign a new one, and check this machine's clock",
			now.Add(-11*time.Minute).UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))})
	anon.must(401, "POST", "/v1/auth", signChallenge(key, timedChallenge(now.Add(11*time.Minute))))
	metric(t, r.URL, `happy_relay_refusals_total{reason="challenge_used"} 3`)
	metric(t, r.URL, `happy_relay_refusals_total{reason="challenge_window"} 2`)
}

// relay.CreateAccount signs a timed challenge; against a relay whose clock
// is an hour off it falls back to a plain one, which signs in too.
func TestCreateAccountChallenges(t *testing.T) {
	for name, skew := range map[string]time.Duration{"same clock": 0, "relay an hour ahead": time.Hour} {
		t.Run(name, func(t *testing.T) {
			r := servertest.StartConfig(t, server.Config{Logger: quiet(t), Now: func() time.Time { return time.Now().Add(skew) }})
			api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: r.URL})
			if err != nil {
				t.Fatal(err)
			}
			var secret [32]byte
			_, _ = rand.Read(secret[:])
			creds, err := relay.CreateAccount(context.Background(), api, secret)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := api.WithToken(creds.Token).ListSessions(context.Background()); err != nil {
				t.Fatal(err)
			}
			if skew != 0 {
				metric(t, r.URL, `happy_relay_refusals_total{reason="challenge_window"} 1`)
			}
		})
	}
}
