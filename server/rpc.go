package server

import (
	"context"
	"strings"
	"sync"
	"time"
)

// RPC methods (docs/ARCHITECTURE.md, "RPC routing"). A method
// "<sessionId>:<name>" is registered only by a session-scoped socket of
// that session, "<machineId>:<name>" only by the machine-scoped socket of
// that machine (onRPCRegister). Of the sockets that registered one method,
// the first is its holder and gets every call; a later one is refused
// with rpc-error and kept as a standby, in registration order, which
// becomes the holder (and is told rpc-registered) when the holder
// disconnects or unregisters. A method is never moved away from a
// connected holder: a socket holding only the account's token cannot take
// over a method another socket serves, it can only wait for that socket
// to go.
//
// With several relays (cluster.go) each instance holds the registrations
// of its own sockets and tells the others which methods its sockets hold
// (claims); a method another instance holds is not given to a local
// socket, and when two instances granted the same method at once the
// earlier registration keeps it.

// rpcRegistry maps (account, method) to the sockets of this instance that
// registered it, and to the other instances' claims of it. Keys include
// the account, so a socket can only ever reach methods of its own
// account.
type rpcRegistry struct {
	// self is this instance's id in claims ("" alone).
	self  string
	mu    sync.Mutex
	byKey map[string][]*rpcEntry
	// remote holds the other instances' claims: key → instance → claim.
	remote map[string]map[string]rpcClaim
	// byInst counts each instance's claims (compared with the count its
	// heartbeat announces).
	byInst map[string]int
	notify map[string]*rpcNotify
}

// rpcNotify wakes the calls waiting for a method to be registered; waiters
// counts them, so the entry is removed when the last one gives up.
type rpcNotify struct {
	ch      chan struct{}
	waiters int
}

// rpcEntry is one registration of a local socket.
type rpcEntry struct {
	c      *conn
	sock   string // the socket's id
	acct   string
	method string
	// at orders registrations across instances (Unix ns at registration).
	at int64
	// holder is set while calls of the method come to this socket (under
	// the registry's lock).
	holder bool
	gone   chan struct{}
	once   sync.Once
}

func (e *rpcEntry) close() { e.once.Do(func() { close(e.gone) }) }

// claim is e as the other instances know it.
func (e *rpcEntry) claim(self string) rpcClaim {
	return rpcClaim{Inst: self, Acct: e.acct, Method: e.method, Sock: e.sock, At: e.at}
}

// rpcClaim is an instance's holder of one method.
type rpcClaim struct {
	Inst   string `json:"-"`
	Acct   string `json:"a"`
	Method string `json:"m"`
	Sock   string `json:"i"`
	At     int64  `json:"s"`
}

// earlier reports whether a was registered before b (ties broken by
// instance, then socket, so that every instance decides the same).
func (a rpcClaim) earlier(b rpcClaim) bool {
	if a.At != b.At {
		return a.At < b.At
	}
	if a.Inst != b.Inst {
		return a.Inst < b.Inst
	}
	return a.Sock < b.Sock
}

// maxMethodsPerSocket bounds the methods one socket may register (the
// reference CLI registers about twenty per session).
const maxMethodsPerSocket = 128

func newRPCRegistry() *rpcRegistry {
	return &rpcRegistry{byKey: map[string][]*rpcEntry{}, remote: map[string]map[string]rpcClaim{}, byInst: map[string]int{}, notify: map[string]*rpcNotify{}}
}

func rpcKey(acct, method string) string { return acct + "\x00" + method }

// addResult says what add did.
type addResult int

const (
	addHolder    addResult = iota // c already holds the method
	addCandidate                  // c is first in line: emit rpc-registered, then activate
	addStandby                    // another socket (here or elsewhere) holds it
	addTooMany                    // c registered maxMethodsPerSocket methods already
)

// add records c's registration of method. A socket registering a method
// again keeps its place.
func (r *rpcRegistry) add(c *conn, method string, now time.Time) (*rpcEntry, addResult) {
	k := rpcKey(c.acct, method)
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.byKey[k]
	for i, e := range list {
		if e.c != c {
			continue
		}
		switch {
		case e.holder:
			return e, addHolder
		case i == 0 && len(r.remote[k]) == 0:
			return e, addCandidate
		default:
			return e, addStandby
		}
	}
	c.mu.Lock()
	n := len(c.methods)
	if n < maxMethodsPerSocket {
		if c.methods == nil {
			c.methods = map[string]bool{}
		}
		c.methods[method] = true
	}
	c.mu.Unlock()
	if n >= maxMethodsPerSocket {
		return nil, addTooMany
	}
	e := &rpcEntry{c: c, sock: c.id(), acct: c.acct, method: method, at: now.UnixNano(), gone: make(chan struct{})}
	r.byKey[k] = append(list, e)
	if len(list) == 0 && len(r.remote[k]) == 0 {
		return e, addCandidate
	}
	return e, addStandby
}

// activate makes e the holder when it is still first in line and no
// other instance claims the method, and wakes the calls waiting for it.
// It reports whether e holds the method (already held counts: two
// promotions of one standby may race).
func (r *rpcRegistry) activate(e *rpcEntry) bool {
	k := rpcKey(e.acct, e.method)
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.byKey[k]
	if len(list) == 0 || list[0] != e || len(r.remote[k]) > 0 {
		return false
	}
	if e.holder {
		return true
	}
	e.holder = true
	if n, ok := r.notify[k]; ok {
		close(n.ch)
		delete(r.notify, k)
	}
	return true
}

// remove drops c's registration of method. It returns the entry removed
// when it was the holder (released), and the standby now first in line
// that may become the holder when the first in line left (next: emit
// rpc-registered, then activate).
func (r *rpcRegistry) remove(c *conn, method string) (released, next *rpcEntry) {
	k := rpcKey(c.acct, method)
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.byKey[k]
	first := false
	for i, e := range list {
		if e.c == c {
			e.close()
			if e.holder {
				e.holder = false
				released = e
			}
			first = i == 0
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(r.byKey, k)
	} else {
		r.byKey[k] = list
		// The first in line left (the holder, or one about to be): the
		// next is first now.
		if first && !list[0].holder && len(r.remote[k]) == 0 {
			next = list[0]
		}
	}
	c.mu.Lock()
	delete(c.methods, method)
	c.mu.Unlock()
	return released, next
}

// methodsOf lists the methods c registered.
func methodsOf(c *conn) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	methods := make([]string, 0, len(c.methods))
	for m := range c.methods {
		methods = append(methods, m)
	}
	return methods
}

// wait returns the holder of method, waiting until there is one or ctx
// ends (then nil).
func (r *rpcRegistry) wait(ctx context.Context, acct, method string) *rpcEntry {
	k := rpcKey(acct, method)
	for {
		r.mu.Lock()
		if list := r.byKey[k]; len(list) > 0 && list[0].holder {
			e := list[0]
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
			// activate removed the entry; this waiter is done with it.
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

// peek returns the local holder of method, or nil, without waiting.
func (r *rpcRegistry) peek(acct, method string) *rpcEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if list := r.byKey[rpcKey(acct, method)]; len(list) > 0 && list[0].holder {
		return list[0]
	}
	return nil
}

// holders lists the local holders (their claims, for the other instances).
func (r *rpcRegistry) holders(self string) []rpcClaim {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []rpcClaim
	for _, list := range r.byKey {
		if len(list) > 0 && list[0].holder {
			out = append(out, list[0].claim(self))
		}
	}
	return out
}

// holderCount is the number of methods local sockets hold.
func (r *rpcRegistry) holderCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, list := range r.byKey {
		if len(list) > 0 && list[0].holder {
			n++
		}
	}
	return n
}

// remoteClaim records another instance's claim. When a local socket holds
// the method too, the earlier registration wins: a later local holder is
// demoted to standby (returned as demoted: tell its socket, publish its
// release); an earlier one is returned as reassert (publish its claim
// again, so that the other instance demotes its own).
func (r *rpcRegistry) remoteClaim(cl rpcClaim) (demoted, reassert *rpcEntry) {
	k := rpcKey(cl.Acct, cl.Method)
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.remote[k]
	if set == nil {
		set = map[string]rpcClaim{}
		r.remote[k] = set
	}
	if _, ok := set[cl.Inst]; !ok {
		r.byInst[cl.Inst]++
	}
	set[cl.Inst] = cl
	if list := r.byKey[k]; len(list) > 0 && list[0].holder {
		h := list[0]
		if cl.earlier(h.claim(r.self)) {
			h.holder = false
			return h, nil
		}
		return nil, h
	}
	return nil, nil
}

// remoteRelease drops inst's claim of (acct, method) when it names sock
// (an empty sock drops whatever inst claimed). It returns the local
// standby that may become the holder now.
func (r *rpcRegistry) remoteRelease(inst, acct, method, sock string) *rpcEntry {
	k := rpcKey(acct, method)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.releaseLocked(inst, k, sock)
}

func (r *rpcRegistry) releaseLocked(inst, k, sock string) *rpcEntry {
	set := r.remote[k]
	cl, ok := set[inst]
	if !ok || (sock != "" && cl.Sock != sock) {
		return nil
	}
	delete(set, inst)
	if r.byInst[inst]--; r.byInst[inst] <= 0 {
		delete(r.byInst, inst)
	}
	if len(set) > 0 {
		return nil
	}
	delete(r.remote, k)
	if list := r.byKey[k]; len(list) > 0 && !list[0].holder {
		return list[0]
	}
	return nil
}

// replaceInstance makes claims the whole set inst claims: claims it no
// longer lists are released (returned: local standbys that may become
// holders), the others recorded (remoteClaim's outcome for each is
// returned too).
func (r *rpcRegistry) replaceInstance(inst string, claims []rpcClaim) (next, demoted, reassert []*rpcEntry) {
	keep := make(map[string]bool, len(claims))
	for _, cl := range claims {
		keep[rpcKey(cl.Acct, cl.Method)] = true
	}
	r.mu.Lock()
	var gone []string
	for k, set := range r.remote {
		if _, ok := set[inst]; ok && !keep[k] {
			gone = append(gone, k)
		}
	}
	for _, k := range gone {
		if e := r.releaseLocked(inst, k, ""); e != nil {
			next = append(next, e)
		}
	}
	r.mu.Unlock()
	for _, cl := range claims {
		cl.Inst = inst
		d, re := r.remoteClaim(cl)
		if d != nil {
			demoted = append(demoted, d)
		}
		if re != nil {
			reassert = append(reassert, re)
		}
	}
	return next, demoted, reassert
}

// instanceClaims is the number of claims recorded for inst.
func (r *rpcRegistry) instanceClaims(inst string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byInst[inst]
}

// machineSockets counts the connected machine-scoped sockets of this
// instance per (account, machine), and remembers the machines whose last
// socket left while this instance ran. The zero value is ready.
type machineSockets struct {
	mu   sync.Mutex
	n    map[string]int
	left map[string]bool
}

func (m *machineSockets) add(acct, mid string, d int) {
	k := rpcKey(acct, mid)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n, m.left = map[string]int{}, map[string]bool{}
	}
	if m.n[k]+d <= 0 {
		delete(m.n, k)
		m.left[k] = true
		return
	}
	m.n[k] += d
	delete(m.left, k)
}

// gone reports whether the machine's last socket left this instance and
// none came back. A machine this instance never saw (it just started, and
// the daemons are reconnecting) is not gone.
func (m *machineSockets) gone(acct, mid string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := rpcKey(acct, mid)
	return m.n[k] == 0 && m.left[k]
}

// machineAway reports whether method ("<id>:<name>") is a method of one of
// acct's machines whose machine-scoped socket left this relay and did not
// come back: its daemon stopped or died, so nothing can register the method
// within the grace and the call fails at once. A machine this relay has not
// seen since it started is not away: after a relay restart its daemon is
// reconnecting, and the call waits the grace for it. Only a relay alone (no
// bus) can know that; a store error counts as not away.
func (s *Server) machineAway(ctx context.Context, acct, method string) bool {
	mid, _, ok := strings.Cut(method, ":")
	if !ok || mid == "" || !s.msocks.gone(acct, mid) {
		return false
	}
	_, err := s.st.Machine(ctx, acct, mid)
	return err == nil
}
