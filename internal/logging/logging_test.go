package logging

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestOpenWritesJSONLinesToFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	now := time.Date(2026, 11, 29, 15, 4, 5, 6e6, time.UTC)
	l, err := Open(dir, "test", zerolog.NoLevel, now, Retention{}, nil)
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
	l, err := Open(dir, "quiet", zerolog.NoLevel, time.Now(), Retention{}, nil)
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

// fullWriter is a log file on a full disk while full is set.
type fullWriter struct {
	full  bool
	lines int
}

func (w *fullWriter) Write(p []byte) (int, error) {
	if w.full {
		return 0, &fs.PathError{Op: "write", Path: "/h/logs/x.log", Err: syscall.ENOSPC}
	}
	w.lines++
	return len(p), nil
}

// A log file that cannot be written says so once on stderr, not once per
// line, and zerolog never sees the failure (it would print every line).
func TestReportOnce(t *testing.T) {
	reached := 0
	old := zerolog.ErrorHandler
	zerolog.ErrorHandler = func(error) { reached++ }
	defer func() { zerolog.ErrorHandler = old }()
	var stderr strings.Builder
	w := &fullWriter{full: true}
	log := zerolog.New(ReportOnce(w, "the log file", &stderr))
	for range 1000 {
		log.Info().Msg("a line")
	}
	const line = "happy: the log file cannot be written (/h/logs/x.log: no space left on device): log lines are dropped until it can\n"
	if stderr.String() != line || reached != 0 {
		t.Fatalf("stderr %q, zerolog's handler called %d times; want one line and none", stderr.String(), reached)
	}
	w.full = false
	log.Info().Msg("room again")
	w.full = true
	log.Info().Msg("full again")
	log.Info().Msg("still full")
	if stderr.String() != line+line || w.lines != 1 {
		t.Fatalf("after a success and a new failure: stderr %q, %d lines written", stderr.String(), w.lines)
	}
	_, _ = ReportOnce(w, "the log file", nil).Write([]byte("x\n")) // nil stderr: silent
}
