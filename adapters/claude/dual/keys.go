package dual

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// keyWait waits, while Claude runs in remote mode, for a key on happy's
// terminal. The terminal is in raw mode meanwhile (a single key counts, no
// echo, Ctrl-C is a key), and is restored by stop. It waits with select(2)
// on the input and a wake-up pipe and reads only when input is there, so
// stopping it never swallows a key meant for the next owner of the terminal
// (local mode's PTY proxy), and the input file's flags, shared with the
// shell, are left alone.
//
// It also watches SIGINT, SIGTERM and SIGHUP: with the terminal in raw
// mode nobody else handles them, and the default action would end happy
// with the terminal still raw.
type keyWait struct {
	fd  int
	tty bool
	old *term.State

	wakeR, wakeW *os.File
	keys         chan keyResult // at most one result
	sigs         chan os.Signal
	done         chan struct{} // the reader returned
	once         sync.Once
	restoreErr   error
}

// keyResult is what ended the wait: a key (the bytes read at once), or the
// input ended or failed (err; then no key will ever come).
type keyResult struct {
	key []byte
	err error
}

// errInputEnded: the terminal input reached end of file or hung up.
var errInputEnded = errors.New("terminal input ended")

// waitKey starts waiting on in (nil: no terminal; only signals are
// watched). Errors: the wake-up pipe cannot be made, or raw mode cannot be
// set on a terminal.
func waitKey(in *os.File) (*keyWait, error) {
	k := &keyWait{fd: -1, keys: make(chan keyResult, 1), sigs: make(chan os.Signal, 1), done: make(chan struct{})}
	signal.Notify(k.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	if in == nil {
		close(k.done)
		return k, nil
	}
	k.fd = int(in.Fd())
	var err error
	if k.wakeR, k.wakeW, err = os.Pipe(); err != nil {
		signal.Stop(k.sigs)
		return nil, fmt.Errorf("key wait: wake-up pipe: %w", err)
	}
	if term.IsTerminal(k.fd) {
		k.tty = true
		if k.old, err = term.MakeRaw(k.fd); err != nil {
			signal.Stop(k.sigs)
			_ = k.wakeR.Close()
			_ = k.wakeW.Close()
			return nil, fmt.Errorf("key wait: terminal raw mode: %w", err)
		}
	}
	go k.read()
	return k, nil
}

// read waits for input or the wake-up pipe and reports one key.
func (k *keyWait) read() {
	defer close(k.done)
	wake := int(k.wakeR.Fd())
	nfd := max(k.fd, wake) + 1
	buf := make([]byte, 256)
	for {
		var rset unix.FdSet
		rset.Zero()
		rset.Set(k.fd)
		rset.Set(wake)
		if _, err := unix.Select(nfd, &rset, nil, nil, nil); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			k.keys <- keyResult{err: fmt.Errorf("wait for a key: %w", err)}
			return
		}
		if rset.IsSet(wake) {
			return
		}
		if !rset.IsSet(k.fd) {
			continue
		}
		// Everything typed at once is one key press (an escape sequence,
		// a paste): it is consumed, not passed on to Claude.
		n, err := unix.Read(k.fd, buf)
		switch {
		case n > 0:
			k.keys <- keyResult{key: append([]byte(nil), buf[:n]...)}
			return
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		case err != nil:
			k.keys <- keyResult{err: fmt.Errorf("%w: %w", errInputEnded, err)}
			return
		default:
			k.keys <- keyResult{err: errInputEnded}
			return
		}
	}
}

// stop ends the wait (without reading another key), stops watching
// signals and restores the terminal's settings. Safe to call more than
// once; it returns the restore error, if any.
func (k *keyWait) stop() error {
	k.once.Do(func() {
		if k.wakeW != nil {
			_, _ = k.wakeW.Write([]byte{0})
		}
		<-k.done
		signal.Stop(k.sigs)
		if k.wakeR != nil {
			_ = k.wakeR.Close()
			_ = k.wakeW.Close()
		}
		if k.tty && k.old != nil {
			if err := term.Restore(k.fd, k.old); err != nil {
				k.restoreErr = fmt.Errorf("restore terminal settings: %w", err)
			}
		}
	})
	return k.restoreErr
}
