package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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
	// removed from the outbox (nil when not needed), with the rows the
	// relay holds as this client's (a conflict's row is left out).
	onSent func(items []outbox.Item, receipts []SentMessage)
	// rewrite writes the content of a version whose localId the relay
	// holds a foreign row under again, under the record's next version,
	// and returns that version's localId ("" when a later version of the
	// record supersedes it, or when it cannot: nil rewrite).
	rewrite func(ctx context.Context, it outbox.Item) (string, error)
	// strikes counts, per record, the conflicts in a row (owned by run).
	strikes map[string]int

	kick     chan struct{}
	progress chan struct{} // closed and replaced after every batch or state change

	sent      atomic.Int64
	batches   atomic.Int64
	failures  atomic.Int64
	rejected  atomic.Int64
	conflicts atomic.Int64
	lastError atomic.Pointer[string]
}

// maxStrikes bounds how many times in a row one record is written again
// after conflicts: a relay that takes every next localId of a record is
// not followed forever (the conflicts stay noted, and the log says so).
const maxStrikes = 16

func newSender(c *Client, tag, relayID string, st sessionState, onCreated func(SessionInfo)) *sender {
	return &sender{c: c, tag: tag, st: st, relayID: relayID, onCreated: onCreated,
		kick: make(chan struct{}, 1), progress: make(chan struct{}), strikes: map[string]int{}}
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
	// A row the relay did not store with this post (its localId was taken)
	// is read back: it must be this client's, byte for byte.
	foreign, err := s.verify(ctx, sid, items, receipts)
	if err != nil {
		return err
	}
	ownItems, ownReceipts := items, receipts
	if len(foreign) > 0 {
		ownItems, ownReceipts = nil, nil
		bad := map[string]bool{}
		for _, f := range foreign {
			bad[f.item.LocalID] = true
		}
		for _, it := range items {
			if !bad[it.LocalID] {
				ownItems = append(ownItems, it)
			}
		}
		for _, r := range receipts {
			if !bad[r.LocalIDOrEmpty()] {
				ownReceipts = append(ownReceipts, r)
			}
		}
		for _, f := range foreign {
			if err := s.conflict(ctx, f); err != nil {
				return err
			}
		}
	}
	for _, it := range ownItems {
		delete(s.strikes, it.Record)
	}
	// The relay stored them: that is told at once, before the removal's
	// commit.
	if s.onSent != nil && len(ownItems) > 0 {
		s.onSent(ownItems, ownReceipts)
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
	s.sent.Add(int64(len(ownItems)))
	s.batches.Add(1)
	s.signal()
	return nil
}

// foreignRow is a version whose localId the relay holds a row under that
// is not this client's.
type foreignRow struct {
	item   outbox.Item
	seq    int64
	detail string
}

// verify reads back the rows of items the relay answered without "new"
// (stored before this post: a resend of ours, or someone else's row under
// our localId) and returns those that are not this client's: a row is
// ours when the relay shows, at the seq it answered, that localId with
// exactly the outbox's ciphertext. Against a relay that never says "new"
// (the reference relay) every batch is read back. Errors are the fetch's.
func (s *sender) verify(ctx context.Context, sid string, items []outbox.Item, receipts []SentMessage) ([]foreignRow, error) {
	byID := make(map[string]SentMessage, len(receipts))
	var seqs []int64
	for _, r := range receipts {
		id := r.LocalIDOrEmpty()
		if _, dup := byID[id]; dup {
			continue
		}
		byID[id] = r
		if !r.New {
			seqs = append(seqs, r.Seq)
		}
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	rows := make(map[int64]StoredMessage, len(seqs))
	looked := make(map[int64]bool, len(seqs))
	last := seqs[len(seqs)-1]
	for _, seq := range seqs {
		if looked[seq] {
			continue
		}
		page, err := s.c.api.FetchMessages(ctx, sid, seq-1, int(min(int64(MaxFetchLimit), last-seq+1)))
		if err != nil {
			return nil, fmt.Errorf("read back the rows of localIds already taken: %w", err)
		}
		looked[seq] = true
		for _, m := range page.Messages {
			if _, want := slices.BinarySearch(seqs, m.Seq); want {
				rows[m.Seq], looked[m.Seq] = m, true
			}
		}
	}
	var out []foreignRow
	for _, it := range items {
		r := byID[it.LocalID]
		if r.New {
			continue
		}
		m, ok := rows[r.Seq]
		switch {
		case !ok:
			out = append(out, foreignRow{it, r.Seq, fmt.Sprintf("the relay answered seq %d but shows no row there", r.Seq)})
		case m.LocalIDOrEmpty() != it.LocalID:
			out = append(out, foreignRow{it, r.Seq, fmt.Sprintf("the row at seq %d has localId %q", r.Seq, m.LocalIDOrEmpty())})
		case m.Content.T != "encrypted" || !sameCiphertext(m.Content.C, it.Content):
			out = append(out, foreignRow{it, r.Seq, fmt.Sprintf("the row at seq %d holds another ciphertext", r.Seq)})
		}
	}
	return out, nil
}

// sameCiphertext compares two base64 ciphertexts byte for byte (padding
// aside).
func sameCiphertext(a, b string) bool {
	if a == b {
		return true
	}
	x, err1 := unb64(a)
	y, err2 := unb64(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// conflict reports a version whose localId the relay holds a foreign row
// under (log, counter, the outbox's conflicts table) and writes its
// content again under the record's next version, unless a later version
// supersedes it or the record already conflicted maxStrikes times in a
// row. Errors are the outbox's (the version then stays and is retried).
func (s *sender) conflict(ctx context.Context, f foreignRow) error {
	s.conflicts.Add(1)
	if err := s.c.store.NoteConflict(ctx, s.tag, f.item.LocalID, f.seq, f.detail); err != nil {
		return err
	}
	ev := s.c.log.Error().Str("tag", s.tag).Str("localId", f.item.LocalID).Int64("seq", f.seq).Str("detail", f.detail)
	if s.rewrite == nil {
		ev.Msg("the relay holds a row that is not this client's under one of its localIds; this version is not on the relay")
		return nil
	}
	s.strikes[f.item.Record]++
	if n := s.strikes[f.item.Record]; n > maxStrikes {
		ev.Int("conflicts_in_a_row", n).Msg("the relay holds a row that is not this client's under one of its localIds; the record conflicted too often to write it again")
		return nil
	}
	next, err := s.rewrite(ctx, f.item)
	if err != nil {
		return fmt.Errorf("write %s again after a conflict: %w", f.item.LocalID, err)
	}
	if next == "" {
		ev.Msg("the relay holds a row that is not this client's under one of its localIds; a later version of the record carries it")
		return nil
	}
	ev.Str("written_as", next).Msg("the relay holds a row that is not this client's under one of its localIds; the version is written again")
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

// OutboxRelay returns the relay base URL a session's outbox versions are
// for, from the state the client keeps with the session in the outbox
// (outbox.Store.Session's state: JSON {"v":1,"account","relay",…}). It
// fails with ErrProtocol on a state it cannot read.
func OutboxRelay(state []byte) (string, error) {
	st, err := decodeSessionState(state)
	if err != nil {
		return "", err
	}
	return st.Relay, nil
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
