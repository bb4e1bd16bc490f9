// Package evqueue is the unbounded, ordered queue between an adapter's
// protocol goroutines and the consumer of its agent events: pushing never
// blocks the traffic (a slow consumer must not stall the routing of
// permission answers), and events come out in the order pushed. After
// Close, what was pushed is still delivered, then Out closes.
package evqueue

import (
	"sync"

	"github.com/happy-dev/happy/mapper"
)

// Queue is an event queue; build one with New. Its methods are safe for
// concurrent use.
type Queue struct {
	mu     sync.Mutex
	items  []mapper.Event
	wake   chan struct{}
	closed bool
	out    chan mapper.Event
	done   chan struct{}
}

// New returns a running queue.
func New() *Queue {
	q := &Queue{wake: make(chan struct{}, 1), out: make(chan mapper.Event, 64), done: make(chan struct{})}
	go q.pump()
	return q
}

// Push appends events; after Close it does nothing.
func (q *Queue) Push(evs ...mapper.Event) {
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

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Close stops taking events; Out closes once the queued ones are delivered.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// Out is the channel the consumer reads.
func (q *Queue) Out() <-chan mapper.Event { return q.out }

// Wait blocks until every event was handed to the consumer (who must keep
// reading) and Out is closed.
func (q *Queue) Wait() { <-q.done }

func (q *Queue) pump() {
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
