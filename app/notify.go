package app

import (
	"bytes"
	"context"
	"os/exec"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/proc"
	"github.com/happy-dev/happy/internal/settings"
)

// NotifyCommand is the desktop notification command: `notify-send
// SUMMARY BODY` (libnotify). Where it is not installed nothing is sent.
const NotifyCommand = "notify-send"

// notifyTimeout bounds one notify-send.
const notifyTimeout = 5 * time.Second

// notifier sends desktop notifications for a session the daemon started
// (nobody watches its terminal): when a tool starts waiting for a person and
// when a turn ends. `"notifications": false` in settings.json turns them off.
type notifier struct {
	exe    string
	flavor string
	dir    string
	log    zerolog.Logger
	wg     sync.WaitGroup
	busy   bool
}

// newNotifier returns the session's notifier, or nil when notifications are
// off: a session not started by the daemon, the setting, or no notify-send.
func newNotifier(env Env, opts SessionOptions) *notifier {
	if opts.StartedBy != "daemon" || !NotificationsOn(env) {
		return nil
	}
	exe, err := exec.LookPath(NotifyCommand)
	if err != nil {
		return nil
	}
	return &notifier{exe: exe, flavor: opts.Flavor, dir: opts.Dir, log: env.Log}
}

// NotificationsOn reads the "notifications" setting: on unless it is the
// JSON false.
func NotificationsOn(env Env) bool {
	st, err := settings.Load(env.Home.Settings())
	if err != nil {
		return true
	}
	v, ok := st.Raw("notifications")
	return !ok || !bytes.Equal(bytes.TrimSpace(v), []byte("false"))
}

// waiting notes a tool call waiting for a person.
func (n *notifier) waiting(string) {
	if n == nil {
		return
	}
	n.send("happy: "+n.flavor+" waits for permission", n.dir)
}

// activity notes the session starting (true) or stopping work (false): a
// stop is the end of a turn.
func (n *notifier) activity(thinking bool) {
	if n == nil {
		return
	}
	if n.busy && !thinking {
		n.send("happy: "+n.flavor+" finished its turn", n.dir)
	}
	n.busy = thinking
}

// send runs notify-send in the background (own process group, bounded).
func (n *notifier) send(summary, body string) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		p, err := proc.Start(ctx, exec.Command(n.exe, "--app-name=happy", "--", summary, body), proc.Options{Grace: time.Second})
		if err != nil {
			n.log.Debug().Err(err).Msg("desktop notification not sent")
			return
		}
		if _, err := p.Wait(); err != nil {
			n.log.Debug().Err(err).Msg("desktop notification failed")
		}
	}()
}

// wait waits for the notifications in flight.
func (n *notifier) wait() {
	if n != nil {
		n.wg.Wait()
	}
}
