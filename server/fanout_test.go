package server

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"
	"github.com/zishang520/socket.io/servers/socket/v3"

	"github.com/happy-dev/happy/relay/wire"
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

// A poster waits while its account has f.queue items waiting, and
// goes on once the worker takes a round; another account's poster never
// waits; a cancelled context ends the wait.
func TestFanoutWaitRoom(t *testing.T) {
	for _, size := range []int{fanoutQueue, 16} { // the default, Config.FanoutQueue
		t.Run(fmt.Sprint("queue=", size), func(t *testing.T) { testFanoutWaitRoom(t, size) })
	}
}

func testFanoutWaitRoom(t *testing.T, size int) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{release: make(chan struct{})}
		f := newFanout(nil)
		f.queue = size
		f.write = rec.write
		f.emit("a", "update", "first", nil)
		synctest.Wait()
		for i := range size - 1 {
			f.emit("a", "update", fmt.Sprint(i), nil)
		}
		// One short of the bound, nobody waits.
		f.waitRoom(t.Context(), "a")
		f.emit("a", "update", fmt.Sprint(size-1), nil)
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
		if total != size+1 {
			t.Fatalf("%d items written, want %d", total, size+1)
		}
	})
}

// While another account has a message append in flight, a worker rests
// after each round of d for d×(1−share)/share (the default share: 9 d);
// alone it does not.
func TestFanoutRestsWhileOthersPost(t *testing.T) {
	for _, others := range []bool{false, true} {
		t.Run(fmt.Sprint("others=", others), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, startsp := timedFanout()
				if others {
					f.working("b")
				}
				for i := range fanoutRound + 1 { // two rounds
					f.emit("a", "update", fmt.Sprint(i), nil)
				}
				f.flush(time.Minute)
				gap := 10 * time.Millisecond
				if others {
					gap = 100 * time.Millisecond
				}
				starts := *startsp
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

// An account counts as posting for activeWindow after its last append
// ended: a worker whose round ends within that window of another
// account's append rests (and would not spread its next round) although
// no append is in flight at that moment; one whose round ends later does
// not.
func TestFanoutRestsWithinActiveWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		// postAt is when B's append (1 ms) begins after A's first round
		// began; the round takes 10 ms.
		postAt time.Duration
		gap    time.Duration // between A's two rounds
	}{
		{name: "ended 2ms before the round", postAt: 7 * time.Millisecond, gap: 100 * time.Millisecond},
		{name: "ended 4ms before the round", postAt: 5 * time.Millisecond, gap: 100 * time.Millisecond},
		{name: "ended 6ms before the round", postAt: 3 * time.Millisecond, gap: 10 * time.Millisecond},
		{name: "B's own earlier post only", postAt: -1, gap: 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, startsp := timedFanout()
				if tc.postAt < 0 {
					f.working("a")
					f.worked("a")
				} else {
					go func() {
						time.Sleep(tc.postAt)
						f.working("b")
						time.Sleep(time.Millisecond)
						f.worked("b")
					}()
				}
				for i := range fanoutRound + 1 { // two rounds
					f.emit("a", "update", fmt.Sprint(i), nil)
				}
				f.flush(time.Minute)
				synctest.Wait()
				starts := *startsp
				if len(starts) != 2 || starts[1]-starts[0] != tc.gap {
					t.Fatalf("rounds began at %v, want %v apart", starts, tc.gap)
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
		// Only the flood's: the session's creation (its update) and the
		// socket's connect may reach a round after the hook was set.
		for _, it := range round {
			if _, ok := it.payload.(wire.TextDelta); ok {
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

// An account flooding its sockets cannot starve another account's posts:
// with one core (a semaphore both take), account A's rounds of 10 ms
// queued back to back, and account B's 100 posts of 1 ms of that core
// each, B's posts take 100 ms alone and, under A's flood, 100 ms plus the
// rounds A may write meanwhile at its share of the time (±10 ms, one
// round, where a tie of A's rest and B's post goes either way): A's worker rests
// 10 ms × (1−share)/share after each round while B posts. Once B is done
// A's rounds follow each other at once again, in queue order.
func TestFanoutFloodCannotStarveOthers(t *testing.T) {
	for _, tc := range []struct {
		share float64
		// bTook is how long B's 100 posts take under A's flood; aRounds
		// how many rounds A wrote meanwhile.
		bTook   time.Duration
		aRounds int
	}{
		// Never resting, A takes the core for 10 ms between any two of
		// B's posts (the first round began before B's first post).
		{share: 1, bTook: 1099 * time.Millisecond, aRounds: 100},
		{share: 0.5, bTook: 199 * time.Millisecond, aRounds: 9},
		{share: 0.25, bTook: 139 * time.Millisecond, aRounds: 3},
		{share: 0.1, bTook: 119 * time.Millisecond, aRounds: 1},
	} {
		t.Run(fmt.Sprint("share=", tc.share), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				core := make(chan struct{}, 1)
				use := func(d time.Duration) {
					core <- struct{}{}
					time.Sleep(d)
					<-core
				}
				f := newFanout(nil)
				f.share = tc.share
				var mu sync.Mutex
				var got []string
				var roundsAt []time.Duration
				t0 := time.Now()
				f.write = func(round []outItem) {
					mu.Lock()
					roundsAt = append(roundsAt, time.Since(t0))
					for _, it := range round {
						got = append(got, it.payload.(string))
					}
					mu.Unlock()
					use(10 * time.Millisecond)
				}
				// A floods: one item at a time, as fast as its queue takes
				// them, until stopped.
				stop := make(chan struct{})
				flooded := make(chan int)
				go func() {
					n := 0
					for {
						select {
						case <-stop:
							flooded <- n
							return
						default:
						}
						f.emit("a", "update", fmt.Sprint(n), nil)
						n++
						f.waitRoom(t.Context(), "a")
					}
				}()
				time.Sleep(time.Millisecond) // A's first round is under way
				bStart := time.Now()
				for range 100 {
					f.working("b")
					use(time.Millisecond)
					f.worked("b")
				}
				bTook := time.Since(bStart)
				mu.Lock()
				during := 0
				for _, at := range roundsAt {
					if at >= bStart.Sub(t0) && at < bStart.Sub(t0)+bTook {
						during++
					}
				}
				mu.Unlock()
				// When A's rest ends as B's post does, either may take the
				// core first: one round of A more or less.
				if d := bTook - tc.bTook; d < -10*time.Millisecond || d > 10*time.Millisecond || during < tc.aRounds-1 || during > tc.aRounds+1 {
					t.Errorf("B's 100 posts took %v with %d rounds of A meanwhile, want %v and %d (± one round)", bTook, during, tc.bTook, tc.aRounds)
				}
				// Alone again (after a rest of at most 90 ms), A's rounds
				// follow each other at once.
				time.Sleep(200 * time.Millisecond)
				close(stop)
				n := <-flooded
				f.flush(time.Minute)
				mu.Lock()
				defer mu.Unlock()
				if len(got) != n {
					t.Fatalf("%d of A's %d items written", len(got), n)
				}
				for i, p := range got {
					if p != fmt.Sprint(i) {
						t.Fatalf("item %d is %q: out of order", i, p)
					}
				}
				last := roundsAt[len(roundsAt)-3:]
				if last[1]-last[0] != 10*time.Millisecond || last[2]-last[1] != 10*time.Millisecond {
					t.Errorf("A's last rounds began at %v, want 10 ms apart", last)
				}
			})
		})
	}
}

// A socket in several of an item's rooms gets the item once, and the
// sockets of the item's other rooms get it too.
func TestFanoutSocketInTwoRoomsGetsItOnce(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "two rooms")
	both := dialRaw(t, base, token, sid, 0)
	var acct string
	srv.io.Sockets().Sockets().Range(func(_ socket.SocketId, sk *socket.Socket) bool {
		acct = connOf(sk).acct
		sk.Join(roomUserScoped(acct)) // now in its session's room and the account's
		return true
	})
	other := dialRaw(t, base, token, sid, 0)
	srv.out.emit(acct, "ephemeral", "to both rooms", []socket.Room{roomSession(acct, sid), roomUserScoped(acct)})
	srv.out.emit(acct, "ephemeral", "then", []socket.Room{roomSession(acct, sid)})
	for name, r := range map[string]*rawSocket{"in both rooms": both, "in one": other} {
		var got []string
		for len(got) == 0 || got[len(got)-1] != `42["ephemeral","then"]` {
			got = append(got, r.next())
		}
		want := []string{`42["ephemeral","to both rooms"]`, `42["ephemeral","then"]`}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("socket %s got %q, want %q", name, got, want)
		}
	}
}

// restAfter rests (1-share)/share of the round; a share so small that the
// rest overflows a Duration rests the longest Duration instead of
// wrapping to a negative one (which rested not at all: the opposite of
// what the share asks).
func TestRestAfter(t *testing.T) {
	for _, tc := range []struct {
		d     time.Duration
		share float64
		want  time.Duration
	}{
		{time.Millisecond, 1, 0},
		{time.Millisecond, 0.25, 3 * time.Millisecond},
		{time.Millisecond, 0.5, time.Millisecond},
		{0, 1e-300, 0},
		{time.Millisecond, 1e-300, time.Duration(math.MaxInt64)},
		{time.Second, 1e-12, time.Duration(math.MaxInt64)},
	} {
		if got := restAfter(tc.d, tc.share); got != tc.want {
			t.Errorf("restAfter(%v, %g) = %v, want %v", tc.d, tc.share, got, tc.want)
		}
	}
}

// timedFanout is a fanout whose rounds each take 10 ms of (synctest)
// time, and the start of every round since the call, read after the
// rounds ran.
func timedFanout() (*fanout, *[]time.Duration) {
	var starts []time.Duration
	t0 := time.Now()
	f := newFanout(nil)
	f.write = func(round []outItem) {
		starts = append(starts, time.Since(t0))
		time.Sleep(10 * time.Millisecond) // the round's writes
	}
	return f, &starts
}
