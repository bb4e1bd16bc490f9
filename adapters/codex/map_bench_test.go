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

// BenchmarkMapTraffic measures the live mapping path (frame parse and
// decode) over every app-server capture (testdata/captures/codex-app*);
// see jsonrpctest.MapTraffic for what it reports.
func BenchmarkMapTraffic(b *testing.B) {
	jsonrpctest.MapTraffic(b, filepath.Join("testdata", "captures", "codex-app*", "rpc-traffic.jsonl"),
		func() jsonrpctest.Decoder { return NewDecoder(ProtocolAppServer) })
}

// nopDecoder maps nothing: BenchmarkMapTraffic/frames is the frame parse
// alone.
type nopDecoder struct{}

func (nopDecoder) Decode(jsonrpc.Frame) []agent.Event { return nil }

// BenchmarkMapTrafficShare splits BenchmarkMapTraffic's x10 work in two:
// frames is the frame parse alone (jsonrpc.FrameOf, with a decoder that
// maps nothing); decode is the app-server decoder alone, over frames
// parsed beforehand. Both report cpu-MB/s and B/byte as MapTraffic does.
func BenchmarkMapTrafficShare(b *testing.B) {
	glob := filepath.Join("testdata", "captures", "codex-app*", "rpc-traffic.jsonl")
	b.Run("frames", func(b *testing.B) {
		jsonrpctest.MapTraffic(b, glob, func() jsonrpctest.Decoder { return nopDecoder{} })
	})
	b.Run("decode", func(b *testing.B) {
		paths, err := filepath.Glob(glob)
		if err != nil || len(paths) == 0 {
			b.Fatalf("no captures match %s: %v", glob, err)
		}
		const rep = 10
		var caps [][]jsonrpc.Frame
		var size int64
		for _, p := range paths {
			frames := trafficFrames(b, p)
			caps = append(caps, frames)
			for _, f := range frames {
				size += int64(len(f.Data))
			}
		}
		size *= rep
		b.SetBytes(size)
		b.ReportAllocs()
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		c0 := cpuTime()
		for b.Loop() {
			for _, frames := range caps {
				dec := NewAppServerDecoder()
				for range rep {
					for _, f := range frames {
						dec.Decode(f)
					}
				}
			}
		}
		cpu := cpuTime() - c0
		runtime.ReadMemStats(&ms1)
		b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(size)/float64(b.N), "B/byte")
		if cpu > 0 {
			b.ReportMetric(float64(size)*float64(b.N)/(1<<20)/cpu.Seconds(), "cpu-MB/s")
		}
	})
}

// cpuTime is the CPU time the process used so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// trafficFrames reads the frames of the traffic log at path.
func trafficFrames(t testing.TB, path string) []jsonrpc.Frame {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := jsonrpc.ReadTraffic(f)
	if err != nil {
		t.Fatal(err)
	}
	return tr.Frames
}
