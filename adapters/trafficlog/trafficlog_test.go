package trafficlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		line    string
		want    Record
		wantErr error
	}{
		{`{"t":1795964184211,"dir":"c2a","msg":{"type":"control_request"}}`,
			Record{T: 1795964184211, Dir: C2A, Msg: json.RawMessage(`{"type":"control_request"}`)}, nil},
		{`{"t":1,"dir":"exit","msg":{"code":0,"sig":null}}`, Record{T: 1, Dir: Exit, Msg: json.RawMessage(`{"code":0,"sig":null}`)}, nil},
		{`{"t":2,"dir":"note","msg":"last result received -> closing stdin"}`,
			Record{T: 2, Dir: Note, Msg: json.RawMessage(`"last result received -> closing stdin"`)}, nil},
		{` {"t":1.7e3,"dir":"stderr","msg":"x"} `, Record{T: 1700, Dir: Stderr, Msg: json.RawMessage(`"x"`)}, nil},
		{`{"t":1,"dir":"a2c","msg":null}`, Record{T: 1, Dir: A2C, Msg: json.RawMessage(`null`)}, nil},
		{`[1,2]`, Record{}, ErrNotObject},
		{`null`, Record{}, ErrNotObject},
		{`{"t":1,"dir":"c2a","msg":{`, Record{}, ErrSyntax},
		{``, Record{}, ErrSyntax},
		{`{"t":1,"msg":{}}`, Record{}, ErrMissing},
		{`{"dir":"a2c","msg":{}}`, Record{}, ErrMissing},
		{`{"t":1,"dir":"a2c"}`, Record{}, ErrMissing},
		{`{"t":"now","dir":"a2c","msg":{}}`, Record{}, ErrInvalid},
		{`{"t":1.5,"dir":"a2c","msg":{}}`, Record{}, ErrInvalid},
		{`{"t":1,"dir":7,"msg":{}}`, Record{}, ErrInvalid},
		{`{"t":1,"dir":"sideways","msg":{}}`, Record{}, ErrUnknownDir},
	}
	for _, tc := range cases {
		got, err := Decode([]byte(tc.line))
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: error %v, want %v", tc.line, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if got.T != tc.want.T || got.Dir != tc.want.Dir || string(got.Msg) != string(tc.want.Msg) {
			t.Errorf("%s: got %+v (%s) want %+v", tc.line, got, got.Msg, tc.want)
		}
	}
}

func TestDecodeExit(t *testing.T) {
	s, err := DecodeExit(json.RawMessage(`{"code":1,"sig":null}`))
	if err != nil || s.Code == nil || *s.Code != 1 || s.Sig != nil {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = DecodeExit(json.RawMessage(`{"code":null,"sig":"SIGKILL"}`))
	if err != nil || s.Code != nil || s.Sig == nil || *s.Sig != "SIGKILL" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{`"x"`, `{"code":"one"}`, ``} {
		if _, err := DecodeExit(json.RawMessage(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: want ErrInvalid, got %v", bad, err)
		}
	}
}

func TestText(t *testing.T) {
	if s, ok := Text(json.RawMessage(`"a\u2028b"`)); !ok || s != "a\u2028b" {
		t.Fatalf("%q %v", s, ok)
	}
	if _, ok := Text(json.RawMessage(`{"a":1}`)); ok {
		t.Fatal("object accepted as text")
	}
}

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	clock := time.UnixMilli(1795964184211)
	w := NewWriter(&buf, func() time.Time { return clock })
	code := 0
	steps := []func() error{
		func() error { return w.Message(C2A, []byte("{\"type\": \"user\",\n \"x\": \"\u2028\"}\n")) },
		func() error { return w.Message(A2C, []byte(`{"type":"result"}`)) },
		func() error { return w.Text(Stderr, "warning: \"quoted\"") },
		func() error { return w.Text(Note, "closing stdin") },
		func() error { return w.Exit(&code, "") },
		func() error { return w.Exit(nil, "SIGTERM") },
	}
	for i, s := range steps {
		if err := s(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := `{"t":1795964184211,"dir":"c2a","msg":{"type":"user","x":"` + "\u2028" + `"}}
{"t":1795964184211,"dir":"a2c","msg":{"type":"result"}}
{"t":1795964184211,"dir":"stderr","msg":"warning: \"quoted\""}
{"t":1795964184211,"dir":"note","msg":"closing stdin"}
{"t":1795964184211,"dir":"exit","msg":{"code":0,"sig":null}}
{"t":1795964184211,"dir":"exit","msg":{"code":null,"sig":"SIGTERM"}}
`
	if buf.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", buf.String(), want)
	}
	for i, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if _, err := Decode([]byte(line)); err != nil {
			t.Fatalf("line %d does not decode: %v", i+1, err)
		}
	}
}

func TestWriterRefuses(t *testing.T) {
	w := NewWriter(&bytes.Buffer{}, nil)
	if err := w.Message(C2A, []byte(`{"unterminated":`)); err == nil {
		t.Fatal("invalid JSON written")
	}
	if err := w.Message("up", []byte(`{}`)); !errors.Is(err, ErrUnknownDir) {
		t.Fatalf("want ErrUnknownDir, got %v", err)
	}
	if err := w.Text("up", "x"); !errors.Is(err, ErrUnknownDir) {
		t.Fatalf("want ErrUnknownDir, got %v", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestWriterConcurrent checks that records written from several goroutines
// stay whole lines.
func TestWriterConcurrent(t *testing.T) {
	var out lockedBuffer
	w := NewWriter(&out, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				msg := []byte(`{"g":` + string(rune('0'+g)) + `,"pad":"` + strings.Repeat("x", 100) + `"}`)
				if err := w.Message(A2C, msg); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.b.String(), "\n"), "\n")
	if len(lines) != 800 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, l := range lines {
		if _, err := Decode([]byte(l)); err != nil {
			t.Fatalf("torn line %q: %v", l, err)
		}
	}
}

// FuzzDecode checks that Decode never panics and that whatever it accepts
// survives a write and a second decode.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"t":1,"dir":"a2c","msg":{"type":"assistant"}}`))
	f.Add([]byte(`{"t":1,"dir":"exit","msg":{"code":null,"sig":"SIGINT"}}`))
	f.Add([]byte(`{"t":1e3,"dir":"note","msg":"x"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := Decode(line)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, func() time.Time { return time.UnixMilli(r.T) })
		if err := w.Message(r.Dir, r.Msg); err != nil {
			t.Fatalf("accepted record does not re-encode: %v", err)
		}
		r2, err := Decode(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
		if err != nil || r2.T != r.T || r2.Dir != r.Dir {
			t.Fatalf("round trip: %+v %v", r2, err)
		}
		var a, b bytes.Buffer
		_ = json.Compact(&a, r.Msg)
		_ = json.Compact(&b, r2.Msg)
		if a.String() != b.String() {
			t.Fatalf("msg changed: %s vs %s", a.String(), b.String())
		}
	})
}
