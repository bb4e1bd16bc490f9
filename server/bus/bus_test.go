package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/server/bus"
	"github.com/happy-dev/happy/server/bus/natstest"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// pgx's pool and the embedded NATS server finish some background
		// goroutines just after Close returns.
		goleak.IgnoreTopFunction("github.com/jackc/pgx/v5/pgxpool.(*Pool).backgroundHealthCheck"),
		goleak.IgnoreTopFunction("time.Sleep"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).Start.func1"),
	)
}

// engines opens two instances' buses on each engine.
func engines(*testing.T) map[string]func(t testing.TB) (bus.Bus, bus.Bus) {
	open := func(t testing.TB, url string) bus.Bus {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := bus.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	return map[string]func(t testing.TB) (bus.Bus, bus.Bus){
		"memory": func(t testing.TB) (bus.Bus, bus.Bus) {
			var m bus.Memory
			a, b := m.Join(), m.Join()
			t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
			return a, b
		},
		"nats": func(t testing.TB) (bus.Bus, bus.Bus) {
			u := natstest.Start(t)
			return open(t, u), open(t, u)
		},
		"postgres": func(t testing.TB) (bus.Bus, bus.Bus) {
			u := pgtest.URL(t)
			return open(t, u), open(t, u)
		},
	}
}

type sink struct {
	mu  sync.Mutex
	got [][]byte
	ch  chan struct{}
}

func newSink() *sink { return &sink{ch: make(chan struct{}, 1)} }

func (s *sink) deliver(m []byte) {
	s.mu.Lock()
	s.got = append(s.got, m)
	s.mu.Unlock()
	select {
	case s.ch <- struct{}{}:
	default:
	}
}

// wait returns the messages once n arrived (failing after 10 s).
func (s *sink) wait(t *testing.T, n int) [][]byte {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		if len(s.got) >= n {
			out := append([][]byte(nil), s.got...)
			s.mu.Unlock()
			return out
		}
		have := len(s.got)
		s.mu.Unlock()
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("received %d of %d messages", have, n)
		}
	}
}

// Every engine carries each message to the other instance once, in
// publish order, not back to its publisher, including a message larger
// than a NOTIFY payload; both are ready.
func TestBusEngines(t *testing.T) {
	for name, mk := range engines(t) {
		t.Run(name, func(t *testing.T) {
			a, b := mk(t)
			ga, gb := newSink(), newSink()
			if err := a.Start(ga.deliver); err != nil {
				t.Fatal(err)
			}
			if err := b.Start(gb.deliver); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			waitBusReady(t, a)
			waitBusReady(t, b)
			const n = 300
			var want [][]byte
			for i := range n {
				msg := []byte(fmt.Sprintf("m%03d", i))
				if i == 7 {
					msg = []byte(strings.Repeat("x", 100_000))
				}
				want = append(want, msg)
				if err := a.Publish(ctx, msg); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Publish(ctx, []byte("from b")); err != nil {
				t.Fatal(err)
			}
			got := gb.wait(t, n)
			if len(got) != n {
				t.Fatalf("b received %d messages, want %d", len(got), n)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("b's message %d = %.20q, want %.20q", i, got[i], want[i])
				}
			}
			if fromB := ga.wait(t, 1); len(fromB) != 1 || string(fromB[0]) != "from b" {
				t.Fatalf("a received %q, want only \"from b\"", fromB)
			}
			if err := a.Publish(ctx, make([]byte, bus.MaxMessage+1)); err != bus.ErrTooLarge {
				t.Fatalf("oversized publish = %v, want ErrTooLarge", err)
			}
		})
	}
}

func TestOpenUnknown(t *testing.T) {
	_, err := bus.Open(context.Background(), "redis://u:secret@h:1")
	if err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "u:xxxxx@h:1") {
		t.Fatalf("Open(redis://…) = %v", err)
	}
}

// waitBusReady polls x.Ready for up to 10 s.
func waitBusReady(t testing.TB, x bus.Bus) {
	t.Helper()
	var err error
	if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}).True(func() bool {
		err = x.Ready(context.Background())
		return err == nil
	}) {
		t.Fatalf("not ready: %v", err)
	}
}
