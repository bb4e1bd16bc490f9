// Package jsonrpctest holds what the JSON-RPC adapters' tests and
// benchmarks share: BenchmarkMapTraffic's measurement over recorded
// traffic captures.
package jsonrpctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// The live mapping's budget (docs/ARCHITECTURE.md, "Mapping and
// delivery"): agents write 0.1–54 KiB/s, so a decoder that maps at least
// MinCPUMBps per core takes under a few percent of one; MaxBytesPerByte
// bounds what it allocates per input byte.
const (
	MinCPUMBps      = 20
	MaxBytesPerByte = 10
)

// minCPU is the least CPU time a run must take for MapTraffic to hold it
// to MinCPUMBps: a shorter one is within the clock's granularity.
const minCPU = 200 * time.Millisecond

// Decoder is what MapTraffic feeds: one frame at a time, as a live
// connection does (the adapters' decoders, whose events MapTraffic
// discards).
type Decoder interface {
	Decode(jsonrpc.Frame) []agent.Event
}

// MapTraffic measures the live mapping path over every capture whose
// rpc-traffic.jsonl matches glob (a filepath.Glob pattern): each frame
// parsed once (jsonrpc.FrameOf, as the connection does) and decoded by a
// decoder from newDecoder, one per capture as one per session. Sub-benchmark
// x1 is the captures once; x10 is each capture fed ten times to the same
// decoder, so the input grows tenfold while the open state does not.
// Reported besides MB/s (message bytes, wall time): cpu-MB/s (the
// process's CPU time, garbage collection included, which other work on the
// machine does not distort), B/byte (allocated per input byte) and
// retained-KB (what the decoders of one more pass hold at its end, after a
// GC). The benchmark fails when B/byte is above MaxBytesPerByte, or
// cpu-MB/s below MinCPUMBps over a run of at least minCPU.
func MapTraffic(b *testing.B, glob string, newDecoder func() Decoder) {
	caps := loadCaptures(b, glob)
	for _, rep := range []int{1, 10} {
		b.Run(fmt.Sprintf("x%d", rep), func(b *testing.B) {
			var size int64
			for _, c := range caps {
				for _, r := range c {
					size += int64(len(r.Msg))
				}
			}
			size *= int64(rep)
			b.SetBytes(size)
			b.ReportAllocs()
			decodeAll := func() []Decoder {
				decs := make([]Decoder, 0, len(caps))
				for _, c := range caps {
					dec := newDecoder()
					for range rep {
						for _, r := range c {
							dec.Decode(jsonrpc.FrameOf(r))
						}
					}
					decs = append(decs, dec)
				}
				return decs
			}
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			c0 := cpuTime()
			for b.Loop() {
				decodeAll()
			}
			cpu := cpuTime() - c0
			runtime.ReadMemStats(&ms1)
			// Retained: one more pass, its decoders kept, after a GC.
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			decs := decodeAll()
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(decs)
			if after.HeapAlloc > before.HeapAlloc {
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1024, "retained-KB")
			}
			perByte := float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(size) / float64(b.N)
			b.ReportMetric(perByte, "B/byte")
			if perByte > MaxBytesPerByte {
				b.Errorf("allocated %.2f bytes per input byte, the budget is %d", perByte, MaxBytesPerByte)
			}
			if cpu > 0 {
				rate := float64(size) * float64(b.N) / (1 << 20) / cpu.Seconds()
				b.ReportMetric(rate, "cpu-MB/s")
				if cpu >= minCPU && rate < MinCPUMBps {
					b.Errorf("mapped %.1f MB per CPU second, the budget is at least %d", rate, MinCPUMBps)
				}
			}
		})
	}
}

// loadCaptures reads the traffic records of every capture matching glob.
func loadCaptures(b *testing.B, glob string) [][]trafficlog.Record {
	paths, err := filepath.Glob(glob)
	if err != nil || len(paths) == 0 {
		b.Fatalf("no captures match %s: %v", glob, err)
	}
	var caps [][]trafficlog.Record
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		r, err := trafficlog.NewReader(bytes.NewReader(raw), linereader.Options{})
		if err != nil {
			b.Fatal(err)
		}
		var recs []trafficlog.Record
		for {
			rec, _, err := r.Next()
			if err != nil {
				break
			}
			recs = append(recs, rec)
		}
		caps = append(caps, recs)
	}
	return caps
}

// cpuTime is the CPU time the process used so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
