package logging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestOpenWritesJSONLinesToFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	now := time.Date(2026, 11, 29, 15, 4, 5, 6e6, time.UTC)
	l, err := Open(dir, "test", zerolog.NoLevel, now, Retention{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(l.Path()), "20261129T150405.006Z-") || !strings.HasSuffix(l.Path(), "-test.log") {
		t.Fatalf("log file name %q", l.Path())
	}
	l.Info().Str("k", "v").Msg("hello")
	l.Debug().Msg("below the default level")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	data, err := os.ReadFile(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines, want 1: %q", len(lines), data)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["message"] != "hello" || rec["k"] != "v" || rec["cmd"] != "test" || rec["level"] != "info" {
		t.Fatalf("record %v", rec)
	}
	st, _ := os.Stat(l.Path())
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("log file mode %v, want 0600", st.Mode().Perm())
	}
}

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]zerolog.Level{"": zerolog.InfoLevel, "debug": zerolog.DebugLevel, "warn": zerolog.WarnLevel} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) succeeded")
	}
}

func TestDiscardCloses(t *testing.T) {
	l := Discard()
	l.Info().Msg("nowhere")
	if l.Path() != "" || l.Close() != nil {
		t.Fatal("discard logger has a file")
	}
}

// A process that logs nothing leaves no file.
func TestOpenCreatesTheFileOnTheFirstLine(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(dir, "quiet", zerolog.NoLevel, time.Now(), Retention{})
	if err != nil {
		t.Fatal(err)
	}
	l.Debug().Msg("below the level: nothing written")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files left by a silent process: %v", entries)
	}
}

// Prune removes empty files, files older than MaxAge and all but the
// newest MaxFiles; other files are never touched.
func TestPrune(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	write := func(t *testing.T, dir, name, body string, age time.Duration) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name    string
		keep    Retention
		files   map[string]time.Duration // name → age; "empty-" names have no content
		removed int
		left    []string
	}{
		{"defaults", Retention{}, map[string]time.Duration{
			"a.log": time.Hour, "old.log": 8 * 24 * time.Hour, "empty-old.log": 2 * time.Minute,
			"empty-now.log": 0, "notes.txt": 30 * 24 * time.Hour},
			2, []string{"a.log", "empty-now.log", "notes.txt"}},
		{"newest files", Retention{MaxFiles: 2}, map[string]time.Duration{
			"1.log": time.Hour, "2.log": 2 * time.Hour, "3.log": 3 * time.Hour, "4.log": 4 * time.Hour},
			2, []string{"1.log", "2.log"}},
		{"keep everything", Retention{MaxAge: -1, MaxFiles: -1}, map[string]time.Duration{
			"1.log": 400 * 24 * time.Hour, "2.log": time.Hour},
			0, []string{"1.log", "2.log"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, age := range tc.files {
				body := "{}\n"
				if strings.HasPrefix(name, "empty-") {
					body = ""
				}
				write(t, dir, name, body, age)
			}
			n, err := Prune(dir, now, tc.keep)
			if err != nil || n != tc.removed {
				t.Fatalf("Prune = %d, %v; want %d", n, err, tc.removed)
			}
			var left []string
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				left = append(left, e.Name())
			}
			if strings.Join(left, " ") != strings.Join(tc.left, " ") {
				t.Fatalf("left %v, want %v", left, tc.left)
			}
		})
	}
}
