package acp

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// member is one member of an object: its name (unquoted, without the
// quotes) and its raw value, both sub-slices of the frame but for a name
// written with an escape or bytes that are not UTF-8 (decoded as
// encoding/json decodes it).
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
// frame jsonrpc already validated, so it is split by structure, as
// jsonlex.Members splits it (objScan).
func members(raw json.RawMessage) (o obj, ok bool) {
	raw = trimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return obj{}, false
	}
	sc := scanObject(raw)
	for !sc.done {
		k, v, good := sc.next()
		if !good {
			return obj{}, false
		}
		name := k[1 : len(k)-1]
		if !plainName(name) {
			s, err := jsonlex.Unquote(k)
			if err != nil {
				return obj{}, false
			}
			name = []byte(s)
		}
		o.add(member{name, v})
	}
	if !sc.end() {
		return obj{}, false
	}
	return o, true
}

// objScan reads the members of an object one at a time by structure, as
// jsonlex.Members does (the same verdict on any input: FuzzObjScan), in a
// loop of the caller's without a callback per member.
type objScan struct {
	raw  []byte
	i    int  // where the next member starts; past the object once done
	done bool // no member left: the object is closed, or is not one
	bad  bool // a structural fault
}

// scanObject starts reading raw, an object (whitespace around it allowed).
func scanObject(raw []byte) objScan {
	i := jsonlex.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return objScan{raw: raw, done: true, bad: true}
	}
	i = jsonlex.SkipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return objScan{raw: raw, i: i + 1, done: true}
	}
	return objScan{raw: raw, i: i}
}

// next returns the next member: its name as raw JSON (quotes included,
// escapes unresolved) and its raw value; ok is false, and the scan done,
// on a structural fault. Called only while the scan is not done.
func (s *objScan) next() (k, v []byte, ok bool) {
	raw, i := s.raw, s.i
	if i >= len(raw) || raw[i] != '"' {
		return s.fail()
	}
	kEnd := jsonlex.SkipString(raw, i)
	if kEnd < 0 {
		return s.fail()
	}
	k = raw[i:kEnd]
	i = jsonlex.SkipSpace(raw, kEnd)
	if i >= len(raw) || raw[i] != ':' {
		return s.fail()
	}
	i = jsonlex.SkipSpace(raw, i+1)
	vEnd := jsonlex.Skip(raw, i)
	if vEnd < 0 {
		return s.fail()
	}
	v = raw[i:vEnd]
	i = jsonlex.SkipSpace(raw, vEnd)
	if i >= len(raw) {
		return s.fail()
	}
	switch raw[i] {
	case ',':
		s.i = jsonlex.SkipSpace(raw, i+1)
	case '}':
		s.i, s.done = i+1, true
	default:
		return s.fail()
	}
	return k, v, true
}

func (s *objScan) fail() (k, v []byte, ok bool) {
	s.done, s.bad = true, true
	return nil, nil, false
}

// end reports whether the scan, done, read a whole object with nothing but
// whitespace after it: what jsonlex.Members returns no error for.
func (s *objScan) end() bool {
	return !s.bad && jsonlex.SkipSpace(s.raw, s.i) == len(s.raw)
}

// trimSpace is bytes.TrimSpace, without a call when raw starts and ends
// with printable ASCII, which it never trims (a member the decoder reads
// always does).
func trimSpace(raw []byte) []byte {
	if len(raw) > 0 && plainEdge(raw[0]) && plainEdge(raw[len(raw)-1]) {
		return raw
	}
	return bytes.TrimSpace(raw)
}

// plainEdge reports whether c is printable ASCII, not a space: a byte
// bytes.TrimSpace keeps at either end.
func plainEdge(c byte) bool { return ' ' < c && c < utf8.RuneSelf }

// plainName reports whether a member name (between its quotes) is
// read as it is: no escape and valid UTF-8. An ASCII name without a
// backslash (every name of ACP traffic) is told in one loop; anything
// else is looked at in full.
func plainName(name []byte) bool {
	for _, c := range name {
		if c == '\\' || c >= utf8.RuneSelf {
			return bytes.IndexByte(name, '\\') < 0 && utf8.Valid(name)
		}
	}
	return true
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

// array splits a JSON array into its raw elements as json.Unmarshal into
// a []json.RawMessage does: null gives none; ok is false for anything but
// an array or null (absent included). The elements are appended to
// dst[:0], so a caller that passes a buffer of its own (on its stack)
// reads a short array without an allocation; the result is only read
// while the frame is decoded, never kept.
func (d *Decoder) array(dst []json.RawMessage, raw json.RawMessage) ([]json.RawMessage, bool) {
	if d.general {
		var items []json.RawMessage
		err := json.Unmarshal(raw, &items)
		return items, err == nil
	}
	raw = trimSpace(raw)
	if string(raw) == "null" {
		return nil, true
	}
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	if items, ok := splitArray(dst[:0], raw); ok {
		return items, true
	}
	var items []json.RawMessage
	err := json.Unmarshal(raw, &items)
	return items, err == nil
}

// splitArray appends the raw elements of raw, an array that starts at
// raw[0] and ends at its last byte, to dst, as jsonlex.SplitArray splits
// them (by structure: raw is a member of a validated frame); ok is false
// when it is not structurally complete.
func splitArray(dst []json.RawMessage, raw []byte) ([]json.RawMessage, bool) {
	i := jsonlex.SkipSpace(raw, 1)
	if i < len(raw) && raw[i] == ']' {
		return dst, jsonlex.SkipSpace(raw, i+1) == len(raw)
	}
	for {
		end := jsonlex.Skip(raw, i)
		if end < 0 {
			return nil, false
		}
		dst = append(dst, raw[i:end])
		i = jsonlex.SkipSpace(raw, end)
		if i >= len(raw) {
			return nil, false
		}
		switch raw[i] {
		case ',':
			i = jsonlex.SkipSpace(raw, i+1)
		case ']':
			return dst, jsonlex.SkipSpace(raw, i+1) == len(raw)
		default:
			return nil, false
		}
	}
}

// blockFields are the members of a content block or tool content item the
// one-pass decoder reads (lexBlock), by their name in lower case: another
// member that equals one of them but for case is decoded by encoding/json
// into its field, so such a block is left to it.
var blockFields = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{"type", "text", "data", "mimeType", "uri", "name", "title", "size", "resource", "blob",
		"content", "path", "oldText", "newText", "terminalId"} {
		m[strings.ToLower(n)] = n
	}
	return m
}()

// otherCase is what lexKey names a member that matches a field but for
// case: no field's name.
const otherCase = "\x00"

// lexKey reports whether the raw member name k (quotes included) is name
// exactly; ok is false when it is not but encoding/json might match it
// to one of the fields (an escape, bytes that are not ASCII). name is
// empty for a member that is no field, otherCase for one that is a field
// but for case, else the field's name (blockFields' string: none is made).
func lexKey(k []byte) (name string, ok bool) {
	body := k[1 : len(k)-1]
	var buf [16]byte
	if len(body) > len(buf) {
		for _, c := range body {
			if c == '\\' || c >= 0x80 {
				return "", false
			}
		}
		return "", true // longer than any field name
	}
	for i, c := range body {
		if c == '\\' || c >= 0x80 {
			return "", false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	field, ok := blockFields[string(buf[:len(body)])]
	switch {
	case !ok:
		return "", true
	case field == string(body):
		return field, true
	}
	return otherCase, true
}

// lexFields reads the string fields named by names from the object raw
// into vals (mask has bit i set for each present, vals[i] its value), as
// json.Unmarshal into a struct with *string fields of those names would
// (the exact names given, in the case written); raws gets the raw values
// of the names in rawNames. The caller points its struct's fields into
// vals, which may stay on its stack. ok is false, and raw must be decoded
// by encoding/json, for a member of another type (null included), a name
// written twice or matching a field but for case, or an escape. A "type"
// written plainly that is one of the schema's types is the table's
// string (contentTypes): no string is made for it.
func lexFields(raw []byte, vals []string, names []string, raws [][]byte, rawNames []string) (mask uint32, ok bool) {
	var seen uint32
	sc := scanObject(raw)
members:
	for !sc.done {
		k, v, good := sc.next()
		if !good {
			return 0, false
		}
		name, good := lexKey(k)
		if !good {
			return 0, false
		}
		if name == "" {
			continue // not a field
		}
		for i, n := range names {
			if n == name {
				if seen&(1<<i) != 0 || v[0] != '"' {
					return 0, false
				}
				seen |= 1 << i
				if t, known := contentTypes[string(v)]; known && n == "type" {
					vals[i] = t
					continue members
				}
				s, err := jsonlex.Unquote(v)
				if err != nil {
					return 0, false
				}
				vals[i] = s
				continue members
			}
		}
		for i, n := range rawNames {
			if n == name {
				bit := uint32(1) << (len(names) + i)
				if seen&bit != 0 {
					return 0, false
				}
				seen |= bit
				raws[i] = v
				continue members
			}
		}
		return 0, false // a field of the other shape, or another case
	}
	return seen, sc.end()
}

// contentTypes are the types of content blocks and tool content items,
// by their JSON text (quoted), each its name.
var contentTypes = func() map[string]string {
	m := map[string]string{}
	for _, t := range []string{"text", "image", "audio", "resource_link", "resource", "content", "diff", "terminal"} {
		m[strconv.Quote(t)] = t
	}
	return m
}()

// field is the i-th of vals when mask says it is present, else nil.
func field(vals []string, mask uint32, i int) *string {
	if mask&(1<<i) == 0 {
		return nil
	}
	return &vals[i]
}

var (
	blockNames    = []string{"type", "text", "data", "mimeType", "uri", "name", "title"}
	blockRaws     = []string{"size", "resource"}
	resourceNames = []string{"uri", "text", "blob", "mimeType"}
	toolNames     = []string{"type", "path", "oldText", "newText", "terminalId"}
	toolRaws      = []string{"content"}
)

// block reads a ContentBlock as decodeBlock does, in one pass for the
// usual shapes.
func (d *Decoder) block(raw json.RawMessage) (contentBlock, error) {
	if !d.general {
		var vals [7]string
		if w, ok := lexBlockWire(raw, &vals); ok {
			return blockOf(&w)
		}
	}
	return decodeBlock(raw)
}

// toolContent reads a ToolCallContent item as decodeToolContent does, in
// one pass for the usual shapes.
func (d *Decoder) toolContent(raw json.RawMessage) (toolContent, error) {
	if !d.general {
		raw := trimSpace(raw)
		if len(raw) > 0 && raw[0] == '{' {
			var s [5]string
			var r [1][]byte
			if m, ok := lexFields(raw, s[:], toolNames, r[:], toolRaws); ok {
				w := toolWire{Type: field(s[:], m, 0), Path: field(s[:], m, 1), OldText: field(s[:], m, 2),
					NewText: field(s[:], m, 3), TerminalID: field(s[:], m, 4), Content: r[0]}
				return toolContentOf(&w, r[0], d.block)
			}
		}
	}
	return decodeToolContent(raw)
}

// lexBlockWire fills a blockWire from raw in one pass; ok is false for
// anything lexFields leaves to encoding/json, a size that is not an
// integer or a resource that is not an object of strings. The block's
// strings are read into *s, which its fields point to (the caller's, so
// that they may stay on its stack).
func lexBlockWire(raw json.RawMessage, s *[7]string) (blockWire, bool) {
	raw = trimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return blockWire{}, false
	}
	var r [2][]byte
	m, ok := lexFields(raw, s[:], blockNames, r[:], blockRaws)
	if !ok {
		return blockWire{}, false
	}
	w := blockWire{Type: field(s[:], m, 0), Text: field(s[:], m, 1), Data: field(s[:], m, 2), MimeType: field(s[:], m, 3),
		URI: field(s[:], m, 4), Name: field(s[:], m, 5), Title: field(s[:], m, 6)}
	if r[0] != nil {
		n, err := strconv.ParseInt(string(r[0]), 10, 64)
		if err != nil {
			return blockWire{}, false
		}
		w.Size = &n
	}
	if r[1] != nil {
		if r[1][0] != '{' {
			return blockWire{}, false
		}
		rs := new([4]string) // a resource's strings are kept apart (rare)
		rm, ok := lexFields(r[1], rs[:], resourceNames, nil, nil)
		if !ok {
			return blockWire{}, false
		}
		w.Resource = &resourceContents{URI: field(rs[:], rm, 0), Text: field(rs[:], rm, 1), Blob: field(rs[:], rm, 2), MimeType: field(rs[:], rm, 3)}
	}
	return w, true
}

// stringsOf reads a JSON array of strings as json.Unmarshal into a
// []string does: null gives none; ok is false when json.Unmarshal fails.
// An array of plain strings is read in one pass.
func stringsOf(raw json.RawMessage) ([]string, bool) {
	t := trimSpace(raw)
	if len(t) == 0 || t[0] != '[' && string(t) != "null" {
		// Absent, or another value than an array (a command given as a
		// string): json.Unmarshal fails on every such input.
		return nil, false
	}
	if t[0] == '[' {
		var buf [8]json.RawMessage
		if els, ok := splitArray(buf[:0], t); ok {
			out := make([]string, len(els))
			plain := true
			for i, e := range els {
				if e[0] != '"' {
					plain = false
					break
				}
				s, err := jsonlex.Unquote(e)
				if err != nil {
					plain = false
					break
				}
				out[i] = s
			}
			if plain {
				return out, true
			}
		}
	}
	var argv []string
	err := json.Unmarshal(raw, &argv)
	return argv, err == nil
}

// isArray reports whether d.array would read raw (an array or null),
// without splitting it: raw is a member of a validated frame, so its first
// byte says.
func (d *Decoder) isArray(raw json.RawMessage) bool {
	if d.general {
		_, ok := d.array(nil, raw)
		return ok
	}
	raw = trimSpace(raw)
	return len(raw) > 0 && raw[0] == '[' || string(raw) == "null"
}

// plainStr returns the text of a JSON string written without escapes, in
// UTF-8: the bytes between its quotes, a sub-slice of raw, for a lookup
// or comparison that need not make a string (what str would give is
// those bytes). ok is false for anything else (an escape, bytes that are
// not UTF-8, which str replaces; not a string), and always for the
// general form, which reads every string with str.
func (d *Decoder) plainStr(raw json.RawMessage) ([]byte, bool) {
	if d.general {
		return nil, false
	}
	raw = trimSpace(raw)
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	b := raw[1 : len(raw)-1]
	if !plainText(b) {
		return nil, false
	}
	return b, true
}

// plainText is plainName for a text of any length: eight bytes at a time
// while they are ASCII without a backslash (a flag of the test for a zero
// byte is false only above one that is zero, so some flag is set exactly
// when some byte is a backslash or not ASCII); from the first word that is
// not, bytes.IndexByte and utf8.Valid decide.
func plainText(b []byte) bool {
	for i := 0; len(b)-i >= 8; i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		x := w ^ 0x5c5c5c5c5c5c5c5c // '\\' in every byte
		if (w|(x-0x0101010101010101)&^x)&0x8080808080808080 != 0 {
			return bytes.IndexByte(b[i:], '\\') < 0 && utf8.Valid(b[i:])
		}
	}
	return plainName(b[len(b)&^7:])
}

// enum reads a string that must be one of the keys of set (each mapped
// to itself), giving set's string: none is made per frame. ok is false
// for a string not in set, or anything else.
func (d *Decoder) enum(raw json.RawMessage, set map[string]string) (string, bool) {
	if b, plain := d.plainStr(raw); plain {
		s, ok := set[string(b)]
		return s, ok
	}
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
// an exponent, out of range). A plain integer of up to 18 digits is read
// in place (json.Unmarshal allocates for each); anything else, and every
// value for the general form, goes to json.Unmarshal.
func (d *Decoder) int64Of(raw json.RawMessage) (int64, bool) {
	if !d.general {
		t := trimSpace(raw)
		if n, ok := plainInt(t); ok {
			return n, true
		}
		if len(t) == 0 || string(t) == "null" {
			return 0, false // absent (json.Unmarshal fails) or null
		}
	}
	var n int64
	if json.Unmarshal(raw, &n) != nil || isNull(raw) {
		return 0, false
	}
	return n, true
}

// plainInt reads b when it is an integer written plainly: an optional
// minus and 1 to 18 digits, no leading zero (so it cannot overflow and is
// valid JSON); ok is false for anything else.
func plainInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// membersLast is members(raw), and the members of its member named last
// when that is the object's last member (u, uok): such a member is not
// skipped to find where it ends, since it ends where raw's object does, a
// scan of it saved (a session/update's "update" holds most of its frame).
// What it gives is what members(raw) and then members of o.get(last) give
// (FuzzMembersLast); uok is false when last is not the last member or
// not an object, and the caller reads it from o as usual.
func membersLast(raw json.RawMessage, last string) (o, u obj, ok, uok bool) {
	raw = trimSpace(raw)
	if len(raw) < 2 || raw[0] != '{' || raw[len(raw)-1] != '}' {
		o, ok = members(raw)
		return o, obj{}, ok, false
	}
	closing := len(raw) - 1
	i := jsonlex.SkipSpace(raw, 1)
	if i == closing {
		return obj{}, obj{}, true, false
	}
	for {
		if i >= closing || raw[i] != '"' {
			break
		}
		kEnd := jsonlex.SkipString(raw, i)
		if kEnd < 0 || kEnd > closing {
			break
		}
		k := raw[i:kEnd]
		name := k[1 : len(k)-1]
		if !plainName(name) {
			s, err := jsonlex.Unquote(k)
			if err != nil {
				break
			}
			name = []byte(s)
		}
		i = jsonlex.SkipSpace(raw, kEnd)
		if i >= closing || raw[i] != ':' {
			break
		}
		i = jsonlex.SkipSpace(raw, i+1)
		if i < closing && raw[i] == '{' && string(name) == last {
			// The rest up to raw's closing brace, when it is one object
			// alone, is the value.
			v := bytes.TrimRight(raw[i:closing], " \t\r\n")
			if mu, okU := members(v); okU {
				o.add(member{name, v})
				return o, mu, true, true
			}
		}
		vEnd := jsonlex.Skip(raw, i)
		if vEnd < 0 || vEnd > closing {
			break
		}
		o.add(member{name, raw[i:vEnd]})
		i = jsonlex.SkipSpace(raw, vEnd)
		if i == closing {
			return o, obj{}, true, false
		}
		if i > closing || raw[i] != ',' {
			break
		}
		i = jsonlex.SkipSpace(raw, i+1)
	}
	// Anything else is read the usual way, for its verdict.
	o, ok = members(raw)
	return o, obj{}, ok, false
}

// add appends a member.
func (o *obj) add(m member) {
	if o.n < inlineMembers {
		o.kv[o.n] = m
	} else {
		o.more = append(o.more, m)
	}
	o.n++
}
