package acp

import (
	"bytes"
	"encoding/json"
	"reflect"
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
	case []location:
		if v == nil {
			return nil, false
		}
		out := make([]any, len(v))
		for i, l := range v {
			if !utf8.ValidString(l.Path) {
				return nil, false
			}
			o := map[string]any{"path": l.Path}
			if l.Line != nil {
				o["line"] = json.Number(strconv.FormatInt(*l.Line, 10))
			}
			out[i] = o
		}
		return out, true
	case []PermissionOption:
		if v == nil {
			return nil, false
		}
		out := make([]any, len(v))
		for i, o := range v {
			if !utf8.ValidString(o.OptionID) || !utf8.ValidString(o.Name) || !utf8.ValidString(o.Kind) {
				return nil, false
			}
			out[i] = map[string]any{"optionId": o.OptionID, "name": o.Name, "kind": o.Kind}
		}
		return out, true
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
	}
	return nil, false
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
// its input when that is not the canonical input.
func (d *Decoder) toolMetadata(tl *tool, provider string, raw, input json.RawMessage) agent.Object {
	if d.general || tooDeep(raw) || tooDeep(input) {
		return agent.ToolMetadata(provider, raw, input)
	}
	m := agent.Object{}
	if provider != "" {
		m[agent.MetaProviderTool] = provider
	}
	if isNull(raw) {
		return m
	}
	if bytes.Equal(bytes.TrimSpace(raw), bytes.TrimSpace(input)) {
		return m // the same text: the same value
	}
	c := &tl.same
	if c.known && c.ok && bytes.Equal(c.raw, raw) && bytes.Equal(c.input, input) {
		return m // found the same value for the same texts before
	}
	var rv any
	if p := &tl.parsed; p.raw != nil && bytes.Equal(p.raw, raw) {
		rv = p.v
	} else {
		var err error
		if rv, err = jsonlex.ParseAny(raw); err != nil {
			return agent.ToolMetadata(provider, raw, input)
		}
		p.raw, p.v = raw, rv
	}
	if c.known && !c.ok && bytes.Equal(c.raw, raw) && bytes.Equal(c.input, input) {
		m[agent.MetaProviderInput] = rv
		return m
	}
	if len(bytes.TrimSpace(input)) > 0 {
		cv, err := jsonlex.ParseAny(input)
		if err != nil {
			return agent.ToolMetadata(provider, raw, input)
		}
		same := reflect.DeepEqual(rv, cv)
		c.raw, c.input, c.ok, c.known = raw, input, same, true
		if same {
			return m
		}
	}
	m[agent.MetaProviderInput] = rv
	return m
}

// announcement is what a tool's last ToolCall said, to skip repeats.
type announcement struct {
	// The general form: the event and its head (name, title and input)
	// as JSON.
	full, head string
	// The one-pass form: the event's fields.
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
			full, _ := json.Marshal(ev)
			return string(full) == a.full
		}
		sig, _ := json.Marshal(agent.ToolCall{Tool: ev.Tool, Title: ev.Title, Input: ev.Input})
		return string(sig) == a.head
	}
	if !a.done || a.tool != ev.Tool || a.title != ev.Title || !sameInput(a.input, ev.Input) {
		return false
	}
	return head || sameMeta(a.meta, ev.Metadata)
}

// remember records ev as the tool's last announcement.
func (d *Decoder) remember(a *announcement, ev *agent.ToolCall) {
	if d.general {
		full, _ := json.Marshal(ev)
		sig, _ := json.Marshal(agent.ToolCall{Tool: ev.Tool, Title: ev.Title, Input: ev.Input})
		a.full, a.head = string(full), string(sig)
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

// sameMeta reports whether two metadata objects marshal the same: their
// values are in the JSON representation (strings that are UTF-8, json.Number,
// bool, nil, []any, map[string]any), where that is equality of values; an
// empty object is left out as nil is.
func sameMeta(a, b agent.Object) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return reflect.DeepEqual(a, b)
}

// metaKey is what a tool's part metadata is built from (partMeta): its
// content, locations and writes, which are only ever replaced or
// appended to, never changed in place, so the same slices hold the same
// values.
type metaKey struct {
	content    []toolContent
	locations  []location
	writes     []agent.FileDiff
	outContent bool
}

func (k metaKey) same(o metaKey) bool {
	return sameSlice(k.content, o.content) && sameSlice(k.locations, o.locations) &&
		sameSlice(k.writes, o.writes) && k.outContent == o.outContent
}

// sameSlice reports whether a and b are the same elements of the same
// array.
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
