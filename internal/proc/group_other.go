//go:build unix && !linux

package proc

import "syscall"

// EnableSubreaper does nothing where the platform has no subreaper.
func EnableSubreaper() error { return nil }

func setParentDeathSignal(*syscall.SysProcAttr) {}

// canWaitWithoutReaping is false here: without waitid(WNOWAIT) the leader is
// reaped first and the rest of its group ended afterwards (the group id stays
// valid while any member lives).
const canWaitWithoutReaping = false

func waitLeaderExit(int) {}

// groupHasLiveMembers reports whether signal 0 reaches the group (zombies
// included: there is no portable way to tell them apart).
func groupHasLiveMembers(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
