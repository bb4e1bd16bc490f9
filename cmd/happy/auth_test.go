package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
)

// authEnv is the environment of one machine: its own home folder and the
// test relay.
func authEnv(t *testing.T, url string) map[string]string {
	return map[string]string{"HAPPY_HOME_DIR": t.TempDir(), "HAPPY_SERVER_URL": url}
}

var backupKeyRe = regexp.MustCompile(`(?m)^    ([A-Z2-7]{5}(?:-[A-Z2-7]{1,5}){10})$`)

func TestAuthNewAccountBackupRestoreStatusLogout(t *testing.T) {
	url := servertest.Start(t).URL
	a := authEnv(t, url)

	code, _, stderr := runHappy(t, a, "auth", "status")
	if code != exitFailed || stderr != "happy: not logged in (run happy auth login)\n" {
		t.Fatalf("status logged out: %d %q", code, stderr)
	}
	code, out, stderr := runHappy(t, a, "auth", "login", "--new-account")
	if code != exitOK {
		t.Fatalf("login --new-account: %d %q", code, stderr)
	}
	m := backupKeyRe.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no backup key in:\n%s", out)
	}
	key := m[1]
	creds, err := crypto.LoadCredentials(filepath.Join(a["HAPPY_HOME_DIR"], "access.key"))
	if err != nil {
		t.Fatal(err)
	}
	account := relay.AccountID(creds)
	if creds.Variant != crypto.VariantDataKey || creds.AccountSecret == nil || !strings.HasPrefix(out, "Created account "+account+" on "+url+".\n") {
		t.Fatalf("credentials %v, output:\n%s", creds, out)
	}
	code, out, _ = runHappy(t, a, "auth", "backup")
	if code != exitOK || out != key+"\n" {
		t.Fatalf("backup: %d %q, want %q", code, out, key)
	}
	code, out, _ = runHappy(t, a, "auth", "status")
	want := "Logged in.\nAccount:  " + account + "\nRelay:    " + url + " (from HAPPY_SERVER_URL)\n" +
		"Keys:     dataKey, holds the account secret (reads every session; happy auth backup works)\nToken:    accepted by the relay\n"
	if code != exitOK || out != want {
		t.Fatalf("status: %d\n%s\nwant\n%s", code, out, want)
	}
	code, _, stderr = runHappy(t, a, "auth", "login", "--new-account")
	if code != exitFailed || !strings.Contains(stderr, "already logged in (account "+account+")") {
		t.Fatalf("second login: %d %q", code, stderr)
	}

	// A second machine restores the account from the backup key.
	b := authEnv(t, url)
	code, out, stderr = runHappy(t, b, "auth", "login", "--backup-key", strings.ToLower(key))
	if code != exitOK || out != "Restored account "+account+" on "+url+".\n" {
		t.Fatalf("restore: %d %q %q", code, out, stderr)
	}
	code, out, _ = runHappy(t, b, "auth", "backup")
	if code != exitOK || out != key+"\n" {
		t.Fatalf("backup on restored machine: %d %q", code, out)
	}
	code, out, _ = runHappy(t, a, "auth", "logout")
	if code != exitOK || !strings.HasPrefix(out, "Logged out.") {
		t.Fatalf("logout: %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(a["HAPPY_HOME_DIR"], "access.key")); !os.IsNotExist(err) {
		t.Fatalf("access.key still there: %v", err)
	}
	code, out, _ = runHappy(t, a, "auth", "logout")
	if code != exitOK || out != "Not logged in.\n" {
		t.Fatalf("second logout: %d %q", code, out)
	}
}

func TestAuthLoginUsageErrors(t *testing.T) {
	a := authEnv(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"auth", "login", "--new-account", "--backup-key", "X"}, exitUsage, "happy: --new-account and --backup-key exclude each other\n"},
		{[]string{"auth", "login", "--backup-key", "not a key!"}, exitUsage, "happy: --backup-key: crypto: parse backup key: unexpected character at byte 9: bad encoding\n"},
		{[]string{"auth", "backup"}, exitFailed, "happy: not logged in (run happy auth login)\n"},
	} {
		code, _, stderr := runHappy(t, a, tc.args...)
		if code != tc.code || stderr != tc.stderr {
			t.Fatalf("%v: %d %q, want %d %q", tc.args, code, stderr, tc.code, tc.stderr)
		}
	}
}

func TestAuthRelayFailsClosed(t *testing.T) {
	a := authEnv(t, "ftp://relay.example")
	code, _, stderr := runHappy(t, a, "auth", "login", "--new-account")
	if code != exitRelay || !strings.Contains(stderr, "bad relay URL") {
		t.Fatalf("bad URL: %d %q", code, stderr)
	}
	// A configured relay that is down is an error, not a fallback to another.
	down := authEnv(t, "http://127.0.0.1:1")
	code, _, stderr = runHappy(t, down, "auth", "login", "--new-account")
	if code != exitRelay || !strings.Contains(stderr, "relay unavailable") {
		t.Fatalf("relay down: %d %q", code, stderr)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestAuthLoginPairing(t *testing.T) {
	url := servertest.Start(t).URL
	owner := authEnv(t, url)
	if code, _, stderr := runHappy(t, owner, "auth", "login", "--new-account"); code != exitOK {
		t.Fatal(stderr)
	}
	ownerCreds, err := crypto.LoadCredentials(filepath.Join(owner["HAPPY_HOME_DIR"], "access.key"))
	if err != nil {
		t.Fatal(err)
	}

	paired := authEnv(t, url)
	var out, errb syncBuffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return paired[k] })
	done := make(chan int, 1)
	go func() { done <- run([]string{"auth", "login", "--timeout", "30s"}, f) }()

	linkRe := regexp.MustCompile(`happy://terminal\?([A-Za-z0-9_-]+)`)
	var m []string
	if !(waitfor.Poll{Within: 10 * time.Second}).True(func() bool { m = linkRe.FindStringSubmatch(out.String()); return m != nil }) {
		t.Fatalf("no pairing link in:\n%s\n%s", out.String(), errb.String())
	}
	// The relay is on loopback, which a phone cannot reach: no QR code
	// for the happy app, and the output says why.
	if strings.ContainsAny(out.String(), "█▀▄") || !strings.HasPrefix(out.String(), "No QR code: the relay "+url+" is on this machine's loopback address, which a phone cannot reach.") {
		t.Fatalf("a QR code a phone cannot use, or no reason:\n%s", out.String())
	}
	pk, err := crypto.DecodeBase64URL(m[1])
	if err != nil || len(pk) != 32 {
		t.Fatalf("link key %q: %v", m[1], err)
	}
	api, _ := relay.NewAPI(relay.HTTPConfig{BaseURL: url})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The app polls until the terminal's request exists, then approves it.
	waitfor.Poll{Within: 10 * time.Second}.Until(t, "the terminal's pairing request", func() bool {
		st, err := api.AuthRequestStatus(ctx, pk)
		if err != nil {
			t.Fatal(err)
		}
		return st == "pending"
	})
	// The app knows the pairing secret from the full code on the screen.
	secret := waitForOutput(t, &out, &errb, approveRe)[2]
	if err := relay.ApproveTerminal(ctx, api, ownerCreds, [32]byte(pk), secret, false); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("pairing exit %d: %s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("pairing did not finish")
	}
	f.close()
	creds, err := crypto.LoadCredentials(filepath.Join(paired["HAPPY_HOME_DIR"], "access.key"))
	if err != nil {
		t.Fatal(err)
	}
	if creds.Variant != crypto.VariantDataKey || creds.AccountSecret != nil || relay.AccountID(creds) != relay.AccountID(ownerCreds) {
		t.Fatalf("paired credentials %v", creds)
	}
	if !strings.HasSuffix(out.String(), "Paired with account "+relay.AccountID(ownerCreds)+" on "+url+".\n") {
		t.Fatalf("output:\n%s", out.String())
	}
	code, _, stderr := runHappy(t, paired, "auth", "backup")
	if code != exitFailed || !strings.Contains(stderr, "does not hold the account secret") {
		t.Fatalf("backup on paired machine: %d %q", code, stderr)
	}
	code, status, _ := runHappy(t, paired, "auth", "status", "--offline")
	if code != exitOK || !strings.Contains(status, "Keys:     dataKey, paired (reads the sessions this machine writes)\n") {
		t.Fatalf("status: %d\n%s", code, status)
	}
}

// happy auth token prints the bearer token the relay accepts: a relay
// route called with it by hand answers as it does for happy itself.
func TestAuthToken(t *testing.T) {
	env := codexTestEnv(t, nil)
	code, stdout, stderr := runHappy(t, env, "auth", "token")
	if code != exitOK || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("auth token = %d %q %q", code, stdout, stderr)
	}
	req, _ := http.NewRequest(http.MethodGet, env["HAPPY_SERVER_URL"]+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(stdout))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/sessions with the token: %s", resp.Status)
	}
	if code, _, stderr := runHappy(t, map[string]string{"HAPPY_HOME_DIR": t.TempDir()}, "auth", "token"); code == exitOK || !strings.Contains(stderr, "happy auth login") {
		t.Fatalf("auth token logged out = %d %q", code, stderr)
	}
}
