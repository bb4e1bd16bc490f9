package sio

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine started by a test outlives it.
func TestMain(m *testing.M) {
	// IgnoreCurrent: goroutines alive before any test ran were started by
	// package init, not by a test; the Socket.IO engine client starts its
	// network monitor (a 3 s interval that never stops) that way.
	// The Socket.IO library arms its own timers (ping timeouts, reconnect
	// delays) on goroutines that end when the timer fires or is cleared;
	// one armed by the last test's client can outlive the run on a loaded
	// machine. Those are the library's, never ours (as in package relay).
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetTimeout.func1"))
}
