package app

import (
	"errors"
	"fmt"
	"io"

	"github.com/happy-dev/happy/relay/outbox"
)

// outboxNotice returns session.Options.OnFlushFailing for a run: when the
// outbox cannot be written (an outbox.WriteError: a full disk, a read-only
// file system), it prints one line on stderr saying so and what it means,
// and one more when writing works again. Other failures (the relay away)
// are the outbox's ordinary business and print nothing. Nil stderr prints
// nothing.
func outboxNotice(stderr io.Writer) func(error) {
	failing := false
	return func(err error) {
		if stderr == nil {
			return
		}
		var we *outbox.WriteError
		switch {
		case errors.As(err, &we):
			failing = true
			fmt.Fprintf(stderr, "happy: the outbox cannot be written (%s: %s): messages are kept in memory only and are lost if happy stops\n", we.Path, we.Reason())
		case err == nil && failing:
			failing = false
			fmt.Fprintln(stderr, "happy: the outbox can be written again: the messages kept in memory are stored")
		}
	}
}
