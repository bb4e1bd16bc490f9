package ptyproxy

import (
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// inputPump copies happy's terminal input to the child, and can be stopped
// without consuming another key: it waits with select(2) on the input and
// on a wake-up pipe, and reads only when input is there. The input file's
// flags (blocking mode) are left alone, since they are shared with the
// shell that started happy.
type inputPump struct {
	fd    int
	wakeR int
	wakeW int
	done  chan struct{}
}

func newInputPump(fd int) (*inputPump, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("input wake-up pipe: %w", err)
	}
	return &inputPump{fd: fd, wakeR: p[0], wakeW: p[1], done: make(chan struct{})}, nil
}

// run copies until stop is called, the input ends (EOF, EIO of a hung-up
// terminal) or dst fails. It returns nil when stopped or at end of input.
func (p *inputPump) run(dst io.Writer) error {
	defer close(p.done)
	buf := make([]byte, 4096)
	nfd := max(p.fd, p.wakeR) + 1
	for {
		var rset unix.FdSet
		rset.Zero()
		rset.Set(p.fd)
		rset.Set(p.wakeR)
		if _, err := unix.Select(nfd, &rset, nil, nil, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("wait for terminal input: %w", err)
		}
		if rset.IsSet(p.wakeR) {
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
	_, _ = unix.Write(p.wakeW, []byte{0})
	<-p.done
	_ = unix.Close(p.wakeR)
	_ = unix.Close(p.wakeW)
}

// discard releases a pump that was never run.
func (p *inputPump) discard() {
	_ = unix.Close(p.wakeR)
	_ = unix.Close(p.wakeW)
}
