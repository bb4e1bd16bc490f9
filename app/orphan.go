package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/relay/outbox"
	"github.com/happy-dev/happy/session"
	"github.com/happy-dev/happy/session/compat"
)

// Settled is an orphaned session that SettleOrphans ended.
type Settled struct {
	Tag       string
	SessionID string // relay session id
	PID       int    // the happy process that died
	Messages  int    // messages settled (open tools errored, open message completed)
}

// orphanTimeout bounds the settling of one orphan.
const orphanTimeout = 30 * time.Second

// SettleOrphans ends the sessions whose happy died on this home (kill -9,
// power loss; docs/ARCHITECTURE.md, section "A session's life"): for each
// orphan of conn's outbox it opens the session (taking its lock, so two
// happies never settle the same one), sends what its outbox still holds,
// reads the session back from the relay, writes a settled version of every
// message left open (tools → error "wrapper-exited", the message completed
// with finish "error"), sets lifecycleState "ended", sends session-end, and
// clears the live record. An orphan another process holds is skipped; one
// that fails stays an orphan for the next try. It returns what it settled
// and the errors joined.
func SettleOrphans(ctx context.Context, env Env, conn *Conn) ([]Settled, error) {
	orphans, err := conn.Client.Orphans(ctx)
	if err != nil || len(orphans) == 0 {
		return nil, err
	}
	// A session deleted on the relay is not settled: opening it by its tag
	// would create a new, empty one.
	known := map[string]bool{}
	infos, err := conn.API.ListSessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, info := range infos {
		known[info.ID] = true
	}
	var out []Settled
	var errs []error
	for _, o := range orphans {
		if ctx.Err() != nil {
			break
		}
		if o.RelayID != "" && !known[o.RelayID] {
			env.Log.Warn().Str("tag", o.Tag).Str("session", o.RelayID).Msg("orphaned session is gone from the relay (or not among its newest); not settled")
			if len(infos) < 150 {
				_ = conn.Client.Outbox().ClearLive(ctx, o.Tag)
			}
			continue
		}
		s, ok, err := settleOrphan(ctx, env, conn, o)
		if err != nil {
			env.Log.Warn().Err(err).Str("tag", o.Tag).Msg("orphaned session not settled yet")
			errs = append(errs, fmt.Errorf("settle session %s: %w", o.Tag, err))
			continue
		}
		if ok {
			env.Log.Info().Str("tag", o.Tag).Str("session", s.SessionID).Int("pid", o.PID).Int("messages", s.Messages).Msg("settled an orphaned session")
			out = append(out, s)
		}
	}
	return out, errors.Join(errs...)
}

func settleOrphan(parent context.Context, env Env, conn *Conn, o relay.Orphan) (Settled, bool, error) {
	ctx, cancel := context.WithTimeout(parent, orphanTimeout)
	defer cancel()
	res := Settled{Tag: o.Tag, PID: o.PID}
	sess, err := conn.Client.OpenSession(ctx, relay.SessionOptions{Tag: o.Tag, ReceiveAfter: relay.FromNow})
	if errors.Is(err, outbox.ErrLocked) {
		return res, false, nil // another happy settles (or runs) it
	}
	if err != nil {
		if errors.Is(err, relay.ErrRejected) || errors.Is(err, relay.ErrProtocol) {
			// The relay will never take it (deleted there, another
			// account's): stop trying.
			_ = conn.Client.Outbox().ClearLive(ctx, o.Tag)
		}
		return res, false, err
	}
	defer sess.Close()
	// Between the listing and the lock another happy may have settled it.
	if live, err := sess.IsLive(ctx); err != nil || !live {
		return res, false, err
	}
	id, err := sess.WaitCreated(ctx)
	if err != nil {
		return res, false, err
	}
	res.SessionID = id
	// The relay must hold the orphan's last versions before they are read.
	if err := sess.Flush(ctx); err != nil {
		return res, false, err
	}
	rb, _, err := ReadTranscript(ctx, conn, Opened{Info: relay.SessionInfo{ID: id}, Cipher: sess.Cipher()}, ReadOptions{})
	if err != nil {
		return res, false, err
	}
	now := env.now()
	for _, m := range rb.Settle(agent.ReasonWrapperExited, now.UnixMilli()) {
		sess.RaiseVersion(m.Record, m.ReadVersion)
		_, err := sess.Enqueue(ctx, m.Record, func(v int64) ([]byte, error) {
			if v <= m.ReadVersion {
				return nil, fmt.Errorf("record %s: next version %d is not above the relay's %d", m.Record, v, m.ReadVersion)
			}
			return session.MessageEnvelope(m.Message, v)
		})
		if err != nil {
			return res, false, err
		}
		res.Messages++
	}
	if err := sess.UpdateMetadata(ctx, mergeFields(lifecycleFields(LifecycleEnded, now))); err != nil {
		return res, false, err
	}
	// The reference app's agentState: nothing waits for an answer anymore.
	if cur, _ := sess.AgentState(); cur != nil {
		if _, waiting, _ := compat.Settle(cur, agent.ReasonWrapperExited, now.UnixMilli()); waiting {
			err := sess.UpdateAgentState(ctx, func(cur json.RawMessage) (json.RawMessage, error) {
				out, _, err := compat.Settle(cur, agent.ReasonWrapperExited, now.UnixMilli())
				return out, err
			})
			if err != nil {
				env.Log.Warn().Err(err).Str("tag", o.Tag).Msg("agentState of an orphan not settled")
			}
		}
	}
	if err := sess.End(ctx); err != nil {
		env.Log.Warn().Err(err).Str("tag", o.Tag).Msg("session-end of an orphan not sent")
	}
	if err := sess.Flush(ctx); err != nil {
		return res, false, err
	}
	if err := sess.MarkEnded(ctx); err != nil {
		return res, false, err
	}
	return res, true, nil
}
