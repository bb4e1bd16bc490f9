package acp

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// TestPartMetaOver: the part's members put into a copy of the canonical
// metadata give exactly what the general form's merge of the two objects
// gives (buildPartMeta, then maps.Copy of each): the values below, the
// part's members over base's, base itself when the part has none, an
// empty object (not nil) when neither has members, and the part's own
// object made apart when a member is left to toObject (a description not
// in UTF-8).
func TestPartMetaOver(t *testing.T) {
	locs := json.RawMessage(`[{"path":"/a"}]`)
	base := agent.Object{"providerTool": "Bash", "description": "from the canonical form"}
	cases := []struct {
		name string
		pm   partMetaMembers
		base agent.Object
		want agent.Object
		same bool // the result is base itself
	}{
		{"neither", partMetaMembers{}, nil, agent.Object{}, false},
		{"base only", partMetaMembers{}, base, base, true},
		{"part only", partMetaMembers{locations: locs, hasLoc: true}, nil,
			agent.Object{"locations": locs}, false},
		{"both", partMetaMembers{locations: locs, hasLoc: true, terminals: []string{"t1"}}, base,
			agent.Object{"providerTool": "Bash", "description": "from the canonical form", "locations": locs, "terminals": []any{"t1"}}, false},
		{"the part's description over base's", partMetaMembers{desc: "pending text"}, base,
			agent.Object{"providerTool": "Bash", "description": "pending text"}, false},
		{"a description toObject converts", partMetaMembers{desc: "bad \xff"}, base,
			agent.Object{"providerTool": "Bash", "description": "bad \ufffd"}, false},
	}
	d := NewDecoder()
	ref := NewDecoder()
	ref.general = true
	over := func(pm *partMetaMembers, base agent.Object) agent.Object {
		tl := &tool{canon: canonCache{gen: 1, meta: base}}
		return d.partMetaOver(pm, tl, 1)
	}
	keys := func(pm *partMetaMembers, base agent.Object) int {
		return d.baseKeys(&tool{canon: canonCache{gen: 1, meta: base}}, pm)
	}
	for _, c := range cases {
		got := over(&c.pm, c.base)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v, want %#v", c.name, got, c.want)
		}
		if got == nil {
			t.Errorf("%s: nil, want an object", c.name)
		}
		if c.same && !sameMap(got, c.base) {
			t.Errorf("%s: a copy, want base shared", c.name)
		}
		// The reference: the part's object made (general form: its
		// values converted through JSON) and merged.
		pm := ref.buildPartMeta(c.pm)
		merged := make(agent.Object, len(c.base)+len(pm))
		maps.Copy(merged, c.base)
		maps.Copy(merged, pm)
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(merged)
		if string(a) != string(b) {
			t.Errorf("%s: %s, the general form gives %s", c.name, a, b)
		}
		if c.pm.desc != "bad \xff" && !c.pm.sameOver(got, keys(&c.pm, c.base)) {
			t.Errorf("%s: sameOver does not recognise the object it was made from", c.name)
		}
	}
	// sameOver counts base's other members: a member more or less is not
	// the same object.
	pm := partMetaMembers{desc: "x"}
	o := over(&pm, base)
	if !pm.sameOver(o, keys(&pm, base)) {
		t.Error("sameOver: the object made over base is not recognised")
	}
	if pm.sameOver(o, keys(&pm, agent.Object{"providerTool": "Bash", "other": true})) {
		t.Error("sameOver: the object made over another base is taken for the same")
	}
	if (&partMetaMembers{desc: "y"}).sameOver(o, keys(&pm, base)) {
		t.Error("sameOver: another description is taken for the same")
	}
}

// sameMap reports whether a and b are the same map (not merely equal).
func sameMap(a, b agent.Object) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// TestDeferredProviderInput: a tool's canonical metadata that keeps the
// agent's input is not made while the announcements merge it with part
// members (canonCache.deferred): the one object partMetaOver makes holds
// its members, exactly as the merge of the object made alone would; made
// alone (canonMeta), it is withProviderInput's, and kept.
func TestDeferredProviderInput(t *testing.T) {
	locs := json.RawMessage(`[{"path":"/a"}]`)
	cases := []struct {
		name, kind string
		rawInput   json.RawMessage
		wantInput  any
	}{
		{"input kept as its text", "execute", json.RawMessage(`{"cmd":"ls","n":1}`), json.RawMessage(`{"cmd":"ls","n":1}`)},
		{"input not UTF-8, parsed", "read", json.RawMessage("{\"p\":\"a\xffb\"}"), map[string]any{"p": "a\ufffdb"}},
		{"no provider", "", json.RawMessage(`{"x":true}`), json.RawMessage(`{"x":true}`)},
	}
	for _, c := range cases {
		d := NewDecoder()
		tl := &tool{kind: c.kind, rawInput: c.rawInput}
		meta, deferred := d.toolMetadata(tl, c.kind, c.rawInput, json.RawMessage(`{"path":"/a"}`))
		if !deferred || meta != nil {
			t.Fatalf("%s: toolMetadata = %v, %v; want deferred", c.name, meta, deferred)
		}
		tl.canon = canonCache{gen: 7, deferred: true}
		pm := partMetaMembers{locations: locs, hasLoc: true}
		want := agent.Object{agent.MetaProviderInput: c.wantInput, "locations": locs}
		if c.kind != "" {
			want[agent.MetaProviderTool] = c.kind
		}
		if got := d.partMetaOver(&pm, tl, 7); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: partMetaOver = %#v, want %#v", c.name, got, want)
		} else if !pm.sameOver(got, d.baseKeys(tl, &pm)) {
			t.Errorf("%s: sameOver does not recognise the object made over the deferred metadata", c.name)
		}
		if !tl.canon.deferred {
			t.Errorf("%s: the metadata was made to merge it", c.name)
		}
		alone := d.canonMeta(tl, 7)
		if ref := d.withProviderInput(tl, c.kind, c.rawInput); !reflect.DeepEqual(alone, ref) {
			t.Errorf("%s: canonMeta = %#v, want %#v", c.name, alone, ref)
		}
		if tl.canon.deferred || !sameMap(d.canonMeta(tl, 7), alone) {
			t.Errorf("%s: the metadata made alone is not kept", c.name)
		}
	}
}
