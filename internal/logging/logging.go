// Package logging opens happy's zerolog logger on a file under the home
// folder's logs/ directory. Logs never go to stdout or stderr: while an agent
// owns the terminal, a stray line would corrupt its screen. The one
// exception is a log file that cannot be written (a full disk): that is
// said once on stderr (ReportOnce), not once per line.
package logging

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/private"
)

// Logger is a zerolog logger plus the file behind it. Close flushes and
// closes the file; a Logger from Discard has no file.
type Logger struct {
	zerolog.Logger
	file *lazyFile
	path string
}

// Retention bounds what Open keeps of earlier processes' log files: files
// older than MaxAge and all but the newest MaxFiles are removed. Zero
// fields take DefaultMaxAge and DefaultMaxFiles; a negative field keeps
// everything on that count.
type Retention struct {
	MaxAge   time.Duration
	MaxFiles int
}

// Default retention: a week, and at most 100 files.
const (
	DefaultMaxAge   = 7 * 24 * time.Hour
	DefaultMaxFiles = 100
)

// Open creates dir (0700), prunes it (Prune with keep), and returns a
// logger writing JSON lines at level (zerolog.InfoLevel when level is
// zerolog.NoLevel) to a new file named `<UTC time>-<pid>-<name>.log`. The
// file is created on the first line written, so a process that logs
// nothing leaves no empty file. Times are RFC 3339 with milliseconds.
// When the file cannot be written (a full disk), lines are dropped and
// stderr (nil: nowhere) gets one line saying so (see ReportOnce).
func Open(dir, name string, level zerolog.Level, now time.Time, keep Retention, stderr io.Writer) (*Logger, error) {
	if err := private.Dir(dir); err != nil {
		return nil, fmt.Errorf("logging: %w", err)
	}
	_, _ = Prune(dir, now, keep)
	fname := fmt.Sprintf("%s-%d-%s.log", now.UTC().Format("20060102T150405.000Z"), os.Getpid(), name)
	path := filepath.Join(dir, fname)
	if level == zerolog.NoLevel {
		level = zerolog.InfoLevel
	}
	f := &lazyFile{path: path}
	zl := zerolog.New(ReportOnce(f, "the log file", stderr)).Level(level).With().Timestamp().Str("cmd", name).Logger()
	return &Logger{Logger: zl, file: f, path: path}, nil
}

// Prune removes from dir the log files (*.log) that are empty, older than
// keep.MaxAge (by modification time, against now), or beyond the newest
// keep.MaxFiles, and returns how many it removed. Files being written by
// running processes are recent and so kept.
func Prune(dir string, now time.Time, keep Retention) (int, error) {
	if keep.MaxAge == 0 {
		keep.MaxAge = DefaultMaxAge
	}
	if keep.MaxFiles == 0 {
		keep.MaxFiles = DefaultMaxFiles
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	type file struct {
		path string
		mod  time.Time
	}
	var files []file
	removed := 0
	remove := func(path string) {
		if os.Remove(path) == nil {
			removed++
		}
	}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".log" {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		path := filepath.Join(dir, e.Name())
		switch {
		case info.Size() == 0 && now.Sub(info.ModTime()) > time.Minute:
			remove(path) // an empty file left by an earlier version
		case keep.MaxAge > 0 && now.Sub(info.ModTime()) > keep.MaxAge:
			remove(path)
		default:
			files = append(files, file{path, info.ModTime()})
		}
	}
	if keep.MaxFiles > 0 && len(files) > keep.MaxFiles {
		slices.SortFunc(files, func(a, b file) int { return b.mod.Compare(a.mod) })
		for _, f := range files[keep.MaxFiles:] {
			remove(f.path)
		}
	}
	return removed, nil
}

// lazyFile is an io.Writer that creates its file (0600) on the first
// write. A failed create is retried on the next write; meanwhile lines are
// dropped (a log must never stop the program).
type lazyFile struct {
	mu   sync.Mutex
	path string
	f    *os.File
	done bool
}

// Write writes p to the file, creating it first if need be.
func (l *lazyFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done {
		return 0, os.ErrClosed
	}
	if l.f == nil {
		f, err := private.OpenAppend(l.path)
		if err != nil {
			return 0, err
		}
		l.f = f
	}
	return l.f.Write(p)
}

// close syncs and closes the file if it was created.
func (l *lazyFile) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = true
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	_ = f.Sync()
	return f.Close()
}

// ReportOnce wraps w, a log writer, so its failures never reach zerolog,
// which would print "could not write event" on stderr for every line:
// a failed write is dropped, and the first failure prints one line on
// stderr (nil: nowhere), `happy: <what> cannot be written (<path>:
// <cause>): log lines are dropped until it can`; after a write succeeds
// again, the next failure is reported again. Safe for concurrent use when
// w is.
func ReportOnce(w io.Writer, what string, stderr io.Writer) io.Writer {
	return &reportOnce{w: w, what: what, stderr: stderr}
}

type reportOnce struct {
	w       io.Writer
	what    string
	stderr  io.Writer
	mu      sync.Mutex
	failing bool
}

// Write writes p to the wrapped writer; it never returns an error.
func (r *reportOnce) Write(p []byte) (int, error) {
	_, err := r.w.Write(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		r.failing = false
		return len(p), nil
	}
	if !r.failing {
		r.failing = true
		if r.stderr != nil {
			fmt.Fprintf(r.stderr, "happy: %s cannot be written (%s): log lines are dropped until it can\n", r.what, describe(err))
		}
	}
	return len(p), nil
}

// describe says what failed in a few words: "<path>: <innermost cause>"
// for a file error, the error's text otherwise.
func describe(err error) string {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	cause := pe.Err
	for {
		next := errors.Unwrap(cause)
		if next == nil {
			return pe.Path + ": " + cause.Error()
		}
		cause = next
	}
}

// Discard returns a logger that writes nowhere (tests, and commands that
// have no home folder yet).
func Discard() *Logger {
	return &Logger{Logger: zerolog.New(io.Discard).Level(zerolog.Disabled)}
}

// Path is the log file's path (created at the first line), or "" for a
// discarding logger.
func (l *Logger) Path() string { return l.path }

// Close syncs and closes the log file. It is safe to call on a discarding
// logger and more than once.
func (l *Logger) Close() error {
	if l == nil || l.file == nil {
		return nil
	}
	return l.file.close()
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
