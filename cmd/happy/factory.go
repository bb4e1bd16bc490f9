//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/logging"
)

// factory hands commands their dependencies: standard streams, environment,
// clock, home folder and logger. Tests build one over in-memory buffers.
// Nothing is opened until a command asks for it, so `happy --version` does no
// I/O beyond printing.
type factory struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	now    func() time.Time
	// isTerminal reports whether a stream is a terminal (tests replace it).
	isTerminal func(any) bool

	mu     sync.Mutex
	logger *logging.Logger
}

func newFactory(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *factory {
	return &factory{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now, isTerminal: streamIsTerminal}
}

// streamIsTerminal reports whether s is an *os.File open on a terminal.
func streamIsTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// needTerminal refuses, as a usage error, a command that draws the agent's
// own screen when stdin or stdout is not a terminal (a pipe, a file, CI):
// the screen codes would go into the pipe and the agent would wait for keys
// that never come.
func (f *factory) needTerminal(what string) error {
	if f.isTerminal(f.stdin) && f.isTerminal(f.stdout) {
		return nil
	}
	return &usageError{err: fmt.Errorf("%s draws the agent's own screen and needs a terminal on stdin and stdout; in a script or CI run one turn with -p \"PROMPT\"", what)}
}

// home resolves the happy home folder from the environment.
func (f *factory) home() (home.Dir, error) { return home.Resolve(f.getenv) }

// log returns the process logger, opening a file under <home>/logs on first
// use. When the file cannot be opened the logger discards (and the reason is
// returned once, so the command can mention it).
func (f *factory) log(name string) (*logging.Logger, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logger != nil {
		return f.logger, nil
	}
	h, err := f.home()
	if err != nil {
		f.logger = logging.Discard()
		return f.logger, err
	}
	lvl, err := logging.ParseLevel(f.getenv("HAPPY_LOG_LEVEL"))
	if err != nil {
		f.logger = logging.Discard()
		return f.logger, err
	}
	keep, keepErr := logRetention(f.getenv)
	// The home is made (or kept) private before anything is written in it.
	if err := h.Ensure(); err != nil {
		f.logger = logging.Discard()
		return f.logger, err
	}
	l, err := logging.Open(h.Logs(), name, lvl, f.now(), keep, f.stderr)
	if err != nil {
		f.logger = logging.Discard()
		return f.logger, err
	}
	f.logger = l
	return l, keepErr
}

// logRetention reads how many days and files of logs to keep from
// HAPPY_LOG_KEEP_DAYS and HAPPY_LOG_KEEP_FILES (whole numbers; 0 or unset
// is the default, 7 days and 100 files; -1 keeps everything on that
// count). A malformed value is reported and the default used.
func logRetention(getenv func(string) string) (logging.Retention, error) {
	var keep logging.Retention
	var errs []error
	for _, v := range []struct {
		name string
		set  func(int)
	}{
		{"HAPPY_LOG_KEEP_DAYS", func(n int) { keep.MaxAge = time.Duration(n) * 24 * time.Hour }},
		{"HAPPY_LOG_KEEP_FILES", func(n int) { keep.MaxFiles = n }},
	} {
		raw := getenv(v.name)
		if raw == "" {
			continue
		}
		n, err := strconv.Atoi(raw)
		if err != nil || n < -1 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of at least -1", v.name, raw))
			continue
		}
		v.set(n)
	}
	return keep, errors.Join(errs...)
}

// close releases what the factory opened.
func (f *factory) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logger != nil {
		_ = f.logger.Close()
	}
}
