package confine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/happy-dev/happy/internal/proc"
)

// Bounds of a command.
const (
	// DefaultTimeout is a command's timeout when the caller gives none.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the longest timeout a caller may ask for.
	MaxTimeout = 300 * time.Second
	// DefaultMaxOutput caps each of stdout and stderr (bytes).
	DefaultMaxOutput = 1 << 20
	// TruncationMarker ends a stream cut at the output cap.
	TruncationMarker = "\n[output truncated by happy]\n"
)

// ErrTimeout: the command ran past its timeout; its process group was
// killed.
var ErrTimeout = errors.New("command timed out")

// Command is one command to run in the root.
type Command struct {
	// Path is the program (looked up in PATH when it has no slash); Args
	// its arguments, without the program's name.
	Path string
	Args []string
	// Dir is the working folder, resolved inside the root ("" is the root).
	Dir string
	// Timeout bounds the run: DefaultTimeout when zero or negative, capped
	// at MaxTimeout.
	Timeout time.Duration
	// MaxOutput caps each stream in bytes; DefaultMaxOutput when zero.
	MaxOutput int
	// OnStart, when set, sees the process group id once it runs (tests).
	OnStart func(pgid int)
}

// Result is how a command ended. ExitCode is -1 when it was killed by a
// signal (a timeout among them) or never started.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
	// Truncated says a stream was cut at MaxOutput (and ends with
	// TruncationMarker).
	Truncated bool
	// TimedOut says the timeout killed the process group.
	TimedOut bool
	Duration time.Duration
}

// ClampTimeout is the timeout a command asking for d gets.
func ClampTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return min(d, MaxTimeout)
}

// Run runs c in its own process group, in c.Dir inside the root, with
// stdin empty. At the timeout (or when ctx ends) the whole group gets
// SIGKILL. Each stream keeps its first MaxOutput bytes and is drained to
// the end. A non-zero exit is a Result, not an error; errors are the
// refusals of Dir (those of Rel, ErrNotDir), a program that cannot start,
// and ErrTimeout (with the Result of what was read).
func (r *Root) Run(ctx context.Context, c Command) (Result, error) {
	start := time.Now()
	res := Result{ExitCode: -1}
	dir := r.dir
	if c.Dir != "" {
		abs, err := r.Abs(c.Dir)
		if err != nil {
			return res, err
		}
		st, err := os.Stat(abs)
		if err != nil {
			return res, err
		}
		if !st.IsDir() {
			return res, fmt.Errorf("%w: %s", ErrNotDir, c.Dir)
		}
		dir = abs
	}
	limit := c.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	timeout := ClampTimeout(c.Timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return res, err
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return res, err
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, outW, errW
	p, err := proc.Start(context.Background(), cmd, proc.Options{Grace: time.Second})
	devnull.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return res, err
	}
	if c.OnStart != nil {
		c.OnStart(p.Pid())
	}
	var wg sync.WaitGroup
	var stdout, stderr capped
	stdout.limit, stderr.limit = limit, limit
	wg.Add(2)
	go func() { defer wg.Done(); stdout.drain(outR) }()
	go func() { defer wg.Done(); stderr.drain(errR) }()

	select {
	case <-p.Done():
	case <-ctx.Done():
		res.TimedOut = errors.Is(ctx.Err(), context.DeadlineExceeded)
		_ = p.Kill()
	}
	state, _ := p.Wait()
	// The group is gone; a process that left it may still hold a pipe:
	// give the readers a moment, then close the pipes under them.
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	t := time.NewTimer(time.Second)
	select {
	case <-drained:
	case <-t.C:
		outR.Close()
		errR.Close()
		<-drained
	}
	t.Stop()
	outR.Close()
	errR.Close()

	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.Truncated = stdout.cut || stderr.cut
	res.Duration = time.Since(start)
	if state != nil {
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Exited() {
			res.ExitCode = ws.ExitStatus()
		}
	}
	if res.TimedOut {
		return res, fmt.Errorf("%w after %s", ErrTimeout, timeout)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, nil
}

// capped keeps the first limit bytes written and counts the rest.
type capped struct {
	limit int
	buf   []byte
	cut   bool
}

func (c *capped) drain(r io.Reader) {
	b := make([]byte, 32<<10)
	for {
		n, err := r.Read(b)
		if n > 0 {
			room := c.limit - len(c.buf)
			if room >= n {
				c.buf = append(c.buf, b[:n]...)
			} else {
				c.buf = append(c.buf, b[:max(room, 0)]...)
				c.cut = true
			}
		}
		if err != nil {
			return
		}
	}
}

// String is what was kept, with TruncationMarker when some was cut.
func (c *capped) String() string {
	if c.cut {
		return string(c.buf) + TruncationMarker
	}
	return string(c.buf)
}
