package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// Calls that wait for a method nobody registers leave nothing behind once
// they give up (a relay must not grow with calls to unknown methods).
func TestRPCRegistryForgetsAbandonedWaits(t *testing.T) {
	r := newRPCRegistry()
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if e := r.wait(ctx, "acct", "sid:nobody"); e != nil {
				t.Error("a call found a method nobody registered")
			}
		}()
	}
	wg.Wait()
	r.mu.Lock()
	left := len(r.notify)
	r.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d notify entries left after every waiter gave up", left)
	}
}

// clientTime keeps a client's time only when it is at most
// ClockTolerance behind the server; times far outside the int64 range
// never overflow into a stored value.
func TestClientTimeOutOfRange(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	s := &Server{cfg: Config{ClockTolerance: time.Minute, Now: func() time.Time { return now }}, log: zerolog.Nop()}
	c := &conn{sock: nil}
	for _, tc := range []struct {
		in   float64
		want int64
	}{
		{1_700_000_000_000 - 1000, 1_700_000_000_000 - 1000},
		{1_700_000_000_000 + 5000, 1_700_000_000_000},
		{1e300, 1_700_000_000_000},
		{9.3e18, 1_700_000_000_000},
		{math.Inf(1), 1_700_000_000_000},
		{math.NaN(), 1_700_000_000_000},
	} {
		if got := s.clientTime(c, "session-alive", tc.in); got != tc.want {
			t.Errorf("clientTime(%g) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// Two relays cannot share a data folder; the second is refused with the
// first one's pid, and may start once the first has closed.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	a, err := New(Config{DataDir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(Config{DataDir: dir, Logger: zerolog.Nop()})
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), fmt.Sprintf("(pid %d)", os.Getpid())) {
		t.Fatalf("second relay: %v, want ErrDataDirInUse with pid %d", err, os.Getpid())
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := New(Config{DataDir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	_ = b.Close()
}
