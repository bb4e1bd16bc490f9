//go:build unix

package outbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// lockFiles lists the lock files of the store at dir.
func lockFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "locks", "*.lock"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// An unlocked session leaves no lock file; PruneLocks removes the files of
// holders that died (a file nobody locks) and keeps the held ones; a lock
// taken on a file removed meanwhile moves to the new file.
func TestLockFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	unlock, err := s.Lock("a")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(lockFiles(t, dir)); n != 1 {
		t.Fatalf("%d lock files while held, want 1", n)
	}
	unlock()
	unlock() // twice is harmless
	if n := len(lockFiles(t, dir)); n != 0 {
		t.Fatalf("%d lock files after unlock, want 0", n)
	}

	held, err := s.Lock("held")
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	// A process that died holding a lock leaves its file behind.
	dead := filepath.Join(dir, "locks", "0000000000000000.lock")
	if err := os.WriteFile(dead, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneLocks()
	if err != nil || n != 1 {
		t.Fatalf("PruneLocks = %d, %v; want 1", n, err)
	}
	if got := lockFiles(t, dir); len(got) != 1 {
		t.Fatalf("lock files after prune %v, want only the held one", got)
	}
	if _, err := s.Lock("held"); err == nil {
		t.Fatal("the held lock was taken again after the prune")
	}
}

// samePath tells a file that was removed and created again from the one
// still open.
func TestSamePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !samePath(f, path) {
		t.Fatal("the open file is not the path")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if samePath(f, path) {
		t.Fatal("a removed file still counts as the path")
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if samePath(f, path) {
		t.Fatal("a new file of the same name counts as the old one")
	}
	if err := flockNB(f); err != nil && err != syscall.EWOULDBLOCK {
		t.Fatal(err)
	}
}
