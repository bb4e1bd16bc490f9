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

// Running reports whether the process that started at ticks (StartTicks)
// with pid still runs: its /proc entry is there, with that start time, and
// it is not a zombie (a process whose new parent does not reap it stays
// one). False for ticks 0.
func Running(pid int, ticks uint64) bool {
	if pid <= 0 || ticks == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if t, ok := parseStartTicks(b); !ok || t != ticks {
		return false
	}
	st, ok := parseStat(b)
	return ok && st.state != 'Z' && st.state != 'X'
}
