package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/mapper"
)

// LiveDelta is one piece of streamed text of a part, sent next to the stored
// versions so that an online reader sees text as the agent writes it
// (docs/ARCHITECTURE.md, section "Live text"). Its JSON form, encrypted with
// the session's content cipher, is {messageId, partId, offset, delta}:
// Delta goes at Offset of the part's text, both counted in UTF-16 code units
// (JavaScript's string length), so a browser applies it without converting.
// It is never stored: a reader that missed one waits for the next stored
// version of the message.
type LiveDelta struct {
	MessageID string `json:"messageId"`
	PartID    string `json:"partId"`
	Offset    int64  `json:"offset"`
	Delta     string `json:"delta"`
}

// MaxLiveDelta bounds a delta's text in bytes; a longer streamed piece is
// not sent live (the stored version carries it).
const MaxLiveDelta = 16 << 10

// EncodeLiveDelta returns the JSON plaintext of d.
func EncodeLiveDelta(d LiveDelta) ([]byte, error) { return json.Marshal(d) }

// ErrLiveDelta is wrapped by every error of DecodeLiveDelta.
var ErrLiveDelta = errors.New("live delta")

// DecodeLiveDelta decodes the plaintext of a live delta: a JSON object with
// messageId and partId (non-empty strings), offset (an integer from 0 to
// 2^53) and delta (a non-empty string of at most MaxLiveDelta bytes).
// Unknown members are ignored. Errors wrap ErrLiveDelta and say which
// member is wrong; the decoder never panics.
func DecodeLiveDelta(b []byte) (LiveDelta, error) {
	raw, err := jsonlex.Root(b)
	if err != nil {
		return LiveDelta{}, fmt.Errorf("%w: %v", ErrLiveDelta, err)
	}
	var d LiveDelta
	vals := make([][]byte, 4)
	jsonlex.Fields(raw, vals, "messageId", "partId", "offset", "delta")
	var ok bool
	if d.MessageID, ok = jsonlex.StringOf(vals[0]); !ok || d.MessageID == "" {
		return LiveDelta{}, fmt.Errorf("%w: messageId is not a non-empty string", ErrLiveDelta)
	}
	if d.PartID, ok = jsonlex.StringOf(vals[1]); !ok || d.PartID == "" {
		return LiveDelta{}, fmt.Errorf("%w: partId is not a non-empty string", ErrLiveDelta)
	}
	var off json.Number
	if jsonlex.KindOf(vals[2]) != jsonlex.KindNumber || json.Unmarshal(vals[2], &off) != nil {
		return LiveDelta{}, fmt.Errorf("%w: offset is not a number", ErrLiveDelta)
	}
	if d.Offset, err = off.Int64(); err != nil || d.Offset < 0 || d.Offset > 1<<53 {
		return LiveDelta{}, fmt.Errorf("%w: offset %s is not an integer from 0 to 2^53", ErrLiveDelta, off)
	}
	if d.Delta, ok = jsonlex.StringOf(vals[3]); !ok || d.Delta == "" {
		return LiveDelta{}, fmt.Errorf("%w: delta is not a non-empty string", ErrLiveDelta)
	}
	if len(d.Delta) > MaxLiveDelta {
		return LiveDelta{}, fmt.Errorf("%w: delta of %d bytes exceeds %d", ErrLiveDelta, len(d.Delta), MaxLiveDelta)
	}
	return d, nil
}

// utf16Len is the length of s in UTF-16 code units.
func utf16Len(s string) int64 {
	var n int64
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += int64(utf16.RuneLen(r))
		i += size
	}
	return n
}

// cutUTF16 returns the byte index in s after n UTF-16 code units, and false
// when n falls inside a surrogate pair or past the end.
func cutUTF16(s string, n int64) (int, bool) {
	var u int64
	for i := 0; i < len(s); {
		if u == n {
			return i, true
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		u += int64(utf16.RuneLen(r))
		i += size
	}
	return len(s), u == n
}

// LiveEmitter turns the reducer's changes into live deltas: each streamed
// piece of a text or reasoning part, with the offset the part's text had
// before it. Not safe for concurrent use (the runner's goroutine feeds it).
type LiveEmitter struct {
	parts map[string]*liveOffset // by part id
}

type liveOffset struct {
	bytes int    // length of the text already sent, in bytes
	units int64  // the same in UTF-16 code units
	sum   uint64 // FNV-1a of those bytes, to tell a part that grew from one rewritten
}

// fnv1a continues the FNV-1a hash h over s.
func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

const fnvOffset = 14695981039346656037

// NewLiveEmitter returns an emitter with no part known.
func NewLiveEmitter() *LiveEmitter { return &LiveEmitter{parts: map[string]*liveOffset{}} }

// Observe returns the live deltas of events: a MessagePartDelta of field
// "text" becomes one at the part's current end; a text or reasoning part
// that grew (its first piece, a part written whole) gives what was added.
// A part whose text changed otherwise (a final that differs) only moves the
// offset: readers take it from the stored version. A completed part is
// forgotten, so the state held is that of the open parts.
func (e *LiveEmitter) Observe(events []mapper.BusEvent) []LiveDelta {
	var out []LiveDelta
	for _, ev := range events {
		switch x := ev.(type) {
		case *mapper.MessagePartDelta:
			if x.Field != "text" {
				continue
			}
			o := e.parts[x.PartID]
			if o == nil {
				continue // its part was never seen whole: the stored version will tell
			}
			if len(x.Delta) <= MaxLiveDelta {
				out = append(out, LiveDelta{MessageID: x.MessageID, PartID: x.PartID, Offset: o.units, Delta: x.Delta})
			}
			o.bytes += len(x.Delta)
			o.units += utf16Len(x.Delta)
			o.sum = fnv1a(o.sum, x.Delta)
		case *mapper.MessagePartUpdated:
			var text string
			var done bool
			switch p := x.Part.(type) {
			case *mapper.TextPart:
				text, done = p.Text, p.Time != nil && p.Time.End != nil
			case *mapper.ReasoningPart:
				text, done = p.Text, p.Time.End != nil
			default:
				continue
			}
			b := x.Part.Base()
			o := e.parts[b.ID]
			if o == nil {
				o = &liveOffset{sum: fnvOffset}
				e.parts[b.ID] = o
			}
			grew := len(text) > o.bytes && fnv1a(fnvOffset, text[:o.bytes]) == o.sum
			if grew && len(text)-o.bytes <= MaxLiveDelta {
				out = append(out, LiveDelta{MessageID: b.MessageID, PartID: b.ID, Offset: o.units, Delta: text[o.bytes:]})
			}
			if grew {
				o.sum = fnv1a(o.sum, text[o.bytes:])
			} else {
				o.sum = fnv1a(fnvOffset, text)
			}
			o.bytes, o.units = len(text), utf16Len(text)
			if done {
				delete(e.parts, b.ID)
			}
		}
	}
	return out
}

// LiveOutcome says what LiveText.Apply did with a delta.
type LiveOutcome int

// Outcomes of LiveText.Apply.
const (
	// LiveApplied: the delta extended the part (all of it, or the part of
	// it beyond what the part already had).
	LiveApplied LiveOutcome = iota
	// LiveDuplicate: the part already holds the delta's text (a repeat, or
	// a delta older than a stored version): nothing changed.
	LiveDuplicate
	// LiveGap: the delta starts past the part's end (a delta was missed,
	// or the part is not known yet): nothing changed; the reader waits for
	// the next stored version.
	LiveGap
	// LiveConflict: the delta overlaps the part's text with different
	// text: nothing changed; the stored version decides.
	LiveConflict
)

// LiveText is a reader's in-memory text of the parts that stream: stored
// versions set it, live deltas extend it in between. Not safe for
// concurrent use.
type LiveText struct {
	parts map[[2]string]*livePart
}

type livePart struct {
	text  string
	units int64
}

// NewLiveText returns an empty LiveText.
func NewLiveText() *LiveText { return &LiveText{parts: map[[2]string]*livePart{}} }

// Stored records the text of a part from a stored version (the
// authoritative copy). Live text that already went past it and begins with
// it is kept, since the stored version is older than those deltas;
// anything else is replaced. It returns the part's text now.
func (l *LiveText) Stored(messageID, partID, text string) string {
	k := [2]string{messageID, partID}
	p := l.parts[k]
	if p != nil && len(p.text) > len(text) && p.text[:len(text)] == text {
		return p.text
	}
	l.parts[k] = &livePart{text: text, units: utf16Len(text)}
	return text
}

// Forget drops a part (its message was completed: no delta follows).
func (l *LiveText) Forget(messageID, partID string) { delete(l.parts, [2]string{messageID, partID}) }

// Text returns the part's current text and whether the part is known.
func (l *LiveText) Text(messageID, partID string) (string, bool) {
	p := l.parts[[2]string{messageID, partID}]
	if p == nil {
		return "", false
	}
	return p.text, true
}

// Apply folds one delta into the part's text. Deltas may arrive twice or
// out of order (a reconnection): a delta at the end is appended; one that
// ends at or before the end and matches is a duplicate; one that overlaps
// the end and matches adds its new tail; one that starts past the end is a
// gap (a delta is missing); a delta of an unknown part is a gap unless it
// starts at 0. It returns the outcome and the part's text after it.
func (l *LiveText) Apply(d LiveDelta) (LiveOutcome, string) {
	k := [2]string{d.MessageID, d.PartID}
	p := l.parts[k]
	if p == nil {
		if d.Offset != 0 {
			return LiveGap, ""
		}
		p = &livePart{}
		l.parts[k] = p
	}
	switch {
	case d.Offset > p.units:
		return LiveGap, p.text
	case d.Offset == p.units:
		p.text += d.Delta
		p.units += utf16Len(d.Delta)
		return LiveApplied, p.text
	}
	// The delta starts inside the text: compare what overlaps.
	at, ok := cutUTF16(p.text, d.Offset)
	if !ok {
		return LiveConflict, p.text
	}
	have := p.text[at:]
	if len(have) >= len(d.Delta) {
		if have[:len(d.Delta)] == d.Delta {
			return LiveDuplicate, p.text
		}
		return LiveConflict, p.text
	}
	if d.Delta[:len(have)] != have {
		return LiveConflict, p.text
	}
	tail := d.Delta[len(have):]
	p.text += tail
	p.units += utf16Len(tail)
	return LiveApplied, p.text
}

// Keys returns the [messageID, partID] of every part l holds, in no order.
func (l *LiveText) Keys() [][2]string {
	out := make([][2]string, 0, len(l.parts))
	for k := range l.parts {
		out = append(out, k)
	}
	return out
}
