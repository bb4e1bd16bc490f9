package outbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An outbox whose file cannot grow (SQLite's real "database or disk is
// full", made by capping the file's pages) fails the append with a
// WriteError naming the file and the cause, keeps nothing of it, and takes
// appends again once there is room.
func TestFullOutboxIsAWriteError(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	var pages int
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+2)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	var err error
	v := int64(1)
	for ; v < 100 && err == nil; v++ {
		err = s.Append(ctx, Entry{Session: "a", Record: "r", Version: v, Content: big})
	}
	var we *WriteError
	if !errors.As(err, &we) {
		t.Fatalf("append into a full file: %v (%T), want a *WriteError", err, err)
	}
	if we.Path != filepath.Join(dir, FileName) || we.Reason() != "no space left on device" || !strings.Contains(err.Error(), "database or disk is full") {
		t.Fatalf("WriteError{Path %q, Reason %q}, error %q", we.Path, we.Reason(), err)
	}
	failed := v - 1
	items, perr := s.Pending(ctx, "a", 1000)
	if perr != nil || len(items) != int(failed-1) {
		t.Fatalf("pending after the failed append: %d items, %v; want the %d that fit", len(items), perr, failed-1)
	}
	if _, err := s.w.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, Entry{Session: "a", Record: "r", Version: failed, Content: "fits"}); err != nil {
		t.Fatalf("append once there is room: %v", err)
	}
}

func TestWriteErrorReason(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("outbox: sync: %w", &fs.PathError{Op: "sync", Path: "/h/outbox.db-wal", Err: syscall.ENOSPC}), "no space left on device"},
		{fmt.Errorf("outbox: begin: %w", &fs.PathError{Op: "open", Path: "/h/outbox.db", Err: syscall.EROFS}), "read-only file system"},
		{errors.New("outbox: commit: boom"), "outbox: commit: boom"},
	}
	for _, c := range cases {
		we := &WriteError{Path: "/h/outbox.db", Err: c.err}
		if got := we.Reason(); got != c.want {
			t.Errorf("Reason of %v = %q, want %q", c.err, got, c.want)
		}
	}
}
