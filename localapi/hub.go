package localapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/mapper"
)

// Event names the hub writes beside mapper's changes (seed 001's list).
const (
	EvMessageRemoved     = "message.removed"
	EvMessagePartRemoved = "message.part.removed"
)

// Default bounds of a subscriber's queue (HubOptions).
const (
	DefaultMaxPending      = 4096
	DefaultMaxPendingBytes = 8 << 20
	DefaultMaxDeltas       = 256
)

// ErrHubClosed is the reason of every subscriber when the hub closes.
var ErrHubClosed = errors.New("localapi: the hub is closed")

// ErrTooSlow wraps the reason of a subscriber disconnected because it did
// not keep up with state changes.
var ErrTooSlow = errors.New("localapi: subscriber too slow")

// HubOptions bound what one subscriber may have waiting. The zero value
// takes the defaults.
type HubOptions struct {
	// MaxPending is the most state changes (every event but
	// message.part.delta) one subscriber may have waiting; the one past it
	// disconnects the subscriber (ErrTooSlow). 0 means DefaultMaxPending.
	MaxPending int
	// MaxPendingBytes bounds the frame bytes one subscriber may have
	// waiting: a state change past it disconnects the subscriber, a delta
	// past half of it is dropped. 0 means DefaultMaxPendingBytes.
	MaxPendingBytes int
	// MaxDeltas is the most message.part.delta frames one subscriber may
	// have waiting; a delta past it is dropped and counted. 0 means
	// DefaultMaxDeltas.
	MaxDeltas int
	// Log receives the disconnections and the changes that could not be
	// encoded.
	Log zerolog.Logger
}

// HubStats counts what a hub did since it was made.
type HubStats struct {
	// Subscribers is the number of subscribers now.
	Subscribers int
	// Sessions is the number of sessions the hub knows.
	Sessions int
	// Published counts the changes published (removals included).
	Published int64
	// DroppedDeltas counts message.part.delta frames not delivered to a
	// subscriber that had fallen behind (one per subscriber per delta).
	DroppedDeltas int64
	// Resynced counts the message.part.updated frames the hub wrote, in
	// place of dropped deltas, to a subscriber that caught up.
	Resynced int64
	// Disconnected counts subscribers closed for falling behind on state
	// changes.
	Disconnected int64
	// Unencodable counts changes that could not be encoded (logged, not
	// sent; the documents still take them).
	Unencodable int64
	// Forgotten counts the sessions Forget dropped.
	Forgotten int64
}

// Hub is the one place live changes of every session of this process go:
// it keeps the canonical documents (sessions, messages with parts, todos)
// folded from the changes, and fans every change out to its subscribers
// in one order. Several sessions (a daemon's) may publish to one hub from
// several goroutines; a change names its session, so nothing else is
// needed to tell them apart. Methods are safe for concurrent use.
//
// Back-pressure (docs/ARCHITECTURE.md, section "Local event API"): a
// subscriber's queue holds state changes and deltas in order. A delta that
// finds the queue over HubOptions.MaxDeltas (or half of
// MaxPendingBytes) is dropped and counted, and so is every later delta of
// the same part until the subscriber gets a message.part.updated of it:
// the next one published, or one the hub makes from its document of the
// part as soon as the subscriber has taken everything queued. Either one
// carries "droppedDeltas": N in its properties. State changes are never
// dropped: a subscriber that would pass MaxPending or MaxPendingBytes with
// one is disconnected with a logged reason, so memory stays bounded.
type Hub struct {
	opts HubOptions

	mu       sync.Mutex
	sessions map[string]*sessionDoc
	order    []string // session ids in order of first appearance
	subs     map[*Subscriber]struct{}
	stats    HubStats
	closed   bool
	// status holds the sessions' AgentStatus sources (status.go).
	status statuses
}

// NewHub returns an empty hub.
func NewHub(opts HubOptions) *Hub {
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.MaxPendingBytes <= 0 {
		opts.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if opts.MaxDeltas <= 0 {
		opts.MaxDeltas = DefaultMaxDeltas
	}
	return &Hub{opts: opts, sessions: map[string]*sessionDoc{}, subs: map[*Subscriber]struct{}{}}
}

// partKey names one part across sessions.
type partKey struct{ session, message, part string }

// item is one queued frame.
type item struct {
	frame []byte
	delta bool
}

// Subscriber is one follower of the hub's changes (one GET /event). Take
// its frames when Ready fires; Close it when done.
type Subscriber struct {
	hub   *Hub
	ready chan struct{}
	done  chan struct{}

	// under hub.mu
	queue          []item
	bytes          int
	states, deltas int
	stale          map[partKey]int64 // parts whose deltas were dropped: how many
	dropped        int64
	err            error
}

// Subscribe adds a subscriber; it sees every change published after the
// call. On a closed hub the subscriber is already done with ErrHubClosed.
func (h *Hub) Subscribe() *Subscriber {
	s := &Subscriber{hub: h, ready: make(chan struct{}, 1), done: make(chan struct{}), stale: map[partKey]int64{}}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.err = ErrHubClosed
		close(s.done)
		return s
	}
	h.subs[s] = struct{}{}
	h.stats.Subscribers = len(h.subs)
	return s
}

// Ready fires (one pending signal) when frames wait or the subscriber was
// disconnected.
func (s *Subscriber) Ready() <-chan struct{} { return s.ready }

// Done is closed when the subscriber was disconnected, closed, or the hub
// closed; Take then returns the reason.
func (s *Subscriber) Done() <-chan struct{} { return s.done }

// Dropped is the number of deltas this subscriber did not get.
func (s *Subscriber) Dropped() int64 {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.dropped
}

// Take appends every waiting frame to b (SSE bytes, as internal/sse's
// writer frames them) and returns it; then, for every part whose deltas
// were dropped, a message.part.updated with the part as the hub knows it
// now. After a disconnection it returns b and the reason (ErrTooSlow
// wrapped with the bound passed, ErrHubClosed, or ErrClosed after Close).
func (s *Subscriber) Take(b []byte) ([]byte, error) {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.err != nil {
		return b, s.err
	}
	for _, it := range s.queue {
		b = append(b, it.frame...)
	}
	clear(s.queue)
	s.queue, s.bytes, s.states, s.deltas = s.queue[:0], 0, 0, 0
	if cap(s.queue) > 1024 {
		s.queue = nil
	}
	if len(s.stale) > 0 {
		keys := make([]partKey, 0, len(s.stale))
		for k := range s.stale {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b partKey) int {
			if c := cmpStr(a.session, b.session); c != 0 {
				return c
			}
			if c := cmpStr(a.message, b.message); c != 0 {
				return c
			}
			return cmpStr(a.part, b.part)
		})
		for _, k := range keys {
			n := s.stale[k]
			delete(s.stale, k)
			p := h.part(k)
			if p == nil {
				continue // removed meanwhile: its removal was queued
			}
			f, err := partFrame(p, n)
			if err != nil {
				h.unencodable(mapper.EvMessagePartUpdated, err)
				continue
			}
			b = append(b, f...)
			h.stats.Resynced++
		}
	}
	return b, nil
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ErrClosed is Take's error after Close.
var ErrClosed = errors.New("localapi: subscriber closed")

// Close removes the subscriber from the hub. It is idempotent.
func (s *Subscriber) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disconnect(s, ErrClosed)
}

// disconnect ends s with err (h.mu held).
func (h *Hub) disconnect(s *Subscriber, err error) {
	if s.err != nil {
		return
	}
	s.err = err
	s.queue, s.stale, s.bytes, s.states, s.deltas = nil, nil, 0, 0, 0
	delete(h.subs, s)
	h.stats.Subscribers = len(h.subs)
	close(s.done)
	s.signal()
}

func (s *Subscriber) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Close disconnects every subscriber (ErrHubClosed); later subscribers are
// done at once. Publishing still updates the documents.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		h.disconnect(s, ErrHubClosed)
	}
}

// Stats returns the counters.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats
	st.Sessions = len(h.sessions)
	return st
}

// Publish folds changes into the documents and hands them to every
// subscriber, in order. It never blocks on a subscriber. It is the
// session.Options.OnBus (through app's SessionOptions.Events) of every
// session that feeds the hub.
func (h *Hub) Publish(evs []mapper.BusEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		if ev == nil {
			continue
		}
		h.stats.Published++
		h.fold(ev)
		var key partKey
		delta := false
		var updated *mapper.MessagePartUpdated
		switch e := ev.(type) {
		case *mapper.MessagePartDelta:
			key, delta = partKey{e.SessionID, e.MessageID, e.PartID}, true
		case *mapper.MessagePartUpdated:
			b := e.Part.Base()
			key, updated = partKey{b.SessionID, b.MessageID, b.ID}, e
		}
		data, err := mapper.EncodeChange(ev)
		if err != nil {
			h.unencodable(ev.EventType(), err)
			continue
		}
		frame, err := sse.AppendFrame(nil, ev.EventType(), "", string(data))
		if err != nil {
			h.unencodable(ev.EventType(), err)
			continue
		}
		for s := range h.subs {
			switch {
			case delta:
				h.offerDelta(s, key, frame)
			case updated != nil && s.stale[key] > 0:
				// This update carries the whole part: it replaces the
				// resync, and says how many deltas it stands for.
				n := s.stale[key]
				delete(s.stale, key)
				f, err := partFrame(updated.Part, n)
				if err != nil {
					h.unencodable(ev.EventType(), err)
					f = frame
				}
				h.offerState(s, f)
			default:
				h.offerState(s, frame)
			}
		}
	}
}

// RemoveMessage forgets a message and its parts and publishes
// message.removed {sessionID, messageID}. Nothing in happy's reducer
// removes a message today; a source that does (a daemon undoing a turn)
// calls this.
func (h *Hub) RemoveMessage(sessionID, messageID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.Published++
	if sd := h.sessions[sessionID]; sd != nil {
		if _, ok := sd.msgs[messageID]; ok {
			delete(sd.msgs, messageID)
			sd.order = slices.DeleteFunc(sd.order, func(id string) bool { return id == messageID })
		}
	}
	frame := removedFrame(EvMessageRemoved, sessionID, messageID, "")
	for s := range h.subs {
		for k := range s.stale {
			if k.session == sessionID && k.message == messageID {
				delete(s.stale, k)
			}
		}
		h.offerState(s, frame)
	}
}

// RemovePart forgets one part and publishes message.part.removed
// {sessionID, messageID, partID}.
func (h *Hub) RemovePart(sessionID, messageID, partID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stats.Published++
	if md := h.message(sessionID, messageID, false); md != nil {
		md.parts = slices.DeleteFunc(md.parts, func(p mapper.Part) bool { return p.Base().ID == partID })
		if md.finish != nil && md.finish.Base().ID == partID {
			md.finish = nil
		}
	}
	frame := removedFrame(EvMessagePartRemoved, sessionID, messageID, partID)
	for s := range h.subs {
		delete(s.stale, partKey{sessionID, messageID, partID})
		h.offerState(s, frame)
	}
}

// offerDelta queues a delta, or drops it (h.mu held).
func (h *Hub) offerDelta(s *Subscriber, key partKey, frame []byte) {
	if n := s.stale[key]; n > 0 {
		s.stale[key] = n + 1
		s.dropped++
		h.stats.DroppedDeltas++
		return
	}
	if s.deltas >= h.opts.MaxDeltas || s.bytes+len(frame) > h.opts.MaxPendingBytes/2 {
		s.stale[key] = 1
		s.dropped++
		h.stats.DroppedDeltas++
		return
	}
	s.queue = append(s.queue, item{frame: frame, delta: true})
	s.deltas++
	s.bytes += len(frame)
	s.signal()
}

// offerState queues a state change, or disconnects a subscriber that
// cannot take it (h.mu held).
func (h *Hub) offerState(s *Subscriber, frame []byte) {
	var why string
	switch {
	case s.states+1 > h.opts.MaxPending:
		why = fmt.Sprintf("more than %d state changes waiting", h.opts.MaxPending)
	case s.bytes+len(frame) > h.opts.MaxPendingBytes:
		why = fmt.Sprintf("more than %d bytes waiting", h.opts.MaxPendingBytes)
	}
	if why != "" {
		h.stats.Disconnected++
		h.opts.Log.Warn().Str("reason", why).Int("pending", s.states+s.deltas).Int("pendingBytes", s.bytes).
			Int64("droppedDeltas", s.dropped).Msg("event subscriber disconnected: it does not keep up with state changes")
		h.disconnect(s, fmt.Errorf("%w: %s", ErrTooSlow, why))
		return
	}
	s.queue = append(s.queue, item{frame: frame})
	s.states++
	s.bytes += len(frame)
	s.signal()
}

func (h *Hub) unencodable(event string, err error) {
	h.stats.Unencodable++
	h.opts.Log.Error().Err(err).Str("event", event).Msg("change not sent to event subscribers: it does not encode")
}

// partFrame is a message.part.updated frame whose properties add
// "droppedDeltas": n when n > 0; with n == 0 it is the frame of
// mapper.EncodeChange.
func partFrame(p mapper.Part, n int64) ([]byte, error) {
	raw, err := mapper.EncodePart(p)
	if err != nil {
		return nil, err
	}
	data := make([]byte, 0, len(raw)+96)
	data = append(data, `{"type":"message.part.updated","properties":{"part":`...)
	data = append(data, raw...)
	if n > 0 {
		data = append(data, `,"droppedDeltas":`...)
		data = strconv.AppendInt(data, n, 10)
	}
	data = append(data, "}}"...)
	return sse.AppendFrame(nil, mapper.EvMessagePartUpdated, "", string(data))
}

// removedFrame is a message.removed or message.part.removed frame.
func removedFrame(event, sessionID, messageID, partID string) []byte {
	props := map[string]string{"sessionID": sessionID, "messageID": messageID}
	if event == EvMessagePartRemoved {
		props["partID"] = partID
	}
	data, err := json.Marshal(struct {
		Type       string            `json:"type"`
		Properties map[string]string `json:"properties"`
	}{event, props})
	if err == nil {
		var f []byte
		if f, err = sse.AppendFrame(nil, event, "", string(data)); err == nil {
			return f
		}
	}
	// JSON of strings holds no raw line break: unreachable, but never
	// silent.
	return sse.AppendComment(nil, "unencodable "+event+": "+err.Error())
}

// SessionEnded is the status type of the session.status the hub publishes
// when it forgets a session (Forget): {"type": "ended"}, beside seed 001's
// idle, busy and retry. Nothing follows it for that session.
const SessionEnded mapper.SessionStatusType = "ended"

// Forget drops a session's documents (its messages, parts and todos) and
// publishes session.status {sessionID, status: {type: "ended"}}, so a hub
// fed by sessions that come and go (the daemon's) keeps only the live
// ones. It returns false, publishing nothing, when the hub knows no such
// session. A later change naming the session makes it known again.
func (h *Hub) Forget(sessionID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.sessions[sessionID]; !ok {
		return false
	}
	delete(h.sessions, sessionID)
	h.order = slices.DeleteFunc(h.order, func(id string) bool { return id == sessionID })
	h.stats.Published++
	h.stats.Forgotten++
	ev := &mapper.SessionStatus{SessionID: sessionID, Status: mapper.SessionStatusInfo{Type: SessionEnded}}
	data, err := mapper.EncodeChange(ev)
	var frame []byte
	if err == nil {
		frame, err = sse.AppendFrame(nil, ev.EventType(), "", string(data))
	}
	if err != nil {
		h.unencodable(ev.EventType(), err)
		return true
	}
	for s := range h.subs {
		for k := range s.stale {
			if k.session == sessionID {
				delete(s.stale, k)
			}
		}
		h.offerState(s, frame)
	}
	return true
}

// Known reports whether the hub has a document of the session (it was
// named by a change and not forgotten since).
func (h *Hub) Known(sessionID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.sessions[sessionID]
	return ok
}
