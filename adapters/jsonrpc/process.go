package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/internal/proc"
)

// Process is a child process spoken to over its stdio. Its stderr goes to
// Options.Logger (and to the Tap as stderr frames); when it ends, an exit
// frame {"code":…,"sig":…} is tapped after the last stdout frame.
type Process struct {
	*Conn
	proc *proc.Process
	done chan struct{}

	mu    sync.Mutex
	state *os.ProcessState
	err   error
}

// Start starts cmd in its own process group (cmd.Stdin, Stdout and Stderr
// must be unset) and connects to it. Cancelling ctx stops the process.
// Errors: proc.ErrNotStarted (wrapped) when the command cannot start, or a
// pipe error.
func Start(ctx context.Context, cmd *exec.Cmd, h Handler, opts Options) (*Process, error) {
	if cmd.Stdin != nil || cmd.Stdout != nil || cmd.Stderr != nil {
		return nil, errors.New("jsonrpc: start: cmd stdio must be unset")
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: start %s: stdin pipe: %w", cmd.Path, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("jsonrpc: start %s: stdout pipe: %w", cmd.Path, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("jsonrpc: start %s: stderr pipe: %w", cmd.Path, err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	p, err := proc.Start(ctx, cmd, proc.Options{})
	// The child holds its own copies now.
	closeAll(inR, outW, errW)
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("jsonrpc: %w", err)
	}
	conn := New(ctx, &pipeRWC{r: outR, w: inW}, h, opts)
	pr := &Process{Conn: conn, proc: p, done: make(chan struct{})}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		pr.readStderr(errR)
	}()
	go func() {
		state, werr := p.Wait()
		// Stdout drained (EOF) or closed by us, and stderr drained; a
		// descendant that left the group (setsid) may hold the pipes open
		// for ever, so the wait is bounded and our ends are then closed.
		drained := make(chan struct{})
		go func() {
			<-conn.Done()
			<-stderrDone
			close(drained)
		}()
		t := time.NewTimer(OutputDrain)
		select {
		case <-drained:
		case <-t.C:
			opts.Logger.Warn().Int("pid", p.Pid()).Dur("after", OutputDrain).
				Msg("child exited but its stdout or stderr is still held open (a detached descendant?); closing our ends")
			_ = conn.Close()
			_ = errR.Close()
			<-drained
		}
		t.Stop()
		pr.mu.Lock()
		pr.state, pr.err = state, werr
		pr.mu.Unlock()
		conn.tap(Frame{Dir: trafficlog.Exit, Data: exitJSON(state), JSON: true})
		close(pr.done)
	}()
	return pr, nil
}

// OutputDrain bounds how long, once the child's process group has ended,
// Start's reader waits for the child's stdout and stderr to reach end of
// file. A descendant that left the group (setsid) and inherited them can
// hold them open; after OutputDrain our ends are closed, what was not read
// by then is lost, and Exited is closed.
const OutputDrain = 2 * time.Second

// Pid is the child's process id (also its process group id).
func (p *Process) Pid() int { return p.proc.Pid() }

// Exited is closed when the child has ended and its output was read.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Wait blocks until Exited and returns the exit state and os/exec's error.
func (p *Process) Wait() (*os.ProcessState, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state, p.err
}

// Stop closes the child's stdin, gives it grace to exit on its own, then
// ends its process group (SIGTERM, then SIGKILL) and waits for it.
func (p *Process) Stop(grace time.Duration) error {
	_ = p.Conn.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.proc.Done():
	case <-t.C:
		if err := p.proc.Stop(); err != nil {
			return fmt.Errorf("jsonrpc: stop child %d: %w", p.proc.Pid(), err)
		}
	}
	<-p.done
	return nil
}

func (p *Process) readStderr(r *os.File) {
	defer r.Close()
	lr, _ := linereader.New(r, linereader.Options{MaxLine: 64 << 10})
	for {
		line, err := lr.Next()
		if err != nil {
			if rest := lr.Pending(); len(rest) > 0 {
				p.stderrLine(rest)
			}
			if !errors.Is(err, io.EOF) {
				p.opts.Logger.Warn().Err(err).Msg("read child stderr")
			}
			return
		}
		p.stderrLine(line.Data)
	}
}

func (p *Process) stderrLine(b []byte) {
	s := string(b)
	p.opts.Logger.Info().Str("stream", "stderr").Msg(s)
	p.tap(Frame{Dir: trafficlog.Stderr, Data: []byte(s + "\n")})
}

func exitJSON(st *os.ProcessState) []byte {
	var code *int
	var sig *string
	if st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			s := ws.Signal().String()
			sig = &s
		} else if c := st.ExitCode(); c >= 0 {
			code = &c
		}
	}
	b, _ := json.Marshal(trafficlog.ExitStatus{Code: code, Sig: sig})
	return b
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// pipeRWC joins the child's stdout (read) and stdin (write).
type pipeRWC struct {
	r *os.File
	w *os.File
}

func (p *pipeRWC) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeRWC) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeRWC) Close() error {
	return errors.Join(p.w.Close(), p.r.Close())
}
