package acp

import (
	"bytes"
	"encoding/json"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// member is one member of an object: its name (unquoted, without the
// quotes) and its raw value, both sub-slices of the frame but for a name
// written with an escape.
type member struct{ k, v []byte }

// inlineMembers is how many members an obj holds without allocating: more
// than the objects of ACP traffic have.
const inlineMembers = 16

// obj is a JSON object split into its members once, read as
// json.Unmarshal into a map[string]json.RawMessage reads it (exact names,
// escapes resolved, the last of a repeated name wins), without building
// the map: the members are looked up in order, in place.
type obj struct {
	n    int
	kv   [inlineMembers]member
	more []member
}

// get returns the raw value of the last member named name, nil when
// there is none.
func (o *obj) get(name string) json.RawMessage {
	for i := len(o.more) - 1; i >= 0; i-- {
		if string(o.more[i].k) == name {
			return o.more[i].v
		}
	}
	for i := min(o.n, inlineMembers) - 1; i >= 0; i-- {
		if string(o.kv[i].k) == name {
			return o.kv[i].v
		}
	}
	return nil
}

// members splits an object into its members (see obj); ok is false when
// raw is not an object. Every raw value the decoder reads is a member of a
// frame jsonrpc already validated, so it is split by structure (jsonlex).
func members(raw json.RawMessage) (o obj, ok bool) {
	if !isObject(raw) {
		return obj{}, false
	}
	bad := false
	err := jsonlex.Members(bytes.TrimSpace(raw), func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			s, err := jsonlex.Unquote(k)
			if err != nil {
				bad = true
				return false
			}
			name = []byte(s)
		}
		if o.n < inlineMembers {
			o.kv[o.n] = member{name, v}
		} else {
			o.more = append(o.more, member{name, v})
		}
		o.n++
		return true
	})
	if err != nil || bad {
		return obj{}, false
	}
	return o, true
}

// objOf returns the members of a map json.Unmarshal filled (a nil map
// has none).
func objOf(m map[string]json.RawMessage) *obj {
	o := &obj{}
	for k, v := range m {
		if o.n < inlineMembers {
			o.kv[o.n] = member{[]byte(k), v}
		} else {
			o.more = append(o.more, member{[]byte(k), v})
		}
		o.n++
	}
	return o
}
