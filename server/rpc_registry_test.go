package server

import (
	"context"
	"sync"
	"testing"
	"time"
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
