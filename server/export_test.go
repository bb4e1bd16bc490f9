package server

import (
	"testing"
	"time"
)

// RPCWaiting is the number of rpc-calls waiting for their method to be
// registered, for the external tests.
func (s *Server) RPCWaiting() int {
	s.rpc.mu.Lock()
	defer s.rpc.mu.Unlock()
	n := 0
	for _, w := range s.rpc.notify {
		n += w.waiters
	}
	return n
}

// WaitUntil is waitUntil for the external tests.
func WaitUntil(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	waitUntil(tb, d, what, cond)
}

// waitUntil checks cond every millisecond until it holds, and fails the
// test when it still does not after d. It is for state the code under test
// does not signal (counters, registries); whatever is signalled is waited
// for on its channel instead.
func waitUntil(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			tb.Fatalf("%s: still not the case after %s", what, d)
		}
	}
}

// IssueToken returns a token for accountID signed by this server (tests only).
func (s *Server) IssueToken(accountID string) string {
	return s.tok.issue(accountID, "", s.cfg.Now())
}

// RPCRemoteClaims is the number of RPC method claims of other instances
// this relay knows, for the external tests.
func (s *Server) RPCRemoteClaims() int {
	s.rpc.mu.Lock()
	defer s.rpc.mu.Unlock()
	n := 0
	for _, set := range s.rpc.remote {
		n += len(set)
	}
	return n
}

// ConnsFrom is the number of connections (or, behind a trusted proxy,
// requests) the relay counts for a client address, for the external
// tests.
func (s *Server) ConnsFrom(addr string) int { return s.conns.count(clientKey(addr)) }
