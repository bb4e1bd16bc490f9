package bus_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// BenchmarkBus: messages of 1 KiB published by one instance and
// delivered to another, over each engine: paced (the next message is
// published once the last one arrived: latency without queueing) or by 1
// or 4 goroutines as fast as they can (throughput; latency then includes
// the queue). Reported: msgs/s delivered, publish-to-delivery latency
// p50/p99 in ms.
func BenchmarkBus(b *testing.B) {
	for _, engine := range []string{"nats", "postgres"} {
		for _, pubs := range []int{0, 1, 4} {
			mode := fmt.Sprintf("publishers=%d", pubs)
			if pubs == 0 {
				mode = "paced"
			}
			b.Run("engine="+engine+"/"+mode, func(b *testing.B) {
				paced := pubs == 0
				pubs := max(pubs, 1)
				a, r := engines(nil)[engine](b)
				var mu sync.Mutex
				var lat []time.Duration
				done := make(chan struct{}, 1<<20)
				if err := r.Start(func(m []byte) {
					sent := time.Unix(0, int64(binary.BigEndian.Uint64(m)))
					mu.Lock()
					lat = append(lat, time.Since(sent))
					mu.Unlock()
					done <- struct{}{}
				}); err != nil {
					b.Fatal(err)
				}
				if err := a.Start(func([]byte) {}); err != nil {
					b.Fatal(err)
				}
				waitBusReady(b, r)
				per := (b.N + pubs - 1) / pubs
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for range pubs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						msg := make([]byte, 1024)
						for range per {
							binary.BigEndian.PutUint64(msg, uint64(time.Now().UnixNano()))
							if err := a.Publish(context.Background(), msg); err != nil {
								b.Error(err)
								return
							}
							if paced {
								<-done
							}
						}
					}()
				}
				wg.Wait()
				timeout := time.After(60 * time.Second)
				want := per * pubs
				if paced {
					want = 0
				}
				for range want {
					select {
					case <-done:
					case <-timeout:
						b.Fatal("not every message arrived")
					}
				}
				el := time.Since(start)
				b.StopTimer()
				sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
				ms := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
				b.ReportMetric(float64(per*pubs)/el.Seconds(), "msgs/s")
				b.ReportMetric(ms(0.5), "p50-ms")
				b.ReportMetric(ms(0.99), "p99-ms")
			})
		}
	}
}
