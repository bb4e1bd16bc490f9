package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/happy-dev/happy/internal/private"
)

// ErrDataDirInUse is returned by New when another relay (in this or
// another process) holds the data folder: two relays on one database
// would each fan out only their own writes.
var ErrDataDirInUse = errors.New("server: data folder in use by another relay")

// lockFile is the name of the data folder's lock (an advisory flock held
// while the relay runs; it holds the holder's pid, for the error message).
const lockFile = "relay.lock"

// lockDataDir takes the exclusive lock on dir's lock file. The returned
// file is the lock: closing it releases the lock (so does the process
// ending, however it ends).
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := private.OpenFile(path, os.O_RDWR|os.O_CREATE)
	if err != nil {
		return nil, fmt.Errorf("server: open data folder lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b := make([]byte, 32)
		n, _ := f.ReadAt(b, 0)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(b[:n]))
			if _, perr := strconv.Atoi(holder); perr != nil {
				holder = "unknown"
			}
			return nil, fmt.Errorf("%w: %s (pid %s)", ErrDataDirInUse, dir, holder)
		}
		return nil, fmt.Errorf("server: lock data folder: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// LockDataDir takes the data folder lock a running relay holds (the same
// one New takes), for tools that must not work on a folder a relay is
// using: `happy server migrate` on a relay's SQLite file. It returns the
// release function, or an error wrapping ErrDataDirInUse (naming the
// holder's pid) while a relay runs there. A folder that does not exist
// is not locked and not created: release is then a no-op.
func LockDataDir(dir string) (release func(), err error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return func() {}, nil
	}
	f, err := lockDataDir(dir)
	if err != nil {
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}
