//go:build unix

package main

import (
	"testing"

	"github.com/happy-dev/happy/app"
)

// What happy send says when a receipt has not come in time.
func TestMissingReceipt(t *testing.T) {
	for _, c := range []struct {
		r    app.Receipt
		want string
	}{
		{app.Receipt{}, "the session has not received the prompt (its happy may be older than receipts, or cannot reach the relay)"},
		{app.Receipt{Received: 1}, "the prompt waits for the running turn to end before claude gets it"},
		{app.Receipt{Received: 1, Handed: 2}, "claude has not started on the prompt yet"},
	} {
		if got := missingReceipt(c.r, "claude"); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}
