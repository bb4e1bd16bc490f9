package server

import (
	"context"
	"sync"
	"time"

	"github.com/happy-dev/happy/relay/wire"
)

// presence keeps what is needed to make keep-alives cheap and session ends
// stick: the last activity time written per session or machine (a
// keep-alive is written only when it moves that time by more than the write
// threshold or flips the row to active), and the sessions whose keep-alives
// are ignored for a while after they ended or were archived.
type presence struct {
	ttl time.Duration

	mu      sync.Mutex
	written map[string]int64
	stopped map[string]time.Time
}

func newPresence(ttl time.Duration) *presence {
	return &presence{ttl: ttl, written: map[string]int64{}, stopped: map[string]time.Time{}}
}

func presKey(kind, acct, id string) string { return kind + "\x00" + acct + "\x00" + id }

// shouldWrite reports whether activity at t must be written; it records t when so.
func (p *presence) shouldWrite(key string, t int64, threshold time.Duration) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.written[key]
	if ok && t-last <= threshold.Milliseconds() {
		return false
	}
	p.written[key] = t
	return true
}

// forget drops the write record of key (the row went inactive).
func (p *presence) forget(key string) {
	p.mu.Lock()
	delete(p.written, key)
	p.mu.Unlock()
}

// stop ignores keep-alives of the session for the TTL.
func (p *presence) stop(acct, sid string, now time.Time) {
	p.mu.Lock()
	delete(p.written, presKey("s", acct, sid))
	p.stopped[acct+"\x00"+sid] = now.Add(p.ttl)
	p.mu.Unlock()
}

// resume lifts a stop (the session was requested again by tag).
func (p *presence) resume(acct, sid string) {
	p.mu.Lock()
	delete(p.stopped, acct+"\x00"+sid)
	p.mu.Unlock()
}

func (p *presence) isStopped(acct, sid string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := acct + "\x00" + sid
	until, ok := p.stopped[k]
	if !ok {
		return false
	}
	if !now.Before(until) {
		delete(p.stopped, k)
		return false
	}
	return true
}

func (s *Server) writeThreshold() time.Duration {
	t := PresenceWriteThreshold
	if q := s.cfg.IdleTimeout / 4; q < t {
		t = q
	}
	return t
}

// sweepLoop marks sessions and machines without a keep-alive for
// IdleTimeout inactive, tells the account's apps, and removes pairing
// requests past PairingTTL (pairing.go).
func (s *Server) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.sweep(s.ctx)
		}
	}
}

func (s *Server) sweep(ctx context.Context) {
	s.sweepAuthRequests(ctx)
	s.sweepChallenges(ctx)
	for _, l := range s.lim.all() {
		l.sweep(s.cfg.Now())
	}
	if s.cl != nil {
		s.cl.seqr.forget(10 * time.Minute)
		s.cl.sent.forget(s.cfg.Now(), 10*time.Minute)
	}
	cutoff := s.cfg.Now().Add(-s.cfg.IdleTimeout).UnixMilli()
	sessions, err := s.st.ExpireSessions(ctx, cutoff)
	if err != nil {
		s.log.Error().Err(err).Msg("expire idle sessions")
	}
	for _, p := range sessions {
		s.pres.forget(presKey("s", p.AccountID, p.ID))
		s.emitEphemeral(p.AccountID, wire.Activity{Type: "activity", ID: p.ID, Active: false, ActiveAt: p.ActiveAt}, roomUserScoped(p.AccountID))
	}
	machines, err := s.st.ExpireMachines(ctx, cutoff)
	if err != nil {
		s.log.Error().Err(err).Msg("expire idle machines")
	}
	for _, p := range machines {
		s.pres.forget(presKey("m", p.AccountID, p.ID))
		s.emitEphemeral(p.AccountID, wire.MachineActivity{Type: "machine-activity", ID: p.ID, Active: false, ActiveAt: p.ActiveAt}, roomUserScoped(p.AccountID))
	}
}

// stopPresence ignores the session's keep-alives for the TTL here and,
// with a bus, on the other instances.
func (s *Server) stopPresence(acct, sid string) {
	s.pres.stop(acct, sid, s.cfg.Now())
	if s.cl != nil {
		s.cl.publish(busMsg{Kind: busStop, Acct: acct, ID: sid})
	}
}

// resumePresence lifts a stop here and on the other instances.
func (s *Server) resumePresence(acct, sid string) {
	s.pres.resume(acct, sid)
	if s.cl != nil {
		s.cl.publish(busMsg{Kind: busResume, Acct: acct, ID: sid})
	}
}
