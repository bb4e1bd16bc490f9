package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/zishang520/socket.io/servers/socket/v3"

	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/bus"
	"github.com/happy-dev/happy/server/store"
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
	return s.tok.Issue(accountID, "", s.cfg.Now())
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

// ForeignAppend stores lids as new rows of the session sid (the account of
// token) straight into s's store, as another instance on the same
// database would, and publishes their new-message updates on other (that
// instance's bus) the way that instance would.
func (s *Server) ForeignAppend(tb testing.TB, other bus.Bus, token, sid string, lids ...string) {
	tb.Helper()
	if err := other.Publish(context.Background(), s.ForeignStore(tb, token, sid, lids...)); err != nil {
		tb.Fatal(err)
	}
}

// ForeignStore is ForeignAppend without the publish: it returns the bus
// message to publish.
func (s *Server) ForeignStore(tb testing.TB, token, sid string, lids ...string) []byte {
	tb.Helper()
	ctx := context.Background()
	acct, err := s.verifyToken(ctx, token)
	if err != nil {
		tb.Fatal(err)
	}
	msgs := make([]store.NewMessage, len(lids))
	for i, l := range lids {
		msgs[i] = store.NewMessage{LocalID: l, Content: "c-" + l}
	}
	res, err := s.st.AppendMessages(ctx, acct, sid, msgs, s.nowMs())
	if err != nil {
		tb.Fatal(err)
	}
	m := busMsg{Kind: busUpdates, From: "other-instance", Acct: acct, Wake: sid,
		Rooms: roomNames([]socket.Room{roomSession(acct, sid), roomUserScoped(acct)})}
	for i, row := range res.Created {
		raw, _ := json.Marshal(wire.Update{ID: "x", Seq: res.FirstUpdateSeq + int64(i), CreatedAt: row.CreatedAt,
			Body: wire.BodyNewMessage{T: "new-message", SID: sid, Message: toWireMessage(row)}})
		m.Items = append(m.Items, busItem{Seq: res.FirstUpdateSeq + int64(i), Body: raw, Msg: row.Seq})
	}
	b, _ := json.Marshal(m)
	return b
}

// CaughtUp is the number of rows sent to sockets after bus gaps.
func (s *Server) CaughtUp() int64 { return s.cl.caughtUp.Load() }
