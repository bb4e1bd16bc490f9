package server

import (
	"context"
	"hash/fnv"
	"sync"

	"github.com/happy-dev/happy/server/store"
)

// accountLocks order, per account, each allocation of update seqs with
// the sends that use them, so that every socket receives an account's
// updates in seq order (and a session's messages in seq order). Accounts
// share 64 stripes.
//
// Message appends do not hold the lock while their rows are committed:
// with a store that groups commits (store.AppendStarter) an append is
// queued under the lock, which fixes its place in the account's seq
// order, and joins the account's chain of appends in flight; once
// committed it waits for the append before it in the chain to have sent
// its updates, sends its own and lets the next one go. Concurrent appends
// of one account thus share a commit and still fan out in seq order.
// Every other update (lockAccount) first waits until the account has no
// append in flight, so its seq, allocated after theirs, is also sent
// after theirs.
type accountLocks [64]accountStripe

type accountStripe struct {
	mu sync.Mutex
	// tails holds, per account with appends in flight, the channel the
	// last of them closes once it has sent its updates.
	tails map[string]chan struct{}
}

func (s *Server) stripe(acct string) *accountStripe {
	h := fnv.New32a()
	_, _ = h.Write([]byte(acct))
	return &s.acctMu[h.Sum32()%uint32(len(s.acctMu))]
}

// lockAccount locks acct's stripe once the account has no append in
// flight and returns the unlock.
func (s *Server) lockAccount(acct string) func() {
	st := s.stripe(acct)
	st.mu.Lock()
	if tail, ok := st.tails[acct]; ok {
		<-tail
		delete(st.tails, acct)
	}
	return st.mu.Unlock
}

// appendOrdered stores a batch and fans its new rows out, in the
// account's seq order (see accountLocks). It returns the store's result
// once the rows are committed and their updates queued for the sockets
// (fanout.go), after waiting for room in the account's queue.
func (s *Server) appendOrdered(ctx context.Context, acct, sid string, msgs []store.NewMessage) (store.AppendResult, error) {
	// In flight until its updates are queued (fanout.go: other accounts'
	// fan-out rests meanwhile); not while it waits for room.
	s.out.working(acct)
	starter, ok := s.st.(store.AppendStarter)
	if !ok {
		unlock := s.lockAccount(acct)
		res, err := s.st.AppendMessages(ctx, acct, sid, msgs, s.nowMs())
		if err == nil {
			s.fanoutMessages(acct, sid, res)
		}
		unlock()
		s.out.worked(acct)
		s.out.waitRoom(ctx, acct)
		return res, err
	}
	st := s.stripe(acct)
	st.mu.Lock()
	prev := st.tails[acct]
	mine := make(chan struct{})
	if st.tails == nil {
		st.tails = map[string]chan struct{}{}
	}
	st.tails[acct] = mine
	wait := starter.StartAppend(ctx, acct, sid, msgs, s.nowMs())
	st.mu.Unlock()

	res, err := wait()
	if prev != nil {
		<-prev
	}
	if err == nil {
		s.fanoutMessages(acct, sid, res)
	}
	close(mine)
	st.mu.Lock()
	if st.tails[acct] == mine {
		delete(st.tails, acct)
	}
	st.mu.Unlock()
	s.out.worked(acct)
	// A poster whose account's sockets are behind waits for them (fanout.go).
	s.out.waitRoom(ctx, acct)
	return res, err
}
