package ptyproxy

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/term"
)

// Terminal is happy's own terminal, put in raw mode for as long as a child
// owns the screen. Restore puts back the exact settings found (termios) and
// may be called any number of times, from any goroutine.
type Terminal struct {
	f   *os.File
	fd  int
	tty bool

	mu       sync.Mutex
	old      *term.State
	restored bool
}

// ErrNotTerminal is returned by MakeRaw when f is not a terminal.
var ErrNotTerminal = errors.New("not a terminal")

// OpenTerminal wraps f without changing it. When f is not a terminal the
// Terminal does nothing (IsTerminal is false, Size reports zero).
func OpenTerminal(f *os.File) *Terminal {
	if f == nil {
		return &Terminal{}
	}
	fd := int(f.Fd())
	return &Terminal{f: f, fd: fd, tty: term.IsTerminal(fd)}
}

// IsTerminal reports whether the file is a terminal.
func (t *Terminal) IsTerminal() bool { return t.tty }

// MakeRaw saves the current settings and switches to raw mode (no echo, no
// line editing, no signals from keys: Ctrl-C arrives as byte 0x03).
// ErrNotTerminal when the file is not a terminal; an error from the ioctl
// otherwise (wrapped).
func (t *Terminal) MakeRaw() error {
	if !t.tty {
		return ErrNotTerminal
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := term.MakeRaw(t.fd)
	if err != nil {
		return fmt.Errorf("terminal raw mode: %w", err)
	}
	t.old, t.restored = st, false
	return nil
}

// Restore puts back the settings saved by MakeRaw. Restoring twice, or
// without MakeRaw, does nothing. An ioctl error (EIO when the terminal hung
// up) is returned wrapped for the caller to report; it is not fatal.
func (t *Terminal) Restore() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.old == nil || t.restored {
		return nil
	}
	t.restored = true
	if err := term.Restore(t.fd, t.old); err != nil {
		return fmt.Errorf("restore terminal settings: %w", err)
	}
	return nil
}

// Size returns the terminal's size; zero when unknown (not a terminal,
// detached, or reporting 0x0).
func (t *Terminal) Size() Size {
	if !t.tty {
		return Size{}
	}
	w, h, err := term.GetSize(t.fd)
	if err != nil || w <= 0 || h <= 0 || w > 0xffff || h > 0xffff {
		return Size{}
	}
	return Size{Cols: uint16(w), Rows: uint16(h)}
}
