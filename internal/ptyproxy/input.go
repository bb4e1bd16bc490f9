package ptyproxy

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// inputPump copies happy's terminal input to the child, and can be stopped
// without consuming another key: it waits with select(2) on the input and
// on a wake-up pipe, and reads only when input is there. The input file's
// flags (blocking mode) are left alone, since they are shared with the
// shell that started happy.
type inputPump struct {
	fd    int
	wakeR *os.File
	wakeW *os.File
	done  chan struct{}
}

func newInputPump(fd int) (*inputPump, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("input wake-up pipe: %w", err)
	}
	return &inputPump{fd: fd, wakeR: r, wakeW: w, done: make(chan struct{})}, nil
}

// run copies until stop is called, the input ends (EOF, EIO of a hung-up
// terminal) or dst fails. It returns nil when stopped or at end of input.
func (p *inputPump) run(dst io.Writer) error {
	defer close(p.done)
	buf := make([]byte, 4096)
	wake := int(p.wakeR.Fd())
	nfd := max(p.fd, wake) + 1
	for {
		var rset unix.FdSet
		rset.Zero()
		rset.Set(p.fd)
		rset.Set(wake)
		if _, err := unix.Select(nfd, &rset, nil, nil, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("wait for terminal input: %w", err)
		}
		if rset.IsSet(wake) {
			return nil
		}
		if !rset.IsSet(p.fd) {
			continue
		}
		n, err := unix.Read(p.fd, buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return nil // the child's side is gone
			}
		}
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		case err != nil, n == 0:
			return nil // end of input, or the terminal hung up
		}
	}
}

// stop makes run return and waits for it; safe to call before run started
// only if run is going to be called.
func (p *inputPump) stop() {
	_, _ = p.wakeW.Write([]byte{0})
	<-p.done
	p.discard()
}

// discard releases a pump that was never run.
func (p *inputPump) discard() {
	_ = p.wakeR.Close()
	_ = p.wakeW.Close()
}
