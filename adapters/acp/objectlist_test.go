package acp

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// rawOutputTextJSON is rawOutputText's list of blocks as it was read
// before objectList: by json.Unmarshal into a []map[string]json.RawMessage
// (todoItemsJSON is todoItems' reading). ok is false where it took no list
// (the Unmarshal failed).
func rawOutputTextJSON(raw json.RawMessage) (string, bool) {
	var blocks []map[string]json.RawMessage
	if t := bytes.TrimSpace(raw); len(t) == 0 || (t[0] != '[' && t[0] != 'n') || json.Unmarshal(raw, &blocks) != nil {
		return "", false
	}
	var parts []string
	for _, m := range blocks {
		b := objOf(m)
		if t, _ := str(b.get("type")); t == "text" {
			parts = append(parts, first(b, "text"))
		}
	}
	return strings.Join(parts, "\n"), true
}

// rawOutputTextRest is rawOutputText of what is not a list of blocks: a
// string, else an object's members.
func rawOutputTextRest(raw json.RawMessage) string {
	if s, ok := str(raw); ok {
		return s
	}
	return objectOutput(raw)
}

var objectListSeeds = []string{
	`[{"type":"text","text":"a"},{"type":"image","data":"x"},{"type":"text","text":"b"}]`,
	`[{"type":"t\u0065xt","text":"esc"},null,{"type":"text","text":"c","type":"image"}]`,
	`[{"type":"text","text":"a"},5]`,
	`[{"content":"write","status":"pending","priority":"high","id":"1"},{"description":"d","status":"completed"}]`,
	`[{"content":"a"},"b",null,[1],{"id":2}]`,
	`null`, `[]`, ` [ ] `, `{"output":"x"}`, `"s"`, `42`, ``, `[`, `[{"type":"text","text":"\ud800"}]`,
	`[{"type":"text","text":"` + strings.Repeat("x", 40) + `"}` + strings.Repeat(`,{"type":"text","text":"y"}`, 20) + `]`,
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	`[` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `]`,
}

// TestObjectListMatchesUnmarshal: rawOutputText and todoItems read the
// lists as json.Unmarshal did.
func TestObjectListMatchesUnmarshal(t *testing.T) {
	for _, s := range objectListSeeds {
		checkObjectLists(t, []byte(s))
	}
}

// FuzzObjectList compares rawOutputText's and todoItems' readings of
// arbitrary JSON with json.Unmarshal's.
func FuzzObjectList(f *testing.F) {
	for _, s := range objectListSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkObjectLists)
}

func checkObjectLists(t *testing.T, raw []byte) {
	if !json.Valid(raw) && len(bytes.TrimSpace(raw)) > 0 {
		// The decoder reads only members of validated frames (and
		// absent ones).
		return
	}
	want, list := rawOutputTextJSON(raw)
	if _, isStr := str(raw); isStr || !list {
		// Not a list: the rest of rawOutputText, unchanged, reads it.
		want = rawOutputTextRest(raw)
	}
	if got := rawOutputText(raw); got != want {
		t.Fatalf("rawOutputText(%q) = %q, json.Unmarshal %q", raw, got, want)
	}
	if got, want := todoItems(raw), todoItemsJSON(raw); !reflect.DeepEqual(got, want) {
		t.Fatalf("todoItems(%q) = %#v, json.Unmarshal %#v", raw, got, want)
	}
}
