// Package store defines what the relay server keeps and the interface a
// storage backend implements. Handlers depend only on Store, so another
// backend (PostgreSQL) can be added without touching them; the embedded
// SQLite backend lives in store/sqlite.
//
// Every method that reads or writes a session or machine takes the account
// id and matches it in the same query: a row of another account behaves
// exactly like a missing row (ErrNotFound). The opaque strings (metadata,
// agent state, daemon state, message content, data encryption keys) are
// stored and returned byte for byte; the store never looks inside them.
//
// Times are Unix milliseconds (int64), as on the wire.
package store

import (
	"context"
	"crypto/rand"
	"errors"
)

// ErrNotFound is returned when a row does not exist or belongs to another account.
var ErrNotFound = errors.New("store: not found")

// ErrUnavailable wraps a failure of the database server rather than of the
// request (the server restarting, unreachable, out of connections, a
// deadlock or serialization failure): nothing was written, or the write was
// idempotent, and the same request may succeed when tried again.
var ErrUnavailable = errors.New("store: database unavailable")

// ErrAnswered is AnswerAuthRequest's answer for a request that already has
// an answer (the first one stays).
var ErrAnswered = errors.New("store: auth request already answered")

// ErrChallengeUsed is UseChallenge's answer for a challenge recorded before.
var ErrChallengeUsed = errors.New("store: auth challenge already used")

// KeepForever is UseChallenge's keepUntil for a challenge that is never
// pruned (math.MaxInt64).
const KeepForever int64 = 1<<63 - 1

// Account is one user, keyed by an Ed25519 public key (lowercase hex).
type Account struct {
	ID        string
	PublicKey string
	CreatedAt int64
	UpdatedAt int64
}

// Session is one relay session. Tag is unique per account. Seq is the last
// allocated message seq (0 before the first message). AgentState nil means
// null. DataEncryptionKey nil means null; otherwise the client's base64 text.
type Session struct {
	ID                string
	AccountID         string
	Tag               string
	Seq               int64
	Metadata          string
	MetadataVersion   int64
	AgentState        *string
	AgentStateVersion int64
	DataEncryptionKey *string
	Active            bool
	ActiveAt          int64
	CreatedAt         int64
	UpdatedAt         int64
}

// NewSession is the body of a get-or-create by tag.
type NewSession struct {
	Tag               string
	Metadata          string
	DataEncryptionKey *string
}

// Machine is one registered computer of an account, keyed by (account, id).
// DaemonState nil means null.
type Machine struct {
	ID                 string
	AccountID          string
	Metadata           string
	MetadataVersion    int64
	DaemonState        *string
	DaemonStateVersion int64
	DataEncryptionKey  *string
	Seq                int64
	Active             bool
	ActiveAt           int64
	CreatedAt          int64
	UpdatedAt          int64
}

// NewMachine is the body of a machine get-or-create.
type NewMachine struct {
	ID                string
	Metadata          string
	DaemonState       *string
	DataEncryptionKey *string
}

// Message is one stored session message. Content is the client's ciphertext
// (the `c` of `{t:"encrypted", c}`); it is empty in rows returned for
// existing localIds by AppendMessages. LocalID nil means null.
type Message struct {
	ID        string
	SessionID string
	Seq       int64
	LocalID   *string
	Content   string
	CreatedAt int64
	UpdatedAt int64
}

// NewMessage is one message of a POST batch.
type NewMessage struct {
	LocalID string
	Content string
}

// AppendResult is the outcome of AppendMessages: Rows holds every distinct
// localId of the batch (existing and new) sorted by seq; Created holds only
// the new rows, in seq order, with content; FirstUpdateSeq is the account
// update seq allocated for Created[0] (Created[i] got FirstUpdateSeq+i), or 0
// when nothing was created.
type AppendResult struct {
	Rows           []Message
	Created        []Message
	FirstUpdateSeq int64
}

// AppendStarter is implemented by a store that commits concurrent appends
// together (the SQLite store's group commit). StartAppend queues the same
// append as AppendMessages and returns at once with the function that
// waits for its outcome; that wait returns only after the append's rows
// were committed (or with the error of the commit that failed). Appends
// get their session and account seqs in the order StartAppend was called.
type AppendStarter interface {
	StartAppend(ctx context.Context, accountID, sessionID string, msgs []NewMessage, now int64) func() (AppendResult, error)
}

// Page selects messages: with Before > 0, seq < Before in descending order;
// otherwise seq > After in ascending order. Limit is the page size (≥ 1).
type Page struct {
	After  int64
	Before int64
	Limit  int
}

// CAS is the outcome of a compare-and-set on a versioned value. OK reports
// whether the write happened; Version and Value are then the new ones, or the
// current ones on a mismatch.
type CAS struct {
	OK      bool
	Version int64
	Value   *string
}

// AuthRequest is a pending or answered terminal pairing request, keyed by the
// terminal's box public key (lowercase hex).
type AuthRequest struct {
	ID                string
	PublicKey         string
	SupportsV2        bool
	Response          *string
	ResponseAccountID *string
	CreatedAt         int64
}

// PushToken is a device push token of an account.
type PushToken struct {
	ID        string
	Token     string
	CreatedAt int64
	UpdatedAt int64
}

// WebPushSubscription is a browser's Web Push subscription (RFC 8030) of an
// account, as PushSubscription.toJSON() gives it: Endpoint is the push
// service URL to POST to, P256dh the browser's P-256 public key
// (uncompressed point, base64url) and Auth its 16-byte auth secret
// (base64url), the keys of RFC 8291 message encryption. Times are Unix ms.
type WebPushSubscription struct {
	ID        string
	Endpoint  string
	P256dh    string
	Auth      string
	CreatedAt int64
	UpdatedAt int64
}

// UsageReport is the last usage figures reported under (account, session, key).
// Data is the JSON text of {tokens, cost} as received.
type UsageReport struct {
	ID        string
	SessionID string
	Key       string
	Data      string
	CreatedAt int64
	UpdatedAt int64
}

// Presence is a session or machine whose activity changed (returned by the
// Expire methods).
type Presence struct {
	AccountID string
	ID        string
	ActiveAt  int64
}

// Store is a storage backend. All methods are safe for concurrent use and
// honour ctx. Errors other than the sentinels are wrapped backend errors.
type Store interface {
	// UpsertAccount returns the account of publicKey (hex), creating it on first sight.
	UpsertAccount(ctx context.Context, publicKey string, now int64) (Account, error)
	// AccountByKey returns the account of publicKey (hex) or ErrNotFound.
	AccountByKey(ctx context.Context, publicKey string) (Account, error)
	// UseChallenge records the sign-in challenge with this digest (hex
	// SHA-256 of the public key and the challenge) as used at now (Unix
	// ms), to be kept until keepUntil (KeepForever: for good). A digest
	// recorded before, whenever, is ErrChallengeUsed and changes nothing:
	// of two callers racing with one challenge exactly one succeeds.
	UseChallenge(ctx context.Context, digest string, now, keepUntil int64) error
	// DeleteChallengesBefore removes the used challenges whose keepUntil
	// is before cutoff and returns how many.
	DeleteChallengesBefore(ctx context.Context, cutoff int64) (int64, error)
	// NextUpdateSeqs allocates n (≥ 1) consecutive per-account update seqs and
	// returns the first.
	NextUpdateSeqs(ctx context.Context, accountID string, n int) (int64, error)

	// UpsertAuthRequest returns the terminal pairing request of publicKey,
	// creating it (with supportsV2) when missing.
	UpsertAuthRequest(ctx context.Context, publicKey string, supportsV2 bool, now int64) (AuthRequest, error)
	// AuthRequest returns the request of publicKey or ErrNotFound.
	AuthRequest(ctx context.Context, publicKey string) (AuthRequest, error)
	// AnswerAuthRequest stores response and accountID on the request of
	// publicKey unless it was already answered (then nothing changes and
	// the error is ErrAnswered). ErrNotFound when there is no request.
	AnswerAuthRequest(ctx context.Context, publicKey, response, accountID string) error
	// DeleteAuthRequest removes the request with this id (not public key:
	// a newer request of the same key is left alone) and returns what it
	// held. ErrNotFound when it is gone, so of two callers racing to take
	// one answered request exactly one gets it.
	DeleteAuthRequest(ctx context.Context, id string) (AuthRequest, error)
	// AuthRequestsSince lists up to limit requests created at or after
	// since, newest first (a flood of requests cannot push a fresh one out
	// of a code lookup's page).
	AuthRequestsSince(ctx context.Context, since int64, limit int) ([]AuthRequest, error)
	// DeleteAuthRequestsBefore removes every request created before cutoff
	// and returns how many.
	DeleteAuthRequestsBefore(ctx context.Context, cutoff int64) (int64, error)

	// TokenGeneration returns the account's token generation: 0 until its
	// tokens are first revoked.
	TokenGeneration(ctx context.Context, accountID string) (int64, error)
	// RevokeTokens moves the account's token generation on by one (at now)
	// and returns the new generation. ErrNotFound for an unknown account.
	RevokeTokens(ctx context.Context, accountID string, now int64) (int64, error)

	// GetOrCreateSession returns the account's session with in.Tag unchanged,
	// or creates it (metadata version 0, no agent state, active). created
	// tells which.
	GetOrCreateSession(ctx context.Context, accountID string, in NewSession, now int64) (s Session, created bool, err error)
	// Session returns one session of the account or ErrNotFound.
	Session(ctx context.Context, accountID, id string) (Session, error)
	// Sessions lists the account's sessions, most recently updated first.
	Sessions(ctx context.Context, accountID string, limit int) ([]Session, error)
	// ActiveSessions lists active sessions with activity after since, most recent activity first.
	ActiveSessions(ctx context.Context, accountID string, since int64, limit int) ([]Session, error)
	// DeleteSession removes a session with its messages, usage reports and
	// attachments.
	DeleteSession(ctx context.Context, accountID, id string) error
	// SetSessionActive sets active and the last activity time (archive,
	// session-end, keep-alive).
	SetSessionActive(ctx context.Context, accountID, id string, active bool, at int64) error
	// UpdateSessionMetadata is a compare-and-set on metadata.
	UpdateSessionMetadata(ctx context.Context, accountID, id, metadata string, expected int64, now int64) (CAS, error)
	// UpdateSessionAgentState is a compare-and-set on the agent state (nil = null).
	UpdateSessionAgentState(ctx context.Context, accountID, id string, state *string, expected int64, now int64) (CAS, error)
	// ExpireSessions marks inactive every active session whose last activity
	// is at or before cutoff and returns them.
	ExpireSessions(ctx context.Context, cutoff int64) ([]Presence, error)

	// AppendMessages stores a batch (see AppendResult): localIds are unique per
	// session, the first occurrence in a batch wins, an existing localId keeps
	// its original row, new rows get consecutive seqs in batch order.
	AppendMessages(ctx context.Context, accountID, sessionID string, msgs []NewMessage, now int64) (AppendResult, error)
	// Messages returns one page and whether more rows exist in its direction.
	Messages(ctx context.Context, accountID, sessionID string, p Page) ([]Message, bool, error)
	// RecentMessages returns up to limit messages, newest first (legacy listing).
	RecentMessages(ctx context.Context, accountID, sessionID string, limit int) ([]Message, error)

	// GetOrCreateMachine returns the account's machine in.ID unchanged, or
	// creates it (metadata version 1, daemon state version 1 when given else
	// 0, inactive).
	GetOrCreateMachine(ctx context.Context, accountID string, in NewMachine, now int64) (m Machine, created bool, err error)
	// Machine returns one machine of the account or ErrNotFound.
	Machine(ctx context.Context, accountID, id string) (Machine, error)
	// Machines lists the account's machines, most recent activity first.
	Machines(ctx context.Context, accountID string) ([]Machine, error)
	// SetMachineActive sets active and the last activity time.
	SetMachineActive(ctx context.Context, accountID, id string, active bool, at int64) error
	// UpdateMachineMetadata is a compare-and-set on machine metadata.
	UpdateMachineMetadata(ctx context.Context, accountID, id, metadata string, expected int64, now int64) (CAS, error)
	// UpdateMachineDaemonState is a compare-and-set on the daemon state; a
	// successful write also marks the machine active at now.
	UpdateMachineDaemonState(ctx context.Context, accountID, id, state string, expected int64, now int64) (CAS, error)
	// ExpireMachines is ExpireSessions for machines.
	ExpireMachines(ctx context.Context, cutoff int64) ([]Presence, error)

	// AddPushToken registers token for the account (idempotent).
	AddPushToken(ctx context.Context, accountID, token string, now int64) error
	// RemovePushToken removes token from the account (no error when absent).
	RemovePushToken(ctx context.Context, accountID, token string) error
	// PushTokens lists the account's tokens, newest first.
	PushTokens(ctx context.Context, accountID string) ([]PushToken, error)

	// AddWebPushSubscription registers sub (its Endpoint, P256dh, Auth)
	// for the account: a new one gets an id and created_at now; an
	// endpoint the account has already gets the new keys and updated_at
	// now (a browser that subscribes again keeps its endpoint).
	AddWebPushSubscription(ctx context.Context, accountID string, sub WebPushSubscription, now int64) error
	// RemoveWebPushSubscription removes the account's subscription of
	// endpoint (no error when absent).
	RemoveWebPushSubscription(ctx context.Context, accountID, endpoint string) error
	// RemoveWebPushSubscriptions removes every subscription of the account
	// and returns how many there were.
	RemoveWebPushSubscriptions(ctx context.Context, accountID string) (int64, error)
	// WebPushSubscriptions lists the account's subscriptions, newest first.
	WebPushSubscriptions(ctx context.Context, accountID string) ([]WebPushSubscription, error)

	// UpsertUsageReport stores the latest report under (account, sessionID, key);
	// sessionID "" means none.
	UpsertUsageReport(ctx context.Context, accountID, sessionID, key, data string, now int64) (UsageReport, error)

	// PutAttachment stores data (the client's encrypted blob, byte for byte)
	// as the attachment name of the account's session, replacing one of that
	// name. name is a file name: ValidAttachmentName. ErrNotFound when the
	// session is not the account's; DeleteSession removes the attachments.
	PutAttachment(ctx context.Context, accountID, sessionID, name string, data []byte, now int64) error
	// Attachment returns the bytes of one attachment of the account's
	// session, or ErrNotFound (no such session or attachment, or an invalid name).
	Attachment(ctx context.Context, accountID, sessionID, name string) ([]byte, error)

	// Close releases the backend.
	Close() error
}

// ValidAttachmentName reports whether name can name an attachment: 1 to 200
// bytes of [A-Za-z0-9._-], not starting with a dot (so never a path).
func ValidAttachmentName(name string) bool {
	if name == "" || len(name) > 200 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}

const idAlphabet = "0123456789abcdefghijklmnopqrstuvwxyz"

// NewMessageID returns a 25-character message id shaped like NewID's ("c"
// and 24 characters of [0-9a-z]) whose first 9 characters after the "c"
// are the time in Unix milliseconds in base 36, zero-padded, and the rest
// random. Ids made later sort after earlier ones (to the millisecond), so
// the store's primary-key index grows at its end instead of touching a
// random page for every new message, which made ingest slow down as the
// table grew.
func NewMessageID(nowMs int64) string {
	var b [15]byte
	_, _ = rand.Read(b[:])
	out := make([]byte, 25)
	out[0] = 'c'
	t := uint64(max(nowMs, 0))
	for i := 9; i >= 1; i-- {
		out[i] = idAlphabet[t%36]
		t /= 36
	}
	for i, v := range b {
		out[i+10] = idAlphabet[int(v)%len(idAlphabet)]
	}
	return string(out)
}

// NewID returns a random 25-character id shaped like the reference server's
// cuids: "c" followed by 24 characters of [0-9a-z].
func NewID() string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	out := make([]byte, 25)
	out[0] = 'c'
	for i, v := range b {
		out[i+1] = idAlphabet[int(v)%len(idAlphabet)]
	}
	return string(out)
}
