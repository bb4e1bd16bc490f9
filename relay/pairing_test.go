package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/evilrelay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

func testAPI(t *testing.T, url string) *API {
	t.Helper()
	api, err := NewAPI(HTTPConfig{BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.CloseIdleConnections)
	return api
}

func TestApproveByCode(t *testing.T) {
	url := servertest.Start(t).URL
	api := testAPI(t, url)
	owner := newAccount(t, url)
	req, err := NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st, err := api.AuthRequest(ctx, req.PublicKey[:]); err != nil || st.State != "requested" {
		t.Fatalf("open request: %+v, %v", st, err)
	}
	if _, err := ApproveByCode(ctx, api, owner, req.Code(), false); !errors.Is(err, ErrShortPairingCode) {
		t.Fatalf("the code without its secret: %v", err)
	}
	typed := strings.ToLower(strings.ReplaceAll(req.FullCode(), "-", " "))
	got, err := ApproveByCode(ctx, api, owner, typed, false)
	if err != nil || got != req.PublicKey {
		t.Fatalf("ApproveByCode = %x, %v", got, err)
	}
	creds, err := req.WaitApproved(ctx, api, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if creds.Variant != crypto.VariantDataKey || AccountID(creds) != AccountID(owner) {
		t.Fatalf("paired %s account %s, want dataKey %s", creds.Variant, AccountID(creds), AccountID(owner))
	}
	// Approved and delivered: the code finds nothing any more.
	if _, err := ApproveByCode(ctx, api, owner, req.FullCode(), false); !errors.Is(err, ErrNoPendingPairing) {
		t.Fatalf("second approval: %v", err)
	}
	if _, err := ApproveByCode(ctx, api, owner, "ABCDE", false); !errors.Is(err, crypto.ErrBadLength) {
		t.Fatalf("short code: %v", err)
	}
}

// fakeRelay answers the lookup with body and counts answers.
func fakeRelay(t *testing.T, status int, body string) (*httptest.Server, *int) {
	var mu sync.Mutex
	answers := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/auth/request/lookup":
			w.WriteHeader(status)
			fmt.Fprint(w, body)
		case "/v1/auth/response":
			mu.Lock()
			answers++
			mu.Unlock()
			fmt.Fprint(w, `{"success":true}`)
		default:
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":"Route %s %s not found"}`, r.Method, r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &answers
}

func lookupBody(keys ...[32]byte) string {
	type entry struct {
		PublicKey  string `json:"publicKey"`
		SupportsV2 bool   `json:"supportsV2"`
	}
	list := []entry{}
	for _, k := range keys {
		list = append(list, entry{crypto.EncodeBase64(k[:]), true})
	}
	b, _ := json.Marshal(map[string]any{"requests": list})
	return string(b)
}

func TestApproveByCodeRefusesAWrongKey(t *testing.T) {
	owner := &crypto.Credentials{Token: "t", AccountSecret: &[32]byte{7}, Variant: crypto.VariantLegacy}
	terminal, _, _ := crypto.NewBoxKeyPair()
	relayKey, _, _ := crypto.NewBoxKeyPair()
	ctx := context.Background()
	full := crypto.FullPairingCode(terminal, "AAAAA-BBBBB")
	for name, body := range map[string]string{
		"the relay's key instead":     lookupBody(relayKey),
		"the relay's key beside ours": lookupBody(terminal, relayKey),
	} {
		t.Run(name, func(t *testing.T) {
			srv, answers := fakeRelay(t, 200, body)
			_, err := ApproveByCode(ctx, testAPI(t, srv.URL), owner, full, false)
			if !errors.Is(err, ErrFingerprint) {
				t.Fatalf("err = %v, want ErrFingerprint", err)
			}
			if *answers != 0 {
				t.Fatalf("%d answers sent to the relay", *answers)
			}
		})
	}
	t.Run("the right key", func(t *testing.T) {
		srv, answers := fakeRelay(t, 200, lookupBody(terminal))
		got, err := ApproveByCode(ctx, testAPI(t, srv.URL), owner, full, false)
		if err != nil || got != terminal || *answers != 1 {
			t.Fatalf("= %x, %v, %d answers", got, err, *answers)
		}
	})
	t.Run("a relay without the route", func(t *testing.T) {
		srv, _ := fakeRelay(t, 404, `{"error":"Route GET /v1/auth/request/lookup not found"}`)
		_, err := ApproveByCode(ctx, testAPI(t, srv.URL), owner, full, false)
		if !errors.Is(err, ErrRouteUnsupported) {
			t.Fatalf("err = %v, want ErrRouteUnsupported", err)
		}
	})
	t.Run("a malformed answer", func(t *testing.T) {
		srv, _ := fakeRelay(t, 200, `{"requests":[{"publicKey":"AAAA"}]}`)
		_, err := ApproveByCode(ctx, testAPI(t, srv.URL), owner, full, false)
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("err = %v, want ErrProtocol", err)
		}
	})
}

func TestParseTerminalKey(t *testing.T) {
	key, _, _ := crypto.NewBoxKeyPair()
	u := crypto.EncodeBase64URL(key[:])
	for _, in := range []string{"happy://terminal?" + u, "https://app.example/terminal/connect#key=" + u, u, " " + u + "\n", crypto.EncodeBase64(key[:])} {
		got, err := ParseTerminalKey(in)
		if err != nil || got != key {
			t.Errorf("ParseTerminalKey(%q) = %x, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "happy://terminal?", "happy://terminal?AAAA", "not a key!", "happy://terminal?" + u + "&x=1", "happy://terminal?" + u + "&secret=ABC"} {
		if _, err := ParseTerminalKey(in); err == nil {
			t.Errorf("ParseTerminalKey(%q) accepted", in)
		}
	}
	// happy's approve link carries the pairing secret; the app's does not.
	for in, want := range map[string]string{
		"happy://terminal?" + u + "&secret=abcde-fghij": "ABCDE-FGHIJ",
		"happy://terminal?" + u + "&secret=ABCDEFGHIJ":  "ABCDE-FGHIJ",
		"happy://terminal?" + u:                         "",
		u:                                               "",
	} {
		got, secret, err := ParseTerminalLink(in)
		if err != nil || got != key || secret != want {
			t.Errorf("ParseTerminalLink(%q) = %x %q, %v; want secret %q", in, got, secret, err, want)
		}
	}
	req, _ := NewPairingRequest()
	if got, secret, err := ParseTerminalLink(req.ApproveLink()); err != nil || got != req.PublicKey || req.FullCode() != crypto.FullPairingCode(got, secret) {
		t.Errorf("ApproveLink %q reads back as %x %q, %v", req.ApproveLink(), got, secret, err)
	}
}

func TestBrowserLinkRoundTrip(t *testing.T) {
	secret := [32]byte{1, 2, 3, 250, 251, 252}
	cases := []struct {
		base  string
		relay string
		want  string
	}{
		{"https://relay.example", "", "https://relay.example/#pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"http://127.0.0.1:3005/", "", "http://127.0.0.1:3005/#pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		{"http://127.0.0.1:41000", "https://api.cluster-fluster.com/a?b=c&d", "http://127.0.0.1:41000/#pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&relay=https%3A%2F%2Fapi.cluster-fluster.com%2Fa%3Fb%3Dc%26d"},
	}
	for _, c := range cases {
		link, err := BrowserLink(c.base, BrowserPairing{Secret: secret, Relay: c.relay})
		if err != nil || link != c.want {
			t.Fatalf("BrowserLink(%q, %q) = %q, %v; want %q", c.base, c.relay, link, err, c.want)
		}
		p, err := ParseBrowserLink(link)
		if err != nil || p.Secret != secret || p.Relay != c.relay {
			t.Fatalf("ParseBrowserLink(%q) = %v, %v", link, p, err)
		}
	}
	for _, bad := range []string{"ftp://x", "https://x/?q=1", "https://x/#y", "relay.example"} {
		if _, err := BrowserLink(bad, BrowserPairing{}); !errors.Is(err, ErrBadLink) {
			t.Errorf("BrowserLink(%q): %v", bad, err)
		}
	}
	if _, err := BrowserLink("https://x", BrowserPairing{Relay: "javascript:alert(1)"}); !errors.Is(err, ErrBadLink) {
		t.Errorf("relay javascript: %v", err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", BrowserPairing{Secret: secret}, BrowserPairing{Secret: secret}, BrowserPairing{Secret: secret}, BrowserPairing{Secret: secret}); strings.Contains(s, "AQID") || strings.Contains(s, "250") {
		t.Fatalf("the secret printed: %s", s)
	}
}

func TestParseBrowserLinkRefuses(t *testing.T) {
	good := "pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct{ in, why string }{
		{"https://x/", "no fragment"},
		{"https://x/#", "no fragment"},
		{"#relay=https%3A%2F%2Fx", "no pair"},
		{"#" + good + "&" + good, "pair given twice"},
		{"#pair=AQID", "pair of 4 characters"},
		{"#" + good + "A", "pair of 44 characters"},
		{"#pair=AQID+vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not base64url"},
		{"#" + good + "&relay=javascript%3Aalert(1)", "absolute http(s) URL"},
		{"#" + good + "&relay=%zz", "relay: invalid URL escape"},
		{"#" + good + "&relay=https%3A%2F%2Fa&relay=https%3A%2F%2Fb", "relay given twice"},
		{"#" + good + "&x=1", `unknown part "x"`},
		{"#" + good + "&", "has no '='"},
	} {
		_, err := ParseBrowserLink(c.in)
		if !errors.Is(err, ErrBadLink) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseBrowserLink(%q) = %v, want ErrBadLink saying %q", c.in, err, c.why)
		}
		if err != nil && strings.Contains(err.Error(), "AQID") {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
	if p, err := ParseBrowserLink(good); err != nil || p.Secret[0] != 1 {
		t.Errorf("bare fragment: %v, %v", p, err)
	}
}

func FuzzParseBrowserLink(f *testing.F) {
	for _, s := range []string{
		"https://relay.example/#pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"http://127.0.0.1:41000/#pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&relay=https%3A%2F%2Fa.example",
		"#pair=&relay=", "#&&&", "pair=x", "", "#pair=AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&relay=%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseBrowserLink(s)
		if err != nil {
			if !errors.Is(err, ErrBadLink) {
				t.Fatalf("error %v does not wrap ErrBadLink", err)
			}
			return
		}
		link, err := BrowserLink("https://x.example", p)
		if err != nil {
			t.Fatalf("a parsed link does not rebuild: %v (%v)", err, p)
		}
		q, err := ParseBrowserLink(link)
		if err != nil || q != p {
			t.Fatalf("rebuilt link %q parses to %v, %v; want %v", link, q, err, p)
		}
	})
}

// TestBrowserPairing plays the browser in Go: it reads the link's secret,
// posts its public key once and opens the answer.
func TestBrowserPairing(t *testing.T) {
	url := servertest.Start(t).URL
	api := testAPI(t, url)
	owner := newAccount(t, url)
	ctx := context.Background()
	p, err := PairBrowser(ctx, api, owner)
	if err != nil {
		t.Fatal(err)
	}
	link, err := BrowserLink(url, p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseBrowserLink(link)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := CollectBrowserPairing(ctx, api, got)
	if err != nil {
		t.Fatal(err)
	}
	if creds.Variant != crypto.VariantLegacy || creds.AccountSecret == nil || *creds.AccountSecret != *owner.AccountSecret {
		t.Fatalf("browser credentials: variant %s, secret held %v", creds.Variant, creds.AccountSecret != nil)
	}
	if _, err := api.WithToken(creds.Token).ListSessions(ctx); err != nil {
		t.Fatalf("the browser's token: %v", err)
	}
	if _, err := CollectBrowserPairing(ctx, api, got); !errors.Is(err, ErrNoPendingPairing) {
		t.Fatalf("second use of the link: %v", err)
	}
	paired := &crypto.Credentials{Token: owner.Token, Variant: crypto.VariantDataKey}
	if _, err := PairBrowser(ctx, api, paired); !errors.Is(err, crypto.ErrNoAccountSecret) {
		t.Fatalf("pairing from a machine without the secret: %v", err)
	}
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestBrowserLinkExpiresWithTheRequest(t *testing.T) {
	clk := &testClock{now: time.UnixMilli(1_800_000_000_000)}
	url := servertest.StartConfig(t, server.Config{Now: clk.Now, PairingTTL: 5 * time.Minute, SweepInterval: time.Hour}).URL
	api := testAPI(t, url)
	owner := newAccount(t, url)
	ctx := context.Background()
	p, err := PairBrowser(ctx, api, owner)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(5 * time.Minute)
	if _, err := CollectBrowserPairing(ctx, api, p); !errors.Is(err, ErrNoPendingPairing) {
		t.Fatalf("expired link: %v", err)
	}
	// A link used within its lifetime works.
	p, err = PairBrowser(ctx, api, owner)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(5*time.Minute - time.Millisecond)
	if _, err := CollectBrowserPairing(ctx, api, p); err != nil {
		t.Fatalf("link just before expiry: %v", err)
	}
}

func TestRevokeTokensRoute(t *testing.T) {
	url := servertest.Start(t).URL
	api := testAPI(t, url)
	owner := newAccount(t, url)
	ctx := context.Background()
	rv, err := api.WithToken(owner.Token).RevokeTokens(ctx)
	if err != nil || rv.Generation != 1 {
		t.Fatalf("revoke = %+v, %v", rv, err)
	}
	if _, err := api.WithToken(owner.Token).ListSessions(ctx); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("revoked token: %v", err)
	}
	srv, _ := fakeRelay(t, 404, "")
	if _, err := testAPI(t, srv.URL).WithToken("t").RevokeTokens(ctx); !errors.Is(err, ErrRouteUnsupported) {
		t.Fatalf("reference relay: %v", err)
	}
}

func FuzzParseTerminalKey(f *testing.F) {
	for _, s := range []string{"happy://terminal?AQID-vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "https://x/terminal/connect#key=AQID&x", "AQID+vv8AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "", "#key="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseTerminalKey(s)
		if err != nil {
			if !errors.Is(err, crypto.ErrBadEncoding) && !errors.Is(err, crypto.ErrBadLength) {
				t.Fatalf("error %v wraps no crypto sentinel", err)
			}
			return
		}
		again, err := ParseTerminalKey("happy://terminal?" + crypto.EncodeBase64URL(k[:]))
		if err != nil || again != k {
			t.Fatalf("the key does not round-trip: %v", err)
		}
	})
}

func FuzzDecodeLookup(f *testing.F) {
	key, _, _ := crypto.NewBoxKeyPair()
	f.Add([]byte(lookupBody(key)))
	f.Add([]byte(`{"requests":[]}`))
	f.Add([]byte(`{"requests":null}`))
	f.Add([]byte(`{"requests":[{"publicKey":"AAAA"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		list, err := decodeLookup(b)
		if err != nil {
			if !errors.Is(err, ErrProtocol) || list != nil {
				t.Fatalf("error %v (list %v) is not a bare ErrProtocol", err, list)
			}
			return
		}
		if list == nil {
			t.Fatal("nil list without error")
		}
	})
}

// pollRaw is POST /v1/auth/request {publicKey, supportsV2} as any caller
// sends it, returning the answer's fields.
func pollRaw(t *testing.T, url string, publicKey [32]byte) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"publicKey": crypto.EncodeBase64(publicKey[:]), "supportsV2": true})
	resp, err := http.Post(url+"/v1/auth/request", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("poll: %s, %v", resp.Status, err)
	}
	return out
}

// TestPairingRaceAttackerGetsNoToken is the pairing race: another account
// that saw the terminal's code turns it into the public key with the
// lookup, and polls with that key as soon as the owner approved. It gets
// nothing it can use (no plain token; what it gets is sealed for the
// terminal's secret key), and the terminal still gets its token.
func TestPairingRaceAttackerGetsNoToken(t *testing.T) {
	url := servertest.Start(t).URL
	api := testAPI(t, url)
	owner := newAccount(t, url)
	attacker := newAccount(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.AuthRequest(ctx, req.PublicKey[:]); err != nil {
		t.Fatal(err)
	}
	found, err := api.WithToken(attacker.Token).LookupPairing(ctx, req.Code())
	if err != nil || len(found) != 1 || found[0].PublicKey != req.PublicKey {
		t.Fatalf("the attacker's lookup = %+v, %v", found, err)
	}
	if _, err := ApproveByCode(ctx, api, owner, req.FullCode(), false); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		got := pollRaw(t, url, found[0].PublicKey)
		if _, ok := got["token"]; ok || got["state"] != "authorized" {
			t.Fatalf("the attacker's poll got %v, want an authorized answer without a token", got)
		}
		sealed, err := crypto.DecodeBase64(fmt.Sprint(got["sealedToken"]))
		if err != nil {
			t.Fatalf("sealedToken %v: %v", got["sealedToken"], err)
		}
		_, guess, _ := crypto.NewBoxKeyPair()
		if _, err := crypto.OpenSealedToken(sealed, guess); !errors.Is(err, crypto.ErrAuthFailed) {
			t.Fatalf("the sealed token opened without the terminal's key: %v", err)
		}
	}
	creds, err := req.WaitApproved(ctx, api, 10*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("the terminal after the attacker's polls: %v", err)
	}
	if AccountID(creds) != AccountID(owner) || creds.Variant != crypto.VariantDataKey {
		t.Fatalf("the terminal paired with %s (%s), want %s", AccountID(creds), creds.Variant, AccountID(owner))
	}
	if _, err := api.WithToken(creds.Token).ListSessions(ctx); err != nil {
		t.Fatalf("the terminal's token: %v", err)
	}
	// Collected: the answer is not handed out again.
	if got := pollRaw(t, url, req.PublicKey); got["state"] != "requested" {
		t.Fatalf("a poll after the terminal collected its answer: %v", got)
	}
}

// TestWaitApprovedOnTheReferenceRelay: the reference relay answers with a
// plain token; the terminal takes it (a relay that gives its own users'
// tokens away harms only them), and tells nobody it collected anything.
func TestWaitApprovedOnTheReferenceRelay(t *testing.T) {
	req, err := NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	secret := [32]byte{9}
	bundle, err := crypto.SealPairingResponse(crypto.PairingResponse{Variant: crypto.VariantLegacy, Secret: secret}, req.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/v1/auth/request" {
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":"Route %s %s not found"}`, r.Method, r.URL.Path)
			return
		}
		fmt.Fprintf(w, `{"state":"authorized","token":"plain.token.sig","response":%q}`, crypto.EncodeBase64(bundle))
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	creds, err := req.WaitApproved(ctx, testAPI(t, srv.URL), 10*time.Millisecond, func(*crypto.Credentials) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if creds.Token != "plain.token.sig" || creds.AccountSecret == nil || *creds.AccountSecret != secret {
		t.Fatalf("credentials %q, secret %v", creds.Token, creds.AccountSecret)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 {
		t.Fatalf("requests %v, want one poll", paths)
	}
	// An authorized answer with no token at all is a protocol error.
	if _, err := (AuthRequestState{State: "authorized", Response: "x"}).OpenToken(secret); !errors.Is(err, ErrProtocol) {
		t.Fatalf("no token: %v", err)
	}
}

// A relay that turns the lookup's supportsV2 off would have the approver
// hand the terminal the account secret while the person asked for dataKey
// access: the approval is refused (nothing sent, the request still open)
// unless legacy was asked for.
func TestApproveByCodeRefusesADowngrade(t *testing.T) {
	url := servertest.Start(t).URL
	owner := newAccount(t, url)
	p := evilrelay.Start(t, url, evilrelay.EditJSON("GET", "/v1/auth/request/lookup", func(body any) any {
		if m, ok := body.(map[string]any); ok {
			if list, ok := m["requests"].([]any); ok {
				for _, e := range list {
					if q, ok := e.(map[string]any); ok {
						q["supportsV2"] = false
					}
				}
			}
		}
		return body
	}))
	api := testAPI(t, p.URL)
	req, err := NewPairingRequest()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if st, err := api.AuthRequest(ctx, req.PublicKey[:]); err != nil || st.State != "requested" {
		t.Fatalf("open request: %+v, %v", st, err)
	}
	if _, err := ApproveByCode(ctx, api, owner, req.FullCode(), false); !errors.Is(err, ErrLegacyOnly) {
		t.Fatalf("a downgraded lookup: %v", err)
	}
	if st, err := api.AuthRequestStatus(ctx, req.PublicKey[:]); err != nil || st != "pending" {
		t.Fatalf("after the refusal the request is %q, %v; want pending (nothing sent)", st, err)
	}
	// Asked for: legacy goes through.
	if _, err := ApproveByCode(ctx, api, owner, req.FullCode(), true); err != nil {
		t.Fatal(err)
	}
	creds, err := req.WaitApproved(ctx, api, 10*time.Millisecond, nil)
	if err != nil || creds.Variant != crypto.VariantLegacy {
		t.Fatalf("legacy approval: %v, %v", creds, err)
	}
}
