package jsonlex

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestFieldLookups(t *testing.T) {
	cases := []struct {
		raw, name string
		val       string
		ok        bool
	}{
		{`{"a":1,"b":"x"}`, "b", `"x"`, true},
		{`{"a":1,"A":2}`, "a", `2`, true}, // case-folded match, the last wins
		{`{"threadId":"t","THREADID":null}`, "threadId", `null`, true},
		{`{"\u0061":"esc"}`, "a", `"esc"`, true}, // an escaped name
		{`{"a":{"b":1}}`, "b", ``, false},        // members only, not nested ones
		{`[1]`, "a", ``, false},
		{` { "a" : [1, {"x":"}"}] } `, "a", `[1, {"x":"}"}]`, true},
	}
	for _, c := range cases {
		v, ok := Field([]byte(c.raw), c.name)
		if ok != c.ok || string(v) != c.val {
			t.Errorf("Field(%s, %q) = %q, %v; want %q, %v", c.raw, c.name, v, ok, c.val, c.ok)
		}
	}
	vals := make([][]byte, 2)
	Fields([]byte(`{"x":1,"y":"z","x":3}`), vals, "x", "y")
	if string(vals[0]) != "3" || string(vals[1]) != `"z"` {
		t.Errorf("Fields = %q", vals)
	}
	s, ok := StringOf([]byte(` "a\nb" `))
	if !ok || s != "a\nb" {
		t.Errorf("StringOf = %q, %v", s, ok)
	}
	if _, ok := StringOf([]byte(`null`)); ok {
		t.Error("StringOf(null) ok")
	}
	m, err := ObjectMap([]byte(`{"a":1,"b":[2],"a":"last"}`))
	if err != nil || !reflect.DeepEqual(m, map[string]json.RawMessage{"a": json.RawMessage(`"last"`), "b": json.RawMessage(`[2]`)}) {
		t.Errorf("ObjectMap = %v, %v", m, err)
	}
	if _, err := ObjectMap([]byte(`[]`)); err == nil {
		t.Error("ObjectMap of an array: no error")
	}
}

// FuzzFieldsMatchEncodingJSON: on any valid object, StringFields and Field
// read what json.Unmarshal puts into string and json.RawMessage fields, and
// ObjectMap what it puts into a map[string]json.RawMessage.
func FuzzFieldsMatchEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"threadId":"t","itemId":"i","delta":"d"}`, `{"ThreadID":"a","threadid":5,"itemId":null}`,
		`{"\u0074hreadId":"\ud83d\ude00","delta":{"x":[1,"]"]}}`, `{"delta":"\xff"}`, `{}`, `{"K":1,"\u212a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || KindOf(b) != KindObject {
			return
		}
		var want struct {
			ThreadID string          `json:"threadId"`
			ItemID   string          `json:"itemId"`
			Delta    json.RawMessage `json:"delta"`
		}
		_ = json.Unmarshal(b, &want)
		var th, it string
		StringFields(b, []*string{&th, &it}, "threadId", "itemId")
		if th != want.ThreadID || it != want.ItemID {
			t.Fatalf("StringFields(%s) = %q, %q; json: %q, %q", b, th, it, want.ThreadID, want.ItemID)
		}
		if d, _ := Field(b, "delta"); string(d) != string(want.Delta) {
			t.Fatalf("Field(%s, delta) = %q; json: %q", b, d, want.Delta)
		}
		if rest, val, ok := CutField(b, "delta"); ok != (want.Delta != nil) || string(val) != string(want.Delta) {
			t.Fatalf("CutField(%s, delta) = %q, %v; json: %q", b, val, ok, want.Delta)
		} else if ok {
			var got struct {
				ThreadID string          `json:"threadId"`
				ItemID   string          `json:"itemId"`
				Delta    json.RawMessage `json:"delta"`
			}
			if !Valid(rest) || json.Unmarshal(rest, &got) != nil && json.Unmarshal(b, &want) == nil || got.Delta != nil ||
				got.ThreadID != want.ThreadID || got.ItemID != want.ItemID {
				t.Fatalf("CutField(%s, delta) rest %s decodes to %+v; json of the whole: %+v", b, rest, got, want)
			}
		}
		var wm map[string]json.RawMessage
		if json.Unmarshal(b, &wm) == nil {
			m, err := ObjectMap(b)
			if err != nil || len(m) != len(wm) {
				t.Fatalf("ObjectMap(%s) = %v, %v; json: %v", b, m, err, wm)
			}
			for k, v := range wm {
				if string(m[k]) != string(v) {
					t.Fatalf("ObjectMap(%s)[%q] = %q; json: %q", b, k, m[k], v)
				}
			}
		}
	})
}

// FuzzValid: Valid agrees with json.Valid on every input.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,-0.5e+3,true,false,null,"\u00e9\n"]}`, `01`, `-`, `1.`, `1e`, `"\x01"`, `"\q"`,
		`{"a":1,}`, `[1 2]`, ` {} `, `{"a" 1}`, `"\ud800"`, "\"\xff\"", `[]]`, `{]`, `nul`, `truex`, `""`, ``, `[` + string(make([]byte, 3)) + `]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", b, got, want)
		}
	})
}

func TestValidDepth(t *testing.T) {
	for _, n := range []int{maxDepth, maxDepth + 1} {
		b := []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Errorf("depth %d: Valid %v, json.Valid %v", n, got, want)
		}
	}
}

// BenchmarkValid compares Valid with json.Valid on a Codex notification
// with a long string, the common frame.
func BenchmarkValid(b *testing.B) {
	data := []byte(`{"method":"item/completed","params":{"threadId":"019a","turnId":"1","item":{"type":"commandExecution","id":"call_x","command":"/bin/bash -lc 'ls -la'","aggregatedOutput":"` +
		strings.Repeat(`total 48\ndrwxr-xr-x  5 user user 4096 Jan  1 00:00 .\n`, 40) + `","exitCode":0,"durationMs":12,"status":"completed"}}}`)
	for _, c := range []struct {
		name string
		fn   func([]byte) bool
	}{{"jsonlex", Valid}, {"encoding-json", json.Valid}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if !c.fn(data) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// TestNeedsLook checks the eight-byte test of Valid's string scan against
// the byte table, for every byte value at every position, and on words
// mixing several bytes.
func TestNeedsLook(t *testing.T) {
	check := func(b [8]byte) {
		want := false
		for _, c := range b {
			want = want || !strSafe[c]
		}
		if got := needsLook(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("needsLook(%q) = %v, want %v", b[:], got, want)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			b := [8]byte{'a', 'b', 0x80, 0xff, 'z', ' ', '~', 0x21}
			b[pos] = byte(c)
			check(b)
		}
	}
	x := uint64(0x9e3779b97f4a7c15)
	for range 200000 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], x|0x2020202020202020) // mostly printable
		b[x%8] = byte(x >> 56)
		check(b)
	}
}
