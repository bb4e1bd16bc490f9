package waitfor

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A condition that becomes true is seen on the next tick; one that never
// does is given up on at the deadline, with a last check there.
func TestPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		start := time.Now()
		if !(Poll{Every: time.Second, Within: time.Minute}).True(func() bool { return n.Add(1) == 3 }) {
			t.Fatal("a condition true on the third check was not seen")
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("seen after %v, want 2s (checked at once, then each second)", d)
		}
		start = time.Now()
		if (Poll{Every: time.Second, Within: 5 * time.Second}).True(func() bool { return false }) {
			t.Fatal("a false condition held")
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("gave up after %v, want 5s", d)
		}
		start = time.Now()
		if !(Poll{}).True(func() bool { return time.Since(start) >= time.Second }) || time.Since(start) != time.Second {
			t.Fatalf("default poll saw the condition after %v, want 1s (every %v)", time.Since(start), DefaultEvery)
		}
	})
}
