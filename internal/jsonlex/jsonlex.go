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
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
