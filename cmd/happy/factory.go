package main

import (
	"io"
	"os"
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
	// terminal reports whether a stream is a terminal (happy shows a
	// prompt line there); tests replace it.
	terminal func(any) bool

	mu     sync.Mutex
	logger *logging.Logger
}

func newFactory(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *factory {
	return &factory{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now, terminal: isTerminal}
}

// isTerminal reports whether s is an *os.File open on a terminal.
func isTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
	l, err := logging.Open(h.Logs(), name, lvl, f.now())
	if err != nil {
		f.logger = logging.Discard()
		return f.logger, err
	}
	f.logger = l
	return l, nil
}

// close releases what the factory opened.
func (f *factory) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logger != nil {
		_ = f.logger.Close()
	}
}
