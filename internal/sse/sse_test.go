package sse

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// item is one result of Next: a frame or a refusal.
type item struct {
	Frame   *Frame
	Refusal *Refusal
}

func (it item) String() string {
	if it.Refusal != nil {
		return fmt.Sprintf("refusal{%s off=%d size=%d %q}", it.Refusal.Reason, it.Refusal.Offset, it.Refusal.Size, it.Refusal.Detail)
	}
	return fmt.Sprintf("frame%+v", *it.Frame)
}

// chunks is an io.Reader that returns its pieces one per Read (an empty
// piece is a read of 0 bytes with no error).
type chunks struct {
	parts [][]byte
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.parts) > 0 {
		part := c.parts[0]
		n := copy(p, part)
		if n < len(part) {
			c.parts[0] = part[n:]
		} else {
			c.parts = c.parts[1:]
		}
		return n, nil
	}
	return 0, io.EOF
}

func newChunks(parts ...string) *chunks {
	c := &chunks{}
	for _, p := range parts {
		c.parts = append(c.parts, []byte(p))
	}
	return c
}

// readAll reads r to its end and returns every item and the reader's stats.
func readAll(t testing.TB, r io.Reader, opts Options) ([]item, Stats) {
	t.Helper()
	rd, err := NewReader(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []item
	for i := 0; ; i++ {
		if i > 1<<20 {
			t.Fatal("reader does not end")
		}
		f, ref, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ref != nil {
			out = append(out, item{Refusal: ref})
		} else {
			out = append(out, item{Frame: &f})
		}
	}
	return out, rd.Stats()
}

func fr(f Frame) item { return item{Frame: &f} }

func rf(reason Reason, off, size int64) item {
	return item{Refusal: &Refusal{Reason: reason, Offset: off, Size: size}}
}

// corpus holds streams of every shape the reader must handle, with what
// reading them gives.
var corpus = []struct {
	name   string
	stream string
	opts   Options
	want   []item
}{
	{"lf", "event: delta\ndata: x\n\n", Options{}, []item{fr(Frame{Event: "delta", Data: "x", HasEvent: true, HasData: true})}},
	{"crlf", "event: delta\r\ndata: x\r\n\r\n", Options{}, []item{fr(Frame{Event: "delta", Data: "x", HasEvent: true, HasData: true})}},
	{"cr", "event: delta\rdata: x\r\r", Options{}, []item{fr(Frame{Event: "delta", Data: "x", HasEvent: true, HasData: true})}},
	// A CRLF then an LF: the LF is a line end of its own, so the
	// event line is a block by itself.
	{"crlf-then-lf", "event: delta\r\n\ndata: x\n\n", Options{}, []item{
		fr(Frame{Event: "delta", HasEvent: true}),
		fr(Frame{Data: "x", HasData: true, Offset: 15}),
	}},
	{"mixed", "data: a\r\ndata: b\rdata: c\n\r\n", Options{}, []item{fr(Frame{Data: "a\nb\nc", HasData: true})}},
	{"cr-cr-lf", "data: a\r\r\ndata: b\n\n", Options{}, []item{
		fr(Frame{Data: "a", HasData: true}),
		fr(Frame{Data: "b", HasData: true, Offset: 10}),
	}},
	{"comments", ": hi\n\n: only\n: comments\n\ndata: x\n: inside\n\n", Options{}, []item{fr(Frame{Data: "x", HasData: true, Offset: 25})}},
	{"comment-heartbeat-before-frame", ": heartbeat\nevent: message\nid: 3\ndata: {}\n\n", Options{}, []item{
		fr(Frame{Event: "message", ID: "3", Data: "{}", HasEvent: true, HasID: true, HasData: true}),
	}},
	{"folded-data", "data: line1\ndata:line2\ndata:  two spaces\ndata\n\n", Options{}, []item{
		fr(Frame{Data: "line1\nline2\n two spaces\n", HasData: true}),
	}},
	{"one-space-only", "data:  {\n\n", Options{}, []item{fr(Frame{Data: " {", HasData: true})}},
	{"tab-kept", "data:\tx\n\n", Options{}, []item{fr(Frame{Data: "\tx", HasData: true})}},
	{"id-retry", "id: 7\n\nretry: 3000\n\nid: 8\ndata: x\n\n", Options{}, []item{
		fr(Frame{ID: "7", HasID: true}),
		fr(Frame{Retry: 3000, HasRetry: true, Offset: 7}),
		fr(Frame{ID: "8", Data: "x", HasID: true, HasData: true, Offset: 20}),
	}},
	{"colonless", "data\n\nevent\ndata\n\n", Options{}, []item{
		fr(Frame{HasData: true}),
		fr(Frame{HasEvent: true, HasData: true, Offset: 6}),
	}},
	{"colonless-id-resets", "id\ndata: x\n\n", Options{}, []item{fr(Frame{Data: "x", HasID: true, HasData: true})}},
	{"blank-runs", "\n\n\r\n\r\r\ndata: x\n\n\n\n", Options{}, []item{fr(Frame{Data: "x", HasData: true, Offset: 7})}},
	{"type-from-event-line", "event: delta\ndata: {\"msg_id\":\"m1\",\"text\":\"kept\",\"type\":\"error\"}\n\n", Options{}, []item{
		fr(Frame{Event: "delta", Data: `{"msg_id":"m1","text":"kept","type":"error"}`, HasEvent: true, HasData: true}),
	}},
	{"last-event-line-wins", "event: a\nevent: b\ndata: x\n\n", Options{}, []item{fr(Frame{Event: "b", Data: "x", HasEvent: true, HasData: true})}},
	{"unknown-fields", "foo: bar\nDATA: x\ndata : y\ndatadata: z\nretryx: 1\n\n", Options{}, nil},
	{"value-with-colons", "data: a: b:c\n\n", Options{}, []item{fr(Frame{Data: "a: b:c", HasData: true})}},
	{"bom", "\xEF\xBB\xBFdata: x\n\n", Options{}, []item{fr(Frame{Data: "x", HasData: true, Offset: 3})}},
	{"second-bom-is-content", "\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n", Options{}, nil},
	{"partial-bom", "\xEF\xBBdata: x\n\n", Options{}, nil},
	{"unterminated-data", "data: x\n\ndata: y", Options{}, []item{
		fr(Frame{Data: "x", HasData: true}),
		rf(ReasonTruncated, 9, 7),
	}},
	{"unterminated-line-ended", "data: x\n\ndata: y\n", Options{}, []item{
		fr(Frame{Data: "x", HasData: true}),
		rf(ReasonTruncated, 9, 8),
	}},
	{"unterminated-colonless", "data: x\n\nid", Options{}, []item{
		fr(Frame{Data: "x", HasData: true}),
		rf(ReasonTruncated, 9, 2),
	}},
	{"unterminated-comment", "data: x\n\n: bye", Options{}, []item{fr(Frame{Data: "x", HasData: true})}},
	{"unterminated-unknown", "data: x\n\nfoo: y\n", Options{}, []item{fr(Frame{Data: "x", HasData: true})}},
	{"lone-cr-end", "data: x\r\r", Options{}, []item{fr(Frame{Data: "x", HasData: true})}},
	{"id-nul", "id: a\x00b\ndata: x\n\n", Options{}, []item{
		rf(ReasonIDHasNUL, 0, 8),
		fr(Frame{Data: "x", HasData: true}),
	}},
	{"bad-retry", "retry: 12a\n\nretry:\n\nretry: 99999999999999999999\n\n", Options{}, []item{
		rf(ReasonBadRetry, 0, 11),
		rf(ReasonBadRetry, 12, 7),
		rf(ReasonBadRetry, 20, 28),
	}},
	{"invalid-utf8", "data: \xff\n\ndata: ok\n\n", Options{}, []item{
		rf(ReasonInvalidUTF8, 0, 9),
		fr(Frame{Data: "ok", HasData: true, Offset: 9}),
	}},
	{"utf8-kept", "event: é\ndata: 日本\u2028x\n\n", Options{}, []item{fr(Frame{Event: "é", Data: "日本\u2028x", HasEvent: true, HasData: true})}},
	{"too-large", "data: 0123456789\n\ndata: ok\n\n", Options{MaxFrame: 8}, []item{
		rf(ReasonFrameTooLarge, 0, 18),
		fr(Frame{Data: "ok", HasData: true, Offset: 18}),
	}},
	{"too-large-folded-crlf", "data: 0123\r\ndata: 4567\r\ndata: 8\r\n\r\ndata: ok\r\n\r\n", Options{MaxFrame: 8}, []item{
		rf(ReasonFrameTooLarge, 0, 34),
		fr(Frame{Data: "ok", HasData: true, Offset: 35}),
	}},
	{"too-large-unterminated", "data: ok\n\ndata: 0123456789", Options{MaxFrame: 8}, []item{
		fr(Frame{Data: "ok", HasData: true}),
		rf(ReasonFrameTooLarge, 10, 16),
	}},
	{"big-comment-not-held", ": " + strings.Repeat("x", 100) + "\ndata: ok\n\n", Options{MaxFrame: 8}, []item{fr(Frame{Data: "ok", HasData: true})}},
}

// TestCorpus checks what each corpus stream reads as, in one read.
func TestCorpus(t *testing.T) {
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			got, stats := readAll(t, newChunks(tc.stream), tc.opts)
			for _, it := range got {
				if it.Refusal != nil {
					if it.Refusal.Detail == "" {
						t.Errorf("refusal %v without detail", it)
					}
					it.Refusal.Detail = ""
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got\n%v\nwant\n%v", got, tc.want)
			}
			var frames int64
			refused := map[Reason]int64{}
			for _, it := range tc.want {
				if it.Frame != nil {
					frames++
				} else {
					refused[it.Refusal.Reason]++
				}
			}
			if stats.Frames != frames || !reflect.DeepEqual(stats.Refused, refused) {
				t.Fatalf("stats %+v, want %d frames and %v", stats, frames, refused)
			}
		})
	}
}

// TestEverySplit is the differential test: each corpus stream cut in two at
// every index, and the same with an empty read wedged between the halves,
// and one byte per read, reads exactly as the whole stream.
func TestEverySplit(t *testing.T) {
	pairs := 0
	for _, tc := range corpus {
		whole, wholeStats := readAll(t, newChunks(tc.stream), tc.opts)
		check := func(what string, r io.Reader) {
			t.Helper()
			pairs++
			got, stats := readAll(t, r, tc.opts)
			if !reflect.DeepEqual(got, whole) || !reflect.DeepEqual(stats, wholeStats) {
				t.Fatalf("%s: %s:\ngot  %v %+v\nwhole %v %+v", tc.name, what, got, stats, whole, wholeStats)
			}
		}
		s := tc.stream
		for k := 0; k <= len(s); k++ {
			check(fmt.Sprintf("cut at %d", k), newChunks(s[:k], s[k:]))
			check(fmt.Sprintf("cut at %d, empty read between", k), newChunks(s[:k], "", s[k:]))
		}
		bytes := make([]string, 0, 2*len(s))
		for i := range len(s) {
			bytes = append(bytes, s[i:i+1], "")
		}
		check("one byte per read", newChunks(bytes...))
	}
	t.Logf("%d (stream, reads) pairs", pairs)
}

// TestSeedProbe pins the case of a CRLF followed by an LF cut at 13 and 14:
// two frames, never one.
func TestSeedProbe(t *testing.T) {
	s := "event: delta\r\n\ndata: x\n\n"
	for _, cut := range []int{13, 14} {
		got, _ := readAll(t, newChunks(s[:cut], s[cut:]), Options{})
		if len(got) != 2 || got[0].Frame == nil || got[0].Frame.Event != "delta" || got[1].Frame == nil || got[1].Frame.Data != "x" {
			t.Fatalf("cut %d: %v", cut, got)
		}
	}
}

func TestSmallReadSizes(t *testing.T) {
	for _, tc := range corpus {
		whole, _ := readAll(t, newChunks(tc.stream), tc.opts)
		for _, rs := range []int{1, 2, 3, 7} {
			opts := tc.opts
			opts.ReadSize = rs
			got, _ := readAll(t, newChunks(tc.stream), opts)
			if !reflect.DeepEqual(got, whole) {
				t.Fatalf("%s: ReadSize %d:\ngot  %v\nwhole %v", tc.name, rs, got, whole)
			}
		}
	}
}

func TestLastEventID(t *testing.T) {
	rd, _ := NewReader(strings.NewReader("id: 1\ndata: a\n\ndata: b\n\nid: 2\n\nid\ndata: c\n\n"), Options{})
	var ids []string
	for {
		_, _, err := rd.Next()
		if err != nil {
			break
		}
		ids = append(ids, rd.LastEventID())
	}
	want := []string{"1", "1", "2", ""}
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("LastEventID after each frame %q, want %q", ids, want)
	}
}

func TestType(t *testing.T) {
	if got := (Frame{}).Type(); got != "message" {
		t.Fatalf("default type %q", got)
	}
	if got := (Frame{Event: "end"}).Type(); got != "end" {
		t.Fatalf("type %q", got)
	}
}

type failReader struct {
	data string
	err  error
}

func (f *failReader) Read(p []byte) (int, error) {
	n := copy(p, f.data)
	f.data = f.data[n:]
	if f.data == "" {
		return n, f.err
	}
	return n, nil
}

// A read error ends the stream after the bytes read with it; a block cut
// short by it is refused; the error is returned, wrapped, from then on.
func TestReadError(t *testing.T) {
	boom := errors.New("connection reset")
	rd, _ := NewReader(&failReader{data: "data: a\n\ndata: b", err: boom}, Options{})
	f, ref, err := rd.Next()
	if err != nil || ref != nil || f.Data != "a" {
		t.Fatalf("first: %+v %v %v", f, ref, err)
	}
	_, ref, err = rd.Next()
	if err != nil || ref == nil || ref.Reason != ReasonTruncated || ref.Offset != 9 {
		t.Fatalf("second: %v %v", ref, err)
	}
	for range 2 {
		_, ref, err = rd.Next()
		if ref != nil || !errors.Is(err, boom) || err.Error() != "sse: read at byte 16: connection reset" {
			t.Fatalf("then: %v %v", ref, err)
		}
	}
}

type badCount struct{}

func (badCount) Read(p []byte) (int, error) { return len(p) + 5, nil }

func TestBadReaderCount(t *testing.T) {
	rd, _ := NewReader(badCount{}, Options{})
	_, _, err := rd.Next()
	if err == nil || !strings.Contains(err.Error(), "reader returned") {
		t.Fatalf("err = %v", err)
	}
}

func TestOptions(t *testing.T) {
	if _, err := NewReader(strings.NewReader(""), Options{MaxFrame: -1}); !errors.Is(err, ErrNegativeOption) {
		t.Fatalf("err = %v", err)
	}
	if _, err := NewReader(strings.NewReader(""), Options{ReadSize: -1}); !errors.Is(err, ErrNegativeOption) {
		t.Fatalf("err = %v", err)
	}
}

func TestRefusalError(t *testing.T) {
	r := &Refusal{Reason: ReasonBadRetry, Detail: "x", Offset: 3, Size: 4}
	if got := r.Error(); got != "sse: bad_retry at byte 3 (4 bytes): x" {
		t.Fatal(got)
	}
}

func TestAppendFrame(t *testing.T) {
	for _, tc := range []struct {
		event, id, data string
		want            string
	}{
		{"message", "12", `{"a":1}`, "event: message\nid: 12\ndata: {\"a\":1}\n\n"},
		{"", "", "", "data: \n\n"},
		{"", "", "a\n\nb\n", "data: a\ndata: \ndata: b\ndata: \n\n"},
		{"end", "", " x", "event: end\ndata:  x\n\n"},
	} {
		b, err := AppendFrame([]byte("pre"), tc.event, tc.id, tc.data)
		if err != nil || string(b) != "pre"+tc.want {
			t.Fatalf("AppendFrame(%q,%q,%q) = %q, %v", tc.event, tc.id, tc.data, b, err)
		}
		got, _ := readAll(t, newChunks(string(b[3:])), Options{})
		if len(got) != 1 || got[0].Frame == nil || got[0].Frame.Event != tc.event || got[0].Frame.ID != tc.id || got[0].Frame.Data != tc.data {
			t.Fatalf("read back %v", got)
		}
	}
	for _, bad := range [][3]string{{"a\nb", "", ""}, {"", "1\r", ""}, {"", "1\x00", ""}, {"", "", "a\rb"}, {"", "", "\xff"}, {"\xff", "", ""}} {
		b, err := AppendFrame([]byte("pre"), bad[0], bad[1], bad[2])
		if !errors.Is(err, ErrUnencodable) || string(b) != "pre" {
			t.Fatalf("AppendFrame(%q) = %q, %v", bad, b, err)
		}
	}
	if got := string(AppendRetry(nil, 3000)); got != "retry: 3000\n\n" {
		t.Fatal(got)
	}
	if got := string(AppendRetry(nil, -1)); got != "retry: 0\n\n" {
		t.Fatal(got)
	}
	if got := string(AppendComment(nil, "a\r\nb\nc")); got != ": a b c\n" {
		t.Fatal(got)
	}
}
