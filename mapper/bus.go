package mapper

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// ErrBusClosed is returned by Subscription.Next once the subscription is
// closed (by Subscription.Close, or by Bus.Close after every queued event
// was delivered), and by Bus.Publish after Bus.Close.
var ErrBusClosed = errors.New("bus closed")

// DefaultDeltaBacklog is the queue length at which a subscription starts
// dropping deltas when BusOptions.DeltaBacklog is 0.
const DefaultDeltaBacklog = 256

// BusOptions configures a Bus.
type BusOptions struct {
	// DeltaBacklog is how many undelivered events a subscription may hold
	// before a new delta that cannot be coalesced is dropped; 0 means
	// DefaultDeltaBacklog. State events are queued whatever the backlog.
	DeltaBacklog int
}

// Bus is a small publish/subscribe hub for the reducer's bus events.
//
// Delivery rules (the same distinction crush's broker makes):
//
//   - a state event (every event whose MayDrop is false) reaches every
//     subscription, in publish order, never dropped: each subscription
//     queues without bound, so a slow reader costs memory, never an event;
//   - a delta (MayDrop true) is appended to a subscriber's queued delta of
//     the same part and field when that is the last queued event
//     (coalesced: nothing lost), otherwise queued while fewer than
//     DeltaBacklog events wait, otherwise dropped and counted. Once a
//     delta of a part was dropped, the part's later deltas are dropped too
//     until its next message.part.updated, so a subscriber never appends a
//     delta after a gap; that state event carries the whole part again.
//
// Publish never blocks. A Bus starts no goroutine: subscribers pull with
// Subscription.Next. All methods are safe for concurrent use.
type Bus struct {
	mu      sync.Mutex
	subs    map[*Subscription]struct{}
	closed  bool
	backlog int
}

// NewBus returns an open Bus.
func NewBus(opts BusOptions) *Bus {
	if opts.DeltaBacklog <= 0 {
		opts.DeltaBacklog = DefaultDeltaBacklog
	}
	return &Bus{subs: map[*Subscription]struct{}{}, backlog: opts.DeltaBacklog}
}

// Subscribe returns a new subscription that receives every event published
// from now on. On a closed bus the subscription is closed at once.
func (b *Bus) Subscribe() *Subscription {
	s := &Subscription{bus: b, notify: make(chan struct{}, 1), backlog: b.backlog, stale: map[string]struct{}{}}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		s.closed = true
		return s
	}
	b.subs[s] = struct{}{}
	return s
}

// Publish hands events to every subscription, in order. It returns
// ErrBusClosed (and delivers nothing) after Close. Nil events are skipped.
func (b *Bus) Publish(evs ...BusEvent) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrBusClosed
	}
	for s := range b.subs {
		s.push(evs)
	}
	return nil
}

// Close closes the bus: Publish fails from now on, and each subscription
// delivers what it has queued, then returns ErrBusClosed. Close is
// idempotent.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for s := range b.subs {
		s.mu.Lock()
		s.ending = true
		s.mu.Unlock()
		s.wake()
	}
	b.subs = nil
}

// SubscriptionStats counts what happened to a subscription's events.
type SubscriptionStats struct {
	Delivered uint64 // events returned by Next
	Coalesced uint64 // deltas merged into the queued delta before them
	Dropped   uint64 // deltas dropped under backpressure
	Queued    int    // events waiting now
}

// Subscription is one subscriber's queue. Read it with Next from one
// goroutine; Stats and Close may be called from any.
type Subscription struct {
	bus     *Bus
	notify  chan struct{} // capacity 1: "the queue changed"
	backlog int

	mu     sync.Mutex
	queue  []BusEvent
	head   int
	ending bool // the bus closed: drain, then ErrBusClosed
	closed bool // closed: ErrBusClosed now
	// tailOwned is set when the last queued event is a delta this
	// subscription made by coalescing, so it may be extended in place;
	// tailBuf holds its text (appending to a Builder is amortised O(1),
	// and strings it returned earlier stay valid).
	tailOwned bool
	tailBuf   *strings.Builder
	stale     map[string]struct{} // parts whose deltas are dropped until their next part.updated
	stats     SubscriptionStats
}

func (s *Subscription) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// push queues events under the delivery rules; it is called with the bus
// lock held, so pushes are ordered.
func (s *Subscription) push(evs []BusEvent) {
	s.mu.Lock()
	for _, ev := range evs {
		if isNilBusEvent(ev) {
			continue
		}
		if !ev.MayDrop() {
			if pu, ok := ev.(*MessagePartUpdated); ok && pu.Part != nil {
				delete(s.stale, pu.Part.Base().ID)
			}
			s.queue = append(s.queue, ev)
			s.tailOwned = false
			continue
		}
		d, isDelta := ev.(*MessagePartDelta)
		if isDelta {
			if _, gap := s.stale[d.PartID]; gap {
				s.stats.Dropped++
				continue
			}
			if n := len(s.queue); n > s.head {
				if last, ok := s.queue[n-1].(*MessagePartDelta); ok && last.PartID == d.PartID &&
					last.Field == d.Field && last.MessageID == d.MessageID && last.SessionID == d.SessionID {
					if !s.tailOwned {
						// The queued delta is shared with other subscribers.
						c := *last
						last = &c
						s.queue[n-1] = last
						s.tailOwned = true
						s.tailBuf = &strings.Builder{}
						s.tailBuf.WriteString(c.Delta)
					}
					s.tailBuf.WriteString(d.Delta)
					last.Delta = s.tailBuf.String()
					s.stats.Coalesced++
					continue
				}
			}
		}
		if len(s.queue)-s.head >= s.backlog {
			s.stats.Dropped++
			if isDelta {
				s.stale[d.PartID] = struct{}{}
			}
			continue
		}
		s.queue = append(s.queue, ev)
		s.tailOwned = false
	}
	s.mu.Unlock()
	s.wake()
}

func isNilBusEvent(ev BusEvent) bool {
	if ev == nil {
		return true
	}
	switch e := ev.(type) {
	case *SessionCreated:
		return e == nil
	case *SessionUpdated:
		return e == nil
	case *SessionStatus:
		return e == nil
	case *SessionError:
		return e == nil
	case *SessionCompacted:
		return e == nil
	case *MessageUpdated:
		return e == nil
	case *MessageRemoved:
		return e == nil
	case *MessagePartUpdated:
		return e == nil
	case *MessagePartDelta:
		return e == nil
	case *MessagePartRemoved:
		return e == nil
	case *TodoUpdated:
		return e == nil
	case *FileEdited:
		return e == nil
	}
	return false
}

// pop returns the next queued event.
func (s *Subscription) pop() (BusEvent, bool) {
	if s.head >= len(s.queue) {
		return nil, false
	}
	ev := s.queue[s.head]
	s.queue[s.head] = nil
	s.head++
	if s.head == len(s.queue) {
		s.queue, s.head, s.tailOwned = s.queue[:0], 0, false
	} else if s.head > 64 && s.head*2 > len(s.queue) {
		n := copy(s.queue, s.queue[s.head:])
		clear(s.queue[n:])
		s.queue, s.head = s.queue[:n], 0
	}
	s.stats.Delivered++
	return ev, true
}

// TryNext returns the next queued event without waiting; false when none
// is queued (or the subscription is closed).
func (s *Subscription) TryNext() (BusEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	return s.pop()
}

// Next returns the next event, waiting until one is published. It returns
// ctx.Err() when ctx ends first, and ErrBusClosed when the subscription was
// closed or the bus was closed and everything queued was delivered.
func (s *Subscription) Next(ctx context.Context) (BusEvent, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, ErrBusClosed
		}
		if ev, ok := s.pop(); ok {
			s.mu.Unlock()
			return ev, nil
		}
		if s.ending {
			s.closed = true
			s.mu.Unlock()
			return nil, ErrBusClosed
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Stats returns the subscription's counters.
func (s *Subscription) Stats() SubscriptionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Queued = len(s.queue) - s.head
	return st
}

// Close unsubscribes: queued events are discarded and Next returns
// ErrBusClosed. Close is idempotent.
func (s *Subscription) Close() {
	s.bus.mu.Lock()
	delete(s.bus.subs, s)
	s.bus.mu.Unlock()
	s.mu.Lock()
	s.closed = true
	clear(s.queue)
	s.queue, s.head = nil, 0
	s.mu.Unlock()
	s.wake()
}
