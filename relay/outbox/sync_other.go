//go:build !unix

package outbox

import "errors"

// canSyncWAL is false where the syncer is not used: each commit runs at
// synchronous=FULL, and SQLite syncs it.
const canSyncWAL = false

// syncWAL is never called where canSyncWAL is false.
func syncWAL(string) error { return errors.New("outbox: no WAL sync on this system") }
