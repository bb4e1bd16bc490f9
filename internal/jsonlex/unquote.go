package jsonlex

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Unquote decodes a raw JSON string, quotes included, exactly as
// encoding/json does: escapes resolved, a lone or broken surrogate and
// invalid UTF-8 replaced by U+FFFD. Errors: not a string, a truncated or
// unknown escape (wrapping ErrSyntax).
func Unquote(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", fmt.Errorf("%w: not a string", ErrSyntax)
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	return unescape(body)
}

// unescape decodes the body of a JSON string (between the quotes).
func unescape(body []byte) (string, error) {
	// Built in a buffer of the body's size (the result is never longer)
	// that becomes the string without a copy: nothing writes to it after.
	buf := make([]byte, len(body))
	n := 0
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			if i+1 >= len(body) {
				return "", fmt.Errorf("%w: truncated escape in string", ErrSyntax)
			}
			if e := body[i+1]; e != 'u' {
				r, ok := simpleEscape(e)
				if !ok {
					return "", fmt.Errorf("%w: invalid escape \\%c in string", ErrSyntax, e)
				}
				buf[n] = r
				n++
				i += 2
				continue
			}
			r, size, ok := unicodeEscape(body[i:])
			if !ok {
				return "", fmt.Errorf("%w: invalid \\u escape in string", ErrSyntax)
			}
			// A rune takes at most 4 bytes, its escape at least 6.
			n += utf8.EncodeRune(buf[n:], r)
			i += size
		case c < utf8.RuneSelf:
			// A run of plain ASCII, copied as it is scanned, eight bytes at
			// a time while it lasts (runs between escapes are often a few
			// bytes: a copy call each would cost more).
			buf[n] = c
			n++
			i++
			for len(body)-i >= 8 && len(buf)-n >= 8 {
				w := binary.LittleEndian.Uint64(body[i:])
				if b := w ^ (ones * '\\'); (w|(b-ones)&^b)&highs != 0 {
					break
				}
				binary.LittleEndian.PutUint64(buf[n:], w)
				n += 8
				i += 8
			}
			for i < len(body) && n < len(buf) {
				c = body[i]
				if c == '\\' || c >= utf8.RuneSelf {
					break
				}
				buf[n] = c
				n++
				i++
			}
		default:
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				// U+FFFD takes 3 bytes where the invalid byte took 1:
				// the buffer grows (rare: invalid UTF-8).
				buf = growTo(buf, n+utf8.RuneLen(utf8.RuneError)+len(body)-i-1)
				n += utf8.EncodeRune(buf[n:], utf8.RuneError)
			} else {
				n += copy(buf[n:], body[i:i+size])
			}
			i += size
		}
	}
	if n == 0 {
		return "", nil
	}
	return unsafe.String(&buf[0], n), nil
}

// growTo returns buf with a length of at least n, its contents kept.
func growTo(buf []byte, n int) []byte {
	if n <= len(buf) {
		return buf
	}
	nb := make([]byte, max(n, 2*len(buf)))
	copy(nb, buf)
	return nb
}

// simpleEscape maps the byte after a backslash (all but 'u') to what it
// stands for.
func simpleEscape(e byte) (byte, bool) {
	switch e {
	case '"', '\\', '/':
		return e, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// unicodeEscape decodes the \uXXXX at the start of b, with the low half
// that follows a high surrogate, and returns the rune and the bytes used.
// A surrogate without its other half is U+FFFD (and uses 6 bytes).
func unicodeEscape(b []byte) (rune, int, bool) {
	r, ok := hex4(b[2:])
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	rest := b[6:]
	if len(rest) > 1 && rest[0] == '\\' && rest[1] == 'u' {
		if r2, ok := hex4(rest[2:]); ok {
			if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
				return dec, 12, true
			}
		}
	}
	return utf8.RuneError, 6, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
