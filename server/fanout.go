package server

import (
	"context"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zishang520/socket.io/parsers/engine/v3/packet"
	"github.com/zishang520/socket.io/parsers/socket/v3/parser"
	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"

	"github.com/happy-dev/happy/server/wstransport"
)

// Fan-out (docs/ARCHITECTURE.md "Fan-out"): every `update` and
// `ephemeral` the relay sends to an account's sockets goes through that
// account's queue, in the order it was queued, and is written by the
// account's own worker goroutine (started when something is queued, gone
// when the queue is empty). So
//   - a request that stores a message returns once its updates are queued,
//     not once they are written to every socket;
//   - the worker writes what queued up meanwhile together: each socket
//     gets all the frames of a round in one writev system call instead of
//     one write per frame (with 1,000 sockets of an account and messages
//     arriving faster than one round, that is most of the cost);
//   - one account's fan-out runs on one goroutine at a time, so it cannot
//     take every core from the other accounts; while another account has
//     messages being stored, a worker neither spreads a round over the
//     cores nor runs more than its share (Config.FanoutShare) of the
//     time: after a round of d it rests d×(1−share)/share; and a poster
//     whose account has Config.FanoutQueue (4) items waiting is held until its
//     worker takes them (waitRoom): the account making the load is the
//     one slowed by it, and a small queue keeps a message's wait behind
//     earlier ones short.
const (
	// fanoutRound is the most queued items one round writes together
	// (it bounds the iovecs of one writev to fanoutRound).
	fanoutRound = 64
	// fanoutQueue is how many items may wait for an account's worker
	// before a new message's request waits for room, unless
	// Config.FanoutQueue says otherwise. A message waits
	// behind at most that many others (and the round being written): 512
	// made a p99 of 40 ms when a hiccup let the queue fill.
	fanoutQueue = DefaultFanoutQueue
)

// outItem is one queued emit: event name ("update", "ephemeral"), its
// single argument (JSON-encoded by the Socket.IO encoder) and the rooms
// whose sockets get it (each socket once).
type outItem struct {
	event   string
	payload any
	rooms   []socket.Room
	// seq orders the item among all emits and socket joins (fanout.tick):
	// a socket that joined after the item was emitted does not get it, as
	// with an emit written at once.
	seq int64
}

// fanout holds the accounts' queues.
type fanout struct {
	s *Server

	mu    sync.Mutex
	accts map[string]*acctOut
	idle  *sync.Cond // signalled when a worker ends (flush)
	busy  int        // running workers
	// posting counts, per account and in all, the message appends in
	// flight (working/worked).
	posting    map[string]int
	postingAll int
	// recent holds the two accounts whose appends were last in flight
	// (recent[0] the latest, recent[1] the latest other than it) and
	// when: othersActive asks whether an account other than one worker's
	// posted within activeWindow.
	recent [2]recentPost
	// now and sleep are the clock (tests use a synctest bubble's).
	now   func() time.Time
	sleep func(time.Duration)
	// share is the part of the time (0 < share <= 1) an account's worker
	// may write while other accounts post (Config.FanoutShare).
	share float64
	// queue is how many items may wait before a poster waits for room
	// (Config.FanoutQueue).
	queue int

	// tick numbers emits and socket joins (outItem.seq, conn.joined).
	tick atomic.Int64

	// write, when set, replaces the round writer (tests; set under mu).
	write func(round []outItem)
}

// recentPost is an account whose message append was in flight at at.
type recentPost struct {
	acct string
	at   time.Time
}

// activeWindow is how long after its last append an account still counts
// as posting for another account's fan-out (whether that worker rests and
// spreads its rounds). A client posting one batch after another leaves the
// relay idle for its round trip between them; without the window a round
// that started in such a gap took every core and ran without resting, and
// the next post waited for it. A few milliseconds cover the clients that
// can load a relay with back-to-back posts; one farther away posts so
// seldom that a round in its gaps costs it nothing noticeable.
const activeWindow = 5 * time.Millisecond

// acctOut is one account's queue.
type acctOut struct {
	items   []outItem
	running bool
	// room, when not nil, is closed when the worker next takes items
	// (waitRoom's wake-up).
	room chan struct{}
}

func newFanout(s *Server) *fanout {
	f := &fanout{s: s, accts: map[string]*acctOut{}, posting: map[string]int{}, now: time.Now, sleep: time.Sleep, share: DefaultFanoutShare, queue: fanoutQueue}
	if s != nil && s.cfg.FanoutQueue > 0 {
		f.queue = s.cfg.FanoutQueue
	}
	if s != nil && s.cfg.FanoutShare > 0 {
		f.share = min(s.cfg.FanoutShare, 1)
	}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// emit queues one item for acct's sockets and starts the account's worker
// when none runs.
func (f *fanout) emit(acct, event string, payload any, rooms []socket.Room) {
	f.mu.Lock()
	q := f.accts[acct]
	if q == nil {
		q = &acctOut{}
		f.accts[acct] = q
	}
	q.items = append(q.items, outItem{event: event, payload: payload, rooms: rooms, seq: f.tick.Add(1)})
	if !q.running {
		q.running = true
		f.busy++
		go f.run(acct, q)
	}
	f.mu.Unlock()
}

// working notes that one of acct's message appends is in flight; worked
// that it ended.
func (f *fanout) working(acct string) {
	now := f.now()
	f.mu.Lock()
	f.posting[acct]++
	f.postingAll++
	f.noteRecent(acct, now)
	f.mu.Unlock()
}

func (f *fanout) worked(acct string) {
	now := f.now()
	f.mu.Lock()
	if f.posting[acct]--; f.posting[acct] <= 0 {
		delete(f.posting, acct)
	}
	f.postingAll--
	f.noteRecent(acct, now)
	f.mu.Unlock()
}

// noteRecent records that acct's append was in flight at now (f.mu held).
func (f *fanout) noteRecent(acct string, now time.Time) {
	if f.recent[0].acct != acct {
		f.recent[1] = f.recent[0]
	}
	f.recent[0] = recentPost{acct: acct, at: now}
}

// othersActive reports whether an account other than acct has a message
// append in flight, or had one less than activeWindow before now (f.mu
// held). recent[1] is the latest account other than recent[0], so the
// latest append of any account but acct is one of the two.
func (f *fanout) othersActive(acct string, now time.Time) bool {
	if f.postingAll-f.posting[acct] > 0 {
		return true
	}
	for _, r := range f.recent {
		if r.acct != "" && r.acct != acct && now.Sub(r.at) < activeWindow {
			return true
		}
	}
	return false
}

// othersPosting is othersActive at the fan-out's clock's now.
func (f *fanout) othersPosting(acct string) bool {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.othersActive(acct, now)
}

// waitRoom returns once acct has fewer than f.queue items waiting, or
// when ctx ends.
func (f *fanout) waitRoom(ctx context.Context, acct string) {
	for {
		f.mu.Lock()
		q := f.accts[acct]
		if q == nil || len(q.items) < f.queue {
			f.mu.Unlock()
			return
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		ch := q.room
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// flush waits, at most d, until no worker runs (every queued item has
// been handed to its sockets' transports), and reports whether that was
// so. Sockets that keep sending events keep workers busy: the bound lets
// a shutdown go on regardless.
func (f *fanout) flush(d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		f.mu.Lock()
		for f.busy > 0 {
			f.idle.Wait()
		}
		f.mu.Unlock()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// run is acct's worker: rounds of up to fanoutRound items until the
// queue is empty.
func (f *fanout) run(acct string, q *acctOut) {
	var round []outItem
	w := roundWriters.Get().(*roundWriter)
	defer roundWriters.Put(w)
	for {
		began := f.now()
		f.mu.Lock()
		if len(q.items) == 0 {
			q.running = false
			if f.accts[acct] == q {
				delete(f.accts, acct)
			}
			if q.room != nil {
				close(q.room)
			}
			f.busy--
			f.idle.Broadcast()
			f.mu.Unlock()
			return
		}
		n := min(len(q.items), fanoutRound)
		round = append(round[:0], q.items[:n]...)
		rest := copy(q.items, q.items[n:])
		clear(q.items[rest:])
		q.items = q.items[:rest]
		if q.room != nil {
			close(q.room)
			q.room = nil
		}
		// Nothing else waiting, in the account or in others: latency
		// matters more than the cores this round takes.
		spread := len(q.items) == 0 && !f.othersActive(acct, began)
		hook := f.write
		f.mu.Unlock()

		if hook != nil {
			hook(round)
		} else {
			w.write(f.s, round, spread)
		}
		clear(round)
		if f.share < 1 && f.othersPosting(acct) {
			f.sleep(restAfter(f.now().Sub(began), f.share))
		}
	}
}

// restAfter is how long a worker rests after a round of d so that its
// rounds take share of the time. A tiny share (--fanout-share accepts
// anything above 0) makes a rest past what a Duration holds: it is the
// longest Duration, not the wrapped (negative, so no rest at all) value
// the conversion would give.
func restAfter(d time.Duration, share float64) time.Duration {
	r := float64(d) * (1 - share) / share
	if r >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(r)
}

// roundWriter writes one round: each item's Socket.IO packet encoded once,
// then, per websocket transport, all the round's frames meant for it in
// one SendFrames. Its buffers are reused from round to round, and from
// worker to worker (roundWriters): a worker often lives for one round
// only, and rebuilding the index and slices for every round was a good
// part of the fan-out's garbage.
type roundWriter struct {
	index  map[*wstransport.Transport]int // transport -> entry
	socks  []*wstransport.Transport       // entries
	counts []int                          // frames per entry
	last   []int                          // per entry, 1 + the round item it last got
	seen   map[*socket.Socket]struct{}    // an item's sockets on other transports
	pairs  []roundPair                    // (entry, frame) in queue order
	frames [][]byte                       // the round's websocket frames
	flat   [][]byte                       // pairs grouped by entry
	start  []int                          // per entry, its first index in flat
	next   []int                          // per entry, its next index in flat
}

// roundWriters holds idle roundWriters.
var roundWriters = sync.Pool{New: func() any {
	return &roundWriter{index: map[*wstransport.Transport]int{}, seen: map[*socket.Socket]struct{}{}}
}}

type roundPair struct{ entry, frame int }

// write writes one round. With spread, a round for many sockets is
// written by up to GOMAXPROCS goroutines, each taking its own sockets (a
// socket's frames stay with one goroutine, and rounds do not overlap, so
// every socket still gets its frames in order).
func (w *roundWriter) write(s *Server, round []outItem, spread bool) {
	a, ok := s.io.Sockets().Adapter().(*roomAdapter)
	if !ok {
		for _, it := range round {
			if err := s.io.To(it.rooms...).Emit(it.event, it.payload); err != nil {
				s.log.Error().Err(err).Str("event", it.event).Msg("emit")
			}
		}
		return
	}
	for i, it := range round {
		pkt := &parser.Packet{Type: parser.EVENT, Nsp: a.Nsp().Name(), Data: []any{it.event, it.payload}}
		encoded := a.Nsp().Server().Encoder().Encode(pkt)
		text, ok := encoded[0].(*types.StringBuffer)
		if len(encoded) != 1 || !ok {
			// Binary attachments: the library's own broadcast.
			a.Adapter.Broadcast(pkt, &socket.BroadcastOptions{Rooms: types.NewSet(it.rooms...)})
			continue
		}
		fi := -1
		multi := len(it.rooms) > 1
		a.each(it.rooms, func(sk *socket.Socket) {
			if c := connOf(sk); c != nil && c.joined > it.seq {
				return // joined after the emit
			}
			c := sk.Conn()
			t, ok := c.Transport().(*wstransport.Transport)
			if !ok {
				if multi {
					if _, dup := w.seen[sk]; dup {
						return // in two of the item's rooms: once is enough
					}
					w.seen[sk] = struct{}{}
				}
				if notify := sk.NotifyOutgoingListeners(); notify != nil {
					notify(pkt)
				}
				c.Write(strings.NewReader(text.String()), &packet.Options{}, nil)
				return
			}
			e, seen := w.index[t]
			if seen && w.last[e] == i+1 {
				return // in two of the item's rooms: once is enough
			}
			if notify := sk.NotifyOutgoingListeners(); notify != nil {
				notify(pkt)
			}
			if fi < 0 {
				w.frames = append(w.frames, wstransport.TextFrame(text.Bytes()))
				fi = len(w.frames) - 1
			}
			if !seen {
				e = len(w.socks)
				w.index[t] = e
				w.socks = append(w.socks, t)
				w.counts = append(w.counts, 0)
				w.last = append(w.last, 0)
			}
			w.last[e] = i + 1
			w.counts[e]++
			w.pairs = append(w.pairs, roundPair{entry: e, frame: fi})
		})
		clear(w.seen)
	}
	if len(w.socks) > 0 {
		parts := 1
		if spread {
			parts = max(1, min(runtime.GOMAXPROCS(0), len(w.socks)/spreadMin))
		}
		w.flush(parts)
	}
}

// spreadMin is the fewest sockets a goroutine of a spread round writes to.
const spreadMin = 32

// flush groups the round's pairs by transport and sends each its frames,
// from parts goroutines (this one among them).
func (w *roundWriter) flush(parts int) {
	if cap(w.flat) < len(w.pairs) {
		w.flat = make([][]byte, len(w.pairs))
	}
	w.flat = w.flat[:len(w.pairs)]
	// counts become each entry's end offset, then (while filling) its
	// start moves up to it.
	start := append(w.start[:0], w.counts...)
	off := 0
	for e, n := range w.counts {
		start[e] = off
		off += n
	}
	next := append(w.next[:0], start...)
	w.start, w.next = start, next
	for _, p := range w.pairs {
		w.flat[next[p.entry]] = w.frames[p.frame]
		next[p.entry]++
	}
	send := func(from, to int) {
		for e := from; e < to; e++ {
			w.socks[e].SendFrames(w.flat[start[e]:next[e]])
		}
	}
	if parts <= 1 {
		send(0, len(w.socks))
	} else {
		var wg sync.WaitGroup
		per := (len(w.socks) + parts - 1) / parts
		for from := per; from < len(w.socks); from += per {
			wg.Go(func() { send(from, min(from+per, len(w.socks))) })
		}
		send(0, min(per, len(w.socks)))
		wg.Wait()
	}
	clear(w.index)
	clear(w.socks)
	clear(w.frames)
	clear(w.flat)
	w.socks, w.counts, w.last, w.pairs, w.frames = w.socks[:0], w.counts[:0], w.last[:0], w.pairs[:0], w.frames[:0]
}
