package codex

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// One-pass decoders for the shapes most app-server traffic has (see
// appserver_lex.go). Each fills a struct exactly as json.Unmarshal would,
// reading a value that belongs to a frame jsonlex.Valid accepted, in one
// pass over its bytes (jsonlex.Members). They report ok false, and the
// caller then decodes with encoding/json, for anything whose outcome they
// do not reproduce: a member of another type than the field's (where
// encoding/json would report a type error), a member name with an escape,
// non-ASCII bytes or another case than the field's (encoding/json matches
// names case-insensitively), a repeated member (encoding/json merges
// repeated objects), a number that is not an int64 literal, or a member the
// fast shape does not decode (maps, the rarer nested lists).

// lexKeys are the member names of one struct.
type lexKeys struct {
	index map[string]int  // exact name → field number (< 64)
	lower map[string]bool // every name in lower case
	lens  uint64          // bit n set: a name is n bytes long (n < 64)
}

func newKeys(names ...string) *lexKeys {
	k := &lexKeys{index: make(map[string]int, len(names)), lower: make(map[string]bool, len(names))}
	for i, n := range names {
		k.index[n] = i
		k.lower[strings.ToLower(n)] = true
		k.lens |= 1 << len(n)
	}
	return k
}

// plainString returns the body of the raw string v when it has no escape
// and is UTF-8 (what it decodes to, byte for byte).
func plainString(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' {
		return nil, false
	}
	body := v[1 : len(v)-1]
	return body, bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)
}

// common are values many members share (item types and statuses):
// decoded to these strings, they are not allocated again.
var common = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"userMessage", "agentMessage", "plan", "reasoning", "commandExecution", "fileChange",
		"mcpToolCall", "dynamicToolCall", "collabAgentToolCall", "subAgentActivity", "webSearch", "imageView",
		"contextCompaction", "inProgress", "completed", "failed", "declined", "interrupted", "agent", "userShell",
		"text", "started", ""} {
		m[s] = s
	}
	return m
}()

// maxKey is longer than any field name (ASCII case folding keeps lengths).
const maxKey = 64

// unknownKey reports whether a member name that matched no field exactly
// may be skipped: plain ASCII without an escape, and no field's name under
// case folding (encoding/json would decode those into the field).
func unknownKey(name []byte, k *lexKeys) bool {
	if len(name) >= maxKey {
		return bytes.IndexByte(name, '\\') < 0 && !hasNonASCII(name)
	}
	var buf [maxKey]byte
	for i, c := range name {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return !k.lower[string(buf[:len(name)])]
}

func hasNonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// lexMembers calls fn with the field number and raw value of each member
// of the object v that names a field of k, after checking the others may
// be skipped (unknownKey) and that no field is named twice. It returns
// false when v is not an object, a member is refused, or fn returns false.
func lexMembers(v []byte, k *lexKeys, fn func(i int, val []byte) bool) bool {
	if len(v) == 0 || v[0] != '{' {
		return false
	}
	ok := true
	var seen uint64
	err := jsonlex.Members(v, func(key, val []byte) bool {
		name := key[1 : len(key)-1]
		if len(name) < 64 && k.lens&(1<<len(name)) == 0 {
			// No field has this length, nor does an ASCII name that
			// folds to one.
			ok = bytes.IndexByte(name, '\\') < 0 && !hasNonASCII(name)
			return ok
		}
		if i, found := k.index[string(name)]; found {
			if seen&(1<<i) != 0 {
				ok = false
				return false
			}
			seen |= 1 << i
			ok = fn(i, val)
			return ok
		}
		ok = unknownKey(name, k)
		return ok
	})
	return ok && err == nil
}

// lexElems calls fn with each element of the array v; false when v is not
// an array, it is not complete, or fn returns false.
func lexElems(v []byte, fn func(e []byte) bool) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	i := jsonlex.SkipSpace(v, 1)
	if i < len(v) && v[i] == ']' {
		return true
	}
	for {
		j := jsonlex.Skip(v, i)
		if j < 0 || !fn(v[i:j]) {
			return false
		}
		i = jsonlex.SkipSpace(v, j)
		if i >= len(v) {
			return false
		}
		switch v[i] {
		case ',':
			i = jsonlex.SkipSpace(v, i+1)
		case ']':
			return true
		default:
			return false
		}
	}
}

// lexStr decodes the raw string v: a copy of its body when it has no
// escape and is UTF-8, else unquoted as encoding/json does.
func lexStr(v []byte) (string, bool) {
	body := v[1 : len(v)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		if len(body) <= 20 {
			if s, ok := common[string(body)]; ok {
				return s, true
			}
		}
		return string(body), true
	}
	return jsonlex.Str(v)
}

// setString decodes a string field; null leaves it alone.
func setString(v []byte, dst *string) bool {
	switch v[0] {
	case '"':
		s, ok := lexStr(v)
		*dst = s
		return ok
	case 'n':
		return true
	}
	return false
}

// setStringPtr decodes a *string field; null sets it to nil.
func setStringPtr(v []byte, dst **string) bool {
	switch v[0] {
	case '"':
		s, ok := lexStr(v)
		*dst = &s
		return ok
	case 'n':
		*dst = nil
		return true
	}
	return false
}

// lexInt64 reads an integer literal in range.
func lexInt64(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 20 {
		return 0, false
	}
	for i, c := range v {
		if (c < '0' || c > '9') && !(i == 0 && c == '-') {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// setInt64Ptr decodes a *int64 field; null sets it to nil.
func setInt64Ptr(v []byte, dst **int64) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	n, ok := lexInt64(v)
	if ok {
		*dst = &n
	}
	return ok
}

// setRaw keeps a json.RawMessage field: a copy of any value, null
// included (json.RawMessage decodes null as "null").
func setRaw(v []byte, dst *json.RawMessage) bool {
	*dst = append(json.RawMessage(nil), v...)
	return true
}

// setStrings decodes a []string field: null sets nil, an array of strings
// (a null element is "") a new slice, empty included.
func setStrings(v []byte, dst *[]string) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	out := []string{}
	ok := lexElems(v, func(e []byte) bool {
		var s string
		if !setString(e, &s) {
			return false
		}
		out = append(out, s)
		return true
	})
	if ok {
		*dst = out
	}
	return ok
}

// setRawShared keeps a json.RawMessage field as setRaw does, but as a
// sub-slice of v (capacity clipped) instead of a copy: for a field that is
// read while its frame is decoded and never kept (see the fields' notes).
func setRawShared(v []byte, dst *json.RawMessage) bool {
	*dst = v[:len(v):len(v)]
	return true
}

// setRawsShared decodes a []json.RawMessage field, each element a sub-slice of v (see
// setRawShared).
func setRawsShared(v []byte, dst *[]json.RawMessage) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	out := []json.RawMessage{}
	ok := lexElems(v, func(e []byte) bool {
		out = append(out, e[:len(e):len(e)])
		return true
	})
	if ok {
		*dst = out
	}
	return ok
}

// lexStringMember reads the one string field name of a struct from the
// object v: as json.Unmarshal into struct{F string `json:"<name>"`},
// whose error is ignored (a value of another type leaves it alone); ok
// false when v must go to encoding/json.
func lexStringMember(v []byte, k *lexKeys) (s string, ok bool) {
	if len(v) == 0 || v[0] != '{' {
		return "", false
	}
	ok = lexMembers(v, k, func(_ int, val []byte) bool {
		if val[0] == '"' {
			var good bool
			s, good = lexStr(val)
			return good
		}
		return true
	})
	return s, ok
}
