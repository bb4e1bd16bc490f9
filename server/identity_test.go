package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/internal/relayid"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/servertest"
)

// The relay keeps an identity key in its data folder (0600) and proves it
// on GET /v1/happy/identity; a relay with another data folder cannot.
func TestIdentity(t *testing.T) {
	dir := t.TempDir()
	r := servertest.StartConfig(t, server.Config{DataDir: dir})
	st, err := os.Stat(filepath.Join(dir, relayid.File))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity key: %v %v", err, st)
	}
	key, err := relayid.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := relayid.Verify(ctx, nil, r.URL, key); err != nil {
		t.Fatalf("the relay's own key: %v", err)
	}
	other := servertest.Start(t)
	if err := relayid.Verify(ctx, nil, other.URL, key); !errors.Is(err, relayid.ErrNotOurs) {
		t.Fatalf("another relay: %v", err)
	}
	cli := api{t: t, base: r.URL}
	for _, nonce := range []string{"", "short", "AAAAAAAAAAAAAAAAAAAAAA==", "!!!!!!!!!!!!!!!!!!!!!!!!"} {
		eq(t, "nonce "+nonce, cli.must(400, "GET", "/v1/happy/identity?nonce="+nonce, nil), map[string]any{"error": "nonce must be 16 to 64 bytes in base64url without padding"})
	}
}
