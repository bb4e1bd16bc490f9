//go:build unix

package daemon

import (
	"sync"
	"syscall"
	"time"

	"github.com/happy-dev/happy/internal/proc"
)

// sessionProc is a session's process group as the daemon controls it: one
// it started (*proc.Process) or one it adopted from a daemon that died
// (*adoptedProc).
type sessionProc interface {
	// Stop ends the group (SIGTERM, SIGKILL after the grace) and returns
	// once it is gone.
	Stop() error
	// Done is closed once the session's process has ended.
	Done() <-chan struct{}
}

// adoptPoll is how often an adopted session's process is looked at: the
// daemon is not its parent, so nothing tells it of the exit.
const adoptPoll = 250 * time.Millisecond

// adoptedProc is the process group of a session a previous daemon started
// and that outlived it: pid leads the group, ticks is its start time
// (proc.StartTicks), which tells a later process with the same pid apart.
// Its end is seen by polling (proc.Running); the rest of its group is then
// ended as for a started one.
type adoptedProc struct {
	pid   int
	ticks uint64
	grace time.Duration

	stopOnce sync.Once
	stopped  chan struct{} // closed when Stop was called
	done     chan struct{}
}

// adopt starts watching the group of pid (start time ticks).
func adopt(pid int, ticks uint64, grace time.Duration) *adoptedProc {
	a := &adoptedProc{pid: pid, ticks: ticks, grace: grace, stopped: make(chan struct{}), done: make(chan struct{})}
	go a.watch()
	return a
}

func (a *adoptedProc) running() bool { return proc.Running(a.pid, a.ticks) }

// watch closes done once the leader has ended and its group is gone
// (what is left of it gets SIGTERM, SIGKILL after the grace).
func (a *adoptedProc) watch() {
	defer close(a.done)
	t := time.NewTicker(adoptPoll)
	defer t.Stop()
	stopping := a.stopped
	for a.running() {
		select {
		case <-t.C:
		case <-stopping:
			stopping = nil
			t.Reset(20 * time.Millisecond) // a stop is under way: look closely
		}
	}
	// The group id cannot be taken by another process while a member of
	// the group lives, so signalling it reaches only what is left of it.
	a.endGroup()
}

// endGroup sends SIGTERM to the group, SIGKILL after the grace, and waits
// (bounded) until no member is left.
func (a *adoptedProc) endGroup() {
	if groupGone(a.pid) {
		return
	}
	_ = syscall.Kill(-a.pid, syscall.SIGTERM)
	if waitGroupGone(a.pid, a.grace) {
		return
	}
	_ = syscall.Kill(-a.pid, syscall.SIGKILL)
	waitGroupGone(a.pid, 5*time.Second)
}

// Stop ends the session: SIGTERM to its group while its leader is still
// the recorded process, SIGKILL after the grace; it returns once the
// session has ended.
func (a *adoptedProc) Stop() error {
	a.stopOnce.Do(func() {
		close(a.stopped)
		if !a.running() {
			return
		}
		_ = syscall.Kill(-a.pid, syscall.SIGTERM)
		t := time.NewTimer(a.grace)
		defer t.Stop()
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		if a.running() {
			_ = syscall.Kill(-a.pid, syscall.SIGKILL)
		}
	})
	<-a.done
	return nil
}

// Done is closed once the session has ended.
func (a *adoptedProc) Done() <-chan struct{} { return a.done }

func groupGone(pgid int) bool { return !proc.GroupLive(pgid) }

// waitGroupGone waits up to d for group pgid to have no member left: they
// are another parent's processes, so there is nothing to wait on but their
// absence.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !groupGone(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// adoptLeftovers takes over the sessions a daemon that died without
// stopping them (kill -9, a crash) left running: every recorded session
// whose process is still the one recorded (same pid and start time, not a
// zombie) becomes a child of this daemon again, listed, stoppable, its
// exit noticed and its events followed. The others are gone (or, where the
// start time is unknown, cannot be told from another process with the same
// pid, and are left alone); their relay sessions are orphans, which the
// relay connection settles (app.SettleOrphans: a live session holds its
// outbox lock, so only the dead ones are settled).
func (d *daemon) adoptLeftovers(prev State) []*child {
	var out []*child
	for _, c := range prev.Sessions {
		log := d.env.Log.With().Int("pid", c.PID).Str("session", c.SessionID).Logger()
		switch {
		case c.PID <= 1:
			continue
		case c.StartTicks == 0:
			if syscall.Kill(c.PID, 0) == nil {
				log.Warn().Msg("a session of the previous daemon may still run; not adopted (its start time is unknown)")
			}
			continue
		case !proc.Running(c.PID, c.StartTicks):
			log.Info().Msg("a session of the previous daemon has ended; its relay session is settled as an orphan")
			continue
		}
		ch := &child{info: c, p: adopt(c.PID, c.StartTicks, d.opts.StopGrace)}
		d.children[c.PID] = ch
		out = append(out, ch)
		log.Info().Str("agent", c.Agent).Str("directory", c.Directory).Msg("adopted a session of the previous daemon that still runs")
	}
	return out
}

var _ sessionProc = (*proc.Process)(nil)

// exitCode is the exit code of a started session's process (-1 when
// unknown, as for an adopted one).
func exitCode(p sessionProc) (int, error) {
	sp, ok := p.(*proc.Process)
	if !ok {
		return -1, nil
	}
	st, err := sp.Wait()
	if st == nil {
		return -1, err
	}
	return st.ExitCode(), err
}
