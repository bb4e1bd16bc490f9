package storetest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/happy-dev/happy/server/store"
)

// Ingest batch shape: BatchSize messages of MessageBytes of content each.
const (
	BatchSize    = 50
	MessageBytes = 1024
)

// BenchmarkIngest measures AppendMessages with batches of 50 messages of
// 1 KiB and reports msgs/s: "sessions=1" is one writer on one session;
// "sessions=8" is 8 writers, each on its own account's session, spread over
// b.Instances stores (the load several relay instances put on one database).
func BenchmarkIngest(b *testing.B, be Backend) {
	content := strings.Repeat("x", MessageBytes)
	for _, writers := range []int{1, 8} {
		b.Run(fmt.Sprintf("sessions=%d", writers), func(b *testing.B) {
			openOn := be.NewDB(b)
			n := max(be.Instances, 1)
			if writers == 1 {
				n = 1
			}
			stores := make([]store.Store, n)
			for i := range stores {
				stores[i] = openOn(b)
			}
			type target struct {
				s         store.Store
				acct, sid string
			}
			targets := make([]target, writers)
			for i := range targets {
				s := stores[i%n]
				a := account(b, s, fmt.Sprint("bench-", i))
				targets[i] = target{s: s, acct: a.ID, sid: session(b, s, a.ID, "bench", 1).ID}
			}
			var next atomic.Int64
			b.SetBytes(BatchSize * MessageBytes)
			b.ResetTimer()
			done := make(chan error, writers)
			for _, tg := range targets {
				go func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							done <- nil
							return
						}
						batch := make([]store.NewMessage, BatchSize)
						for j := range batch {
							batch[j] = store.NewMessage{LocalID: fmt.Sprintf("%d-%d", i, j), Content: content}
						}
						if _, err := tg.s.AppendMessages(ctx, tg.acct, tg.sid, batch, i); err != nil {
							done <- err
							return
						}
					}
				}()
			}
			for range writers {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*BatchSize)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
