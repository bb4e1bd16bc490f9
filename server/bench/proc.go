package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times
// (100 on every Linux architecture Go supports).
const clockTicks = 100

// procSample is one reading of /proc/<pid>: CPU time and resident memory.
type procSample struct {
	at     time.Time
	cpu    time.Duration
	rssKiB int64
}

// readProc reads the process's user+system CPU time from /proc/<pid>/stat
// (fields 14 and 15, after the parenthesised command name) and VmRSS from
// /proc/<pid>/status.
func readProc(pid int) (procSample, error) {
	s := procSample{at: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("bench: relay process %d not found (not running, or it ended during the run)", pid)
	}
	if err != nil {
		return s, fmt.Errorf("bench: relay process %d: %w", pid, err)
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return s, fmt.Errorf("bench: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime 15.
	if len(f) < 13 {
		return s, fmt.Errorf("bench: /proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return s, fmt.Errorf("bench: /proc/%d/stat: times %q %q", pid, f[11], f[12])
	}
	s.cpu = time.Duration(ut+st) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("bench: relay process %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			s.rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
			return s, nil
		}
	}
	return s, fmt.Errorf("bench: relay process %d has ended (its /proc/%d/status has no VmRSS)", pid, pid)
}

// relayBetween turns two samples into a Relay.
func relayBetween(a, b procSample) *Relay {
	r := &Relay{RSSKiB: b.rssKiB, RSSBeforeKiB: a.rssKiB}
	if wall := b.at.Sub(a.at); wall > 0 {
		r.CPUPercent = 100 * float64(b.cpu-a.cpu) / float64(wall)
	}
	return r
}

// watch samples pid at the start of a run (a no-op without a pid); its
// end fills res.Relay.
type watch struct {
	pid   int
	start procSample
}

func startWatch(pid int) (*watch, error) {
	w := &watch{pid: pid}
	if pid <= 0 {
		return w, nil
	}
	s, err := readProc(pid)
	if err != nil {
		return nil, err
	}
	w.start = s
	return w, nil
}

func (w *watch) end(res *Result) error {
	if w.pid <= 0 {
		return nil
	}
	s, err := readProc(w.pid)
	if err != nil {
		return err
	}
	res.Relay = relayBetween(w.start, s)
	return nil
}
