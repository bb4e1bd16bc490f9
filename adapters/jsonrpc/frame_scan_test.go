package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/internal/linereader"
)

// sameAsReference reports how DecodeFrame's answer for data differs from
// the previous implementation's (refDecodeFrame), "" when it does not: the
// same message field for field (the reference's Extra["emittedAtMs"] is
// now EmittedAtMs) or the same error, text and drop reason.
func sameAsReference(data []byte) string {
	got, gerr := DecodeFrame(data)
	want, werr := refDecodeFrame(data)
	emitted, wantEmitted := got.EmittedAtMs(), want.Extra["emittedAtMs"]
	if !bytes.Equal(emitted, wantEmitted) || (emitted == nil) != (wantEmitted == nil) {
		return fmt.Sprintf("emittedAtMs %q, reference %q", emitted, wantEmitted)
	}
	if emitted != nil && &emitted[0] != &wantEmitted[0] {
		return "emittedAtMs is not the frame's own bytes"
	}
	got.emittedAt, got.emittedLen = 0, 0
	delete(want.Extra, "emittedAtMs")
	if len(want.Extra) == 0 {
		want.Extra = nil
	}
	if fmt.Sprint(gerr) != fmt.Sprint(werr) {
		return fmt.Sprintf("error %v, reference %v", gerr, werr)
	}
	if gerr != nil {
		k1, r1, d1 := DropOf(gerr)
		k2, r2, d2 := DropOf(werr)
		if k1 != k2 || r1 != r2 || d1 != d2 {
			return fmt.Sprintf("drop %s/%s/%s, reference %s/%s/%s", k1, r1, d1, k2, r2, d2)
		}
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("message %+v, reference %+v", got, want)
	}
	return ""
}

// captureRoots hold the traffic captures the adapters' benchmarks feed
// jsonrpctest.MapTraffic (and their regression logs).
var captureRoots = []string{"../codex/testdata", "../acp/testdata", "../openclaw/testdata", "../claude/testdata"}

// TestDecodeFrameMatchesReference: every a2c and c2a frame of every
// recorded traffic log under the adapters' testdata decodes as the
// previous implementation decoded it, including the refused ones.
func TestDecodeFrameMatchesReference(t *testing.T) {
	logs, frames, refused := 0, 0, 0
	for _, root := range captureRoots {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Base(path) != "rpc-traffic.jsonl" {
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := trafficlog.NewReader(bytes.NewReader(raw), linereader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			logs++
			for {
				rec, _, err := r.Next()
				if err != nil {
					break
				}
				if rec.Dir != trafficlog.A2C && rec.Dir != trafficlog.C2A {
					continue
				}
				frames++
				if _, err := refDecodeFrame(rec.Msg); err != nil {
					refused++
				}
				if diff := sameAsReference(rec.Msg); diff != "" {
					t.Errorf("%s: %s\nframe %s", path, diff, rec.Msg)
				}
			}
			return nil
		})
	}
	if logs < 20 || frames < 500 {
		t.Fatalf("only %d logs, %d frames compared", logs, frames)
	}
	t.Logf("%d logs, %d frames (%d refused) decode as before", logs, frames, refused)
}

// TestDecodeFrameMatchesReferenceCases: malformed and unusual frames
// are refused, or accepted, exactly as before.
func TestDecodeFrameMatchesReferenceCases(t *testing.T) {
	for _, s := range frameSeeds {
		if diff := sameAsReference([]byte(s)); diff != "" {
			t.Errorf("%s: %s", s, diff)
		}
	}
}

var frameSeeds = []string{
	``, ` `, `{`, `}`, `{}`, `[]`, `[1]`, `"x"`, `1`, `null`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`,
	`{"method":"m"} x`, `{"method":"m"}}`, `{"method":"m",}`, `{"method":"m" "id":1}`,
	`{"method":"m","params":{"a":[1,2,{"b":"c"}],"d":{}}}`, `{"method":"m","params":[[[]]]}`,
	`{"method":"m","params":{"a":[1,2}}`, `{"method":"m","params":{"a":"\x01"}}`,
	`{"method":"m","params":{"a":"\q"}}`, `{"method":"m","params":{"a":"\u12"}}`,
	`{"method":"m","params":{"a":01}}`, `{"method":"m","params":{"a":-}}`, `{"method":"m","params":{"a":1.}}`,
	`{"method":"m","params":{"a":1e}}`, `{"method":"m","params":{"a":tru}}`, `{"method":"m","params":nul}`,
	`{"method":"m","params":"s"}`, `{"method":"m","params":1}`, `{"method":"","id":1}`, `{"method":7}`,
	`{"method":"m","result":1}`, `{"method":"m","error":null}`, `{"method":null}`,
	`{"jsonrpc":"2.0","method":"n","id":null}`, `{"jsonrpc":"1.0","method":"m"}`, `{"jsonrpc":2,"method":"m"}`,
	`{"jsonrpc":"2.0","id":"abc","method":"x","params":[]}`, `{"id":"a\u0062","method":"x"}`,
	`{"id":"\ud800","result":1}`, `{"id":-1,"result":1}`, `{"id":1e3,"method":"m"}`, `{"id":1.5,"result":1}`,
	`{"id":99999999999999999999,"result":1}`, `{"id":true,"result":1}`, `{"id":{},"result":1}`,
	`{"id":3,"result":{"turn":{}}}`, `{"id":3,"result":null}`, `{"id":3}`, `{"result":1}`,
	`{"id":4,"error":{"code":-32601,"message":"nope"}}`, `{"id":4,"error":{"code":"x","message":"nope"}}`,
	`{"id":4,"error":[]}`, `{"id":4,"error":1}`, `{"id":5,"result":1,"error":null}`,
	`{"id":5,"result":1,"error":{"code":1,"message":"m"}}`, `{"id":null,"error":{"code":1,"message":"m"}}`,
	`{"error":{"code":1,"message":"m"}}`, `{"id":1,"id":2,"error":{"code":1,"message":"m"}}`,
	`{"method":"turn/started","params":{"threadId":"t"},"emittedAtMs":1795964187793}`,
	`{"method":"n","emittedAtMs":1,"emittedAtMs":2}`, `{"method":"n","x":1,"y":[2],"x":{}}`,
	`{"jsonrpc":"2.0","id":"a\u0062","method":"x","params":{},"emittedAtMs":3,"emittedAtMs":4}`,
	`{"id":3,"result":{"turn":{}},"m\u0065thod":"x"}`, `{"method":"m","\u0065mittedAtMs":5}`,
	"{\"method\":\"m\",\"\xff\":1}", "{\"method\":\"m\",\"é\":1}", "{\"method\":\"\xffm\"}",
	"  {\"method\":\"x\"}\r\n", "{\"method\" : \"x\" , \"params\" : [ 1 , { } ] }",
	`{"method":"m","params":` + deep(40) + `}`, `{"method":"m","params":` + deep(10001) + `}`,
	`{"method":"m","params":` + deep(9998) + `}`, `{"method":"m","params":` + deep(9999) + `}`,
}

// deep is n nested arrays.
func deep(n int) string {
	return string(bytes.Repeat([]byte("["), n)) + string(bytes.Repeat([]byte("]"), n))
}

// FuzzDecodeFrameReference: on any input the one-pass decoder answers as
// the previous one did.
func FuzzDecodeFrameReference(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if diff := sameAsReference(data); diff != "" {
			t.Fatal(diff)
		}
		if m, err := DecodeFrame(data); err == nil && !json.Valid(m.Raw) {
			t.Fatal("raw not valid JSON")
		}
	})
}

// TestMethodNameShared: a method seen before is not allocated again; an
// escaped or non-string method reads as jsonlex.StringOf reads it.
func TestMethodNameShared(t *testing.T) {
	a, _ := DecodeFrame([]byte(`{"method":"item/agentMessage/delta","params":{}}`))
	b, _ := DecodeFrame([]byte(`{"method":"item/agentMessage/delta","emittedAtMs":1}`))
	if a.Method != "item/agentMessage/delta" || unsafe.StringData(a.Method) != unsafe.StringData(b.Method) {
		t.Errorf("methods %q and %q are not one string", a.Method, b.Method)
	}
	for _, tc := range []struct {
		raw  string
		want string
		ok   bool
	}{
		{`"a\u0062"`, "ab", true}, {`"x"`, "x", true}, {`""`, "", true}, {"\"\xff\"", "\ufffd", true},
		{`7`, "", false}, {`null`, "", false}, {`"` + strings.Repeat("m", 200) + `"`, strings.Repeat("m", 200), true},
	} {
		if got, ok := methodName([]byte(tc.raw)); got != tc.want || ok != tc.ok {
			t.Errorf("methodName(%s) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzNewFrameJSON: a frame's JSON flag is jsonlex.Valid's verdict, for
// text records too (the string fast path).
func FuzzNewFrameJSON(f *testing.F) {
	for _, s := range []string{`"line"`, `"a\"b"`, `"\u00e9 and a long enough line"`, `"x" `, `"x`, `"\x01"`, `"a"b"`, `12`, `line`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dir := range []trafficlog.Dir{trafficlog.Stderr, trafficlog.A2C} {
			if got, want := NewFrame(0, dir, data).JSON, jsonlex.Valid(data); got != want {
				t.Fatalf("%s %q: JSON %v, jsonlex.Valid %v", dir, data, got, want)
			}
		}
	})
}

// TestMethodCacheSets: as many names as a set has ways, all hashing to one
// set, are all kept (one slot per name lost one of two colliding names on
// every frame); a name more still reads right.
func TestMethodCacheSets(t *testing.T) {
	bySet := map[int][]string{}
	var names []string
	for i := 0; names == nil; i++ {
		n := "test/set/" + strconv.Itoa(i)
		first, _ := methodSet([]byte(n))
		bySet[first] = append(bySet[first], n)
		if len(bySet[first]) == methodCacheWays+1 {
			names = bySet[first]
		}
	}
	set, _ := methodSet([]byte(names[0]))
	for i := set; i < set+methodCacheWays; i++ {
		methodCache[i].Store(nil) // what earlier runs of this test left there
	}
	kept := names[:methodCacheWays]
	first := map[string]*byte{}
	for _, n := range kept {
		s, _ := methodName([]byte(`"` + n + `"`))
		first[n] = unsafe.StringData(s)
	}
	for _, n := range kept {
		if s, ok := methodName([]byte(`"` + n + `"`)); !ok || s != n || unsafe.StringData(s) != first[n] {
			t.Errorf("%s: %q, %v, shared %v", n, s, ok, unsafe.StringData(s) == first[n])
		}
	}
	extra := names[methodCacheWays]
	if s, ok := methodName([]byte(`"` + extra + `"`)); !ok || s != extra {
		t.Errorf("%s: %q, %v", extra, s, ok)
	}
	if s, ok := methodName([]byte(`"` + extra + `"`)); !ok || s != extra {
		t.Errorf("%s again: %q, %v", extra, s, ok)
	}
}
