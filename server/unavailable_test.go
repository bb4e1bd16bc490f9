package server_test

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

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

// fullStore is a store whose disk is full: appends fail as SQLite's
// attachment/page writes do (ENOSPC) and metadata writes as PostgreSQL's
// (SQLSTATE 53100).
type fullStore struct{ store.Store }

func (fullStore) AppendMessages(context.Context, string, string, []store.NewMessage, int64) (store.AppendResult, error) {
	return store.AppendResult{}, fmt.Errorf("sqlite: append messages: %w", &fs.PathError{Op: "write", Path: "happy.db-wal", Err: syscall.ENOSPC})
}

func (fullStore) UpdateSessionMetadata(context.Context, string, string, string, int64, int64) (store.CAS, error) {
	return store.CAS{}, fmt.Errorf("postgres: update metadata: %w", &pgconn.PgError{Code: "53100", Message: "could not extend file"})
}

// A write the relay's disk has no room for answers 507 with the cause, over
// HTTP and in a socket ack, not 500 "Internal error".
func TestStoreFullIs507(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "happy.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := servertest.StartConfig(t, server.Config{Store: fullStore{st}})
	a := newAPI(t, r)
	sid := a.createSession("t", "meta-0")["id"].(string)
	const want = `{"cause":"disk_full","error":"Insufficient storage: the relay's disk is full, so nothing was stored; the write can succeed once its operator frees space"}`
	status, body := a.raw("POST", "/v3/sessions/"+sid+"/messages", map[string]any{"messages": []any{map[string]any{"content": "c", "localId": "l1"}}})
	if status != http.StatusInsufficientStorage || string(body) != want {
		t.Fatalf("POST messages = %d %s, want 507 %s", status, body, want)
	}
	sock := sessionSocket(t, r.URL, a.token, sid)
	eq(t, "update-metadata ack", call(t, sock, "update-metadata", map[string]any{"sid": sid, "metadata": "m", "expectedVersion": 0}),
		map[string]any{"result": "error", "cause": "disk_full", "message": "Insufficient storage: the relay's disk is full, so nothing was stored; the write can succeed once its operator frees space"})
}
