package rpcagent

import (
	"sync"
	"time"
)

// Turns runs one prompt turn at a time. Turns are numbered from 1 in the
// order they start; a prompt submitted while a turn runs (or while others
// wait, or while Pause holds them) waits in a FIFO queue and starts when
// the turn before it ends. The zero value is ready; its methods are safe
// for concurrent use and never call out while holding its lock.
type Turns[P any] struct {
	mu          sync.Mutex
	n           int  // the running turn, or the last one
	running     bool // turn n is starting or running
	interrupted bool // turn n was interrupted
	queue       []P
	paused      bool
	closed      bool
	giveUp      *time.Timer
}

// Submit starts a turn for p (start is true, n its number) when none runs
// and none waits, else queues p. Errors: ErrClosed after Close.
func (t *Turns[P]) Submit(p P) (n int, start bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return 0, false, ErrClosed
	}
	if t.running || t.paused || len(t.queue) > 0 {
		t.queue = append(t.queue, p)
		return 0, false, nil
	}
	return t.beginLocked(), true, nil
}

func (t *Turns[P]) beginLocked() int {
	t.n++
	t.running, t.interrupted = true, false
	return t.n
}

// End ends turn n; ended is false when n is not the running turn (it ended
// already, or was given up). Unless paused or closed, the oldest queued
// prompt then starts as turn next (ok true): the caller sends it.
func (t *Turns[P]) End(n int) (ended bool, p P, next int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running || n != t.n {
		return false, p, 0, false
	}
	t.running, t.interrupted = false, false
	t.stopGiveUpLocked()
	p, ok = t.popLocked()
	if ok {
		next = t.beginLocked()
	}
	return true, p, next, ok
}

func (t *Turns[P]) popLocked() (p P, ok bool) {
	if t.closed || t.paused || len(t.queue) == 0 {
		return p, false
	}
	p = t.queue[0]
	t.queue = t.queue[1:]
	return p, true
}

func (t *Turns[P]) stopGiveUpLocked() {
	if t.giveUp != nil {
		t.giveUp.Stop()
		t.giveUp = nil
	}
}

// Running returns the running turn's number; ok is false between turns.
func (t *Turns[P]) Running() (n int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.running
}

// Queued is the number of prompts waiting.
func (t *Turns[P]) Queued() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.queue)
}

// Interrupt marks turn n interrupted; first is true the first time for the
// turn (false too when n is not running).
func (t *Turns[P]) Interrupt(n int) (first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running || n != t.n {
		return false
	}
	first = !t.interrupted
	t.interrupted = true
	return first
}

// Interrupted reports whether the running turn was interrupted.
func (t *Turns[P]) Interrupted() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running && t.interrupted
}

// GiveUpAfter arms, once per turn, a timer that calls fn(n) after d if
// turn n still runs then (the agent did not end it). fn runs on its own
// goroutine.
func (t *Turns[P]) GiveUpAfter(n int, d time.Duration, fn func(n int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running || n != t.n || t.giveUp != nil || t.closed {
		return
	}
	t.giveUp = time.AfterFunc(d, func() {
		if cur, ok := t.Running(); ok && cur == n {
			fn(n)
		}
	})
}

// Pause holds queued prompts back (while the agent is replaced) even when
// no turn runs; Submit queues.
func (t *Turns[P]) Pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = true
}

// Resume ends Pause; when no turn runs and a prompt waits, it starts as
// turn n (ok true): the caller sends it.
func (t *Turns[P]) Resume() (p P, n int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = false
	if t.running {
		return p, 0, false
	}
	if p, ok = t.popLocked(); ok {
		n = t.beginLocked()
	}
	return p, n, ok
}

// Close ends the running turn (nothing more starts), drops the queued
// prompts and the give-up timer. It reports whether it was closed already.
func (t *Turns[P]) Close() (already bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	already = t.closed
	t.closed, t.running, t.queue = true, false, nil
	t.stopGiveUpLocked()
	return already
}

// Closed reports whether Close was called.
func (t *Turns[P]) Closed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}
