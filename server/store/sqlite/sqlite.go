// Package sqlite is the relay's embedded storage backend: one SQLite file in
// WAL mode (modernc.org/sqlite, no cgo), schema migrations embedded from
// migrations/*.sql and applied in name order on Open.
//
// Writes go through one connection (SQLite has one writer anyway), reads
// through a small pool of read-only connections. With WAL, a committed
// transaction survives a crash of the process at synchronous=NORMAL; FULL also
// survives a power loss at the cost of one fsync per commit.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/happy-dev/happy/internal/private"
	"github.com/happy-dev/happy/server/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Sync is SQLite's synchronous setting.
type Sync string

// Synchronous settings: Normal (default) is durable against a process crash
// in WAL mode; Full also against an OS crash or power loss.
const (
	SyncNormal Sync = "NORMAL"
	SyncFull   Sync = "FULL"
)

// ErrMigration is returned by Open when the schema cannot be brought up to date.
var ErrMigration = errors.New("sqlite: migration failed")

// Options configure Open.
type Options struct {
	// Synchronous is SyncNormal when empty.
	Synchronous Sync
	// Readers is the size of the read pool (4 when zero).
	Readers int
	// CheckpointInterval is how often the WAL is copied back into the
	// database file, off the writer's path (DefaultCheckpointInterval
	// when zero).
	CheckpointInterval time.Duration
	// AttachmentsDir is the folder of the attachment files (see
	// attachments.go); "attachments" beside the database file when empty.
	AttachmentsDir string
}

// DefaultCheckpointInterval is Options.CheckpointInterval's default.
const DefaultCheckpointInterval = time.Second

// Store is the SQLite backend of store.Store.
type Store struct {
	w *sql.DB
	r *sql.DB

	// stmts holds the message-append statements prepared on the writer,
	// by query text (a few fixed queries plus one per batch size).
	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt

	// ck is the connection of checkpointLoop; stop ends it, ckDone says
	// it has ended.
	ck       *sql.DB
	stop     chan struct{}
	ckDone   chan struct{}
	stopOnce sync.Once

	// dsn builds the connection strings of the file (see Open).
	dsn func(txlock string, pragmas ...string) string
	// attDir is the attachments folder; attMu orders a session's
	// attachment writes after its deletion (see attachments.go).
	attDir string
	attMu  sync.Mutex
	// migrated lists the migrations Open applied.
	migrated []string
	// commit is the group committer of message appends (commit.go).
	commit *committer
}

// MigratedAtOpen lists the migrations that Open applied (none when the
// schema was already up to date).
func (s *Store) MigratedAtOpen() []string { return append([]string(nil), s.migrated...) }

// checkpointLoop copies the WAL back into the database file every
// interval with a PASSIVE checkpoint on its own connection, which never
// blocks the writer. SQLite's automatic checkpoint is off on the writer:
// it runs inside the commit that crosses the threshold, and its copying
// and fsyncs land on that request (they were most of the relay's p99
// fan-out latency). Durability is unchanged: commits are durable in the
// WAL.
func (s *Store) checkpointLoop(interval time.Duration) {
	defer close(s.ckDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// A failure (a busy database) is retried on the next tick.
			_, _ = s.ck.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		}
	}
}

// maxPreparedBatch is the largest batch whose size-dependent statements
// are kept prepared (the HTTP API's limit).
const maxPreparedBatch = 100

// stmt returns the writer's prepared statement for q, preparing it on
// first use. It must not be called inside a writer transaction (the
// writer has one connection); use the result with tx.StmtContext.
func (s *Store) stmt(ctx context.Context, q string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st, ok := s.stmts[q]; ok {
		return st, nil
	}
	st, err := s.w.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[q] = st
	return st, nil
}

// txQueryRow runs q in tx through its prepared statement when prep holds one
// for it, else directly.
func txQueryRow(ctx context.Context, tx *sql.Tx, prep map[string]*sql.Stmt, q string, args ...any) *sql.Row {
	if st := prep[q]; st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, q, args...)
}

var _ store.Store = (*Store)(nil)

// Open opens (creating when missing) the database file at path, switches it
// to WAL, applies pending migrations and returns the store. The file's folder
// must exist.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	sync := opts.Synchronous
	if sync == "" {
		sync = SyncNormal
	}
	if sync != SyncNormal && sync != SyncFull {
		return nil, fmt.Errorf("sqlite: unknown synchronous setting %q (want NORMAL or FULL)", sync)
	}
	readers := opts.Readers
	if readers <= 0 {
		readers = 4
	}
	if _, err := os.Stat(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// The file exists 0600 before SQLite opens it (SQLite creates its -wal
	// and -shm files with the database's mode).
	f, err := private.OpenFile(path, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("sqlite: create %s: %w", path, err)
	}
	_ = f.Close()
	dsnLock := func(txlock string, extra ...string) string {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous("+string(sync)+")")
		q.Add("_txlock", txlock)
		for _, e := range extra {
			q.Add("_pragma", e)
		}
		return "file:" + path + "?" + q.Encode()
	}
	dsn := func(extra ...string) string { return dsnLock("immediate", extra...) }
	// Statement journals (each multi-row insert and each savepoint of a
	// group commit keeps one) stay in memory: in temporary files their
	// writes were an eighth of the writer's time.
	w, err := sql.Open("sqlite", dsn("journal_mode(WAL)", "wal_autocheckpoint(0)", "temp_store(MEMORY)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := private.Restrict(p); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	applied, err := migrate(ctx, w)
	if err != nil {
		_ = w.Close()
		return nil, err
	}
	r, err := sql.Open("sqlite", dsn("query_only(1)"))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open readers %s: %w", path, err)
	}
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	ck, err := sql.Open("sqlite", dsn())
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open checkpointer %s: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	interval := opts.CheckpointInterval
	if interval <= 0 {
		interval = DefaultCheckpointInterval
	}
	attDir := opts.AttachmentsDir
	if attDir == "" {
		attDir = filepath.Join(filepath.Dir(path), "attachments")
	}
	s := &Store{w: w, r: r, ck: ck, stop: make(chan struct{}), ckDone: make(chan struct{}), dsn: dsnLock, attDir: attDir, migrated: applied, commit: newCommitter()}
	go s.checkpointLoop(interval)
	go s.commitLoop()
	return s, nil
}

// Close stops the checkpointer and closes the pools (the last connection
// to close copies the WAL back into the database file).
func (s *Store) Close() error {
	s.stopOnce.Do(func() {
		s.closeCommitter()
		close(s.stop)
		<-s.ckDone
		_ = s.ck.Close()
	})
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		_ = st.Close()
	}
	s.stmts = nil
	s.stmtMu.Unlock()
	err1 := s.r.Close()
	err2 := s.w.Close()
	return errors.Join(err1, err2)
}

// AppliedMigrations lists the migrations applied to the database, in the
// order they were applied.
func (s *Store) AppliedMigrations(ctx context.Context) ([]store.Migration, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name, applied_at FROM schema_migrations ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list applied migrations: %w", err)
	}
	defer rows.Close()
	var out []store.Migration
	for rows.Next() {
		var m store.Migration
		if err := rows.Scan(&m.Name, &m.AppliedAt); err != nil {
			return nil, fmt.Errorf("sqlite: list applied migrations: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list applied migrations: %w", err)
	}
	return out, nil
}

// Migrations lists the embedded migration names in the order they apply.
func Migrations() ([]string, error) {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("sqlite: list migrations: %w", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".sql") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

func migrate(ctx context.Context, db *sql.DB) ([]string, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
		return nil, fmt.Errorf("%w: create schema_migrations: %w", ErrMigration, err)
	}
	var applied []string
	names, err := Migrations()
	if err != nil {
		return applied, fmt.Errorf("%w: %w", ErrMigration, err)
	}
	for _, name := range names {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE name = ?`, name).Scan(&n); err != nil {
			return applied, fmt.Errorf("%w: check %s: %w", ErrMigration, name, err)
		}
		if n > 0 {
			continue
		}
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return applied, fmt.Errorf("%w: read %s: %w", ErrMigration, name, err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return applied, fmt.Errorf("%w: begin %s: %w", ErrMigration, name, err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			_ = tx.Rollback()
			return applied, fmt.Errorf("%w: apply %s: %w", ErrMigration, name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES (?, strftime('%s','now') * 1000)`, name); err != nil {
			_ = tx.Rollback()
			return applied, fmt.Errorf("%w: record %s: %w", ErrMigration, name, err)
		}
		if err := tx.Commit(); err != nil {
			return applied, fmt.Errorf("%w: commit %s: %w", ErrMigration, name, err)
		}
		applied = append(applied, name)
	}
	return applied, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ---- sessions ----

const sessionCols = `id, account_id, tag, seq, metadata, metadata_version, agent_state, agent_state_version, data_encryption_key, active, last_active_at, created_at, updated_at`

func scanSession(row interface{ Scan(...any) error }) (store.Session, error) {
	var x store.Session
	var state, dek sql.NullString
	var active int
	err := row.Scan(&x.ID, &x.AccountID, &x.Tag, &x.Seq, &x.Metadata, &x.MetadataVersion, &state, &x.AgentStateVersion, &dek, &active, &x.ActiveAt, &x.CreatedAt, &x.UpdatedAt)
	if err != nil {
		return x, err
	}
	if state.Valid {
		x.AgentState = &state.String
	}
	if dek.Valid {
		x.DataEncryptionKey = &dek.String
	}
	x.Active = active != 0
	return x, nil
}

func nullable(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// GetOrCreateSession implements store.Store.
func (s *Store) GetOrCreateSession(ctx context.Context, accountID string, in store.NewSession, now int64) (store.Session, bool, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.Session{}, false, fmt.Errorf("sqlite: create session: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	x, err := scanSession(tx.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE account_id = ? AND tag = ?`, accountID, in.Tag))
	if err == nil {
		return x, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, false, fmt.Errorf("sqlite: find session by tag: %w", err)
	}
	x, err = scanSession(tx.QueryRowContext(ctx, `INSERT INTO sessions (id, account_id, tag, metadata, data_encryption_key, active, last_active_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?) RETURNING `+sessionCols,
		store.NewID(), accountID, in.Tag, in.Metadata, nullable(in.DataEncryptionKey), now, now, now))
	if err != nil {
		return store.Session{}, false, fmt.Errorf("sqlite: insert session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.Session{}, false, fmt.Errorf("sqlite: commit session: %w", err)
	}
	return x, true, nil
}

// Session implements store.Store.
func (s *Store) Session(ctx context.Context, accountID, id string) (store.Session, error) {
	x, err := scanSession(s.r.QueryRowContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = ? AND account_id = ?`, id, accountID))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, fmt.Errorf("sqlite: read session: %w", err)
	}
	return x, nil
}

func (s *Store) listSessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	defer rows.Close()
	out := []store.Session{}
	for rows.Next() {
		x, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan session: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	return out, nil
}

// Sessions implements store.Store.
func (s *Store) Sessions(ctx context.Context, accountID string, limit int) ([]store.Session, error) {
	return s.listSessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE account_id = ? ORDER BY updated_at DESC, id DESC LIMIT ?`, accountID, limit)
}

// ActiveSessions implements store.Store.
func (s *Store) ActiveSessions(ctx context.Context, accountID string, since int64, limit int) ([]store.Session, error) {
	return s.listSessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE account_id = ? AND active = 1 AND last_active_at > ? ORDER BY last_active_at DESC, id DESC LIMIT ?`, accountID, since, limit)
}

// DeleteSession implements store.Store.
func (s *Store) DeleteSession(ctx context.Context, accountID, id string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ? AND account_id = ?`, id, accountID)
	if err != nil {
		return fmt.Errorf("sqlite: delete session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM usage_reports WHERE account_id = ? AND session_id = ?`, accountID, id); err != nil {
		return fmt.Errorf("sqlite: delete session usage: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit delete session: %w", err)
	}
	return s.removeAttachments(id)
}

// SetSessionActive implements store.Store.
func (s *Store) SetSessionActive(ctx context.Context, accountID, id string, active bool, at int64) error {
	res, err := s.w.ExecContext(ctx, `UPDATE sessions SET active = ?, last_active_at = ? WHERE id = ? AND account_id = ?`, b2i(active), at, id, accountID)
	if err != nil {
		return fmt.Errorf("sqlite: set session activity: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func (s *Store) cas(ctx context.Context, table, col, verCol, accountID, id string, val *string, expected, now int64, extra string) (store.CAS, error) {
	idCol := "id"
	q := fmt.Sprintf(`UPDATE %s SET %s = ?, %s = %s + 1, updated_at = ?%s WHERE account_id = ? AND %s = ? AND %s = ? RETURNING %s, %s`,
		table, col, verCol, verCol, extra, idCol, verCol, verCol, col)
	var cur store.CAS
	var v sql.NullString
	args := []any{nullable(val), now}
	if extra != "" {
		args = append(args, now)
	}
	args = append(args, accountID, id, expected)
	err := s.w.QueryRowContext(ctx, q, args...).Scan(&cur.Version, &v)
	if err == nil {
		cur.OK = true
		if v.Valid {
			cur.Value = &v.String
		}
		return cur, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return store.CAS{}, fmt.Errorf("sqlite: update %s.%s: %w", table, col, err)
	}
	err = s.w.QueryRowContext(ctx, fmt.Sprintf(`SELECT %s, %s FROM %s WHERE account_id = ? AND id = ?`, verCol, col, table), accountID, id).Scan(&cur.Version, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return store.CAS{}, store.ErrNotFound
	}
	if err != nil {
		return store.CAS{}, fmt.Errorf("sqlite: read %s.%s: %w", table, col, err)
	}
	if v.Valid {
		cur.Value = &v.String
	}
	return cur, nil
}

// UpdateSessionMetadata implements store.Store.
func (s *Store) UpdateSessionMetadata(ctx context.Context, accountID, id, metadata string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "sessions", "metadata", "metadata_version", accountID, id, &metadata, expected, now, "")
}

// UpdateSessionAgentState implements store.Store.
func (s *Store) UpdateSessionAgentState(ctx context.Context, accountID, id string, state *string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "sessions", "agent_state", "agent_state_version", accountID, id, state, expected, now, "")
}

func (s *Store) expire(ctx context.Context, table string, cutoff int64) ([]store.Presence, error) {
	rows, err := s.w.QueryContext(ctx, fmt.Sprintf(`UPDATE %s SET active = 0 WHERE active = 1 AND last_active_at <= ? RETURNING account_id, id, last_active_at`, table), cutoff)
	if err != nil {
		return nil, fmt.Errorf("sqlite: expire %s: %w", table, err)
	}
	defer rows.Close()
	var out []store.Presence
	for rows.Next() {
		var p store.Presence
		if err := rows.Scan(&p.AccountID, &p.ID, &p.ActiveAt); err != nil {
			return nil, fmt.Errorf("sqlite: expire %s: %w", table, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: expire %s: %w", table, err)
	}
	return out, nil
}

// ExpireSessions implements store.Store.
func (s *Store) ExpireSessions(ctx context.Context, cutoff int64) ([]store.Presence, error) {
	return s.expire(ctx, "sessions", cutoff)
}

// ---- messages ----

func scanMessages(rows *sql.Rows, sessionID string) ([]store.Message, error) {
	defer rows.Close()
	out := []store.Message{}
	for rows.Next() {
		var m store.Message
		var lid sql.NullString
		if err := rows.Scan(&m.ID, &m.Seq, &lid, &m.Content, &m.CreatedAt, &m.UpdatedAt); err != nil {
			return nil, fmt.Errorf("sqlite: scan message: %w", err)
		}
		m.SessionID = sessionID
		if lid.Valid {
			m.LocalID = &lid.String
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list messages: %w", err)
	}
	return out, nil
}

func (s *Store) ownsSession(ctx context.Context, accountID, sessionID string) error {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ? AND account_id = ?`, sessionID, accountID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("sqlite: find session: %w", err)
	}
	return nil
}

// Messages implements store.Store.
func (s *Store) Messages(ctx context.Context, accountID, sessionID string, p store.Page) ([]store.Message, bool, error) {
	if p.Limit < 1 {
		return nil, false, fmt.Errorf("sqlite: list messages: limit %d", p.Limit)
	}
	if err := s.ownsSession(ctx, accountID, sessionID); err != nil {
		return nil, false, err
	}
	var rows *sql.Rows
	var err error
	if p.Before > 0 {
		rows, err = s.r.QueryContext(ctx, `SELECT id, seq, local_id, content, created_at, updated_at FROM session_messages WHERE session_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?`, sessionID, p.Before, p.Limit+1)
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT id, seq, local_id, content, created_at, updated_at FROM session_messages WHERE session_id = ? AND seq > ? ORDER BY seq ASC LIMIT ?`, sessionID, p.After, p.Limit+1)
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: list messages: %w", err)
	}
	out, err := scanMessages(rows, sessionID)
	if err != nil {
		return nil, false, err
	}
	more := len(out) > p.Limit
	if more {
		out = out[:p.Limit]
	}
	return out, more, nil
}

// RecentMessages implements store.Store.
func (s *Store) RecentMessages(ctx context.Context, accountID, sessionID string, limit int) ([]store.Message, error) {
	if err := s.ownsSession(ctx, accountID, sessionID); err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, seq, local_id, content, created_at, updated_at FROM session_messages WHERE session_id = ? ORDER BY created_at DESC, seq DESC LIMIT ?`, sessionID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list recent messages: %w", err)
	}
	return scanMessages(rows, sessionID)
}

// ---- machines ----

const machineCols = `id, account_id, metadata, metadata_version, daemon_state, daemon_state_version, data_encryption_key, seq, active, last_active_at, created_at, updated_at`

func scanMachine(row interface{ Scan(...any) error }) (store.Machine, error) {
	var x store.Machine
	var state, dek sql.NullString
	var active int
	err := row.Scan(&x.ID, &x.AccountID, &x.Metadata, &x.MetadataVersion, &state, &x.DaemonStateVersion, &dek, &x.Seq, &active, &x.ActiveAt, &x.CreatedAt, &x.UpdatedAt)
	if err != nil {
		return x, err
	}
	if state.Valid {
		x.DaemonState = &state.String
	}
	if dek.Valid {
		x.DataEncryptionKey = &dek.String
	}
	x.Active = active != 0
	return x, nil
}

// GetOrCreateMachine implements store.Store.
func (s *Store) GetOrCreateMachine(ctx context.Context, accountID string, in store.NewMachine, now int64) (store.Machine, bool, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.Machine{}, false, fmt.Errorf("sqlite: create machine: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	x, err := scanMachine(tx.QueryRowContext(ctx, `SELECT `+machineCols+` FROM machines WHERE account_id = ? AND id = ?`, accountID, in.ID))
	if err == nil {
		return x, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return store.Machine{}, false, fmt.Errorf("sqlite: find machine: %w", err)
	}
	dsv := 0
	if in.DaemonState != nil {
		dsv = 1
	}
	x, err = scanMachine(tx.QueryRowContext(ctx, `INSERT INTO machines (account_id, id, metadata, metadata_version, daemon_state, daemon_state_version, data_encryption_key, active, last_active_at, created_at, updated_at)
		VALUES (?, ?, ?, 1, ?, ?, ?, 0, ?, ?, ?) RETURNING `+machineCols,
		accountID, in.ID, in.Metadata, nullable(in.DaemonState), dsv, nullable(in.DataEncryptionKey), now, now, now))
	if err != nil {
		return store.Machine{}, false, fmt.Errorf("sqlite: insert machine: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return store.Machine{}, false, fmt.Errorf("sqlite: commit machine: %w", err)
	}
	return x, true, nil
}

// Machine implements store.Store.
func (s *Store) Machine(ctx context.Context, accountID, id string) (store.Machine, error) {
	x, err := scanMachine(s.r.QueryRowContext(ctx, `SELECT `+machineCols+` FROM machines WHERE account_id = ? AND id = ?`, accountID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Machine{}, store.ErrNotFound
	}
	if err != nil {
		return store.Machine{}, fmt.Errorf("sqlite: read machine: %w", err)
	}
	return x, nil
}

// Machines implements store.Store.
func (s *Store) Machines(ctx context.Context, accountID string) ([]store.Machine, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+machineCols+` FROM machines WHERE account_id = ? ORDER BY last_active_at DESC, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list machines: %w", err)
	}
	defer rows.Close()
	out := []store.Machine{}
	for rows.Next() {
		x, err := scanMachine(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan machine: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list machines: %w", err)
	}
	return out, nil
}

// SetMachineActive implements store.Store.
func (s *Store) SetMachineActive(ctx context.Context, accountID, id string, active bool, at int64) error {
	res, err := s.w.ExecContext(ctx, `UPDATE machines SET active = ?, last_active_at = ? WHERE account_id = ? AND id = ?`, b2i(active), at, accountID, id)
	if err != nil {
		return fmt.Errorf("sqlite: set machine activity: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// UpdateMachineMetadata implements store.Store.
func (s *Store) UpdateMachineMetadata(ctx context.Context, accountID, id, metadata string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "machines", "metadata", "metadata_version", accountID, id, &metadata, expected, now, "")
}

// UpdateMachineDaemonState implements store.Store.
func (s *Store) UpdateMachineDaemonState(ctx context.Context, accountID, id, state string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "machines", "daemon_state", "daemon_state_version", accountID, id, &state, expected, now, ", active = 1, last_active_at = ?")
}

// ExpireMachines implements store.Store.
func (s *Store) ExpireMachines(ctx context.Context, cutoff int64) ([]store.Presence, error) {
	return s.expire(ctx, "machines", cutoff)
}

// ---- usage ----

// UpsertUsageReport implements store.Store.
func (s *Store) UpsertUsageReport(ctx context.Context, accountID, sessionID, key, data string, now int64) (store.UsageReport, error) {
	var u store.UsageReport
	err := s.w.QueryRowContext(ctx, `INSERT INTO usage_reports (id, account_id, session_id, key, data, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (account_id, session_id, key) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at
		RETURNING id, session_id, key, data, created_at, updated_at`, store.NewID(), accountID, sessionID, key, data, now, now).
		Scan(&u.ID, &u.SessionID, &u.Key, &u.Data, &u.CreatedAt, &u.UpdatedAt)
	if err != nil {
		return store.UsageReport{}, fmt.Errorf("sqlite: upsert usage report: %w", err)
	}
	return u, nil
}
