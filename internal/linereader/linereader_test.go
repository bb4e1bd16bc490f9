package linereader

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"
)

// chunkReader delivers data in the given chunk sizes (the last size
// repeats), reporting io.EOF only at the very end.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := c.sizes[len(c.sizes)-1]
	if c.i < len(c.sizes) {
		n = c.sizes[c.i]
	}
	c.i++
	if n > len(c.data) {
		n = len(c.data)
	}
	if n > len(p) {
		n = len(p)
	}
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

type got struct {
	data     string
	number   int64
	offset   int64
	end      int64
	size     int64
	oversize bool
}

func readAll(t *testing.T, r *Reader) ([]got, []byte) {
	t.Helper()
	var out []got
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, append([]byte(nil), r.Pending()...)
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, got{string(l.Data), l.Number, l.Offset, l.End, l.Size, l.Oversize})
	}
}

func TestLines(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		want  []got
		trail string
	}{
		{"empty", "", nil, ""},
		{"one", "a\n", []got{{"a", 1, 0, 2, 1, false}}, ""},
		{"crlf", "ab\r\ncd\n", []got{{"ab", 1, 0, 4, 2, false}, {"cd", 2, 4, 7, 2, false}}, ""},
		{"blank lines", "\n\nx\n", []got{{"", 1, 0, 1, 0, false}, {"", 2, 1, 2, 0, false}, {"x", 3, 2, 4, 1, false}}, ""},
		{"lone cr kept inside", "a\rb\n", []got{{"a\rb", 1, 0, 4, 3, false}}, ""},
		{"partial tail held", "a\nbc", []got{{"a", 1, 0, 2, 1, false}}, "bc"},
		{"u2028 is not a break", "x\u2028y\u2029z\n", []got{{"x\u2028y\u2029z", 1, 0, 10, 9, false}}, ""},
	}
	for _, tc := range cases {
		for _, sizes := range [][]int{{1}, {2}, {3}, {4096}} {
			r, err := New(&chunkReader{data: []byte(tc.in), sizes: sizes}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			lines, tail := readAll(t, r)
			if len(lines) != len(tc.want) {
				t.Fatalf("%s/%v: got %d lines %+v, want %d", tc.name, sizes, len(lines), lines, len(tc.want))
			}
			for i := range lines {
				if lines[i] != tc.want[i] {
					t.Errorf("%s/%v line %d: got %+v want %+v", tc.name, sizes, i, lines[i], tc.want[i])
				}
			}
			if string(tail) != tc.trail {
				t.Errorf("%s/%v: tail %q want %q", tc.name, sizes, tail, tc.trail)
			}
		}
	}
}

// TestPartialLineContinues is the tailer case: the writer appends the rest
// of a line after the reader saw io.EOF.
func TestPartialLineContinues(t *testing.T) {
	var src bytes.Buffer
	src.WriteString("first\n{\"half\":")
	r, _ := New(&src, Options{ReadSize: 4})
	l, err := r.Next()
	if err != nil || string(l.Data) != "first" {
		t.Fatalf("first line: %q %v", l.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("want io.EOF with a partial line, got %v", err)
	}
	if got := string(r.Pending()); got != `{"half":` {
		t.Fatalf("pending %q", got)
	}
	if r.Offset() != 6 || r.LineNumber() != 1 {
		t.Fatalf("offset %d line %d, want 6 1", r.Offset(), r.LineNumber())
	}
	src.WriteString("1}\nnext\n")
	l, err = r.Next()
	if err != nil || string(l.Data) != `{"half":1}` || l.Number != 2 || l.Offset != 6 || l.End != 17 {
		t.Fatalf("continued line: %+v %v", l, err)
	}
	l, err = r.Next()
	if err != nil || string(l.Data) != "next" || l.Number != 3 {
		t.Fatalf("third line: %+v %v", l, err)
	}
	if r.Offset() != 22 {
		t.Fatalf("offset %d want 22", r.Offset())
	}
}

// TestResumeAt checks that a reader started at a saved offset numbers and
// positions lines as the original reader would have.
func TestResumeAt(t *testing.T) {
	data := "one\ntwo\nthree\nfour\n"
	r, _ := New(strings.NewReader(data), Options{})
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	off, n := r.Offset(), r.LineNumber()
	r2, _ := NewAt(strings.NewReader(data[off:]), off, n, Options{})
	lines, _ := readAll(t, r2)
	want := []got{{"three", 3, 8, 14, 5, false}, {"four", 4, 14, 19, 4, false}}
	if len(lines) != 2 || lines[0] != want[0] || lines[1] != want[1] {
		t.Fatalf("resumed lines %+v want %+v", lines, want)
	}
}

func TestOversize(t *testing.T) {
	long := strings.Repeat("→", 1000) // 3000 bytes
	in := "ok\n" + long + "\r\nafter\n" + long + "\n"
	for _, sizes := range [][]int{{1}, {7}, {100}, {1 << 16}} {
		r, _ := New(&chunkReader{data: []byte(in), sizes: sizes}, Options{MaxLine: 1000, ReadSize: 64})
		lines, tail := readAll(t, r)
		if len(lines) != 4 || len(tail) != 0 {
			t.Fatalf("%v: got %d lines, tail %q", sizes, len(lines), tail)
		}
		if lines[0].data != "ok" || lines[2].data != "after" || lines[2].number != 3 {
			t.Fatalf("%v: neighbours of oversized lines: %+v", sizes, lines)
		}
		for _, i := range []int{1, 3} {
			l := lines[i]
			if !l.oversize || l.size != 3000 {
				t.Fatalf("%v line %d: oversize %v size %d, want true 3000", sizes, i, l.oversize, l.size)
			}
			if len(l.data) > PrefixSize || !utf8.ValidString(l.data) || !strings.HasPrefix(long, l.data) || len(l.data) < PrefixSize-3 {
				t.Fatalf("%v line %d: bad prefix of %d bytes", sizes, i, len(l.data))
			}
		}
		if lines[1].offset != 3 || lines[1].end != 3005 || lines[2].offset != 3005 {
			t.Fatalf("%v: offsets %+v %+v", sizes, lines[1], lines[2])
		}
	}
}

// TestOversizeMemoryBounded checks that skipping a huge line does not buffer
// it: the buffer stays near MaxLine + ReadSize.
func TestOversizeMemoryBounded(t *testing.T) {
	const maxLine, readSize = 1 << 10, 256
	huge := bytes.Repeat([]byte("A"), 4<<20)
	in := append(append([]byte("a\n"), huge...), "\nb\n"...)
	r, _ := New(&chunkReader{data: in, sizes: []int{readSize}}, Options{MaxLine: maxLine, ReadSize: readSize})
	lines, _ := readAll(t, r)
	if len(lines) != 3 || !lines[1].oversize || lines[1].size != int64(len(huge)) || lines[2].data != "b" {
		t.Fatalf("lines %+v", lines)
	}
	if c := r.BufferCap(); c > 4*(maxLine+readSize) {
		t.Fatalf("buffer grew to %d bytes skipping an oversized line", c)
	}
}

func TestOversizePendingAtEOF(t *testing.T) {
	r, _ := New(strings.NewReader("x\n"+strings.Repeat("y", 50)), Options{MaxLine: 10, ReadSize: 8})
	lines, _ := readAll(t, r)
	if len(lines) != 1 {
		t.Fatalf("lines %+v", lines)
	}
	p := string(r.Pending())
	if r.PendingSize() != 50 || p == "" || strings.Trim(p, "y") != "" || r.Offset() != 2 {
		t.Fatalf("pending size %d len %d offset %d", r.PendingSize(), len(r.Pending()), r.Offset())
	}
}

func TestUTF8NeverSplit(t *testing.T) {
	// A 40 KB line of 3-byte runes delivered in sizes that cut sequences.
	line := strings.Repeat("  12→x = 1\\n", 3700)
	in := line + "\n"
	for _, r := range []io.Reader{
		&chunkReader{data: []byte(in), sizes: []int{4093, 4093, 1, 2, 4093}},
		iotest.OneByteReader(strings.NewReader(in)),
		iotest.HalfReader(strings.NewReader(in)),
	} {
		lr, _ := New(r, Options{})
		l, err := lr.Next()
		if err != nil {
			t.Fatal(err)
		}
		if string(l.Data) != line || !utf8.Valid(l.Data) {
			t.Fatalf("line differs (%d bytes)", len(l.Data))
		}
	}
}

type failReader struct{ n int }

var errBoom = errors.New("boom")

func (f *failReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		f.n++
		return copy(p, "a\nb"), nil
	}
	return 0, errBoom
}

func TestReadErrorIsSticky(t *testing.T) {
	r, _ := New(&failReader{}, Options{})
	if l, err := r.Next(); err != nil || string(l.Data) != "a" {
		t.Fatalf("%q %v", l.Data, err)
	}
	for range 2 {
		if _, err := r.Next(); !errors.Is(err, errBoom) {
			t.Fatalf("want wrapped errBoom, got %v", err)
		}
	}
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestNoProgress(t *testing.T) {
	r, _ := New(zeroReader{}, Options{})
	if _, err := r.Next(); !errors.Is(err, io.ErrNoProgress) {
		t.Fatalf("want io.ErrNoProgress, got %v", err)
	}
}

func TestNegativeLimit(t *testing.T) {
	if _, err := New(strings.NewReader(""), Options{MaxLine: -1}); !errors.Is(err, ErrNegativeLimit) {
		t.Fatalf("want ErrNegativeLimit, got %v", err)
	}
}

func TestPrefix(t *testing.T) {
	s := []byte("ab→c") // a b E2 86 92 c
	for n, want := range map[int]string{0: "", 1: "a", 2: "ab", 3: "ab", 4: "ab", 5: "ab→", 9: "ab→c"} {
		if got := string(Prefix(s, n)); got != want {
			t.Errorf("Prefix(%d) = %q want %q", n, got, want)
		}
	}
}

// FuzzReader compares the reader with a plain split of the same bytes, for
// arbitrary input, read sizes and limits.
func FuzzReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\nc"), uint8(1), uint16(0))
	f.Add([]byte("{\"x\":\"\u2028\"}\n→→→\n"), uint8(2), uint16(4))
	f.Add(bytes.Repeat([]byte("xy\n"), 50), uint8(7), uint16(3))
	// A line of exactly MaxLine bytes ending in CRLF, "\r" and "\n" in
	// different reads: not oversize.
	f.Add([]byte("0000000\r\n"), uint8(0), uint16(7))
	// An oversized line whose "\r" ends a read: the prefix has no "\r".
	f.Add([]byte("00000\r\n"), uint8(5), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, max uint16) {
		size := int(chunk)%64 + 1
		r, err := New(&chunkReader{data: data, sizes: []int{size}}, Options{MaxLine: int(max), ReadSize: size})
		if err != nil {
			t.Fatal(err)
		}
		parts := bytes.Split(data, []byte("\n"))
		complete, tail := parts[:len(parts)-1], parts[len(parts)-1]
		var off int64
		for i, want := range complete {
			l, err := r.Next()
			if err != nil {
				t.Fatalf("line %d: %v", i+1, err)
			}
			full := want
			if n := len(want); n > 0 && want[n-1] == '\r' {
				want = want[:n-1]
			}
			if l.Number != int64(i+1) || l.Offset != off || l.End != off+int64(len(full))+1 || l.Size != int64(len(want)) {
				t.Fatalf("line %d position: %+v (want offset %d size %d)", i+1, l, off, len(want))
			}
			if max > 0 && len(want) > int(max) {
				if !l.Oversize || !bytes.HasPrefix(want, l.Data) || len(l.Data) > PrefixSize {
					t.Fatalf("line %d: oversize %v prefix %q", i+1, l.Oversize, l.Data)
				}
			} else if l.Oversize || !bytes.Equal(l.Data, want) {
				t.Fatalf("line %d: got %q want %q", i+1, l.Data, want)
			}
			off = l.End
		}
		if _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("want io.EOF, got %v", err)
		}
		if r.PendingSize() != int64(len(tail)) || r.Offset() != off {
			t.Fatalf("pending %d want %d; offset %d want %d", r.PendingSize(), len(tail), r.Offset(), off)
		}
	})
}

// BenchmarkReader measures splitting throughput over 1 KB lines.
func BenchmarkReader(b *testing.B) {
	data := bytes.Repeat(append(bytes.Repeat([]byte("x"), 1023), '\n'), 16<<10)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, _ := New(bytes.NewReader(data), Options{})
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

// An oversize line carries the limit, and says so; one cut off by the end
// of the stream is Rest's, Oversize too, never a fragment to decode.
func TestOversizeDetailAndRest(t *testing.T) {
	in := "ok\n" + strings.Repeat("a", 40) + "\n" + strings.Repeat("b", 70)
	lr, err := New(strings.NewReader(in), Options{MaxLine: 16, ReadSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := lr.Next(); err != nil || string(l.Data) != "ok" || l.Oversize || l.Limit != 0 || l.OversizeDetail() != "" {
		t.Fatalf("line 1: %+v %v", l, err)
	}
	l, err := lr.Next()
	if err != nil || !l.Oversize || l.Limit != 16 || l.Size != 40 || l.Number != 2 {
		t.Fatalf("line 2: %+v %v", l, err)
	}
	if got := l.OversizeDetail(); got != "line of 40 bytes is over the reader's limit of 16 bytes; skipped" {
		t.Fatalf("detail %q", got)
	}
	if _, err := lr.Next(); err != io.EOF {
		t.Fatalf("Next at the end: %v", err)
	}
	rest, ok := lr.Rest()
	if !ok || !rest.Oversize || rest.Number != 3 || rest.Size != 70 || rest.Offset != 44 || string(rest.Data) != strings.Repeat("b", len(rest.Data)) {
		t.Fatalf("rest %+v, %v", rest, ok)
	}
	if got := rest.OversizeDetail(); got != "line of 70 bytes is over the reader's limit of 16 bytes; skipped" {
		t.Fatalf("rest detail %q", got)
	}

	lr, _ = New(strings.NewReader("a\nxy"), Options{MaxLine: 16})
	_, _ = lr.Next()
	_, _ = lr.Next()
	if rest, ok := lr.Rest(); !ok || rest.Oversize || string(rest.Data) != "xy" || rest.Number != 2 || rest.Size != 2 {
		t.Fatalf("short rest %+v, %v", rest, ok)
	}
	lr, _ = New(strings.NewReader("a\n"), Options{})
	_, _ = lr.Next()
	_, _ = lr.Next()
	if rest, ok := lr.Rest(); ok {
		t.Fatalf("rest after a complete last line: %+v", rest)
	}
}
