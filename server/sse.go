package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/store"
)

// Defaults of the message stream (GET /v3/sessions/:id/messages/stream).
const (
	DefaultStreamHeartbeat    = 15 * time.Second
	DefaultStreamRetry        = 3 * time.Second
	DefaultStreamWriteTimeout = 30 * time.Second
)

// streamPage is how many rows the stream reads from the store at once; with
// streamFlushBytes it bounds what one stream holds in memory, however far
// behind its reader is.
const (
	streamPage       = 64
	streamFlushBytes = 64 << 10
)

// End reasons of the stream's `end` event.
const (
	streamEndInactive = "inactive"
	streamEndDeleted  = "deleted"
)

// StreamStats counts the message streams of a relay.
type StreamStats struct {
	// Open is the number of streams being served now.
	Open int64
	// Served is the number of streams started (status 200 sent).
	Served int64
	// Dropped is the number of streams closed because their reader took
	// nothing for StreamWriteTimeout while the relay had bytes for it.
	Dropped int64
	// Ended is the number of streams that sent `end`.
	Ended int64
}

// StreamStats returns the message stream counters.
func (s *Server) StreamStats() StreamStats {
	h := &s.streams
	return StreamStats{Open: h.open.Load(), Served: h.served.Load(), Dropped: h.dropped.Load(), Ended: h.ended.Load()}
}

// streamHub knows the open message streams by session, so that stores of
// rows and changes of a session wake its streams. The zero value is ready.
type streamHub struct {
	mu   sync.Mutex
	subs map[string]map[*stream]struct{} // by streamKey

	open, served, dropped, ended atomic.Int64
}

// stream is one open GET …/messages/stream.
type stream struct {
	key string
	hs  *http.Server // the server the request came in on (nil when unknown)
	// wake holds one pending wake-up: new rows, or a change of the session
	// when state is set.
	wake  chan struct{}
	state atomic.Bool
	// live holds the session's text deltas not yet written (a full buffer
	// drops them: the reader waits for the next stored version).
	live chan string
	// stop is closed when the request's server shuts down.
	stop     chan struct{}
	stopOnce sync.Once
}

func streamKey(acct, sid string) string { return acct + "\x00" + sid }

func (h *streamHub) add(acct, sid string, hs *http.Server) *stream {
	st := &stream{key: streamKey(acct, sid), hs: hs, wake: make(chan struct{}, 1), live: make(chan string, 64), stop: make(chan struct{})}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[*stream]struct{}{}
	}
	set := h.subs[st.key]
	if set == nil {
		set = map[*stream]struct{}{}
		h.subs[st.key] = set
	}
	set[st] = struct{}{}
	h.mu.Unlock()
	h.open.Add(1)
	return st
}

func (h *streamHub) remove(st *stream) {
	h.mu.Lock()
	if set := h.subs[st.key]; set != nil {
		delete(set, st)
		if len(set) == 0 {
			delete(h.subs, st.key)
		}
	}
	h.mu.Unlock()
	h.open.Add(-1)
}

// notify wakes the session's streams; state tells them to look at the
// session itself (it went inactive or was deleted). It never blocks: it
// may run under the account's lock.
func (h *streamHub) notify(acct, sid string, state bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for st := range h.subs[streamKey(acct, sid)] {
		if state {
			st.state.Store(true)
		}
		select {
		case st.wake <- struct{}{}:
		default: // a wake-up is already pending; it covers this one
		}
	}
}

// wakeAll wakes every stream to read the store and look at its session
// (the bus was back after a gap: their wake-ups may have been lost).
func (h *streamHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for st := range set {
			st.state.Store(true)
			select {
			case st.wake <- struct{}{}:
			default:
			}
		}
	}
}

// observe wakes streams for what the relay sends its sockets: new rows are
// reported by fanoutMessages; here a session going inactive (session-end,
// archive, idle expiry) and a deleted session.
func (h *streamHub) observe(acct string, v any) {
	switch x := v.(type) {
	case wire.Activity:
		if !x.Active {
			h.notify(acct, x.ID, true)
		}
	case wire.BodyDeleteSession:
		h.notify(acct, x.SID, true)
	case wire.TextDelta:
		h.mu.Lock()
		for st := range h.subs[streamKey(acct, x.ID)] {
			select {
			case st.live <- x.Message:
			default:
			}
		}
		h.mu.Unlock()
	}
}

// shutdown ends the streams that came in on hs (hs is shutting down and
// waits for its handlers); their clients resume elsewhere or later.
func (h *streamHub) shutdown(hs *http.Server) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.subs {
		for st := range set {
			if st.hs == hs {
				st.stopOnce.Do(func() { close(st.stop) })
			}
		}
	}
}

// revoke ends every stream of acct (its tokens were revoked): the
// streams were authorised by a token that no longer is, and their
// clients' reconnections are refused. It returns how many it ended.
func (h *streamHub) revoke(acct string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	prefix := acct + "\x00"
	for key, set := range h.subs {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		for st := range set {
			st.stopOnce.Do(func() { close(st.stop) })
			n++
		}
	}
	return n
}

// streamCursor is the seq the stream starts after: Last-Event-ID (what a
// reconnecting EventSource sends) wins over ?after_seq=; 0 when neither.
func streamCursor(r *http.Request) (int64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<53 {
			return 0, badRequest("Last-Event-ID must be a message seq (an integer from 0 to %d), got %q", int64(1<<53), v)
		}
		return n, nil
	}
	n, _, err := intParam(r.URL.Query(), "after_seq", 0, 1<<53)
	return n, err
}

func (c *Config) streamHeartbeat() time.Duration {
	if c.StreamHeartbeat > 0 {
		return c.StreamHeartbeat
	}
	return DefaultStreamHeartbeat
}

func (c *Config) streamRetry() time.Duration {
	if c.StreamRetry > 0 {
		return c.StreamRetry
	}
	return DefaultStreamRetry
}

func (c *Config) streamWriteTimeout() time.Duration {
	if c.StreamWriteTimeout > 0 {
		return c.StreamWriteTimeout
	}
	return DefaultStreamWriteTimeout
}

// errStreamStopped ends a stream whose server is going away.
var errStreamStopped = errors.New("stream stopped")

// getMessageStream: GET /v3/sessions/:id/messages/stream[?after_seq=N]
// (Last-Event-ID: N wins over after_seq) → text/event-stream:
//
//	retry: <StreamRetry ms>                      once, first
//	event: message / id: <seq> / data: <row>     each row with seq > N, in seq order
//	: heartbeat                                  every StreamHeartbeat
//	event: text-delta / data: {"message"}       a live text delta of the session (no id, never stored; may be dropped)
//	event: end / data: {"reason","lastSeq"}      once the session is inactive or deleted; lastSeq is the session's last seq
//
// A row is the JSON of a GET /v3/sessions/:id/messages row. Rows are read
// from the store, never queued in memory: a stream holds at most one page
// of rows and streamFlushBytes of frames, however far behind its reader is,
// and a reader that takes nothing for StreamWriteTimeout is dropped (it
// resumes with Last-Event-ID). `end` follows every row stored before the
// session went inactive (session-end, archive, idle expiry) or was deleted;
// a stream opened on an inactive session sends the rows after N, then end.
// Errors before the stream starts are the v3 JSON errors: 400 for a bad
// cursor, 401, 404 "Session not found".
func (s *Server) getMessageStream(w http.ResponseWriter, r *http.Request, acct string) {
	sid := r.PathValue("id")
	after, err := streamCursor(r)
	if err != nil {
		s.fail(w, r, err, "")
		return
	}
	hs, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	// Subscribed before the first read: no change after it is missed.
	st := s.streams.add(acct, sid, hs)
	defer s.streams.remove(st)
	// A revocation between the token's check and the subscription would
	// not have ended this stream (streamHub.revoke): check once more.
	if _, err := s.verifyToken(r.Context(), strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")); err != nil {
		if errors.Is(err, ErrInvalidToken) {
			writeErr(w, http.StatusUnauthorized, errInvalidToken)
		} else {
			s.fail(w, r, err, "")
		}
		return
	}
	sess, err := s.st.Session(r.Context(), acct, sid)
	if err != nil {
		s.fail(w, r, err, errSessionNotFound)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // proxies must not hold frames back
	w.WriteHeader(http.StatusOK)
	s.streams.served.Add(1)
	sw := &streamWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.streamWriteTimeout()}
	err = s.serveStream(r.Context(), sw, st, acct, sid, after, sess.Seq, !sess.Active)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		// (A failed write also cancels the request's context: this case
		// comes first.)
		s.streams.dropped.Add(1)
		s.log.Warn().Str("account", acct).Str("session", sid).Int64("lastSeq", sw.lastSeq).Dur("timeout", sw.timeout).Msg("message stream dropped: its reader took nothing in time")
	case err == nil, errors.Is(err, errStreamStopped), r.Context().Err() != nil:
	default:
		s.log.Debug().Err(err).Str("session", sid).Msg("message stream ended")
	}
}

// serveStream writes the stream until the session ends (nil), the client
// or the server goes away, or a write fails. known is the session's last
// seq as last read; `end` reports the session's real last seq (the larger
// of known, read again at the end, and the last row framed), never the
// client's cursor, which may lie past it.
func (s *Server) serveStream(ctx context.Context, sw *streamWriter, st *stream, acct, sid string, after, known int64, ended bool) error {
	sw.lastSeq = after
	sw.buf = sse.AppendRetry(sw.buf, s.cfg.streamRetry().Milliseconds())
	if err := sw.flush(); err != nil {
		return err
	}
	hb := time.NewTicker(s.cfg.streamHeartbeat())
	defer hb.Stop()
	deleted := false
	for {
		if !deleted {
			gone, err := s.streamRows(ctx, sw, acct, sid)
			if err != nil {
				return err
			}
			deleted = gone
		}
		if ended || deleted {
			reason := streamEndInactive
			if deleted {
				reason = streamEndDeleted
			} else if sess, err := s.st.Session(ctx, acct, sid); err == nil {
				known = sess.Seq
				// Rows stored since the last read go out before the end
				// that names them.
				if known > sw.rowSeq {
					if _, err := s.streamRows(ctx, sw, acct, sid); err != nil {
						return err
					}
				}
			}
			data, _ := json.Marshal(map[string]any{"reason": reason, "lastSeq": max(known, sw.rowSeq)}) // a map of a string and a number always encodes
			sw.buf, _ = sse.AppendFrame(sw.buf, "end", "", string(data))
			if err := sw.flush(); err != nil {
				return err
			}
			s.streams.ended.Add(1)
			return nil
		}
		select {
		case <-st.wake:
			if st.state.Swap(false) {
				sess, err := s.st.Session(ctx, acct, sid)
				switch {
				case errors.Is(err, store.ErrNotFound):
					deleted = true
				case err != nil:
					return fmt.Errorf("read session: %w", err)
				default:
					ended, known = !sess.Active, sess.Seq
				}
			}
		case msg := <-st.live:
			data, _ := json.Marshal(map[string]string{"message": msg}) // a map of strings always encodes
			sw.buf, _ = sse.AppendFrame(sw.buf, "text-delta", "", string(data))
			if err := sw.flush(); err != nil {
				return err
			}
		case <-hb.C:
			sw.buf = sse.AppendComment(sw.buf, "heartbeat")
			sw.buf = append(sw.buf, '\n') // a block of its own
			if err := sw.flush(); err != nil {
				return err
			}
		case <-st.stop:
			return errStreamStopped
		case <-s.ctx.Done():
			return errStreamStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// streamRows writes every stored row after sw.lastSeq. It reports true when
// the session no longer exists.
func (s *Server) streamRows(ctx context.Context, sw *streamWriter, acct, sid string) (bool, error) {
	for {
		list, more, err := s.st.Messages(ctx, acct, sid, store.Page{After: sw.lastSeq, Limit: streamPage})
		if errors.Is(err, store.ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read rows after seq %d: %w", sw.lastSeq, err)
		}
		for _, m := range list {
			data, err := json.Marshal(toWireMessage(m))
			if err != nil {
				return false, fmt.Errorf("encode row seq %d: %w", m.Seq, err)
			}
			b, err := sse.AppendFrame(sw.buf, "message", strconv.FormatInt(m.Seq, 10), string(data))
			if err != nil {
				return false, fmt.Errorf("frame row seq %d: %w", m.Seq, err)
			}
			sw.buf, sw.lastSeq, sw.rowSeq = b, m.Seq, m.Seq
			if len(sw.buf) >= streamFlushBytes {
				if err := sw.flush(); err != nil {
					return false, err
				}
			}
		}
		if err := sw.flush(); err != nil {
			return false, err
		}
		if !more || len(list) == 0 {
			return false, nil
		}
	}
}

// streamWriter writes a stream's frames, each flush bounded by a write
// deadline (wall clock, like the connection's).
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     []byte
	lastSeq int64 // the cursor: the last row framed, or the client's after_seq
	rowSeq  int64 // the last row framed (0 before the first)
}

// flush writes and flushes buf. A reader that takes nothing for the
// timeout makes it fail with an error wrapping os.ErrDeadlineExceeded.
func (sw *streamWriter) flush() error {
	if len(sw.buf) == 0 {
		return nil
	}
	// Writers that cannot set deadlines (test recorders, wrappers) write
	// without one.
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	_, err := sw.w.Write(sw.buf)
	if err == nil {
		err = sw.rc.Flush()
	}
	if cap(sw.buf) > 2*streamFlushBytes {
		sw.buf = nil // do not keep a large row's buffer for the stream's life
	} else {
		sw.buf = sw.buf[:0]
	}
	return err
}
