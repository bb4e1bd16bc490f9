package relay

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is an exponential back-off with jitter: the n-th consecutive
// failure waits a random duration in [d/2, d] where d = min(Max, Min·2^n).
// The zero value uses 250 ms and 30 s.
type Backoff struct {
	Min time.Duration // first delay (250 ms when zero)
	Max time.Duration // cap (30 s when zero)

	n int
}

func (b *Backoff) bounds() (time.Duration, time.Duration) {
	lo, hi := b.Min, b.Max
	if lo <= 0 {
		lo = 250 * time.Millisecond
	}
	if hi <= 0 {
		hi = 30 * time.Second
	}
	if hi < lo {
		hi = lo
	}
	return lo, hi
}

// Next returns the delay before the next attempt and counts a failure.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.bounds()
	d := lo
	for i := 0; i < b.n && d < hi; i++ {
		d *= 2
	}
	if d > hi {
		d = hi
	}
	b.n++
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

// Reset forgets the failures after a success.
func (b *Backoff) Reset() { b.n = 0 }

// Failures is the number of consecutive failures counted.
func (b *Backoff) Failures() int { return b.n }

// sleep waits d or until ctx ends (then it returns false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
