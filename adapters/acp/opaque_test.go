package acp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/mapper"
)

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
