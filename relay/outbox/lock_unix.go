//go:build unix

package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockState is empty where the kernel keeps the locks.
//
//lint:ignore U1000 the field of this type is used on systems without flock
type lockState struct{}

// Lock takes the exclusive, non-blocking ownership lock of session: an
// flock(2) on <dir>/locks/<sha256(session)[:16]>.lock. It fails with
// ErrLocked when another process or another Lock in this process holds it.
// The lock is released by the returned function, or by the kernel when the
// process dies.
func (s *Store) Lock(session string) (unlock func(), err error) {
	dir := filepath.Join(s.dir, "locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: lock %q: %w", session, err)
	}
	sum := sha256.Sum256([]byte(session))
	path := filepath.Join(dir, hex.EncodeToString(sum[:8])+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("outbox: lock %q: %w", session, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %q", ErrLocked, session)
		}
		return nil, fmt.Errorf("outbox: lock %q: %w", session, err)
	}
	return func() { _ = f.Close() }, nil // closing the descriptor releases the flock
}
