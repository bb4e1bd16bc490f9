package postgres

import (
	"context"

	"github.com/happy-dev/happy/server/store"
)

// ---- push tokens ----

// AddPushToken implements store.Store.
func (s *Store) AddPushToken(ctx context.Context, accountID, token string, now int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO push_tokens (id, account_id, token, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)
		ON CONFLICT (account_id, token) DO UPDATE SET updated_at = excluded.updated_at`, store.NewID(), accountID, bs(token), now)
	if err != nil {
		return errf("postgres: add push token: %w", err)
	}
	return nil
}

// RemovePushToken implements store.Store.
func (s *Store) RemovePushToken(ctx context.Context, accountID, token string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM push_tokens WHERE account_id = $1 AND token = $2`, accountID, bs(token)); err != nil {
		return errf("postgres: remove push token: %w", err)
	}
	return nil
}

// PushTokens implements store.Store.
func (s *Store) PushTokens(ctx context.Context, accountID string) ([]store.PushToken, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, token, created_at, updated_at FROM push_tokens WHERE account_id = $1 ORDER BY created_at DESC, id DESC`, accountID)
	if err != nil {
		return nil, errf("postgres: list push tokens: %w", err)
	}
	defer rows.Close()
	out := []store.PushToken{}
	for rows.Next() {
		var t store.PushToken
		var tok text
		if err := rows.Scan(&t.ID, &tok, &t.CreatedAt, &t.UpdatedAt); err != nil {
			return nil, errf("postgres: scan push token: %w", err)
		}
		t.Token = string(tok)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: list push tokens: %w", err)
	}
	return out, nil
}

// ---- web push subscriptions ----

// AddWebPushSubscription implements store.Store.
func (s *Store) AddWebPushSubscription(ctx context.Context, accountID string, sub store.WebPushSubscription, now int64) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO web_push_subscriptions (id, account_id, endpoint, p256dh, auth, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $6)
		ON CONFLICT (account_id, endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, updated_at = excluded.updated_at`,
		store.NewID(), accountID, bs(sub.Endpoint), bs(sub.P256dh), bs(sub.Auth), now)
	if err != nil {
		return errf("postgres: add web push subscription: %w", err)
	}
	return nil
}

// RemoveWebPushSubscription implements store.Store.
func (s *Store) RemoveWebPushSubscription(ctx context.Context, accountID, endpoint string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM web_push_subscriptions WHERE account_id = $1 AND endpoint = $2`, accountID, bs(endpoint)); err != nil {
		return errf("postgres: remove web push subscription: %w", err)
	}
	return nil
}

// RemoveWebPushSubscriptions implements store.Store.
func (s *Store) RemoveWebPushSubscriptions(ctx context.Context, accountID string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM web_push_subscriptions WHERE account_id = $1`, accountID)
	if err != nil {
		return 0, errf("postgres: remove web push subscriptions: %w", err)
	}
	return tag.RowsAffected(), nil
}

// WebPushSubscriptions implements store.Store.
func (s *Store) WebPushSubscriptions(ctx context.Context, accountID string) ([]store.WebPushSubscription, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, endpoint, p256dh, auth, created_at, updated_at FROM web_push_subscriptions WHERE account_id = $1 ORDER BY created_at DESC, id DESC`, accountID)
	if err != nil {
		return nil, errf("postgres: list web push subscriptions: %w", err)
	}
	defer rows.Close()
	out := []store.WebPushSubscription{}
	for rows.Next() {
		var w store.WebPushSubscription
		var endpoint, p256dh, auth text
		if err := rows.Scan(&w.ID, &endpoint, &p256dh, &auth, &w.CreatedAt, &w.UpdatedAt); err != nil {
			return nil, errf("postgres: scan web push subscription: %w", err)
		}
		w.Endpoint, w.P256dh, w.Auth = string(endpoint), string(p256dh), string(auth)
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: list web push subscriptions: %w", err)
	}
	return out, nil
}
