package trafficlog

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/happy-dev/happy/internal/linereader"
)

func TestReader(t *testing.T) {
	log := `{"t":1,"dir":"c2a","msg":{"type":"user"}}

{"t":2,"dir":"a2c","msg":{"type":"assistant","text":"` + strings.Repeat("x", 200) + `"}}
not json
{"t":3,"dir":"exit","msg":{"code":0,"sig":null}}
{"t":4,"dir":"note","msg":"cut`
	type step struct {
		line int64
		dir  Dir
		err  error
	}
	want := []step{{1, C2A, nil}, {3, "", ErrOversize}, {4, "", ErrSyntax}, {5, Exit, nil}, {6, "", ErrSyntax}}
	r, err := NewReader(iotest.HalfReader(strings.NewReader(log)), linereader.Options{MaxLine: 100})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for i, w := range want {
		rec, n, err := r.Next()
		if n != w.line {
			t.Fatalf("step %d: line %d, want %d (%v)", i, n, w.line, err)
		}
		if w.err != nil {
			var le *LineError
			if !errors.As(err, &le) || !errors.Is(err, w.err) || le.Line != w.line || len(le.Raw) == 0 {
				t.Fatalf("step %d: error %v, want a LineError wrapping %v", i, err, w.err)
			}
			continue
		}
		if err != nil || rec.Dir != w.dir {
			t.Fatalf("step %d: %+v %v", i, rec, err)
		}
		msgs = append(msgs, string(rec.Msg))
	}
	if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want io.EOF, got %v", err)
	}
	if _, _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want io.EOF again, got %v", err)
	}
	// Messages stay intact after later reads reuse the line buffer.
	if msgs[0] != `{"type":"user"}` || msgs[1] != `{"code":0,"sig":null}` {
		t.Fatalf("messages %q", msgs)
	}
}

// FuzzReader reads arbitrary bytes as a traffic log: it never panics, ends
// with io.EOF, and every record it returns is valid.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"t\":1,\"dir\":\"a2c\",\"msg\":{}}\n\nx\n{\"t\":2"), uint8(0))
	f.Add([]byte(`{"t":1,"dir":"exit","msg":{"code":1,"sig":null}}`), uint8(8))
	f.Fuzz(func(t *testing.T, data []byte, max uint8) {
		r, err := NewReader(strings.NewReader(string(data)), linereader.Options{MaxLine: int(max)})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			if i > len(data)+2 {
				t.Fatal("reader does not end")
			}
			rec, _, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			var le *LineError
			if err != nil && !errors.As(err, &le) {
				t.Fatalf("unexpected error %v", err)
			}
			if err == nil && (!rec.Dir.Valid() || rec.Msg == nil) {
				t.Fatalf("invalid record %+v", rec)
			}
		}
	})
}
