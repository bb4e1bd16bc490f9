package backend

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "modernc.org/sqlite" // the driver whose error DiskFull reads
)

// sqliteFull makes the real error SQLite gives for a full database: a file
// capped at a few pages by max_page_count, filled until it refuses.
func sqliteFull(t *testing.T) error {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "full.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"CREATE TABLE t (b BLOB)", "PRAGMA max_page_count = 4"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		if _, err := conn.ExecContext(ctx, "INSERT INTO t VALUES (?)", make([]byte, 4096)); err != nil {
			return err
		}
	}
	t.Fatal("a database of 4 pages took 100 rows of 4 KiB")
	return nil
}

// sqliteOther is a real SQLite error that is not about space.
func sqliteOther(t *testing.T) error {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "other.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec("INSERT INTO missing VALUES (1)")
	if err == nil {
		t.Fatal("an insert into a missing table succeeded")
	}
	return err
}

func TestDiskFull(t *testing.T) {
	full := sqliteFull(t)
	if !strings.Contains(full.Error(), "database or disk is full") {
		t.Fatalf("SQLite's error %q is not the full-database one", full)
	}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"ENOSPC wrapped", fmt.Errorf("sqlite: store attachment: %w", &fs.PathError{Op: "write", Path: "/x/.upload-1", Err: syscall.ENOSPC}), true},
		{"ENOSPC bare", syscall.ENOSPC, true},
		{"SQLITE_FULL", fmt.Errorf("sqlite: append messages: %w", full), true},
		{"SQLite no such table", sqliteOther(t), false},
		{"postgres disk_full", fmt.Errorf("postgres: append messages: %w", &pgconn.PgError{Code: "53100", Message: "could not extend file"}), true},
		{"postgres out of memory", &pgconn.PgError{Code: "53200"}, false},
		{"postgres unique violation", &pgconn.PgError{Code: "23505"}, false},
		{"EIO", fmt.Errorf("write: %w", syscall.EIO), false},
		{"other", errors.New("no space left on device"), false}, // only typed errors count
		{"nil", nil, false},
	}
	for _, c := range cases {
		if got := DiskFull(c.err); got != c.want {
			t.Errorf("%s: DiskFull(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}
