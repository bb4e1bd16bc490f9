package relay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/happy-dev/happy/internal/sse"
)

// Defaults of FollowOptions.
const (
	// DefaultFollowIdle is how long a stream may stay silent (the relay
	// sends a heartbeat every 15 s) before the connection is taken for dead.
	DefaultFollowIdle = 60 * time.Second
	// DefaultFollowMaxFrame bounds one frame of the stream (a row is at
	// most the relay's 8 MiB request body, base64 in JSON).
	DefaultFollowMaxFrame = 64 << 20
)

// Reasons of a FollowDrop beyond the SSE reader's (sse.Reason values such
// as "frame_too_large" or "truncated").
const (
	DropRowUnparseable = "unparseable_json" // a message frame's data is not a row
	DropRowBadID       = "bad_id"           // the frame id is not the row's seq
	DropRowRepeated    = "repeated_seq"     // a row at or before the last one delivered
	DropUnknownEvent   = "unknown_event"    // an event type this client does not know
)

// FollowDrop is a part of the message stream that FollowMessages could not
// deliver. Seq is the frame's id when it had one (0 otherwise).
type FollowDrop struct {
	Reason string
	Detail string
	Seq    int64
}

// FollowOptions configure FollowMessages. The zero value follows from the
// first row.
type FollowOptions struct {
	// OnTextDelta, when set, receives the ciphertext (base64, sealed with
	// the session's content cipher) of each live text delta the stream
	// carries (docs/ARCHITECTURE.md, section "Live text"); it runs on the
	// follower's goroutine and must not block. Without it they are skipped.
	OnTextDelta func(sealed string)
	// AfterSeq is the seq to follow after (0: from the first row).
	AfterSeq int64
	// Backoff spaces the reconnections (250 ms .. 30 s when zero); it is
	// reset by a delivered row.
	Backoff Backoff
	// Idle is how long the stream may send nothing, not even a heartbeat,
	// before the connection is dropped and made again (DefaultFollowIdle
	// when zero).
	Idle time.Duration
	// MaxFrame bounds one frame in bytes (DefaultFollowMaxFrame when zero).
	MaxFrame int
	// OnDrop, when set, receives each FollowDrop as it happens (they are
	// counted in FollowResult either way).
	OnDrop func(FollowDrop)
	// OnConnect, when set, is called each time a stream is established,
	// with the seq it resumes after.
	OnConnect func(afterSeq int64)
}

// FollowResult is how a FollowMessages call went.
type FollowResult struct {
	// LastSeq is the seq of the last row delivered (AfterSeq when none).
	LastSeq int64
	// End is the reason of the relay's `end` event ("inactive": the
	// session ended, was archived or timed out; "deleted"), "" when the
	// call returned for another cause.
	End string
	// Connections is the number of streams established.
	Connections int
	// Drops counts the FollowDrops by reason.
	Drops map[string]int64
}

// FollowMessages follows a session's rows over the relay's message stream
// (GET /v3/sessions/:id/messages/stream, Server-Sent Events, read with
// internal/sse): fn gets every row with seq > opts.AfterSeq once, in seq
// order, stored rows first, then live ones. A broken or silent connection
// is made again after opts.Backoff, resuming after the last row delivered
// (Last-Event-ID), so nothing is lost or repeated.
//
// It returns nil when the relay sends `end` (FollowResult.End says why),
// after every row up to the last seq the end names (fetched when the stream
// did not carry them), and otherwise:
//   - ErrStreamUnsupported when the relay has no such stream (the reference
//     relay answers 404 for the route while the session exists, or another
//     relay answers 200 with something other than text/event-stream):
//     callers fall back to FetchMessages;
//   - a *StatusError wrapping ErrNotFound (unknown session),
//     ErrUnauthorized, or ErrRejected: retrying would not help;
//   - the error fn returned;
//   - ctx.Err() when ctx ends.
//
// Frames that cannot be delivered (see FollowDrop) are counted and given to
// opts.OnDrop, never skipped silently.
func (a *API) FollowMessages(ctx context.Context, sessionID string, opts FollowOptions, fn func(StoredMessage) error) (FollowResult, error) {
	f := &follower{a: a, sid: sessionID, opts: opts, fn: fn, res: FollowResult{LastSeq: opts.AfterSeq, Drops: map[string]int64{}}}
	if f.opts.Idle <= 0 {
		f.opts.Idle = DefaultFollowIdle
	}
	if f.opts.MaxFrame <= 0 {
		f.opts.MaxFrame = DefaultFollowMaxFrame
	}
	for {
		err := f.connect(ctx)
		if err == nil {
			// The end names the session's last seq: rows up to it that the
			// stream did not carry are read before the end is reported, so
			// a caller is never told "ended" before the last row.
			err = f.rowsUpTo(ctx, f.endSeq)
		}
		switch {
		case err == nil:
			return f.res, nil
		case ctx.Err() != nil:
			return f.res, ctx.Err()
		}
		var cb *callbackError
		switch {
		case errors.As(err, &cb):
			return f.res, cb.err
		case !errors.Is(err, ErrUnavailable):
			return f.res, err
		}
		if !sleep(ctx, f.opts.Backoff.Next()) {
			return f.res, ctx.Err()
		}
	}
}

// callbackError carries an error of the caller's fn out of connect.
type callbackError struct{ err error }

func (e *callbackError) Error() string { return e.err.Error() }

type follower struct {
	a    *API
	sid  string
	opts FollowOptions
	fn   func(StoredMessage) error
	res  FollowResult
	// endSeq is the lastSeq the relay's `end` named (0 when none).
	endSeq int64
}

// rowsUpTo delivers, over plain fetches, the rows after the last one
// delivered up to seq. An error wraps ErrUnavailable (retried by the
// caller, which resumes the stream) or is fn's.
func (f *follower) rowsUpTo(ctx context.Context, seq int64) error {
	for f.res.LastSeq < seq {
		page, err := f.a.FetchMessages(ctx, f.sid, f.res.LastSeq, 500)
		if err != nil {
			return err
		}
		if len(page.Messages) == 0 {
			return nil // the relay has no more (rows of a deleted session)
		}
		for _, m := range page.Messages {
			if m.Seq <= f.res.LastSeq {
				continue
			}
			if err := f.fn(m); err != nil {
				return &callbackError{err}
			}
			f.res.LastSeq = m.Seq
		}
	}
	return nil
}

func (f *follower) drop(d FollowDrop) {
	f.res.Drops[d.Reason]++
	if f.opts.OnDrop != nil {
		f.opts.OnDrop(d)
	}
}

// connect runs one stream. It returns nil after `end`, an error wrapping
// ErrUnavailable when the stream should be made again, or a final error.
func (f *follower) connect(ctx context.Context) error {
	path := "/v3/sessions/" + url.PathEscape(f.sid) + "/messages/stream"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.a.base+path, nil)
	if err != nil {
		return fmt.Errorf("relay: GET %s: %w", path, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(f.res.LastSeq, 10))
	if f.a.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.a.token)
	}
	if f.a.client != "" {
		req.Header.Set("X-Happy-Client", f.a.client)
	}
	// The answer's head must come within the request timeout; the body is
	// watched by the idle timer.
	headTimer := time.AfterFunc(f.a.timeout, cancel)
	resp, err := f.a.hc.Do(req)
	headInTime := headTimer.Stop()
	if err != nil {
		if ctx.Err() != nil && !headInTime {
			return fmt.Errorf("relay: GET %s: no answer within %s: %w", path, f.a.timeout, ErrUnavailable)
		}
		return fmt.Errorf("relay: GET %s: %w: %v", path, ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if !headInTime {
		// The timer fired just as the answer came: the context is gone.
		return fmt.Errorf("relay: GET %s: no answer within %s: %w", path, f.a.timeout, ErrUnavailable)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		serr := &StatusError{Method: http.MethodGet, Path: path, Status: resp.StatusCode, Message: errorText(b)}
		return f.refused(ctx, serr)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("relay: GET %s: answered %q, not text/event-stream: %w", path, resp.Header.Get("Content-Type"), ErrStreamUnsupported)
	}
	f.res.Connections++
	if f.opts.OnConnect != nil {
		f.opts.OnConnect(f.res.LastSeq)
	}
	body := &idleReader{r: resp.Body, idle: f.opts.Idle}
	body.timer = time.AfterFunc(f.opts.Idle, func() { body.expire(); cancel() })
	defer body.timer.Stop()
	// A connection that lived long is not a failure in a row: the next
	// reconnection starts from the shortest delay.
	_, longest := f.opts.Backoff.bounds()
	start := time.Now()
	defer func() {
		if time.Since(start) >= longest {
			f.opts.Backoff.Reset()
		}
	}()
	rd, err := sse.NewReader(body, sse.Options{MaxFrame: f.opts.MaxFrame})
	if err != nil {
		return fmt.Errorf("relay: GET %s: %w", path, err)
	}
	err = f.consume(rd)
	var re *readError
	if !errors.As(err, &re) {
		return err
	}
	if body.expired() {
		return fmt.Errorf("relay: GET %s: nothing for %s: %w", path, f.opts.Idle, ErrUnavailable)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// io.EOF without `end` too: the relay went away (a restart).
	return fmt.Errorf("relay: GET %s: stream broke after seq %d: %w: %v", path, f.res.LastSeq, ErrUnavailable, re.err)
}

// readError is the stream reader's error (the end of the body included).
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }

// consume delivers the frames of one stream. It returns nil at `end`, a
// *readError when the stream breaks, or a *callbackError.
func (f *follower) consume(rd *sse.Reader) error {
	for {
		fr, ref, err := rd.Next()
		if err != nil {
			return &readError{err}
		}
		if ref != nil {
			if ref.Reason == sse.ReasonTruncated {
				continue // the connection broke inside a frame: it is sent again on resume
			}
			f.drop(FollowDrop{Reason: string(ref.Reason), Detail: ref.Error()})
			continue
		}
		if !fr.HasData {
			continue // retry: the reconnection delay is opts.Backoff's
		}
		switch fr.Type() {
		case "message":
			if err := f.row(fr); err != nil {
				return err
			}
		case "text-delta":
			var td struct {
				Message string `json:"message"`
			}
			if json.Unmarshal([]byte(fr.Data), &td) != nil || td.Message == "" {
				f.drop(FollowDrop{Reason: DropRowUnparseable, Detail: "text-delta without a message"})
				continue
			}
			if f.opts.OnTextDelta != nil {
				f.opts.OnTextDelta(td.Message)
			}
		case "end":
			var end struct {
				Reason  string `json:"reason"`
				LastSeq int64  `json:"lastSeq"`
			}
			if json.Unmarshal([]byte(fr.Data), &end) != nil || end.Reason == "" {
				end.Reason = "unknown"
			}
			f.res.End, f.endSeq = end.Reason, end.LastSeq
			return nil
		default:
			f.drop(FollowDrop{Reason: DropUnknownEvent, Detail: fmt.Sprintf("event %q", fr.Type())})
		}
	}
}

// row delivers one message frame.
func (f *follower) row(fr sse.Frame) error {
	var m StoredMessage
	if err := json.Unmarshal([]byte(fr.Data), &m); err != nil {
		f.drop(FollowDrop{Reason: DropRowUnparseable, Detail: err.Error()})
		return nil
	}
	if id, err := strconv.ParseInt(fr.ID, 10, 64); err != nil || id != m.Seq {
		f.drop(FollowDrop{Reason: DropRowBadID, Detail: fmt.Sprintf("frame id %q, row seq %d", fr.ID, m.Seq), Seq: m.Seq})
		return nil
	}
	if m.Seq <= f.res.LastSeq {
		f.drop(FollowDrop{Reason: DropRowRepeated, Detail: fmt.Sprintf("seq %d after %d", m.Seq, f.res.LastSeq), Seq: m.Seq})
		return nil
	}
	if err := f.fn(m); err != nil {
		return &callbackError{err}
	}
	f.res.LastSeq = m.Seq
	f.opts.Backoff.Reset()
	return nil
}

// refused turns a non-200 answer into the call's error: a relay without
// the route is ErrStreamUnsupported, told from an unknown session (both
// 404) by asking for the session's rows.
func (f *follower) refused(ctx context.Context, serr *StatusError) error {
	switch serr.Status {
	case http.StatusNotFound:
		_, err := f.a.FetchMessages(ctx, f.sid, f.res.LastSeq, 1)
		switch {
		case err == nil:
			return fmt.Errorf("relay: %s: %w", serr.Error(), ErrStreamUnsupported)
		case errors.Is(err, ErrNotFound):
			return serr
		default:
			return err // unavailable: retried
		}
	case http.StatusMethodNotAllowed, http.StatusNotImplemented:
		return fmt.Errorf("relay: %s: %w", serr.Error(), ErrStreamUnsupported)
	}
	return serr
}

// idleReader restarts the idle timer on every byte that arrives
// (heartbeats included) and notes when it fired, so that the read error it
// causes is told from others.
type idleReader struct {
	r     io.Reader
	idle  time.Duration
	timer *time.Timer
	mu    sync.Mutex
	fired bool
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	if n > 0 {
		ir.timer.Reset(ir.idle)
	}
	return n, err
}

func (ir *idleReader) expire() {
	ir.mu.Lock()
	ir.fired = true
	ir.mu.Unlock()
}

func (ir *idleReader) expired() bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.fired
}
