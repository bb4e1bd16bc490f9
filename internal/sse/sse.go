// Package sse reads and writes Server-Sent Events streams
// (text/event-stream, as the WHATWG HTML standard's "Server-sent events"
// section defines them). It is the one SSE reader happy uses for every SSE
// stream it reads.
//
// Reader turns an io.Reader into frames. Its properties:
//
//   - CR, LF and CRLF end a line, and a stream may mix them. A CR at the end
//     of one read followed by an LF at the start of the next is one line
//     end; an LF that follows a CRLF is a line end of its own (so "a\r\n\n"
//     ends a block). A blank line ends a block, wherever the reads cut it.
//   - A field line is "name:value" or "name" (no colon: the value is
//     empty). Exactly one space after the colon is removed, never more.
//     Lines starting with a colon are comments and are ignored.
//   - The recognised fields are event, data, id and retry. Several data
//     lines are joined with "\n". The event type comes only from event
//     lines, never from anything inside the data.
//   - A block with no recognised field (blank lines, comments, unknown
//     fields) is not a frame. A block with only id or only retry is a frame
//     (the caller reads and discards it, or uses its id as a resume cursor).
//   - Work and memory are linear in the stream: every byte is looked at a
//     constant number of times whatever the read sizes, and a frame is
//     copied out once when it completes.
//   - Next never panics. What the reader does not turn into a frame while
//     carrying content is a Refusal with a Reason (and counted in Stats):
//     a block larger than Options.MaxFrame, an id with U+0000, a retry that
//     is not a decimal number, a value that is not UTF-8, a stream that
//     ends inside a block.
//
// Two points where the standard would silently change or lose data are
// refusals instead: the standard decodes invalid UTF-8 to U+FFFD (the reader
// refuses the block: its payload would not be what was sent), and it drops
// an unterminated last block without a word (the reader returns a Refusal
// with ReasonTruncated).
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Frame is one block of fields ended by a blank line.
type Frame struct {
	// Event is the value of the block's last event line ("" when none; see
	// Type).
	Event string
	// Data is the values of the block's data lines joined with "\n".
	Data string
	// ID is the value of the block's last valid id line.
	ID string
	// Retry is the value of the block's last valid retry line, in
	// milliseconds.
	Retry int64
	// HasEvent, HasData, HasID and HasRetry tell which fields the block
	// set. A standard EventSource dispatches only frames with HasData.
	HasEvent, HasData, HasID, HasRetry bool
	// Offset is the byte offset of the block's first line in the stream.
	Offset int64
}

// Type is the frame's event type: Event, or "message" (the standard's
// default) when the block had no event line or an empty one.
func (f Frame) Type() string {
	if f.Event == "" {
		return "message"
	}
	return f.Event
}

// Reason says why the reader refused part of a stream.
type Reason string

// Refusal reasons.
const (
	// ReasonFrameTooLarge: a block's field values exceeded Options.MaxFrame
	// bytes; the rest of the block was skipped without being buffered.
	ReasonFrameTooLarge Reason = "frame_too_large"
	// ReasonIDHasNUL: an id value contained U+0000 (the standard ignores
	// such an id).
	ReasonIDHasNUL Reason = "id_has_nul"
	// ReasonBadRetry: a retry value was empty, held something other than
	// ASCII digits, or did not fit an int64 (the standard ignores it).
	ReasonBadRetry Reason = "bad_retry"
	// ReasonInvalidUTF8: an event, data or id value was not valid UTF-8;
	// the whole block is refused.
	ReasonInvalidUTF8 Reason = "invalid_utf8"
	// ReasonTruncated: the stream ended inside a block that would have
	// been a frame (the standard discards it).
	ReasonTruncated Reason = "truncated"
)

// Refusal is content the reader did not turn into a frame.
type Refusal struct {
	// Reason is why.
	Reason Reason
	// Detail is a human-readable explanation (sizes, the field).
	Detail string
	// Offset is the byte offset of the refused block (or line) in the
	// stream.
	Offset int64
	// Size is the refused block's (or line's) length in bytes, up to and
	// including the byte that ended it (the CR of a final CRLF).
	Size int64
}

// Error makes a Refusal usable as an error value (for logs and Dropped
// records); the reader itself never returns it as an error.
func (r *Refusal) Error() string {
	return fmt.Sprintf("sse: %s at byte %d (%d bytes): %s", r.Reason, r.Offset, r.Size, r.Detail)
}

// Stats counts what a Reader produced.
type Stats struct {
	// Frames is the number of frames returned.
	Frames int64
	// Refused counts the refusals returned, by reason.
	Refused map[Reason]int64
}

// DefaultMaxFrame bounds a block's field values when Options.MaxFrame is
// zero: 16 MiB.
const DefaultMaxFrame = 16 << 20

// DefaultReadSize is the size of each read from the underlying reader when
// Options.ReadSize is zero.
const DefaultReadSize = 32 << 10

// ErrNegativeOption is returned by NewReader for a negative option.
var ErrNegativeOption = errors.New("sse: negative option")

// Options configure a Reader. The zero value is valid.
type Options struct {
	// MaxFrame is the most bytes of field values (event, data, id, retry,
	// and the line being read) one block may hold; 0 means
	// DefaultMaxFrame. A larger block is refused (ReasonFrameTooLarge) and
	// skipped to its end without being buffered.
	MaxFrame int
	// ReadSize is the size of each read (at least 4); 0 means
	// DefaultReadSize.
	ReadSize int
}

// line states
const (
	stStart    = iota // at the first byte of a line
	stName            // in a field name
	stValue           // in a recognised field's value
	stSkip            // in a comment or unknown field: discard to the line end
	stOversize        // discarding the rest of an oversized block
)

// field kinds
const (
	fNone = iota
	fEvent
	fData
	fID
	fRetry
)

// Reader reads frames from an SSE stream. It is not safe for concurrent
// use.
type Reader struct {
	r        io.Reader
	maxFrame int
	buf      []byte
	off, n   int   // unconsumed bytes are buf[off:n]
	pos      int64 // stream offset of buf[off]
	err      error // sticky read error (io.EOF included)
	done     bool  // the end of the stream was handled

	bom     bool // the first bytes are being checked for a BOM
	afterCR bool // the last byte was a CR: a following LF is part of it
	state   int
	name    [6]byte // field name so far (at most len("retry")+1 bytes)
	nameLen int
	kind    int
	first   bool   // the next value byte is the first one (space strip)
	val     []byte // value of an event, id or retry line
	lineOff int64  // stream offset of the current line

	// the block being read
	blockOff  int64
	inBlock   bool // a line of the block has been seen
	held      int  // bytes of values held
	event     []byte
	data      strings.Builder
	id        []byte
	retry     int64
	has       [5]bool // by field kind
	badUTF8   bool
	pending   []*Refusal // refusals waiting to be returned before the frame
	oversized bool       // the block passed maxFrame (state stOversize until its end)
	lineHas   bool       // in stOversize: the current line has content

	lastID string
	stats  Stats
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader, opts Options) (*Reader, error) {
	if opts.MaxFrame < 0 || opts.ReadSize < 0 {
		return nil, ErrNegativeOption
	}
	mf, rs := opts.MaxFrame, opts.ReadSize
	if mf == 0 {
		mf = DefaultMaxFrame
	}
	if rs == 0 {
		rs = DefaultReadSize
	}
	return &Reader{r: r, maxFrame: mf, buf: make([]byte, max(rs, 4)), bom: true, stats: Stats{Refused: map[Reason]int64{}}}, nil
}

// LastEventID is the standard's "last event ID string": the id of the most
// recent frame that had one (it carries over frames without an id). A
// client resuming a stream sends it as Last-Event-ID.
func (r *Reader) LastEventID() string { return r.lastID }

// Stats returns the counts so far (a copy).
func (r *Reader) Stats() Stats {
	out := Stats{Frames: r.stats.Frames, Refused: make(map[Reason]int64, len(r.stats.Refused))}
	for k, v := range r.stats.Refused {
		out.Refused[k] = v
	}
	return out
}

// Next returns the next frame, or the next refusal (then the frame is
// zero and the reader continues with what follows). At the end of the
// stream it returns io.EOF; a read error of the underlying reader is
// returned wrapped. After an error every call returns it again, once any
// pending refusal (ReasonTruncated) has been returned.
func (r *Reader) Next() (Frame, *Refusal, error) {
	for {
		if len(r.pending) > 0 {
			ref := r.pending[0]
			r.pending = r.pending[1:]
			r.stats.Refused[ref.Reason]++
			return Frame{}, ref, nil
		}
		if r.off < r.n {
			if f, ok := r.scan(); ok {
				r.stats.Frames++
				return f, nil, nil
			}
			continue
		}
		if r.err != nil {
			if !r.done {
				r.done = true
				r.finish()
				continue
			}
			return Frame{}, nil, r.err
		}
		n, err := r.r.Read(r.buf)
		r.setRead(0, n, err)
	}
}

// refuse queues a refusal.
func (r *Reader) refuse(reason Reason, off, size int64, format string, a ...any) {
	r.pending = append(r.pending, &Refusal{Reason: reason, Detail: fmt.Sprintf(format, a...), Offset: off, Size: size})
}

// advance consumes k bytes of the buffer.
func (r *Reader) advance(k int) {
	r.off += k
	r.pos += int64(k)
}

// scan consumes buffered bytes until a block completes (it returns the frame
// and true), a refusal is queued, or the buffer is used up.
func (r *Reader) scan() (Frame, bool) {
	if r.bom && !r.checkBOM() {
		return Frame{}, false
	}
	for r.off < r.n {
		p := r.buf[r.off:r.n]
		if r.afterCR {
			r.afterCR = false
			if p[0] == '\n' {
				r.advance(1)
				continue
			}
		}
		switch r.state {
		case stStart:
			r.lineOff = r.pos
			switch p[0] {
			case '\r', '\n':
				r.endLineByte(p[0])
				if f, ok := r.endBlock(); ok {
					return f, true
				}
				if len(r.pending) > 0 {
					return Frame{}, false
				}
				continue
			case ':':
				r.markBlock()
				r.state = stSkip
				r.advance(1)
				continue
			}
			r.markBlock()
			r.state, r.nameLen = stName, 0
		case stName:
			i := 0
			for ; i < len(p); i++ {
				c := p[i]
				if c == ':' || c == '\r' || c == '\n' {
					break
				}
				if r.nameLen == len(r.name) {
					break // longer than any recognised name
				}
				r.name[r.nameLen] = c
				r.nameLen++
			}
			r.advance(i)
			if i == len(p) {
				return Frame{}, false
			}
			c := p[i]
			r.kind = fieldKind(r.name[:r.nameLen])
			if r.nameLen == len(r.name) && c != ':' && c != '\r' && c != '\n' {
				r.kind = fNone
			}
			switch {
			case c == ':':
				r.advance(1)
				if r.kind == fNone {
					r.state = stSkip
				} else {
					r.startValue()
				}
			case c == '\r' || c == '\n':
				// A line without a colon: the field has an empty value.
				if r.kind != fNone {
					if !r.startValue() {
						continue // oversized: stOversize takes the line end
					}
					r.endValue()
				}
				r.endLineByte(c)
			default:
				r.state = stSkip
			}
			if len(r.pending) > 0 {
				return Frame{}, false
			}
		case stValue:
			i := indexEOL(p)
			seg := p
			if i >= 0 {
				seg = p[:i]
			}
			if r.first && len(seg) > 0 {
				r.first = false
				if seg[0] == ' ' {
					seg = seg[1:]
					r.advance(1)
				}
			}
			if r.held+len(seg) > r.maxFrame {
				r.oversize()
				continue
			}
			r.held += len(seg)
			if r.kind == fData {
				// Grow doubles without zeroing, and String hands the
				// bytes over without a copy: a frame costs about twice
				// its size in allocations, whatever the read sizes.
				r.data.Grow(len(seg))
				r.data.Write(seg)
			} else {
				r.val = appendDoubling(r.val, seg)
			}
			r.advance(len(seg))
			if i < 0 {
				return Frame{}, false
			}
			r.endValue()
			r.endLineByte(r.buf[r.off])
			if len(r.pending) > 0 {
				return Frame{}, false
			}
		case stSkip:
			i := indexEOL(p)
			if i < 0 {
				r.advance(len(p))
				return Frame{}, false
			}
			r.advance(i)
			r.endLineByte(p[i])
		case stOversize:
			// Discard to the end of the block: the first empty line.
			for i, c := range p {
				if c != '\r' && c != '\n' {
					r.lineHas, r.afterCR = true, false
					continue
				}
				if r.afterCR && c == '\n' {
					r.afterCR = false
					continue
				}
				r.afterCR = c == '\r'
				if !r.lineHas {
					r.advance(i + 1)
					r.refuse(ReasonFrameTooLarge, r.blockOff, r.pos-r.blockOff, "block holds more than %d bytes of field values", r.maxFrame)
					r.resetBlock()
					r.state = stStart
					return Frame{}, false
				}
				r.lineHas = false
			}
			r.advance(len(p))
			return Frame{}, false
		}
	}
	return Frame{}, false
}

// checkBOM consumes one U+FEFF at the very start of the stream. It reports
// false when it needs more bytes to decide (it has then read them).
func (r *Reader) checkBOM() bool {
	const bom = "\xEF\xBB\xBF"
	avail := r.buf[r.off:r.n]
	k := min(len(avail), len(bom))
	switch {
	case string(avail[:k]) != bom[:k]:
		r.bom = false
	case k == len(bom):
		r.advance(k)
		r.bom = false
	case r.err != nil:
		r.bom = false // the stream ends inside a BOM: the bytes are content
	default:
		// A partial BOM at the end of a read: keep it at the start of
		// the buffer (which holds at least 4 bytes) and read more.
		n := copy(r.buf, avail)
		m, err := r.r.Read(r.buf[n:])
		r.setRead(n, m, err)
		return false
	}
	return true
}

// setRead records a read of m bytes into buf[n:] (n bytes were kept before
// it) and its error.
func (r *Reader) setRead(n, m int, err error) {
	if m < 0 || m > len(r.buf)-n {
		m, err = 0, fmt.Errorf("sse: reader returned %d bytes for a %d-byte buffer", m, len(r.buf)-n)
	}
	r.off, r.n = 0, n+m
	if err != nil {
		if errors.Is(err, io.EOF) {
			r.err = io.EOF
		} else {
			r.err = fmt.Errorf("sse: read at byte %d: %w", r.pos+int64(n+m), err)
		}
	}
}

// indexEOL returns the index of the first CR or LF in p, or -1. Two
// IndexByte scans (vectorised) are much faster than IndexAny on long
// lines; the CR is looked for only before the first LF.
func indexEOL(p []byte) int {
	lf := bytes.IndexByte(p, '\n')
	head := p
	if lf >= 0 {
		head = p[:lf]
	}
	if cr := bytes.IndexByte(head, '\r'); cr >= 0 {
		return cr
	}
	return lf
}

// appendDoubling is append that at least doubles the capacity when it has
// to grow (append grows large slices by a quarter), so a frame arriving in
// many small reads is copied a bounded number of times.
func appendDoubling(b, p []byte) []byte {
	if need := len(b) + len(p); need > cap(b) {
		nb := make([]byte, len(b), max(need, 2*cap(b), 512))
		copy(nb, b)
		b = nb
	}
	return append(b, p...)
}

// fieldKind maps a field name to its kind (fNone when not recognised).
func fieldKind(name []byte) int {
	switch string(name) {
	case "event":
		return fEvent
	case "data":
		return fData
	case "id":
		return fID
	case "retry":
		return fRetry
	}
	return fNone
}

// markBlock records the start of a block at its first line.
func (r *Reader) markBlock() {
	if !r.inBlock {
		r.inBlock, r.blockOff = true, r.lineOff
	}
}

// startValue begins the value of a recognised field. It reports false when
// the block became oversized.
func (r *Reader) startValue() bool {
	r.state, r.first = stValue, true
	r.val = r.val[:0]
	if r.kind == fData && r.has[fData] {
		if r.held+1 > r.maxFrame {
			r.oversize()
			return false
		}
		r.held++
		r.data.WriteByte('\n')
	}
	if r.kind == fData {
		r.has[fData] = true
	}
	return true
}

// endValue applies a completed field line.
func (r *Reader) endValue() {
	switch r.kind {
	case fEvent:
		r.held -= len(r.event)
		r.event = append(r.event[:0], r.val...)
		r.has[fEvent] = true
		if !utf8.Valid(r.val) {
			r.badUTF8 = true
		}
	case fData:
		// The value went straight into r.data; it is checked as a whole
		// when the block ends.
	case fID:
		switch {
		case bytes.IndexByte(r.val, 0) >= 0:
			r.held -= len(r.val)
			r.refuse(ReasonIDHasNUL, r.lineOff, r.pos-r.lineOff+1, "id value contains U+0000 (ignored)")
		case !utf8.Valid(r.val):
			r.held -= len(r.val)
			r.badUTF8 = true
		default:
			r.held -= len(r.id)
			r.id = append(r.id[:0], r.val...)
			r.has[fID] = true
		}
	case fRetry:
		r.held -= len(r.val)
		v, ok := parseRetry(r.val)
		if !ok {
			r.refuse(ReasonBadRetry, r.lineOff, r.pos-r.lineOff+1, "retry value %q is not a decimal number of milliseconds (ignored)", truncate(r.val))
		} else {
			r.retry, r.has[fRetry] = v, true
		}
	}
	r.val = r.val[:0]
}

// parseRetry accepts one or more ASCII digits that fit an int64.
func parseRetry(v []byte) (int64, bool) {
	if len(v) == 0 {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// truncate shortens a value for a refusal's detail.
func truncate(v []byte) string {
	if len(v) > 40 {
		return string(v[:40]) + "…"
	}
	return string(v)
}

// endLineByte consumes the line terminator c at the current position.
func (r *Reader) endLineByte(c byte) {
	r.advance(1)
	r.afterCR = c == '\r'
	r.state = stStart
}

// oversize starts discarding the rest of the block.
func (r *Reader) oversize() {
	r.state, r.oversized, r.lineHas = stOversize, true, true
	r.event, r.id, r.val = nil, nil, nil
	r.data.Reset()
	r.held, r.has, r.badUTF8 = 0, [5]bool{}, false
}

// endBlock is called at a blank line: it returns the block's frame when it
// has one, or queues the block's refusal.
func (r *Reader) endBlock() (Frame, bool) {
	if !r.inBlock {
		return Frame{}, false // a run of blank lines
	}
	defer r.resetBlock()
	data := r.data.String()
	if r.badUTF8 || (r.has[fData] && !utf8.ValidString(data)) {
		r.refuse(ReasonInvalidUTF8, r.blockOff, r.pos-r.blockOff, "a field value is not valid UTF-8")
		return Frame{}, false
	}
	if !r.has[fEvent] && !r.has[fData] && !r.has[fID] && !r.has[fRetry] {
		return Frame{}, false
	}
	f := Frame{Event: string(r.event), Data: data, ID: string(r.id), Retry: r.retry,
		HasEvent: r.has[fEvent], HasData: r.has[fData], HasID: r.has[fID], HasRetry: r.has[fRetry], Offset: r.blockOff}
	if f.HasID {
		r.lastID = f.ID
	}
	return f, true
}

// resetBlock forgets the block just ended, keeping small buffers for reuse.
func (r *Reader) resetBlock() {
	keep := func(b []byte) []byte {
		if cap(b) > 64<<10 {
			return nil
		}
		return b[:0]
	}
	r.event, r.id, r.val = keep(r.event), keep(r.id), keep(r.val)
	r.data.Reset()
	r.retry, r.held = 0, 0
	r.has = [5]bool{}
	r.badUTF8, r.inBlock, r.oversized, r.lineHas = false, false, false, false
}

// finish handles the end of the stream: a block cut short is refused when it
// would have been a frame.
func (r *Reader) finish() {
	if r.oversized {
		r.refuse(ReasonFrameTooLarge, r.blockOff, r.pos-r.blockOff, "block holds more than %d bytes of field values (the stream ended inside it)", r.maxFrame)
		r.resetBlock()
		return
	}
	if !r.inBlock {
		return
	}
	// The last line, had it been terminated.
	switch r.state {
	case stName:
		if k := fieldKind(r.name[:r.nameLen]); k != fNone {
			r.kind = k
			r.has[k] = true
		}
	case stValue:
		r.has[r.kind] = true
	}
	if r.has[fEvent] || r.has[fData] || r.has[fID] || r.has[fRetry] {
		var what []string
		for k, name := range []string{fEvent: "event", fData: "data", fID: "id", fRetry: "retry"} {
			if k != fNone && r.has[k] {
				what = append(what, name)
			}
		}
		r.refuse(ReasonTruncated, r.blockOff, r.pos-r.blockOff, "the stream ended inside a block (%s) before its blank line", strings.Join(what, ", "))
	}
	r.resetBlock()
	r.state = stStart
}
