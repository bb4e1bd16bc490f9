package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/server/store"
)

// ---- accounts ----

// UpsertAccount implements store.Store.
func (s *Store) UpsertAccount(ctx context.Context, publicKey string, now int64) (store.Account, error) {
	var a store.Account
	err := s.w.QueryRowContext(ctx, `INSERT INTO accounts (id, public_key, created_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (public_key) DO UPDATE SET updated_at = excluded.updated_at
		RETURNING id, public_key, created_at, updated_at`, store.NewID(), publicKey, now, now).
		Scan(&a.ID, &a.PublicKey, &a.CreatedAt, &a.UpdatedAt)
	if err != nil {
		return store.Account{}, fmt.Errorf("sqlite: upsert account: %w", err)
	}
	return a, nil
}

// AccountByKey implements store.Store.
func (s *Store) AccountByKey(ctx context.Context, publicKey string) (store.Account, error) {
	var a store.Account
	err := s.r.QueryRowContext(ctx, `SELECT id, public_key, created_at, updated_at FROM accounts WHERE public_key = ?`, publicKey).
		Scan(&a.ID, &a.PublicKey, &a.CreatedAt, &a.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Account{}, store.ErrNotFound
	}
	if err != nil {
		return store.Account{}, fmt.Errorf("sqlite: read account by key: %w", err)
	}
	return a, nil
}

// UseChallenge implements store.Store.
func (s *Store) UseChallenge(ctx context.Context, digest string, now, keepUntil int64) error {
	res, err := s.w.ExecContext(ctx, `INSERT INTO auth_challenges (digest, used_at, keep_until) VALUES (?, ?, ?)
		ON CONFLICT (digest) DO NOTHING`, digest, now, keepUntil)
	if err != nil {
		return fmt.Errorf("sqlite: record used challenge: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("sqlite: record used challenge: %w", err)
	} else if n == 0 {
		return store.ErrChallengeUsed
	}
	return nil
}

// DeleteChallengesBefore implements store.Store.
func (s *Store) DeleteChallengesBefore(ctx context.Context, cutoff int64) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM auth_challenges WHERE keep_until < ?`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete old used challenges: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// NextUpdateSeqs implements store.Store.
func (s *Store) NextUpdateSeqs(ctx context.Context, accountID string, n int) (int64, error) {
	if n < 1 {
		return 0, fmt.Errorf("sqlite: allocate update seqs: n = %d", n)
	}
	var last int64
	err := s.w.QueryRowContext(ctx, `UPDATE accounts SET seq = seq + ? WHERE id = ? RETURNING seq`, n, accountID).Scan(&last)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sqlite: allocate update seqs for %s: %w", accountID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: allocate update seqs: %w", err)
	}
	return last - int64(n) + 1, nil
}

// ---- terminal auth requests ----

const authCols = `id, public_key, supports_v2, response, response_account_id, created_at`

func scanAuth(row interface{ Scan(...any) error }) (store.AuthRequest, error) {
	var a store.AuthRequest
	var v2 int
	var resp, acct sql.NullString
	if err := row.Scan(&a.ID, &a.PublicKey, &v2, &resp, &acct, &a.CreatedAt); err != nil {
		return a, err
	}
	a.SupportsV2 = v2 != 0
	if resp.Valid {
		a.Response = &resp.String
	}
	if acct.Valid {
		a.ResponseAccountID = &acct.String
	}
	return a, nil
}

// UpsertAuthRequest implements store.Store.
func (s *Store) UpsertAuthRequest(ctx context.Context, publicKey string, supportsV2 bool, now int64) (store.AuthRequest, error) {
	a, err := scanAuth(s.w.QueryRowContext(ctx, `INSERT INTO terminal_auth_requests (id, public_key, supports_v2, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (public_key) DO UPDATE SET public_key = excluded.public_key
		RETURNING `+authCols, store.NewID(), publicKey, b2i(supportsV2), now))
	if err != nil {
		return store.AuthRequest{}, fmt.Errorf("sqlite: upsert auth request: %w", err)
	}
	return a, nil
}

// AuthRequest implements store.Store.
func (s *Store) AuthRequest(ctx context.Context, publicKey string) (store.AuthRequest, error) {
	a, err := scanAuth(s.r.QueryRowContext(ctx, `SELECT `+authCols+` FROM terminal_auth_requests WHERE public_key = ?`, publicKey))
	if errors.Is(err, sql.ErrNoRows) {
		return store.AuthRequest{}, store.ErrNotFound
	}
	if err != nil {
		return store.AuthRequest{}, fmt.Errorf("sqlite: read auth request: %w", err)
	}
	return a, nil
}

// AnswerAuthRequest implements store.Store.
func (s *Store) AnswerAuthRequest(ctx context.Context, publicKey, response, accountID string) error {
	res, err := s.w.ExecContext(ctx, `UPDATE terminal_auth_requests SET response = ?, response_account_id = ? WHERE public_key = ? AND response IS NULL`, response, accountID, publicKey)
	if err != nil {
		return fmt.Errorf("sqlite: answer auth request: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	if _, err := s.AuthRequest(ctx, publicKey); err != nil {
		return err
	}
	return store.ErrAnswered
}

// DeleteAuthRequest implements store.Store.
func (s *Store) DeleteAuthRequest(ctx context.Context, id string) (store.AuthRequest, error) {
	a, err := scanAuth(s.w.QueryRowContext(ctx, `DELETE FROM terminal_auth_requests WHERE id = ? RETURNING `+authCols, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.AuthRequest{}, store.ErrNotFound
	}
	if err != nil {
		return store.AuthRequest{}, fmt.Errorf("sqlite: delete auth request: %w", err)
	}
	return a, nil
}

// AuthRequestsSince implements store.Store.
func (s *Store) AuthRequestsSince(ctx context.Context, since int64, limit int) ([]store.AuthRequest, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+authCols+` FROM terminal_auth_requests WHERE created_at >= ? ORDER BY created_at DESC, id DESC LIMIT ?`, since, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list auth requests: %w", err)
	}
	defer rows.Close()
	var out []store.AuthRequest
	for rows.Next() {
		a, err := scanAuth(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list auth requests: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list auth requests: %w", err)
	}
	return out, nil
}

// DeleteAuthRequestsBefore implements store.Store.
func (s *Store) DeleteAuthRequestsBefore(ctx context.Context, cutoff int64) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM terminal_auth_requests WHERE created_at < ?`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete old auth requests: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// ---- token revocation ----

// TokenGeneration implements store.Store.
func (s *Store) TokenGeneration(ctx context.Context, accountID string) (int64, error) {
	var gen int64
	err := s.r.QueryRowContext(ctx, `SELECT generation FROM token_revocations WHERE account_id = ?`, accountID).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: read token generation: %w", err)
	}
	return gen, nil
}

// RevokeTokens implements store.Store.
func (s *Store) RevokeTokens(ctx context.Context, accountID string, now int64) (int64, error) {
	var gen int64
	err := s.w.QueryRowContext(ctx, `INSERT INTO token_revocations (account_id, generation, revoked_at)
		SELECT id, 1, ? FROM accounts WHERE id = ?
		ON CONFLICT (account_id) DO UPDATE SET generation = generation + 1, revoked_at = excluded.revoked_at
		RETURNING generation`, now, accountID).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: revoke tokens: %w", err)
	}
	return gen, nil
}
