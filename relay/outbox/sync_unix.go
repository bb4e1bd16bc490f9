//go:build unix

package outbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// canSyncWAL: the syncer can make commits durable with fsync(2) on the WAL.
const canSyncWAL = true

// syncWAL fsyncs the WAL file of the database at path (path + "-wal"),
// which makes every transaction committed to it so far survive a power
// loss, as synchronous=FULL would have at each commit. fsync works on the
// file, not on the descriptor, so a descriptor of our own reaches the pages
// SQLite wrote. A WAL that no longer exists was checkpointed into the
// database file, which is synced instead.
func syncWAL(path string) error {
	f, err := os.Open(path + "-wal")
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(path)
	}
	if err != nil {
		return fmt.Errorf("outbox: sync: %w", err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("outbox: sync %s: %w", f.Name(), err)
	}
	return nil
}
