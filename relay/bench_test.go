package relay

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/server/servertest"
)

// BenchmarkEnqueueToAck measures the end-to-end latency from Enqueue (seal
// + durable outbox commit) to the relay's acknowledgement of that version,
// on loopback against the in-process relay, and reports p50/p99.
//
//   - sequential: one version in flight at a time (pure latency)
//   - stream: versions enqueued back to back by 8 writers, as a streaming
//     agent does; batching amortises the round trip
func BenchmarkEnqueueToAck(b *testing.B) {
	for _, mode := range []struct {
		name    string
		writers int
		wait    bool
	}{{"sequential", 1, true}, {"stream", 8, false}} {
		b.Run(mode.name, func(b *testing.B) {
			url := servertest.Start(b).URL
			creds := newAccount(b, url)
			c := newTestClient(b, testConfig(b, url, creds, b.TempDir()))
			var mu sync.Mutex
			start := map[string]time.Time{}
			var lat []time.Duration
			acked := make(chan string, 1024)
			s := openTestSession(b, c, SessionOptions{Tag: newTag(b), OnSent: func(acks []Ack) {
				now := time.Now()
				mu.Lock()
				for _, a := range acks {
					if t0, ok := start[a.LocalID]; ok {
						lat = append(lat, now.Sub(t0))
					}
				}
				mu.Unlock()
				if mode.wait {
					for _, a := range acks {
						acked <- a.LocalID
					}
				}
			}})
			payload := make([]byte, 1024)
			for i := range payload {
				payload[i] = 'x'
			}
			ctx := context.Background()
			b.ResetTimer()
			var wg sync.WaitGroup
			per := (b.N + mode.writers - 1) / mode.writers
			for w := range mode.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rec := fmt.Sprintf("msg_%d", w)
					for range per {
						t0 := time.Now()
						v, err := s.Enqueue(ctx, rec, func(v int64) ([]byte, error) {
							mu.Lock()
							start[fmt.Sprintf("%s.%d", rec, v)] = t0
							mu.Unlock()
							return fmt.Appendf(nil, `{"kind":"message","version":%d,"info":{"id":%q},"parts":[{"text":%q}]}`, v, rec, payload), nil
						})
						if err != nil {
							b.Error(err)
							return
						}
						id := fmt.Sprintf("%s.%d", rec, v)
						if mode.wait {
							for got := range acked {
								if got == id {
									break
								}
							}
						}
					}
				}()
			}
			wg.Wait()
			if err := s.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(lat)
			if len(lat) == 0 {
				b.Fatal("no latency measured")
			}
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "versions/s")
		})
	}
}
