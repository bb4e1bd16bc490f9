package sse

import (
	"fmt"
	"io"
	"strings"
	"testing"
)

// kbReads serves a stream in reads of at most 1 KiB.
type kbReads struct {
	s   string
	off int
}

func (r *kbReads) Read(p []byte) (int, error) {
	if r.off == len(r.s) {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1024)], r.s[r.off:])
	r.off += n
	return n, nil
}

// BenchmarkLargeFrame reads one frame of 512 KiB to 4 MiB arriving in 1 KiB
// reads (a big tool result over a slow link). Time per op must double with
// the size, not quadruple:
//
//	go test -run '^$' -bench LargeFrame -benchmem ./internal/sse/
func BenchmarkLargeFrame(b *testing.B) {
	for _, size := range []int{512 << 10, 1 << 20, 2 << 20, 4 << 20} {
		stream := "event: message\nid: 1\ndata: " + strings.Repeat("x", size) + "\n\n"
		b.Run(fmt.Sprintf("size=%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(stream)))
			b.ReportAllocs()
			for b.Loop() {
				rd, _ := NewReader(&kbReads{s: stream}, Options{})
				f, ref, err := rd.Next()
				if err != nil || ref != nil || len(f.Data) != size {
					b.Fatalf("frame of %d bytes, %v, %v", len(f.Data), ref, err)
				}
			}
		})
	}
}

// BenchmarkSmallFrames reads 1000 frames of about 100 bytes (the common case).
func BenchmarkSmallFrames(b *testing.B) {
	var sb strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&sb, "event: message\nid: %d\ndata: {\"seq\":%d,\"content\":%q}\n\n", i, i, strings.Repeat("y", 60))
	}
	stream := sb.String()
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		rd, _ := NewReader(&kbReads{s: stream}, Options{})
		n := 0
		for {
			_, _, err := rd.Next()
			if err != nil {
				break
			}
			n++
		}
		if n != 1000 {
			b.Fatalf("%d frames", n)
		}
	}
}
