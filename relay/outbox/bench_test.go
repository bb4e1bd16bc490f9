package outbox

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// content is a typical sealed message version: ~1 KiB of base64.
var content = strings.Repeat("A", 1024)

// BenchmarkAppend measures durable appends one at a time (every append is
// its own transaction and fsync): the floor a single writer sees.
func BenchmarkAppend(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, err := Open(context.Background(), b.TempDir(), Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Append(context.Background(), Entry{Session: "s", Record: "r", Version: int64(i + 1), Content: content}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "versions/s")
		})
	}
}

// BenchmarkAppendParallel measures durable appends from 64 concurrent
// writers: the group commit shares one fsync among all queued appends.
func BenchmarkAppendParallel(b *testing.B) {
	s, err := Open(context.Background(), b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var writer atomic.Int64
	b.SetParallelism(32) // 32 × GOMAXPROCS goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rec := fmt.Sprintf("w%d", writer.Add(1))
		v := int64(0)
		for pb.Next() {
			v++
			if err := s.Append(context.Background(), Entry{Session: "s", Record: rec, Version: v, Content: content}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := s.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "versions/s")
	b.ReportMetric(float64(st.Operations)/float64(max(1, st.Commits)), "appends/commit")
}
