package acp

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// This file keeps what a tool update would otherwise compute again from the
// whole tool: the canonical name, input and metadata (canonical) until
// what they are computed from changes, which the tool counts in its
// revision (changedSince). An update that changes nothing they depend on
// (a status, an output) costs a comparison of the fields, not a rebuild of
// the input through encoding/json. The permission patterns of a canonical
// input are read in one pass (patternsOf), not kept. The general form
// (Decoder.general) keeps none and computes everything each time; the
// tests compare the two.

// canonKey is everything of the tool buildCanonical reads: its fields, of
// the content only its one diff (tl.diff: whether there is one, its old
// and new text), of the locations only the first one's path (pathOf).
// It is taken on the stack around what changes those fields (fieldsOf,
// mergeTool), which counts a change in the tool's revision (tool.rev):
// the cache holds the revision, not the key, so that the tool struct is
// smaller by the key's 160 bytes (docs/ARCHITECTURE.md "Mapping and
// delivery figures").
type canonKey struct {
	rawInput                          []byte
	locPath                           string
	diffOld                           *string
	diffNew                           string
	kind, title, metaTool, firstTitle string
	hintCwd, hintDesc                 string
	hasLoc, hasDiff                   bool
}

// fieldsOf is the canonKey of the tool's fields as they are.
func fieldsOf(tl *tool) canonKey {
	key := canonKey{rawInput: tl.rawInput, kind: tl.kind, title: tl.title,
		metaTool: tl.metaTool, firstTitle: tl.firstTitle,
		hintCwd: tl.hintCwd, hintDesc: tl.hintDesc}
	if len(tl.locations) > 0 {
		key.hasLoc, key.locPath = true, tl.locations[0].Path
	}
	if df := tl.diff(); df != nil {
		key.hasDiff, key.diffOld, key.diffNew = true, df.OldText, df.NewText
	}
	return key
}

func (k *canonKey) same(o *canonKey) bool {
	return (k.rawInput == nil) == (o.rawInput == nil) && bytes.Equal(k.rawInput, o.rawInput) &&
		k.hasLoc == o.hasLoc && k.locPath == o.locPath &&
		k.hasDiff == o.hasDiff && k.diffNew == o.diffNew && sameText(k.diffOld, o.diffOld) && k.kind == o.kind && k.title == o.title &&
		k.metaTool == o.metaTool && k.firstTitle == o.firstTitle &&
		k.hintCwd == o.hintCwd && k.hintDesc == o.hintDesc
}

// changedSince counts a change of the fields buildCanonical reads in the
// tool's revision: before is their key before the change (fieldsOf).
// Every change of those fields after the tool's first canonical form is
// made through mergeTool or followed by this (permission).
func (tl *tool) changedSince(before *canonKey) {
	if after := fieldsOf(tl); !after.same(before) {
		tl.rev++
	}
}

// canonCache is a tool's canonical name, input and metadata as last
// computed, with what they were computed from (the tool's revision,
// whether the agent is OpenCode, isOpenCode, and whether the metadata
// has the agent's input) and their generation.
//
// gen is never 0 once computed (Decoder.gen counts from 1): 0 is none yet,
// without a flag of its own, which would take a word of every tool.
//
// deferred: meta is nil and stands for the metadata withProviderInput
// makes of the tool's fields ({"providerTool": provider, "providerInput":
// the agent's input}), not made yet: an announcement that merges it with
// the part's members puts its two members straight into the one object
// it makes (partMetaOver), and canonMeta makes it when it is wanted alone.
type canonCache struct {
	gen                               uint64
	rev                               uint32
	opencode, providerInput, deferred bool
	name                              string
	input                             json.RawMessage
	meta                              agent.Object
}

// canonicalOf is canonical without the copy: the metadata it returns is
// the cached one, which the caller must not change, and its generation (0
// for the general form). The same generation is the same name, input and
// metadata.
func (d *Decoder) canonicalOf(tl *tool) (string, json.RawMessage, agent.Object, uint64) {
	if d.general {
		name, input, meta, _ := d.buildCanonical(tl)
		return name, input, meta, 0
	}
	name, input, gen := d.canonicalDeferred(tl)
	return name, input, d.canonMeta(tl, gen), gen
}

// canonicalDeferred is canonicalOf (one-pass form) without the metadata,
// which may not be made yet (canonCache.deferred): canonMeta makes it,
// partMetaOver merges it.
func (d *Decoder) canonicalDeferred(tl *tool) (string, json.RawMessage, uint64) {
	opencode := d.isOpenCode()
	if c := &tl.canon; c.gen != 0 && c.rev == tl.rev && c.opencode == opencode && c.providerInput == tl.providerInput {
		return c.name, c.input, c.gen
	}
	name, input, meta, deferred := d.buildCanonical(tl)
	// Once computed, providerInput is what it stays for the same fields:
	// a metadata with the agent's input set it.
	d.gen++
	tl.canon = canonCache{gen: d.gen, rev: tl.rev, opencode: opencode, providerInput: tl.providerInput,
		deferred: deferred, name: name, input: input, meta: meta}
	return name, input, d.gen
}

// canonMeta returns the canonical metadata of the tool's cache, of
// generation gen (what canonicalDeferred returned), made now and kept when
// it was deferred.
func (d *Decoder) canonMeta(tl *tool, gen uint64) agent.Object {
	c := &tl.canon
	if c.deferred && c.gen == gen {
		provider, raw := d.providerOf(tl)
		c.meta, c.deferred = d.withProviderInput(tl, provider, raw), false
	}
	return c.meta
}

// toolPatterns is agent.ToolPatterns(name, input), read in one pass by
// the one-pass form (patternsOf); the patterns are the caller's own. It
// is not kept per tool: a tool is asked about once or twice, and the
// patterns cost a slice either way (kept, they were copied for each
// caller), while a cache of them took the tool's side caches (toolSide)
// for a tool that needs them for nothing else.
func (d *Decoder) toolPatterns(name string, input json.RawMessage) ([]string, bool) {
	if d.general {
		return agent.ToolPatterns(name, input)
	}
	return patternsOf(name, input)
}

// sameText reports whether a and b are both nil or the same text.
func sameText(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// patternsOf is agent.ToolPatterns read in one pass: the input's members
// split in place (members) instead of decoded into a map. An input that
// is not an object goes to agent.ToolPatterns.
func patternsOf(name string, input json.RawMessage) ([]string, bool) {
	if _, _, mcp := agent.ParseMCPTool(name); mcp {
		return []string{"*"}, true
	}
	key := ""
	switch name {
	case agent.ToolBash:
		key = "command"
	case agent.ToolRead, agent.ToolWrite, agent.ToolEdit:
		key = "path"
	case agent.ToolGlob, agent.ToolGrep:
		key = "pattern"
	case agent.ToolFetch:
		key = "url"
	case agent.ToolSearch:
		key = "query"
	case agent.ToolTask:
		key = "agent"
	default:
		return nil, false
	}
	in, ok := members(input)
	if !ok || !jsonlex.Valid(input) {
		return agent.ToolPatterns(name, input)
	}
	s, ok := str(in.get(key))
	if !ok || s == "" {
		return nil, false
	}
	return []string{s}, true
}

// repeatsParts is the one-pass repeats of the announcement whose metadata
// is meta with part over it, without building that metadata: whether it
// says what the last one said (all of it, or only its name, title and
// input when finishing).
func repeatsParts(a *announcement, name, title string, input json.RawMessage, meta, part agent.Object, finishing bool) bool {
	if !a.done || a.tool != name || a.title != title || !sameInput(a.input, input) {
		return false
	}
	return finishing || sameMerged(a.meta, meta, part)
}

// sameMerged is sameMeta(a, b) for b the union of meta and part (part's
// values over meta's).
func sameMerged(a, meta, part agent.Object) bool {
	n := len(part)
	for k := range meta {
		if _, over := part[k]; !over {
			n++
		}
	}
	if len(a) == 0 || n == 0 {
		return len(a) == n
	}
	if len(a) != n {
		return false
	}
	for k, v := range part {
		if av, ok := a[k]; !ok || !sameMetaValue(av, v) {
			return false
		}
	}
	for k, v := range meta {
		if _, over := part[k]; over {
			continue
		}
		if av, ok := a[k]; !ok || !sameMetaValue(av, v) {
			return false
		}
	}
	return true
}

// spareContent is the most content items an emptied tool keeps room for:
// a larger array is let go, so what the pool of emptied tools holds stays
// a few KB per tool.
const spareContent = 4

// toolPool holds emptied tool structs (*tool) for any decoder's next
// tools: a turn's tools go back at its end (resetTools), so a decoder's
// tools after its first turn, and a new session's first tools once
// another session ended a turn, cost no allocation of their 512 bytes.
// sync.Pool lets the GC empty it: an idle process keeps none.
var toolPool = sync.Pool{New: func() any { return new(tool) }}

// resetTools empties the turn's tool scope for the next turn: a map of a
// few tools is cleared and kept (the space a map of up to eight entries
// takes; emptied, it holds nothing), a larger one is let go, so what a
// decoder holds between turns does not grow with the largest turn. The
// turn's tool structs are zeroed (holding nothing; a content array of up
// to spareContent items is kept, zeroed) and put in toolPool for the next
// tools of any decoder: nothing keeps a *tool past its turn (events hold
// copies of its fields), so a struct of 512 bytes is not allocated again
// per call (docs/ARCHITECTURE.md "Mapping and delivery figures"). The
// general form allocates every tool anew and gives none back.
func (d *Decoder) resetTools() {
	if !d.general {
		for tl := range d.tools.Values() {
			side := tl.side // kept, emptied, for the next tool's caches
			if side != nil {
				*side = toolSide{}
			}
			// The content's array too when it is small, its items zeroed
			// (mergeFields writes a next tool's first content into it).
			var content []toolContent
			if cap(tl.content) <= spareContent {
				content = tl.content[:cap(tl.content)]
				clear(content)
			}
			*tl = tool{side: side, content: content[:0]}
			toolPool.Put(tl)
		}
	}
	d.tools.Clear()
}

// newTool returns a zero tool: an emptied one from toolPool, or a new
// one (always new in the general form).
func (d *Decoder) newTool() *tool {
	if d.general {
		return &tool{}
	}
	return toolPool.Get().(*tool)
}
