package server

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"
	"github.com/zishang520/socket.io/servers/socket/v3"
)

// recorder is a fanout round writer that records rounds and, while hold
// is set, blocks each round until release is sent to.
type recorder struct {
	mu      sync.Mutex
	rounds  [][]string
	release chan struct{}
}

func (r *recorder) write(round []outItem) {
	got := make([]string, len(round))
	for i, it := range round {
		got[i] = it.payload.(string)
	}
	r.mu.Lock()
	r.rounds = append(r.rounds, got)
	r.mu.Unlock()
	if r.release != nil {
		<-r.release
	}
}

// What is queued while a round is being written goes out in queue order,
// in rounds of at most fanoutRound; an account whose queue empties leaves
// nothing behind.
func TestFanoutKeepsOrderInRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{release: make(chan struct{})}
		f := newFanout(nil)
		f.write = rec.write
		f.emit("a", "update", "0", nil) // the worker takes it and holds
		synctest.Wait()
		const n = 150
		for i := 1; i <= n; i++ {
			f.emit("a", "update", fmt.Sprint(i), nil)
		}
		go func() {
			for range 4 {
				rec.release <- struct{}{}
			}
		}()
		f.flush(time.Minute)
		want := [][]int{{0}, {1, 64}, {65, 128}, {129, 150}}
		if len(rec.rounds) != len(want) {
			t.Fatalf("rounds %v", rec.rounds)
		}
		for i, r := range rec.rounds {
			if len(r) != want[i][len(want[i])-1]-want[i][0]+1 || r[0] != fmt.Sprint(want[i][0]) || r[len(r)-1] != fmt.Sprint(want[i][len(want[i])-1]) {
				t.Fatalf("round %d: %v, want %d…%d", i, r, want[i][0], want[i][len(want[i])-1])
			}
			for k := 1; k < len(r); k++ {
				if r[k] != fmt.Sprint(want[i][0]+k) {
					t.Fatalf("round %d out of order: %v", i, r)
				}
			}
		}
		if len(f.accts) != 0 || f.busy != 0 {
			t.Fatalf("after flush: %d accounts, %d workers", len(f.accts), f.busy)
		}
	})
}

// A poster waits while its account has fanoutQueue items waiting, and
// goes on once the worker takes a round; another account's poster never
// waits; a cancelled context ends the wait.
func TestFanoutWaitRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{release: make(chan struct{})}
		f := newFanout(nil)
		f.write = rec.write
		f.emit("a", "update", "first", nil)
		synctest.Wait()
		for i := range fanoutQueue {
			f.emit("a", "update", fmt.Sprint(i), nil)
		}
		var mu sync.Mutex
		done := map[string]bool{}
		wait := func(ctx context.Context, name, acct string) {
			f.waitRoom(ctx, acct)
			mu.Lock()
			done[name] = true
			mu.Unlock()
		}
		ctx, cancel := context.WithCancel(t.Context())
		go wait(t.Context(), "a", "a")
		go wait(ctx, "a-cancelled", "a")
		go wait(t.Context(), "b", "b")
		synctest.Wait()
		mu.Lock()
		if done["a"] || done["a-cancelled"] || !done["b"] {
			t.Fatalf("with a full queue: %v", done)
		}
		mu.Unlock()
		cancel()
		synctest.Wait()
		mu.Lock()
		if done["a"] || !done["a-cancelled"] {
			t.Fatalf("after cancel: %v", done)
		}
		mu.Unlock()
		rec.release <- struct{}{} // the worker takes the next round
		synctest.Wait()
		mu.Lock()
		if !done["a"] {
			t.Fatalf("after a round was taken: %v", done)
		}
		mu.Unlock()
		go func() {
			for {
				select {
				case rec.release <- struct{}{}:
				case <-t.Context().Done():
					return
				}
			}
		}()
		f.flush(time.Minute)
		total := 0
		for _, r := range rec.rounds {
			total += len(r)
		}
		if total != fanoutQueue+1 {
			t.Fatalf("%d items written, want %d", total, fanoutQueue+1)
		}
	})
}

// While another account has a message append in flight, a worker rests
// after each round as long as the round took; alone it does not.
func TestFanoutRestsWhileOthersPost(t *testing.T) {
	for _, others := range []bool{false, true} {
		t.Run(fmt.Sprint("others=", others), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var starts []time.Duration
				t0 := time.Now()
				f := newFanout(nil)
				f.write = func(round []outItem) {
					starts = append(starts, time.Since(t0))
					time.Sleep(10 * time.Millisecond) // the round's writes
				}
				if others {
					f.working("b")
				}
				for i := range fanoutRound + 1 { // two rounds
					f.emit("a", "update", fmt.Sprint(i), nil)
				}
				f.flush(time.Minute)
				gap := 10 * time.Millisecond
				if others {
					gap = 20 * time.Millisecond
				}
				if len(starts) != 2 || starts[1]-starts[0] != gap {
					t.Fatalf("rounds began at %v, want %v apart", starts, gap)
				}
				if others {
					f.worked("b")
				}
				if len(f.posting) != 0 || f.postingAll != 0 {
					t.Fatalf("posting left: %v %d", f.posting, f.postingAll)
				}
			})
		})
	}
}

// A socket sending ephemerals faster than its account's fan-out writes
// them is held at the pace of the writes: the account's queue stops at
// fanoutQueue (plus the one item of the handler that waits for room), the
// socket's reader stops once maxEventsInFlight of its messages wait, and
// everything sent arrives once the writes go on.
func TestFloodingSocketIsHeldByItsFanout(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "flood")
	release := make(chan struct{})
	var written atomic.Int64
	srv.out.mu.Lock()
	srv.out.write = func(round []outItem) {
		<-release
		// Only the flood's text-deltas: the socket's connect also emits
		// for the account (its presence), which a loaded machine may see
		// in any round.
		for _, it := range round {
			if d, ok := it.payload.(ephTextDelta); ok && d.Type == "text-delta" {
				written.Add(1)
			}
		}
	}
	srv.out.mu.Unlock()
	flooder := dialRaw(t, base, token, sid, 0)
	const n = fanoutQueue + maxEventsInFlight + 200
	go func() {
		for i := range n {
			ev := fmt.Sprintf(`42["text-delta",{"sid":%q,"message":"delta %d"}]`, sid, i)
			if err := flooder.c.WriteMessage(ws.TextMessage, []byte(ev)); err != nil {
				return
			}
		}
	}()
	var c *conn
	deadline := time.Now().Add(20 * time.Second)
	for {
		if c == nil {
			srv.io.Sockets().Sockets().Range(func(_ socket.SocketId, sk *socket.Socket) bool {
				c = connOf(sk)
				return false
			})
		}
		if c != nil && len(c.events) == maxEventsInFlight {
			// The reader is stuck: on the account's full queue, or (on a
			// loaded machine) for a moment on the socket's task queue.
			srv.out.mu.Lock()
			q := srv.out.accts[c.acct]
			full := q != nil && len(q.items) >= fanoutQueue
			srv.out.mu.Unlock()
			if full {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the flooding socket's reader never stopped")
		}
		runtime.Gosched()
	}
	srv.out.mu.Lock()
	queued := len(srv.out.accts[c.acct].items)
	srv.out.mu.Unlock()
	if queued > fanoutQueue+1 {
		t.Fatalf("%d items queued for the account, want at most %d", queued, fanoutQueue+1)
	}
	close(release)
	for written.Load() < n && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if got := written.Load(); got != n {
		t.Fatalf("%d of %d ephemerals written", got, n)
	}
}
