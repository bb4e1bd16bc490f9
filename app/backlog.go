package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/relay/outbox"
)

// Backlog is one session's versions in this home's outbox still waiting
// for the relay (docs/ARCHITECTURE.md, "Relay envelope and versions"): what happy outbox
// lists and discards.
type Backlog struct {
	Session string    `json:"session"`           // the outbox's session key (the session tag)
	RelayID string    `json:"relayId,omitempty"` // the relay's session id ("" while the relay has not created it)
	Relay   string    `json:"relay,omitempty"`   // base URL of the relay the versions are for ("" when the state is unreadable)
	Waiting int       `json:"waiting"`           // versions waiting
	Oldest  time.Time `json:"oldest"`            // when the oldest of them was written
	// Running: a happy holds the session (its outbox lock): it sends them
	// itself, and they cannot be discarded.
	Running bool `json:"running"`
}

// ErrBacklogRunning is returned by DiscardBacklog for a session a running
// happy holds.
var ErrBacklogRunning = errors.New("a running happy holds this session: stop it first (happy stop SESSION)")

// Backlogs lists the sessions of env's outbox with versions waiting for
// the relay, oldest first. A home without an outbox has none.
func Backlogs(ctx context.Context, env Env) ([]Backlog, error) {
	st, err := openExistingOutbox(ctx, env)
	if st == nil {
		return nil, err
	}
	defer st.Close()
	sessions, err := st.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	var out []Backlog
	for _, s := range sessions {
		b, err := backlogOf(ctx, st, s)
		if err != nil {
			return nil, err
		}
		if b.Waiting > 0 {
			out = append(out, b)
		}
	}
	// Oldest first: the order the sessions' versions were written.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Oldest.Before(out[j-1].Oldest); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// backlogOf reads one session's backlog (Running is found by trying its
// lock, released at once).
func backlogOf(ctx context.Context, st *outbox.Store, session string) (Backlog, error) {
	b := Backlog{Session: session}
	n, err := st.Count(ctx, session)
	if err != nil {
		return b, err
	}
	b.Waiting = n
	first, err := st.Pending(ctx, session, 1)
	if err != nil {
		return b, err
	}
	if len(first) > 0 {
		b.Oldest = first[0].EnqueuedAt
	}
	relayID, state, ok, err := st.Session(ctx, session)
	if err != nil {
		return b, err
	}
	if ok {
		b.RelayID = relayID
		b.Relay, _ = relay.OutboxRelay(state)
	}
	unlock, err := st.Lock(session)
	switch {
	case errors.Is(err, outbox.ErrLocked):
		b.Running = true
	case err != nil:
		return b, err
	default:
		unlock()
	}
	return b, nil
}

// DiscardBacklog gives up session's waiting versions: each moves to the
// outbox's rejected rows with a reason saying who discarded it and when
// (so it stops being sent, yet is not erased), and the count is returned.
// A session a running happy holds is refused with ErrBacklogRunning; one
// with nothing waiting discards 0.
func DiscardBacklog(ctx context.Context, env Env, session string) (int, error) {
	st, err := openExistingOutbox(ctx, env)
	if st == nil {
		return 0, err
	}
	defer st.Close()
	unlock, err := st.Lock(session)
	if errors.Is(err, outbox.ErrLocked) {
		return 0, ErrBacklogRunning
	}
	if err != nil {
		return 0, err
	}
	defer unlock()
	now := time.Now
	if env.Now != nil {
		now = env.Now
	}
	reason := "discarded on this machine with happy outbox discard at " + now().UTC().Format(time.RFC3339)
	done := 0
	for {
		items, err := st.Pending(ctx, session, 500)
		if err != nil {
			return done, err
		}
		if len(items) == 0 {
			return done, nil
		}
		for _, it := range items {
			if err := st.Reject(ctx, session, it.LocalID, reason); err != nil {
				return done, fmt.Errorf("discard %s of %s: %w", it.LocalID, session, err)
			}
			done++
		}
	}
}

// openExistingOutbox opens env's outbox, or returns nil and no error when
// the home has none yet.
func openExistingOutbox(ctx context.Context, env Env) (*outbox.Store, error) {
	if _, err := os.Stat(env.Home.Outbox()); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	st, err := openOutbox(ctx, env.Home.Outbox())
	if err != nil {
		return nil, err
	}
	return st, nil
}
