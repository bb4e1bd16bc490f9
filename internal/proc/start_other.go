//go:build unix && !linux

package proc

// StartTicks is not known outside Linux: 0, false.
func StartTicks(pid int) (uint64, bool) { return 0, false }

// Running cannot tell a pid's processes apart outside Linux: false.
func Running(pid int, ticks uint64) bool { return false }
