package acp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/mapper"
)

// checkSameValue compares sameValue(ParseAny(a), b) with the reference,
// reflect.DeepEqual of both parses, for valid a and b.
func checkSameValue(t *testing.T, a, b []byte) (same, known bool) {
	t.Helper()
	va, erra := jsonlex.ParseAny(a)
	vb, errb := jsonlex.ParseAny(b)
	if erra != nil || errb != nil || !json.Valid(a) || !json.Valid(b) {
		return false, false
	}
	same, known = sameValue(va, b)
	want := reflect.DeepEqual(va, vb)
	if known && same != want {
		t.Fatalf("sameValue(%s, %s) = %v, the parses compare %v", a, b, same, want)
	}
	// sameRaw, the two texts read in place, tells the same when it tells.
	if s, k := sameRaw(a, b); k && s != want {
		t.Fatalf("sameRaw(%s, %s) = %v, the parses compare %v", a, b, s, want)
	}
	return same, known
}

func TestSameValue(t *testing.T) {
	for _, c := range []struct {
		a, b        string
		same, known bool
	}{
		{`{"a":1,"b":[true,null,"x"]}`, `{ "b" : [ true , null , "x" ] , "a" : 1 }`, true, true},
		{`{"a":1}`, `{"a":1.0}`, false, true}, // numbers as written
		{`{"a":1}`, `{"a":1,"b":2}`, false, true},
		{`{"a":1,"b":2}`, `{"a":1}`, false, true},
		{`{"a":1,"b":2}`, `{"a":1,"c":2}`, false, true},
		{`[]`, `[ ]`, true, true},
		{`[1]`, `[]`, false, true},
		{`[1,2]`, `[1]`, false, true},
		{`[1]`, `[1,2]`, false, true},
		{`{}`, `[]`, false, true},
		{`"x"`, `"x"`, true, true},
		{`"x"`, `"y"`, false, true},
		{`false`, `false`, true, true},
		{`false`, `true`, false, true},
		{`null`, `null`, true, true},
		{`null`, `0`, false, true},
		{`{"a":"é"}`, `{"a":"\u00e9"}`, false, false}, // an escape: left to the parse
		{`{"a":1}`, `{"\u0061":1}`, false, false},
		{`{"a":2}`, `{"a":1,"a":2}`, false, false}, // a repeated name
		{`{"a":{"b":[{"c":"d"}]}}`, `{"a":{"b":[{"c":"d"}]}}`, true, true},
		{`{"a":{"b":[{"c":"d"}]}}`, `{"a":{"b":[{"c":"e"}]}}`, false, true},
	} {
		same, known := checkSameValue(t, []byte(c.a), []byte(c.b))
		if same != c.same || known != c.known {
			t.Errorf("sameValue(%s, %s) = %v, %v; want %v, %v", c.a, c.b, same, known, c.same, c.known)
		}
		if same, known := sameRaw([]byte(c.a), []byte(c.b)); same != c.same || known != c.known {
			t.Errorf("sameRaw(%s, %s) = %v, %v; want %v, %v", c.a, c.b, same, known, c.same, c.known)
		}
	}
}

// FuzzSameValue compares sameValue with the parse of both texts.
func FuzzSameValue(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[true,null,"x"]}`), []byte(`{"b":[true,null,"x"],"a":1}`))
	f.Add([]byte(`{"command":"ls","cwd":"/w"}`), []byte(`{"command":"ls","cwd":"/w","timeout":5}`))
	f.Add([]byte(`[1,[2,{"x":"y"}]]`), []byte(`[1,[2,{"x":"y"}]]`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		checkSameValue(t, a, a)
		checkSameValue(t, a, b)
	})
}

// TestOpaqueEncodesAsTree: a metadata object holding an opaque value as
// its text encodes, in the transcript, to the same bytes as one holding
// the value parsed (the mapper's encoder writes both in canonical form),
// and a text opaque refuses takes the tree.
func TestOpaqueEncodesAsTree(t *testing.T) {
	for _, raw := range []string{
		`{"b":1,"a":[{"z":null,"y":"\u00e9\n"}],"c":1e3}`,
		` [ "x" , 2 ] `,
		`"text"`,
		`{"a":"\u2028<&>"}`,
	} {
		rv, ok := opaque(json.RawMessage(raw))
		if !ok {
			t.Fatalf("opaque(%s) refused", raw)
		}
		if string(rv) != string(bytes.TrimSpace([]byte(raw))) {
			t.Fatalf("opaque(%s) = %s", raw, rv)
		}
		tree, err := jsonlex.ParseAny([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		enc := func(v any) []byte {
			b, err := mapper.EncodeObject(agent.Object{"rawOutput": v})
			if err != nil {
				t.Fatalf("encode %v: %v", v, err)
			}
			return b
		}
		if a, b := enc(rv), enc(tree); !bytes.Equal(a, b) {
			t.Fatalf("%s: as text %s, as a tree %s", raw, a, b)
		}
	}
	for _, raw := range []string{"", "  ", "{\"a\":\"\xff\"}"} {
		if _, ok := opaque(json.RawMessage(raw)); ok {
			t.Errorf("opaque(%q) kept", raw)
		}
	}
}

// TestSharedMetadataUnchanged: the metadata objects every decoder shares
// (providerOnly) are the same after all the captures went through a
// decoder and the reducer, which keep and merge event metadata.
func TestSharedMetadataUnchanged(t *testing.T) {
	for _, name := range captures {
		frames, _, err := readFrames(bytes.NewReader(readCapture(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder()
		red := mapper.NewReducer(mapper.Config{SessionID: "s", Directory: "/w"})
		for _, f := range frames {
			for _, e := range d.Decode(f) {
				red.Apply(e)
			}
		}
		if _, err := mapper.EncodeTranscript(red.Transcript()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, o := range providerMetas {
		if len(o) != 1 || o[agent.MetaProviderTool] != name {
			t.Fatalf("providerMetas[%q] = %v", name, o)
		}
	}
}
