// Package outbox is the relay client's durable outbox: every encrypted message
// version is written here (fsync'd) before it is sent, and removed only after
// the relay returned its seq. A crash, a network cut or a relay restart
// therefore loses nothing, and because each row's localId is deterministic
// ("<recordId>.<version>", docs/ARCHITECTURE.md "Relay envelope and versions") and the
// relay stores a localId once, resending after a crash duplicates nothing.
//
// # Store
//
// One SQLite file, <dir>/outbox.db (modernc.org/sqlite, no cgo), in WAL mode,
// as durable as synchronous=FULL: an append returns only after the WAL is
// fsync'd (see "Group commit").
// SQLite was chosen over an append-only log because several happy processes
// share one home folder and the store needs, atomically and across processes:
// append, delete-on-ack from the middle, the per-record last version (which
// must never go backwards) and a small per-session state row. An append-only
// log would need hand-written compaction, torn-tail detection and
// cross-process locking for the same guarantees.
//
// Tables:
//
//	pending   (id autoincrement, session, local_id, record, version, content, enqueued_at)
//	          UNIQUE(session, local_id); sent oldest id first
//	versions  (session, record, version)  the last version ever appended per record
//	sessions  (session, relay_id, state)  opaque per-session state of the caller
//	rejected  rows the relay refused permanently, with the reason (kept, never dropped)
//	live      (session, pid, started_at)  sessions a process runs and has not ended yet
//	conflicts rows the relay held under this outbox's localIds that were not its own (kept)
//
// A live row is written when a process starts running a session and removed
// once the relay knows the session ended. A live row whose session lock is
// free names an orphan: its process died without ending it (kill -9, power
// loss), and the next process on the same outbox settles it (docs/
// ARCHITECTURE.md, section "A session's life").
//
// # Group commit
//
// Appends and removals from any goroutine are queued to one writer goroutine,
// which commits everything queued so far in a single transaction (one fsync)
// and then answers every caller. Append returns only once its rows are on
// disk.
//
// Where the system has fsync (unix), the writer commits at
// synchronous=NORMAL and a second goroutine, the syncer, makes the commits
// durable: it fsyncs the WAL file once for every commit written since its
// last sync and only then answers their callers. A committed group is
// readable, and survives a crash of the process (its pages are in the
// kernel), before that fsync: AppendStaged tells the caller at that point,
// so the relay client sends a version while it is being synced instead of
// after. Meanwhile the writer commits the next group (a removal, typically),
// so a sync never holds up the queue. What an Append returns is unchanged:
// on disk, as with synchronous=FULL.
//
// # Ownership across processes
//
// Lock takes an advisory file lock (flock) per session under <dir>/locks, so
// exactly one process sends a session's rows at a time; the lock dies with its
// process, so another happy can drain the rows of a session whose process was
// killed.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/happy-dev/happy/internal/private"
)

// FileName is the database file inside the outbox folder.
const FileName = "outbox.db"

// MaxGroup bounds the number of queued operations one transaction commits.
const MaxGroup = 1024

// Sentinel errors.
var (
	// ErrStaleVersion: an appended version is not greater than the last version
	// stored for its record (versions must be monotonic across restarts).
	ErrStaleVersion = errors.New("outbox: version not newer than the last one stored")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("outbox: closed")
	// ErrInvalid: an entry is malformed (empty session, record or content,
	// version < 1, a record id with a character that breaks localIds).
	ErrInvalid = errors.New("outbox: invalid entry")
	// ErrLocked: another process (or handle) holds the session's lock.
	ErrLocked = errors.New("outbox: session locked by another owner")
)

// WriteError is a write the outbox file could not take: its transaction
// failed (a full disk: SQLite's "database or disk is full"; a read-only or
// failing file system) and was rolled back, or the fsync making it durable
// failed. Nothing of the write is kept by the outbox; the caller still
// holds what it wrote. Path is the outbox file, Err the cause.
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *WriteError) Unwrap() error { return e.Err }

// Reason is the cause in a few words for a person: "no space left on
// device" for a full disk (ENOSPC, or SQLite's SQLITE_FULL), otherwise the
// innermost error's text (e.g. "read-only file system").
func (e *WriteError) Reason() string {
	var se *sqlite.Error
	if errors.Is(e.Err, syscall.ENOSPC) || (errors.As(e.Err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL) {
		return syscall.ENOSPC.Error()
	}
	err := e.Err
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// Entry is one encrypted message version to append.
type Entry struct {
	// Session is the caller's session key (the relay client uses the session
	// tag, which exists before the relay assigned an id).
	Session string
	// Record is the record id (message, session or todos id); it must not be
	// empty, nor contain control characters.
	Record string
	// Version is the record's version, >= 1 and greater than every version of
	// the record appended before.
	Version int64
	// Content is the base64 ciphertext as the relay stores it.
	Content string
}

// LocalID is the deterministic localId of a record version:
// "<record>.<version>" in decimal.
func LocalID(record string, version int64) string {
	return record + "." + strconv.FormatInt(version, 10)
}

// Item is a pending row.
type Item struct {
	ID         int64     // row id: ascending in append order
	Session    string    // session key
	LocalID    string    // "<record>.<version>"
	Record     string    // record id
	Version    int64     // record version
	Content    string    // base64 ciphertext
	EnqueuedAt time.Time // when Append committed it (millisecond precision)
}

// Rejected is a row the relay refused permanently (see Reject).
type Rejected struct {
	Item
	Reason     string
	RejectedAt time.Time
}

// Options configure Open.
type Options struct {
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Synchronous is the SQLite synchronous level: "FULL" (the default and
	// the durable choice) or "NORMAL" (for benchmarks comparing the cost).
	Synchronous string

	// serialSync turns the syncer off: each commit syncs itself, as on
	// systems without fsync (tests of that path).
	serialSync bool
}

// Store is an open outbox. Its methods are safe for concurrent use.
type Store struct {
	dir string
	w   *sql.DB
	r   *sql.DB
	now func() time.Time
	// full is synchronous=FULL; relaxed is set (by the writer only) while
	// the writer connection may still be at NORMAL after a removal group.
	full, relaxed bool
	// pipelined: the writer connection runs at NORMAL and the syncer
	// fsyncs the WAL (full, on systems with fsync; see "Group commit").
	pipelined bool
	syncs     chan []*op // committed groups waiting for the syncer
	synced    chan struct{}
	syncFile  func(db string) error // syncWAL; tests replace it

	// Statements of the hot path, prepared once (parsing them again at
	// every call was a quarter of an append's CPU): the writer's by
	// writerStmt index, the readers' Pending query.
	wstmts  [len(writerSQL)]*sql.Stmt
	pending *sql.Stmt

	ops    chan *op
	quit   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	closed bool

	statMu    sync.Mutex
	commits   int64
	grouped   int64
	syncCount int64

	//lint:ignore U1000 used by Lock on systems without flock (lock_other.go)
	locks lockState
}

type opKind int

const (
	opAppend opKind = iota
	opRemove
	opReject
	opPutSession
	opMarkLive
	opClearLive
	opConflict
)

type op struct {
	kind    opKind
	entries []Entry
	session string
	ids     []string // local ids to remove
	reason  string
	relayID string
	state   []byte
	pid     int
	seq     int64
	removed int
	staged  func() // AppendStaged's notification (nil otherwise)
	result  error  // the operation's own result, kept until the sync
	err     chan error
}

// Open opens (creating when missing) the outbox in dir (mode 0700) and starts
// its writer.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if err := private.Dir(dir); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	sync := strings.ToUpper(opts.Synchronous)
	if sync == "" {
		sync = "FULL"
	}
	if sync != "FULL" && sync != "NORMAL" {
		return nil, fmt.Errorf("outbox: synchronous %q (want FULL or NORMAL)", opts.Synchronous)
	}
	path := filepath.Join(dir, FileName)
	// The file exists 0600 before SQLite opens it (SQLite creates its
	// -wal and -shm files with the database's mode).
	f, err := private.OpenFile(path, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("outbox: create %s: %w", path, err)
	}
	_ = f.Close()
	pipelined := sync == "FULL" && canSyncWAL && !opts.serialSync
	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		if pipelined {
			// Commits are made durable by the syncer's fsync of the WAL.
			q.Add("_pragma", "synchronous(NORMAL)")
		} else {
			q.Add("_pragma", "synchronous("+sync+")")
		}
		q.Add("_txlock", "immediate")
		for _, e := range extra {
			q.Add("_pragma", e)
		}
		return "file:" + path + "?" + q.Encode()
	}
	w, err := sql.Open("sqlite", dsn("journal_mode(WAL)"))
	if err != nil {
		return nil, fmt.Errorf("outbox: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("outbox: open %s: %w", path, err)
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := private.Restrict(p); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("outbox: %w", err)
		}
	}
	if _, err := w.ExecContext(ctx, schema); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("outbox: create schema in %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn())
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("outbox: open readers %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	var wstmts [len(writerSQL)]*sql.Stmt
	for i, q := range writerSQL {
		if wstmts[i], err = w.PrepareContext(ctx, q); err != nil {
			_ = r.Close()
			_ = w.Close()
			return nil, fmt.Errorf("outbox: prepare %q: %w", q, err)
		}
	}
	pending, err := r.PrepareContext(ctx, `SELECT id, session, local_id, record, version, content, enqueued_at
		FROM pending WHERE session = ? ORDER BY id LIMIT ?`)
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("outbox: prepare the pending query: %w", err)
	}
	s := &Store{dir: dir, w: w, r: r, now: now, full: sync == "FULL" && !pipelined, pipelined: pipelined,
		ops: make(chan *op, MaxGroup), quit: make(chan struct{}), done: make(chan struct{}), syncFile: syncWAL,
		wstmts: wstmts, pending: pending}
	if pipelined {
		s.syncs, s.synced = make(chan []*op, MaxGroup), make(chan struct{})
		go s.syncer()
	}
	go s.writer()
	// Lock files of processes that died are removed (best effort: a
	// left-over file is harmless, only clutter).
	_, _ = s.PruneLocks()
	return s, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS pending (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	session     TEXT    NOT NULL,
	local_id    TEXT    NOT NULL,
	record      TEXT    NOT NULL,
	version     INTEGER NOT NULL,
	content     TEXT    NOT NULL,
	enqueued_at INTEGER NOT NULL,
	UNIQUE (session, local_id)
);
CREATE INDEX IF NOT EXISTS pending_by_session ON pending (session, id);
CREATE TABLE IF NOT EXISTS versions (
	session TEXT    NOT NULL,
	record  TEXT    NOT NULL,
	version INTEGER NOT NULL,
	PRIMARY KEY (session, record)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions (
	session  TEXT PRIMARY KEY,
	relay_id TEXT NOT NULL DEFAULT '',
	state    BLOB
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rejected (
	id          INTEGER PRIMARY KEY,
	session     TEXT    NOT NULL,
	local_id    TEXT    NOT NULL,
	record      TEXT    NOT NULL,
	version     INTEGER NOT NULL,
	content     TEXT    NOT NULL,
	enqueued_at INTEGER NOT NULL,
	reason      TEXT    NOT NULL,
	rejected_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS conflicts (
	id          INTEGER PRIMARY KEY,
	session     TEXT    NOT NULL,
	local_id    TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	detail      TEXT    NOT NULL,
	detected_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS live (
	session    TEXT    PRIMARY KEY,
	pid        INTEGER NOT NULL,
	started_at INTEGER NOT NULL
) WITHOUT ROWID;
`

// Dir is the outbox folder.
func (s *Store) Dir() string { return s.dir }

// Close stops the writer after it committed what was queued, and closes the
// database. Later calls fail with ErrClosed. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.quit)
	s.mu.Unlock()
	<-s.done
	errs := []error{s.pending.Close()}
	for _, st := range s.wstmts {
		errs = append(errs, st.Close())
	}
	return errors.Join(append(errs, s.r.Close(), s.w.Close())...)
}

func (s *Store) submit(ctx context.Context, o *op) error {
	wait, err := s.enqueue(ctx, o)
	if err != nil {
		return err
	}
	return wait()
}

// enqueue places o in the writer's queue (operations commit in queue order)
// and returns the function that waits for its result.
func (s *Store) enqueue(ctx context.Context, o *op) (func() error, error) {
	o.err = make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	// The queue is buffered; holding mu while sending keeps Close from
	// racing with a send. The writer never takes mu, so this cannot deadlock.
	select {
	case s.ops <- o:
	case <-ctx.Done():
		s.mu.Unlock()
		return nil, ctx.Err()
	}
	s.mu.Unlock()
	// Once queued, the operation will be committed or failed; the wait
	// ignores ctx, so a caller never mistakes a committed append for a
	// failed one.
	return func() error { return <-o.err }, nil
}

func validate(e Entry) error {
	switch {
	case e.Session == "":
		return fmt.Errorf("%w: empty session", ErrInvalid)
	case e.Record == "":
		return fmt.Errorf("%w: empty record id", ErrInvalid)
	case e.Version < 1:
		return fmt.Errorf("%w: record %q version %d < 1", ErrInvalid, e.Record, e.Version)
	case e.Content == "":
		return fmt.Errorf("%w: record %q version %d: empty content", ErrInvalid, e.Record, e.Version)
	}
	for _, r := range e.Record {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: record id %q has a control character", ErrInvalid, e.Record)
		}
	}
	return nil
}

// Append durably stores entries (one group commit, shared with every other
// operation queued at the same time) and returns when they are on disk. All
// entries of one call are committed together or not at all. Versions must
// ascend per record, within the call and against what was appended before,
// else the error wraps ErrStaleVersion and nothing of the call is stored.
// Invalid entries fail with ErrInvalid. The context only bounds the wait for
// a place in the queue.
func (s *Store) Append(ctx context.Context, entries ...Entry) error {
	if len(entries) == 0 {
		return nil
	}
	for _, e := range entries {
		if err := validate(e); err != nil {
			return err
		}
	}
	return s.submit(ctx, &op{kind: opAppend, entries: entries})
}

// AppendAsync queues entries like Append but returns as soon as they have
// their place in the writer's queue: operations queued earlier commit
// earlier, so a caller that serialises its AppendAsync calls fixes the order
// of its rows without holding a lock during the fsync. The returned function
// waits for the commit and returns Append's result. Errors before queueing
// (invalid entries, closed store, ctx ended) are returned directly.
func (s *Store) AppendAsync(ctx context.Context, entries ...Entry) (wait func() error, err error) {
	if len(entries) == 0 {
		return func() error { return nil }, nil
	}
	for _, e := range entries {
		if err := validate(e); err != nil {
			return nil, err
		}
	}
	return s.enqueue(ctx, &op{kind: opAppend, entries: entries})
}

// AppendStaged is AppendAsync with a second notification: staged runs once
// the entries are committed, so they are readable (Pending lists them) and
// survive a crash of the process, possibly before the fsync that makes them
// survive a power loss, which wait still waits for. staged runs on the
// writer goroutine and must not block; it does not run when the commit
// fails. Where commits are not pipelined (see "Group commit") it runs when
// the entries are on disk, just before wait returns.
func (s *Store) AppendStaged(ctx context.Context, staged func(), entries ...Entry) (wait func() error, err error) {
	if len(entries) == 0 {
		if staged != nil {
			staged()
		}
		return func() error { return nil }, nil
	}
	for _, e := range entries {
		if err := validate(e); err != nil {
			return nil, err
		}
	}
	return s.enqueue(ctx, &op{kind: opAppend, entries: entries, staged: staged})
}

// Remove deletes the pending rows of session with the given localIds (after
// the relay acknowledged them) and returns how many it deleted. Unknown ids
// are ignored.
func (s *Store) Remove(ctx context.Context, session string, localIDs []string) (int, error) {
	if len(localIDs) == 0 {
		return 0, nil
	}
	o := &op{kind: opRemove, session: session, ids: localIDs}
	if err := s.submit(ctx, o); err != nil {
		return 0, err
	}
	return o.removed, nil
}

// Reject moves the pending row (session, localID) to the rejected table with
// reason: the relay refused it permanently, so it must stop blocking the
// queue but must not vanish. Rejected rows are listed by RejectedItems.
func (s *Store) Reject(ctx context.Context, session, localID, reason string) error {
	return s.submit(ctx, &op{kind: opReject, session: session, ids: []string{localID}, reason: reason})
}

// Conflict is a version whose localId the relay held another row under:
// someone stored a row of their own under it first (see NoteConflict).
type Conflict struct {
	Session string
	LocalID string // the version's localId, "<record>.<version>"
	Seq     int64  // the seq of the row the relay holds under it (0 when it showed none)
	Detail  string // what differed
	At      time.Time
}

// NoteConflict records that the relay holds a row that is not this
// outbox's under localID of session (at seq), with what differed. The
// record is kept (a sign that someone holding the account's token, or the
// relay, wrote under this client's record ids); Conflicts lists it.
func (s *Store) NoteConflict(ctx context.Context, session, localID string, seq int64, detail string) error {
	if session == "" || localID == "" {
		return fmt.Errorf("%w: conflict without session or localId", ErrInvalid)
	}
	return s.submit(ctx, &op{kind: opConflict, session: session, ids: []string{localID}, seq: seq, reason: detail})
}

// Conflicts lists the conflicts noted for session ("" lists every
// session's), oldest first.
func (s *Store) Conflicts(ctx context.Context, session string) ([]Conflict, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT session, local_id, seq, detail, detected_at FROM conflicts
		WHERE ? = '' OR session = ? ORDER BY id`, session, session)
	if err != nil {
		return nil, fmt.Errorf("outbox: list conflicts of %q: %w", session, err)
	}
	defer rows.Close()
	var out []Conflict
	for rows.Next() {
		var c Conflict
		var at int64
		if err := rows.Scan(&c.Session, &c.LocalID, &c.Seq, &c.Detail, &at); err != nil {
			return nil, fmt.Errorf("outbox: read conflicts of %q: %w", session, err)
		}
		c.At = time.UnixMilli(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read conflicts of %q: %w", session, err)
	}
	return out, nil
}

// PutSession stores the caller's state for session: the relay's id ("" while
// unknown) and an opaque blob.
func (s *Store) PutSession(ctx context.Context, session, relayID string, state []byte) error {
	if session == "" {
		return fmt.Errorf("%w: empty session", ErrInvalid)
	}
	return s.submit(ctx, &op{kind: opPutSession, session: session, relayID: relayID, state: state})
}

// Session returns the stored state of session; ok is false when there is none.
func (s *Store) Session(ctx context.Context, session string) (relayID string, state []byte, ok bool, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT relay_id, state FROM sessions WHERE session = ?`, session).Scan(&relayID, &state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, fmt.Errorf("outbox: read session %q: %w", session, err)
	}
	return relayID, state, true, nil
}

// Live is a session a process runs and has not ended (see MarkLive).
type Live struct {
	Session   string    // session key
	PID       int       // the process that marked it
	StartedAt time.Time // when it was marked (millisecond precision)
}

// MarkLive records that process pid runs session and will end it; ClearLive
// removes the record once the session's end is known to the relay. A live
// record whose session lock (Lock) is free belongs to a process that died.
func (s *Store) MarkLive(ctx context.Context, session string, pid int) error {
	if session == "" {
		return fmt.Errorf("%w: empty session", ErrInvalid)
	}
	return s.submit(ctx, &op{kind: opMarkLive, session: session, pid: pid})
}

// ClearLive removes the live record of session (none is not an error).
func (s *Store) ClearLive(ctx context.Context, session string) error {
	return s.submit(ctx, &op{kind: opClearLive, session: session})
}

// LiveSessions lists the live records, oldest first.
func (s *Store) LiveSessions(ctx context.Context) ([]Live, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT session, pid, started_at FROM live ORDER BY started_at, session`)
	if err != nil {
		return nil, fmt.Errorf("outbox: list live sessions: %w", err)
	}
	defer rows.Close()
	var out []Live
	for rows.Next() {
		var l Live
		var at int64
		if err := rows.Scan(&l.Session, &l.PID, &at); err != nil {
			return nil, fmt.Errorf("outbox: list live sessions: %w", err)
		}
		l.StartedAt = time.UnixMilli(at)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: list live sessions: %w", err)
	}
	return out, nil
}

// IsLive reports whether session has a live record.
func (s *Store) IsLive(ctx context.Context, session string) (bool, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM live WHERE session = ?`, session).Scan(&n); err != nil {
		return false, fmt.Errorf("outbox: read live %q: %w", session, err)
	}
	return n > 0, nil
}

// SessionByRelayID returns the session key whose stored relay id is
// relayID; ok is false when this outbox has none.
func (s *Store) SessionByRelayID(ctx context.Context, relayID string) (session string, ok bool, err error) {
	if relayID == "" {
		return "", false, nil
	}
	err = s.r.QueryRowContext(ctx, `SELECT session FROM sessions WHERE relay_id = ? LIMIT 1`, relayID).Scan(&session)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("outbox: find session of relay id %q: %w", relayID, err)
	}
	return session, true, nil
}

// Pending returns up to limit pending rows of session, oldest first.
func (s *Store) Pending(ctx context.Context, session string, limit int) ([]Item, error) {
	rows, err := s.pending.QueryContext(ctx, session, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: list pending of %q: %w", session, err)
	}
	defer rows.Close()
	var out []Item
	for rows.Next() {
		var it Item
		var at int64
		if err := rows.Scan(&it.ID, &it.Session, &it.LocalID, &it.Record, &it.Version, &it.Content, &at); err != nil {
			return nil, fmt.Errorf("outbox: read pending of %q: %w", session, err)
		}
		it.EnqueuedAt = time.UnixMilli(at)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read pending of %q: %w", session, err)
	}
	return out, nil
}

// Count is the number of pending rows of session ("" counts every session).
func (s *Store) Count(ctx context.Context, session string) (int, error) {
	var n int
	var err error
	if session == "" {
		err = s.r.QueryRowContext(ctx, `SELECT count(*) FROM pending`).Scan(&n)
	} else {
		err = s.r.QueryRowContext(ctx, `SELECT count(*) FROM pending WHERE session = ?`, session).Scan(&n)
	}
	if err != nil {
		return 0, fmt.Errorf("outbox: count pending: %w", err)
	}
	return n, nil
}

// Sessions lists the session keys that have pending rows, in the order of
// their oldest row.
func (s *Store) Sessions(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT session FROM pending GROUP BY session ORDER BY min(id)`)
	if err != nil {
		return nil, fmt.Errorf("outbox: list sessions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("outbox: list sessions: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: list sessions: %w", err)
	}
	return out, nil
}

// LastVersions returns the last version appended for every record of
// session (empty when none).
func (s *Store) LastVersions(ctx context.Context, session string) (map[string]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT record, version FROM versions WHERE session = ?`, session)
	if err != nil {
		return nil, fmt.Errorf("outbox: read versions of %q: %w", session, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var rec string
		var v int64
		if err := rows.Scan(&rec, &v); err != nil {
			return nil, fmt.Errorf("outbox: read versions of %q: %w", session, err)
		}
		out[rec] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read versions of %q: %w", session, err)
	}
	return out, nil
}

// RejectedItems lists the rows of session the relay refused, oldest first.
func (s *Store) RejectedItems(ctx context.Context, session string) ([]Rejected, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, session, local_id, record, version, content, enqueued_at, reason, rejected_at
		FROM rejected WHERE session = ? ORDER BY id`, session)
	if err != nil {
		return nil, fmt.Errorf("outbox: list rejected of %q: %w", session, err)
	}
	defer rows.Close()
	var out []Rejected
	for rows.Next() {
		var it Rejected
		var at, rat int64
		if err := rows.Scan(&it.ID, &it.Session, &it.LocalID, &it.Record, &it.Version, &it.Content, &at, &it.Reason, &rat); err != nil {
			return nil, fmt.Errorf("outbox: read rejected of %q: %w", session, err)
		}
		it.EnqueuedAt, it.RejectedAt = time.UnixMilli(at), time.UnixMilli(rat)
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("outbox: read rejected of %q: %w", session, err)
	}
	return out, nil
}
