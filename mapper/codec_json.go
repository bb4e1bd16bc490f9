package mapper

// Low-level JSON reading and writing for the transcript codec.
//
// Reading: a document is checked once with json.Valid, then split into
// object members and array elements by a small scanner that trusts that
// validity. Keeping members as raw byte slices lets the decoder check
// presence, JSON type, duplicates and unknown members itself, and name the
// exact path of every refusal.
//
// Writing: a hand-written appender produces the canonical form: members in
// a fixed order per type, map keys sorted, no insignificant whitespace, no
// HTML escaping, invalid UTF-8 replaced by U+FFFD, numbers in free-form
// objects written with their exact text.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
)

// jsonKind is the JSON type of a raw value, read from its first byte.
type jsonKind byte

const (
	kindInvalid jsonKind = iota
	kindObject
	kindArray
	kindString
	kindNumber
	kindBool
	kindNull
)

func (k jsonKind) String() string {
	switch k {
	case kindObject:
		return "an object"
	case kindArray:
		return "an array"
	case kindString:
		return "a string"
	case kindNumber:
		return "a number"
	case kindBool:
		return "a boolean"
	case kindNull:
		return "null"
	}
	return "nothing"
}

func kindOf(raw []byte) jsonKind {
	if len(raw) == 0 {
		return kindInvalid
	}
	switch raw[0] {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return kindNumber
	}
	return kindInvalid
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at data[i].
// data must be valid JSON (checked by the caller with json.Valid).
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	default:
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just past the string that starts at data[i]:
// the first quote not escaped by an odd run of backslashes.
func skipString(data []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return len(data)
		}
		q := i + j
		n := 0
		for k := q - 1; k >= i && data[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// member is one member of a JSON object: its key and its raw value.
type member struct {
	key string
	val []byte
}

// splitObject splits a valid JSON object into its members, in order.
func splitObject(raw []byte) ([]member, error) {
	if kindOf(raw) != kindObject {
		return nil, errors.New("not an object")
	}
	var out []member
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == '}' {
		return out, nil
	}
	for i < len(raw) {
		end := skipString(raw, i)
		key, err := unquote(raw[i:end])
		if err != nil {
			return nil, err
		}
		i = skipSpace(raw, end)
		i = skipSpace(raw, i+1) // ':'
		vend := skipValue(raw, i)
		out = append(out, member{key: key, val: raw[i:vend]})
		i = skipSpace(raw, vend)
		if i >= len(raw) || raw[i] == '}' {
			break
		}
		i = skipSpace(raw, i+1) // ','
	}
	return out, nil
}

// splitArray splits a valid JSON array into its raw elements.
func splitArray(raw []byte) [][]byte {
	var out [][]byte
	i := skipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return out
	}
	for i < len(raw) {
		end := skipValue(raw, i)
		out = append(out, raw[i:end])
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] == ']' {
			break
		}
		i = skipSpace(raw, i+1)
	}
	return out
}

// unquote decodes a raw JSON string. The fast path takes the bytes as they
// are; escapes and invalid UTF-8 go through encoding/json, which replaces
// invalid sequences with U+FFFD.
func unquote(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", errors.New("not a string")
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), nil
	}
	return unescape(body)
}

// unescape decodes the body of a JSON string (between the quotes) as
// encoding/json does: escapes resolved, a lone or broken surrogate and
// invalid UTF-8 replaced by U+FFFD.
func unescape(body []byte) (string, error) {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		switch {
		case c == '\\':
			if i+1 >= len(body) {
				return "", errors.New("truncated escape in string")
			}
			switch e := body[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(body[i+2:])
				if !ok {
					return "", errors.New("invalid \\u escape in string")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					r2, ok := rune(0), false
					if i+1 < len(body) && body[i] == '\\' && body[i+1] == 'u' {
						r2, ok = hex4(body[i+2:])
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return "", fmt.Errorf("invalid escape \\%c in string", e)
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, body[i:i+size]...)
			}
			i += size
		}
	}
	return string(out), nil
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

// parseAny turns a valid raw JSON value into the free-form representation
// used by Object: map[string]any, []any, string, json.Number, bool or nil.
// Duplicate keys in a free-form object keep the last value, as
// JavaScript's JSON.parse does. One pass over the bytes, whatever the
// nesting.
func parseAny(raw []byte) (any, error) {
	v, _, err := parseValue(raw, 0)
	return v, err
}

// parseValue parses the valid JSON value at data[i] and returns it with the
// index just past it.
func parseValue(data []byte, i int) (any, int, error) {
	if i >= len(data) {
		return nil, i, errors.New("unexpected end of JSON")
	}
	switch data[i] {
	case '{':
		m := map[string]any{}
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == '}' {
			return m, i + 1, nil
		}
		for i < len(data) {
			end := skipString(data, i)
			key, err := unquote(data[i:end])
			if err != nil {
				return nil, i, err
			}
			i = skipSpace(data, end)
			i = skipSpace(data, i+1) // ':'
			v, next, err := parseValue(data, i)
			if err != nil {
				return nil, i, err
			}
			m[key] = v
			i = skipSpace(data, next)
			if i >= len(data) || data[i] == '}' {
				return m, i + 1, nil
			}
			i = skipSpace(data, i+1) // ','
		}
		return m, i, nil
	case '[':
		a := []any{}
		i = skipSpace(data, i+1)
		if i < len(data) && data[i] == ']' {
			return a, i + 1, nil
		}
		for i < len(data) {
			v, next, err := parseValue(data, i)
			if err != nil {
				return nil, i, err
			}
			a = append(a, v)
			i = skipSpace(data, next)
			if i >= len(data) || data[i] == ']' {
				return a, i + 1, nil
			}
			i = skipSpace(data, i+1) // ','
		}
		return a, i, nil
	case '"':
		end := skipString(data, i)
		s, err := unquote(data[i:end])
		return s, end, err
	case 't':
		return true, i + 4, nil
	case 'f':
		return false, i + 5, nil
	case 'n':
		return nil, i + 4, nil
	}
	end := skipValue(data, i)
	if kindOf(data[i:end]) != kindNumber {
		return nil, end, fmt.Errorf("unexpected JSON %q", truncate(string(data[i:end]), 32))
	}
	return json.Number(data[i:end]), end, nil
}

// DecodeObject decodes a JSON object (tool input, metadata) into an Object,
// keeping every number's exact text as a json.Number. Anything but an
// object is refused: a JSON array in particular is never turned into an
// object (seed 002: tool arguments that are an array are refused, because
// [1,2] shown as {"0":1,"1":2} misrepresents what a person authorises).
// The error wraps ErrInvalid.
func DecodeObject(raw []byte) (agent.Object, error) {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return nil, &FieldError{Reason: agent.DropUnparseableJSON, Msg: "not valid JSON"}
	}
	if k := kindOf(raw); k != kindObject {
		return nil, &FieldError{Reason: agent.DropNotAnObject, Msg: "want an object, got " + k.String()}
	}
	v, err := parseAny(raw)
	if err != nil {
		return nil, &FieldError{Reason: agent.DropInvalidField, Msg: err.Error()}
	}
	return v.(map[string]any), nil
}

// EncodeObject writes an Object in canonical form: keys sorted, numbers as
// given, no HTML escaping. A nil Object is written as {}.
func EncodeObject(o agent.Object) ([]byte, error) {
	var e encoder
	if err := e.object(o); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// parseInt reads a JSON number that must be an integer in int64 range.
func parseInt(raw []byte) (int64, error) {
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err == nil {
		return v, nil
	}
	if errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("integer %s is out of range", truncate(string(raw), 32))
	}
	return 0, fmt.Errorf("want an integer, got %s", truncate(string(raw), 32))
}

// parseFloat reads a JSON number as a finite float64.
func parseFloat(raw []byte) (float64, error) {
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("number %s is out of range", truncate(string(raw), 32))
	}
	return v, nil
}

// isNumber reports whether s is a JSON number literal.
func isNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	switch {
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// encoder appends canonical JSON to buf.
type encoder struct {
	buf []byte
}

// sep writes the comma that separates this member or element from the
// previous one: none right after an opening brace or bracket.
func (e *encoder) sep() {
	if n := len(e.buf); n > 0 && e.buf[n-1] != '{' && e.buf[n-1] != '[' {
		e.buf = append(e.buf, ',')
	}
}

func (e *encoder) key(k string) {
	e.sep()
	e.str(k)
	e.buf = append(e.buf, ':')
}

const hexDigits = "0123456789abcdef"

// str writes a JSON string: control characters, quote and backslash
// escaped, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD, nothing else.
func (e *encoder) str(s string) {
	b := append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	e.buf = append(b, '"')
}

func (e *encoder) int(v int64) { e.buf = strconv.AppendInt(e.buf, v, 10) }

// float writes a float64 the way encoding/json does (shortest text that
// reads back to the same value; exponent form below 1e-6 and from 1e21).
func (e *encoder) float(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("cannot encode %v as JSON", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(e.buf, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	e.buf = b
	return nil
}

func (e *encoder) bool(v bool) {
	if v {
		e.buf = append(e.buf, "true"...)
	} else {
		e.buf = append(e.buf, "false"...)
	}
}

// object writes a free-form object with sorted keys; nil is written as {}.
func (e *encoder) object(o map[string]any) error {
	e.buf = append(e.buf, '{')
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		e.key(k)
		if err := e.any(o[k]); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) strings(a []string) {
	e.buf = append(e.buf, '[')
	for _, s := range a {
		e.sep()
		e.str(s)
	}
	e.buf = append(e.buf, ']')
}

// any writes a free-form value. Values of types outside the representation
// parseAny produces (structs, typed maps and slices) are converted through
// encoding/json and parseAny first, so their encoding is as canonical as
// anything read back.
func (e *encoder) any(v any) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.bool(x)
	case string:
		e.str(x)
	case json.Number:
		if !isNumber(string(x)) {
			return fmt.Errorf("invalid number literal %q", truncate(string(x), 32))
		}
		e.buf = append(e.buf, x...)
	case float64:
		return e.float(x)
	case float32:
		return e.float(float64(x))
	case int:
		e.int(int64(x))
	case int64:
		e.int(x)
	case int32:
		e.int(int64(x))
	case uint64:
		e.buf = strconv.AppendUint(e.buf, x, 10)
	case map[string]any:
		return e.object(x)
	case []any:
		e.buf = append(e.buf, '[')
		for i, el := range x {
			e.sep()
			if err := e.any(el); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		e.buf = append(e.buf, ']')
	case []string:
		e.strings(x)
	case json.RawMessage:
		raw := bytes.TrimSpace(x)
		if !json.Valid(raw) {
			return errors.New("invalid raw JSON value")
		}
		p, err := parseAny(raw)
		if err != nil {
			return err
		}
		return e.any(p)
	default:
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && rv.IsNil() {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		p, err := parseAny(raw)
		if err != nil {
			return err
		}
		return e.any(p)
	}
	return nil
}

// raw writes an opaque JSON value in canonical form (as a free-form value:
// sorted keys, numbers as given).
func (e *encoder) raw(r json.RawMessage) error {
	if kindOf(bytes.TrimSpace(r)) == kindNull {
		return errors.New("null is not a value here; leave the field empty")
	}
	return e.any(r)
}

// truncate cuts s to at most n bytes on a UTF-8 boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
