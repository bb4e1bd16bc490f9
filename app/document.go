package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// ErrRelayRead is wrapped by WriteTranscriptJSON's errors that come from
// reading the relay (its other errors are the writer's or the document's).
var ErrRelayRead = errors.New("read the session from the relay")

// WriteTranscriptJSON writes o's transcript document to w as `happy log
// --json` prints it: the canonical document (mapper.EncodeTranscript)
// indented by two spaces, as encoding/json's Encoder with SetIndent("",
// "  ") writes it, and a newline. It streams: a first read of every row
// keeps which row wins for each message (session.NewReadbackIndex), a
// second read writes the messages from those rows
// (session.Readback.WriteDocument), so what it holds does not grow with
// the session's versions. It returns the document without its messages
// (its sessions, todos and dropped records, for warnings). Errors: the
// relay's (wrapping ErrRelayRead), w's, and the document's
// (session.Readback.WriteDocument).
func WriteTranscriptJSON(ctx context.Context, conn *Conn, o Opened, w io.Writer) (mapper.Transcript, error) {
	rb := withState(o, session.NewReadbackIndex(fallbackOf(o)))
	if _, _, err := ReadTranscript(ctx, conn, o, ReadOptions{Into: rb}); err != nil {
		return mapper.Transcript{}, fmt.Errorf("%w: %w", ErrRelayRead, err)
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	iw := &indentWriter{w: bw}
	rows := func(after int64, fn func(int64, string, func() ([]byte, error)) error) error {
		for {
			page, err := conn.API.FetchMessages(ctx, o.Info.ID, after, relay.MaxFetchLimit)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrRelayRead, err)
			}
			for _, m := range page.Messages {
				after = max(after, m.Seq)
				if err := fn(m.Seq, m.LocalIDOrEmpty(), func() ([]byte, error) { return decrypt(o.Cipher, m.Content.C) }); err != nil {
					return err
				}
			}
			if !page.HasMore || len(page.Messages) == 0 {
				return nil
			}
		}
	}
	if err := rb.WriteDocument(iw, rows); err != nil {
		return rb.Transcript(), err
	}
	if _, err := bw.WriteString("\n"); err != nil {
		return rb.Transcript(), err
	}
	return rb.Transcript(), bw.Flush()
}

// indentWriter indents compact JSON written to it in pieces as
// encoding/json's Indent does with no prefix and two spaces: a newline and
// the depth's indent after an opening brace or bracket (none inside an
// empty one), after a comma, and before a closing one; ": " after a colon;
// strings copied as they are; whitespace outside strings dropped.
type indentWriter struct {
	w     *bufio.Writer
	depth int
	// need: a brace or bracket opened and its first value's line not
	// begun (an empty one closes on the same line).
	need, inString, escaped bool
	err                     error // the first error of w
}

func (iw *indentWriter) newline() {
	iw.byte('\n')
	for range iw.depth {
		iw.byte(' ')
		iw.byte(' ')
	}
}

func (iw *indentWriter) byte(c byte) {
	if err := iw.w.WriteByte(c); err != nil && iw.err == nil {
		iw.err = err
	}
}

// Write fails with the first error of the writer under it.
func (iw *indentWriter) Write(p []byte) (int, error) {
	if iw.err != nil {
		return 0, iw.err
	}
	for _, c := range p {
		if iw.inString {
			iw.byte(c)
			switch {
			case iw.escaped:
				iw.escaped = false
			case c == '\\':
				iw.escaped = true
			case c == '"':
				iw.inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if iw.need && c != '}' && c != ']' {
			iw.need = false
			iw.depth++
			iw.newline()
		}
		switch c {
		case '"':
			iw.inString = true
			iw.byte(c)
		case '{', '[':
			iw.need = true
			iw.byte(c)
		case ',':
			iw.byte(c)
			iw.newline()
		case ':':
			iw.byte(':')
			iw.byte(' ')
		case '}', ']':
			if iw.need {
				iw.need = false
			} else {
				iw.depth--
				iw.newline()
			}
			iw.byte(c)
		default:
			iw.byte(c)
		}
	}
	if iw.err != nil {
		return 0, iw.err
	}
	return len(p), nil
}
