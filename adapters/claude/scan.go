package claude

import (
	"bytes"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// topLevelType finds the value of the top-level "type" member of a JSON
// object without decoding it, checking only its structure
// (jsonlex.Members: the object and every string and nested value are
// closed, members are separated as JSON wants). It does not validate
// escapes, numbers or UTF-8. ok is false when the line is not a
// structurally complete object, has no string "type", or has a member name
// or type with an escape (left to the full decoder). decodeRecord uses it
// to pass over records of skipped kinds (the bulk of a long transcript:
// progress, snapshots, attachments) without decoding them.
func topLevelType(line []byte) (typ []byte, ok bool) {
	found, escaped := false, false
	err := jsonlex.Members(line, func(key, val []byte) bool {
		key = key[1 : len(key)-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			escaped = true
			return false
		}
		// encoding/json matches member names without regard to case, and
		// the last one wins: the same here.
		if bytes.EqualFold(key, []byte("type")) && val[0] == '"' {
			typ, found = val[1:len(val)-1], true
			if bytes.IndexByte(typ, '\\') >= 0 || !utf8.Valid(typ) {
				escaped = true
				return false
			}
		}
		return true
	})
	if err != nil || escaped || !found {
		return nil, false
	}
	return typ, true
}
