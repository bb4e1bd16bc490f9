package mapper

import (
	"encoding/json"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// TestRedObjectsEqualText: a value kept as its JSON text equals the same
// value as a tree, and the same text written otherwise; another value
// does not.
func TestRedObjectsEqualText(t *testing.T) {
	tree := agent.Object{"raw": map[string]any{"a": json.Number("1"), "b": []any{"x", nil}}, "k": "v"}
	for _, c := range []struct {
		a, b agent.Object
		want bool
	}{
		{agent.Object{"raw": json.RawMessage(`{"b":["x",null],"a":1}`), "k": "v"}, tree, true},
		{agent.Object{"raw": json.RawMessage(`{"b":["x",null],"a":1}`), "k": "v"}, agent.Object{"raw": json.RawMessage(`{ "a" : 1, "b":["x",null]}`), "k": "v"}, true},
		{agent.Object{"raw": json.RawMessage(`{"b":["x",null],"a":1.0}`), "k": "v"}, tree, false},
		{agent.Object{"raw": json.RawMessage(`{"b":["x",null],"a":1}`), "k": "w"}, tree, false},
		{agent.Object{"raw": json.RawMessage(`{"b":["x",null],"a":1}`)}, tree, false},
	} {
		if got := redObjectsEqual(c.a, c.b); got != c.want {
			t.Errorf("redObjectsEqual(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := redObjectsEqual(c.b, c.a); got != c.want {
			t.Errorf("redObjectsEqual(%v, %v) = %v, want %v", c.b, c.a, got, c.want)
		}
	}
	// redAdd: the same value as a text is no contradiction, another is.
	base := agent.Object{"rawOutput": map[string]any{"a": json.Number("1")}}
	if _, ok := redAdd(base, agent.Object{"rawOutput": json.RawMessage(`{"a":1}`)}); !ok {
		t.Error("redAdd: the same value as a text contradicts")
	}
	if _, ok := redAdd(base, agent.Object{"rawOutput": json.RawMessage(`{"a":2}`)}); ok {
		t.Error("redAdd: another value as a text adds")
	}
}
