package acp

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// membersByCallback is members as it was first written, over
// jsonlex.Members: the reference for its own loop.
func membersByCallback(raw json.RawMessage) (o obj, ok bool) {
	if !isObject(raw) {
		return obj{}, false
	}
	bad := false
	err := jsonlex.Members(bytes.TrimSpace(raw), func(k, v []byte) bool {
		name := k[1 : len(k)-1]
		if !plainName(name) {
			s, err := jsonlex.Unquote(k)
			if err != nil {
				bad = true
				return false
			}
			name = []byte(s)
		}
		o.add(member{name, v})
		return true
	})
	if err != nil || bad {
		return obj{}, false
	}
	return o, true
}

// scanAll reads raw with objScan: its members and verdict.
func scanAll(raw []byte) (ks, vs []string, ok bool) {
	sc := scanObject(raw)
	for !sc.done {
		k, v, good := sc.next()
		if !good {
			break
		}
		ks, vs = append(ks, string(k)), append(vs, string(v))
	}
	return ks, vs, sc.end()
}

func TestObjScan(t *testing.T) {
	for _, c := range []struct {
		in     string
		keys   []string
		values []string
		ok     bool
	}{
		{`{}`, nil, nil, true},
		{` { } `, nil, nil, true},
		{`{"a":1}`, []string{`"a"`}, []string{`1`}, true},
		{` {"a" : [1, {"b":"}"}] , "c\"":"x"} ` + "\n", []string{`"a"`, `"c\""`}, []string{`[1, {"b":"}"}]`, `"x"`}, true},
		{`{"a":1,"a":2}`, []string{`"a"`, `"a"`}, []string{`1`, `2`}, true},
		{`{"a":1}x`, []string{`"a"`}, []string{`1`}, false},
		{`{}x`, nil, nil, false},
		{`{"a":1,}`, []string{`"a"`}, []string{`1`}, false},
		{`{"a":1 "b":2}`, nil, nil, false},
		{`{"a" 1}`, nil, nil, false},
		{`{"a":}`, nil, nil, false},
		{`{"a":[1}`, nil, nil, false},
		{`{"a`, nil, nil, false},
		{`{"a":1`, nil, nil, false},
		{`{a:1}`, nil, nil, false},
		{`[1]`, nil, nil, false},
		{``, nil, nil, false},
		{`  `, nil, nil, false},
	} {
		ks, vs, ok := scanAll([]byte(c.in))
		if ok != c.ok || c.ok && (!equalStrings(ks, c.keys) || !equalStrings(vs, c.values)) {
			t.Errorf("objScan(%q) = %q %q %v, want %q %q %v", c.in, ks, vs, ok, c.keys, c.values, c.ok)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTrimSpace(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{``, ``},
		{`{}`, `{}`},
		{` {} `, `{}`},
		{"\t\r\n{}\n", `{}`},
		{"\v1\f", `1`},
		{"\u00a0\"x\"\u0085", `"x"`},
		{"\x01\x7f", "\x01\x7f"},
		{"\xff1", "\xff1"},
		{`   `, ``},
	} {
		if got := trimSpace([]byte(c.in)); string(got) != c.want {
			t.Errorf("trimSpace(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// FuzzObjScan: on any input, objScan yields the members jsonlex.Members
// passes and its verdict, and members what members over jsonlex.Members
// gives; trimSpace is bytes.TrimSpace.
func FuzzObjScan(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x","a":[2]}`, ` {"k" : null } `, `{}`, `{"a":1}x`, `{"a":1,}`, `{"se\u0073sionId":"s"}`,
		`{"a":{"b":[1,"}"]},"c":true}`, `[1]`, "\v{}\u00a0", `{"\xff":1}`, `{"a\q":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := trimSpace(data), bytes.TrimSpace(data); !bytes.Equal(got, want) {
			t.Fatalf("trimSpace(%q) = %q, bytes.TrimSpace %q", data, got, want)
		}
		var wks, wvs []string
		err := jsonlex.Members(data, func(k, v []byte) bool {
			wks, wvs = append(wks, string(k)), append(wvs, string(v))
			return true
		})
		ks, vs, ok := scanAll(data)
		if ok != (err == nil) || ok && (!equalStrings(ks, wks) || !equalStrings(vs, wvs)) {
			t.Fatalf("objScan(%q) = %q %q %v; jsonlex.Members %q %q %v", data, ks, vs, ok, wks, wvs, err)
		}
		o, ok := members(data)
		wo, wok := membersByCallback(data)
		if ok != wok || !sameMembers(&o, &wo) {
			t.Fatalf("members(%q) = %v %v; by callback %v %v", data, o, ok, wo, wok)
		}
	})
}

func TestLexKey(t *testing.T) {
	for _, c := range []struct {
		in   string
		name string
		ok   bool
	}{
		{`"type"`, "type", true},
		{`"mimeType"`, "mimeType", true},
		{`"terminalId"`, "terminalId", true},
		{`"MimeType"`, otherCase, true},
		{`"mimetype"`, otherCase, true},
		{`"TYPE"`, otherCase, true},
		{`"sessionUpdate"`, "", true},
		{`""`, "", true},
		{`"a name longer than any field"`, "", true},
		{`"a name longer than any field\u0041"`, "", false},
		{`"typ\u0065"`, "", false},
		{"\"t\xc3\xbfpe\"", "", false},
	} {
		if name, ok := lexKey([]byte(c.in)); name != c.name || ok != c.ok {
			t.Errorf("lexKey(%s) = %q, %v; want %q, %v", c.in, name, ok, c.name, c.ok)
		}
	}
}

func TestPlainText(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"", true},
		{"abc", true},
		{"abcdefgh", true},
		{"abcdefghijklmnopq", true},
		{"abcdefgh\\", false},
		{"abcdefghijklmno\\", false},
		{"\\bcdefghijklmnop", false},
		{"abcdefgh\u00e9ijklmnop", true},
		{"abcdefgh\xffijklmnop", false},
		{"abcdefghijklmnop\xc3", false},
		{"abcdefg\xc3\xa9", true},
		{"abcdefg\xc3", false},
		{"\u00e9\\", false},
	} {
		if got := plainText([]byte(c.in)); got != c.want {
			t.Errorf("plainText(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// FuzzPlainText: plainText says what bytes.IndexByte and utf8.Valid say.
func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"abcdefghijklmnop", "abcdefgh\\ijk", "abcdefg\xc3\xa9hij", "\xff", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := plainText(b), bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b); got != want {
			t.Fatalf("plainText(%q) = %v, want %v", b, got, want)
		}
	})
}
