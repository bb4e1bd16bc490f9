package sqlite

import (
	"context"
	"fmt"

	"github.com/happy-dev/happy/server/store"
)

// ---- push tokens ----

// AddPushToken implements store.Store.
func (s *Store) AddPushToken(ctx context.Context, accountID, token string, now int64) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO push_tokens (id, account_id, token, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (account_id, token) DO UPDATE SET updated_at = excluded.updated_at`, store.NewID(), accountID, token, now, now)
	if err != nil {
		return fmt.Errorf("sqlite: add push token: %w", err)
	}
	return nil
}

// RemovePushToken implements store.Store.
func (s *Store) RemovePushToken(ctx context.Context, accountID, token string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM push_tokens WHERE account_id = ? AND token = ?`, accountID, token); err != nil {
		return fmt.Errorf("sqlite: remove push token: %w", err)
	}
	return nil
}

// PushTokens implements store.Store.
func (s *Store) PushTokens(ctx context.Context, accountID string) ([]store.PushToken, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, token, created_at, updated_at FROM push_tokens WHERE account_id = ? ORDER BY created_at DESC, id DESC`, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list push tokens: %w", err)
	}
	defer rows.Close()
	out := []store.PushToken{}
	for rows.Next() {
		var t store.PushToken
		if err := rows.Scan(&t.ID, &t.Token, &t.CreatedAt, &t.UpdatedAt); err != nil {
			return nil, fmt.Errorf("sqlite: scan push token: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list push tokens: %w", err)
	}
	return out, nil
}

// ---- web push subscriptions ----

// AddWebPushSubscription implements store.Store.
func (s *Store) AddWebPushSubscription(ctx context.Context, accountID string, sub store.WebPushSubscription, now int64) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO web_push_subscriptions (id, account_id, endpoint, p256dh, auth, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (account_id, endpoint) DO UPDATE SET p256dh = excluded.p256dh, auth = excluded.auth, updated_at = excluded.updated_at`,
		store.NewID(), accountID, sub.Endpoint, sub.P256dh, sub.Auth, now, now)
	if err != nil {
		return fmt.Errorf("sqlite: add web push subscription: %w", err)
	}
	return nil
}

// RemoveWebPushSubscription implements store.Store.
func (s *Store) RemoveWebPushSubscription(ctx context.Context, accountID, endpoint string) error {
	if _, err := s.w.ExecContext(ctx, `DELETE FROM web_push_subscriptions WHERE account_id = ? AND endpoint = ?`, accountID, endpoint); err != nil {
		return fmt.Errorf("sqlite: remove web push subscription: %w", err)
	}
	return nil
}

// RemoveWebPushSubscriptions implements store.Store.
func (s *Store) RemoveWebPushSubscriptions(ctx context.Context, accountID string) (int64, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM web_push_subscriptions WHERE account_id = ?`, accountID)
	if err != nil {
		return 0, fmt.Errorf("sqlite: remove web push subscriptions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: remove web push subscriptions: %w", err)
	}
	return n, nil
}

// WebPushSubscriptions implements store.Store.
func (s *Store) WebPushSubscriptions(ctx context.Context, accountID string) ([]store.WebPushSubscription, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, endpoint, p256dh, auth, created_at, updated_at FROM web_push_subscriptions WHERE account_id = ? ORDER BY created_at DESC, id DESC`, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list web push subscriptions: %w", err)
	}
	defer rows.Close()
	out := []store.WebPushSubscription{}
	for rows.Next() {
		var w store.WebPushSubscription
		if err := rows.Scan(&w.ID, &w.Endpoint, &w.P256dh, &w.Auth, &w.CreatedAt, &w.UpdatedAt); err != nil {
			return nil, fmt.Errorf("sqlite: scan web push subscription: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list web push subscriptions: %w", err)
	}
	return out, nil
}
