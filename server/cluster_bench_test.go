package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/bus/natstest"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

// benchSetup is one configuration of the cluster benchmarks: the store,
// how many instances, and the bus between them.
type benchSetup struct {
	store     string // sqlite or postgres
	instances int
	bus       string // "" (one instance), nats or postgres
}

func benchSetups() []benchSetup {
	return []benchSetup{
		{"sqlite", 1, ""},
		{"postgres", 1, ""},
		{"postgres", 2, "nats"},
		{"postgres", 2, "postgres"},
		{"postgres", 3, "nats"},
		{"postgres", 3, "postgres"},
	}
}

func (s benchSetup) name() string {
	n := fmt.Sprintf("store=%s/instances=%d", s.store, s.instances)
	if s.bus != "" {
		n += "/bus=" + s.bus
	}
	return n
}

// startBench runs the setup's relays (quiet logs) and returns their URLs.
func startBench(b *testing.B, s benchSetup) []string {
	b.Helper()
	var db, natsURL string
	if s.store == "postgres" {
		db = pgtest.URL(b)
	}
	if s.bus == "nats" {
		natsURL = natstest.Start(b)
	}
	var urls []string
	for range s.instances {
		cfg := server.Config{Logger: zerolog.Nop(), Database: db}
		switch s.bus {
		case "nats":
			cfg.BusURL = natsURL
		case "postgres":
			cfg.BusURL = db
		}
		r := servertest.StartConfig(b, cfg)
		urls = append(urls, r.URL)
	}
	return urls
}

// BenchmarkClusterIngest: 4 writers, spread over the instances, POST
// batches of 50 × 1 KiB into their own sessions over loopback HTTP, each
// acknowledged after its commit; msgs/s is the total throughput.
func BenchmarkClusterIngest(b *testing.B) {
	for _, s := range benchSetups() {
		b.Run(s.name(), func(b *testing.B) {
			urls := startBench(b, s)
			acct := servertest.NewAccount(b, urls[0])
			const writers = 4
			sids := make([]string, writers)
			for i := range sids {
				a := api{t: b, base: urls[i%len(urls)], token: acct.Token}
				sids[i] = a.createSession(fmt.Sprint("ingest-", i), "m")["id"].(string)
			}
			body := strings.Repeat("A", 1024)
			per := (b.N + writers - 1) / writers
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					base := urls[w%len(urls)]
					for i := range per {
						msgs := make([]map[string]string, 50)
						for j := range msgs {
							msgs[j] = map[string]string{"localId": fmt.Sprintf("w%d-%d-%d", w, i, j), "content": body}
						}
						var out struct{}
						st, err := postJSON(context.Background(), base+"/v3/sessions/"+sids[w]+"/messages", acct.Token, map[string]any{"messages": msgs}, &out)
						if err != nil || st != http.StatusOK {
							b.Errorf("post: %d %v", st, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(per*writers*50)/el.Seconds(), "msgs/s")
		})
	}
}

// BenchmarkClusterFanout: one session with 30 session-scoped sockets
// spread over the instances; 4 writers, spread too, POST one 1 KiB
// message at a time. e2e-p50/p99-ms run from the POST sent to the last
// socket's receipt of the update; msgs/s is messages delivered to every
// socket per second.
func BenchmarkClusterFanout(b *testing.B) {
	for _, s := range benchSetups() {
		b.Run(s.name(), func(b *testing.B) {
			urls := startBench(b, s)
			acct := servertest.NewAccount(b, urls[0])
			a := api{t: b, base: urls[0], token: acct.Token}
			sid := a.createSession("fanout", "m")["id"].(string)
			const sockets, writers = 30, 4
			var mu sync.Mutex
			sentAt := map[string]time.Time{}
			count := map[string]int{}
			var lat []time.Duration
			all := make(chan struct{}, 1<<16)
			for i := range sockets {
				c := sessionSocket(b, urls[i%len(urls)], acct.Token, sid)
				c.On("update", func(args []any, _ func(...any)) {
					now := time.Now()
					u, _ := args[0].(map[string]any)
					body, _ := u["body"].(map[string]any)
					m, _ := body["message"].(map[string]any)
					lid, _ := m["localId"].(string)
					mu.Lock()
					count[lid]++
					if count[lid] == sockets {
						lat = append(lat, now.Sub(sentAt[lid]))
						delete(count, lid)
						all <- struct{}{}
					}
					mu.Unlock()
				})
			}
			body := strings.Repeat("A", 1024)
			per := (b.N + writers - 1) / writers
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					base := urls[w%len(urls)]
					for i := range per {
						lid := fmt.Sprintf("w%d-%d", w, i)
						mu.Lock()
						sentAt[lid] = time.Now()
						mu.Unlock()
						var out struct{}
						st, err := postJSON(context.Background(), base+"/v3/sessions/"+sid+"/messages", acct.Token,
							map[string]any{"messages": []map[string]string{{"localId": lid, "content": body}}}, &out)
						if err != nil || st != http.StatusOK {
							b.Errorf("post: %d %v", st, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			timeout := time.After(60 * time.Second)
			for range per * writers {
				select {
				case <-all:
				case <-timeout:
					b.Fatalf("not every socket got every message")
				}
			}
			el := time.Since(start)
			b.StopTimer()
			mu.Lock()
			defer mu.Unlock()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			ms := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
			b.ReportMetric(float64(per*writers)/el.Seconds(), "msgs/s")
			b.ReportMetric(ms(0.50), "e2e-p50-ms")
			b.ReportMetric(ms(0.99), "e2e-p99-ms")
		})
	}
}
