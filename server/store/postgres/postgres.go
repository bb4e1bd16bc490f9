// Package postgres is the relay's PostgreSQL storage backend (pgx with a
// connection pool), for several relay instances sharing one database. It
// keeps the contract of store.Store exactly as the embedded SQLite backend
// does (the shared suite in store/storetest runs against both), with the same
// tables and columns; schema migrations are embedded from migrations/*.sql
// and applied in name order on Open, under an advisory lock so that
// instances starting together apply each migration once.
//
// Concurrency across instances comes from row locks: a message batch locks
// its session row (FOR NO KEY UPDATE) before it looks up localIds and
// allocates seqs, then its account row to allocate update seqs, and holds
// both until it commits, so per-session and per-account seqs are gap-free
// and committed in order whatever instance wrote them. Locks are always
// taken session first, account second.
//
// The URL is libpq's (postgres://user:password@host:port/db?sslmode=…), with
// pgxpool's parameters (pool_max_conns, …); behind a transaction-mode
// connection pooler add default_query_exec_mode=exec.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/happy-dev/happy/server/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// ErrMigration is returned by Open when the schema cannot be brought up to date.
var ErrMigration = errors.New("postgres: migration failed")

// migrationLock is the key of the advisory lock held while migrating
// (the bytes of "happymig").
const migrationLock int64 = 0x68617070796d6967

// Options configure Open.
type Options struct {
	// MaxConns is the pool's size; 0 keeps the URL's pool_max_conns or
	// pgxpool's default (the larger of 4 and the number of CPUs).
	MaxConns int32
}

// Store is the PostgreSQL backend of store.Store.
type Store struct {
	pool     *pgxpool.Pool
	migrated []string
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url, applies pending migrations and
// returns the store. The database must exist; its user needs CREATE on the
// schema for the first migration.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, errf("postgres: parse URL: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, errf("postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, errf("postgres: connect to %s:%d/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	applied, err := migrate(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return &Store{pool: pool, migrated: applied}, nil
}

// Close closes the pool (waiting for connections in use to be released).
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Pool returns the connection pool (for health checks and tools).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// MigratedAtOpen lists the migrations that Open applied (none when the
// schema was already up to date).
func (s *Store) MigratedAtOpen() []string { return append([]string(nil), s.migrated...) }

// Migrations lists the embedded migration names in the order they apply.
func Migrations() ([]string, error) {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, errf("postgres: list migrations: %w", err)
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

// migrate applies the pending migrations in one transaction holding the
// migration lock, and returns their names.
func migrate(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	names, err := Migrations()
	if err != nil {
		return nil, errf("%w: %w", ErrMigration, err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, errf("%w: begin: %w", ErrMigration, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
		return nil, errf("%w: lock: %w", ErrMigration, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT COLLATE "C" PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return nil, errf("%w: create schema_migrations: %w", ErrMigration, err)
	}
	rows, err := tx.Query(ctx, `SELECT name FROM schema_migrations`)
	if err != nil {
		return nil, errf("%w: list applied: %w", ErrMigration, err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, errf("%w: list applied: %w", ErrMigration, err)
	}
	var applied []string
	for _, name := range names {
		if contains(done, name) {
			continue
		}
		body, err := migrationFiles.ReadFile("migrations/" + name)
		if err != nil {
			return nil, errf("%w: read %s: %w", ErrMigration, name, err)
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return nil, errf("%w: apply %s: %w", ErrMigration, name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (name, applied_at) VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)`, name); err != nil {
			return nil, errf("%w: record %s: %w", ErrMigration, name, err)
		}
		applied = append(applied, name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, errf("%w: commit: %w", ErrMigration, err)
	}
	return applied, nil
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// AppliedMigrations lists the migrations applied to the database, in name order.
func (s *Store) AppliedMigrations(ctx context.Context) ([]store.Migration, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, applied_at FROM schema_migrations ORDER BY name`)
	if err != nil {
		return nil, errf("postgres: list applied migrations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Migration, error) {
		var m store.Migration
		err := r.Scan(&m.Name, &m.AppliedAt)
		return m, err
	})
	if err != nil {
		return nil, errf("postgres: list applied migrations: %w", err)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// ---- value conversion ----

// bs is the BYTEA parameter of a string; never nil (a nil slice is NULL).
func bs(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// nbs is the nullable BYTEA parameter of p (nil = NULL).
func nbs(p *string) any {
	if p == nil {
		return nil
	}
	return bs(*p)
}

// text scans a non-null BYTEA into a string.
type text string

func (t *text) ScanBytes(v []byte) error {
	*t = text(v)
	return nil
}

// nullText scans a nullable BYTEA into a *string (nil for NULL).
type nullText struct{ p *string }

func (n *nullText) ScanBytes(v []byte) error {
	if v == nil {
		n.p = nil
		return nil
	}
	s := string(v)
	n.p = &s
	return nil
}

// limit is a LIMIT parameter with SQLite's meaning: a negative limit is none.
func limit(n int) any {
	if n < 0 {
		return nil
	}
	return n
}

// ---- sessions ----

const sessionCols = `id, account_id, tag, seq, metadata, metadata_version, agent_state, agent_state_version, data_encryption_key, active, last_active_at, created_at, updated_at`

func scanSession(row pgx.Row) (store.Session, error) {
	var x store.Session
	var tag, meta text
	var state, dek nullText
	err := row.Scan(&x.ID, &x.AccountID, &tag, &x.Seq, &meta, &x.MetadataVersion, &state, &x.AgentStateVersion, &dek, &x.Active, &x.ActiveAt, &x.CreatedAt, &x.UpdatedAt)
	if err != nil {
		return store.Session{}, err
	}
	x.Tag, x.Metadata, x.AgentState, x.DataEncryptionKey = string(tag), string(meta), state.p, dek.p
	return x, nil
}

// GetOrCreateSession implements store.Store. The insert gives way to a
// concurrent one of the same tag (ON CONFLICT DO NOTHING), whose row is then
// read: every caller gets the one session of the tag.
func (s *Store) GetOrCreateSession(ctx context.Context, accountID string, in store.NewSession, now int64) (store.Session, bool, error) {
	for range 3 {
		x, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE account_id = $1 AND tag = $2`, accountID, bs(in.Tag)))
		if err == nil {
			return x, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Session{}, false, errf("postgres: find session by tag: %w", err)
		}
		x, err = scanSession(s.pool.QueryRow(ctx, `INSERT INTO sessions (id, account_id, tag, metadata, data_encryption_key, active, last_active_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, TRUE, $6, $6, $6) ON CONFLICT (account_id, tag) DO NOTHING RETURNING `+sessionCols,
			store.NewID(), accountID, bs(in.Tag), bs(in.Metadata), nbs(in.DataEncryptionKey), now))
		if err == nil {
			return x, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Session{}, false, errf("postgres: insert session: %w", err)
		}
		// Another writer created the tag meanwhile (and may have deleted
		// it again): read it on the next turn.
	}
	return store.Session{}, false, errors.New("postgres: create session: the tag kept being created and deleted concurrently")
}

// Session implements store.Store.
func (s *Store) Session(ctx context.Context, accountID, id string) (store.Session, error) {
	x, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1 AND account_id = $2`, id, accountID))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, store.ErrNotFound
	}
	if err != nil {
		return store.Session{}, errf("postgres: read session: %w", err)
	}
	return x, nil
}

func (s *Store) listSessions(ctx context.Context, q string, args ...any) ([]store.Session, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, errf("postgres: list sessions: %w", err)
	}
	defer rows.Close()
	out := []store.Session{}
	for rows.Next() {
		x, err := scanSession(rows)
		if err != nil {
			return nil, errf("postgres: scan session: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: list sessions: %w", err)
	}
	return out, nil
}

// Sessions implements store.Store.
func (s *Store) Sessions(ctx context.Context, accountID string, n int) ([]store.Session, error) {
	return s.listSessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE account_id = $1 ORDER BY updated_at DESC, id DESC LIMIT $2`, accountID, limit(n))
}

// ActiveSessions implements store.Store.
func (s *Store) ActiveSessions(ctx context.Context, accountID string, since int64, n int) ([]store.Session, error) {
	return s.listSessions(ctx, `SELECT `+sessionCols+` FROM sessions WHERE account_id = $1 AND active AND last_active_at > $2 ORDER BY last_active_at DESC, id DESC LIMIT $3`, accountID, since, limit(n))
}

// DeleteSession implements store.Store (messages and attachments go by
// ON DELETE CASCADE).
func (s *Store) DeleteSession(ctx context.Context, accountID, id string) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return errf("postgres: delete session: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1 AND account_id = $2`, id, accountID)
	if err != nil {
		return errf("postgres: delete session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	if _, err := tx.Exec(ctx, `DELETE FROM usage_reports WHERE account_id = $1 AND session_id = $2`, accountID, bs(id)); err != nil {
		return errf("postgres: delete session usage: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return errf("postgres: commit delete session: %w", err)
	}
	return nil
}

// SetSessionActive implements store.Store.
func (s *Store) SetSessionActive(ctx context.Context, accountID, id string, active bool, at int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET active = $1, last_active_at = $2 WHERE id = $3 AND account_id = $4`, active, at, id, accountID)
	if err != nil {
		return errf("postgres: set session activity: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// cas is a compare-and-set of col (versioned by verCol) on one row of table
// keyed by (account_id, idCol); extra adds assignments taking now as $2.
func (s *Store) cas(ctx context.Context, table, idCol string, id any, col, verCol, accountID string, val *string, expected, now int64, extra string) (store.CAS, error) {
	q := fmt.Sprintf(`UPDATE %s SET %s = $1, %s = %s + 1, updated_at = $2%s WHERE account_id = $3 AND %s = $4 AND %s = $5 RETURNING %s, %s`,
		table, col, verCol, verCol, extra, idCol, verCol, verCol, col)
	var cur store.CAS
	var v nullText
	err := s.pool.QueryRow(ctx, q, nbs(val), now, accountID, id, expected).Scan(&cur.Version, &v)
	if err == nil {
		cur.OK, cur.Value = true, v.p
		return cur, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.CAS{}, errf("postgres: update %s.%s: %w", table, col, err)
	}
	err = s.pool.QueryRow(ctx, fmt.Sprintf(`SELECT %s, %s FROM %s WHERE account_id = $1 AND %s = $2`, verCol, col, table, idCol), accountID, id).Scan(&cur.Version, &v)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.CAS{}, store.ErrNotFound
	}
	if err != nil {
		return store.CAS{}, errf("postgres: read %s.%s: %w", table, col, err)
	}
	cur.Value = v.p
	return cur, nil
}

// UpdateSessionMetadata implements store.Store.
func (s *Store) UpdateSessionMetadata(ctx context.Context, accountID, id, metadata string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "sessions", "id", id, "metadata", "metadata_version", accountID, &metadata, expected, now, "")
}

// UpdateSessionAgentState implements store.Store.
func (s *Store) UpdateSessionAgentState(ctx context.Context, accountID, id string, state *string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "sessions", "id", id, "agent_state", "agent_state_version", accountID, state, expected, now, "")
}

// expire marks inactive the active rows of table idle since cutoff. Rows
// another writer holds locked (a keep-alive, another instance's sweep) are
// skipped: they are expired by that sweep or the next one, never twice.
func (s *Store) expire(ctx context.Context, table string, cutoff int64) ([]store.Presence, error) {
	rows, err := s.pool.Query(ctx, fmt.Sprintf(`UPDATE %[1]s t SET active = FALSE FROM (
			SELECT account_id, id FROM %[1]s WHERE active AND last_active_at <= $1 FOR UPDATE SKIP LOCKED) e
		WHERE t.account_id = e.account_id AND t.id = e.id
		RETURNING t.account_id, t.id, t.last_active_at`, table), cutoff)
	if err != nil {
		return nil, errf("postgres: expire %s: %w", table, err)
	}
	defer rows.Close()
	var out []store.Presence
	for rows.Next() {
		var p store.Presence
		var id text
		if err := rows.Scan(&p.AccountID, &id, &p.ActiveAt); err != nil {
			return nil, errf("postgres: expire %s: %w", table, err)
		}
		p.ID = string(id)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: expire %s: %w", table, err)
	}
	return out, nil
}

// ExpireSessions implements store.Store.
func (s *Store) ExpireSessions(ctx context.Context, cutoff int64) ([]store.Presence, error) {
	return s.expire(ctx, "sessions", cutoff)
}

// ---- messages ----

// AppendMessages implements store.Store; see the package comment for the
// locking.
func (s *Store) AppendMessages(ctx context.Context, accountID, sessionID string, msgs []store.NewMessage, now int64) (store.AppendResult, error) {
	// First occurrence of a localId wins.
	seen := make(map[string]bool, len(msgs))
	uniq := make([]store.NewMessage, 0, len(msgs))
	for _, m := range msgs {
		if seen[m.LocalID] {
			continue
		}
		seen[m.LocalID] = true
		uniq = append(uniq, m)
	}
	var res store.AppendResult
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return res, errf("postgres: append messages: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	lids := make([][]byte, len(uniq))
	for i, m := range uniq {
		lids[i] = bs(m.LocalID)
	}
	// The session lock and the localId lookup go in one round trip; the
	// lookup runs after the lock is granted, so it sees every batch
	// committed before.
	b := &pgx.Batch{}
	b.Queue(`SELECT seq FROM sessions WHERE id = $1 AND account_id = $2 FOR NO KEY UPDATE`, sessionID, accountID)
	if len(uniq) > 0 {
		b.Queue(`SELECT id, seq, local_id, created_at, updated_at FROM session_messages WHERE session_id = $1 AND local_id = ANY($2)`, sessionID, lids)
	}
	br := tx.SendBatch(ctx, b)
	var seq int64
	if err := br.QueryRow().Scan(&seq); err != nil {
		_ = br.Close()
		if errors.Is(err, pgx.ErrNoRows) {
			return res, store.ErrNotFound
		}
		return res, errf("postgres: append messages: find session: %w", err)
	}
	existing := make(map[string]bool, len(uniq))
	if len(uniq) > 0 {
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return res, errf("postgres: append messages: find local ids: %w", err)
		}
		for rows.Next() {
			var m store.Message
			var lid text
			if err := rows.Scan(&m.ID, &m.Seq, &lid, &m.CreatedAt, &m.UpdatedAt); err != nil {
				rows.Close()
				_ = br.Close()
				return res, errf("postgres: append messages: scan: %w", err)
			}
			l := string(lid)
			m.SessionID, m.LocalID = sessionID, &l
			existing[l] = true
			res.Rows = append(res.Rows, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			_ = br.Close()
			return res, errf("postgres: append messages: find local ids: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return res, errf("postgres: append messages: %w", err)
	}
	n := len(uniq) - len(existing)
	if n > 0 {
		res.Created = make([]store.Message, 0, n)
		ids := make([]string, 0, n)
		seqs := make([]int64, 0, n)
		newLids := make([][]byte, 0, n)
		contents := make([][]byte, 0, n)
		next := seq + 1
		for i, m := range uniq {
			if existing[m.LocalID] {
				continue
			}
			lid := m.LocalID
			row := store.Message{ID: store.NewMessageID(now), SessionID: sessionID, Seq: next, LocalID: &lid, Content: m.Content, CreatedAt: now, UpdatedAt: now}
			res.Created = append(res.Created, row)
			ids, seqs = append(ids, row.ID), append(seqs, next)
			newLids, contents = append(newLids, lids[i]), append(contents, bs(m.Content))
			next++
		}
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO session_messages (id, session_id, seq, local_id, content, created_at, updated_at)
			SELECT i, $1, s, l, c, $2, $2 FROM unnest($3::text[], $4::bigint[], $5::bytea[], $6::bytea[]) AS t(i, s, l, c)`,
			sessionID, now, ids, seqs, newLids, contents)
		b.Queue(`UPDATE sessions SET seq = $1, updated_at = $2 WHERE id = $3`, next-1, now, sessionID)
		b.Queue(`UPDATE accounts SET seq = seq + $1 WHERE id = $2 RETURNING seq`, n, accountID)
		br := tx.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return res, errf("postgres: append messages: insert %d rows from seq %d: %w", n, seq+1, err)
		}
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return res, errf("postgres: append messages: allocate seqs: %w", err)
		}
		var lastUpd int64
		if err := br.QueryRow().Scan(&lastUpd); err != nil {
			_ = br.Close()
			return res, errf("postgres: append messages: allocate update seqs: %w", err)
		}
		if err := br.Close(); err != nil {
			return res, errf("postgres: append messages: %w", err)
		}
		res.FirstUpdateSeq = lastUpd - int64(n) + 1
	}
	if err := tx.Commit(ctx); err != nil {
		return store.AppendResult{}, errf("postgres: append messages: commit: %w", err)
	}
	for _, c := range res.Created {
		c.Content = ""
		res.Rows = append(res.Rows, c)
	}
	sort.Slice(res.Rows, func(i, j int) bool { return res.Rows[i].Seq < res.Rows[j].Seq })
	return res, nil
}

func scanMessages(rows pgx.Rows, sessionID string) ([]store.Message, error) {
	defer rows.Close()
	out := []store.Message{}
	for rows.Next() {
		var m store.Message
		var lid nullText
		var content text
		if err := rows.Scan(&m.ID, &m.Seq, &lid, &content, &m.CreatedAt, &m.UpdatedAt); err != nil {
			return nil, errf("postgres: scan message: %w", err)
		}
		m.SessionID, m.LocalID, m.Content = sessionID, lid.p, string(content)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: list messages: %w", err)
	}
	return out, nil
}

func (s *Store) ownsSession(ctx context.Context, accountID, sessionID string) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1 AND account_id = $2`, sessionID, accountID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return errf("postgres: find session: %w", err)
	}
	return nil
}

// Messages implements store.Store.
func (s *Store) Messages(ctx context.Context, accountID, sessionID string, p store.Page) ([]store.Message, bool, error) {
	if p.Limit < 1 {
		return nil, false, errf("postgres: list messages: limit %d", p.Limit)
	}
	if err := s.ownsSession(ctx, accountID, sessionID); err != nil {
		return nil, false, err
	}
	var rows pgx.Rows
	var err error
	if p.Before > 0 {
		rows, err = s.pool.Query(ctx, `SELECT id, seq, local_id, content, created_at, updated_at FROM session_messages WHERE session_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3`, sessionID, p.Before, p.Limit+1)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT id, seq, local_id, content, created_at, updated_at FROM session_messages WHERE session_id = $1 AND seq > $2 ORDER BY seq ASC LIMIT $3`, sessionID, p.After, p.Limit+1)
	}
	if err != nil {
		return nil, false, errf("postgres: list messages: %w", err)
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
func (s *Store) RecentMessages(ctx context.Context, accountID, sessionID string, n int) ([]store.Message, error) {
	if err := s.ownsSession(ctx, accountID, sessionID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT id, seq, local_id, content, created_at, updated_at FROM session_messages WHERE session_id = $1 ORDER BY created_at DESC, seq DESC LIMIT $2`, sessionID, limit(n))
	if err != nil {
		return nil, errf("postgres: list recent messages: %w", err)
	}
	return scanMessages(rows, sessionID)
}

// ---- machines ----

const machineCols = `id, account_id, metadata, metadata_version, daemon_state, daemon_state_version, data_encryption_key, seq, active, last_active_at, created_at, updated_at`

func scanMachine(row pgx.Row) (store.Machine, error) {
	var x store.Machine
	var id, meta text
	var state, dek nullText
	err := row.Scan(&id, &x.AccountID, &meta, &x.MetadataVersion, &state, &x.DaemonStateVersion, &dek, &x.Seq, &x.Active, &x.ActiveAt, &x.CreatedAt, &x.UpdatedAt)
	if err != nil {
		return store.Machine{}, err
	}
	x.ID, x.Metadata, x.DaemonState, x.DataEncryptionKey = string(id), string(meta), state.p, dek.p
	return x, nil
}

// GetOrCreateMachine implements store.Store (concurrent creations of one id
// resolve as in GetOrCreateSession).
func (s *Store) GetOrCreateMachine(ctx context.Context, accountID string, in store.NewMachine, now int64) (store.Machine, bool, error) {
	dsv := 0
	if in.DaemonState != nil {
		dsv = 1
	}
	for range 3 {
		x, err := scanMachine(s.pool.QueryRow(ctx, `SELECT `+machineCols+` FROM machines WHERE account_id = $1 AND id = $2`, accountID, bs(in.ID)))
		if err == nil {
			return x, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Machine{}, false, errf("postgres: find machine: %w", err)
		}
		x, err = scanMachine(s.pool.QueryRow(ctx, `INSERT INTO machines (account_id, id, metadata, metadata_version, daemon_state, daemon_state_version, data_encryption_key, active, last_active_at, created_at, updated_at)
			VALUES ($1, $2, $3, 1, $4, $5, $6, FALSE, $7, $7, $7) ON CONFLICT (account_id, id) DO NOTHING RETURNING `+machineCols,
			accountID, bs(in.ID), bs(in.Metadata), nbs(in.DaemonState), dsv, nbs(in.DataEncryptionKey), now))
		if err == nil {
			return x, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return store.Machine{}, false, errf("postgres: insert machine: %w", err)
		}
	}
	return store.Machine{}, false, errors.New("postgres: create machine: the id kept conflicting concurrently")
}

// Machine implements store.Store.
func (s *Store) Machine(ctx context.Context, accountID, id string) (store.Machine, error) {
	x, err := scanMachine(s.pool.QueryRow(ctx, `SELECT `+machineCols+` FROM machines WHERE account_id = $1 AND id = $2`, accountID, bs(id)))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Machine{}, store.ErrNotFound
	}
	if err != nil {
		return store.Machine{}, errf("postgres: read machine: %w", err)
	}
	return x, nil
}

// Machines implements store.Store.
func (s *Store) Machines(ctx context.Context, accountID string) ([]store.Machine, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+machineCols+` FROM machines WHERE account_id = $1 ORDER BY last_active_at DESC, id`, accountID)
	if err != nil {
		return nil, errf("postgres: list machines: %w", err)
	}
	defer rows.Close()
	out := []store.Machine{}
	for rows.Next() {
		x, err := scanMachine(rows)
		if err != nil {
			return nil, errf("postgres: scan machine: %w", err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: list machines: %w", err)
	}
	return out, nil
}

// SetMachineActive implements store.Store.
func (s *Store) SetMachineActive(ctx context.Context, accountID, id string, active bool, at int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE machines SET active = $1, last_active_at = $2 WHERE account_id = $3 AND id = $4`, active, at, accountID, bs(id))
	if err != nil {
		return errf("postgres: set machine activity: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// UpdateMachineMetadata implements store.Store.
func (s *Store) UpdateMachineMetadata(ctx context.Context, accountID, id, metadata string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "machines", "id", bs(id), "metadata", "metadata_version", accountID, &metadata, expected, now, "")
}

// UpdateMachineDaemonState implements store.Store.
func (s *Store) UpdateMachineDaemonState(ctx context.Context, accountID, id, state string, expected, now int64) (store.CAS, error) {
	return s.cas(ctx, "machines", "id", bs(id), "daemon_state", "daemon_state_version", accountID, &state, expected, now, ", active = TRUE, last_active_at = $2")
}

// ExpireMachines implements store.Store.
func (s *Store) ExpireMachines(ctx context.Context, cutoff int64) ([]store.Presence, error) {
	return s.expire(ctx, "machines", cutoff)
}

// ---- usage ----

// UpsertUsageReport implements store.Store.
func (s *Store) UpsertUsageReport(ctx context.Context, accountID, sessionID, key, data string, now int64) (store.UsageReport, error) {
	var u store.UsageReport
	var sid, k, d text
	err := s.pool.QueryRow(ctx, `INSERT INTO usage_reports (id, account_id, session_id, key, data, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)
		ON CONFLICT (account_id, session_id, key) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at
		RETURNING id, session_id, key, data, created_at, updated_at`, store.NewID(), accountID, bs(sessionID), bs(key), bs(data), now).
		Scan(&u.ID, &sid, &k, &d, &u.CreatedAt, &u.UpdatedAt)
	if err != nil {
		return store.UsageReport{}, errf("postgres: upsert usage report: %w", err)
	}
	u.SessionID, u.Key, u.Data = string(sid), string(k), string(d)
	return u, nil
}

// ---- attachments ----

// PutAttachment implements store.Store.
func (s *Store) PutAttachment(ctx context.Context, accountID, sessionID, name string, data []byte, now int64) error {
	if !store.ValidAttachmentName(name) {
		return errf("postgres: put attachment: invalid name %q", name)
	}
	if data == nil {
		data = []byte{}
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO attachments (session_id, name, data, created_at)
		SELECT id, $3, $4, $5 FROM sessions WHERE id = $1 AND account_id = $2
		ON CONFLICT (session_id, name) DO UPDATE SET data = excluded.data, created_at = excluded.created_at`, sessionID, accountID, name, data, now)
	if err != nil {
		return errf("postgres: put attachment: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}

// Attachment implements store.Store.
func (s *Store) Attachment(ctx context.Context, accountID, sessionID, name string) ([]byte, error) {
	if !store.ValidAttachmentName(name) {
		return nil, store.ErrNotFound
	}
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT a.data FROM attachments a JOIN sessions s ON s.id = a.session_id
		WHERE s.id = $1 AND s.account_id = $2 AND a.name = $3`, sessionID, accountID, name).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, errf("postgres: read attachment: %w", err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}
