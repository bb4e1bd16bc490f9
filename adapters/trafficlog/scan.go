package trafficlog

import (
	"bytes"
	"errors"
	"io"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// Scan reads a whole traffic log (one {"t","dir","msg"} object per line,
// lines of any length). For each non-blank line, in order, fn gets the
// 1-based line number and either the decoded record (err nil) or Decode's
// error together with the line's bytes (valid only during the call).
// Unlike Reader, a last line without its newline is decoded like any other.
// Only a read error of r is returned.
func Scan(r io.Reader, fn func(line int64, rec Record, err error, data []byte)) error {
	lr, _ := linereader.New(r, linereader.Options{}) // zero options are valid
	for {
		l, err := lr.Next()
		data := l.Data
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			data = lr.Pending()
			l.Number = lr.LineNumber() + 1
		default:
			return err
		}
		if len(bytes.TrimSpace(data)) > 0 {
			rec, derr := Decode(data)
			fn(l.Number, rec, derr, data)
		}
		if err != nil {
			return nil
		}
	}
}

// DropReason is the reason a Dropped record gives for an error of Decode:
// unparseable JSON, not an object, an unknown direction, else an invalid
// field.
func DropReason(err error) agent.DropReason {
	switch {
	case errors.Is(err, ErrSyntax):
		return agent.DropUnparseableJSON
	case errors.Is(err, ErrNotObject):
		return agent.DropNotAnObject
	case errors.Is(err, ErrUnknownDir):
		return agent.DropUnknownType
	}
	return agent.DropInvalidField
}
