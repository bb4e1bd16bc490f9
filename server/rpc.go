package server

import (
	"context"
	"sync"
)

// rpcRegistry maps (account, method) to the sockets that registered it, in
// registration order; a call goes to the most recent one, as on the
// reference relay (a later registration replaces the earlier): a client
// that reconnected registers again from its new socket while the server may
// not have noticed yet that the old one is dead. Keys include the account,
// so a socket can only ever reach methods of its own account.
type rpcRegistry struct {
	mu     sync.Mutex
	byKey  map[string][]*rpcEntry
	notify map[string]*rpcNotify
}

// rpcNotify wakes the calls waiting for a method to be registered; waiters
// counts them, so the entry is removed when the last one gives up.
type rpcNotify struct {
	ch      chan struct{}
	waiters int
}

type rpcEntry struct {
	c    *conn
	gone chan struct{}
	once sync.Once
}

func (e *rpcEntry) close() { e.once.Do(func() { close(e.gone) }) }

func newRPCRegistry() *rpcRegistry {
	return &rpcRegistry{byKey: map[string][]*rpcEntry{}, notify: map[string]*rpcNotify{}}
}

func rpcKey(acct, method string) string { return acct + "\x00" + method }

func (r *rpcRegistry) register(c *conn, method string) {
	k := rpcKey(c.acct, method)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.byKey[k] {
		if e.c == c {
			return
		}
	}
	r.byKey[k] = append(r.byKey[k], &rpcEntry{c: c, gone: make(chan struct{})})
	c.mu.Lock()
	if c.methods == nil {
		c.methods = map[string]bool{}
	}
	c.methods[method] = true
	c.mu.Unlock()
	if n, ok := r.notify[k]; ok {
		close(n.ch)
		delete(r.notify, k)
	}
}

func (r *rpcRegistry) unregister(c *conn, method string) {
	k := rpcKey(c.acct, method)
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.byKey[k]
	for i, e := range list {
		if e.c == c {
			e.close()
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(r.byKey, k)
	} else {
		r.byKey[k] = list
	}
	c.mu.Lock()
	delete(c.methods, method)
	c.mu.Unlock()
}

// dropConn unregisters every method of a disconnected socket.
func (r *rpcRegistry) dropConn(c *conn) {
	c.mu.Lock()
	methods := make([]string, 0, len(c.methods))
	for m := range c.methods {
		methods = append(methods, m)
	}
	c.mu.Unlock()
	for _, m := range methods {
		r.unregister(c, m)
	}
}

// wait returns the socket that registered method last, waiting until one
// registers or ctx ends (then nil).
func (r *rpcRegistry) wait(ctx context.Context, acct, method string) *rpcEntry {
	k := rpcKey(acct, method)
	for {
		r.mu.Lock()
		if list := r.byKey[k]; len(list) > 0 {
			e := list[len(list)-1]
			r.mu.Unlock()
			return e
		}
		n, ok := r.notify[k]
		if !ok {
			n = &rpcNotify{ch: make(chan struct{})}
			r.notify[k] = n
		}
		n.waiters++
		r.mu.Unlock()
		select {
		case <-n.ch:
			// register removed the entry; this waiter is done with it.
		case <-ctx.Done():
			r.mu.Lock()
			n.waiters--
			if n.waiters == 0 && r.notify[k] == n {
				delete(r.notify, k)
			}
			r.mu.Unlock()
			return nil
		}
	}
}

// peek returns the socket that registered method last, or nil, without
// waiting.
func (r *rpcRegistry) peek(acct, method string) *rpcEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if list := r.byKey[rpcKey(acct, method)]; len(list) > 0 {
		return list[len(list)-1]
	}
	return nil
}
