package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// newOwner is a home logged in to a new account on url (it holds the
// account secret) and its credentials.
func newOwner(t *testing.T, url string) (map[string]string, *crypto.Credentials) {
	t.Helper()
	env := authEnv(t, url)
	if code, _, stderr := runHappy(t, env, "auth", "login", "--new-account"); code != exitOK {
		t.Fatalf("login --new-account: %s", stderr)
	}
	creds, err := crypto.LoadCredentials(filepath.Join(env["HAPPY_HOME_DIR"], "access.key"))
	if err != nil {
		t.Fatal(err)
	}
	return env, creds
}

// waitForOutput polls out until re matches and returns the submatches.
func waitForOutput(t *testing.T, out, errb *syncBuffer, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}).True(func() bool { m = re.FindStringSubmatch(out.String()); return m != nil }) {
		t.Fatalf("%s not in:\n%s\n%s", re, out.String(), errb.String())
	}
	return m
}

// startLogin runs happy auth login on env in the background, with no
// terminal on stdin; it returns the output and the exit code channel.
func startLogin(t *testing.T, env map[string]string) (*syncBuffer, *syncBuffer, chan int) {
	return startLoginWith(t, env, "", false)
}

// startLoginWith is startLogin with stdin and whether stdin is a terminal
// (tty), and more arguments.
func startLoginWith(t *testing.T, env map[string]string, stdin string, tty bool, args ...string) (*syncBuffer, *syncBuffer, chan int) {
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	f.isTerminal = func(s any) bool { return tty && s == f.stdin }
	done := make(chan int, 1)
	go func() { done <- run(append([]string{"auth", "login", "--timeout", "30s"}, args...), f) }()
	return &out, &errb, done
}

func waitExit(t *testing.T, done chan int, errb *syncBuffer) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("the command did not finish: %s", errb.String())
		return -1
	}
}

// approveRe is the full pairing code happy auth login shows: the code
// (fingerprint) and the pairing secret.
var approveRe = regexp.MustCompile(`(?m)^    happy auth approve ([A-Z2-7]{5}-[A-Z2-7]{5})-([A-Z2-7]{5}-[A-Z2-7]{5})$`)

// TestAuthApproveByCode pairs two homes terminal to terminal: the new
// machine shows a code, the owner types it.
func TestAuthApproveByCode(t *testing.T) {
	for _, how := range []string{"code", "typed code", "link", "key", "legacy"} {
		t.Run(how, func(t *testing.T) {
			url := servertest.Start(t).URL
			owner, ownerCreds := newOwner(t, url)
			paired := authEnv(t, url)
			var out, errb *syncBuffer
			var done chan int
			if how == "key" {
				// A bare key proves nothing: the terminal takes it only
				// when told to.
				out, errb, done = startLoginWith(t, paired, "", false, "--accept-unproven")
			} else {
				out, errb, done = startLogin(t, paired)
			}
			m := waitForOutput(t, out, errb, approveRe)
			code, full := m[1], m[1]+"-"+m[2]
			link := waitForOutput(t, out, errb, regexp.MustCompile(`happy://terminal\?[A-Za-z0-9_-]+&secret=[A-Z2-7-]+`))[0]
			key, secret, err := relay.ParseTerminalLink(link)
			if err != nil || crypto.PairingCode(key) != code || secret != m[2] {
				t.Fatalf("the code %s is not the fingerprint of the link's key, or %s not its secret (%v)", full, link, err)
			}
			// The request exists once the terminal polled.
			api, _ := relay.NewAPI(relay.HTTPConfig{BaseURL: url})
			waitfor.Poll{Every: 10 * time.Millisecond}.Until(t, "the terminal's pairing request", func() bool {
				st, _ := api.AuthRequestStatus(context.Background(), key[:])
				return st == "pending"
			})
			args := []string{"auth", "approve", full}
			variant, reads := crypto.VariantDataKey, "dataKey: it reads the sessions it writes"
			switch how {
			case "typed code":
				args[2] = strings.ToLower(strings.ReplaceAll(full, "-", " "))
			case "link":
				args[2] = link
			case "key":
				// A base64url key may start with "-": after "--" it is
				// an argument, not a flag (as the help says).
				args = []string{"auth", "approve", "--", crypto.EncodeBase64URL(key[:])}
			case "legacy":
				args = append(args, "--legacy")
				variant, reads = crypto.VariantLegacy, "legacy: it holds the account secret and reads every session"
			}
			c, stdout, stderr := runHappy(t, owner, args...)
			want := "Approved the terminal with code " + code + " for account " + relay.AccountID(ownerCreds) + " on " + url + " (" + reads + ").\n"
			if how == "key" {
				want += "The link or key carries no pairing secret, so the approval proves nothing to the terminal: it shows account " + relay.AccountID(ownerCreds) + " and asks its person to confirm it.\n"
			}
			if c != exitOK || stdout != want {
				t.Fatalf("approve = %d %q %q, want %q", c, stdout, stderr, want)
			}
			if c := waitExit(t, done, errb); c != exitOK {
				t.Fatalf("login exit %d: %s", c, errb.String())
			}
			creds, err := crypto.LoadCredentials(filepath.Join(paired["HAPPY_HOME_DIR"], "access.key"))
			if err != nil {
				t.Fatal(err)
			}
			if creds.Variant != variant || relay.AccountID(creds) != relay.AccountID(ownerCreds) {
				t.Fatalf("paired %s %s, want %s %s", creds.Variant, relay.AccountID(creds), variant, relay.AccountID(ownerCreds))
			}
			wantOut := "Paired with account " + relay.AccountID(ownerCreds) + " on " + url + ".\n"
			if how == "key" {
				wantOut = "Account " + relay.AccountID(ownerCreds) + " answered this terminal's pairing request without proof that it saw the full pairing code; taken as yours (--accept-unproven).\n" + wantOut
			}
			if !strings.HasSuffix(out.String(), "Waiting for approval (up to 30s)…\n"+wantOut) {
				t.Fatalf("login output:\n%s", out.String())
			}
			// The code was used: approving it again finds nothing.
			c, _, stderr = runHappy(t, owner, "auth", "approve", full)
			if c != exitFailed || !strings.Contains(stderr, "no terminal is waiting with code "+code) {
				t.Fatalf("second approve = %d %q", c, stderr)
			}
		})
	}
}

func TestAuthApproveRefusals(t *testing.T) {
	url := servertest.Start(t).URL
	owner, _ := newOwner(t, url)
	terminal, _, _ := crypto.NewBoxKeyPair()
	code := crypto.PairingCode(terminal)
	full := crypto.FullPairingCode(terminal, "AAAAA-BBBBB")
	relayKey, _, _ := crypto.NewBoxKeyPair()
	answered := 0
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/auth/request/lookup" && r.URL.Query().Get("code") == "NOROUTE":
		case r.URL.Path == "/v1/auth/request/lookup":
			fmt.Fprintf(w, `{"requests":[{"publicKey":%q,"supportsV2":true}]}`, crypto.EncodeBase64(relayKey[:]))
			return
		case r.URL.Path == "/v1/auth/response":
			answered++
			fmt.Fprint(w, `{"success":true}`)
			return
		}
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"Route %s %s not found"}`, r.Method, r.URL.Path)
	}))
	defer fake.Close()
	evil := map[string]string{"HAPPY_HOME_DIR": owner["HAPPY_HOME_DIR"], "HAPPY_SERVER_URL": fake.URL}
	c, _, stderr := runHappy(t, evil, "auth", "approve", full)
	if c != exitRelay || !strings.Contains(stderr, "happy: refused: relay: the relay answered code "+code+" with a key whose code is "+crypto.PairingCode(relayKey)) || answered != 0 {
		t.Fatalf("a relay substituting its key: %d %q, %d answers", c, stderr, answered)
	}

	reference := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		fmt.Fprintf(w, `{"error":"Route %s %s not found"}`, r.Method, r.URL.Path)
	}))
	defer reference.Close()
	ref := map[string]string{"HAPPY_HOME_DIR": owner["HAPPY_HOME_DIR"], "HAPPY_SERVER_URL": reference.URL}
	c, _, stderr = runHappy(t, ref, "auth", "approve", full)
	if c != exitRelay || !strings.HasPrefix(stderr, "happy: the relay "+reference.URL+" cannot look up pairing codes (only happy's own relay can); approve with the link that happy auth login shows: happy auth approve 'happy://terminal?…'\n") {
		t.Fatalf("reference relay: %d %q", c, stderr)
	}

	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"auth", "approve", "nonsense"}, exitUsage, "happy: \"nonsense\" is neither a pairing code (XXXXX-XXXXX-SSSSS-SSSSS) nor a terminal link or key\n"},
		{[]string{"auth", "approve"}, exitUsage, "happy: accepts 1 arg(s), received 0\n"},
		{[]string{"auth", "approve", code}, exitUsage, "happy: " + code + " is only the first half of the pairing code: type the full code that happy auth login shows, " + code + "-SSSSS-SSSSS (its second half proves to the terminal that the approval comes from someone who sees its screen)\n"},
		{[]string{"auth", "approve", full}, exitFailed, "happy: no terminal is waiting with code " + code + " on " + url + " (mistyped, expired, or approved already; happy auth login shows a new code when restarted)\n"},
		{[]string{"auth", "approve", "happy://terminal?" + crypto.EncodeBase64URL(terminal[:])}, exitFailed, "happy: no terminal is waiting with this key on " + url + " (relay says \"not_found\": expired, or approved already)\n"},
	} {
		c, _, stderr := runHappy(t, owner, tc.args...)
		if c != tc.code || stderr != tc.stderr {
			t.Errorf("%v = %d %q, want %d %q", tc.args, c, stderr, tc.code, tc.stderr)
		}
	}
	// A machine without the account secret cannot approve.
	paired := authEnv(t, url)
	out, errb, done := startLogin(t, paired)
	pm := waitForOutput(t, out, errb, approveRe)
	if c, _, stderr := runHappy(t, owner, "auth", "approve", pm[1]+"-"+pm[2]); c != exitOK {
		t.Fatalf("approve: %s", stderr)
	}
	if c := waitExit(t, done, errb); c != exitOK {
		t.Fatal(errb.String())
	}
	if c, _, stderr := runHappy(t, paired, "auth", "approve", full); c != exitFailed || !strings.Contains(stderr, "does not hold the account secret, which approving a terminal needs") {
		t.Fatalf("approve from a paired machine: %d %q", c, stderr)
	}
}

func TestAuthLogoutRevoke(t *testing.T) {
	url := servertest.Start(t).URL
	owner, creds := newOwner(t, url)
	sock, err := sio.Dial(context.Background(), url, sio.Options{Auth: map[string]any{"token": creds.Token}, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	c, stdout, stderr := runHappy(t, owner, "auth", "logout", "--revoke")
	// The test's socket is one connection or, while the client library
	// upgrades its transport, two.
	want := regexp.MustCompile("^Revoked every token of account " + relay.AccountID(creds) + " on " + regexp.QuoteMeta(url) + ` \(token generation 1, [12] connections closed\): every machine and browser of the account must log in again\.\n` +
		`Logged out\. Messages still in the outbox are sent after the next login to the same account\.\n$`)
	if c != exitOK || !want.MatchString(stdout) {
		t.Fatalf("logout --revoke = %d %q %q", c, stdout, stderr)
	}
	req, _ := http.NewRequest("GET", url+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+creds.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("the old token on HTTP: %s", resp.Status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = sio.Dial(ctx, url, sio.Options{Auth: map[string]any{"token": creds.Token}, ConnectTimeout: 3 * time.Second})
	var ce *sio.ConnectError
	if !errors.As(err, &ce) || ce.Message != "Invalid authentication token" {
		t.Fatalf("the old token on Socket.IO: %v", err)
	}
	if _, err := os.Stat(filepath.Join(owner["HAPPY_HOME_DIR"], "access.key")); !os.IsNotExist(err) {
		t.Fatalf("access.key kept: %v", err)
	}
	// The account comes back with its backup key, with a working token.
	again, _ := newOwner(t, url)
	reference := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"Route not found"}`)
	}))
	defer reference.Close()
	ref := map[string]string{"HAPPY_HOME_DIR": again["HAPPY_HOME_DIR"], "HAPPY_SERVER_URL": reference.URL}
	c, _, stderr = runHappy(t, ref, "auth", "logout", "--revoke")
	if c != exitRelay || !strings.HasPrefix(stderr, "happy: the relay "+reference.URL+" cannot revoke tokens (the reference relay has no revocation: its tokens stay valid); nothing was changed") {
		t.Fatalf("revoke on the reference relay: %d %q", c, stderr)
	}
	if _, err := os.Stat(filepath.Join(again["HAPPY_HOME_DIR"], "access.key")); err != nil {
		t.Fatalf("access.key removed although nothing was revoked: %v", err)
	}
}

var webLinkRe = regexp.MustCompile(`(?m)^    (http://\S+/#pair=\S+)$`)

// browser does what the web app does with a pairing link.
func browser(t *testing.T, link, relayURL string) (*crypto.Credentials, error) {
	t.Helper()
	p, err := relay.ParseBrowserLink(link)
	if err != nil {
		t.Fatalf("link %q: %v", link, err)
	}
	if p.Relay != "" {
		relayURL = p.Relay
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: relayURL})
	if err != nil {
		t.Fatal(err)
	}
	defer api.CloseIdleConnections()
	return relay.CollectBrowserPairing(context.Background(), api, p)
}

// trustRelay declares the relay at url the home's own (trustedWebRelay in
// its settings.json): happy web may then hand the link to that relay's app.
func trustRelay(t *testing.T, env map[string]string, url string) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"trustedWebRelay": url})
	if err := os.WriteFile(filepath.Join(env["HAPPY_HOME_DIR"], "settings.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// startRelayWithApp runs a relay that serves a web app (a one-page one) at /.
func startRelayWithApp(t *testing.T) string {
	t.Helper()
	return servertest.StartConfig(t, server.Config{App: fstest.MapFS{"index.html": {Data: []byte("<!doctype html><title>relay app</title>")}}}).URL
}

func TestWebPairsABrowser(t *testing.T) {
	for _, cmd := range [][]string{{"web"}, {"auth", "pair-browser"}} {
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			url := startRelayWithApp(t)
			owner, creds := newOwner(t, url)
			trustRelay(t, owner, url+"/")
			c, stdout, stderr := runHappy(t, owner, cmd...)
			if c != exitOK || stderr != "" {
				t.Fatalf("happy %v = %d %q", cmd, c, stderr)
			}
			m := webLinkRe.FindStringSubmatch(stdout)
			// The relay is on loopback: a phone cannot open the link, so
			// there is no QR code, and the output says why.
			if m == nil || !strings.HasPrefix(m[1], url+"/#pair=") || strings.Contains(m[1], "&relay=") || strings.ContainsAny(stdout, "█▀▄") ||
				!strings.HasPrefix(stdout, "Open this link in a browser on this machine to pair it with your account:\n") ||
				!strings.HasSuffix(stdout, "No QR code: "+strings.TrimPrefix(url, "http://")+" is this machine's loopback address, which a phone cannot reach (on a phone it is the phone itself). For a phone, the relay needs an https address the phone can reach: "+phoneWays+".\n") {
				t.Fatalf("no link to %s, or a QR code a phone cannot open, in:\n%s", url, stdout)
			}
			got, err := browser(t, m[1], url)
			if err != nil {
				t.Fatal(err)
			}
			if got.Variant != crypto.VariantLegacy || got.AccountSecret == nil || *got.AccountSecret != *creds.AccountSecret {
				t.Fatalf("the browser got %s, secret %v", got.Variant, got.AccountSecret != nil)
			}
			if _, err := browser(t, m[1], url); !errors.Is(err, relay.ErrNoPendingPairing) {
				t.Fatalf("second use of the link: %v", err)
			}
		})
	}
}

func TestWebServesTheAppForAnotherRelay(t *testing.T) {
	url := servertest.Start(t).URL
	owner, creds := newOwner(t, url)
	// The same relay under another address (a reverse proxy): it does not
	// serve the web app, so happy web does.
	target, _ := neturl.Parse(url)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	defer proxy.Close()
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return owner[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	files := fstest.MapFS{"index.html": {Data: []byte("tiny app")}}
	go func() { done <- runWeb(ctx, f, webOptions{relay: proxy.URL, listen: "127.0.0.1:0"}, files) }()
	m := waitForOutput(t, &out, &errb, regexp.MustCompile(`(?m)^    (http://127\.0\.0\.1:\d+)/#pair=\S+&relay=(\S+)$`))
	waitForOutput(t, &out, &errb, regexp.MustCompile(`Serving the web app at `))
	if rel, _ := neturl.QueryUnescape(m[2]); rel != proxy.URL {
		t.Fatalf("relay in the link %q, want %q", rel, proxy.URL)
	}
	resp, err := http.Get(m[1] + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "tiny app" {
		t.Fatalf("the served app: %d %q", resp.StatusCode, b)
	}
	// The page may connect to the relay in its link.
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' "+proxy.URL+" ws://"+strings.TrimPrefix(proxy.URL, "http://")+";") {
		t.Fatalf("the served app's CSP %q does not allow its relay %s", csp, proxy.URL)
	}
	got, err := browser(t, strings.TrimPrefix(m[0], "    "), "")
	if err != nil || *got.AccountSecret != *creds.AccountSecret {
		t.Fatalf("browser via the other relay: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.close()

}

// serveWeb runs happy web with o in the background until it prints the
// line it serves the app on; it returns the local app's base URL, the relay
// the link names, the whole output, and a stop that checks runWeb ended
// without an error.
func serveWeb(t *testing.T, env map[string]string, o webOptions) (base, relayURL, output string, stop func()) {
	t.Helper()
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	files := fstest.MapFS{"index.html": {Data: []byte("tiny app")}}
	go func() { done <- runWeb(ctx, f, o, files) }()
	m := waitForOutput(t, &out, &errb, regexp.MustCompile(`(?m)^    (http://127\.0\.0\.1:\d+)/#pair=\S+&relay=(\S+)$`))
	waitForOutput(t, &out, &errb, regexp.MustCompile(`Serving the web app at `))
	rel, _ := neturl.QueryUnescape(m[2])
	resp, err := http.Get(m[1] + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "tiny app" {
		t.Fatalf("the served app: %d %q", resp.StatusCode, b)
	}
	http.DefaultClient.CloseIdleConnections()
	return m[1], rel, out.String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		f.close()
	}
}

// TestWebServesTheAppForAnAppLessRelay: a relay declared the home's own
// that serves no web app (404 at /) would make the link a dead one, so
// happy web serves the app itself and the link names the relay, also when
// --relay names that configured relay; a trusted relay that serves its app
// gets the link to it, with or without --relay.
func TestWebServesTheAppForAnAppLessRelay(t *testing.T) {
	bare := servertest.Start(t).URL
	owner, _ := newOwner(t, bare)
	trustRelay(t, owner, bare)
	for _, o := range []webOptions{{listen: "127.0.0.1:0"}, {relay: bare, listen: "127.0.0.1:0"}, {relay: bare + "/", listen: "127.0.0.1:0"}} {
		base, rel, out, stop := serveWeb(t, owner, o)
		if !sameURL(rel, bare) {
			t.Errorf("--relay %q: relay in the link %q, want %q", o.relay, rel, bare)
		}
		if want := "The relay " + rel + " serves no web app, so happy web serves it.\nServing the web app at " + base + "/ for the relay " + rel + "; stop with Ctrl-C.\n"; !strings.HasSuffix(out, want) {
			t.Errorf("--relay %q: output does not end with %q:\n%s", o.relay, want, out)
		}
		stop()
	}

	withApp := startRelayWithApp(t)
	owner2, _ := newOwner(t, withApp)
	trustRelay(t, owner2, withApp)
	for _, args := range [][]string{{"web"}, {"web", "--relay", withApp + "/"}} {
		c, stdout, _ := runHappy(t, owner2, args...)
		if c != exitOK || !strings.Contains(stdout, "    "+withApp+"/#pair=") || strings.Contains(stdout, "&relay=") {
			t.Fatalf("happy %v on a trusted relay with its app: %d\n%s", args, c, stdout)
		}
	}
}

// TestWebServesTheAppForAnUntrustedRelay: the configured relay is neither
// this home's relay nor declared its own, so the link does not go to its
// web app: happy web serves the app itself, the link names the relay, and
// the output says why and how to declare the relay. A malformed
// declaration is refused.
func TestWebServesTheAppForAnUntrustedRelay(t *testing.T) {
	url := servertest.Start(t).URL
	owner, creds := newOwner(t, url)
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return owner[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	files := fstest.MapFS{"index.html": {Data: []byte("tiny app")}}
	go func() { done <- runWeb(ctx, f, webOptions{listen: "127.0.0.1:0"}, files) }()
	m := waitForOutput(t, &out, &errb, regexp.MustCompile(`(?m)^    (http://127\.0\.0\.1:\d+)/#pair=\S+&relay=(\S+)$`))
	waitForOutput(t, &out, &errb, regexp.MustCompile(`Serving the web app at `))
	if rel, _ := neturl.QueryUnescape(m[2]); rel != url {
		t.Fatalf("relay in the link %q, want %q", rel, url)
	}
	settingsPath := filepath.Join(owner["HAPPY_HOME_DIR"], "settings.json")
	why := "The web app comes from happy web itself, not from " + url + ": a relay's web app runs with the account's keys, so it must be trusted like this CLI. " +
		"To use that relay's own app, declare it yours: set \"trustedWebRelay\" to \"" + url + "\" in " + settingsPath + ".\n" +
		"Serving the web app at " + m[1] + "/ for the relay " + url + "; stop with Ctrl-C.\n"
	if !strings.HasSuffix(out.String(), why) {
		t.Errorf("output does not end with the reason:\n%s", out.String())
	}
	got, err := browser(t, strings.TrimPrefix(m[0], "    "), "")
	if err != nil || *got.AccountSecret != *creds.AccountSecret {
		t.Fatalf("browser through the local app: %v", err)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.close()

	if err := os.WriteFile(settingsPath, []byte(`{"trustedWebRelay":"relay.example"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, stderr := runHappy(t, owner, "web")
	if c != exitFailed || !strings.HasPrefix(stderr, "happy: settings: trustedWebRelay: bad relay URL: \"relay.example\": scheme must be http or https (in "+settingsPath+")") {
		t.Fatalf("a malformed trustedWebRelay: %d %q", c, stderr)
	}
}

func TestWebRefusals(t *testing.T) {
	url := servertest.Start(t).URL
	if c, _, stderr := runHappy(t, authEnv(t, url), "web"); c != exitFailed || stderr != "happy: not logged in (run happy auth login)\n" {
		t.Fatalf("logged out: %d %q", c, stderr)
	}
	owner, _ := newOwner(t, url)
	other := servertest.Start(t).URL
	c, _, stderr := runHappy(t, owner, "web", "--relay", other)
	if c != exitRelay || !strings.Contains(stderr, "the relay "+other+" refuses this machine's token") {
		t.Fatalf("another relay's account: %d %q", c, stderr)
	}
	c, _, stderr = runHappy(t, owner, "web", "--relay", "https://user@relay.example/#x")
	if c != exitUsage || !strings.HasPrefix(stderr, "happy: --relay: relay: browser link: relay \"https://user@relay.example/#x\" must be an absolute http(s) URL without fragment or user") {
		t.Fatalf("a relay URL the link cannot carry: %d %q", c, stderr)
	}
	// On the reference relay (serving its web app) the link does not
	// expire: happy web says so.
	reference := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, "<!doctype html><title>reference app</title>")
		case "/v1/auth/request":
			fmt.Fprint(w, `{"state":"requested"}`)
		case "/v1/auth/response":
			fmt.Fprint(w, `{"success":true}`)
		default:
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"error":"Route %s %s not found"}`, r.Method, r.URL.Path)
		}
	}))
	defer reference.Close()
	ref := map[string]string{"HAPPY_HOME_DIR": owner["HAPPY_HOME_DIR"], "HAPPY_SERVER_URL": reference.URL}
	trustRelay(t, ref, reference.URL)
	c, stdout, stderr := runHappy(t, ref, "web")
	if c != exitOK || !strings.Contains(stdout, "    "+reference.URL+"/#pair=") ||
		stderr != "happy: warning: "+reference.URL+" does not look like happy's own relay: the reference relay never expires a pairing request and hands its answer to every caller, so this link stays usable, more than once, until the browser has used it\n" {
		t.Fatalf("reference relay: %d %q\n%s", c, stderr, stdout)
	}
}

func TestServerFlags(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"server", "--tls-cert", "c.pem"}, "happy: --tls-cert and --tls-key go together\n"},
		{[]string{"server", "--pairing-ttl", "2h"}, "happy: --pairing-ttl must be between 10s and 1h, got 2h0m0s\n"},
		{[]string{"server", "--pairing-ttl", "1s"}, "happy: --pairing-ttl must be between 10s and 1h, got 1s\n"},
		{[]string{"server", "--fanout-share", "-0.5"}, "happy: --fanout-share must be between 0.01 and 1, got -0.5\n"},
		{[]string{"server", "--fanout-share", "1.5"}, "happy: --fanout-share must be between 0.01 and 1, got 1.5\n"},
		{[]string{"server", "--fanout-share", "0.001"}, "happy: --fanout-share must be between 0.01 and 1, got 0.001\n"},
		{[]string{"server", "--fanout-share", "NaN"}, "happy: --fanout-share must be between 0.01 and 1, got NaN\n"},
		{[]string{"server", "--fanout-queue", "-1"}, "happy: --fanout-queue must be between 1 and 4096, got -1\n"},
		{[]string{"server", "--fanout-queue", "5000"}, "happy: --fanout-queue must be between 1 and 4096, got 5000\n"},
		{[]string{"server", "--tls-key", "k.pem"}, "happy: --tls-cert and --tls-key go together\n"},
		{[]string{"server", "--cors-origin", "https://a.example/path"}, "happy: --cors-origin \"https://a.example/path\": want scheme://host[:port] (http or https, no path) or *\n"},
		{[]string{"server", "--cors-origin", "https://a.example,app.example"}, "happy: --cors-origin \"app.example\": want scheme://host[:port] (http or https, no path) or *\n"},
		{[]string{"server", "--domain", "relay.example.com", "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "happy: --domain obtains the certificate by ACME: leave out --tls-cert and --tls-key (they serve a certificate you obtain yourself)\n"},
		{[]string{"server", "--domain", "relay.example.com", "--tls-key", "k.pem"}, "happy: --domain obtains the certificate by ACME: leave out --tls-cert and --tls-key (they serve a certificate you obtain yourself)\n"},
		{[]string{"server", "--domain", "192.0.2.7"}, "happy: --domain: \"192.0.2.7\" is an IP address: ACME certificates are for host names (point a DNS name at this machine)\n"},
		{[]string{"server", "--domain", "relay.example.com,localhost"}, "happy: --domain: \"localhost\" has no dot: the CA issues certificates for names in the public DNS, such as relay.example.com\n"},
		{[]string{"server", "--domain", "https://relay.example.com/"}, "happy: --domain: \"https://relay.example.com/\": want a bare host name such as relay.example.com (no scheme, port, path or wildcard)\n"},
		{[]string{"server", "--domain", "relay.example.com", "--acme-directory", "http://127.0.0.1:14000/dir"}, "happy: --acme-directory: \"http://127.0.0.1:14000/dir\": want the CA's ACME directory as an https URL, such as https://acme-v02.api.letsencrypt.org/directory\n"},
		{[]string{"server", "--domain", "relay.example.com", "--acme-email", "ops"}, "happy: --acme-email \"ops\": want one email address, such as ops@example.com\n"},
		{[]string{"server", "--acme-email", "ops@example.com"}, "happy: --acme-directory, --acme-email and --http-listen go with --domain\n"},
		{[]string{"server", "--http-listen", ":8080"}, "happy: --acme-directory, --acme-email and --http-listen go with --domain\n"},
	} {
		c, stdout, stderr := runHappy(t, nil, tc.args...)
		if c != exitUsage || stdout != "" || stderr != tc.stderr {
			t.Errorf("%v = %d %q %q, want %q", tc.args, c, stdout, stderr, tc.stderr)
		}
	}
}

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

func TestServerWarnings(t *testing.T) {
	for _, tc := range []struct {
		addr       string
		tls, proxy bool
		want       string
	}{
		{"127.0.0.1:3005", false, false, ""},
		{"[::1]:3005", false, false, ""},
		{"0.0.0.0:3005", true, false, ""},
		{"0.0.0.0:3005", false, false, "happy: warning: listening on 0.0.0.0:3005 without TLS: tokens and pairing answers cross the network in clear text, and browsers of other machines (a phone) cannot run the web app from it (they give it WebCrypto only on https pages); pass --domain NAME, or --tls-cert and --tls-key, or listen on loopback behind a TLS reverse proxy or tunnel with --trust-proxy (README, \"From your phone\")\n"},
		{"192.168.1.5:3005", false, true, "happy: warning: listening on 192.168.1.5:3005 without TLS: tokens and pairing answers cross the network in clear text; the hop from the reverse proxy to the relay is not encrypted: listen on loopback, or pass --tls-cert and --tls-key\n"},
	} {
		var b strings.Builder
		serverWarnings(&b, fakeAddr(tc.addr), tc.tls, tc.proxy)
		if b.String() != tc.want {
			t.Errorf("serverWarnings(%s, tls %v, proxy %v) = %q, want %q", tc.addr, tc.tls, tc.proxy, b.String(), tc.want)
		}
	}
	host, _ := os.Hostname()
	if got := webAppURL("https", fakeAddr("0.0.0.0:3005")); got != "https://"+host+":3005/" {
		t.Errorf("web app URL on every address = %q", got)
	}
	if got := webAppURL("http", fakeAddr("127.0.0.1:3005")); got != "http://127.0.0.1:3005/" {
		t.Errorf("web app URL on loopback = %q", got)
	}
}

// TestServerTLS runs happy server with a certificate made here: it prints
// https URLs and answers over TLS.
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := writeSelfSigned(t, dir)
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return map[string]string{"HAPPY_HOME_DIR": dir}[k] })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runServer(ctx, f, serverOptions{listen: "127.0.0.1:0", dataDir: filepath.Join(dir, "data"), synchronous: "NORMAL", tlsCert: certFile, tlsKey: keyFile})
	}()
	m := waitForOutput(t, &out, &errb, regexp.MustCompile(`(?m)^web app: (https://127\.0\.0\.1:\d+/)$`))
	if !strings.HasPrefix(out.String(), "happy relay listening on https://127.0.0.1:") || errb.String() != "" {
		t.Fatalf("output:\n%s\nstderr %q", out.String(), errb.String())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(m[1] + "health")
	if err != nil {
		t.Fatal(err)
	}
	var h struct{ Status string }
	_ = json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h.Status != "ok" || resp.TLS == nil {
		t.Fatalf("health over TLS: %d %+v", resp.StatusCode, h)
	}
	client.CloseIdleConnections()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	f.close()
}

func writeSelfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	certPEM, keyPEM, pool := selfSignedPEM(t, net.ParseIP("127.0.0.1"))
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pool
}
