package trafficlog

import (
	"errors"
	"fmt"
	"io"

	"github.com/happy-dev/happy/internal/linereader"
)

// LineError is a traffic log line Reader.Next could not use. Err wraps one
// of Decode's sentinel errors, or ErrOversize.
type LineError struct {
	Line int64  // 1-based line number
	Raw  []byte // at most the first 512 bytes of the line
	Err  error
}

// Error implements error: "trafficlog: line 12: …".
func (e *LineError) Error() string { return fmt.Sprintf("trafficlog: line %d: %v", e.Line, e.Err) }

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// ErrOversize says a line was longer than the reader's MaxLine; it was
// skipped without being buffered.
var ErrOversize = errors.New("trafficlog: line longer than the limit")

// Reader reads a traffic log record by record. A line that is not a record
// is reported as a *LineError and reading goes on with the next line.
type Reader struct {
	lr   *linereader.Reader
	tail bool // the incomplete last line was reported
}

// NewReader reads records from r; opts bounds the line length (see
// linereader.Options).
func NewReader(r io.Reader, opts linereader.Options) (*Reader, error) {
	lr, err := linereader.New(r, opts)
	if err != nil {
		return nil, fmt.Errorf("trafficlog: %w", err)
	}
	return &Reader{lr: lr}, nil
}

// Next returns the next record and its line number. Blank lines are passed
// over. At the end it returns io.EOF, and a last line without its newline
// (a log cut mid-write) as a *LineError wrapping ErrSyntax first. Errors:
// *LineError for a bad line (keep reading), or the underlying reader's
// error (wrapped; stop).
func (r *Reader) Next() (Record, int64, error) {
	for {
		l, err := r.lr.Next()
		if errors.Is(err, io.EOF) {
			if !r.tail && len(trimSpace(r.lr.Pending())) > 0 {
				raw := append([]byte(nil), linereader.Prefix(r.lr.Pending(), 512)...)
				n := r.lr.LineNumber() + 1
				r.tail = true
				return Record{}, n, &LineError{Line: n, Raw: raw, Err: fmt.Errorf("%w: incomplete last line", ErrSyntax)}
			}
			return Record{}, 0, io.EOF
		}
		if err != nil {
			return Record{}, 0, err
		}
		if l.Oversize {
			return Record{}, l.Number, &LineError{Line: l.Number, Raw: append([]byte(nil), l.Data...),
				Err: fmt.Errorf("%w: %d bytes", ErrOversize, l.Size)}
		}
		if len(trimSpace(l.Data)) == 0 {
			continue
		}
		rec, err := Decode(l.Data)
		if err != nil {
			return Record{}, l.Number, &LineError{Line: l.Number, Raw: append([]byte(nil), linereader.Prefix(l.Data, 512)...), Err: err}
		}
		return rec, l.Number, nil // Decode copies msg out of the line buffer
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
