package jsonlex

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestKindOf(t *testing.T) {
	cases := []struct {
		raw  string
		want Kind
		name string
	}{
		{`{}`, KindObject, "an object"},
		{`[1]`, KindArray, "an array"},
		{`"x"`, KindString, "a string"},
		{`-1`, KindNumber, "a number"},
		{`7`, KindNumber, "a number"},
		{`true`, KindBool, "a boolean"},
		{`false`, KindBool, "a boolean"},
		{`null`, KindNull, "null"},
		{``, KindInvalid, "nothing"},
		{` {}`, KindInvalid, "nothing"},
		{`x`, KindInvalid, "nothing"},
	}
	for _, c := range cases {
		if got := KindOf([]byte(c.raw)); got != c.want || got.String() != c.name {
			t.Errorf("KindOf(%q) = %v (%s), want %v (%s)", c.raw, got, got, c.want, c.name)
		}
	}
}

func TestSkip(t *testing.T) {
	cases := []struct {
		data string
		at   int
		want int
	}{
		{`"abc" x`, 0, 5},
		{`"a\"b"`, 0, 6},
		{`"a\\"b`, 0, 5},
		{`"abc`, 0, -1},
		{`"ab\`, 0, -1},
		{`{"a":[1,{"b":"}"}]} `, 0, 19},
		{`[1,2`, 0, -1},
		{`123,`, 0, 3},
		{`true}`, 0, 4},
		{`-1.5e3`, 0, 6},
		{`,`, 0, -1},
		{`1`, 1, -1},
	}
	for _, c := range cases {
		if got := Skip([]byte(c.data), c.at); got != c.want {
			t.Errorf("Skip(%q, %d) = %d, want %d", c.data, c.at, got, c.want)
		}
	}
}

func TestMembers(t *testing.T) {
	cases := []struct {
		raw  string
		want []string // key=value, raw
		err  string
	}{
		{` {"a":1, "b" : [2,{"c":"}"}] ,"a":"x"} `, []string{`"a"=1`, `"b"=[2,{"c":"}"}]`, `"a"="x"`}, ""},
		{`{}`, nil, ""},
		{`{"k\u0065y":null}`, []string{`"k\u0065y"=null`}, ""},
		{`[]`, nil, "want an object, got an array"},
		{``, nil, "want an object, got nothing"},
		{`{"a":1`, []string{`"a"=1`}, "not valid JSON: object not closed"},
		{`{"a":1,}`, []string{`"a"=1`}, "not valid JSON: want a member name at byte 7"},
		{`{"a" 1}`, nil, "not valid JSON: want ':' at byte 5"},
		{`{"a":}`, nil, "not valid JSON: value at byte 5 not complete"},
		{`{"a":1 "b":2}`, []string{`"a"=1`}, "not valid JSON: want ',' or '}' at byte 7"},
		{`{"a":1} x`, []string{`"a"=1`}, "not valid JSON: data after the value at byte 7"},
		{`{"a`, nil, "not valid JSON: member name at byte 1 not terminated"},
	}
	for _, c := range cases {
		var got []string
		err := Members([]byte(c.raw), func(k, v []byte) bool {
			got = append(got, string(k)+"="+string(v))
			return true
		})
		errText := ""
		if err != nil {
			errText = err.Error()
		}
		if errText != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Members(%q) = %q, %q; want %q, %q", c.raw, got, errText, c.want, c.err)
		}
		if err != nil {
			var ke *KindError
			if !errors.Is(err, ErrSyntax) && !errors.As(err, &ke) {
				t.Errorf("Members(%q): %v is neither ErrSyntax nor a *KindError", c.raw, err)
			}
		}
	}
}

func TestMembersStopsEarly(t *testing.T) {
	n := 0
	err := Members([]byte(`{"a":1,"b":2,"c":`), func(k, v []byte) bool {
		n++
		return string(k) != `"b"`
	})
	if err != nil || n != 2 {
		t.Fatalf("visited %d members, error %v; want 2 and nil (the broken tail is never read)", n, err)
	}
}

func TestSplit(t *testing.T) {
	ms, err := SplitObject([]byte(`{"a\u00e9":1,"b":{"c":[]},"a\u00e9":"x"}`))
	want := []Member{{"aé", []byte(`1`)}, {"b", []byte(`{"c":[]}`)}, {"aé", []byte(`"x"`)}}
	if err != nil || !reflect.DeepEqual(ms, want) {
		t.Fatalf("SplitObject = %q, %v; want %q", ms, err, want)
	}
	if _, err := SplitObject([]byte(`{"\x":1}`)); err == nil || err.Error() != `not valid JSON: invalid escape \x in string` {
		t.Fatalf("SplitObject with a bad escape in a key: %v", err)
	}
	els, err := SplitArray([]byte(`[ 1 , "a,b" ,[2,3],{"x":null}]`))
	if err != nil || !reflect.DeepEqual(els, [][]byte{[]byte(`1`), []byte(`"a,b"`), []byte(`[2,3]`), []byte(`{"x":null}`)}) {
		t.Fatalf("SplitArray = %q, %v", els, err)
	}
	if els, err := SplitArray([]byte(`[ ]`)); err != nil || els == nil || len(els) != 0 {
		t.Fatalf("SplitArray([ ]) = %#v, %v; want an empty non-nil slice", els, err)
	}
	for raw, msg := range map[string]string{
		`{}`:    "want an array, got an object",
		`[1,2`:  "not valid JSON: array not closed",
		`[1 2]`: "not valid JSON: want ',' or ']' at byte 3",
		`[,]`:   "not valid JSON: array element at byte 1 not complete",
	} {
		if _, err := SplitArray([]byte(raw)); err == nil || err.Error() != msg {
			t.Errorf("SplitArray(%q): %v, want %q", raw, err, msg)
		}
	}
}

func TestRootAndDecodeObject(t *testing.T) {
	o, err := DecodeObject([]byte(" {\"n\":1.50,\"a\":[true,null],\"k\":1,\"k\":2}\n"))
	want := map[string]any{"n": json.Number("1.50"), "a": []any{true, nil}, "k": json.Number("2")}
	if err != nil || !reflect.DeepEqual(o, want) {
		t.Fatalf("DecodeObject = %#v, %v; want %#v", o, err, want)
	}
	if _, err := DecodeObject([]byte(`{"a":`)); !errors.Is(err, ErrSyntax) {
		t.Fatalf("truncated object: %v, want ErrSyntax", err)
	}
	_, err = DecodeObject([]byte(`[1,2]`))
	var ke *KindError
	if !errors.As(err, &ke) || ke.Want != KindObject || ke.Got != KindArray || err.Error() != "want an object, got an array" {
		t.Fatalf("array: %v, want a *KindError object/array", err)
	}
	if raw, err := Root([]byte("\t{\"a\":1} ")); err != nil || string(raw) != `{"a":1}` {
		t.Fatalf("Root = %q, %v", raw, err)
	}
}

func TestParseAnyRefusesWhatIsNotJSON(t *testing.T) {
	for _, raw := range []string{``, `{`, `{"a":1`, `{"a" 1}`, `{"a":1,}`, `[1,`, `[1 2]`, `tru`, `nul`, `01`, `1.`, `"a`, `{"a":1} x`, `{1:2}`} {
		if v, err := ParseAny([]byte(raw)); !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseAny(%q) = %#v, %v; want ErrSyntax", raw, v, err)
		}
	}
}

func TestIsNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "12": true, "1.5": true, "-1.5e+3": true, "1E9": true, "0.0e-0": true,
		"": false, "-": false, "01": false, "1.": false, ".5": false, "1e": false, "1e+": false, "+1": false, "1x": false, "NaN": false,
	} {
		if got := IsNumber(s); got != want {
			t.Errorf("IsNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestUnquote(t *testing.T) {
	cases := []struct{ raw, want, err string }{
		{`"plain"`, "plain", ""},
		{`"a\nb\t\"c\"\\\/"`, "a\nb\t\"c\"\\/", ""},
		{`"\ud83d\ude00"`, "😀", ""},
		{`"\ud83dx"`, "\uFFFDx", ""},
		{"\"ok\xc3\"", "ok\uFFFD", ""},
		{"\"\xff\xfe\xff\xff\xc3\xff\\n\"", strings.Repeat("\uFFFD", 6) + "\n", ""}, // longer than the body
		{`"\q"`, "", `not valid JSON: invalid escape \q in string`},
		{`"\u12"`, "", `not valid JSON: invalid \u escape in string`},
		{`"a\"`, "", `not valid JSON: truncated escape in string`},
		{`x`, "", `not valid JSON: not a string`},
		{`"`, "", `not valid JSON: not a string`},
	}
	for _, c := range cases {
		got, err := Unquote([]byte(c.raw))
		errText := ""
		if err != nil {
			errText = err.Error()
		}
		if got != c.want || errText != c.err {
			t.Errorf("Unquote(%q) = %q, %q; want %q, %q", c.raw, got, errText, c.want, c.err)
		}
	}
}

// FuzzUnquoteMatchesStdlib: the string decoder agrees with encoding/json on
// every valid JSON string (escapes, surrogates, invalid UTF-8).
func FuzzUnquoteMatchesStdlib(f *testing.F) {
	for _, s := range []string{`"plain"`, `"a\nb\t\"c\"\\/"`, `"\u00e9\u2028"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83dx"`,
		`"\ud83d\u0041"`, `"\ude00\ud83d"`, "\"\xff\xfe\"", `"\u0000"`, `"\/\b\f\r"`, "\"ok\xc3\"", `"\ud83d\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want string
		if KindOf(raw) != KindString || json.Unmarshal(raw, &want) != nil || SkipString(raw, 0) != len(raw) {
			return
		}
		got, err := Unquote(raw)
		if err != nil || got != want {
			t.Fatalf("Unquote(%q) = %q, %v; encoding/json says %q", raw, got, err, want)
		}
	})
}

// FuzzParseAnyMatchesStdlib: on valid JSON, ParseAny gives exactly what
// encoding/json gives with UseNumber; on anything else it never panics and
// any error wraps ErrSyntax. Members and the splitters agree with it.
func FuzzParseAnyMatchesStdlib(f *testing.F) {
	for _, s := range []string{`{"a":1.50,"b":[true,null,"x"],"c":{"d":-0,"e":1e400},"a2":"\u2028<>"}`, `[1,2]`,
		`{"k":1,"k":2}`, ` "x" `, `{"a":{"b":{"c":[[[]]]}}}`, `{"\ud83d":"\ude00"}`, `{"a":1,}`, `[`, `nul`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseAny(data)
		if err != nil && !errors.Is(err, ErrSyntax) {
			t.Fatalf("ParseAny(%q): %v does not wrap ErrSyntax", data, err)
		}
		if !json.Valid(data) {
			return // the caller's json.Valid check is what refuses it
		}
		if err != nil {
			t.Fatalf("ParseAny(%q): %v", data, err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("ParseAny(%q) = %#v; encoding/json says %#v", data, got, want)
		}
		raw := bytes.TrimSpace(data)
		switch KindOf(raw) {
		case KindObject:
			ms, err := SplitObject(raw)
			if err != nil {
				t.Fatalf("SplitObject(%q): %v", raw, err)
			}
			obj := want.(map[string]any)
			for _, m := range ms {
				if _, ok := obj[m.Key]; !ok {
					t.Fatalf("SplitObject(%q) found key %q that encoding/json did not", raw, m.Key)
				}
			}
			if len(ms) < len(obj) {
				t.Fatalf("SplitObject(%q) found %d members, encoding/json %d keys", raw, len(ms), len(obj))
			}
		case KindArray:
			els, err := SplitArray(raw)
			if err != nil || len(els) != len(want.([]any)) {
				t.Fatalf("SplitArray(%q) = %d elements, %v; encoding/json has %d", raw, len(els), err, len(want.([]any)))
			}
		}
		if end := Skip(raw, 0); end != len(raw) {
			t.Fatalf("Skip(%q) = %d, want %d", raw, end, len(raw))
		}
	})
}

// FuzzMembers: on any input Members never panics, and whatever it accepts
// ends with the object's closing brace.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"type":"progress","data":{"type":"x"}}`, `{"a":1 "b":2}`, `{"a":"\"}`, `{}`, `{"a":[}`, ` {"a":1} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		err := Members(data, func(k, v []byte) bool {
			n++
			if KindOf(k) != KindString || len(v) == 0 {
				t.Fatalf("member %q=%q of %q", k, v, data)
			}
			return true
		})
		if err == nil && !strings.HasSuffix(string(bytes.TrimSpace(data)), "}") {
			t.Fatalf("Members accepted %q", data)
		}
		if json.Valid(data) && KindOf(bytes.TrimSpace(data)) == KindObject && err != nil {
			t.Fatalf("Members refused a valid object %q: %v", data, err)
		}
	})
}

// stringEndBytewise is validString read one byte at a time: the
// reference for its eight-byte steps.
func stringEndBytewise(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			if i+1 >= len(data) {
				return -1
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(data)-i < 6 {
					return -1
				}
				for _, h := range data[i+2 : i+6] {
					if !isHex(h) {
						return -1
					}
				}
				i += 5
			default:
				return -1
			}
		}
	}
	return -1
}

// FuzzValid: Valid is json.Valid's verdict, and validString ends every
// string where the byte-by-byte reading ends it, from any opening
// position.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`"abc"`, `"abcdefghijklmnop"`, `"abcdefgh\"ijk"`, "\"abcdefg\x01hij\"", `"\u00e9 long text é ü — 12345678"`,
		`"12345678\\"`, `"1234567\u12"`, `"no end at all here`, "\"\xff\xfe\x80\x80\x80\x80\x80\x80\x80\x22"} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, data []byte, i int) {
		if len(data) == 0 {
			return
		}
		i = ((i % len(data)) + len(data)) % len(data)
		if got, want := validString(data, i), stringEndBytewise(data, i); got != want {
			t.Fatalf("validString(%q, %d) = %d, byte by byte %d", data, i, got, want)
		}
		if got, want := Valid(data), json.Valid(data); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", data, got, want)
		}
	})
}
