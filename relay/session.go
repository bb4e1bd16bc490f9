package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/relay/outbox"
)

// SessionOptions describe the session to open.
type SessionOptions struct {
	// Tag is the caller's stable name of the session (a UUID): the same tag
	// opens the same relay session again (also after a restart), and the
	// outbox files the session's rows under it. Required.
	Tag string
	// Metadata is the plaintext JSON metadata (docs/ARCHITECTURE.md "Session metadata")
	// to create the session with. Ignored when the session already exists.
	Metadata json.RawMessage
	// ReceiveAfter is the seq after which Receive starts: 0 (the default)
	// delivers every message of the session not written by this client,
	// FromNow only those stored after the session was opened on the relay.
	ReceiveAfter int64
	// OnSent, when set, is called after each batch the relay acknowledged
	// (as soon as its answer arrived, before the rows leave the outbox),
	// with the localIds and the seqs it assigned, in seq order.
	OnSent func(acks []Ack)
	// OnStateUpdate, when set, is called when another device changed the
	// session's metadata or agent state (after the cache was updated).
	OnStateUpdate func(u StateUpdate)
	// ReceiveBuffer is the capacity of the Receive channel (64 when zero).
	ReceiveBuffer int
	// CheckRecord, when set, checks every decrypted message of the stream
	// against the localId it was stored under (happy sets
	// session.CheckRecord: the plaintext must be the record version
	// "<recordId>.<version>" names). A message it refuses is delivered
	// with Err a *RecordError and no plaintext, and counted in
	// SessionStats.Refused: a relay can replay a row's ciphertext under
	// another localId, never make one up.
	CheckRecord func(localID string, plaintext []byte) error
}

// FromNow as SessionOptions.ReceiveAfter starts receiving after the
// session's current last seq.
const FromNow int64 = -1

// Ack is the relay's receipt of one message version.
type Ack struct {
	LocalID string // "<recordId>.<version>"
	Seq     int64  // the message's seq in the session
	// EnqueuedAt is when the version was committed to the outbox.
	EnqueuedAt time.Time
}

// Incoming is one message of the session's stream, delivered in seq order.
type Incoming struct {
	Seq       int64
	ID        string // relay message id
	LocalID   string // the writer's localId ("" when absent)
	CreatedAt time.Time
	// Plaintext is the decrypted JSON (nil when Err is set).
	Plaintext json.RawMessage
	// Sealed is the message's ciphertext as stored (base64), for
	// Session.CheckPrompt.
	Sealed string
	// Err is a *DecryptError when the message could not be decrypted (wrong
	// key or variant, bad base64, not an encrypted envelope), or a
	// *RecordError when SessionOptions.CheckRecord refused it. Such a
	// message is still delivered, in order, so it is seen and counted,
	// never skipped.
	Err error
}

// StateUpdate tells which session value another device changed.
type StateUpdate struct {
	Metadata   bool // Metadata() changed
	AgentState bool // AgentState() changed
}

// SessionStats are a session's counters since it was opened.
type SessionStats struct {
	Enqueued        int64  // versions committed to the outbox
	Sent            int64  // versions the relay acknowledged as this client's
	Pending         int    // rows still in the outbox
	Rejected        int64  // rows the relay refused permanently (kept in the outbox's rejected table)
	Conflicts       int64  // versions whose localId held someone else's row (noted in the outbox; written again unless superseded)
	SendFailures    int64  // failed send attempts (each retried)
	Delivered       int64  // messages delivered on Receive (including decrypt failures and refusals)
	Refused         int64  // messages SessionOptions.CheckRecord refused (delivered with a *RecordError)
	Echoes          int64  // own messages seen in the stream and skipped
	DuplicateEvents int64  // live events for a seq already processed
	GapFetches      int64  // fetches started because a live event skipped seqs
	Fetches         int64  // message pages fetched
	DecryptFailures int64  // messages, states or RPC params that would not decrypt
	Connects        int64  // socket connections made (1 + reconnects)
	LastSeq         int64  // last seq processed by the receive path
	LastError       string // the last send error ("" when none)
}

// Session is an open relay session: it encrypts and durably enqueues message
// versions, sends them, receives the session's stream in seq order, keeps
// the metadata and agent state (compare-and-set), answers RPC calls and
// sends the presence heartbeat. Its methods are safe for concurrent use.
type Session struct {
	c      *Client
	tag    string
	cipher crypto.Cipher
	opts   SessionOptions
	st     sessionState
	unlock func()

	snd  *sender
	conn *conn
	rcv  *receiver

	created   chan struct{} // closed once the relay id is known
	createdMu sync.Once

	mu         sync.Mutex // orders version assignment and outbox submission
	versions   map[string]int64
	stateMu    sync.Mutex
	metadata   json.RawMessage
	metaVer    int64
	agentState json.RawMessage
	agentVer   int64
	thinking   bool
	mode       string
	rpc        *rpcTable

	enqueued        atomic.Int64
	decryptFailures atomic.Int64
	createdSeq      atomic.Int64 // the session's seq when the relay answered create (-1 before)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// OpenSession opens (creating when needed) the session named opts.Tag and
// starts its background work. The relay is contacted once, bounded by ctx and
// the request timeout: when it cannot be reached the session still opens and
// is created on the relay later, while its messages wait in the outbox
// (ID returns "" until then). A session with this tag open in another
// process fails with outbox.ErrLocked; a refused token with ErrUnauthorized.
func (c *Client) OpenSession(ctx context.Context, opts SessionOptions) (*Session, error) {
	if opts.Tag == "" {
		return nil, errors.New("relay: open session: empty tag")
	}
	unlock, err := c.claim(opts.Tag)
	if err != nil {
		return nil, err
	}
	s, err := c.openSession(ctx, opts, unlock)
	if err != nil {
		unlock()
		return nil, err
	}
	return s, nil
}

func (c *Client) openSession(ctx context.Context, opts SessionOptions, unlock func()) (*Session, error) {
	relayID, raw, ok, err := c.store.Session(ctx, opts.Tag)
	if err != nil {
		return nil, err
	}
	var st sessionState
	var ci crypto.Cipher
	if ok {
		st, err = decodeSessionState(raw)
		if err != nil {
			return nil, err
		}
		if st.Account != c.account || st.Relay != c.api.BaseURL() {
			return nil, fmt.Errorf("relay: session %q belongs to another account or relay (%s): %w", opts.Tag, st.Relay, ErrRejected)
		}
		ci, err = c.sessionCipher(st)
		if err != nil {
			return nil, err
		}
	} else {
		md := opts.Metadata
		if md == nil {
			md = json.RawMessage(`{}`)
		}
		enc, err := c.creds.NewSession()
		if err != nil {
			return nil, fmt.Errorf("relay: new session key: %w", err)
		}
		ci = enc.Cipher
		sealedMD, err := ci.Seal(md)
		if err != nil {
			return nil, fmt.Errorf("relay: seal metadata: %w", err)
		}
		st = sessionState{V: 1, Account: c.account, Relay: c.api.BaseURL(), Variant: ci.Variant().String(),
			Metadata: b64(sealedMD), DataEncryptionKey: enc.DataEncryptionKeyBase64()}
		if enc.Key != nil {
			sk, err := c.local.Seal(enc.Key[:])
			if err != nil {
				return nil, fmt.Errorf("relay: seal session key: %w", err)
			}
			st.SealedKey = b64(sk)
		}
		raw, err := st.encode()
		if err != nil {
			return nil, err
		}
		if err := c.store.PutSession(ctx, opts.Tag, "", raw); err != nil {
			return nil, err
		}
	}
	// Create (or find) the session now when the relay answers; otherwise
	// the sender creates it when it can.
	var created *SessionInfo
	info, err := c.api.CreateSession(ctx, SessionCreate{Tag: opts.Tag, Metadata: st.Metadata, DataEncryptionKey: st.DataEncryptionKey})
	switch {
	case err == nil:
		if err := checkCreated(info, relayID, st); err != nil {
			return nil, fmt.Errorf("relay: open session %q: %w", opts.Tag, err)
		}
		raw, err := st.encode()
		if err != nil {
			return nil, err
		}
		if err := c.store.PutSession(ctx, opts.Tag, info.ID, raw); err != nil {
			return nil, err
		}
		relayID, created = info.ID, &info
	case errors.Is(err, ErrUnavailable):
		c.log.Warn().Err(err).Str("tag", opts.Tag).Msg("relay unavailable; the session will be created when it answers")
	default:
		return nil, fmt.Errorf("relay: open session %q: %w", opts.Tag, err)
	}

	versions, err := c.store.LastVersions(ctx, opts.Tag)
	if err != nil {
		return nil, err
	}
	if opts.ReceiveBuffer <= 0 {
		opts.ReceiveBuffer = 64
	}
	s := &Session{c: c, tag: opts.Tag, cipher: ci, opts: opts, st: st, unlock: unlock,
		created: make(chan struct{}), versions: versions}
	s.createdSeq.Store(-1)
	s.mode = "remote"
	s.ctx, s.cancel = context.WithCancel(c.ctx)
	s.rpc = newRPCTable(s.ctx, s.ID, ci, c.controlDir(), c.now, s.countDecrypt)
	s.snd = newSender(c, opts.Tag, relayID, st, s.onCreated)
	s.snd.rewrite = s.rewrite
	s.snd.onSent = func(items []outbox.Item, receipts []SentMessage) {
		for _, r := range receipts {
			s.rcv.noteSeq(r.Seq)
		}
		if opts.OnSent == nil {
			return
		}
		at := make(map[string]time.Time, len(items))
		for _, it := range items {
			at[it.LocalID] = it.EnqueuedAt
		}
		acks := make([]Ack, 0, len(receipts))
		for _, r := range receipts {
			id := r.LocalIDOrEmpty()
			if t, ok := at[id]; ok {
				acks = append(acks, Ack{LocalID: id, Seq: r.Seq, EnqueuedAt: t})
			}
		}
		opts.OnSent(acks)
	}
	s.rcv = newReceiver(s, opts.ReceiveAfter)
	s.conn = s.newConn()

	if created != nil {
		s.snd.mu.Lock()
		s.snd.relayID = created.ID
		s.snd.mu.Unlock()
		s.onCreated(*created)
	} else if relayID != "" {
		s.markCreated(relayID)
	}

	s.wg.Add(3)
	go func() { defer s.wg.Done(); s.snd.run(s.ctx, false) }()
	go func() { defer s.wg.Done(); s.conn.run(s.ctx) }()
	go func() { defer s.wg.Done(); s.rcv.run(s.ctx) }()
	s.snd.wake()
	return s, nil
}

func sameKey(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// checkCreated checks the relay's answer to a session's creation (POST
// /v1/sessions, idempotent by tag) against what this client knows of the
// session, so it never writes into a session it did not create nor seals
// with another key than its own (docs/ARCHITECTURE.md, "A session's
// life"). relayID tells the two cases apart:
//
//   - relayID known: the outbox holds the session from its creation by
//     this home (a resume, an orphan's settling, a restart): the answer must
//     be that session (same id) with the wrapped key it was created with;
//     its metadata and messages have moved on since.
//   - relayID empty: this client is creating the session (now, or later
//     through the sender when the relay did not answer at first): the
//     answer must be a fresh session, holding exactly the wrapped key and
//     the metadata ciphertext this client sent, no message (seq 0), no
//     agent state, its metadata never updated (version 0, or 1 for a
//     relay that starts there).
//
// A relay cannot make either up: the wrapped key is random per session,
// and the metadata ciphertext exists only because this client just sent
// it. Errors wrap ErrForeignSession.
func checkCreated(info SessionInfo, relayID string, st sessionState) error {
	if st.DataEncryptionKey != nil && (info.DataEncryptionKey == nil || *info.DataEncryptionKey == "") {
		return fmt.Errorf("the relay answered with session %s without the session key this client sent (taking it would seal the session with the account secret instead): %w", info.ID, ErrForeignSession)
	}
	if relayID != "" {
		if info.ID != relayID {
			return fmt.Errorf("the relay answered with session %s, but this session is %s: %w", info.ID, relayID, ErrForeignSession)
		}
		if !sameKey(info.DataEncryptionKey, st.DataEncryptionKey) {
			return fmt.Errorf("the relay answered with another session key than the one this client created session %s with: %w", info.ID, ErrForeignSession)
		}
		return nil
	}
	var why []string
	if !sameKey(info.DataEncryptionKey, st.DataEncryptionKey) {
		why = append(why, "another session key")
	}
	if info.Metadata != st.Metadata {
		why = append(why, "other metadata")
	}
	if info.MetadataVersion > 1 {
		why = append(why, fmt.Sprintf("metadata version %d", info.MetadataVersion))
	}
	if info.Seq != 0 {
		why = append(why, fmt.Sprintf("%d message(s)", info.Seq))
	}
	if info.AgentState != nil || info.AgentStateVersion != 0 {
		why = append(why, "an agent state")
	}
	if len(why) > 0 {
		return fmt.Errorf("the relay answered with session %s, which is not the new session this client created (it has %s): %w", info.ID, strings.Join(why, ", "), ErrForeignSession)
	}
	return nil
}

// sessionCipher restores the cipher of a session from its stored state.
// LocalSessionCipher returns the cipher of the relay session relayID from
// this machine's outbox, where a session this machine created keeps its
// key sealed with the machine's local key: how a dataKey device, which
// does not hold the account secret, reads the sessions it wrote. ok is
// false when the outbox does not know the session (another machine's).
// Errors: the outbox's, a stored key that does not open
// (ErrDecrypt), a legacy session without the account secret
// (crypto.ErrNoAccountSecret).
func (c *Client) LocalSessionCipher(ctx context.Context, relayID string) (ci crypto.Cipher, ok bool, err error) {
	tag, ok, err := c.store.SessionByRelayID(ctx, relayID)
	if err != nil || !ok {
		return nil, false, err
	}
	_, raw, ok, err := c.store.Session(ctx, tag)
	if err != nil || !ok {
		return nil, false, err
	}
	st, err := decodeSessionState(raw)
	if err != nil {
		return nil, false, err
	}
	if st.Account != c.account || st.Relay != c.api.BaseURL() {
		return nil, false, nil
	}
	ci, err = c.sessionCipher(st)
	if err != nil {
		return nil, false, err
	}
	return ci, true, nil
}

func (c *Client) sessionCipher(st sessionState) (crypto.Cipher, error) {
	if st.SealedKey == "" {
		if c.creds.AccountSecret == nil {
			return nil, fmt.Errorf("relay: legacy session: %w", crypto.ErrNoAccountSecret)
		}
		return crypto.NewLegacyCipher(*c.creds.AccountSecret), nil
	}
	sealed, err := unb64(st.SealedKey)
	if err != nil {
		return nil, fmt.Errorf("relay: stored session key: %w", err)
	}
	key, err := c.local.Open(sealed)
	if err != nil || len(key) != crypto.KeySize {
		return nil, fmt.Errorf("relay: stored session key does not open with this machine's key: %w", errors.Join(ErrDecrypt, err))
	}
	var k [32]byte
	copy(k[:], key)
	return crypto.NewDataKeyCipher(k), nil
}

// onCreated adopts the relay's view of the session after create.
func (s *Session) onCreated(info SessionInfo) {
	s.stateMu.Lock()
	if md, err := s.open("metadata", 0, info.Metadata); err == nil {
		s.metadata, s.metaVer = md, info.MetadataVersion
	} else {
		s.countDecrypt(err)
	}
	if info.AgentState != nil {
		if as, err := s.open("agentState", 0, *info.AgentState); err == nil {
			s.agentState = as
		} else {
			s.countDecrypt(err)
		}
	}
	s.agentVer = info.AgentStateVersion
	s.stateMu.Unlock()
	s.createdSeq.Store(info.Seq)
	s.markCreated(info.ID)
}

func (s *Session) markCreated(id string) {
	s.createdMu.Do(func() {
		s.snd.mu.Lock()
		if s.snd.relayID == "" {
			s.snd.relayID = id
		}
		s.snd.mu.Unlock()
		close(s.created)
	})
}

// Tag is the session's tag.
func (s *Session) Tag() string { return s.tag }

// ID is the relay's session id, or "" while the session has not been created
// on the relay yet.
func (s *Session) ID() string { return s.snd.id() }

// WaitCreated waits until the session exists on the relay and returns its id.
func (s *Session) WaitCreated(ctx context.Context) (string, error) {
	select {
	case <-s.created:
		return s.ID(), nil
	case <-ctx.Done():
		return "", fmt.Errorf("relay: session %s not created yet: %w", s.tag, ctx.Err())
	case <-s.ctx.Done():
		return "", ErrClosed
	}
}

// Cipher is the session's content cipher (for callers that encrypt other
// payloads, e.g. attachments).
func (s *Session) Cipher() crypto.Cipher { return s.cipher }

// LastVersion is the last version enqueued for recordID (0 when none),
// persisted across restarts.
func (s *Session) LastVersion(recordID string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[recordID]
}

// RaiseVersion makes recordID's next version at least v+1: a caller that
// read version v back from the relay (which may hold a version this
// outbox lost to a power cut: versions are posted while they are being
// synced) writes above it, never under a version number the relay
// already holds (it would keep its first copy). Lower v change nothing;
// the raised version is persisted by the next Enqueue.
func (s *Session) RaiseVersion(recordID string, v int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.versions[recordID] < v {
		s.versions[recordID] = v
	}
}

// Enqueue assigns the next version of recordID (1 + the last one ever
// enqueued, across restarts), calls build with it for the plaintext JSON
// (the envelope of docs/ARCHITECTURE.md, which carries the version), encrypts it, and
// returns once the version is durably in the outbox; the sender delivers it
// (from the moment it is committed, see EnqueueAsync). Concurrent calls are ordered (versions and outbox order agree)
// and share one fsync. An error from build is returned as is and uses no
// version; after a failed commit the version is not reused.
func (s *Session) Enqueue(ctx context.Context, recordID string, build func(version int64) ([]byte, error)) (int64, error) {
	v, wait, err := s.EnqueueAsync(ctx, recordID, build)
	if err != nil {
		return 0, err
	}
	if err := wait(); err != nil {
		return 0, err
	}
	return v, nil
}

// EnqueueAsync is Enqueue without the wait for the commit: it returns once
// the version has its place in the outbox's queue, with the function that
// waits until it is durably stored. The sender may send the version before
// that, once it is committed (outbox.Store.AppendStaged): it then survives a
// crash of the process, and the fsync runs alongside the send. Versions
// queued by successive calls commit in that order and share one fsync, so
// a writer with several records to write pays one disk sync, not one per
// record. Errors before queueing are returned directly; the wait
// returns Enqueue's commit error.
func (s *Session) EnqueueAsync(ctx context.Context, recordID string, build func(version int64) ([]byte, error)) (int64, func() error, error) {
	if s.ctx.Err() != nil {
		return 0, nil, ErrClosed
	}
	s.mu.Lock()
	v := s.versions[recordID] + 1
	plain, err := build(v)
	if err != nil {
		s.mu.Unlock()
		return 0, nil, err
	}
	sealed, err := s.cipher.Seal(plain)
	if err != nil {
		s.mu.Unlock()
		return 0, nil, fmt.Errorf("relay: seal %s: %w", outbox.LocalID(recordID, v), err)
	}
	// The sender is woken as soon as the row is committed and readable,
	// so it sends while the outbox syncs the row to disk.
	wait, err := s.c.store.AppendStaged(ctx, s.snd.wake, outbox.Entry{Session: s.tag, Record: recordID, Version: v, Content: b64(sealed)})
	if err != nil {
		s.mu.Unlock()
		return 0, nil, fmt.Errorf("relay: enqueue %s: %w", outbox.LocalID(recordID, v), err)
	}
	s.versions[recordID] = v
	s.mu.Unlock()
	return v, func() error {
		if err := wait(); err != nil {
			return fmt.Errorf("relay: enqueue %s: %w", outbox.LocalID(recordID, v), err)
		}
		s.enqueued.Add(1)
		return nil
	}, nil
}

// rewrite writes the content of it, a version whose localId the relay
// holds a foreign row under, again under the record's next version (its
// plaintext's version set to it), and returns the new localId; "" when a
// later version of the record was enqueued since (it carries the record).
func (s *Session) rewrite(ctx context.Context, it outbox.Item) (string, error) {
	s.mu.Lock()
	last := s.versions[it.Record]
	if last > it.Version {
		s.mu.Unlock()
		return "", nil
	}
	v := last + 1
	content, err := reseal(s.cipher, it, v)
	if err != nil {
		s.mu.Unlock()
		return "", err
	}
	wait, err := s.c.store.AppendStaged(ctx, s.snd.wake, outbox.Entry{Session: s.tag, Record: it.Record, Version: v, Content: content})
	if err != nil {
		s.mu.Unlock()
		return "", err
	}
	s.versions[it.Record] = v
	s.mu.Unlock()
	if err := wait(); err != nil {
		return "", err
	}
	return outbox.LocalID(it.Record, v), nil
}

// reseal returns the ciphertext of it's plaintext as version v: its
// top-level "version" (the envelope's, docs/ARCHITECTURE.md "Relay
// envelope and versions") set to v, so a reader finds the version its
// localId names; a plaintext without one (a legacy record) is sealed again
// as it is. Errors: it does not open with ci, or does not seal.
func reseal(ci crypto.Cipher, it outbox.Item, v int64) (string, error) {
	plain, err := openPayload(ci, "outbox row", 0, it.Content)
	if err != nil {
		return "", fmt.Errorf("reopen %s: %w", it.LocalID, err)
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(plain, &env) == nil && env != nil {
		if _, ok := env["version"]; ok {
			env["version"] = json.RawMessage(strconv.FormatInt(v, 10))
			if plain, err = json.Marshal(env); err != nil {
				return "", fmt.Errorf("re-encode %s: %w", it.LocalID, err)
			}
		}
	}
	sealed, err := ci.Seal(plain)
	if err != nil {
		return "", fmt.Errorf("seal %s: %w", outbox.LocalID(it.Record, v), err)
	}
	return b64(sealed), nil
}

// isOwn reports whether localID names a version this client enqueued for
// the session (in this process or an earlier one): "<record>.<version>"
// with version <= the record's last version in the outbox.
func (s *Session) isOwn(localID string) bool {
	rec, v, ok := splitLocalID(localID)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last, known := s.versions[rec]
	return known && v <= last
}

// Flush waits until the relay acknowledged every version enqueued so far
// (the session's outbox is empty) or ctx ends; then the error wraps
// ctx.Err() and names the last send error.
func (s *Session) Flush(ctx context.Context) error {
	for {
		ch := s.snd.changed()
		n, err := s.c.store.Count(ctx, s.tag)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		s.snd.wake()
		select {
		case <-ch:
		case <-ctx.Done():
			last := ""
			if p := s.snd.lastError.Load(); p != nil {
				last = " (last error: " + *p + ")"
			}
			return fmt.Errorf("relay: flush %s: %d versions not acknowledged%s: %w", s.tag, n, last, ctx.Err())
		case <-s.ctx.Done():
			return ErrClosed
		}
	}
}

// Receive is the session's message stream in seq order without gaps and
// without this client's own messages. It is closed when the session closes.
// A consumer that stops reading stalls the stream (nothing is dropped).
func (s *Session) Receive() <-chan Incoming { return s.rcv.out }

// Stats returns the session's counters.
func (s *Session) Stats() SessionStats {
	n, _ := s.c.store.Count(context.Background(), s.tag)
	st := SessionStats{
		Enqueued:        s.enqueued.Load(),
		Sent:            s.snd.sent.Load(),
		Pending:         n,
		Rejected:        s.snd.rejected.Load(),
		Conflicts:       s.snd.conflicts.Load(),
		SendFailures:    s.snd.failures.Load(),
		Delivered:       s.rcv.delivered.Load(),
		Refused:         s.rcv.refused.Load(),
		Echoes:          s.rcv.echoes.Load(),
		DuplicateEvents: s.rcv.duplicates.Load(),
		GapFetches:      s.rcv.gapFetches.Load(),
		Fetches:         s.rcv.fetches.Load(),
		DecryptFailures: s.decryptFailures.Load(),
		Connects:        s.conn.Connects(),
		LastSeq:         s.rcv.last.Load(),
	}
	if p := s.snd.lastError.Load(); p != nil {
		st.LastError = *p
	}
	return st
}

// SetActivity sets the fields of the presence heartbeat (session-alive,
// every 2 s while connected): whether the agent is thinking and its mode
// (e.g. "local" or "remote").
func (s *Session) SetActivity(thinking bool, mode string) {
	s.stateMu.Lock()
	s.thinking, s.mode = thinking, mode
	s.stateMu.Unlock()
}

// SendTextDelta seals plain (the JSON of a live text delta,
// docs/ARCHITECTURE.md section "Live text") with the session's content
// cipher and emits it as text-delta {sid, message} on the session's socket,
// without waiting and without an acknowledgement. It never blocks the
// caller: while the socket is not connected, or the session not yet created
// on the relay, the delta is dropped (readers get the stored version). A
// relay that does not know the event ignores it. It reports whether the
// delta was handed to the socket.
func (s *Session) SendTextDelta(plain []byte) bool {
	sid := s.ID()
	if sid == "" || s.ctx.Err() != nil {
		return false
	}
	sock, _ := s.conn.current()
	if sock == nil || !sock.Connected() {
		return false
	}
	sealed, err := s.cipher.Seal(plain)
	if err != nil {
		return false
	}
	return sock.Emit("text-delta", map[string]any{"sid": sid, "message": b64(sealed)}) == nil
}

// End tells the relay the session ended (session-end) when connected, and
// waits (at most the ack timeout) until the relay has taken it. It does not
// close the session.
func (s *Session) End(ctx context.Context) error {
	sid, err := s.WaitCreated(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.AckTimeout)
	defer cancel()
	sock, err := s.conn.wait(ctx)
	if err != nil {
		return fmt.Errorf("relay: session-end: %w", err)
	}
	if err := sock.Emit("session-end", map[string]any{"sid": sid, "time": s.c.now().UnixMilli()}); err != nil {
		return fmt.Errorf("relay: session-end: %w", err)
	}
	// session-end has no acknowledgement; a ping with one, answered after
	// the events sent before it on this socket, tells that it arrived before
	// a happy that is about to exit closes the connection.
	if _, err := sock.Call(ctx, "ping"); err != nil {
		return fmt.Errorf("relay: session-end: flush: %w", err)
	}
	return nil
}

// Close stops the session's background work, closes Receive and releases
// the session's outbox lock. Versions not yet acknowledged stay in the
// outbox and are sent by the next client that opens the session or drains
// it. Safe to call more than once.
func (s *Session) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		if sock, _ := s.conn.current(); sock != nil {
			_ = sock.Close()
		}
		s.rpc.close()
		s.unlock()
	})
	return nil
}

// open decodes and decrypts a base64 payload of the session.
func (s *Session) open(what string, seq int64, b64text string) (json.RawMessage, error) {
	return openPayload(s.cipher, what, seq, b64text)
}

func openPayload(ci crypto.Cipher, what string, seq int64, b64text string) (json.RawMessage, error) {
	raw, err := unb64(b64text)
	if err != nil {
		return nil, &DecryptError{What: what, Seq: seq, Reason: fmt.Errorf("%w: %v", crypto.ErrBadEncoding, err)}
	}
	plain, err := ci.Open(raw)
	if err != nil {
		return nil, &DecryptError{What: what, Seq: seq, Reason: err}
	}
	if !json.Valid(plain) {
		return nil, &DecryptError{What: what, Seq: seq, Reason: fmt.Errorf("%w: decrypted payload is not JSON", ErrProtocol)}
	}
	return json.RawMessage(plain), nil
}

func (s *Session) countDecrypt(err error) {
	s.decryptFailures.Add(1)
	s.c.log.Warn().Err(err).Str("tag", s.tag).Msg("decrypt failure")
}
