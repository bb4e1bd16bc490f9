package acp

import (
	"bytes"
	"encoding/json"
	"maps"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// This file holds how the decoder writes a tool's metadata: the values of
// the agent's it keeps as their JSON text (opaque), a permission's options
// and a tool's locations as JSON text, and whether an announcement repeats
// the last one.

// metaText is the JSON text of v (a permission's options, a tool's
// locations) as the metadata keeps it: the bytes agent.EncodeEvent writes
// for the tree json.Marshal and a parse make of v (keys sorted, no HTML
// escaping, what is not UTF-8 as U+FFFD), so a transcript and an event
// read the same as if the metadata held the tree ("null" for nil). The
// text is one value where the tree took a map per option or location.
func metaText(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	tree, err := jsonlex.ParseAny(raw)
	if err != nil {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(tree) != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// opaque returns an opaque JSON value of the agent's (a tool's rawOutput,
// a permission's rawInput, the agent's input kept as providerInput) as the
// metadata keeps it: its text, a member of a frame jsonrpc validated, as a
// json.RawMessage instead of a tree parsed from it. The transcript's
// encoder (mapper, codec_json.go) validates such a value and writes it in
// canonical form (sorted keys, numbers as given), the bytes the parsed
// tree gives; agent.EncodeEvent writes it compacted, keys in the agent's
// order. ok is false for a text a parse would not keep as it is (not
// UTF-8: json.Marshal replaces what is not; nested deeper than
// encoding/json decodes), which takes the tree.
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

// toolMetadata is agent.ToolMetadata (the agent's name of the tool, and
// its input when that is not the canonical input), the input kept as its
// text (opaque) when it can be.
func toolMetadata(provider string, raw, input json.RawMessage) agent.Object {
	if t := bytes.TrimSpace(raw); len(t) > 0 && bytes.Equal(t, bytes.TrimSpace(input)) && !tooDeep(t) {
		// The same text is the same value: the agent's input is the
		// canonical one, and need not be decoded to tell.
		return agent.ToolMetadata(provider, nil, nil)
	}
	return providerInputText(agent.ToolMetadata(provider, raw, input), raw)
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

// announcement is what a tool's last ToolCall said, to skip repeats:
// whether there was one, its JSON (announcementJSON) and the JSON of its
// head (name, title and input).
type announcement struct {
	done       bool
	full, head string
}

// headJSON is the JSON of ev's name, title and input.
func headJSON(ev *agent.ToolCall) string {
	b, _ := json.Marshal(agent.ToolCall{Tool: ev.Tool, Title: ev.Title, Input: ev.Input})
	return string(b)
}

// announcementJSON is the JSON of ev its repeats are told by: its
// metadata's texts as the trees they parse to, so that the same value
// written with other spacing or another member order is the same.
func announcementJSON(ev *agent.ToolCall) string {
	c := *ev
	c.Metadata = treeMeta(ev.Metadata)
	full, _ := json.Marshal(&c)
	return string(full)
}

// treeMeta is m with every value kept as its JSON text replaced by the
// tree it parses to (m itself when it holds none).
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

// diffsValue is the tool's diffs (tl.diffs) as its metadata holds them,
// and whether it has any.
func diffsValue(tl *tool) (any, bool) {
	ds := tl.diffs()
	return diffObjects(ds), len(ds) > 0
}
