package acp

import (
	"sync"

	"github.com/happy-dev/happy/mapper"
)

// eventQueue decouples decoding (on the connection's goroutines) from the
// consumer of Events: pushing never blocks the traffic, and events are
// delivered in the order pushed. After close, what was pushed is still
// delivered, then the channel closes.
type eventQueue struct {
	mu     sync.Mutex
	items  []mapper.Event
	wake   chan struct{}
	closed bool
	out    chan mapper.Event
	done   chan struct{}
}

func newEventQueue() *eventQueue {
	q := &eventQueue{wake: make(chan struct{}, 1), out: make(chan mapper.Event, 64), done: make(chan struct{})}
	go q.pump()
	return q
}

func (q *eventQueue) push(evs ...mapper.Event) {
	if len(evs) == 0 {
		return
	}
	q.mu.Lock()
	if !q.closed {
		q.items = append(q.items, evs...)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *eventQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *eventQueue) pump() {
	defer close(q.done)
	defer close(q.out)
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, e := range items {
			q.out <- e
		}
		if len(items) > 0 {
			continue
		}
		if closed {
			return
		}
		<-q.wake
	}
}

// wait blocks until every event was handed to the consumer (who must keep
// reading).
func (q *eventQueue) wait() { <-q.done }
