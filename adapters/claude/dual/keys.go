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

// keyWait reads, while Claude runs in remote mode, the keys typed on happy's
// terminal and reports them in order on keys. The terminal is in raw mode
// meanwhile (a single key counts, no echo, Ctrl-C is a key), and is
// restored by stop. It waits with select(2) on the input and a wake-up pipe
// and reads only when input is there, so stopping it never swallows a key
// meant for the next owner of the terminal (local mode's PTY proxy), and
// the input file's flags, shared with the shell, are left alone. Keys read
// but not yet taken from keys when it stops are returned by stop.
//
// It also watches SIGINT, SIGTERM and SIGHUP: with the terminal in raw
// mode nobody else handles them, and the default action would end happy
// with the terminal still raw.
type keyWait struct {
	fd  int
	tty bool
	old *term.State

	wakeR, wakeW *os.File
	keys         chan keyResult // reads in order; an error result is the last
	sigs         chan os.Signal
	quit         chan struct{} // stop asked
	done         chan struct{} // the reader returned
	once         sync.Once
	restoreErr   error
	left         []byte // keys read but not taken, once done is closed
}

// keyBacklog is how many reads wait in keyWait.keys before the reader
// stops reading (the keys then wait in the terminal).
const keyBacklog = 64

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
	k := &keyWait{fd: -1, keys: make(chan keyResult, keyBacklog), sigs: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{})}
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

// read waits for input or the wake-up pipe and reports every read, until
// stop or the end of the input.
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
			k.report(fmt.Errorf("wait for a key: %w", err))
			return
		}
		if rset.IsSet(wake) {
			return
		}
		if !rset.IsSet(k.fd) {
			continue
		}
		// Everything typed at once is one read (a key, an escape
		// sequence, a paste).
		n, err := unix.Read(k.fd, buf)
		switch {
		case n > 0:
			key := append([]byte(nil), buf[:n]...)
			select {
			case k.keys <- keyResult{key: key}:
			case <-k.quit:
				k.left = key // stop collects it
				return
			}
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		case err != nil:
			k.report(fmt.Errorf("%w: %w", errInputEnded, err))
			return
		default:
			k.report(errInputEnded)
			return
		}
	}
}

// report reports the error that ends the reads (dropped once stop is
// asked: nobody waits for it then).
func (k *keyWait) report(err error) {
	select {
	case k.keys <- keyResult{err: err}:
	case <-k.quit:
	}
}

// stop ends the wait (without reading another key), stops watching
// signals and restores the terminal's settings. It returns the keys read
// but not taken from keys, in order, and the restore error, if any. Safe
// to call more than once (later calls return no keys).
func (k *keyWait) stop() ([]byte, error) {
	var left []byte
	k.once.Do(func() {
		close(k.quit)
		if k.wakeW != nil {
			_, _ = k.wakeW.Write([]byte{0})
		}
		<-k.done
		for more := true; more; {
			select {
			case r := <-k.keys:
				left = append(left, r.key...)
			default:
				more = false
			}
		}
		left = append(left, k.left...)
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
	return left, k.restoreErr
}
