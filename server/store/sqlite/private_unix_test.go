//go:build unix

package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// With a umask that takes nothing away, the relay's database and its WAL
// files are still 0600 from the moment they exist.
func TestDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	path := filepath.Join(t.TempDir(), "happy.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.UpsertAccount(context.Background(), "pk", 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode() != 0o600 {
			t.Errorf("%s: mode %v, want -rw-------", p, info.Mode())
		}
	}
}
