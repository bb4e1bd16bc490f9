package localapi

import (
	"fmt"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

// BenchmarkHubPublish measures one delta and one part update published to
// n subscribers that take their frames after every publish (the cost the
// runner goroutine pays per change, and the writers' Take).
func BenchmarkHubPublish(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("subscribers=%d", n), func(b *testing.B) {
			h := NewHub(HubOptions{})
			subs := make([]*Subscriber, n)
			for i := range subs {
				subs[i] = h.Subscribe()
				defer subs[i].Close()
			}
			up := []mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_1", "hello")}}
			d := []mapper.BusEvent{delta("prt_1", " world")}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				h.Publish(up)
				h.Publish(d)
				for _, s := range subs {
					buf, _ = s.Take(buf[:0])
				}
			}
		})
	}
}

// BenchmarkPublishEncoded measures republishing another hub's frames (the
// daemon following a session): every line of the reducer's goldens
// decoded and published to one subscriber that takes its frames.
func BenchmarkPublishEncoded(b *testing.B) {
	lines := busLines(b)
	names := make([]string, len(lines))
	for i, l := range lines {
		names[i] = typeOf(b, l)
	}
	h := NewHub(HubOptions{})
	sub := h.Subscribe()
	defer sub.Close()
	var buf []byte
	bytes := 0
	for _, l := range lines {
		bytes += len(l)
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	for b.Loop() {
		for i, l := range lines {
			if _, err := h.PublishEncoded(names[i], []byte(l)); err != nil {
				b.Fatal(err)
			}
		}
		buf, _ = sub.Take(buf[:0])
	}
	b.ReportMetric(float64(len(lines)), "frames/op")
}
