package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay/outbox"
)

// MarkLive records in the outbox that this process runs the session and will
// end it (docs/ARCHITECTURE.md, section "A session's life"). If the process
// dies before MarkEnded, the session is listed by Client.Orphans of the next
// client on the same outbox.
func (s *Session) MarkLive(ctx context.Context) error {
	if err := s.c.store.MarkLive(ctx, s.tag, os.Getpid()); err != nil {
		return fmt.Errorf("relay: mark %s live: %w", s.tag, err)
	}
	return nil
}

// MarkEnded removes the live record of MarkLive: call it once the relay
// knows the session ended (its metadata and session-end were written and the
// outbox rows acknowledged).
func (s *Session) MarkEnded(ctx context.Context) error {
	if err := s.c.store.ClearLive(ctx, s.tag); err != nil {
		return fmt.Errorf("relay: mark %s ended: %w", s.tag, err)
	}
	return nil
}

// IsLive reports whether the session has a live record (MarkLive without
// MarkEnded).
func (s *Session) IsLive(ctx context.Context) (bool, error) {
	return s.c.store.IsLive(ctx, s.tag)
}

// SetThinking sets the thinking field of the presence heartbeat
// (session-alive), keeping the mode.
func (s *Session) SetThinking(thinking bool) {
	s.stateMu.Lock()
	s.thinking = thinking
	s.stateMu.Unlock()
}

// Orphan is a session whose process died before it ended the session: its
// outbox has a live record and nobody holds its lock.
type Orphan struct {
	Tag     string    // the session's tag (OpenSession opens it)
	RelayID string    // the relay's session id ("" when it was never created)
	PID     int       // the process that ran it
	Since   time.Time // when that process marked it live
}

// Orphans lists the orphaned sessions of this account and relay in the
// outbox, oldest first. A session open in this process is never one; a
// session whose rows this client drains as an orphan is one. The lock of
// each is only tried, not kept: the caller opens the session (OpenSession),
// which fails with outbox.ErrLocked when another process got there first.
func (c *Client) Orphans(ctx context.Context) ([]Orphan, error) {
	live, err := c.store.LiveSessions(ctx)
	if err != nil {
		return nil, err
	}
	var out []Orphan
	for _, l := range live {
		c.mu.Lock()
		open, draining := c.open[l.Session], c.drains[l.Session] != nil
		c.mu.Unlock()
		if open {
			continue
		}
		relayID, raw, ok, err := c.store.Session(ctx, l.Session)
		if err != nil || !ok {
			continue
		}
		st, err := decodeSessionState(raw)
		if err != nil || st.Account != c.account || st.Relay != c.api.BaseURL() {
			continue // another account's or relay's session: never touched here
		}
		if !draining {
			unlock, err := c.store.Lock(l.Session)
			if errors.Is(err, outbox.ErrLocked) {
				continue // a live process owns it
			}
			if err != nil {
				return out, err
			}
			unlock()
		}
		out = append(out, Orphan{Tag: l.Session, RelayID: relayID, PID: l.PID, Since: l.StartedAt})
	}
	return out, nil
}

// UpdateSessionMetadata sets the metadata of session sessionID with
// compare-and-set (update-metadata) over sock, any connected socket of the
// account (a reader's user-scoped socket: archiving from another device).
// current and version are the metadata (plaintext JSON) and version the
// caller read; on version-mismatch fn is applied again to the relay's newer
// value, as Session.UpdateMetadata does. It returns the metadata and version
// the relay holds afterwards. Each acknowledgement is awaited at most
// ackTimeout (DefaultAckTimeout when zero). Errors wrap ErrUnavailable,
// ErrVersionMismatch, ErrRejected or ErrDecrypt.
func UpdateSessionMetadata(ctx context.Context, sock Socket, sessionID string, ci crypto.Cipher, current json.RawMessage, version int64, ackTimeout time.Duration, fn Updater) (json.RawMessage, int64, error) {
	if ackTimeout <= 0 {
		ackTimeout = DefaultAckTimeout
	}
	cn := &conn{sock: sock}
	cn.init()
	val, ver := current, version
	err := compareAndSet(ctx, cn, ackTimeout, casSpec{
		event: "update-metadata", idKey: "sid", id: sessionID, valueKey: "metadata", cipher: ci,
		get: func() (json.RawMessage, int64) { return val, ver },
		set: func(v json.RawMessage, n int64) { val, ver = v, n },
	}, fn)
	return val, ver, err
}
