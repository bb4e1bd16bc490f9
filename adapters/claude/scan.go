package claude

import (
	"bytes"
	"unicode/utf8"
)

// topLevelType finds the value of the top-level "type" member of a JSON
// object without decoding it, checking only its structure: the object and
// every string and nested value are closed, members are separated as JSON
// wants. It does not validate escapes, numbers or UTF-8. ok is false when
// the line is not a structurally complete object or has no string "type".
// decodeRecord uses it to pass over records of skipped kinds (the bulk of
// a long transcript: progress, snapshots, attachments) without decoding
// them.
func topLevelType(line []byte) (typ []byte, ok bool) {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	i = skipWS(line, i+1)
	if i < len(line) && line[i] == '}' {
		return nil, false // {} has no type
	}
	found := false
	for {
		// key
		if i >= len(line) || line[i] != '"' {
			return nil, false
		}
		kEnd := skipString(line, i)
		if kEnd < 0 {
			return nil, false
		}
		key := line[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, false // an escaped key: leave it to the full decoder
		}
		i = skipWS(line, kEnd)
		if i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipWS(line, i+1)
		vEnd := skipAny(line, i)
		if vEnd < 0 {
			return nil, false
		}
		// encoding/json matches member names without regard to case, and
		// the last one wins: the same here.
		if bytes.EqualFold(key, []byte("type")) && line[i] == '"' {
			typ, found = line[i+1:vEnd-1], true
			if bytes.IndexByte(typ, '\\') >= 0 || !utf8.Valid(typ) {
				return nil, false // leave escapes and bad UTF-8 to the full decoder
			}
		}
		i = skipWS(line, vEnd)
		if i >= len(line) {
			return nil, false
		}
		switch line[i] {
		case ',':
			i = skipWS(line, i+1)
		case '}':
			if skipWS(line, i+1) != len(line) {
				return nil, false
			}
			return typ, found
		default:
			return nil, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"'),
// or -1 when it is not terminated.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexAny(b[i:], "\"\\")
		if j < 0 {
			return -1
		}
		i += j
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // an escape: skip the escaped byte
		if i > len(b) {
			return -1
		}
	}
}

// skipAny returns the index after the value starting at b[i], or -1 when
// it is not structurally complete.
func skipAny(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				if i < 0 {
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
	default:
		// A literal: up to the next delimiter.
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
