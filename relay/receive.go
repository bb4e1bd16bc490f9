package relay

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// receiver is the session's receive path. One goroutine owns lastSeq: a
// live new-message is applied only when it is exactly lastSeq+1; anything
// else (a gap, an event after a reconnect) triggers a fetch with
// after_seq=lastSeq until caught up. Duplicates (seq <= lastSeq) are
// ignored. Own messages (localId of a version this client enqueued) advance
// lastSeq without being delivered. Nothing is dropped: a live event that
// cannot be queued only marks a fetch as needed.
type receiver struct {
	s       *Session
	start   int64
	live    chan StoredMessage
	refetch chan struct{}
	out     chan Incoming

	lastSeq int64 // owned by run

	last       atomic.Int64
	hint       atomic.Int64 // highest seq known to exist (from our own sends)
	delivered  atomic.Int64
	refused    atomic.Int64
	echoes     atomic.Int64
	duplicates atomic.Int64
	gapFetches atomic.Int64
	fetches    atomic.Int64
	overflow   atomic.Int64
}

// liveBuffer is how many live events wait for the receive goroutine before
// further ones are replaced by a fetch.
const liveBuffer = 256

// pollEvery is the safety-net fetch interval: it finds a message whose live
// event was lost while the socket stayed up.
const pollEvery = 30 * time.Second

// lagCheck is how often the receive path compares its position with the
// seqs the relay acknowledged to this client.
const lagCheck = 500 * time.Millisecond

// noteSeq records that seq exists on the relay (one of our own messages).
func (r *receiver) noteSeq(seq int64) {
	for {
		cur := r.hint.Load()
		if seq <= cur || r.hint.CompareAndSwap(cur, seq) {
			return
		}
	}
}

func newReceiver(s *Session, start int64) *receiver {
	return &receiver{s: s, start: start, live: make(chan StoredMessage, liveBuffer), refetch: make(chan struct{}, 1),
		out: make(chan Incoming, s.opts.ReceiveBuffer)}
}

// pushLive hands a live new-message to the receive goroutine without
// blocking the socket.
func (r *receiver) pushLive(m StoredMessage) {
	select {
	case r.live <- m:
	default:
		r.overflow.Add(1)
		r.kick()
	}
}

// kick asks for a fetch from lastSeq (after a reconnect or an overflow).
func (r *receiver) kick() {
	select {
	case r.refetch <- struct{}{}:
	default:
	}
}

func (r *receiver) run(ctx context.Context) {
	defer close(r.out)
	select {
	case <-r.s.created:
	case <-ctx.Done():
		return
	}
	if !r.resolveStart(ctx) {
		return
	}
	r.lastSeq = r.start
	r.last.Store(r.lastSeq)
	if !r.catchUp(ctx) {
		return
	}
	poll := time.NewTicker(pollEvery)
	defer poll.Stop()
	lag := time.NewTicker(lagCheck)
	defer lag.Stop()
	lagging := false
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-r.live:
			switch {
			case m.Seq <= r.lastSeq:
				r.duplicates.Add(1)
			case m.Seq == r.lastSeq+1:
				if !r.apply(ctx, m) {
					return
				}
			default:
				r.gapFetches.Add(1)
				if !r.catchUp(ctx) {
					return
				}
			}
		case <-r.refetch:
			if !r.catchUp(ctx) {
				return
			}
		case <-poll.C:
			if !r.catchUp(ctx) {
				return
			}
		case <-lag.C:
			// The relay acknowledged a seq the stream has not reached: its
			// live event is late or was lost (e.g. sent before the socket
			// rejoined the session's room). Fetch if it is still missing at
			// the next check.
			behind := r.hint.Load() > r.lastSeq
			if behind && lagging {
				if !r.catchUp(ctx) {
					return
				}
				behind = false
			}
			lagging = behind
		}
	}
}

// resolveStart turns FromNow into the session's seq at open (asking the
// relay again when the session was created by the sender).
func (r *receiver) resolveStart(ctx context.Context) bool {
	if r.start != FromNow {
		if r.start < 0 {
			r.start = 0
		}
		return true
	}
	if seq := r.s.createdSeq.Load(); seq >= 0 {
		r.start = seq
		return true
	}
	b := r.s.c.cfg.Backoff
	for {
		info, err := r.s.c.api.CreateSession(ctx, SessionCreate{Tag: r.s.tag, Metadata: r.s.st.Metadata, DataEncryptionKey: r.s.st.DataEncryptionKey})
		if err == nil {
			err = checkCreated(info, r.s.ID(), r.s.st)
		}
		if err == nil {
			r.start = info.Seq
			return true
		}
		r.s.c.log.Warn().Err(err).Str("tag", r.s.tag).Msg("session position for FromNow")
		if !sleep(ctx, b.Next()) {
			return false
		}
	}
}

// catchUp fetches pages after lastSeq until the relay has no more, retrying
// failures with back-off. It returns false only when ctx ended.
func (r *receiver) catchUp(ctx context.Context) bool {
	b := r.s.c.cfg.Backoff
	sid := r.s.ID()
	for {
		page, err := r.s.c.api.FetchMessages(ctx, sid, r.lastSeq, MaxFetchLimit)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			r.s.c.log.Warn().Err(err).Str("tag", r.s.tag).Int64("after_seq", r.lastSeq).Msg("fetch messages failed")
			if !sleep(ctx, b.Next()) {
				return false
			}
			continue
		}
		b.Reset()
		r.fetches.Add(1)
		for _, m := range page.Messages {
			if m.Seq != r.lastSeq+1 {
				// The relay has gaps only if messages were deleted or its
				// seq allocation differs; keep order and move on, but say so.
				r.s.c.log.Warn().Str("tag", r.s.tag).Int64("after", r.lastSeq).Int64("seq", m.Seq).Msg("seq gap in fetched page")
			}
			if !r.apply(ctx, m) {
				return false
			}
		}
		if !page.HasMore || len(page.Messages) == 0 {
			return true
		}
	}
}

// apply processes one message in order: skip own echoes, decrypt, deliver.
func (r *receiver) apply(ctx context.Context, m StoredMessage) bool {
	r.lastSeq = m.Seq
	r.last.Store(m.Seq)
	localID := m.LocalIDOrEmpty()
	if localID != "" && r.s.isOwn(localID) {
		r.echoes.Add(1)
		return true
	}
	in := Incoming{Seq: m.Seq, ID: m.ID, LocalID: localID, CreatedAt: time.UnixMilli(m.CreatedAt), Sealed: m.Content.C}
	if m.Content.T != "encrypted" {
		in.Err = &DecryptError{What: "message", Seq: m.Seq, Reason: errContentKind(m.Content.T)}
	} else if plain, err := r.s.open("message", m.Seq, m.Content.C); err != nil {
		in.Err = err
	} else if check := r.s.opts.CheckRecord; check != nil {
		if err := check(localID, plain); err != nil {
			in.Err = &RecordError{Seq: m.Seq, LocalID: localID, Reason: err}
			r.refused.Add(1)
			r.s.c.log.Warn().Err(in.Err).Str("tag", r.s.tag).Msg("relay message refused")
		} else {
			in.Plaintext = plain
		}
	} else {
		in.Plaintext = plain
	}
	if _, bad := in.Err.(*DecryptError); bad {
		r.s.countDecrypt(in.Err)
	}
	// Counted before the hand-over, so a consumer that reads the message
	// already sees it in Stats.
	r.delivered.Add(1)
	select {
	case r.out <- in:
		return true
	case <-ctx.Done():
		r.delivered.Add(-1)
		return false
	}
}

type errContentKind string

func (e errContentKind) Error() string {
	return "message content is " + strconv.Quote(string(e)) + ", not \"encrypted\""
}

// splitLocalID splits "<record>.<version>" at its last dot; ok is false when
// the text does not have that shape (e.g. a UUID from another client).
func splitLocalID(id string) (record string, version int64, ok bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 || i == len(id)-1 {
		return "", 0, false
	}
	v, err := strconv.ParseInt(id[i+1:], 10, 64)
	if err != nil || v < 1 || id[i+1] == '+' || id[i+1] == '0' {
		return "", 0, false
	}
	return id[:i], v, true
}
