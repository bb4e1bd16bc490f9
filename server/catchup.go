package server

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"

	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/store"
)

// Catch-up after a bus gap (docs/ARCHITECTURE.md, section "Several
// relays"). A bus whose connection was lost drops what the other instances
// published meanwhile (bus.Resumer), and a socket that stayed connected to
// this instance has no reason to read again. So the instance remembers, per
// session, which message seqs it sent its sockets (sentRows), and when the
// bus is back it reads from the store the rows its sockets were not sent
// and sends them as new-message updates, in seq order, each once; message
// streams are woken (they read the store themselves).

// catchUpSlack widens the time window in which rows of a session this
// instance sent nothing of are taken for missed: the writers' clocks may be
// behind this one's.
const catchUpSlack = 5 * time.Second

// catchUpSessions bounds the sessions of one account looked at for its
// user-scoped sockets (the most recently updated).
const catchUpSessions = 1000

// catchUpTimeout bounds one catch-up.
const catchUpTimeout = time.Minute

// maxAbove bounds the seqs a session keeps above its contiguous position.
const maxAbove = 1024

// sentRows is, per session, the message seqs this instance has sent its
// sockets: every seq up to pos, and the seqs in above (sent out of order,
// after a missing one). The zero value is not ready: newSentRows.
type sentRows struct {
	mu   sync.Mutex
	m    map[string]*sentPos // by streamKey(acct, sid)
	from time.Time           // sessions without an entry had nothing sent since
}

type sentPos struct {
	pos   int64
	above map[int64]struct{}
	at    time.Time
}

func newSentRows(now time.Time) *sentRows {
	return &sentRows{m: map[string]*sentPos{}, from: now}
}

// mark records that the row seq of the session is being sent; it reports
// false when it was sent before (the caller then does not send it again).
// A session's first row sets its position: the rows before were read by
// its sockets' clients when they connected.
func (r *sentRows) mark(acct, sid string, seq int64, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := streamKey(acct, sid)
	p := r.m[k]
	if p == nil {
		r.m[k] = &sentPos{pos: seq, at: now}
		return true
	}
	p.at = now
	if _, dup := p.above[seq]; dup || seq <= p.pos {
		return false
	}
	if seq != p.pos+1 {
		if p.above == nil {
			p.above = map[int64]struct{}{}
		}
		p.above[seq] = struct{}{}
		if len(p.above) > maxAbove {
			// A hole that never filled: give up on it.
			p.pos = slices.Max(mapKeys(p.above))
			p.above = nil
		}
		return true
	}
	p.pos = seq
	for {
		if _, ok := p.above[p.pos+1]; !ok {
			break
		}
		delete(p.above, p.pos+1)
		p.pos++
	}
	return true
}

func mapKeys(m map[int64]struct{}) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// sent reports whether the row seq of the session was sent, and the
// session's position (ok false: nothing of it was sent since r.from).
func (r *sentRows) sent(acct, sid string, seq int64) (was bool, pos int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.m[streamKey(acct, sid)]
	if p == nil {
		return false, 0, false
	}
	_, above := p.above[seq]
	return seq <= p.pos || above, p.pos, true
}

// since is the time since which a session without an entry had nothing sent.
func (r *sentRows) since() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.from
}

// forget drops the sessions nothing was sent to for idle.
func (r *sentRows) forget(now time.Time, idle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := now.Add(-idle)
	for k, p := range r.m {
		if p.at.Before(cut) {
			delete(r.m, k)
		}
	}
	if cut.After(r.from) {
		r.from = cut
	}
}

// catchTarget is what an account's sockets on this instance follow: the
// sessions of its session-scoped sockets, and with user-scoped sockets
// every session.
type catchTarget struct {
	sessions map[string]bool
	user     bool
}

// targets lists, by account, what this instance's sockets follow.
func (cl *cluster) targets() map[string]*catchTarget {
	out := map[string]*catchTarget{}
	get := func(acct string) *catchTarget {
		t := out[acct]
		if t == nil {
			t = &catchTarget{sessions: map[string]bool{}}
			out[acct] = t
		}
		return t
	}
	cl.s.io.Sockets().Adapter().Rooms().Range(func(room socket.Room, ids *types.Set[socket.SocketId]) bool {
		if ids == nil || ids.Len() == 0 {
			return true
		}
		rest, ok := strings.CutPrefix(string(room), "user:")
		if !ok {
			return true
		}
		acct, kind, ok := strings.Cut(rest, ":")
		switch {
		case !ok:
		case kind == scopeUser:
			get(acct).user = true
		case strings.HasPrefix(kind, "session:"):
			get(acct).sessions[strings.TrimPrefix(kind, "session:")] = true
		}
		return true
	})
	return out
}

// resumed runs on the bus's delivery goroutine when the bus is back after a
// gap, before the messages that came over the new connection: it wakes every
// message stream and catches every socket up from the store.
func (cl *cluster) resumed() {
	s := cl.s
	s.streams.wakeAll()
	cutoff := cl.sent.since()
	if last := time.Unix(0, cl.lastRecv.Load()).Add(-catchUpSlack); last.After(cutoff) {
		cutoff = last
	}
	ctx, cancel := context.WithTimeout(s.ctx, catchUpTimeout)
	defer cancel()
	targets := cl.targets()
	total := 0
	for acct, t := range targets {
		n, err := cl.catchUpAccount(ctx, acct, t, cutoff)
		total += n
		if err != nil {
			s.log.Warn().Err(err).Str("account", acct).Int("rows", n).Msg("bus resumed: catching the sockets up failed; their clients read on their next reconnection")
		}
	}
	cl.caughtUp.Add(int64(total))
	s.log.Warn().Int("accounts", len(targets)).Int("rows", total).Msg("bus resumed after a gap: sockets caught up from the store")
}

// catchUpAccount sends acct's sockets the rows they were not sent, session
// by session, and returns how many it sent.
func (cl *cluster) catchUpAccount(ctx context.Context, acct string, t *catchTarget, cutoff time.Time) (int, error) {
	s := cl.s
	cands := map[string]store.Session{}
	if t.user {
		list, err := s.st.Sessions(ctx, acct, catchUpSessions)
		if err != nil {
			return 0, err
		}
		for _, x := range list {
			cands[x.ID] = x
		}
	}
	for sid := range t.sessions {
		if _, ok := cands[sid]; ok {
			continue
		}
		x, err := s.st.Session(ctx, acct, sid)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		cands[sid] = x
	}
	sent := 0
	for sid, x := range cands {
		_, pos, known := cl.sent.sent(acct, sid, 0)
		var rows []store.Message
		var err error
		switch {
		case known && x.Seq > pos:
			rows, err = cl.rowsAfter(ctx, acct, sid, pos)
		case !known && x.UpdatedAt >= cutoff.UnixMilli():
			rows, err = cl.rowsSince(ctx, acct, sid, x.Seq, cutoff.UnixMilli())
		}
		if err != nil {
			return sent, err
		}
		// Pages keep the update seqs of one allocation consecutive and
		// the fan-out queue short.
		for len(rows) > 0 {
			n := min(len(rows), streamPage)
			k, err := cl.sendCaughtUp(ctx, acct, sid, rows[:n])
			sent += k
			if err != nil {
				return sent, err
			}
			rows = rows[n:]
			s.out.waitRoom(ctx, acct)
		}
	}
	return sent, nil
}

// rowsAfter reads the session's rows after seq that were not sent.
func (cl *cluster) rowsAfter(ctx context.Context, acct, sid string, after int64) ([]store.Message, error) {
	var out []store.Message
	for {
		list, more, err := cl.s.st.Messages(ctx, acct, sid, store.Page{After: after, Limit: 500})
		if errors.Is(err, store.ErrNotFound) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		for _, m := range list {
			if was, _, _ := cl.sent.sent(acct, sid, m.Seq); !was {
				out = append(out, m)
			}
			after = m.Seq
		}
		if !more || len(list) == 0 {
			return out, nil
		}
	}
}

// rowsSince reads, for a session nothing of which was sent since the bus
// was last known to deliver, its rows created at or after cutoff (Unix ms),
// up to seq last, in seq order.
func (cl *cluster) rowsSince(ctx context.Context, acct, sid string, last, cutoff int64) ([]store.Message, error) {
	var out []store.Message
	before := last + 1
	for {
		list, more, err := cl.s.st.Messages(ctx, acct, sid, store.Page{Before: before, Limit: 500})
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		done := !more || len(list) == 0
		for _, m := range list {
			if m.CreatedAt < cutoff {
				done = true
				break
			}
			out = append(out, m)
			before = m.Seq
		}
		if done {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}

// sendCaughtUp sends rows (one session's, in seq order) as new-message
// updates with update seqs allocated for them; the other instances are
// told to pass over those seqs.
func (cl *cluster) sendCaughtUp(ctx context.Context, acct, sid string, rows []store.Message) (int, error) {
	s := cl.s
	first, err := s.st.NextUpdateSeqs(ctx, acct, len(rows))
	if err != nil {
		return 0, err
	}
	cl.publish(busMsg{Kind: busSkip, Acct: acct, Seq: first, N: int64(len(rows))})
	cl.seqr.resync(acct, first)
	names := roomNames([]socket.Room{roomSession(acct, sid), roomUserScoped(acct)})
	for i, m := range rows {
		u := wire.Update{ID: store.NewID()[1:13], Seq: first + int64(i), CreatedAt: s.nowMs(),
			Body: wire.BodyNewMessage{T: "new-message", SID: sid, Message: toWireMessage(m)}}
		raw, err := json.Marshal(u)
		if err != nil {
			return i, err
		}
		s.metrics.updates.Inc()
		cl.deliverUpdate(acct, u.Seq, true, names, sid, false, raw, m.Seq)
	}
	return len(rows), nil
}
