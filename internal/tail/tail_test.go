package tail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/linereader"
)

// got collects what a running Tailer delivers.
type got struct {
	mu     sync.Mutex
	lines  []line
	resets []Reset
	change chan struct{}
}

type line struct {
	Data        string
	Number      int64
	Offset, End int64
}

func newGot() *got { return &got{change: make(chan struct{}, 1)} }

func (g *got) onLine(l linereader.Line) error {
	g.mu.Lock()
	g.lines = append(g.lines, line{string(l.Data), l.Number, l.Offset, l.End})
	g.mu.Unlock()
	g.signal()
	return nil
}

func (g *got) onReset(r Reset) {
	g.mu.Lock()
	g.resets = append(g.resets, r)
	g.mu.Unlock()
	g.signal()
}

func (g *got) signal() {
	select {
	case g.change <- struct{}{}:
	default:
	}
}

func (g *got) snapshot() ([]line, []Reset) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]line(nil), g.lines...), append([]Reset(nil), g.resets...)
}

// waitLines waits until n lines arrived (without Sync: through the
// notification or poll path).
func (g *got) waitLines(t *testing.T, n int) []line {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if l, _ := g.snapshot(); len(l) >= n {
			return l
		}
		select {
		case <-g.change:
		case <-deadline:
			l, _ := g.snapshot()
			t.Fatalf("got %d lines after 10s, want %d: %+v", len(l), n, l)
		}
	}
}

func (g *got) waitResets(t *testing.T, n int) []Reset {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if _, r := g.snapshot(); len(r) >= n {
			return r
		}
		select {
		case <-g.change:
		case <-deadline:
			_, r := g.snapshot()
			t.Fatalf("got %d resets after 10s, want %d: %+v", len(r), n, r)
		}
	}
}

// run starts a Tailer of path and stops it at the end of the test.
func run(t *testing.T, path string, opts Options) (*Tailer, *got) {
	t.Helper()
	g := newGot()
	opts.OnReset = g.onReset
	tl, err := New(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, g.onLine) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v", err)
		}
	})
	return tl, g
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func size(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestExistingLinesThenAppends(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "{\"a\":1}\n{\"b\":2}\n")
	tl, g := run(t, p, Options{Poll: time.Hour}) // notifications only
	g.waitLines(t, 2)
	for i := range 5 {
		appendFile(t, p, fmt.Sprintf("{\"n\":%d}\n", i))
		g.waitLines(t, 3+i)
	}
	lines, resets := g.snapshot()
	want := []line{
		{`{"a":1}`, 1, 0, 8}, {`{"b":2}`, 2, 8, 16},
		{`{"n":0}`, 3, 16, 24}, {`{"n":1}`, 4, 24, 32}, {`{"n":2}`, 5, 32, 40}, {`{"n":3}`, 6, 40, 48}, {`{"n":4}`, 7, 48, 56},
	}
	if !reflect.DeepEqual(lines, want) || len(resets) != 0 {
		t.Fatalf("lines %+v resets %+v", lines, resets)
	}
	st := tl.Stats()
	if st.BytesRead != size(t, p) || st.Opens != 1 || st.Notified == 0 || st.Polled != 0 {
		t.Fatalf("stats %+v, file size %d: the file was read more than once or not through notifications", st, size(t, p))
	}
	if off, n := tl.Offset(); off != 56 || n != 7 {
		t.Fatalf("offset %d line %d", off, n)
	}
}

func TestPartialLineHeldUntilNewline(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "{\"a\":1}\n{\"b\":")
	tl, g := run(t, p, Options{})
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l, _ := g.snapshot(); len(l) != 1 || l[0].Data != `{"a":1}` {
		t.Fatalf("lines %+v", l)
	}
	if off, _ := tl.Offset(); off != 8 {
		t.Fatalf("offset %d includes the partial line", off)
	}
	appendFile(t, p, "2")
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l, _ := g.snapshot(); len(l) != 1 {
		t.Fatalf("partial line delivered: %+v", l)
	}
	appendFile(t, p, "}\n")
	l := g.waitLines(t, 2)
	if l[1] != (line{`{"b":2}`, 2, 8, 16}) {
		t.Fatalf("completed line %+v", l[1])
	}
	if st := tl.Stats(); st.BytesRead != 16 {
		t.Fatalf("read %d bytes of a 16-byte file", st.BytesRead)
	}
	if b, n := tl.Leftover(); b != nil || n != 0 {
		t.Fatalf("leftover %q %d while running", b, n)
	}
}

func TestLeftoverAfterStop(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "{\"a\":1}\n{\"cut\":")
	tl, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx, func(linereader.Line) error { return nil }) }()
	if err := tl.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if b, n := tl.Leftover(); string(b) != `{"cut":` || n != 7 {
		t.Fatalf("leftover %q %d", b, n)
	}
}

func TestCreatedLateWithItsFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "projects", "-home-me-work")
	p := filepath.Join(dir, "s.jsonl")
	tl, g := run(t, p, Options{Poll: 20 * time.Millisecond})
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, "{\"x\":1}\n")
	g.waitLines(t, 1)
	// Once the folder exists the watch is set (at the next poll at the
	// latest): later appends are noticed without the poll. A poll that
	// started after the folder was made has set the watch once the Run loop
	// answers a Sync.
	polled := tl.Stats().Polled
	waitStats(t, tl, "a poll after the folder appeared", func(s Stats) bool { return s.Polled > polled })
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := tl.Stats().Notified
	appendFile(t, p, "{\"x\":2}\n")
	l := g.waitLines(t, 2)
	if l[1].Data != `{"x":2}` || l[1].Number != 2 {
		t.Fatalf("lines %+v", l)
	}
	waitStats(t, tl, "a notification after the folder appeared", func(s Stats) bool { return s.Notified > before })
}

// waitStats checks cond on the tailer's counters every millisecond until
// it holds, and fails the test when it still does not after 5 s (the
// counters are not signalled).
func waitStats(t *testing.T, tl *Tailer, what string, cond func(Stats) bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for !cond(tl.Stats()) {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not seen after 5s: %+v", what, tl.Stats())
		}
	}
}

func TestReplacedByRename(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.jsonl")
	appendFile(t, p, "old1\nold2\npartial")
	tl, g := run(t, p, Options{})
	g.waitLines(t, 2)
	tmp := filepath.Join(dir, "new.tmp")
	appendFile(t, tmp, "new1\n")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	l := g.waitLines(t, 3)
	r := g.waitResets(t, 1)
	if l[2] != (line{"new1", 1, 0, 5}) {
		t.Fatalf("line after replace %+v", l[2])
	}
	want := Reset{Reason: ResetReplaced, Offset: 10, LineNo: 2, Pending: []byte("partial"), PendingSize: 7}
	if !reflect.DeepEqual(r[0], want) {
		t.Fatalf("reset %+v, want %+v", r[0], want)
	}
	if st := tl.Stats(); st.BytesRead != 17+5 || st.Opens != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRemovedThenRecreated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "a\n")
	_, g := run(t, p, Options{Poll: 20 * time.Millisecond})
	g.waitLines(t, 1)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	r := g.waitResets(t, 1)
	if r[0].Reason != ResetRemoved || r[0].Offset != 2 || r[0].LineNo != 1 {
		t.Fatalf("reset %+v", r[0])
	}
	appendFile(t, p, "b\n")
	l := g.waitLines(t, 2)
	if l[1] != (line{"b", 1, 0, 2}) {
		t.Fatalf("line %+v", l[1])
	}
}

func TestTruncated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "one\ntwo\n")
	tl, g := run(t, p, Options{})
	g.waitLines(t, 2)
	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, p, "3\n")
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := g.waitLines(t, 3)
	r := g.waitResets(t, 1)
	if r[0].Reason != ResetTruncated || r[0].Offset != 8 || l[2] != (line{"3", 1, 0, 2}) {
		t.Fatalf("reset %+v line %+v", r[0], l[2])
	}
}

func TestPollFallback(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	tl, g := run(t, p, Options{NoNotify: true, Poll: 10 * time.Millisecond})
	// Past the first read (which finds no file): what follows comes from
	// the poll.
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		appendFile(t, p, fmt.Sprintf("%d\n", i))
		g.waitLines(t, i+1)
	}
	st := tl.Stats()
	if st.Notified != 0 || st.Polled == 0 || st.BytesRead != 6 {
		t.Fatalf("stats %+v", st)
	}
}

func TestResumeFromSavedOffset(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "one\ntwo\nthree\n")
	tl, g := run(t, p, Options{Offset: 8, LineNo: 2})
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, r := g.snapshot()
	if !reflect.DeepEqual(l, []line{{"three", 3, 8, 14}}) || len(r) != 0 {
		t.Fatalf("lines %+v resets %+v", l, r)
	}
	if st := tl.Stats(); st.BytesRead != 6 {
		t.Fatalf("read %d bytes, want only the 6 after the offset", st.BytesRead)
	}
}

func TestResumeOffsetBeyondEnd(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "new\n")
	tl, g := run(t, p, Options{Offset: 100, LineNo: 9})
	if err := tl.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, r := g.snapshot()
	if !reflect.DeepEqual(l, []line{{"new", 1, 0, 4}}) || len(r) != 1 || r[0].Reason != ResetTruncated || r[0].Offset != 100 {
		t.Fatalf("lines %+v resets %+v", l, r)
	}
}

func TestCallbackErrorStopsRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.jsonl")
	appendFile(t, p, "a\nb\n")
	tl, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = tl.Run(context.Background(), func(l linereader.Line) error {
		if string(l.Data) == "b" {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Run: %v", err)
	}
	if err := tl.Sync(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Sync after stop: %v", err)
	}
	if err := tl.Run(context.Background(), nil); err == nil {
		t.Fatal("second Run accepted")
	}
}

func TestNewRefusesNegativeOffset(t *testing.T) {
	if _, err := New("x", Options{Offset: -1}); err == nil {
		t.Fatal("negative offset accepted")
	}
}

// FuzzChunks writes content in arbitrary pieces and checks that the lines
// delivered are exactly its complete lines, each read once.
func FuzzChunks(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\npartial"), []byte{3, 9, 1})
	f.Add([]byte("\n\n\r\n€\n"), []byte{1, 1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, content []byte, cuts []byte) {
		p := filepath.Join(t.TempDir(), "s.jsonl")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		g := newGot()
		tl, err := New(p, Options{NoNotify: true, Poll: time.Hour, ReadSize: 7})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tl.Run(ctx, g.onLine) }()
		rest := content
		for _, c := range cuts {
			n := min(int(c), len(rest))
			appendFile(t, p, string(rest[:n]))
			rest = rest[n:]
			if err := tl.Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		appendFile(t, p, string(rest))
		if err := tl.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-done
		var want []string
		parts := bytes.Split(content, []byte("\n"))
		for _, part := range parts[:len(parts)-1] {
			want = append(want, string(bytes.TrimSuffix(part, []byte("\r"))))
		}
		lines, _ := g.snapshot()
		var gotData []string
		for _, l := range lines {
			gotData = append(gotData, l.Data)
		}
		if !reflect.DeepEqual(gotData, want) {
			t.Fatalf("lines %q, want %q", gotData, want)
		}
		if st := tl.Stats(); st.BytesRead != int64(len(content)) {
			t.Fatalf("read %d bytes of %d", st.BytesRead, len(content))
		}
	})
}
