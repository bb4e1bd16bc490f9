package remotefs

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/confine"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDecoders(t *testing.T) {
	ptr := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		dec  func([]byte) (any, error)
		in   string
		want any
		err  string
	}{
		{"bash", func(b []byte) (any, error) { return DecodeBash(b) }, `{"command":"ls","cwd":"src","timeout":1500}`, BashParams{Command: "ls", Cwd: "src", Timeout: 1500 * time.Millisecond}, ""},
		{"bash timeout capped", func(b []byte) (any, error) { return DecodeBash(b) }, `{"command":"ls","timeout":1e12}`, BashParams{Command: "ls", Timeout: confine.MaxTimeout}, ""},
		{"bash no command", func(b []byte) (any, error) { return DecodeBash(b) }, `{"cwd":"x"}`, nil, "bad params: missing command"},
		{"bash negative timeout", func(b []byte) (any, error) { return DecodeBash(b) }, `{"command":"ls","timeout":-1}`, nil, "bad params: timeout must not be negative"},
		{"bash not an object", func(b []byte) (any, error) { return DecodeBash(b) }, `"ls"`, nil, "bad params: params must be a JSON object"},
		{"path", func(b []byte) (any, error) { return DecodePath(b) }, `{"path":"a"}`, PathParams{Path: "a"}, ""},
		{"path wrong type", func(b []byte) (any, error) { return DecodePath(b) }, `{"path":1}`, nil, "bad params: json: cannot unmarshal number into Go struct field .path of type string"},
		{"write", func(b []byte) (any, error) { return DecodeWriteFile(b) }, `{"path":"a","content":"aGk=","expectedHash":"h"}`, WriteFileParams{Path: "a", Content: []byte("hi"), ExpectedHash: ptr("h")}, ""},
		{"write new", func(b []byte) (any, error) { return DecodeWriteFile(b) }, `{"path":"a","content":"","expectedHash":null}`, WriteFileParams{Path: "a", Content: []byte{}}, ""},
		{"write bad base64", func(b []byte) (any, error) { return DecodeWriteFile(b) }, `{"path":"a","content":"!!"}`, nil, "bad params: content is not base64: illegal base64 data at input byte 0"},
		{"write no content", func(b []byte) (any, error) { return DecodeWriteFile(b) }, `{"path":"a"}`, nil, "bad params: missing content"},
		{"tree", func(b []byte) (any, error) { return DecodeTree(b) }, `{"path":".","maxDepth":2}`, TreeParams{Path: ".", MaxDepth: 2}, ""},
		{"tree fractional", func(b []byte) (any, error) { return DecodeTree(b) }, `{"path":".","maxDepth":1.5}`, nil, "bad params: maxDepth must be a non-negative integer"},
		{"rg", func(b []byte) (any, error) { return DecodeRipgrep(b) }, `{"args":["-l","x"],"cwd":"src"}`, RipgrepParams{Args: []string{"-l", "x"}, Cwd: "src"}, ""},
		{"rg null args", func(b []byte) (any, error) { return DecodeRipgrep(b) }, `{"args":null}`, nil, "bad params: missing args"},
	} {
		got, err := c.dec([]byte(c.in))
		if c.err != "" {
			if err == nil || err.Error() != c.err || !errors.Is(err, ErrBadParams) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %#v %v", c.name, got, err)
		}
	}
}

func FuzzDecodeParams(f *testing.F) {
	for _, s := range []string{`{"command":"ls","cwd":"/","timeout":100}`, `{"path":"a","content":"aGk=","expectedHash":null}`,
		`{"path":".","maxDepth":3}`, `{"args":["x"],"cwd":"."}`, `null`, `{`, `[]`, `{"timeout":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check := func(err error) {
			if err != nil && !errors.Is(err, ErrBadParams) {
				t.Fatalf("refusal not wrapped: %v", err)
			}
		}
		b, err := DecodeBash(data)
		check(err)
		if err == nil && (b.Command == "" || b.Timeout < 0 || b.Timeout > confine.MaxTimeout) {
			t.Fatalf("accepted %+v", b)
		}
		_, err = DecodePath(data)
		check(err)
		_, err = DecodeWriteFile(data)
		check(err)
		tr, err := DecodeTree(data)
		check(err)
		if err == nil && tr.MaxDepth < 0 {
			t.Fatalf("accepted depth %d", tr.MaxDepth)
		}
		_, err = DecodeRipgrep(data)
		check(err)
	})
}

// Every handler answers every input with a reply, never a panic.
func TestHandlersAlwaysReply(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	root, err := confine.Open(dir, confine.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	hs := Handlers(Options{Root: root, Shell: true, Log: zerolog.Nop(), LookPath: func(string) (string, error) { return "", errors.New("not found") }})
	if len(hs) != len(Methods) {
		t.Fatalf("%d handlers", len(hs))
	}
	for _, m := range Methods {
		for _, in := range []string{`null`, `{}`, `[]`, `{"path":"../x","command":"true","args":[],"content":"","maxDepth":0}`} {
			out := hs[m](context.Background(), json.RawMessage(in))
			b, _ := json.Marshal(out)
			var r struct {
				Success *bool  `json:"success"`
				Error   string `json:"error"`
			}
			if err := json.Unmarshal(b, &r); err != nil || r.Success == nil || (!*r.Success && r.Error == "") {
				t.Errorf("%s(%s) = %s", m, in, b)
			}
		}
	}
	got := hs[MethodRipgrep](context.Background(), json.RawMessage(`{"args":["x"]}`))
	if !reflect.DeepEqual(got, RipgrepReply{Error: "ripgrep (rg) is not installed on this machine"}) {
		t.Fatalf("no rg: %#v", got)
	}
}
