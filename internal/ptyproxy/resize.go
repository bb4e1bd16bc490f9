package ptyproxy

import (
	"sync"
	"time"
)

// Size is a terminal size in character cells.
type Size struct {
	Cols, Rows uint16
}

// DefaultSize returns 80x24, the size used when no terminal reports a
// usable one.
func DefaultSize() Size { return Size{Cols: 80, Rows: 24} }

// IsZero reports a size with no columns or no rows (what TIOCGWINSZ gives
// for a detached terminal), which is never applied.
func (s Size) IsZero() bool { return s.Cols == 0 || s.Rows == 0 }

// Source says where a size comes from.
type Source int

// Sources.
const (
	// SourceLocal is the terminal happy runs in (SIGWINCH).
	SourceLocal Source = iota + 1
	// SourceRemote is the viewport of a remote device following the
	// session.
	SourceRemote
)

// Viewport modes: whose sizes are applied to the child's PTY.
const (
	// ViewLocal applies only the local terminal's sizes: a remote viewport
	// never resizes the terminal of a person working locally.
	ViewLocal = iota
	// ViewRemote also applies remote viewport sizes.
	ViewRemote
)

// Resize coalescing defaults.
const (
	// DefaultResizeDelay is how long the size must stay still before it is
	// applied (each new size restarts the wait).
	DefaultResizeDelay = 100 * time.Millisecond
	// DefaultResizeMaxWait bounds the wait during a continuous burst.
	DefaultResizeMaxWait = 500 * time.Millisecond
)

// resizer coalesces size changes and applies the last one, never a zero
// size and never the size already applied.
type resizer struct {
	delay, maxWait time.Duration
	apply          func(Size)

	mu      sync.Mutex
	view    int
	current Size // applied to the child
	pending Size // to apply when the timer fires; zero when none
	first   time.Time
	timer   *time.Timer
	stopped bool
}

// newResizer returns a resizer whose child already has size initial.
func newResizer(initial Size, delay, maxWait time.Duration, apply func(Size)) *resizer {
	if delay <= 0 {
		delay = DefaultResizeDelay
	}
	if maxWait < delay {
		maxWait = max(delay, DefaultResizeMaxWait)
	}
	return &resizer{delay: delay, maxWait: maxWait, apply: apply, current: initial}
}

// setView switches between ViewLocal and ViewRemote.
func (r *resizer) setView(v int) {
	r.mu.Lock()
	r.view = v
	r.mu.Unlock()
}

// offer proposes a size from a source.
func (r *resizer) offer(src Source, s Size) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || s.IsZero() || (src == SourceRemote && r.view != ViewRemote) {
		return
	}
	now := time.Now()
	if r.pending.IsZero() {
		r.first = now
	}
	r.pending = s
	wait := r.delay
	if left := r.maxWait - now.Sub(r.first); left < wait {
		wait = max(0, left)
	}
	if r.timer == nil {
		r.timer = time.AfterFunc(wait, r.fire)
	} else {
		r.timer.Reset(wait)
	}
}

func (r *resizer) fire() {
	r.mu.Lock()
	s := r.pending
	r.pending = Size{}
	if r.stopped || s.IsZero() || s == r.current {
		r.mu.Unlock()
		return
	}
	r.current = s
	r.mu.Unlock()
	r.apply(s)
}

// stop cancels a pending resize; later offers are ignored.
func (r *resizer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
	}
}

// size is the size applied last.
func (r *resizer) size() Size {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.current
}
