//go:build linux

package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// EnableSubreaper marks this process as a child subreaper
// (prctl PR_SET_CHILD_SUBREAPER): descendants orphaned by the death of their
// parent are re-parented to this process instead of PID 1, and Process reaps
// those that belong to a group it is ending. Call it once at program start
// (it is process-wide state); useful where PID 1 does not reap zombies.
func EnableSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	return nil
}

func setParentDeathSignal(a *syscall.SysProcAttr) {
	if a.Pdeathsig == 0 {
		a.Pdeathsig = syscall.SIGKILL
	}
}

// canWaitWithoutReaping: the leader is observed with waitid(WNOWAIT) and
// stays a zombie (its pid, the group id, reserved) until the group is ended.
const canWaitWithoutReaping = true

// waitLeaderExit blocks until pid has exited, leaving it unreaped
// (waitid with WNOWAIT), so that os/exec can still reap it.
func waitLeaderExit(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// groupHasLiveMembers reports whether any process other than the leader
// (pid == pgid, a zombie awaiting os/exec) is in group pgid and not a
// zombie. Zombies of the group whose parent is this process (orphans
// adopted as subreaper) are reaped on the way; zombies of other parents are
// not ours to reap and count as ended.
func groupHasLiveMembers(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	self := os.Getpid()
	live := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.pgrp != pgid {
			continue
		}
		if st.state == 'Z' || st.state == 'X' {
			if st.ppid == self && !reapZombie(pid) {
				live = true // a zombie whose other threads are still exiting
			}
			continue
		}
		live = true
	}
	return live
}

// reapZombie reaps our zombie child pid. It reports false when the child is
// not waitable yet: /proc shows a multi-threaded process as a zombie as soon
// as its main thread has exited, but it can be reaped only once all of its
// threads have.
func reapZombie(pid int) bool {
	var ws unix.WaitStatus
	for {
		wp, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil: // ECHILD: reaped by someone else, or not ours after all
			return true
		default:
			return wp == pid
		}
	}
}

type procStat struct {
	state byte
	ppid  int
	pgrp  int
}

// readStat parses /proc/<pid>/stat: "pid (comm) state ppid pgrp …", where
// comm may contain spaces and parentheses, so fields are taken after the
// last ')'.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseStat(b)
}

// parseStat parses the content of a /proc/<pid>/stat file; false when it is
// not in that shape.
func parseStat(b []byte) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return procStat{}, false
	}
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp}, true
}

// Limits lists the guarantees of this package that this platform cannot
// give: none on Linux.
func Limits() []string { return nil }

// ownPids are the children this process started through Start (and those
// handed to Own): when an agent's group ends, a direct child of ours that is
// not one of them was adopted (we are its subreaper) from a descendant that
// left the group, such as a tool shell the agent started detached.
var ownPids sync.Map // pid → struct{}

// Own marks pid, a child this process started without Start (the
// background relay), as one of ours: the end of an agent's group never
// touches it.
func Own(pid int) { ownPids.Store(pid, struct{}{}) }

func ownStarted(pid int) { ownPids.Store(pid, struct{}{}) }
func ownEnded(pid int)   { ownPids.Delete(pid) }

// endAdopted ends the processes this process adopted as subreaper that
// started after the leader (start time in clock ticks, 0 when unknown: then
// nothing is ended) and are not children it started itself: descendants of
// the leader that had left its group (a setsid or setpgid of their own) and
// were orphaned when it died. Each gets SIGTERM to its own group (or to
// itself when it leads none), SIGKILL after grace, and is reaped.
func endAdopted(leaderStart uint64, grace time.Duration) {
	if leaderStart == 0 {
		return
	}
	adopted := adoptedSince(leaderStart)
	if len(adopted) == 0 {
		return
	}
	signalEach := func(sig syscall.Signal) {
		for _, pid := range adopted {
			if st, ok := readStat(pid); ok && st.pgrp == pid {
				_ = syscall.Kill(-pid, sig)
			} else {
				_ = syscall.Kill(pid, sig)
			}
		}
	}
	signalEach(syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for len(adoptedSince(leaderStart)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(adoptedSince(leaderStart)) > 0 {
		signalEach(syscall.SIGKILL)
		for end := time.Now().Add(killTeardown); len(adoptedSince(leaderStart)) > 0 && time.Now().Before(end); {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// adoptedSince lists the live adopted children (see endAdopted) that
// started at or after tick since; zombies among them are reaped on the way
// (one not waitable yet is listed, to be reaped on a later call).
func adoptedSince(since uint64) []int {
	startMu.Lock()
	defer startMu.Unlock()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.ppid != self {
			continue
		}
		if _, mine := ownPids.Load(pid); mine {
			continue
		}
		if t, ok := StartTicks(pid); !ok || t < since {
			continue
		}
		if (st.state == 'Z' || st.state == 'X') && reapZombie(pid) {
			continue
		}
		// Alive, or a zombie that cannot be reaped yet (its other threads
		// still exiting): listed, so the caller looks again and reaps it.
		out = append(out, pid)
	}
	return out
}

// GroupLive reports whether process group pgid has a member left that is
// not a zombie, its leader (pid pgid) included: for a group this process
// did not start, such as a session a previous daemon started. Zombies of
// the group whose parent is this process are reaped on the way.
func GroupLive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	if st, ok := readStat(pgid); ok && st.pgrp == pgid {
		if st.state != 'Z' && st.state != 'X' {
			return true
		}
		if st.ppid == os.Getpid() {
			reapZombie(pgid)
		}
	}
	return groupHasLiveMembers(pgid)
}
