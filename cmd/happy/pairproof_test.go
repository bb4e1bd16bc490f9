package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
)

var linkKeyRe = regexp.MustCompile(`happy://terminal\?([A-Za-z0-9_-]{43})`)

// pendingKey waits for the terminal's link in out and for its request to be
// open on url, and returns its key.
func pendingKey(t *testing.T, url string, out, errb *syncBuffer) [32]byte {
	t.Helper()
	m := waitForOutput(t, out, errb, linkKeyRe)
	raw, err := crypto.DecodeBase64URL(m[1])
	if err != nil || len(raw) != 32 {
		t.Fatalf("link key %q: %v", m[1], err)
	}
	api, _ := relay.NewAPI(relay.HTTPConfig{BaseURL: url})
	waitfor.Poll{Every: 10 * time.Millisecond}.Until(t, "the terminal's pairing request", func() bool {
		st, _ := api.AuthRequestStatus(context.Background(), raw)
		return st == "pending"
	})
	return [32]byte(raw)
}

// TestPairingHijackRefused is the attack of the review: another account of
// the relay (or the relay's operator, who sees every pending key) answers a
// fresh terminal's request first with its own account. Without the pairing
// secret its answer carries no proof, and a terminal that is not
// interactive refuses it: nothing is saved.
func TestPairingHijackRefused(t *testing.T) {
	url := servertest.Start(t).URL
	_, attacker := newOwner(t, url)
	victim := authEnv(t, url)
	out, errb, done := startLogin(t, victim)
	key := pendingKey(t, url, out, errb)
	api, _ := relay.NewAPI(relay.HTTPConfig{BaseURL: url})
	if err := relay.ApproveTerminal(context.Background(), api, attacker, key, "", false); err != nil {
		t.Fatal(err)
	}
	if c := waitExit(t, done, errb); c != exitFailed {
		t.Fatalf("login exit %d, want %d: %s\n%s", c, exitFailed, out.String(), errb.String())
	}
	want := "happy: refused: account " + relay.AccountID(attacker) + " answered this terminal's pairing request without proof that it saw the full pairing code (the reference app, or a relay or another account answering in its place); nothing was saved. Run happy auth login again and approve with the full code, or pass --accept-unproven if you approved from the reference app and this is your account\n"
	if errb.String() != want {
		t.Fatalf("stderr %q\nwant %q", errb.String(), want)
	}
	if strings.Contains(out.String(), "Paired with account") {
		t.Fatalf("paired:\n%s", out.String())
	}
	noAccessKey(t, victim)
}

// noAccessKey fails unless env's home has no credentials.
func noAccessKey(t *testing.T, env map[string]string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(env["HAPPY_HOME_DIR"], "access.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("access.key saved: %v", err)
	}
}

// TestPairingGuessedSecret: another account that saw only the first half
// of the code guesses the second: happy auth approve sends an answer whose
// proof does not match, and the terminal refuses it without asking.
func TestPairingGuessedSecret(t *testing.T) {
	url := servertest.Start(t).URL
	attackerEnv, _ := newOwner(t, url)
	victim := authEnv(t, url)
	out, errb, done := startLoginWith(t, victim, "y\n", true)
	m := waitForOutput(t, out, errb, approveRe)
	guess := "AAAAA-AAAAA"
	if m[2] == guess {
		guess = "BBBBB-BBBBB"
	}
	if c, _, stderr := runHappy(t, attackerEnv, "auth", "approve", m[1]+"-"+guess); c != exitOK {
		t.Fatalf("the attacker's approve: %d %s", c, stderr)
	}
	if c := waitExit(t, done, errb); c != exitFailed {
		t.Fatalf("login exit %d: %s\n%s", c, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), ": the approval did not come from a device that saw this terminal's code (crypto: check pairing proof: pairing proof does not match); nothing was saved: run happy auth login again\n") ||
		strings.Contains(out.String(), "[y/N]") || strings.Contains(out.String(), "Paired with account") {
		t.Fatalf("output:\n%s\n%s", out.String(), errb.String())
	}
	noAccessKey(t, victim)
}

// TestPairingUnprovenAsks: an approval without proof (the happy app
// scanning the QR code, or anyone who turned the code into the key) on a
// terminal shows the account and pairs only on "y".
func TestPairingUnprovenAsks(t *testing.T) {
	url := servertest.Start(t).URL
	_, owner := newOwner(t, url)
	account := relay.AccountID(owner)
	prompt := "Account " + account + " answered this terminal's pairing request without proof that it saw the full pairing code.\n" +
		"The happy app approves this way; so could the relay or another account that saw the code.\n" +
		"Is " + account + " your account (happy auth status on the approving device shows it)? [y/N] "
	for _, tc := range []struct {
		name, stdin string
		code        int
		tail        string
	}{
		{"yes", "y\n", exitOK, prompt + "Paired with account " + account + " on " + url + ".\n"},
		{"YES", " YES \n", exitOK, prompt + "Paired with account " + account + " on " + url + ".\n"},
		{"no", "n\n", exitFailed, prompt},
		{"enter", "\n", exitFailed, prompt},
		{"end of input", "", exitFailed, prompt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			paired := authEnv(t, url)
			out, errb, done := startLoginWith(t, paired, tc.stdin, true)
			key := pendingKey(t, url, out, errb)
			api, _ := relay.NewAPI(relay.HTTPConfig{BaseURL: url})
			if err := relay.ApproveTerminal(context.Background(), api, owner, key, "", false); err != nil {
				t.Fatal(err)
			}
			if c := waitExit(t, done, errb); c != tc.code || !strings.HasSuffix(out.String(), tc.tail) {
				t.Fatalf("exit %d, want %d; output:\n%s\n%s", c, tc.code, out.String(), errb.String())
			}
			if tc.code == exitOK {
				creds, err := crypto.LoadCredentials(filepath.Join(paired["HAPPY_HOME_DIR"], "access.key"))
				if err != nil || relay.AccountID(creds) != account {
					t.Fatalf("saved %v, %v", creds, err)
				}
				return
			}
			if want := "happy: not paired: account " + account + " was not confirmed; nothing was saved (run happy auth login again)\n"; errb.String() != want {
				t.Fatalf("stderr %q, want %q", errb.String(), want)
			}
			noAccessKey(t, paired)
		})
	}
}
