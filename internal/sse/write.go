package sse

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrUnencodable is wrapped by AppendFrame's errors: the value cannot be
// written so that Reader gives it back unchanged.
var ErrUnencodable = errors.New("sse: value cannot be encoded")

// AppendFrame appends one frame to b and returns the extended slice:
// "event: <event>\n" when event is not empty, "id: <id>\n" when id is not
// empty, one "data: <line>\n" per "\n"-separated line of data, and the blank
// line that ends the frame. Reader returns Event, ID and Data exactly as
// given.
//
// Errors (b is then returned unchanged) wrap ErrUnencodable: event or id
// with CR or LF, id with U+0000, data with CR (the reader would turn it into
// LF), any of them not valid UTF-8.
func AppendFrame(b []byte, event, id, data string) ([]byte, error) {
	switch {
	case strings.ContainsAny(event, "\r\n") || !utf8.ValidString(event):
		return b, fmt.Errorf("%w: event type %q has a line break or is not UTF-8", ErrUnencodable, event)
	case strings.ContainsAny(id, "\r\n\x00") || !utf8.ValidString(id):
		return b, fmt.Errorf("%w: id %q has a line break or U+0000 or is not UTF-8", ErrUnencodable, id)
	case strings.IndexByte(data, '\r') >= 0 || !utf8.ValidString(data):
		return b, fmt.Errorf("%w: data has a CR or is not UTF-8", ErrUnencodable)
	}
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	for {
		line, rest, more := strings.Cut(data, "\n")
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(b, '\n'), nil
}

// AppendRetry appends a retry-only frame ("retry: <ms>\n\n"): it sets the
// reconnection delay of a standard EventSource and is read and discarded by
// other readers. A negative ms is written as 0.
func AppendRetry(b []byte, ms int64) []byte {
	b = append(b, "retry: "...)
	b = strconv.AppendInt(b, max(ms, 0), 10)
	return append(b, "\n\n"...)
}

// AppendComment appends a comment line (": <text>\n"), which readers ignore;
// servers send one as a heartbeat. Line breaks in text become spaces.
func AppendComment(b []byte, text string) []byte {
	b = append(b, ": "...)
	b = append(b, strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(text)...)
	return append(b, '\n')
}
