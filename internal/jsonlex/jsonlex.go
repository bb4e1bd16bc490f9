// Package jsonlex reads JSON (RFC 8259) at the byte level for the strict
// decoders: it tells a raw value's type from its first byte, skips and
// splits objects and arrays without decoding them, unquotes strings and
// turns a value into the free-form representation (map[string]any, []any,
// string, json.Number, bool, nil) with every number's exact text.
//
// Two levels of trust:
//
//   - Members, Skip and SkipString check structure only: every object,
//     array and string is closed and members are separated as JSON wants.
//     They do not check escapes, numbers or UTF-8, so a caller that needs a
//     value passes the document through Valid (json.Valid's verdict, in one
//     fast pass: the project's one validating scanner) or Root first. They
//     are what lets a decoder look at one member of a large record without
//     decoding the rest.
//   - SplitObject, SplitArray, Unquote and ParseAny expect a document that
//     json.Valid accepted; on anything else they return an error wrapping
//     ErrSyntax, never panic.
//
// The package knows nothing of the project's records: its errors are its
// own (ErrSyntax, *KindError) and callers translate them into their drop
// reasons. See docs/ARCHITECTURE.md for where it sits.
package jsonlex

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// ErrSyntax is wrapped by every error about input that is not JSON (or not
// structurally complete JSON).
var ErrSyntax = errors.New("not valid JSON")

// Kind is the JSON type of a raw value, read from its first byte.
type Kind byte

// The JSON types; KindInvalid for an empty value or one that starts with
// a byte no JSON value starts with.
const (
	KindInvalid Kind = iota
	KindObject
	KindArray
	KindString
	KindNumber
	KindBool
	KindNull
)

// String names the kind as an error message does: "an object", "a
// string", "null", "nothing" for KindInvalid.
func (k Kind) String() string {
	switch k {
	case KindObject:
		return "an object"
	case KindArray:
		return "an array"
	case KindString:
		return "a string"
	case KindNumber:
		return "a number"
	case KindBool:
		return "a boolean"
	case KindNull:
		return "null"
	}
	return "nothing"
}

// KindOf returns the kind of the raw value from its first byte (no
// leading whitespace allowed); it does not check the rest of the value.
func KindOf(raw []byte) Kind {
	if len(raw) == 0 {
		return KindInvalid
	}
	switch raw[0] {
	case '{':
		return KindObject
	case '[':
		return KindArray
	case '"':
		return KindString
	case 't', 'f':
		return KindBool
	case 'n':
		return KindNull
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return KindNumber
	}
	return KindInvalid
}

// KindError says a value has another JSON type than the one wanted; its
// message is "want an object, got an array".
type KindError struct {
	Want, Got Kind
}

func (e *KindError) Error() string { return "want " + e.Want.String() + ", got " + e.Got.String() }

// Root trims whitespace around data and returns it when it is one valid
// JSON object. Errors: ErrSyntax when it is not valid JSON, a *KindError
// when it is valid but not an object.
func Root(data []byte) ([]byte, error) {
	raw := bytes.TrimSpace(data)
	if !Valid(raw) {
		return nil, ErrSyntax
	}
	if k := KindOf(raw); k != KindObject {
		return nil, &KindError{Want: KindObject, Got: k}
	}
	return raw, nil
}

// DecodeObject decodes a JSON object into its free-form representation
// (see ParseAny): numbers keep their exact text as json.Number, a repeated
// key keeps its last value (as JavaScript's JSON.parse does). Anything but
// an object is refused; an array in particular is never turned into an
// object. Errors: those of Root, or of ParseAny.
func DecodeObject(data []byte) (map[string]any, error) {
	raw, err := Root(data)
	if err != nil {
		return nil, err
	}
	v, err := ParseAny(raw)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("jsonlex: decode object: parsed a %T", v)
	}
	return m, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (len(data) when there is none).
func SkipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// SkipString returns the index just past the string that starts at data[i]
// (a '"'), or -1 when it is not terminated: the end is the first quote not
// escaped by an odd run of backslashes. Escapes are skipped, not checked.
func SkipString(data []byte, i int) int {
	i++
	for i <= len(data) {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return -1
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
	return -1
}

// Skip returns the index just past the value that starts at data[i], or
// -1 when it is not structurally complete: a string or container not
// closed, or nothing where a value should be. A literal (number, true,
// false, null) runs to the next delimiter and is not checked.
func Skip(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return SkipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				if i = SkipString(data, i); i < 0 {
					return -1
				}
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
		return -1
	}
	j := i
	for j < len(data) {
		switch data[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
		j++
	}
	return j
}

// Members calls fn with each member of the object raw holds (whitespace
// around it allowed), in order: key is the member name as raw JSON, quotes
// included and escapes unresolved; val is the raw value. It stops early
// when fn returns false. Structure only is checked (see the package
// documentation), including that nothing but whitespace follows the
// object. Errors: a *KindError when raw is not an object, ErrSyntax when
// it is not structurally complete (members before the fault have been
// passed to fn).
func Members(raw []byte, fn func(key, val []byte) bool) error {
	i := SkipSpace(raw, 0)
	if k := KindOf(raw[i:]); k != KindObject {
		return &KindError{Want: KindObject, Got: k}
	}
	i = SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return trailing(raw, i+1)
	}
	for {
		if i >= len(raw) || raw[i] != '"' {
			return fmt.Errorf("%w: want a member name at byte %d", ErrSyntax, i)
		}
		kEnd := SkipString(raw, i)
		if kEnd < 0 {
			return fmt.Errorf("%w: member name at byte %d not terminated", ErrSyntax, i)
		}
		key := raw[i:kEnd]
		i = SkipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return fmt.Errorf("%w: want ':' at byte %d", ErrSyntax, i)
		}
		i = SkipSpace(raw, i+1)
		vEnd := Skip(raw, i)
		if vEnd < 0 {
			return fmt.Errorf("%w: value at byte %d not complete", ErrSyntax, i)
		}
		if !fn(key, raw[i:vEnd]) {
			return nil
		}
		i = SkipSpace(raw, vEnd)
		if i >= len(raw) {
			return fmt.Errorf("%w: object not closed", ErrSyntax)
		}
		switch raw[i] {
		case ',':
			i = SkipSpace(raw, i+1)
		case '}':
			return trailing(raw, i+1)
		default:
			return fmt.Errorf("%w: want ',' or '}' at byte %d", ErrSyntax, i)
		}
	}
}

// trailing checks that only whitespace follows data[i].
func trailing(data []byte, i int) error {
	if SkipSpace(data, i) != len(data) {
		return fmt.Errorf("%w: data after the value at byte %d", ErrSyntax, i)
	}
	return nil
}

// Member is one member of a JSON object: its decoded name and its raw
// value.
type Member struct {
	Key string
	Val []byte
}

// SplitObject splits a valid JSON object into its members, in order,
// repeated names included. Errors: a *KindError when raw is not an object,
// ErrSyntax (wrapped) when it is not valid.
func SplitObject(raw []byte) ([]Member, error) {
	var out []Member
	var kerr error
	err := Members(raw, func(key, val []byte) bool {
		k, err := Unquote(key)
		if err != nil {
			kerr = err
			return false
		}
		out = append(out, Member{Key: k, Val: val})
		return true
	})
	if err == nil {
		err = kerr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SplitArray splits a valid JSON array into its raw elements, in order.
// Errors: a *KindError when raw is not an array, ErrSyntax (wrapped) when
// it is not structurally complete.
func SplitArray(raw []byte) ([][]byte, error) {
	if k := KindOf(raw); k != KindArray {
		return nil, &KindError{Want: KindArray, Got: k}
	}
	out := [][]byte{}
	i := SkipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return out, nil
	}
	for {
		end := Skip(raw, i)
		if end < 0 {
			return nil, fmt.Errorf("%w: array element at byte %d not complete", ErrSyntax, i)
		}
		out = append(out, raw[i:end])
		i = SkipSpace(raw, end)
		if i >= len(raw) {
			return nil, fmt.Errorf("%w: array not closed", ErrSyntax)
		}
		switch raw[i] {
		case ',':
			i = SkipSpace(raw, i+1)
		case ']':
			return out, nil
		default:
			return nil, fmt.Errorf("%w: want ',' or ']' at byte %d", ErrSyntax, i)
		}
	}
}

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

// ParseAny turns a valid raw JSON value into its free-form representation:
// map[string]any, []any, string, json.Number, bool or nil, exactly what
// encoding/json gives with UseNumber. A repeated key keeps its last value.
// One pass over the bytes, whatever the nesting. Errors wrap ErrSyntax.
func ParseAny(raw []byte) (any, error) {
	v, end, err := parseValue(raw, SkipSpace(raw, 0))
	if err != nil {
		return nil, err
	}
	if err := trailing(raw, end); err != nil {
		return nil, err
	}
	return v, nil
}

// parseValue parses the value at data[i] and returns it with the index
// just past it.
func parseValue(data []byte, i int) (any, int, error) {
	if i >= len(data) {
		return nil, i, fmt.Errorf("%w: unexpected end of JSON", ErrSyntax)
	}
	switch data[i] {
	case '{':
		return parseObject(data, i)
	case '[':
		return parseArray(data, i)
	case '"':
		end := SkipString(data, i)
		if end < 0 {
			return nil, i, fmt.Errorf("%w: string at byte %d not terminated", ErrSyntax, i)
		}
		s, err := Unquote(data[i:end])
		return s, end, err
	}
	end := Skip(data, i)
	if end < 0 {
		return nil, i, fmt.Errorf("%w: no value at byte %d", ErrSyntax, i)
	}
	switch lit := data[i:end]; {
	case string(lit) == "true":
		return true, end, nil
	case string(lit) == "false":
		return false, end, nil
	case string(lit) == "null":
		return nil, end, nil
	case IsNumber(string(lit)):
		return json.Number(lit), end, nil
	default:
		return nil, end, fmt.Errorf("%w: unexpected literal at byte %d", ErrSyntax, i)
	}
}

func parseObject(data []byte, i int) (any, int, error) {
	m := map[string]any{}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return m, i + 1, nil
	}
	for {
		end := -1
		if i < len(data) && data[i] == '"' {
			end = SkipString(data, i)
		}
		if end < 0 {
			return nil, i, fmt.Errorf("%w: want a member name at byte %d", ErrSyntax, i)
		}
		key, err := Unquote(data[i:end])
		if err != nil {
			return nil, i, err
		}
		i = SkipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, i, fmt.Errorf("%w: want ':' at byte %d", ErrSyntax, i)
		}
		v, next, err := parseValue(data, SkipSpace(data, i+1))
		if err != nil {
			return nil, next, err
		}
		m[key] = v
		i = SkipSpace(data, next)
		if i >= len(data) {
			return nil, i, fmt.Errorf("%w: object not closed", ErrSyntax)
		}
		switch data[i] {
		case '}':
			return m, i + 1, nil
		case ',':
			i = SkipSpace(data, i+1)
		default:
			return nil, i, fmt.Errorf("%w: want ',' or '}' at byte %d", ErrSyntax, i)
		}
	}
}

func parseArray(data []byte, i int) (any, int, error) {
	a := []any{}
	i = SkipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return a, i + 1, nil
	}
	for {
		v, next, err := parseValue(data, i)
		if err != nil {
			return nil, next, err
		}
		a = append(a, v)
		i = SkipSpace(data, next)
		if i >= len(data) {
			return nil, i, fmt.Errorf("%w: array not closed", ErrSyntax)
		}
		switch data[i] {
		case ']':
			return a, i + 1, nil
		case ',':
			i = SkipSpace(data, i+1)
		default:
			return nil, i, fmt.Errorf("%w: want ',' or ']' at byte %d", ErrSyntax, i)
		}
	}
}

// IsNumber reports whether s is a JSON number literal (RFC 8259 section
// 6: an optional minus, an integer part without leading zeros, an
// optional fraction and exponent).
func IsNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i >= len(s):
		return false
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		i = digits(s, i)
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		if i = digits(s, i+1); s[i-1] == '.' {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		if i = digits(s, i); i == start {
			return false
		}
	}
	return i == len(s)
}

// digits returns the index past the run of ASCII digits at s[i].
func digits(s string, i int) int {
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// Field returns the raw value of the member of the valid object raw that a
// Go struct field tagged name receives from encoding/json: the last member
// whose name is name, or equal to it under Unicode case folding, wins.
// ok is false when raw is not an object or has no such member. raw must be
// a value json.Valid accepted (a member of a validated document is): the
// lookup checks structure only, so on anything else it may report a value
// encoding/json would refuse, but it never panics. The value is a
// sub-slice of raw, not a copy.
func Field(raw []byte, name string) (val []byte, ok bool) {
	_ = Members(raw, func(k, v []byte) bool {
		if keyMatches(k, name) {
			val, ok = v, true
		}
		return true
	})
	return val, ok
}

// Fields is Field for several names at once, in one pass: vals[i] is the
// value of names[i], nil when absent.
func Fields(raw []byte, vals [][]byte, names ...string) {
	_ = Members(raw, func(k, v []byte) bool {
		for i, n := range names {
			if keyMatches(k, n) {
				vals[i] = v
			}
		}
		return true
	})
}

// keyMatches tells whether the raw member name k (quotes included) names
// the struct field name as encoding/json matches them.
func keyMatches(k []byte, name string) bool {
	if len(k) < 2 {
		return false
	}
	body := k[1 : len(k)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body) == name || bytes.EqualFold(body, []byte(name))
	}
	s, err := Unquote(k)
	return err == nil && (s == name || strings.EqualFold(s, name))
}

// StringOf decodes the raw value as a string when it is one (surrounding
// whitespace allowed); ok is false for any other kind, null included, as
// for a string field encoding/json leaves alone. raw must be valid JSON
// (see Field).
func StringOf(raw []byte) (s string, ok bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	s, err := Unquote(raw)
	return s, err == nil
}

// ObjectMap splits the valid object raw into a map from member name to raw
// value, as json.Unmarshal into map[string]json.RawMessage does (exact
// names, the last of a repeated name wins), without copying the values:
// each is a sub-slice of raw. Errors: as SplitObject.
func ObjectMap(raw []byte) (map[string]json.RawMessage, error) {
	n := 0
	_ = Members(raw, func(_, _ []byte) bool { n++; return true })
	m := make(map[string]json.RawMessage, n)
	var kerr error
	err := Members(raw, func(key, val []byte) bool {
		k, err := Unquote(key)
		if err != nil {
			kerr = err
			return false
		}
		m[k] = val
		return true
	})
	if err == nil {
		err = kerr
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

// StringFields fills the string fields of a struct from the valid object
// raw in one pass, as encoding/json would: dst[i] receives the last string
// value of a member matching names[i] (see Field); a member of another
// kind, null included, leaves it alone. A raw that is not an object
// changes nothing.
func StringFields(raw []byte, dst []*string, names ...string) {
	_ = Members(raw, func(k, v []byte) bool {
		for i, n := range names {
			if keyMatches(k, n) {
				if s, ok := StringOf(v); ok {
					*dst[i] = s
				}
			}
		}
		return true
	})
}

// maxDepth is encoding/json's limit of nested objects and arrays.
const maxDepth = 10000

// strSafe marks the bytes a JSON string may hold as they are: not the
// quote, not the backslash, not a control character.
var strSafe = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// Valid reports whether data is one JSON value with only whitespace around
// it, exactly as json.Valid decides (the same grammar, strings may hold any
// byte but a control character, at most 10000 nested containers), in one
// pass without the state machine. It is what a decoder calls before
// reading a document by structure (Members, Field, ObjectMap).
func Valid(data []byte) bool {
	var stack []byte // '{' or '[' per open container
	i := SkipSpace(data, 0)
	const (
		wantValue = iota
		wantKey
		afterValue
	)
	state := wantValue
	for {
		switch state {
		case wantValue:
			if i >= len(data) {
				return false
			}
			switch c := data[i]; {
			case c == '{' || c == '[':
				if stack = append(stack, c); len(stack) > maxDepth {
					return false
				}
				i = SkipSpace(data, i+1)
				if i < len(data) && data[i] == c+2 { // '}' or ']'
					stack = stack[:len(stack)-1]
					i++
					state = afterValue
				} else if c == '{' {
					state = wantKey
				}
				continue
			case c == '"':
				if i = validString(data, i); i < 0 {
					return false
				}
			case c == 't':
				if !hasLiteral(data, i, "true") {
					return false
				}
				i += 4
			case c == 'f':
				if !hasLiteral(data, i, "false") {
					return false
				}
				i += 5
			case c == 'n':
				if !hasLiteral(data, i, "null") {
					return false
				}
				i += 4
			default:
				if i = validNumber(data, i); i < 0 {
					return false
				}
			}
			state = afterValue
		case wantKey:
			if i >= len(data) || data[i] != '"' {
				return false
			}
			if i = validString(data, i); i < 0 {
				return false
			}
			i = SkipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return false
			}
			i = SkipSpace(data, i+1)
			state = wantValue
		case afterValue:
			i = SkipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := stack[len(stack)-1]
			switch data[i] {
			case ',':
				i = SkipSpace(data, i+1)
				if top == '{' {
					state = wantKey
				} else {
					state = wantValue
				}
			case top + 2: // the container's own close
				stack = stack[:len(stack)-1]
				i++
			default:
				return false
			}
		}
	}
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// validString returns the index past the valid string starting at data[i]
// (a '"'), or -1.
func validString(data []byte, i int) int {
	i++
	for {
		// Eight bytes at a time while none of them needs a look (long
		// texts), then straight to the first that does: the lowest byte
		// lookMask flags is exact (a borrow only carries upwards), so the
		// loop byte by byte is left for the last few bytes of data.
		for len(data)-i >= 8 {
			if m := lookMask(binary.LittleEndian.Uint64(data[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(data) && strSafe[data[i]] {
			i++
		}
		if i >= len(data) {
			return -1
		}
		switch data[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

// lookMask flags (the high bit of the byte) the bytes of w that need a
// look: a quote, a backslash or a control character (a byte below 0x20),
// by the classic tests for a zero byte and for a byte less than n, on
// every byte at once. A byte of 0x80 or more is never flagged by itself.
// A flag above a flagged byte may be false (the subtractions borrow
// upwards), but the lowest flag is always a byte that needs a look and no
// byte below it does.
func lookMask(w uint64) uint64 {
	q, b := w^(ones*'"'), w^(ones*'\\')
	return ((q-ones)&^q | (b-ones)&^b | (w-ones*0x20)&^w) & highs
}

// ones and highs are the byte masks of the eight-byte tests.
const ones, highs = 0x0101010101010101, 0x8080808080808080

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// validNumber returns the index past the number starting at data[i], or -1.
func validNumber(data []byte, i int) int {
	if i < len(data) && data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		i++
		j := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == j {
			return -1
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := i
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		if i == j {
			return -1
		}
	}
	return i
}

// CutField splits the valid object raw into the value of the member a Go
// struct field tagged name receives (see Field; a copy) and the object
// without every member matching name (a new buffer: the other members in
// order, compactly joined). ok is false, and nothing is allocated, when raw
// has no such member or is not an object. It lets a decoder keep a large
// pass-through member raw without encoding/json scanning it twice.
func CutField(raw []byte, name string) (rest, val []byte, ok bool) {
	n := 0
	_ = Members(raw, func(k, v []byte) bool {
		if keyMatches(k, name) {
			val, ok = v, true
			n += len(k) + len(v) + 2
		}
		return true
	})
	if !ok {
		return nil, nil, false
	}
	rest = make([]byte, 0, len(raw)-n+2)
	rest = append(rest, '{')
	_ = Members(raw, func(k, v []byte) bool {
		if keyMatches(k, name) {
			return true
		}
		if len(rest) > 1 {
			rest = append(rest, ',')
		}
		rest = append(append(append(rest, k...), ':'), v...)
		return true
	})
	rest = append(rest, '}')
	return rest, append([]byte(nil), val...), true
}
