package acp

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// This file holds the one-pass forms of what the mapping does per tool
// update: the metadata objects built straight in their JSON form (instead
// of by way of json.Marshal and a parse), the agent's input kept in the
// metadata (jsonlex instead of encoding/json), and whether an announcement
// changed (compared as values instead of as marshalled JSON). Each gives
// exactly what the general form gives, which a Decoder with general set
// uses throughout (the tests compare the two); anything a one-pass form
// does not cover is handed to the general form.

// object turns metadata built from Go values into an agent.Object as
// toObject does (the JSON representation: json.Number numbers, []any and
// map[string]any), without encoding it: nil when toObject would give nil.
func (d *Decoder) object(m map[string]any) agent.Object {
	if !d.general {
		if o, ok := normalize(m); ok {
			return o
		}
	}
	return toObject(m)
}

// normalize converts the values the metadata builders use, in place (m
// and its maps are the builder's own); ok is false for anything else (or a
// string json.Marshal would alter: not UTF-8), left to toObject, which
// gives the same for a value converted as for the value it was.
func normalize(m map[string]any) (agent.Object, bool) {
	out := agent.Object(m)
	for k, v := range m {
		if !utf8.ValidString(k) {
			return nil, false
		}
		n, ok := normalValue(v)
		if !ok {
			return nil, false
		}
		out[k] = n
	}
	return out, true
}

func normalValue(v any) (any, bool) {
	switch v := v.(type) {
	case string:
		return v, utf8.ValidString(v)
	case bool:
		return v, true
	case int:
		return json.Number(strconv.Itoa(v)), true
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), true
	case json.RawMessage:
		if v == nil || tooDeep(v) {
			return nil, false
		}
		p, err := jsonlex.ParseAny(v)
		return p, err == nil
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			if !utf8.ValidString(s) {
				return nil, false
			}
			out[i] = s
		}
		return out, v != nil
	case []any:
		if v == nil {
			return nil, false
		}
		out := make([]any, len(v))
		for i, e := range v {
			n, ok := normalValue(e)
			if !ok {
				return nil, false
			}
			out[i] = n
		}
		return out, true
	case map[string]any:
		if v == nil {
			return nil, false
		}
		o, ok := normalize(v)
		return map[string]any(o), ok
	case normalized:
		return v.v, true
	}
	return nil, false
}

// normalized is a metadata value already in the JSON representation
// (what normalValue gives), shared by the events that carry it, which
// nothing changes. It marshals as its value, so toObject (which a
// metadata object takes when another of its values is not converted)
// gives the same for it.
type normalized struct{ v any }

// MarshalJSON marshals the value.
func (n normalized) MarshalJSON() ([]byte, error) { return json.Marshal(n.v) }

// optionsValue is a permission's options as its metadata holds them:
// their JSON text (optionsText) for both forms, made once for the same
// options by the one-pass form (agents offer the same few choices on
// every request) and shared by the events that carry it, which nothing
// changes.
func (d *Decoder) optionsValue(opts []PermissionOption) json.RawMessage {
	if d.general {
		return optionsText(opts)
	}
	c := &d.permOpts
	if c.v == nil || !slices.Equal(c.opts, opts) {
		c.opts, c.v = slices.Clip(opts), optionsText(opts)
	}
	return c.v
}

// optionsText is the JSON text of a permission's options as the metadata
// keeps it: an array of {"kind","name","optionId"} objects, the bytes
// agent.EncodeEvent writes for the tree json.Marshal and a parse made of
// them before (keys sorted; strings as encoding/json writes them without
// HTML escaping, what is not UTF-8 as U+FFFD), so a transcript and an
// event read the same as when the metadata held the tree ("null" for
// nil). A list of objects per request cost a map per option; the text
// is one allocation (docs/ARCHITECTURE.md "Mapping and delivery
// figures").
func optionsText(opts []PermissionOption) json.RawMessage {
	if opts == nil {
		return json.RawMessage("null")
	}
	n := 2
	for _, o := range opts {
		n += len(`{"kind":"","name":"","optionId":""},`) + len(o.Kind) + len(o.Name) + len(o.OptionID)
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, o := range opts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"kind":`...)
		b = appendText(b, o.Kind)
		b = append(b, `,"name":`...)
		b = appendText(b, o.Name)
		b = append(b, `,"optionId":`...)
		b = appendText(b, o.OptionID)
		b = append(b, '}')
	}
	return append(b, ']')
}

// locationsText is the JSON text of a tool's locations as the metadata
// keeps it: an array of {"line","path"} objects (no line for a location
// without one), written as optionsText writes its objects ("null" for
// nil).
func locationsText(locs []location) json.RawMessage {
	n := 4
	for _, l := range locs {
		n += len(`{"line":,"path":""},`) + len(l.Path)
		if l.Line != nil {
			n += 20
		}
	}
	return appendLocations(make([]byte, 0, n), locs)
}

// appendLocations appends locationsText(locs) to dst.
func appendLocations(dst []byte, locs []location) []byte {
	if locs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, l := range locs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if l.Line != nil {
			dst = append(dst, `"line":`...)
			dst = strconv.AppendInt(dst, *l.Line, 10)
			dst = append(dst, ',')
		}
		dst = append(dst, `"path":`...)
		dst = appendText(dst, l.Path)
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendText appends s as a JSON string as agent.EncodeEvent writes the
// string a json.Marshal and a parse made of it: appendString's escapes,
// but each byte that is not UTF-8 as the character U+FFFD itself (the
// parse turns json.Marshal's \ufffd into it), not as an escape.
func appendText(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return appendString(dst, s)
	}
	v := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			v = utf8.AppendRune(v, utf8.RuneError)
		} else {
			v = append(v, s[i:i+size]...)
		}
		i += size
	}
	return appendString(dst, string(v))
}

// sameOptions returns the options optionsValue converted last, when the
// raw options of a request are the same ones written plainly (plainStr):
// the same optionId, name and kind strings in the same order. Those are
// shared by the requests that offer them (read only: clipped, so an
// append copies them). Otherwise it returns a new empty list for the
// caller to fill, and false (always for the general form).
//
// The new list has room for every option of raw (one allocation, not one
// per doubling as the caller appends).
func (d *Decoder) sameOptions(raw []json.RawMessage) ([]PermissionOption, bool) {
	c := &d.permOpts
	if d.general || c.v == nil || len(raw) != len(c.opts) {
		return make([]PermissionOption, 0, len(raw)), false
	}
	for i, ro := range raw {
		om, ok := members(ro)
		if !ok {
			return make([]PermissionOption, 0, len(raw)), false
		}
		o := &c.opts[i]
		for _, f := range [...]struct {
			name, want string
		}{{"optionId", o.OptionID}, {"name", o.Name}, {"kind", o.Kind}} {
			if b, plain := d.plainStr(om.get(f.name)); !plain || string(b) != f.want {
				return make([]PermissionOption, 0, len(raw)), false
			}
		}
	}
	return c.opts, true
}

// opaque returns an opaque JSON value of the agent's (a tool's rawOutput,
// a permission's rawInput) as the metadata keeps it: its text, a member
// of a frame jsonrpc validated, as a json.RawMessage instead of a tree
// parsed from it. The transcript's encoder (mapper, codec_json.go)
// validates such a value and writes it in canonical form (sorted keys,
// numbers as given), the bytes the parsed tree gives; agent.EncodeEvent
// writes it compacted, keys in the agent's order. ok is false for a text
// a parse would not keep as it is (not UTF-8: json.Marshal replaces what
// is not; nested deeper than encoding/json decodes), which takes the
// tree as before. Both forms take it (it is not a one-pass form: the
// representation of the events, docs/ARCHITECTURE.md "Mapping and
// delivery figures").
func opaque(raw json.RawMessage) (json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || !utf8.Valid(raw) || tooDeep(raw) {
		return nil, false
	}
	return raw, true
}

// withOpaque is o with the member k set to the opaque value v (o made
// when nil), o alone when v is nil.
func withOpaque(o agent.Object, k string, v json.RawMessage) agent.Object {
	if v == nil {
		return o
	}
	if o == nil {
		o = agent.Object{}
	}
	o[k] = v
	return o
}

// tooDeep reports whether raw may nest deeper than encoding/json decodes
// (10000 levels), where the parse of jsonlex (which has no limit) would
// differ from it.
func tooDeep(raw []byte) bool {
	if len(raw) <= 10000 {
		return false
	}
	depth := 0
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			if i = jsonlex.SkipString(raw, i); i < 0 {
				return true
			}
			i--
		case '{', '[':
			if depth++; depth > 10000 {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// toolMetadata is agent.ToolMetadata: the agent's name of the tool, and
// its input when that is not the canonical input, kept as its text
// (opaque, below) when it can be.
//
// Whether the two texts are the same value is kept per tool
// (toolSide.same) only when it took a parse to tell: sameRaw reads most
// texts in place without allocating, which costs less than the side
// caches of a tool that needs them for nothing else.
func (d *Decoder) toolMetadata(tl *tool, provider string, raw, input json.RawMessage) (meta agent.Object, deferred bool) {
	if d.general || tooDeep(raw) || tooDeep(input) {
		return providerInputText(agent.ToolMetadata(provider, raw, input), raw), false
	}
	if isNull(raw) {
		return providerOnly(provider), false
	}
	if bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(input)) {
		return providerOnly(provider), false // the same text: the same value
	}
	if tl.side != nil {
		c := &tl.side.same
		if c.known && bytes.Equal(c.raw, raw) && bytes.Equal(c.input, input) {
			if c.ok {
				return providerOnly(provider), false // found the same value for the same texts before
			}
			return d.deferProviderInput(tl, provider, raw)
		}
	}
	same, known := sameRaw(raw, input)
	if !known {
		// Left to the parse of both.
		rv, err := jsonlex.ParseAny(raw)
		if err != nil {
			return providerInputText(agent.ToolMetadata(provider, raw, input), raw), false
		}
		same = len(bytes.TrimSpace(input)) == 0
		if !same {
			cv, err := jsonlex.ParseAny(input)
			if err != nil {
				return providerInputText(agent.ToolMetadata(provider, raw, input), raw), false
			}
			same = reflect.DeepEqual(rv, cv)
		} else {
			same = false // no canonical input: the agent's is kept
		}
		if len(bytes.TrimSpace(input)) > 0 {
			c := &tl.sideOf().same
			c.raw, c.input, c.ok, c.known = raw, input, same, true
		}
	}
	if same && len(bytes.TrimSpace(input)) > 0 {
		return providerOnly(provider), false
	}
	return d.deferProviderInput(tl, provider, raw)
}

// deferProviderInput is withProviderInput left to be made (deferred:
// canonCache.deferred) when it can be made later from the tool's fields
// alone: the input kept as its text, or parsed now into the tool's cache.
// An input the parse refuses makes its metadata now (not deferred).
func (d *Decoder) deferProviderInput(tl *tool, provider string, raw json.RawMessage) (agent.Object, bool) {
	if _, ok := opaque(raw); ok {
		return nil, true
	}
	if _, ok := d.parsedInput(tl, raw); ok {
		return nil, true
	}
	return d.withProviderInput(tl, provider, raw), false
}

// parsedInput is raw parsed (jsonlex.ParseAny), kept per tool
// (toolSide.parsed) for the same text; ok is false when the parse fails.
func (d *Decoder) parsedInput(tl *tool, raw json.RawMessage) (any, bool) {
	p := &tl.sideOf().parsed
	if p.raw == nil || !bytes.Equal(p.raw, raw) {
		v, err := jsonlex.ParseAny(raw)
		if err != nil {
			return nil, false
		}
		p.raw, p.v = raw, v
	}
	return p.v, true
}

// putProviderInput sets withProviderInput's members in m; false when the
// input's parse fails (m then unchanged).
func (d *Decoder) putProviderInput(m agent.Object, tl *tool, provider string, raw json.RawMessage) bool {
	var v any
	if rv, ok := opaque(raw); ok {
		v = rv
	} else if pv, ok := d.parsedInput(tl, raw); ok {
		v = pv
	} else {
		return false
	}
	if provider != "" {
		m[agent.MetaProviderTool] = provider
	}
	m[agent.MetaProviderInput] = v
	return true
}

// withProviderInput is the metadata {"providerTool": provider,
// "providerInput": raw} (no providerTool for no provider), the input as
// its text when opaque keeps it, else parsed (kept per tool: toolSide.parsed).
func (d *Decoder) withProviderInput(tl *tool, provider string, raw json.RawMessage) agent.Object {
	m := agent.Object{}
	if !d.putProviderInput(m, tl, provider, raw) {
		return agent.ToolMetadata(provider, raw, nil)
	}
	return m
}

// providerInputText is m (agent.ToolMetadata's) with its providerInput,
// the value of raw, as raw's text when opaque keeps it.
func providerInputText(m agent.Object, raw json.RawMessage) agent.Object {
	if _, ok := m[agent.MetaProviderInput]; ok {
		if rv, ok := opaque(raw); ok {
			m[agent.MetaProviderInput] = rv
		}
	}
	return m
}

// sameRaw reports whether the JSON texts a and b are the same value
// (reflect.DeepEqual of their jsonlex.ParseAny trees: numbers as
// written), read in place. ok is false when it cannot tell so (see
// sameValue), or when either is empty.
func sameRaw(a, b []byte) (same, ok bool) {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return false, false
	}
	if ea, eb := jsonlex.Skip(a, 0), jsonlex.Skip(b, 0); ea != len(a) || eb != len(b) {
		return false, false
	}
	return sameRawAt(a, b)
}

// sameRawAt is sameRaw for a and b exactly one value each.
func sameRawAt(a, b []byte) (same, ok bool) {
	switch {
	case a[0] == '{' && b[0] == '{':
		var ma, mb [inlineMembers]member
		na, oka := plainMembers(a, &ma)
		nb, okb := plainMembers(b, &mb)
		if !oka || !okb {
			return false, false
		}
		if na != nb {
			return false, true
		}
		same = true
		for _, x := range ma[:na] {
			var y *member
			for k := range mb[:nb] {
				if bytes.Equal(mb[k].k, x.k) {
					y = &mb[k]
					break
				}
			}
			if y == nil {
				same = false
				continue
			}
			s, known := sameRawAt(x.v, y.v)
			if !known {
				return false, false
			}
			same = same && s
		}
		return same, true
	case a[0] == '[' && b[0] == '[':
		i, j := jsonlex.SkipSpace(a, 1), jsonlex.SkipSpace(b, 1)
		same = true
		for {
			endA, endB := i < len(a) && a[i] == ']', j < len(b) && b[j] == ']'
			if endA || endB {
				return same && endA == endB, true
			}
			ei, ej := jsonlex.Skip(a, i), jsonlex.Skip(b, j)
			if ei < 0 || ej < 0 {
				return false, false
			}
			s, known := sameRawAt(a[i:ei], b[j:ej])
			if !known {
				return false, false
			}
			same = same && s
			i, j = jsonlex.SkipSpace(a, ei), jsonlex.SkipSpace(b, ej)
			if i < len(a) && a[i] == ',' {
				i = jsonlex.SkipSpace(a, i+1)
			}
			if j < len(b) && b[j] == ',' {
				j = jsonlex.SkipSpace(b, j+1)
			}
			if i >= len(a) || j >= len(b) {
				return false, false
			}
		}
	case a[0] == '"' && b[0] == '"':
		if len(a) < 2 || len(b) < 2 {
			return false, false
		}
		sa, sb := a[1:len(a)-1], b[1:len(b)-1]
		if bytes.IndexByte(sa, '\\') >= 0 || bytes.IndexByte(sb, '\\') >= 0 || !utf8.Valid(sa) || !utf8.Valid(sb) {
			return false, false
		}
		return bytes.Equal(sa, sb), true
	case a[0] == '{' || a[0] == '[' || a[0] == '"' || b[0] == '{' || b[0] == '[' || b[0] == '"':
		return false, true // values of different kinds
	}
	// Literals (numbers as written, true, false, null), valid JSON.
	if !jsonlex.IsNumber(string(a)) && string(a) != "true" && string(a) != "false" && string(a) != "null" {
		return false, false
	}
	return bytes.Equal(a, b), true
}

// plainMembers splits the object raw into ms: names written plainly,
// none repeated, at most inlineMembers of them; ok is false otherwise.
func plainMembers(raw []byte, ms *[inlineMembers]member) (n int, ok bool) {
	ok = true
	err := jsonlex.Members(raw, func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		if n == inlineMembers || bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			ok = false
			return false
		}
		for _, o := range ms[:n] {
			if bytes.Equal(o.k, name) {
				ok = false
				return false
			}
		}
		ms[n] = member{name, v}
		n++
		return true
	})
	return n, ok && err == nil
}

// providerOnly is the metadata {"providerTool": provider} ({} for no
// provider). For the names of the table below it is one object shared
// by every event and decoder: nothing changes an event's metadata, and a
// caller that adds to the metadata (buildCanonical) copies it first.
func providerOnly(provider string) agent.Object {
	if o, ok := providerMetas[provider]; ok {
		return o
	}
	m := agent.Object{}
	if provider != "" {
		m[agent.MetaProviderTool] = provider
	}
	return m
}

// providerMetas holds the metadata of providerOnly for the ACP tool kinds
// and the agents' own tool names the mapping knows (agentTools), made
// once.
var providerMetas = func() map[string]agent.Object {
	m := map[string]agent.Object{}
	add := func(name string) { m[name] = agent.Object{agent.MetaProviderTool: name} }
	for k := range validKinds {
		add(k)
	}
	for _, table := range agentTools {
		for name := range table {
			add(name)
		}
	}
	return m
}()

// announcement is what a tool's last ToolCall said, to skip repeats: the
// event's fields (done: there was one). The general form keeps the event
// and its head (name, title and input) as JSON in tool and title instead,
// and nothing else: no field of its own for them, so the tool struct stays
// a size class smaller (docs/ARCHITECTURE.md "Mapping and delivery
// figures").
type announcement struct {
	done        bool
	tool, title string
	input       json.RawMessage
	meta        agent.Object
}

// repeats reports whether ev says what the last announcement said: all of
// it, or (head) its name, title and input only.
func (d *Decoder) repeats(a *announcement, ev *agent.ToolCall, head bool) bool {
	if d.general {
		if !head {
			return a.done && announcementJSON(ev) == a.tool
		}
		sig, _ := json.Marshal(agent.ToolCall{Tool: ev.Tool, Title: ev.Title, Input: ev.Input})
		return a.done && string(sig) == a.title
	}
	if !a.done || a.tool != ev.Tool || a.title != ev.Title || !sameInput(a.input, ev.Input) {
		return false
	}
	return head || sameMeta(a.meta, ev.Metadata)
}

// remember records ev as the tool's last announcement.
func (d *Decoder) remember(a *announcement, ev *agent.ToolCall) {
	if d.general {
		sig, _ := json.Marshal(agent.ToolCall{Tool: ev.Tool, Title: ev.Title, Input: ev.Input})
		*a = announcement{done: true, tool: announcementJSON(ev), title: string(sig)}
		return
	}
	*a = announcement{done: true, tool: ev.Tool, title: ev.Title, input: ev.Input, meta: ev.Metadata}
}

// sameInput reports whether two inputs marshal the same (json.Marshal
// compacts a raw value and escapes HTML characters; an empty one is left
// out).
func sameInput(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	ma, erra := json.Marshal(a)
	mb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ma, mb)
}

// sameMeta reports whether two metadata objects hold the same values:
// their values are in the JSON representation (strings that are UTF-8,
// json.Number, bool, nil, []any, map[string]any), where that is equality
// of values, or an opaque value kept as its text (opaque), the same as
// another when the trees they parse to are (sameMetaValue); an empty
// object is left out as nil is.
func sameMeta(a, b agent.Object) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !sameMetaValue(v, w) {
			return false
		}
	}
	return true
}

// sameMetaValue reports whether two metadata values are the same value:
// reflect.DeepEqual of their trees, a value kept as its JSON text
// (json.RawMessage) taken as the tree jsonlex.ParseAny gives for it. The
// same value may come as two texts (other spacing, another member order:
// an agent repeating a tool's input) and must not read as a change
// (docs/ARCHITECTURE.md, "Mapping and delivery figures").
func sameMetaValue(a, b any) bool {
	ra, textA := a.(json.RawMessage)
	rb, textB := b.(json.RawMessage)
	switch {
	case textA && textB:
		if bytes.Equal(ra, rb) {
			return true
		}
		if same, ok := sameRaw(ra, rb); ok {
			return same
		}
		va, erra := jsonlex.ParseAny(ra)
		vb, errb := jsonlex.ParseAny(rb)
		return erra == nil && errb == nil && reflect.DeepEqual(va, vb)
	case textA:
		return sameTextTree(ra, b)
	case textB:
		return sameTextTree(rb, a)
	}
	return reflect.DeepEqual(a, b)
}

// sameTextTree reports whether the JSON text raw parses to the tree v.
func sameTextTree(raw json.RawMessage, v any) bool {
	if same, ok := sameValue(v, raw); ok {
		return same
	}
	p, err := jsonlex.ParseAny(raw)
	return err == nil && reflect.DeepEqual(p, v)
}

// treeMeta is m with every value kept as its JSON text replaced by the
// tree it parses to (m itself when it holds none): the general form
// compares announcements by their JSON, which writes a text as it is.
func treeMeta(m agent.Object) agent.Object {
	var out agent.Object
	for k, v := range m {
		raw, ok := v.(json.RawMessage)
		if !ok {
			continue
		}
		p, err := jsonlex.ParseAny(raw)
		if err != nil {
			continue
		}
		if out == nil {
			out = maps.Clone(m)
		}
		out[k] = p
	}
	if out == nil {
		return m
	}
	return out
}

// announcementJSON is the JSON of ev the general form compares: its
// metadata's texts as the trees they parse to.
func announcementJSON(ev *agent.ToolCall) string {
	c := *ev
	c.Metadata = treeMeta(ev.Metadata)
	full, _ := json.Marshal(&c)
	return string(full)
}

// metaKey is what a tool's part metadata is built from (partMeta): its
// content, locations and writes. The content is known by its generation
// (tool.contentGen, counted at every replacement: an update may write new
// content over the tool's own array, mergeFields); the locations and
// writes are only ever replaced or appended to, never changed in place,
// so the same slices hold the same values, and each is kept as its first
// element and its length, which is what sameSlice compares, rather than
// as the slice: the key is part of every tool, and 32 bytes instead of 80
// keep the tool struct a size class smaller (docs/ARCHITECTURE.md
// "Mapping and delivery figures"). The first element keeps the array
// alive as the slice did.
type metaKey struct {
	locations   *location
	writes      *agent.FileDiff
	contentGen  uint32
	nLoc, nWrit int32
	outContent  bool
}

// metaKeyOf is the metaKey of the tool's current content, locations and
// writes.
func metaKeyOf(tl *tool) metaKey {
	return metaKey{locations: firstOf(tl.locations), writes: firstOf(tl.writes), contentGen: tl.contentGen,
		nLoc: int32(len(tl.locations)), nWrit: int32(len(tl.writes)), outContent: tl.outContent}
}

// firstOf is the address of s's first element, nil for an empty s (two
// empty slices are the same elements, as sameSlice has them).
func firstOf[T any](s []T) *T {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

func (k metaKey) same(o metaKey) bool {
	return k == o
}

// sameSlice reports whether a and b are the same elements of the same
// array.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameValue reports whether the JSON text raw parses to v, a tree
// jsonlex.ParseAny gave: reflect.DeepEqual(v, ParseAny(raw)), read in
// place instead of parsed. ok is false when it cannot tell so (raw not
// structurally complete, a member name or string with an escape or not
// in UTF-8, an object of more than inlineMembers members, whose repeated
// names it does not look for), which the caller leaves to the parse.
func sameValue(v any, raw []byte) (same, ok bool) {
	i := jsonlex.SkipSpace(raw, 0)
	end := jsonlex.Skip(raw, i)
	if end < 0 || jsonlex.SkipSpace(raw, end) != len(raw) {
		return false, false
	}
	return sameAt(v, raw[i:end])
}

// sameAt is sameValue for raw exactly one value.
func sameAt(v any, raw []byte) (same, ok bool) {
	switch raw[0] {
	case '{':
		m, isMap := v.(map[string]any)
		var names [inlineMembers][]byte
		n := 0
		same, ok = true, true
		err := jsonlex.Members(raw, func(k, val []byte) bool {
			name := k[1 : len(k)-1]
			if n == inlineMembers || bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
				ok = false
				return false
			}
			for _, o := range names[:n] {
				if bytes.Equal(o, name) {
					ok = false // a repeated name: the last one counts
					return false
				}
			}
			names[n] = name
			n++
			if !isMap {
				return true
			}
			mv, has := m[string(name)]
			if !has {
				same = false
				return true
			}
			s, known := sameValue(mv, val)
			if !known {
				ok = false
				return false
			}
			same = same && s
			return true
		})
		if err != nil || !ok {
			return false, false
		}
		return isMap && same && n == len(m), true
	case '[':
		a, isArr := v.([]any)
		same = isArr
		k := 0
		i := jsonlex.SkipSpace(raw, 1)
		if i < len(raw) && raw[i] == ']' {
			return isArr && len(a) == 0, true
		}
		for {
			end := jsonlex.Skip(raw, i)
			if end < 0 {
				return false, false
			}
			if same && k < len(a) {
				s, known := sameAt(a[k], raw[i:end])
				if !known {
					return false, false
				}
				same = s
			}
			k++
			i = jsonlex.SkipSpace(raw, end)
			if i >= len(raw) {
				return false, false
			}
			if raw[i] == ']' {
				return same && k == len(a), true
			}
			if raw[i] != ',' {
				return false, false
			}
			i = jsonlex.SkipSpace(raw, i+1)
		}
	case '"':
		if len(raw) < 2 {
			return false, false
		}
		b := raw[1 : len(raw)-1]
		if bytes.IndexByte(b, '\\') >= 0 || !utf8.Valid(b) {
			return false, false
		}
		s, isStr := v.(string)
		return isStr && s == string(b), true
	}
	switch lit := string(raw); {
	case lit == "true", lit == "false":
		b, isBool := v.(bool)
		return isBool && b == (lit == "true"), true
	case lit == "null":
		return v == nil, true
	case jsonlex.IsNumber(lit):
		n, isNum := v.(json.Number)
		return isNum && string(n) == lit, true
	}
	return false, false
}

// locationsValue is the tool's locations as its part metadata holds them:
// their JSON text (locationsText) for both forms. The one-pass form
// writes it into a buffer of its own first and shares the text of the
// tool's last announcement (tl.meta.obj) when it is the same (an update
// that repeats or keeps the locations): no allocation, and no cache of
// the tool's side (toolSide) for it. The text is shared by the events
// that carry it, which nothing changes.
func (d *Decoder) locationsValue(tl *tool) json.RawMessage {
	if d.general {
		return locationsText(tl.locations)
	}
	var buf [256]byte
	b := appendLocations(buf[:0], tl.locations)
	if last, ok := tl.meta.obj["locations"].(json.RawMessage); ok && bytes.Equal(last, b) {
		return last
	}
	return bytes.Clone(b)
}

// diffsValue is the tool's diffs (tl.diffs) as its metadata holds them,
// and whether it has any: the metadata values diffObjects makes for the
// general form (converted with the rest of the metadata), else their JSON
// representation, converted once for the same diffs (a tool's
// announcement and its result carry the same ones) and shared by the
// events that carry it. The diffs are made again only when the tool's
// content or writes were replaced (as metaKey tells them: the content's
// generation, the writes' first element and length).
func (d *Decoder) diffsValue(tl *tool) (any, bool) {
	if d.general {
		ds := tl.diffs()
		return diffObjects(ds), len(ds) > 0
	}
	if !tl.hasDiffs() {
		return nil, false
	}
	c := &tl.sideOf().diffs
	if c.v != nil && c.contentGen == tl.contentGen &&
		c.writes == firstOf(tl.writes) && c.nWrites == int32(len(tl.writes)) {
		return normalized{c.v}, true
	}
	ds := tl.diffs()
	if c.v == nil || !slices.Equal(c.src, ds) {
		v, ok := normalValue(diffObjects(ds))
		if !ok {
			c.v = nil
			return diffObjects(ds), true
		}
		c.src, c.v = ds, v
	}
	c.contentGen = tl.contentGen
	c.writes, c.nWrites = firstOf(tl.writes), int32(len(tl.writes))
	return normalized{c.v}, true
}

// hasDiffs reports whether tl.diffs has any.
func (tl *tool) hasDiffs() bool {
	if len(tl.writes) > 0 {
		return true
	}
	for _, c := range tl.content {
		if c.Type == "diff" {
			return true
		}
	}
	return false
}
