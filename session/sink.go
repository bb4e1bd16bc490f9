package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Record kinds of the relay envelope (docs/ARCHITECTURE.md "Relay envelope and versions").
const (
	KindMessage = "message"
	KindSession = "session"
	KindTodos   = "todos"
	// KindDropped carries a session's refused inputs, so that a reader
	// knows the transcript is incomplete: {"kind":"dropped","version":N,
	// "sessionID":…,"dropped":[Dropped…]} (the fourth kind in
	// docs/ARCHITECTURE.md "Relay envelope and versions").
	KindDropped = "dropped"
)

// MaxPartBytes is the largest text a part carries on the relay: a text,
// reasoning or tool output (or error) larger than this is cut on a UTF-8
// boundary and the part's metadata records "truncated": true and
// "originalBytes": N.
const MaxPartBytes = 256 << 10

// StreamInterval is the least time between two versions of one record while
// only streaming changes (text deltas) are pending; changes a person must see
// (a part new to its message, a tool blocked, resolved or finished, a turn
// end) flush at once.
const StreamInterval = time.Second

// RecordStore persists record versions for the relay; *relay.Session
// implements it. Enqueue assigns the record's next version (monotonic
// across process restarts), calls build with it for the plaintext envelope,
// encrypts it and returns once it is durably queued.
type RecordStore interface {
	Enqueue(ctx context.Context, record string, build func(version int64) ([]byte, error)) (int64, error)
}

// AsyncRecordStore is a RecordStore that can queue several versions before
// waiting for them to be durable (*relay.Session does: one fsync for all of
// them). EnqueueAsync is Enqueue returning once the version is queued, with
// the function that waits for its commit.
type AsyncRecordStore interface {
	RecordStore
	EnqueueAsync(ctx context.Context, record string, build func(version int64) ([]byte, error)) (int64, func() error, error)
}

// Snapshotter gives the current state of records; *mapper.Reducer
// implements it.
type Snapshotter interface {
	Message(id string) (mapper.MessageWithParts, bool)
	Session(id string) (mapper.Session, bool)
	Todos(sessionID string) []agent.Todo
	Dropped(sessionID string) []agent.Dropped
}

// TodosRecord is the record id of a session's todo list.
func TodosRecord(sessionID string) string { return "todos:" + sessionID }

// DroppedRecord is the record id of a session's refused inputs.
func DroppedRecord(sessionID string) string { return "dropped:" + sessionID }

// MarkDropped marks the dropped records of these sessions (their lists grew).
// Not urgent: refusals ride along with the next flush.
func (s *Sink) MarkDropped(sessionIDs []string) {
	for _, id := range sessionIDs {
		s.mark(KindDropped, DroppedRecord(id), id, false)
	}
}

type dirtyRecord struct {
	kind   string
	id     string // message id or session id
	urgent bool
}

// Sink turns reducer bus events into relay record versions: it marks the
// records an event changes, and on Flush writes the due ones — every
// record with an urgent change, and the others once StreamInterval has
// passed since their last version. It is not safe for concurrent use: the
// runner goroutine that owns the reducer drives it.
type Sink struct {
	store    RecordStore
	snap     Snapshotter
	interval time.Duration

	dirty    map[string]*dirtyRecord
	order    []string // dirty records in order of first change
	lastSent map[string]time.Time
	// parts are the part ids seen so far of each message not completed.
	parts map[string]map[string]struct{}

	companion Companion
}

// Companion writes records of its own next to the sink's, from the same
// bus events and on the same goroutine: the reference app's legacy records
// (package session/compat). Observe sees every event after the sink marked
// it; Flush runs after the sink's own versions, whenever Pending reports
// something waiting (always due at once).
type Companion interface {
	Observe(events []mapper.BusEvent)
	Pending() bool
	Flush(ctx context.Context) error
}

// SetCompanion adds c (nil removes it). Call it before the runner starts.
func (s *Sink) SetCompanion(c Companion) { s.companion = c }

// NewSink returns a sink writing to store, reading state from snap.
func NewSink(store RecordStore, snap Snapshotter) *Sink {
	return &Sink{store: store, snap: snap, interval: StreamInterval,
		dirty: map[string]*dirtyRecord{}, lastSent: map[string]time.Time{}, parts: map[string]map[string]struct{}{}}
}

// Observe marks the records the bus events change.
func (s *Sink) Observe(events []mapper.BusEvent) {
	for _, ev := range events {
		switch e := ev.(type) {
		case *mapper.SessionCreated:
			s.mark(KindSession, e.Info.ID, e.Info.ID, true)
		case *mapper.SessionUpdated:
			s.mark(KindSession, e.Info.ID, e.Info.ID, true)
		case *mapper.MessageUpdated:
			urgent := false
			if am, ok := e.Info.(*mapper.AssistantMessage); ok {
				urgent = am.Time.Completed != nil || am.Error != nil
				if am.Time.Completed != nil {
					delete(s.parts, am.ID)
				}
			} else {
				urgent = true // a user message is a turn boundary
			}
			s.mark(KindMessage, e.Info.MessageID(), e.Info.MessageID(), urgent)
		case *mapper.MessagePartUpdated:
			urgent := false
			if tp, ok := e.Part.(*mapper.ToolPart); ok {
				urgent = tp.State.Status != mapper.StatusPending
			}
			b := e.Part.Base()
			// A part new to its message is written at once: readers learn
			// of it (its kind, its place) with its first words, and live
			// deltas extend it from there.
			known := s.parts[b.MessageID]
			if known == nil {
				known = map[string]struct{}{}
				s.parts[b.MessageID] = known
			}
			if _, ok := known[b.ID]; !ok {
				known[b.ID] = struct{}{}
				urgent = true
			}
			s.mark(KindMessage, b.MessageID, b.MessageID, urgent)
		case *mapper.MessagePartDelta:
			s.mark(KindMessage, e.MessageID, e.MessageID, false)
		case *mapper.TodoUpdated:
			s.mark(KindTodos, TodosRecord(e.SessionID), e.SessionID, true)
		}
	}
	if s.companion != nil {
		s.companion.Observe(events)
	}
}

func (s *Sink) mark(kind, record, id string, urgent bool) {
	d, ok := s.dirty[record]
	if !ok {
		d = &dirtyRecord{kind: kind, id: id}
		s.dirty[record] = d
		s.order = append(s.order, record)
	}
	d.urgent = d.urgent || urgent
}

// Pending reports whether any record waits to be written.
func (s *Sink) Pending() bool {
	return len(s.order) > 0 || (s.companion != nil && s.companion.Pending())
}

// NextDue returns when Flush has something to write: now when an urgent
// change waits, the earliest stream deadline otherwise, and ok=false when
// nothing is dirty.
func (s *Sink) NextDue(now time.Time) (due time.Time, ok bool) {
	if s.companion != nil && s.companion.Pending() {
		return now, true
	}
	for _, rec := range s.order {
		d := s.dirty[rec]
		at := now
		if !d.urgent {
			if last, seen := s.lastSent[rec]; seen && last.Add(s.interval).After(now) {
				at = last.Add(s.interval)
			}
		}
		if !ok || at.Before(due) {
			due, ok = at, true
		}
	}
	return due, ok
}

// Flush writes a new version of every due record (all dirty records when
// force is set, as at a turn end or on exit), in order of first change. On
// error the record that failed and those after it stay dirty; nothing is
// forgotten.
func (s *Sink) Flush(ctx context.Context, now time.Time, force bool) error {
	var keep []string
	// With an async store every due record is queued first and the commits
	// are awaited together: one fsync for the flush, not one per record.
	async, _ := s.store.(AsyncRecordStore)
	type queued struct {
		rec  string
		wait func() error
	}
	var waits []queued
	settle := func() error {
		for k, q := range waits {
			if err := q.wait(); err != nil {
				// This record and every later one stay dirty.
				for _, r := range waits[k:] {
					delete(s.lastSent, r.rec)
				}
				s.keepDirty()
				waits = nil
				return fmt.Errorf("session sink: write %s: %w", q.rec, err)
			}
			delete(s.dirty, q.rec)
		}
		waits = nil
		return nil
	}
	for _, rec := range s.order {
		d := s.dirty[rec]
		if !force && !d.urgent {
			if last, seen := s.lastSent[rec]; seen && last.Add(s.interval).After(now) {
				keep = append(keep, rec)
				continue
			}
		}
		gone := false
		build := func(version int64) ([]byte, error) {
			body, ok, err := s.envelope(d, version)
			if err == nil && !ok {
				gone = true
				return nil, errRecordGone
			}
			return body, err
		}
		var err error
		var wait func() error
		if async != nil {
			_, wait, err = async.EnqueueAsync(ctx, rec, build)
		} else {
			_, err = s.store.Enqueue(ctx, rec, build)
		}
		if err != nil && !(gone && errors.Is(err, errRecordGone)) {
			if serr := settle(); serr != nil {
				return serr
			}
			s.keepDirty()
			return fmt.Errorf("session sink: write %s: %w", rec, err)
		}
		s.lastSent[rec] = now
		if wait != nil && err == nil {
			waits = append(waits, queued{rec: rec, wait: wait})
			continue
		}
		delete(s.dirty, rec)
	}
	if err := settle(); err != nil {
		return err
	}
	s.order = keep
	if s.companion != nil && s.companion.Pending() {
		return s.companion.Flush(ctx)
	}
	return nil
}

// keepDirty leaves in the write order the records still dirty, in order.
func (s *Sink) keepDirty() {
	order := s.order[:0]
	for _, rec := range s.order {
		if _, ok := s.dirty[rec]; ok {
			order = append(order, rec)
		}
	}
	s.order = order
}

// errRecordGone tells Enqueue not to store anything: the record no longer
// exists in the reducer.
var errRecordGone = errors.New("record no longer exists")

// envelope builds the plaintext of one record version.
func (s *Sink) envelope(d *dirtyRecord, version int64) ([]byte, bool, error) {
	switch d.kind {
	case KindMessage:
		m, ok := s.snap.Message(d.id)
		if !ok {
			return nil, false, nil
		}
		b, err := MessageEnvelope(m, version)
		return b, true, err
	case KindSession:
		ses, ok := s.snap.Session(d.id)
		if !ok {
			return nil, false, nil
		}
		b, err := json.Marshal(struct {
			Kind    string         `json:"kind"`
			Version int64          `json:"version"`
			Session mapper.Session `json:"session"`
		}{KindSession, version, ses})
		return b, true, err
	case KindTodos:
		todos := s.snap.Todos(d.id)
		if todos == nil {
			todos = []agent.Todo{}
		}
		b, err := json.Marshal(struct {
			Kind      string       `json:"kind"`
			Version   int64        `json:"version"`
			SessionID string       `json:"sessionID"`
			Todos     []agent.Todo `json:"todos"`
		}{KindTodos, version, d.id, todos})
		return b, true, err
	case KindDropped:
		dropped := s.snap.Dropped(d.id)
		if len(dropped) == 0 {
			return nil, false, nil
		}
		b, err := json.Marshal(struct {
			Kind      string          `json:"kind"`
			Version   int64           `json:"version"`
			SessionID string          `json:"sessionID"`
			Dropped   []agent.Dropped `json:"dropped"`
		}{KindDropped, version, d.id, dropped})
		return b, true, err
	}
	return nil, false, fmt.Errorf("unknown record kind %q", d.kind)
}

// MessageEnvelope is the plaintext of one version of a message record:
// {"kind":"message","version":N,"info":…,"parts":[…]}, every part cut to
// MaxPartBytes (TruncatePart).
func MessageEnvelope(m mapper.MessageWithParts, version int64) ([]byte, error) {
	parts := make([]mapper.Part, len(m.Parts))
	for i, p := range m.Parts {
		parts[i] = TruncatePart(p, MaxPartBytes)
	}
	return json.Marshal(struct {
		Kind    string         `json:"kind"`
		Version int64          `json:"version"`
		Info    mapper.Message `json:"info"`
		Parts   []mapper.Part  `json:"parts"`
	}{KindMessage, version, m.Info, parts})
}

// TruncatePart returns p unchanged when its large texts fit in max bytes,
// else a copy whose text (text and reasoning parts) or output/error (tool
// parts) is cut on a UTF-8 boundary to at most max bytes, with
// metadata "truncated": true and "originalBytes": the original length.
func TruncatePart(p mapper.Part, max int) mapper.Part {
	switch pt := p.(type) {
	case *mapper.TextPart:
		if len(pt.Text) <= max {
			return p
		}
		c := *pt
		c.Metadata = truncMeta(pt.Metadata, len(pt.Text))
		c.Text = agent.CutUTF8(pt.Text, max)
		return &c
	case *mapper.ReasoningPart:
		if len(pt.Text) <= max {
			return p
		}
		c := *pt
		c.Metadata = truncMeta(pt.Metadata, len(pt.Text))
		c.Text = agent.CutUTF8(pt.Text, max)
		return &c
	case *mapper.ToolPart:
		st := pt.State
		if len(st.Output) <= max && len(st.Error) <= max {
			return p
		}
		c := *pt
		size := len(st.Output)
		if len(st.Error) > size {
			size = len(st.Error)
		}
		c.State.Metadata = truncMeta(st.Metadata, size)
		c.State.Output = agent.CutUTF8(st.Output, max)
		c.State.Error = agent.CutUTF8(st.Error, max)
		return &c
	}
	return p
}

func truncMeta(m agent.Object, size int) agent.Object {
	out := make(agent.Object, len(m)+2)
	for k, v := range m {
		out[k] = v
	}
	out["truncated"] = true
	out["originalBytes"] = size
	return out
}
