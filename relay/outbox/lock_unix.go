//go:build unix

package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/happy-dev/happy/internal/private"
)

// lockState is empty where the kernel keeps the locks.
//
//lint:ignore U1000 the field of this type is used on systems without flock
type lockState struct{}

// Lock takes the exclusive, non-blocking ownership lock of session: an
// flock(2) on <dir>/locks/<sha256(session)[:16]>.lock. It fails with
// ErrLocked when another process or another Lock in this process holds it.
// The lock is released by the returned function, which also removes the
// file, or by the kernel when the process dies (PruneLocks removes the file
// such a process left). A lock taken on a file that was removed meanwhile
// is dropped and taken again on the new file, so two holders never lock
// different files of the same name.
func (s *Store) Lock(session string) (unlock func(), err error) {
	dir := filepath.Join(s.dir, "locks")
	if err := private.Dir(dir); err != nil {
		return nil, fmt.Errorf("outbox: lock %q: %w", session, err)
	}
	sum := sha256.Sum256([]byte(session))
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".lock")
	for {
		f, err := private.OpenFile(path, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return nil, fmt.Errorf("outbox: lock %q: %w", session, err)
		}
		if err := flockNB(f); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("%w: %q", ErrLocked, session)
			}
			return nil, fmt.Errorf("outbox: lock %q: %w", session, err)
		}
		if !samePath(f, path) {
			_ = f.Close() // removed by its last holder meanwhile: take the new one
			continue
		}
		var once sync.Once
		return func() {
			once.Do(func() {
				_ = os.Remove(path) // while held: nobody else can have it now
				_ = f.Close()       // closing the descriptor releases the flock
			})
		}, nil
	}
}

// PruneLocks removes the lock files that no process holds (left by
// processes that died), and returns how many it removed.
func (s *Store) PruneLocks() (int, error) {
	dir := filepath.Join(s.dir, "locks")
	names, err := filepath.Glob(filepath.Join(dir, "*.lock"))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, path := range names {
		f, err := os.OpenFile(path, os.O_RDWR, 0o600)
		if err != nil {
			continue
		}
		if flockNB(f) == nil && samePath(f, path) && os.Remove(path) == nil {
			n++
		}
		_ = f.Close()
	}
	return n, nil
}

// flockNB takes an exclusive flock on f without waiting (EWOULDBLOCK when
// it is held).
func flockNB(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// samePath reports whether path still names the file f has open.
func samePath(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
