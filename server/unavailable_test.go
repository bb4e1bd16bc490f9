package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/sqlite"
)

// awayStore is a store whose database is away for session listings.
type awayStore struct{ store.Store }

func (awayStore) Sessions(context.Context, string, int) ([]store.Session, error) {
	return nil, fmt.Errorf("postgres: list sessions: %w", store.ErrUnavailable)
}

// A store that reports its database unavailable makes a 503 with
// Retry-After, which clients retry, not a 500.
func TestStoreUnavailableIs503(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "happy.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := servertest.StartConfig(t, server.Config{Store: awayStore{st}})
	acct := servertest.NewAccount(t, r.URL)
	req, _ := http.NewRequest("GET", r.URL+"/v1/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+acct.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || string(body) != `{"error":"Storage unavailable, retry"}` {
		t.Fatalf("GET /v1/sessions = %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
}
