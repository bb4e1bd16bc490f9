package jsonlex

import (
	"bytes"
	"unicode/utf8"
)

// Field decoders for one-pass decoders that fill Go structs the way
// encoding/json.Unmarshal would: v is one valid JSON value (as Members
// yields it), dst the field. Each reports false when v is of a type the
// field cannot take, so the caller hands the whole value to
// encoding/json (which then reports or ignores it as it does).

// Str decodes the valid raw string v (quotes included): a copy of its body
// when it has no escape and is UTF-8, else Unquote's result; false on a
// broken escape.
func Str(v []byte) (string, bool) {
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body), true
	}
	s, err := Unquote(v)
	return s, err == nil
}

// SetString decodes a string field; null leaves it alone.
func SetString(v []byte, dst *string) bool {
	switch v[0] {
	case '"':
		s, ok := Str(v)
		*dst = s
		return ok
	case 'n':
		return true
	}
	return false
}

// SetStringPtr decodes a *string field; null sets it to nil.
func SetStringPtr(v []byte, dst **string) bool {
	switch v[0] {
	case '"':
		s, ok := Str(v)
		*dst = &s
		return ok
	case 'n':
		*dst = nil
		return true
	}
	return false
}

// SetBool decodes a bool field; null leaves it alone.
func SetBool(v []byte, dst *bool) bool {
	switch v[0] {
	case 't':
		*dst = true
	case 'f':
		*dst = false
	case 'n':
	default:
		return false
	}
	return true
}

// SetBoolPtr decodes a *bool field; null sets it to nil.
func SetBoolPtr(v []byte, dst **bool) bool {
	switch v[0] {
	case 't', 'f':
		b := v[0] == 't'
		*dst = &b
	case 'n':
		*dst = nil
	default:
		return false
	}
	return true
}
