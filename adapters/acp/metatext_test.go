package acp

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// treeText is what agent.EncodeEvent writes for v as the metadata held it
// before optionsText and locationsText: the tree a json.Marshal and a
// parse make of it, encoded without HTML escaping.
func treeText(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := jsonlex.ParseAny(raw)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// checkMetaText fails unless optionsText and locationsText of strings
// made from a, b and c are the bytes treeText gives for the options and
// locations themselves, valid JSON that parses to the same tree.
func checkMetaText(t *testing.T, a, b, c string, line int64) {
	t.Helper()
	opts := []PermissionOption{{OptionID: a, Name: b, Kind: c}, {OptionID: c, Name: a, Kind: b}}
	locs := []location{{Path: a, Line: &line}, {Path: b}, {Path: c}}
	for _, x := range []struct {
		name string
		got  json.RawMessage
		v    any
	}{
		{"options", optionsText(opts), opts},
		{"no options", optionsText([]PermissionOption{}), []PermissionOption{}},
		{"nil options", optionsText(nil), []PermissionOption(nil)},
		{"locations", locationsText(locs), locs},
		{"nil locations", locationsText(nil), []location(nil)},
	} {
		if want := treeText(t, x.v); !bytes.Equal(x.got, want) {
			t.Fatalf("%s: %s, want %s", x.name, x.got, want)
		}
		if !json.Valid(x.got) {
			t.Fatalf("%s: %s is not JSON", x.name, x.got)
		}
	}
}

// TestMetaText: a permission's options and a tool's locations as their
// JSON text are what the tree the metadata held before gives (sorted
// keys; no HTML escaping; what is not UTF-8 as U+FFFD), so the events and
// transcripts stay as they were.
func TestMetaText(t *testing.T) {
	checkMetaText(t, "allow", "Allow once", "allow_once", 12)
	checkMetaText(t, "<a&b>", "quote \" back \\ slash", "tab\tnew\nline\r\b\f\x01\x1f", -3)
	checkMetaText(t, "bad \xff\xfe utf-8 \xe2\x82", "\u2028\u2029 é 世界 \U0001F600", "", 0)
}

// FuzzMetaText is TestMetaText for any strings.
func FuzzMetaText(f *testing.F) {
	f.Add("allow", "Allow <once>", "allow_once", int64(1))
	f.Add("\xff", "\u2028", "\x00", int64(-1))
	f.Fuzz(func(t *testing.T, a, b, c string, line int64) {
		checkMetaText(t, a, b, c, line)
	})
}
