package acp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/proc"
)

// Errors of the terminal service.
var (
	// ErrUnknownTerminal: no terminal has that id (never created, or
	// released).
	ErrUnknownTerminal = errors.New("acp: unknown terminal")
)

// DefaultOutputLimit is the output a terminal keeps when the agent sets
// no outputByteLimit (bytes).
const DefaultOutputLimit = 1 << 20

// terminals runs the commands the agent asks for (terminal/create): each
// in its own process group, stdout and stderr merged into one output that
// keeps at most its byte limit, cut at the front on a character boundary.
type terminals struct {
	dir *folder
	env []string

	mu     sync.Mutex
	next   int
	m      map[string]*terminal
	closed bool
}

type terminal struct {
	id    string
	p     *proc.Process
	limit int
	done  chan struct{} // closed when the command exited and its output was read

	mu        sync.Mutex
	buf       []byte
	truncated bool
	exitCode  *int
	signal    *string
}

// ExitStatus is a terminal's exit status (schema TerminalExitStatus):
// ExitCode when the command exited, Signal when a signal ended it.
type ExitStatus struct {
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
}

// createTerminal is the params of terminal/create.
type createTerminal struct {
	Command         string   `json:"command"`
	Args            []string `json:"args"`
	Env             []EnvVar `json:"env"`
	Cwd             *string  `json:"cwd"`
	OutputByteLimit *int64   `json:"outputByteLimit"`
}

func newTerminals(dir *folder, env []string) *terminals {
	return &terminals{dir: dir, env: env, m: map[string]*terminal{}}
}

// shellMeta are the characters that make a lone command string a shell
// command line rather than a program name.
const shellMeta = " \t\n|&;<>()$`\\\"'*?[]#~=%"

// create starts a command and returns its terminal id. The working folder
// must be the session folder or inside it. A command without arguments
// that contains shell syntax is run by /bin/sh -c (agents send whole
// command lines that way). Errors: ErrOutsideFolder, proc.ErrNotStarted.
func (ts *terminals) create(p createTerminal) (string, error) {
	if p.Command == "" {
		return "", errors.New("acp: terminal/create without a command")
	}
	dir := ts.dir.dir
	if p.Cwd != nil && *p.Cwd != "" {
		if err := ts.dir.within(*p.Cwd); err != nil {
			return "", err
		}
		dir = *p.Cwd
	}
	var cmd *exec.Cmd
	if len(p.Args) == 0 && strings.ContainsAny(p.Command, shellMeta) {
		cmd = exec.Command("/bin/sh", "-c", p.Command)
	} else {
		cmd = exec.Command(p.Command, p.Args...)
	}
	cmd.Dir = dir
	cmd.Env = append(append([]string{}, ts.env...), os.Environ()...)
	for _, e := range p.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	limit := DefaultOutputLimit
	if p.OutputByteLimit != nil && *p.OutputByteLimit >= 0 && *p.OutputByteLimit < int64(1<<31) {
		limit = int(*p.OutputByteLimit)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("acp: terminal output pipe: %w", err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		r.Close()
		w.Close()
		return "", fmt.Errorf("acp: terminal stdin: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, w, w
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		r.Close()
		w.Close()
		devnull.Close()
		return "", errors.New("acp: terminals are closed")
	}
	pr, err := proc.Start(context.Background(), cmd, proc.Options{})
	w.Close()
	devnull.Close()
	if err != nil {
		ts.mu.Unlock()
		r.Close()
		return "", fmt.Errorf("acp: terminal: %w", err)
	}
	ts.next++
	t := &terminal{id: "term-" + strconv.Itoa(ts.next), p: pr, limit: limit, done: make(chan struct{})}
	ts.m[t.id] = t
	ts.mu.Unlock()
	go t.collect(r)
	return t.id, nil
}

// collect reads the command's output until every writer closed it, then
// waits for the command and records its exit status.
func (t *terminal) collect(r *os.File) {
	defer close(t.done)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t.append(buf[:n])
		}
		if err != nil {
			break
		}
	}
	r.Close()
	st, _ := t.p.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	if st == nil {
		return
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		s := signalName(ws.Signal())
		t.signal = &s
		return
	}
	c := st.ExitCode()
	t.exitCode = &c
}

// signalName names a signal the way processes report them ("SIGTERM").
func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL", syscall.SIGINT: "SIGINT",
		syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT", syscall.SIGPIPE: "SIGPIPE", syscall.SIGSEGV: "SIGSEGV",
		syscall.SIGABRT: "SIGABRT"}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// append adds output, dropping from the front what exceeds the limit (on a
// character boundary).
func (t *terminal) append(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.limit; over > 0 {
		for over < len(t.buf) && !utf8.RuneStart(t.buf[over]) {
			over++
		}
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.truncated = true
	}
}

func (ts *terminals) get(id string) (*terminal, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.m[id]
	if t == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTerminal, id)
	}
	return t, nil
}

// TerminalOutput is the result of terminal/output.
type TerminalOutput struct {
	Output     string      `json:"output"`
	Truncated  bool        `json:"truncated"`
	ExitStatus *ExitStatus `json:"exitStatus,omitempty"`
}

// output returns the output so far and the exit status once exited.
func (ts *terminals) output(id string) (TerminalOutput, error) {
	t, err := ts.get(id)
	if err != nil {
		return TerminalOutput{}, err
	}
	exited := false
	select {
	case <-t.done:
		exited = true
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := TerminalOutput{Output: strings.ToValidUTF8(string(t.buf), "\uFFFD"), Truncated: t.truncated}
	if exited {
		out.ExitStatus = &ExitStatus{ExitCode: t.exitCode, Signal: t.signal}
	}
	return out, nil
}

// wait blocks until the command exited (or ctx ends).
func (ts *terminals) wait(ctx context.Context, id string) (ExitStatus, error) {
	t, err := ts.get(id)
	if err != nil {
		return ExitStatus{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return ExitStatus{}, ctx.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return ExitStatus{ExitCode: t.exitCode, Signal: t.signal}, nil
}

// kill ends the command's process group (SIGTERM, then SIGKILL) and keeps
// the terminal for its output.
func (ts *terminals) kill(id string) error {
	t, err := ts.get(id)
	if err != nil {
		return err
	}
	if err := t.p.Stop(); err != nil {
		return fmt.Errorf("acp: kill terminal %s: %w", id, err)
	}
	<-t.done
	return nil
}

// release kills the command if it still runs and forgets the terminal.
func (ts *terminals) release(id string) error {
	t, err := ts.get(id)
	if err != nil {
		return err
	}
	ts.mu.Lock()
	delete(ts.m, id)
	ts.mu.Unlock()
	if err := t.p.Stop(); err != nil {
		return fmt.Errorf("acp: release terminal %s: %w", id, err)
	}
	<-t.done
	return nil
}

// closeAll ends every terminal (the session is over).
func (ts *terminals) closeAll() {
	ts.mu.Lock()
	ts.closed = true
	all := ts.m
	ts.m = map[string]*terminal{}
	ts.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = t.p.Stop()
			<-t.done
		}()
	}
	wg.Wait()
}
