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
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
