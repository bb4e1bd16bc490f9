package acp

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// obj is a JSON object split into its members, in order, read as
// json.Unmarshal into a map[string]json.RawMessage reads it (exact names,
// escapes resolved, the last of a repeated name wins) without building the
// map or copying the values: each is a sub-slice of the frame.
type obj []member

// member is one member of an object: its name as raw JSON (quotes
// included, escapes unresolved) and its raw value.
type member struct{ key, val []byte }

// get returns the raw value of the last member named name, nil when there
// is none.
func (o obj) get(name string) json.RawMessage {
	for i := len(o) - 1; i >= 0; i-- {
		if named(o[i].key, name) {
			return o[i].val
		}
	}
	return nil
}

// named reports whether the raw member name key decodes to name.
func named(key []byte, name string) bool {
	body := key[1 : len(key)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return string(body) == name
	}
	s, err := jsonlex.Unquote(key)
	return err == nil && s == name
}

// members splits an object into its members; ok is false when raw is not
// an object. Every raw value the decoder reads is a member of a frame
// jsonrpc already validated, so it is split by structure (jsonlex.Members)
// instead of being decoded again.
func members(raw json.RawMessage) (obj, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	// Counted first: the slice is made once, at its size.
	n := 0
	if jsonlex.Members(raw, func(_, _ []byte) bool { n++; return true }) != nil {
		return nil, false
	}
	o := make(obj, 0, n)
	_ = jsonlex.Members(raw, func(k, v []byte) bool {
		o = append(o, member{k, v})
		return true
	})
	return o, true
}

// objects reads a JSON array of objects as json.Unmarshal into a
// []map[string]json.RawMessage does: a null element has no members; ok
// is false when raw is neither an array nor null, or an element is
// neither an object nor null.
func objects(raw json.RawMessage) ([]obj, bool) {
	items, ok := array(raw)
	if !ok {
		return nil, false
	}
	out := make([]obj, len(items))
	for i, it := range items {
		if isNull(it) {
			continue
		}
		if out[i], ok = members(it); !ok {
			return nil, false
		}
	}
	return out, true
}

// array splits a JSON array into its raw elements as json.Unmarshal into
// a []json.RawMessage does: null gives none; ok is false for anything but
// an array or null (absent included). Like members, it reads a member of a
// validated frame by structure (jsonlex.SplitArray): the elements are
// sub-slices of it.
func array(raw json.RawMessage) ([][]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return nil, true
	}
	items, err := jsonlex.SplitArray(raw)
	return items, err == nil
}

// stringsOf reads a JSON array of strings as json.Unmarshal into a
// []string does: null gives none; ok is false when json.Unmarshal fails.
func stringsOf(raw json.RawMessage) ([]string, bool) {
	var argv []string
	err := json.Unmarshal(raw, &argv)
	return argv, err == nil
}

// enum reads a string that must be one of the keys of set (each mapped
// to itself), giving set's string. ok is false for a string not in set,
// or anything else.
func enum(raw json.RawMessage, set map[string]string) (string, bool) {
	s, ok := str(raw)
	if !ok {
		return "", false
	}
	s, ok = set[s]
	return s, ok
}

// int64Of reads an integer member as json.Unmarshal into an int64 does,
// null and absent counting as no value: ok is false for null, absent,
// anything but a number, and a number json.Unmarshal refuses (a fraction,
// an exponent, out of range).
func int64Of(raw json.RawMessage) (int64, bool) {
	var n int64
	if json.Unmarshal(raw, &n) != nil || isNull(raw) {
		return 0, false
	}
	return n, true
}
