// Package sqlitetest describes the SQLite store to the shared store suite
// (store/storetest), for its own tests and for copies between backends.
package sqlitetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/sqlite"
	"github.com/happy-dev/happy/server/store/storetest"
)

// Backend is the SQLite store: a database is a file in a temporary folder
// (attachments beside it). One relay process owns a file, so the
// concurrency cases use one store.
func Backend() storetest.Backend {
	return storetest.Backend{
		NewDB: func(t testing.TB) func(testing.TB) store.Store {
			path := filepath.Join(t.TempDir(), "happy.db")
			return func(t testing.TB) store.Store {
				s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
				if err != nil {
					t.Fatalf("sqlitetest: open: %v", err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
		Instances: 1,
	}
}
