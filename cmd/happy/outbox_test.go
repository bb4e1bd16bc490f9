//go:build unix

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/relay/outbox"
)

// TestOutboxListAndDiscard: happy outbox lists what waits for a relay that
// is gone; discard asks first on a terminal (no answer keeps everything),
// needs --yes without one, refuses an unknown session, and gives the
// versions up once confirmed.
func TestOutboxListAndDiscard(t *testing.T) {
	dir := t.TempDir()
	h, err := home.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.UnixMilli(1_800_000_000_000)
	st, err := outbox.Open(context.Background(), h.Outbox(), outbox.Options{Now: func() time.Time { return now.Add(-90 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	state := `{"v":1,"account":"acct","relay":"https://gone.example","variant":"dataKey","metadata":"bWQ=","dataEncryptionKey":null}`
	if err := st.PutSession(context.Background(), "tag1", "rel1", []byte(state)); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 2; v++ {
		if err := st.Append(context.Background(), outbox.Entry{Session: "tag1", Record: "m1", Version: v, Content: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HAPPY_HOME_DIR": dir}
	run := func(stdin string, terminal bool, args ...string) (int, string, string) {
		t.Helper()
		var out, errb strings.Builder
		f := newFactory(strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
		f.now = func() time.Time { return now }
		f.isTerminal = func(any) bool { return terminal }
		return run(args, f), out.String(), errb.String()
	}
	line := "tag1 (rel1)  2 version(s) for https://gone.example, the oldest written 1h30m0s ago\n"
	cases := []struct {
		name     string
		stdin    string
		terminal bool
		args     []string
		code     int
		stdout   string
		stderr   string
	}{
		{"list", "", false, []string{"outbox"}, exitOK, line, ""},
		{"nothing named", "", false, []string{"outbox", "discard"}, exitUsage, "", "happy: name the sessions to discard, or give --all\n"},
		{"unknown", "", false, []string{"outbox", "discard", "nope", "--yes"}, exitFailed, "", "happy: no versions wait for session \"nope\" (happy outbox lists those that do)\n"},
		{"no terminal", "", false, []string{"outbox", "discard", "tag1"}, exitUsage, "", "happy: discarding needs a confirmation: give --yes when stdin is not a terminal\n"},
		{"kept", "n\n", true, []string{"outbox", "discard", "rel1"}, exitOK,
			line + "Discard 2 version(s) of 1 session(s)? They will never reach the relay. [y/N] nothing discarded\n", ""},
		{"still listed", "", false, []string{"outbox"}, exitOK, line, ""},
		{"discarded", "y\n", true, []string{"outbox", "discard", "--all"}, exitOK,
			line + "Discard 2 version(s) of 1 session(s)? They will never reach the relay. [y/N] tag1: 2 version(s) discarded\n", ""},
		{"empty", "", false, []string{"outbox"}, exitOK, "nothing waits for the relay\n", ""},
		{"empty json", "", false, []string{"outbox", "--json"}, exitOK, "[]\n", ""},
	}
	for _, tc := range cases {
		code, stdout, stderr := run(tc.stdin, tc.terminal, tc.args...)
		if code != tc.code || stdout != tc.stdout || stderr != tc.stderr {
			t.Errorf("%s: = (%d, %q, %q)\nwant (%d, %q, %q)", tc.name, code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
		}
	}
}
