package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/happy-dev/happy/relay/outbox"
)

// sender moves one session's outbox rows to the relay: oldest first, in
// batches of up to MaxBatch, removing rows only once the relay returned
// their seq. Failures back off exponentially with jitter. It creates the
// session on the relay first when that has not happened yet (the create is
// idempotent by tag).
type sender struct {
	c   *Client
	tag string
	st  sessionState

	mu      sync.Mutex
	relayID string
	// onCreated runs once the relay id is known (nil for orphan drains).
	onCreated func(SessionInfo)
	// onSent runs after every acknowledged batch, before its rows are
	// removed from the outbox (nil when not needed).
	onSent func(items []outbox.Item, receipts []SentMessage)

	kick     chan struct{}
	progress chan struct{} // closed and replaced after every batch or state change

	sent      atomic.Int64
	batches   atomic.Int64
	failures  atomic.Int64
	rejected  atomic.Int64
	lastError atomic.Pointer[string]
}

func newSender(c *Client, tag, relayID string, st sessionState, onCreated func(SessionInfo)) *sender {
	return &sender{c: c, tag: tag, st: st, relayID: relayID, onCreated: onCreated,
		kick: make(chan struct{}, 1), progress: make(chan struct{})}
}

// wake asks the sender to look at the outbox now.
func (s *sender) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *sender) id() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relayID
}

// changed returns a channel closed at the sender's next progress.
func (s *sender) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.progress
}

func (s *sender) signal() {
	s.mu.Lock()
	close(s.progress)
	s.progress = make(chan struct{})
	s.mu.Unlock()
}

func (s *sender) fail(err error) {
	msg := err.Error()
	s.lastError.Store(&msg)
	s.failures.Add(1)
	s.signal()
}

// ensureCreated creates the session on the relay when its id is unknown.
func (s *sender) ensureCreated(ctx context.Context) (string, error) {
	if id := s.id(); id != "" {
		return id, nil
	}
	info, err := s.c.api.CreateSession(ctx, SessionCreate{Tag: s.tag, Metadata: s.st.Metadata, DataEncryptionKey: s.st.DataEncryptionKey})
	if err != nil {
		return "", fmt.Errorf("create session %s: %w", s.tag, err)
	}
	if err := checkCreated(info, "", s.st); err != nil {
		return "", fmt.Errorf("create session %s: %w", s.tag, err)
	}
	raw, err := s.st.encode()
	if err != nil {
		return "", err
	}
	if err := s.c.store.PutSession(ctx, s.tag, info.ID, raw); err != nil {
		return "", err
	}
	s.mu.Lock()
	s.relayID = info.ID
	cb := s.onCreated
	s.mu.Unlock()
	if cb != nil {
		cb(info)
	}
	s.signal()
	return info.ID, nil
}

// run sends until ctx ends, or (untilEmpty) until the outbox holds nothing
// more for the session.
func (s *sender) run(ctx context.Context, untilEmpty bool) {
	var b = s.c.cfg.Backoff
	b.n = 0
	for ctx.Err() == nil {
		progressed, err := s.step(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.fail(err)
			d := b.Next()
			if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrForeignSession) {
				_, hi := b.bounds()
				d = hi
			}
			s.c.log.Warn().Err(err).Str("tag", s.tag).Dur("retry_in", d).Msg("outbox send failed")
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			continue
		}
		b.Reset()
		if progressed {
			continue
		}
		if untilEmpty {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		}
	}
}

// step sends one batch. It reports whether it sent anything.
func (s *sender) step(ctx context.Context) (bool, error) {
	items, err := s.c.store.Pending(ctx, s.tag, MaxBatch)
	if err != nil {
		return false, err
	}
	if len(items) == 0 {
		return false, nil
	}
	sid, err := s.ensureCreated(ctx)
	if err != nil {
		return false, err
	}
	return true, s.send(ctx, sid, items)
}

// send posts items; a batch the relay refuses as such is split in halves
// until the refused row is alone, and that row is moved to the outbox's
// rejected table with the relay's reason (counted and logged, never lost).
func (s *sender) send(ctx context.Context, sid string, items []outbox.Item) error {
	msgs := make([]OutgoingMessage, len(items))
	for i, it := range items {
		msgs[i] = OutgoingMessage{Content: it.Content, LocalID: it.LocalID}
	}
	receipts, err := s.c.api.SendMessages(ctx, sid, msgs)
	if errors.Is(err, ErrRejected) {
		if len(items) > 1 {
			half := len(items) / 2
			if err := s.send(ctx, sid, items[:half]); err != nil {
				return err
			}
			return s.send(ctx, sid, items[half:])
		}
		reason := err.Error()
		if rerr := s.c.store.Reject(ctx, s.tag, items[0].LocalID, reason); rerr != nil {
			return rerr
		}
		s.rejected.Add(1)
		s.c.log.Error().Str("tag", s.tag).Str("localId", items[0].LocalID).Str("reason", reason).Msg("relay refused a message; moved to the outbox's rejected rows")
		s.signal()
		return nil
	}
	if err != nil {
		return err
	}
	// The relay stored them: that is told at once, before the removal's
	// commit.
	if s.onSent != nil {
		s.onSent(items, receipts)
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.LocalID
	}
	// Removal is not retried on failure: the rows stay and are resent, which
	// the relay answers with the original seq.
	if _, err := s.c.store.Remove(ctx, s.tag, ids); err != nil {
		return err
	}
	s.sent.Add(int64(len(items)))
	s.batches.Add(1)
	s.signal()
	return nil
}

// sessionState is what the outbox keeps per session (JSON in its sessions
// table): enough to create the session on the relay later and to reopen it
// after a restart.
type sessionState struct {
	V       int    `json:"v"`       // format version, 1
	Account string `json:"account"` // Client.Account of the owner
	Relay   string `json:"relay"`   // relay base URL
	Variant string `json:"variant"` // "legacy" or "dataKey"
	// Metadata is the base64 ciphertext of the metadata to create the
	// session with.
	Metadata string `json:"metadata"`
	// DataEncryptionKey is the wrapped session key sent on create (nil for legacy).
	DataEncryptionKey *string `json:"dataEncryptionKey"`
	// SealedKey is base64 of the raw session key sealed with the local
	// cipher (machine key, or account secret for legacy credentials); empty
	// for legacy sessions, which use the account secret.
	SealedKey string `json:"sealedKey,omitempty"`
}

func (st sessionState) encode() ([]byte, error) {
	b, err := jsonMarshal(st)
	if err != nil {
		return nil, fmt.Errorf("relay: encode session state: %w", err)
	}
	return b, nil
}

func decodeSessionState(b []byte) (sessionState, error) {
	var st sessionState
	if err := jsonUnmarshal(b, &st); err != nil {
		return st, fmt.Errorf("relay: decode session state: %w", err)
	}
	if st.V != 1 || st.Account == "" || st.Relay == "" || st.Metadata == "" {
		return st, fmt.Errorf("relay: decode session state: version %d or missing fields: %w", st.V, ErrProtocol)
	}
	return st, nil
}
