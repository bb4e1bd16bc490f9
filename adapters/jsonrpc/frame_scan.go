package jsonrpc

import (
	"encoding/json"
	"hash/maphash"
	"sync/atomic"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// frameMembers are the top-level members of one frame object as raw JSON
// (sub-slices of the frame), nil when absent; a repeated name keeps its
// last value, as jsonlex.ObjectMap does.
type frameMembers struct {
	version, method, id, params, result, rawErr json.RawMessage
	emitted                                     json.RawMessage
	extra                                       map[string]json.RawMessage
}

// maxDepth is the deepest nesting of objects and arrays a frame may have,
// jsonlex.Valid's limit.
const maxDepth = 10000

// scanFrame validates data (an object: data[0] is '{', no whitespace
// around it) and splits its top-level members into fm, in one pass. valid
// is jsonlex.Valid's verdict (json.Valid's: RFC 8259 syntax, nesting up to
// maxDepth, UTF-8 not checked). split is false when a member name has an
// escape or is not UTF-8: those names must be decoded, which the caller
// leaves to jsonlex.ObjectMap; fm is then incomplete.
func scanFrame(data []byte, fm *frameMembers) (valid, split bool) {
	// stack holds '{' or '[' per open container; most frames nest less
	// than its inline capacity.
	var inline [32]byte
	stack := inline[:0]
	split = true
	var key []byte // the current top-level member name, quotes excluded
	valStart := 0
	i := 0
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
				return false, split
			}
			if len(stack) == 1 {
				valStart = i
			}
			switch c := data[i]; {
			case c == '{' || c == '[':
				if stack = append(stack, c); len(stack) > maxDepth {
					return false, split
				}
				i = skipSpace(data, i+1)
				if i < len(data) && data[i] == c+2 { // '}' or ']'
					stack = stack[:len(stack)-1]
					i++
					state = afterValue
					if len(stack) == 1 {
						fm.set(key, data[valStart:i], &split)
					}
				} else if c == '{' {
					state = wantKey
				}
				continue
			case c == '"':
				if i = jsonlex.StringEnd(data, i); i < 0 {
					return false, split
				}
			case c == 't':
				if !hasLiteral(data, i, "true") {
					return false, split
				}
				i += 4
			case c == 'f':
				if !hasLiteral(data, i, "false") {
					return false, split
				}
				i += 5
			case c == 'n':
				if !hasLiteral(data, i, "null") {
					return false, split
				}
				i += 4
			default:
				if i = jsonlex.NumberEnd(data, i); i < 0 {
					return false, split
				}
			}
			state = afterValue
			if len(stack) == 1 {
				fm.set(key, data[valStart:i], &split)
			}
		case wantKey:
			if i >= len(data) || data[i] != '"' {
				return false, split
			}
			k := i
			if i = jsonlex.StringEnd(data, i); i < 0 {
				return false, split
			}
			if len(stack) == 1 {
				key = data[k+1 : i-1]
			}
			i = skipSpace(data, i)
			if i >= len(data) || data[i] != ':' {
				return false, split
			}
			i = skipSpace(data, i+1)
			state = wantValue
		case afterValue:
			i = skipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data), split
			}
			if i >= len(data) {
				return false, split
			}
			top := stack[len(stack)-1]
			switch data[i] {
			case ',':
				i = skipSpace(data, i+1)
				if top == '{' {
					state = wantKey
				} else {
					state = wantValue
				}
			case top + 2: // the container's own close
				stack = stack[:len(stack)-1]
				i++
				if len(stack) == 1 {
					fm.set(key, data[valStart:i], &split)
				}
			default:
				return false, split
			}
		}
	}
}

// set records the top-level member name (raw, quotes excluded) = val.
func (fm *frameMembers) set(name, val []byte, split *bool) {
	switch string(name) {
	case "jsonrpc":
		fm.version = val
	case "method":
		fm.method = val
	case "id":
		fm.id = val
	case "params":
		fm.params = val
	case "result":
		fm.result = val
	case "error":
		fm.rawErr = val
	case "emittedAtMs":
		fm.emitted = val
	default:
		if !*split || !plainName(name) {
			*split = false
			return
		}
		if fm.extra == nil {
			fm.extra = map[string]json.RawMessage{}
		}
		fm.extra[string(name)] = val
	}
}

// methodCache holds recently seen method names, so that a frame whose
// method was seen before does not allocate it again (a peer uses a few
// dozen names). It is methodCacheWays-way set associative: a name hashes to
// a set of methodCacheWays slots and is looked for in each; a miss stores it
// in an empty slot of the set, else in one its hash picks. One slot per name
// made two of a peer's names share a slot in about half the processes (19
// names of Codex over 256 slots, the hash seeded per process), and those
// two were allocated on every frame from then on. Each slot is replaced
// whole by whoever misses on it: safe for concurrent connections, and
// bounded (methodCacheSize names of at most methodCacheMax bytes).
var (
	methodCache     [methodCacheSize]atomic.Pointer[string]
	methodCacheSeed = maphash.MakeSeed()
)

const (
	methodCacheSize = 256
	methodCacheWays = 4
	methodCacheMax  = 96
)

// methodSet is the first slot of the set body's name belongs to, and the
// hash's bits that choose a slot to replace.
func methodSet(body []byte) (first int, pick uint64) {
	h := maphash.Bytes(methodCacheSeed, body)
	return int(h%(methodCacheSize/methodCacheWays)) * methodCacheWays, h / (methodCacheSize / methodCacheWays)
}

// methodName reads the method member of a valid frame as jsonlex.StringOf
// does (ok false when it is not a string), the name shared with earlier
// frames of the same method (see methodCache).
func methodName(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' || len(raw)-2 > methodCacheMax || !plainName(raw[1:len(raw)-1]) {
		return jsonlex.StringOf(raw)
	}
	body := raw[1 : len(raw)-1]
	first, pick := methodSet(body)
	set := methodCache[first : first+methodCacheWays]
	empty := -1
	for i := range set {
		p := set[i].Load()
		if p == nil {
			if empty < 0 {
				empty = i
			}
			continue
		}
		if *p == string(body) {
			return *p, true
		}
	}
	s := string(body)
	if empty < 0 {
		empty = int(pick % methodCacheWays)
	}
	set[empty].Store(&s)
	return s, true
}

// plainName reports whether a member name reads as it is written: no
// escape, valid UTF-8.
func plainName(name []byte) bool {
	for _, c := range name {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return utf8.Valid(name)
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}
