package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/happy-dev/happy/server/store"
)

// ---- accounts ----

// UpsertAccount implements store.Store.
func (s *Store) UpsertAccount(ctx context.Context, publicKey string, now int64) (store.Account, error) {
	var a store.Account
	var pk text
	err := s.pool.QueryRow(ctx, `INSERT INTO accounts (id, public_key, created_at, updated_at) VALUES ($1, $2, $3, $3)
		ON CONFLICT (public_key) DO UPDATE SET updated_at = excluded.updated_at
		RETURNING id, public_key, created_at, updated_at`, store.NewID(), bs(publicKey), now).
		Scan(&a.ID, &pk, &a.CreatedAt, &a.UpdatedAt)
	if err != nil {
		return store.Account{}, errf("postgres: upsert account: %w", err)
	}
	a.PublicKey = string(pk)
	return a, nil
}

// AccountByKey implements store.Store.
func (s *Store) AccountByKey(ctx context.Context, publicKey string) (store.Account, error) {
	var a store.Account
	var pk text
	err := s.pool.QueryRow(ctx, `SELECT id, public_key, created_at, updated_at FROM accounts WHERE public_key = $1`, bs(publicKey)).
		Scan(&a.ID, &pk, &a.CreatedAt, &a.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Account{}, store.ErrNotFound
	}
	if err != nil {
		return store.Account{}, errf("postgres: read account by key: %w", err)
	}
	a.PublicKey = string(pk)
	return a, nil
}

// UseChallenge implements store.Store.
func (s *Store) UseChallenge(ctx context.Context, digest string, now, keepUntil int64) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO auth_challenges (digest, used_at, keep_until) VALUES ($1, $2, $3)
		ON CONFLICT (digest) DO NOTHING`, bs(digest), now, keepUntil)
	if err != nil {
		return errf("postgres: record used challenge: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return store.ErrChallengeUsed
	}
	return nil
}

// DeleteChallengesBefore implements store.Store.
func (s *Store) DeleteChallengesBefore(ctx context.Context, cutoff int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM auth_challenges WHERE keep_until < $1`, cutoff)
	if err != nil {
		return 0, errf("postgres: delete old used challenges: %w", err)
	}
	return tag.RowsAffected(), nil
}

// NextUpdateSeqs implements store.Store.
func (s *Store) NextUpdateSeqs(ctx context.Context, accountID string, n int) (int64, error) {
	if n < 1 {
		return 0, errf("postgres: allocate update seqs: n = %d", n)
	}
	var last int64
	err := s.pool.QueryRow(ctx, `UPDATE accounts SET seq = seq + $1 WHERE id = $2 RETURNING seq`, n, accountID).Scan(&last)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errf("postgres: allocate update seqs for %s: %w", accountID, store.ErrNotFound)
	}
	if err != nil {
		return 0, errf("postgres: allocate update seqs: %w", err)
	}
	return last - int64(n) + 1, nil
}

// ---- terminal auth requests ----

const authCols = `id, public_key, supports_v2, response, response_account_id, created_at`

func scanAuth(row pgx.Row) (store.AuthRequest, error) {
	var a store.AuthRequest
	var pk text
	var resp nullText
	if err := row.Scan(&a.ID, &pk, &a.SupportsV2, &resp, &a.ResponseAccountID, &a.CreatedAt); err != nil {
		return store.AuthRequest{}, err
	}
	a.PublicKey = string(pk)
	a.Response = resp.p
	return a, nil
}

// UpsertAuthRequest implements store.Store.
func (s *Store) UpsertAuthRequest(ctx context.Context, publicKey string, supportsV2 bool, now int64) (store.AuthRequest, error) {
	a, err := scanAuth(s.pool.QueryRow(ctx, `INSERT INTO terminal_auth_requests (id, public_key, supports_v2, created_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (public_key) DO UPDATE SET public_key = excluded.public_key
		RETURNING `+authCols, store.NewID(), bs(publicKey), supportsV2, now))
	if err != nil {
		return store.AuthRequest{}, errf("postgres: upsert auth request: %w", err)
	}
	return a, nil
}

// AuthRequest implements store.Store.
func (s *Store) AuthRequest(ctx context.Context, publicKey string) (store.AuthRequest, error) {
	a, err := scanAuth(s.pool.QueryRow(ctx, `SELECT `+authCols+` FROM terminal_auth_requests WHERE public_key = $1`, bs(publicKey)))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.AuthRequest{}, store.ErrNotFound
	}
	if err != nil {
		return store.AuthRequest{}, errf("postgres: read auth request: %w", err)
	}
	return a, nil
}

// AnswerAuthRequest implements store.Store.
func (s *Store) AnswerAuthRequest(ctx context.Context, publicKey, response, accountID string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE terminal_auth_requests SET response = $1, response_account_id = $2 WHERE public_key = $3 AND response IS NULL`, bs(response), accountID, bs(publicKey))
	if err != nil {
		return errf("postgres: answer auth request: %w", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	if _, err := s.AuthRequest(ctx, publicKey); err != nil {
		return err
	}
	return store.ErrAnswered
}

// DeleteAuthRequest implements store.Store.
func (s *Store) DeleteAuthRequest(ctx context.Context, id string) (store.AuthRequest, error) {
	a, err := scanAuth(s.pool.QueryRow(ctx, `DELETE FROM terminal_auth_requests WHERE id = $1 RETURNING `+authCols, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.AuthRequest{}, store.ErrNotFound
	}
	if err != nil {
		return store.AuthRequest{}, errf("postgres: delete auth request: %w", err)
	}
	return a, nil
}

// AuthRequestsSince implements store.Store.
func (s *Store) AuthRequestsSince(ctx context.Context, since int64, limit int) ([]store.AuthRequest, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+authCols+` FROM terminal_auth_requests WHERE created_at >= $1 ORDER BY created_at DESC, id DESC LIMIT $2`, since, limit)
	if err != nil {
		return nil, errf("postgres: list auth requests: %w", err)
	}
	defer rows.Close()
	var out []store.AuthRequest
	for rows.Next() {
		a, err := scanAuth(rows)
		if err != nil {
			return nil, errf("postgres: list auth requests: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: list auth requests: %w", err)
	}
	return out, nil
}

// DeleteAuthRequestsBefore implements store.Store.
func (s *Store) DeleteAuthRequestsBefore(ctx context.Context, cutoff int64) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM terminal_auth_requests WHERE created_at < $1`, cutoff)
	if err != nil {
		return 0, errf("postgres: delete old auth requests: %w", err)
	}
	return tag.RowsAffected(), nil
}

// ---- token revocation ----

// TokenGeneration implements store.Store.
func (s *Store) TokenGeneration(ctx context.Context, accountID string) (int64, error) {
	var gen int64
	err := s.pool.QueryRow(ctx, `SELECT generation FROM token_revocations WHERE account_id = $1`, accountID).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, errf("postgres: read token generation: %w", err)
	}
	return gen, nil
}

// RevokeTokens implements store.Store.
func (s *Store) RevokeTokens(ctx context.Context, accountID string, now int64) (int64, error) {
	var gen int64
	err := s.pool.QueryRow(ctx, `INSERT INTO token_revocations (account_id, generation, revoked_at)
		SELECT id, 1, $1 FROM accounts WHERE id = $2
		ON CONFLICT (account_id) DO UPDATE SET generation = token_revocations.generation + 1, revoked_at = excluded.revoked_at
		RETURNING generation`, now, accountID).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, errf("postgres: revoke tokens: %w", err)
	}
	return gen, nil
}
