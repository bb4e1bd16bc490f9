// Package logging opens happy's zerolog logger on a file under the home
// folder's logs/ directory. Logs never go to stdout or stderr: while an agent
// owns the terminal, a stray line would corrupt its screen.
package logging

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
)

// Logger is a zerolog logger plus the file behind it. Close flushes and
// closes the file; a Logger from Discard has no file.
type Logger struct {
	zerolog.Logger
	file *os.File
	path string
}

// Open creates dir (0700) and a new log file in it named
// `<UTC time>-<pid>-<name>.log`, and returns a logger writing JSON lines to it
// at level (zerolog.InfoLevel when level is zerolog.NoLevel). Times are RFC
// 3339 with milliseconds.
func Open(dir, name string, level zerolog.Level, now time.Time) (*Logger, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logging: create %s: %w", dir, err)
	}
	fname := fmt.Sprintf("%s-%d-%s.log", now.UTC().Format("20060102T150405.000Z"), os.Getpid(), name)
	path := filepath.Join(dir, fname)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("logging: open %s: %w", path, err)
	}
	if level == zerolog.NoLevel {
		level = zerolog.InfoLevel
	}
	zl := zerolog.New(f).Level(level).With().Timestamp().Str("cmd", name).Logger()
	return &Logger{Logger: zl, file: f, path: path}, nil
}

// Discard returns a logger that writes nowhere (tests, and commands that
// have no home folder yet).
func Discard() *Logger {
	return &Logger{Logger: zerolog.New(io.Discard).Level(zerolog.Disabled)}
}

// Path is the log file's path, or "" for a discarding logger.
func (l *Logger) Path() string { return l.path }

// Close syncs and closes the log file. It is safe to call on a discarding
// logger and more than once.
func (l *Logger) Close() error {
	if l == nil || l.file == nil {
		return nil
	}
	f := l.file
	l.file = nil
	_ = f.Sync()
	return f.Close()
}

// ParseLevel turns a level name (trace, debug, info, warn, error) into a
// zerolog level; "" gives info. An unknown name is an error.
func ParseLevel(s string) (zerolog.Level, error) {
	if s == "" {
		return zerolog.InfoLevel, nil
	}
	l, err := zerolog.ParseLevel(s)
	if err != nil {
		return zerolog.NoLevel, fmt.Errorf("logging: unknown level %q (want trace, debug, info, warn or error)", s)
	}
	return l, nil
}
