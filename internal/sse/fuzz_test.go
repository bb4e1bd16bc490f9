package sse

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzReader reads arbitrary bytes whole, cut in two at cut (with an empty
// read wedged between the halves), and one byte per read: the three must
// agree, nothing may panic, and every frame must be well formed.
func FuzzReader(f *testing.F) {
	for _, tc := range corpus {
		f.Add([]byte(tc.stream), uint16(len(tc.stream)/2), uint16(tc.opts.MaxFrame))
	}
	f.Add([]byte("event: delta\r\n\ndata: x\n\n"), uint16(13), uint16(0))
	f.Add([]byte("\xEF\xBB\xBFid: 1\rretry: 5\r\rdata\r\n"), uint16(2), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16, maxFrame uint16) {
		s := string(data)
		opts := Options{MaxFrame: int(maxFrame)}
		whole, wholeStats := readAll(t, newChunks(s), opts)
		k := int(cut) % (len(s) + 1)
		split, splitStats := readAll(t, newChunks(s[:k], "", s[k:]), opts)
		if !reflect.DeepEqual(whole, split) || !reflect.DeepEqual(wholeStats, splitStats) {
			t.Fatalf("cut at %d differs:\nwhole %v\nsplit %v", k, whole, split)
		}
		parts := make([]string, len(s))
		for i := range len(s) {
			parts[i] = s[i : i+1]
		}
		bytewise, _ := readAll(t, newChunks(parts...), opts)
		if !reflect.DeepEqual(whole, bytewise) {
			t.Fatalf("byte reads differ:\nwhole %v\nbytes %v", whole, bytewise)
		}
		last := int64(-1)
		for _, it := range whole {
			var off int64
			if it.Frame != nil {
				fr := it.Frame
				off = fr.Offset
				if strings.ContainsAny(fr.Event+fr.ID, "\r\n") || strings.Contains(fr.Data, "\r") || strings.Contains(fr.ID, "\x00") {
					t.Fatalf("malformed frame %v", it)
				}
				if !fr.HasEvent && !fr.HasData && !fr.HasID && !fr.HasRetry {
					t.Fatalf("frame without a field %v", it)
				}
			} else {
				off = it.Refusal.Offset
				if it.Refusal.Size <= 0 || it.Refusal.Offset+it.Refusal.Size > int64(len(s)) {
					t.Fatalf("refusal out of the stream %v (len %d)", it, len(s))
				}
			}
			if off >= int64(len(s)) {
				t.Fatalf("offset %d (len %d)", off, len(s))
			}
			if it.Frame != nil {
				// Frames come in stream order (a refusal of a line comes
				// before that of its block, which starts earlier).
				if off <= last {
					t.Fatalf("frame offset %d after %d", off, last)
				}
				last = off
			}
		}
	})
}

// FuzzAppendFrame checks that whatever AppendFrame accepts reads back
// unchanged.
func FuzzAppendFrame(f *testing.F) {
	f.Add("message", "12", `{"a":1}`)
	f.Add("", "", "")
	f.Add("end", "x", "a\n\nb\n")
	f.Add("e", "i", " lead")
	f.Fuzz(func(t *testing.T, event, id, data string) {
		b, err := AppendFrame(nil, event, id, data)
		if err != nil {
			return
		}
		got, _ := readAll(t, newChunks(string(b)), Options{})
		if len(got) != 1 || got[0].Frame == nil {
			t.Fatalf("read back %v from %q", got, b)
		}
		fr := got[0].Frame
		if fr.Event != event || fr.ID != id || fr.Data != data || !fr.HasData {
			t.Fatalf("read back %v from %q", got, b)
		}
	})
}
