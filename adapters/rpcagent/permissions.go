package rpcagent

import (
	"fmt"
	"sync"

	"github.com/happy-dev/happy/adapters/jsonrpc"
)

// Permission is a request of the agent waiting for happy's verdict on a
// tool call: the request to answer (In), the tool call it is about, and
// what the adapter needs to word the answer (Data: the options offered,
// the decisions available, …).
type Permission[D any] struct {
	In     *jsonrpc.Incoming
	CallID string
	Data   D
}

// Permissions are the pending permission requests of a session, in arrival
// order (several may wait for one tool call: each waits for its own
// answer). The zero value is ready; its methods are safe for concurrent
// use.
type Permissions[D any] struct {
	mu      sync.Mutex
	pending []*Permission[D]
	closed  bool
}

// Add records a pending request; false after Close (nobody will answer).
func (ps *Permissions[D]) Add(p *Permission[D]) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return false
	}
	ps.pending = append(ps.pending, p)
	return true
}

// Take removes and returns, in arrival order, every request pending for
// callID that match accepts (nil: all of them). When check is not nil it
// vets each first: if it fails for one, nothing is taken and its error is
// returned. Errors: ErrClosed, ErrNoPendingRequest, check's.
func (ps *Permissions[D]) Take(callID string, match func(D) bool, check func(D) error) ([]*Permission[D], error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, ErrClosed
	}
	var took []*Permission[D]
	for _, p := range ps.pending {
		if p.CallID == callID && (match == nil || match(p.Data)) {
			took = append(took, p)
		}
	}
	if len(took) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoPendingRequest, callID)
	}
	if check != nil {
		for _, p := range took {
			if err := check(p.Data); err != nil {
				return nil, err
			}
		}
	}
	kept := ps.pending[:0]
	for _, p := range ps.pending {
		if p.CallID != callID || (match != nil && !match(p.Data)) {
			kept = append(kept, p)
		}
	}
	clear(ps.pending[len(kept):])
	ps.pending = kept
	return took, nil
}

// Has reports whether a request for callID that match accepts (nil: any)
// waits.
func (ps *Permissions[D]) Has(callID string, match func(D) bool) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.pending {
		if p.CallID == callID && (match == nil || match(p.Data)) {
			return true
		}
	}
	return false
}

// TakeAll removes and returns every pending request, in arrival order.
func (ps *Permissions[D]) TakeAll() []*Permission[D] {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	all := ps.pending
	ps.pending = nil
	return all
}

// Withdraw removes the request with JSON-RPC id id (the agent no longer
// needs an answer, or got one elsewhere) and returns it; nil when none
// waits.
func (ps *Permissions[D]) Withdraw(id jsonrpc.ID) *Permission[D] {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, p := range ps.pending {
		if p.In.ID == id {
			ps.pending = append(ps.pending[:i:i], ps.pending[i+1:]...)
			return p
		}
	}
	return nil
}

// Len is the number of pending requests.
func (ps *Permissions[D]) Len() int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return len(ps.pending)
}

// Close refuses requests from now on and returns the pending ones, in
// arrival order.
func (ps *Permissions[D]) Close() []*Permission[D] {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	all := ps.pending
	ps.pending = nil
	return all
}
