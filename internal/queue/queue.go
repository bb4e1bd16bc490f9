// Package queue holds Unbounded, the ordered queue that sits between a
// producer that must never block (an adapter's protocol goroutine, a hook
// server's HTTP handler) and a consumer that reads a channel at its own
// pace. Pushing never blocks: a slow consumer must not stall the routing of
// permission answers. Items come out in the order pushed, and after Close
// everything already pushed is still delivered before Out closes.
//
// See docs/ARCHITECTURE.md ("Events from an adapter") for where it is used.
package queue

import "sync"

// outBuffer is the capacity of the Out channel: a consumer that keeps up
// takes items without waking the pump for each one.
const outBuffer = 64

// Unbounded is an unbounded FIFO of T with a channel side for the consumer.
// Build one with New; its methods are safe for concurrent use. One goroutine
// (the pump) runs from New until every item pushed before Close has been
// received from Out.
type Unbounded[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	wake   chan struct{} // buffered 1: items or the close are waiting
	out    chan T
	done   chan struct{}
}

// New returns a running queue.
func New[T any]() *Unbounded[T] {
	q := &Unbounded[T]{wake: make(chan struct{}, 1), out: make(chan T, outBuffer), done: make(chan struct{})}
	go q.pump()
	return q
}

// Push appends items in order. It never blocks; after Close it drops them
// and reports false (callers decide whether that is worth recording).
func (q *Unbounded[T]) Push(items ...T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, items...)
	q.mu.Unlock()
	if len(items) > 0 {
		q.signal()
	}
	return true
}

// Close stops taking items; Out closes once the queued ones are received.
// Closing twice is harmless.
func (q *Unbounded[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

// Out is the channel the consumer reads; it is closed after Close once
// every queued item was received.
func (q *Unbounded[T]) Out() <-chan T { return q.out }

// Done is closed when the pump has handed over every item and closed Out.
func (q *Unbounded[T]) Done() <-chan struct{} { return q.done }

// Wait blocks until Done is closed. The consumer must keep reading Out (or
// have stopped needing it while another goroutine drains it).
func (q *Unbounded[T]) Wait() { <-q.done }

// Len is the number of items pushed and not yet moved to Out's buffer.
func (q *Unbounded[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func (q *Unbounded[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Unbounded[T]) pump() {
	defer close(q.done)
	defer close(q.out)
	for {
		q.mu.Lock()
		items, closed := q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		for _, it := range items {
			q.out <- it
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
