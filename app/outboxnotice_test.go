package app

import (
	"bytes"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/relay/outbox"
)

func TestOutboxNotice(t *testing.T) {
	var buf bytes.Buffer
	note := outboxNotice(&buf)
	note(nil) // works, and never failed: nothing to say
	note(fmt.Errorf("session sink: write m1: %w", relay.ErrUnavailable))
	if buf.Len() != 0 {
		t.Fatalf("printed %q for failures that are not the outbox's", buf.String())
	}
	full := &outbox.WriteError{Path: "/home/u/.happy/outbox/outbox.db", Err: fmt.Errorf("outbox: sync: %w", &fs.PathError{Op: "sync", Path: "/home/u/.happy/outbox/outbox.db-wal", Err: syscall.ENOSPC})}
	note(fmt.Errorf("session sink: write m1: relay: enqueue m1.3: %w", full))
	note(nil)
	const want = "happy: the outbox cannot be written (/home/u/.happy/outbox/outbox.db: no space left on device): messages are kept in memory only and are lost if happy stops\n" +
		"happy: the outbox can be written again: the messages kept in memory are stored\n"
	if buf.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", buf.String(), want)
	}
	outboxNotice(nil)(full) // no stderr: no panic, nothing printed
}
