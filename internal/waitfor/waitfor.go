// Package waitfor is the test helper that waits for state the code under
// test does not signal: another process's writes, a relay's documents, an
// output buffer, a counter. It checks a condition on a ticker until it
// holds or a deadline passes, so a test waits as long as it must and no
// longer, and fails with what it waited for. Whatever is signalled (a
// channel, an event) is waited for on that signal instead; inside a
// testing/synctest bubble the fake clock is used, not this.
//
// It is imported by test files only.
package waitfor

import (
	"testing"
	"time"
)

// The defaults of a zero Poll: how often the condition is checked, and for
// how long at most.
const (
	DefaultEvery  = 20 * time.Millisecond
	DefaultWithin = 20 * time.Second
)

// Poll says how a condition is waited for: checked every Every (a positive
// duration; DefaultEvery when zero) for at most Within (DefaultWithin when
// zero). The condition is checked once at once, then on each tick.
type Poll struct {
	Every, Within time.Duration
}

// True waits until cond holds and reports whether it did before the
// deadline.
func (p Poll) True(cond func() bool) bool {
	if p.Every <= 0 {
		p.Every = DefaultEvery
	}
	if p.Within <= 0 {
		p.Within = DefaultWithin
	}
	if cond() {
		return true
	}
	tick := time.NewTicker(p.Every)
	defer tick.Stop()
	deadline := time.NewTimer(p.Within)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
			if cond() {
				return true
			}
		case <-deadline.C:
			return cond()
		}
	}
}

// Until waits until cond holds, and fails tb ("timed out after 20s
// waiting for <what>") when it still does not at the deadline.
func (p Poll) Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	if !p.True(cond) {
		within := p.Within
		if within <= 0 {
			within = DefaultWithin
		}
		tb.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

// Until waits with the default Poll until cond holds, and fails tb when it
// still does not after DefaultWithin.
func Until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	Poll{}.Until(tb, what, cond)
}
