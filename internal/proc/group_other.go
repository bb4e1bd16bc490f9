//go:build unix && !linux

package proc

import (
	"syscall"
	"time"
)

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

// Limits lists the guarantees of this package that this platform cannot
// give, one sentence each, for happy doctor and the log.
func Limits() []string {
	return []string{
		"no parent-death signal: an agent whose happy is killed with kill -9 runs on until it notices that its stdin closed",
		"no child subreaper: orphaned descendants of the agent's tools go to PID 1 (launchd), not to happy",
	}
}

// Own does nothing where the platform has no subreaper (see the Linux one).
func Own(int) {}

func ownStarted(int)                   {}
func ownEnded(int)                     {}
func endAdopted(uint64, time.Duration) {}

// GroupLive reports whether signal 0 reaches group pgid (zombies included).
func GroupLive(pgid int) bool { return pgid > 1 && syscall.Kill(-pgid, 0) == nil }
