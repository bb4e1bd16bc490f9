package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/app"
)

func TestParseAge(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90m", 90 * time.Minute, true},
		{"36h", 36 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{" 2w ", 14 * 24 * time.Hour, true},
		{"0", 0, false},
		{"0d", 0, false},
		{"-1h", 0, false},
		{"1.5d", 0, false},
		{"7x", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, err := parseAge(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseAge(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// endedSession runs one complete happy codex -p session and returns its id.
func endedSession(t *testing.T, env map[string]string, prompt string) string {
	t.Helper()
	fc := newFakeCodex(t, "", "codex-app", "")
	env["HAPPY_CODEX_PATH"] = fc.path
	code, _, stderr := runHappy(t, env, "codex", "-p", prompt, "--codex-protocol", "app-server", "--allow", "bash:*")
	if code != exitOK {
		t.Fatalf("happy codex: exit %d: %s", code, stderr)
	}
	return strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
}

func TestArchiveAndDelete(t *testing.T) {
	env := codexTestEnv(t, nil)
	first := endedSession(t, env, "first task")
	second := endedSession(t, env, "second task")
	now := time.Now()

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"archive"}, "happy: happy archive needs SESSION… or --ended / --older-than\n"},
		{[]string{"delete", first, "--ended"}, "happy: name sessions or use --ended / --older-than, not both\n"},
		{[]string{"archive", "--older-than", "7x"}, "happy: --older-than \"7x\": want a positive duration such as 90m, 36h, 7d or 2w\n"},
	} {
		if code, _, stderr := runHappyAt(t, env, now, tc.args...); code != exitUsage || stderr != tc.want {
			t.Errorf("happy %q = %d %q, want 2 %q", tc.args, code, stderr, tc.want)
		}
	}

	code, stdout, stderr := runHappyAt(t, env, now, "archive", first)
	if code != exitOK || stdout != "archived "+first+"  first task\n" {
		t.Fatalf("archive = %d %q %q", code, stdout, stderr)
	}
	o, _ := readSession(t, env, first)
	if o.Metadata.LifecycleState != app.LifecycleArchived || o.Metadata.LifecycleStateSince != now.UnixMilli() || o.Info.Active ||
		o.Metadata.Summary == nil || o.Metadata.Summary.Text != "first task" || o.Metadata.Path == "" {
		t.Fatalf("archived metadata %+v", o.Metadata)
	}
	var extra map[string]any
	if err := json.Unmarshal(o.RawMetadata, &extra); err != nil || extra["archivedBy"] != "cli" || extra["archiveReason"] != "user" {
		t.Fatalf("archived metadata %s", o.RawMetadata)
	}
	if s := sessionState(t, env, first, now); s.State != app.LifecycleArchived {
		t.Fatalf("state %q", s.State)
	}
	// Archiving again changes nothing; --ended no longer picks it.
	if code, stdout, _ := runHappyAt(t, env, now, "archive", "--ended", "--dry-run"); code != exitOK || stdout != "would archive "+second+"  second task\n" {
		t.Fatalf("archive --ended --dry-run = %d %q", code, stdout)
	}
	// Nothing is older than an hour yet.
	if code, stdout, stderr := runHappyAt(t, env, now, "delete", "--older-than", "1h"); code != exitOK || stdout != "" || stderr != "happy: no session matches\n" {
		t.Fatalf("delete --older-than 1h = %d %q %q", code, stdout, stderr)
	}
	// Two hours later both are: the archived one and the ended one, newest
	// activity (the archive) first.
	code, stdout, stderr = runHappyAt(t, env, now.Add(2*time.Hour), "delete", "--older-than", "1h", "--ended")
	if code != exitOK || stdout != "deleted "+first+"  first task\ndeleted "+second+"  second task\n" {
		t.Fatalf("delete = %d %q %q", code, stdout, stderr)
	}
	if code, stdout, _ := runHappyAt(t, env, now, "sessions", "--json"); code != exitOK || stdout != "[]\n" {
		t.Fatalf("sessions after delete = %d %q", code, stdout)
	}
}
