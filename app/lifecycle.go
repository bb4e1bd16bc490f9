package app

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
)

// Lifecycle states written to metadata.lifecycleState (docs/ARCHITECTURE.md,
// section "A session's life"), and StateStale, which readers derive.
const (
	// LifecycleRunning: a happy process runs the session.
	LifecycleRunning = "running"
	// LifecycleEnded: the session ended (its happy ended it, or the next
	// happy on the same home settled it after a crash).
	LifecycleEnded = "ended"
	// LifecycleArchived: a person archived the session (happy archive).
	LifecycleArchived = "archived"
	// StateStale is never written: readers show it for a session still
	// marked running whose heartbeat is older than StaleAfter (its happy
	// died and nobody settled it yet).
	StateStale = "stale"
)

// StaleAfter is how old a running session's last sign of life may be before
// readers treat it as ended (state "stale"). The sign of life is the relay's
// activeAt (moved by the session-alive heartbeat every 2 s; happy's relay
// stores it at most every 30 s) or lifecycleStateSince, whichever is later.
const StaleAfter = 90 * time.Second

// State is the state readers show for a session: its lifecycleState
// (running, ended, archived; running when absent), or StateStale for a
// running session with no sign of life for StaleAfter at now.
func State(info relay.SessionInfo, md Metadata, now time.Time) string {
	switch md.LifecycleState {
	case LifecycleEnded, LifecycleArchived:
		return md.LifecycleState
	}
	last := max(info.ActiveAt, md.LifecycleStateSince, info.CreatedAt)
	if now.UnixMilli()-last > StaleAfter.Milliseconds() {
		return StateStale
	}
	return LifecycleRunning
}

// Ended reports whether a reader should treat the state as over: ended,
// archived or stale.
func Ended(state string) bool {
	return state == LifecycleEnded || state == LifecycleArchived || state == StateStale
}

// mergeFields is the metadata Updater that sets fields (JSON values) and
// keeps every other field of the current metadata as it is.
func mergeFields(fields map[string]json.RawMessage) relay.Updater {
	return func(cur json.RawMessage) (json.RawMessage, error) {
		m := map[string]json.RawMessage{}
		if len(cur) > 0 {
			if err := json.Unmarshal(cur, &m); err != nil || m == nil {
				m = map[string]json.RawMessage{}
			}
		}
		for k, v := range fields {
			m[k] = v
		}
		return json.Marshal(m)
	}
}

// lifecycleFields are the metadata fields of a lifecycle change at now.
func lifecycleFields(state string, now time.Time) map[string]json.RawMessage {
	s, _ := json.Marshal(state)
	at, _ := json.Marshal(now.UnixMilli())
	return map[string]json.RawMessage{"lifecycleState": s, "lifecycleStateSince": at}
}

// metaWriter writes metadata changes of a running session in the background
// (so the runner goroutine never waits for the relay): changes are merged
// while a write is in flight, and a failed write is retried with the next
// change or at Flush.
type metaWriter struct {
	sess *relay.Session
	log  zerolog.Logger

	mu      sync.Mutex
	pending map[string]json.RawMessage
	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

func startMetaWriter(ctx context.Context, sess *relay.Session, log zerolog.Logger) *metaWriter {
	w := &metaWriter{sess: sess, log: log, pending: map[string]json.RawMessage{}, kick: make(chan struct{}, 1), done: make(chan struct{})}
	ctx, w.cancel = context.WithCancel(ctx)
	go w.run(ctx)
	return w
}

// set queues fields to write (later values of a field replace earlier ones).
func (w *metaWriter) set(fields map[string]json.RawMessage) {
	w.mu.Lock()
	for k, v := range fields {
		w.pending[k] = v
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *metaWriter) take() map[string]json.RawMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) == 0 {
		return nil
	}
	f := w.pending
	w.pending = map[string]json.RawMessage{}
	return f
}

// putBack returns fields that failed to be written, unless newer values
// were queued meanwhile.
func (w *metaWriter) putBack(f map[string]json.RawMessage) {
	w.mu.Lock()
	for k, v := range f {
		if _, newer := w.pending[k]; !newer {
			w.pending[k] = v
		}
	}
	w.mu.Unlock()
}

func (w *metaWriter) run(ctx context.Context) {
	defer close(w.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		if err := w.write(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("session metadata not written yet; retried with the next change")
		}
	}
}

func (w *metaWriter) write(ctx context.Context) error {
	f := w.take()
	if f == nil {
		return nil
	}
	if err := w.sess.UpdateMetadata(ctx, mergeFields(f)); err != nil {
		w.putBack(f)
		return err
	}
	return nil
}

// flush stops the background writer and writes what is queued now, bounded
// by ctx.
func (w *metaWriter) flush(ctx context.Context) error {
	w.cancel()
	<-w.done
	return w.write(ctx)
}

// titleWatcher mirrors the root session's title into metadata.summary
// ({text, updatedAt}), which the reference apps and happy sessions show:
// the first prompt shortened (session.TitleFromPrompt, set by the runner)
// until the agent names the session (Claude summary and title records,
// Codex thread names, ACP session info).
type titleWatcher struct {
	rootID string
	w      *metaWriter
	now    func() time.Time
	last   string
}

// observe looks for a new root title in bus events (runner goroutine).
func (t *titleWatcher) observe(events []mapper.BusEvent) {
	for _, ev := range events {
		var info mapper.Session
		switch e := ev.(type) {
		case *mapper.SessionCreated:
			info = e.Info
		case *mapper.SessionUpdated:
			info = e.Info
		default:
			continue
		}
		if info.ID != t.rootID || info.ParentID != "" || info.Title == "" || info.Title == t.last {
			continue
		}
		t.last = info.Title
		b, _ := json.Marshal(Summary{Text: info.Title, UpdatedAt: t.now().UnixMilli()})
		t.w.set(map[string]json.RawMessage{"summary": b})
	}
}

// now is the environment's clock (time.Now when unset).
func (e Env) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}
