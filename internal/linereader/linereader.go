// Package linereader reads newline-delimited records (JSONL, line-delimited
// JSON-RPC, traffic logs) incrementally from an io.Reader.
//
// Properties every decoder of the project relies on (docs/ARCHITECTURE.md "Streams are
// read incrementally"):
//
//   - A partial line is held across reads: when the underlying reader reports
//     io.EOF in the middle of a line, Next returns io.EOF and keeps the bytes;
//     a later Next (after the file grew, for a tailer) continues the line.
//   - Lines may have any length: there is no fixed scanner limit unless the
//     caller sets one with MaxLine, and then an oversized line is not refused
//     silently: it is reported once as a Line with Oversize set, its size and
//     a prefix, and the reader continues with the next line without buffering
//     the rest of the oversized one.
//   - Lines are split on the byte 0x0A only. That byte never occurs inside a
//     multi-byte UTF-8 sequence, so a sequence is never split, whatever the
//     read sizes; U+2028 and U+2029 are ordinary characters. One trailing
//     carriage return (CRLF) is removed.
//   - Work is linear in the input: each byte is scanned for a newline once,
//     and the buffer grows by doubling.
//   - Every line carries its byte offset and number, and Offset reports the
//     position just after the last complete line, so a tailer can save it and
//     resume with NewAt without re-reading the file.
package linereader

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ErrNegativeLimit is returned by New when MaxLine is negative.
var ErrNegativeLimit = errors.New("linereader: negative line limit")

// DefaultReadSize is the size of each read from the underlying reader.
const DefaultReadSize = 64 << 10

// PrefixSize is how many bytes of an oversized line are kept in Line.Data
// for diagnosis.
const PrefixSize = 512

// Line is one newline-terminated record.
type Line struct {
	// Data is the line without its terminating "\n" (and without one "\r"
	// before it). It aliases the reader's buffer: it is valid until the next
	// call to Next. For an Oversize line it holds at most PrefixSize bytes,
	// cut on a UTF-8 boundary.
	Data []byte
	// Number is the 1-based line number.
	Number int64
	// Offset is the byte offset of the line's first byte in the stream.
	Offset int64
	// End is the byte offset just after the line's "\n".
	End int64
	// Size is the length of the whole line in bytes, without the
	// terminator. It equals len(Data) unless Oversize.
	Size int64
	// Oversize reports that the line was longer than the reader's MaxLine
	// and was skipped; only a prefix is in Data.
	Oversize bool
	// Limit is the reader's MaxLine (bytes) for an Oversize line, 0
	// otherwise.
	Limit int
}

// OversizeDetail says why an Oversize line was skipped, for a Dropped
// record's detail: "line of <Size> bytes is over the reader's limit of
// <Limit> bytes; skipped". It is "" for a line that is not Oversize.
func (l Line) OversizeDetail() string {
	if !l.Oversize {
		return ""
	}
	return fmt.Sprintf("line of %d bytes is over the reader's limit of %d bytes; skipped", l.Size, l.Limit)
}

// Options configure a Reader. The zero value reads lines of any length.
type Options struct {
	// MaxLine is the largest line (bytes, without terminator) the reader
	// buffers; 0 means no limit. Longer lines are reported with Oversize
	// and not buffered beyond MaxLine bytes.
	MaxLine int
	// ReadSize is the size of each read; 0 means DefaultReadSize.
	ReadSize int
}

// Reader splits an io.Reader into lines. It is not safe for concurrent use.
type Reader struct {
	r        io.Reader
	max      int
	readSize int

	buf    []byte
	start  int   // first unconsumed byte in buf
	scan   int   // bytes in buf[start:scan] are known to hold no '\n'
	offset int64 // stream offset of buf[start]
	lineNo int64 // number of the last line returned

	// discarding is set while skipping the rest of an oversized line.
	discarding  bool
	discardLine Line   // the line being skipped (Offset, Number, prefix)
	prefix      []byte // its first bytes
	discardCR   bool   // the last skipped byte was '\r'
	err         error  // sticky error from the underlying reader (not io.EOF)
}

// New returns a Reader over r starting at offset 0, line 0.
func New(r io.Reader, opts Options) (*Reader, error) {
	return NewAt(r, 0, 0, opts)
}

// NewAt returns a Reader over r whose first byte is at stream offset
// offset and follows line number lineNo (the number of complete lines
// before offset). Use it to resume a tail from Reader.Offset and
// Reader.LineNumber saved earlier.
func NewAt(r io.Reader, offset, lineNo int64, opts Options) (*Reader, error) {
	if opts.MaxLine < 0 {
		return nil, ErrNegativeLimit
	}
	rs := opts.ReadSize
	if rs <= 0 {
		rs = DefaultReadSize
	}
	return &Reader{r: r, max: opts.MaxLine, readSize: rs, offset: offset, lineNo: lineNo}, nil
}

// Offset is the stream offset just after the last complete line returned
// (or skipped): where a tailer resumes. Bytes of an incomplete tail are not
// included.
func (lr *Reader) Offset() int64 {
	if lr.discarding {
		return lr.discardLine.Offset
	}
	return lr.offset
}

// LineNumber is the number of the last line returned.
func (lr *Reader) LineNumber() int64 { return lr.lineNo }

// Pending returns the bytes of the incomplete line held after the last
// complete one (for a line being skipped as oversized: its prefix). The
// slice aliases the reader's buffer.
func (lr *Reader) Pending() []byte {
	if lr.discarding {
		return lr.prefix
	}
	return lr.buf[lr.start:]
}

// Rest returns the incomplete tail (a last line without its newline) as a
// Line numbered after the last complete one; ok is false when nothing is
// pending. A tail longer than MaxLine is Oversize (Data its prefix, Size
// the length so far, Limit set), so a caller at the end of the stream
// reports it as over the limit, not as a fragment that is not JSON. Data
// aliases the reader's buffer; End is 0 (the line has no end yet).
func (lr *Reader) Rest() (Line, bool) {
	if lr.discarding {
		l := lr.discardLine
		l.Data = lr.prefix
		return l, true
	}
	data := lr.buf[lr.start:]
	if len(data) == 0 {
		return Line{}, false
	}
	return Line{Data: data, Number: lr.lineNo + 1, Offset: lr.offset, Size: int64(len(data))}, true
}

// PendingSize is the length in bytes of the incomplete tail, including the
// part of an oversized line that was not buffered.
func (lr *Reader) PendingSize() int64 {
	if lr.discarding {
		return lr.discardLine.Size
	}
	return int64(len(lr.buf) - lr.start)
}

// Next returns the next complete line. It returns io.EOF when the
// underlying reader is exhausted; an incomplete last line is then kept
// (see Pending) and continued by a later call if more data arrives. Any
// other error from the underlying reader is returned wrapped, and again on
// every later call.
func (lr *Reader) Next() (Line, error) {
	for {
		if l, ok := lr.take(); ok {
			return l, nil
		}
		if lr.err != nil {
			return Line{}, lr.err
		}
		if err := lr.fill(); err != nil {
			if errors.Is(err, io.EOF) {
				return Line{}, io.EOF
			}
			lr.err = fmt.Errorf("linereader: read after offset %d: %w", lr.offset+int64(len(lr.buf)-lr.start), err)
			return Line{}, lr.err
		}
	}
}

// take returns a complete line from the buffer when there is one.
func (lr *Reader) take() (Line, bool) {
	if lr.discarding {
		chunk := lr.buf[lr.start:]
		i := bytes.IndexByte(chunk, '\n')
		if i < 0 {
			if len(chunk) > 0 {
				lr.discardCR = chunk[len(chunk)-1] == '\r'
			}
			lr.discardLine.Size += int64(len(chunk))
			lr.offset += int64(len(chunk))
			lr.buf = lr.buf[:0]
			lr.start, lr.scan = 0, 0
			return Line{}, false
		}
		if i > 0 {
			lr.discardCR = chunk[i-1] == '\r'
		}
		lr.discardLine.Size += int64(i)
		lr.offset += int64(i + 1)
		lr.start += i + 1
		lr.scan = lr.start
		l := lr.discardLine
		l.End = lr.offset
		if lr.discardCR {
			l.Size--
		}
		l.Data = lr.prefix
		lr.discarding = false
		lr.lineNo = l.Number
		return l, true
	}
	i := bytes.IndexByte(lr.buf[lr.scan:], '\n')
	if i < 0 {
		lr.scan = len(lr.buf)
		// One byte more than MaxLine is held when it is a '\r': it may be
		// the CR of a CRLF whose '\n' comes with the next read.
		if n := len(lr.buf) - lr.start; lr.max > 0 && n > lr.max && (n > lr.max+1 || lr.buf[len(lr.buf)-1] != '\r') {
			lr.startDiscard()
		}
		return Line{}, false
	}
	end := lr.scan + i
	data := lr.buf[lr.start:end]
	if n := len(data); n > 0 && data[n-1] == '\r' {
		data = data[:n-1]
	}
	if lr.max > 0 && len(data) > lr.max {
		// The whole oversized line is already buffered (one large read).
		l := Line{Number: lr.lineNo + 1, Offset: lr.offset, Size: int64(len(data)), Oversize: true, Limit: lr.max}
		l.Data = utf8Prefix(data, PrefixSize)
		lr.advance(end)
		l.End = lr.offset
		lr.lineNo = l.Number
		return l, true
	}
	l := Line{Data: data, Number: lr.lineNo + 1, Offset: lr.offset, Size: int64(len(data))}
	lr.advance(end)
	l.End = lr.offset
	lr.lineNo = l.Number
	return l, true
}

// advance consumes the buffer through the '\n' at index nl.
func (lr *Reader) advance(nl int) {
	lr.offset += int64(nl + 1 - lr.start)
	lr.start = nl + 1
	lr.scan = lr.start
}

// startDiscard switches to skipping an oversized line: its prefix is kept
// and the buffered bytes are released.
func (lr *Reader) startDiscard() {
	data := lr.buf[lr.start:]
	p := utf8Prefix(data, PrefixSize)
	if n := len(p); n == len(data) && n > 0 && p[n-1] == '\r' {
		// A last '\r' may be the CR of a CRLF, which is not line content.
		p = p[:n-1]
	}
	lr.prefix = append(lr.prefix[:0], p...)
	lr.discardLine = Line{Number: lr.lineNo + 1, Offset: lr.offset, Size: int64(len(data)), Oversize: true, Limit: lr.max}
	lr.discarding = true
	lr.discardCR = len(data) > 0 && data[len(data)-1] == '\r'
	lr.offset += int64(len(data))
	lr.buf = lr.buf[:0]
	lr.start, lr.scan = 0, 0
}

// fill reads more bytes into the buffer, compacting or growing it.
func (lr *Reader) fill() error {
	if lr.start > 0 && (lr.start == len(lr.buf) || lr.start >= cap(lr.buf)/2) {
		n := copy(lr.buf, lr.buf[lr.start:])
		lr.buf = lr.buf[:n]
		lr.scan -= lr.start
		lr.start = 0
	}
	if cap(lr.buf)-len(lr.buf) < lr.readSize {
		newCap := 2 * cap(lr.buf)
		if newCap < len(lr.buf)+lr.readSize {
			newCap = len(lr.buf) + lr.readSize
		}
		nb := make([]byte, len(lr.buf), newCap)
		copy(nb, lr.buf)
		lr.buf = nb
	}
	// Like bufio, tolerate a reader that returns (0, nil) a few times.
	for range maxEmptyReads {
		n, err := lr.r.Read(lr.buf[len(lr.buf):cap(lr.buf)])
		if n < 0 || n > cap(lr.buf)-len(lr.buf) {
			return fmt.Errorf("linereader: reader returned invalid count %d", n)
		}
		lr.buf = lr.buf[:len(lr.buf)+n]
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return io.ErrNoProgress
}

// maxEmptyReads is how many (0, nil) reads in a row are tolerated.
const maxEmptyReads = 100

// BufferCap is the capacity in bytes of the reader's buffer: about the
// longest line read so far plus one read, and never more than about
// MaxLine plus two reads when a limit is set (what skipping an oversized
// line costs).
func (lr *Reader) BufferCap() int { return cap(lr.buf) }

// utf8Prefix returns at most n bytes of b, cut so that no UTF-8 sequence is
// split.
func utf8Prefix(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	cut := n
	// Step back over continuation bytes to the start of the sequence that
	// straddles the cut, then drop it if it would be incomplete.
	for i := 0; i < utf8.UTFMax && cut > 0; i++ {
		if utf8.RuneStart(b[cut]) {
			break
		}
		cut--
	}
	return b[:cut]
}

// Prefix returns at most n bytes of b cut on a UTF-8 boundary (a sequence
// straddling the cut is left out whole). Decoders use it for the raw
// prefix of a Dropped record.
func Prefix(b []byte, n int) []byte { return utf8Prefix(b, n) }
