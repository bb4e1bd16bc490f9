package jsonlex

import (
	"encoding/json"
	"fmt"
)

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
