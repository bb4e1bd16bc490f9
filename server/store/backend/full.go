package backend

import (
	"errors"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// DiskFull reports whether err is a write refused because the storage is
// full, whichever layer said so: the operating system (ENOSPC, e.g. an
// attachment file of the SQLite backend), SQLite (SQLITE_FULL, "database or
// disk is full", primary or extended code) or PostgreSQL (SQLSTATE 53100
// disk_full). The statement was rolled back: nothing of the failed write
// is stored, and the same write can succeed once space is freed.
func DiskFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}
