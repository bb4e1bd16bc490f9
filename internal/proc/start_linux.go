//go:build linux

package proc

import (
	"bytes"
	"os"
	"strconv"
)

// StartTicks returns when process pid started, in clock ticks since boot
// (/proc/<pid>/stat field 22), and whether it could be read. Two processes
// that had the same pid at different times have different values, so a pid
// saved in a file can be checked before it is signalled.
func StartTicks(pid int) (uint64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStartTicks(b)
}

// parseStartTicks takes field 22 of a /proc/<pid>/stat line: fields are
// counted after the last ')' (comm may hold spaces and parentheses), where
// field 3 (state) comes first.
func parseStartTicks(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(f[19]), 10, 64)
	return v, err == nil
}
