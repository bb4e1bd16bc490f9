package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/app"
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
		{"36500d", 36500 * 24 * time.Hour, true},
		{"107000d", 0, false},
		{"900000h", 0, false},
		{"", 0, false},
	}
	for _, tc := range cases {
		got, err := parseAge(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseAge(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// The refusals say what is wrong with the age, quoting a long input cut.
func TestParseAgeErrors(t *testing.T) {
	for in, want := range map[string]string{
		"2562047h":               `--older-than "2562047h": at most 36500 days (876000h0m0s)`,
		"99999999999999999999h":  `--older-than "99999999999999999999h": at most 36500 days (876000h0m0s)`,
		"1ms":                    `--older-than "1ms": at least 1m0s (did you mean 1m?)`,
		"":                       `--older-than is empty: want an age such as 90m, 36h, 7d or 2w`,
		"-5m":                    `--older-than "-5m": want a positive duration such as 90m, 36h, 7d or 2w`,
		strings.Repeat("x", 100): `--older-than "` + strings.Repeat("x", 40) + `"…: want a positive duration such as 90m, 36h, 7d or 2w`,
	} {
		_, err := parseAge(in)
		if err == nil || err.Error() != want {
			t.Errorf("parseAge(%.20q…) error %v\nwant %s", in, err, want)
		}
	}
	// An explicitly empty --older-than is refused, not taken as absent.
	code, _, stderr := runHappy(t, map[string]string{"HAPPY_HOME_DIR": t.TempDir()}, "archive", "--older-than", "")
	if code != exitUsage || !strings.Contains(stderr, "--older-than is empty") {
		t.Errorf("archive --older-than \"\" = %d %q", code, stderr)
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

	// Named twice (id and a prefix of it): archived once.
	before := sessionState(t, env, first, now).LastActivity
	code, stdout, stderr := runHappyAt(t, env, now, "archive", first, first[:8])
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
	if s := sessionState(t, env, first, now); s.State != app.LifecycleArchived || !s.LastActivity.Equal(before) {
		t.Fatalf("state %q, last activity %v (before the archive %v): archiving must not rewrite it", s.State, s.LastActivity, before)
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
	// activity first (the archive is no activity: the second session ran
	// last).
	code, stdout, stderr = runHappyAt(t, env, now.Add(2*time.Hour), "delete", "--older-than", "1h", "--ended")
	if code != exitOK || stdout != "deleted "+second+"  second task\ndeleted "+first+"  first task\n" {
		t.Fatalf("delete = %d %q %q", code, stdout, stderr)
	}
	if code, stdout, _ := runHappyAt(t, env, now, "sessions", "--json"); code != exitOK || stdout != "[]\n" {
		t.Fatalf("sessions after delete = %d %q", code, stdout)
	}
}

// The title is the first prompt, shortened, until the agent names the
// thread; happy sessions and happy log show the same id and title.
func TestTitleFromPromptThenAgent(t *testing.T) {
	long := "Please run `echo hi > hi.txt` in the shell, then tell me exactly what happened and why it matters"
	env := codexTestEnv(t, nil)
	first := endedSession(t, env, long)
	wantShort := "Please run `echo hi > hi.txt` in the shell, then tell me…"
	if s := sessionState(t, env, first, time.Now()); s.Title != wantShort {
		t.Fatalf("title from the prompt %q, want %q", s.Title, wantShort)
	}
	if code, stdout, _ := runHappy(t, env, "log", first); code != exitOK || !strings.HasPrefix(stdout, "session "+first+" — "+wantShort+"\n") {
		t.Fatalf("happy log header: %d %q", code, stdout)
	}

	// Codex names the thread during the turn: that name wins.
	b, err := os.ReadFile(filepath.Join("testdata", "codex", "codex-app.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		lines = append(lines, l)
		if strings.Contains(l, `"method":"turn/started"`) {
			lines = append(lines, `{"t":1795964187635,"dir":"a2c","msg":{"method":"thread/name/updated","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","threadName":"Write hi.txt"}}}`)
		}
	}
	fc := newFakeCodex(t, "", "", "")
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env["HAPPY_CODEX_PATH"] = fc.path
	code, _, stderr := runHappy(t, env, "codex", "-p", long, "--codex-protocol", "app-server", "--allow", "bash:*")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	named := strings.Fields(strings.TrimPrefix(stderr, "happy: session "))[0]
	if s := sessionState(t, env, named, time.Now()); s.Title != "Write hi.txt" {
		t.Fatalf("title %q, want the thread name", s.Title)
	}
	if code, stdout, _ := runHappy(t, env, "log", named); code != exitOK || !strings.HasPrefix(stdout, "session "+named+" — Write hi.txt\n") {
		t.Fatalf("happy log header: %d %q", code, stdout)
	}
}

// parseAge never panics and accepts only positive ages.
func FuzzParseAge(f *testing.F) {
	for _, s := range []string{"7d", "2w", "90m", "36h", "0", "-1h", "1.5d", "99999999999d", "d", "1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseAge(s)
		if err == nil && d <= 0 {
			t.Fatalf("parseAge(%q) = %v without error", s, d)
		}
	})
}
