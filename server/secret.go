package server

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/happy-dev/happy/server/token"
)

// The token signing secret of relays that share a database must be the
// same, so that a token one of them issued is valid on all. Where it comes
// from (signingKey): Config.SecretFile when set (created when missing;
// every instance names the same file's content); else, on PostgreSQL, the
// database's relay_secret row, created on first start from the data
// folder's secret.key when there is one (so the tokens of a relay moved to
// PostgreSQL stay valid) or at random; else the data folder's secret.key.

// secretSchema is the table holding the shared secret (the server's own,
// outside the store's migrations; one row).
const secretSchema = `CREATE TABLE IF NOT EXISTS relay_secret (
    name   TEXT PRIMARY KEY,
    seed   BYTEA NOT NULL
)`

// secretLock is the advisory lock key held while creating the table (the
// bytes of "happysec").
const secretLock int64 = 0x6861707079736563

// pooler is a store that exposes its PostgreSQL pool (postgres.Store).
type pooler interface{ Pool() *pgxpool.Pool }

// sharedSecret returns the database's signing seed, storing candidate
// (32 bytes) as it when there is none yet; created reports that.
func sharedSecret(ctx context.Context, pool *pgxpool.Pool, candidate []byte) (ed25519.PrivateKey, bool, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("server: shared signing secret: %w", err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, secretLock); err != nil {
		return nil, false, fmt.Errorf("server: shared signing secret: %w", err)
	}
	if _, err := tx.Exec(ctx, secretSchema); err != nil {
		return nil, false, fmt.Errorf("server: shared signing secret: create table: %w", err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO relay_secret (name, seed) VALUES ('token', $1) ON CONFLICT (name) DO NOTHING`, candidate)
	if err != nil {
		return nil, false, fmt.Errorf("server: shared signing secret: %w", err)
	}
	var seed []byte
	if err := tx.QueryRow(ctx, `SELECT seed FROM relay_secret WHERE name = 'token'`).Scan(&seed); err != nil {
		return nil, false, fmt.Errorf("server: shared signing secret: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("server: shared signing secret: %w", err)
	}
	if len(seed) != ed25519.SeedSize {
		return nil, false, fmt.Errorf("%w: the database's seed has %d bytes, want %d", ErrBadSecret, len(seed), ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), tag.RowsAffected() == 1, nil
}

// signingKey loads the signing secret (see above); from names where it
// came from, for the log.
func (s *Server) signingKey(ctx context.Context, localPath string) (key ed25519.PrivateKey, from string, created bool, err error) {
	if s.cfg.SecretFile != "" {
		key, created, err = token.LoadOrCreateSecret(s.cfg.SecretFile)
		return key, s.cfg.SecretFile, created, err
	}
	p, ok := s.st.(pooler)
	if !ok {
		key, created, err = token.LoadOrCreateSecret(localPath)
		return key, localPath, created, err
	}
	candidate := make([]byte, ed25519.SeedSize)
	where := "database"
	b, rerr := os.ReadFile(localPath)
	switch {
	case rerr == nil:
		local, perr := token.ParseSecret(b)
		if perr != nil {
			return nil, "", false, fmt.Errorf("server: signing secret %s: %w", localPath, perr)
		}
		copy(candidate, local.Seed())
		where = "database, from " + localPath // when stored now: imported, its tokens stay valid
	case errors.Is(rerr, os.ErrNotExist):
		_, _ = rand.Read(candidate)
	default:
		return nil, "", false, fmt.Errorf("server: read signing secret: %w", rerr)
	}
	key, created, err = sharedSecret(ctx, p.Pool(), candidate)
	return key, where, created, err
}
