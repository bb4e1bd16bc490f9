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
	l, err := Open(dir, "test", zerolog.NoLevel, now)
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
