package codex

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/jsonrpc/jsonrpctest"
	"github.com/happy-dev/happy/agent"
)

type nopDec struct{}

func (nopDec) Decode(jsonrpc.Frame) []agent.Event { return nil }

func BenchmarkTmpFrames(b *testing.B) {
	jsonrpctest.MapTraffic(b, filepath.Join("testdata", "captures", "codex-app*", "rpc-traffic.jsonl"),
		func() jsonrpctest.Decoder { return nopDec{} })
}

func BenchmarkTmpDecodeOnly(b *testing.B) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "captures", "codex-app*", "rpc-traffic.jsonl"))
	var caps [][]jsonrpc.Frame
	var size int64
	for _, p := range paths {
		f, _ := os.Open(p)
		t, _ := jsonrpc.ReadTraffic(f)
		f.Close()
		caps = append(caps, t.Frames)
		for _, fr := range t.Frames {
			size += int64(len(fr.Data))
		}
	}
	size *= 10
	b.SetBytes(size)
	b.ReportAllocs()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	c0 := cpu()
	for b.Loop() {
		for _, c := range caps {
			d := NewAppServerDecoder()
			for range 10 {
				for _, f := range c {
					d.Decode(f)
				}
			}
		}
	}
	c := cpu() - c0
	runtime.ReadMemStats(&ms1)
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(size)/float64(b.N), "B/byte")
	b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/c.Seconds(), "cpu-MB/s")
}

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
