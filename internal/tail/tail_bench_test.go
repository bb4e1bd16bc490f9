package tail

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/linereader"
)

// BenchmarkTailLatency measures the time from a line appended to the file
// (one write of a 600-byte JSONL record, file kept open as Claude Code
// does) to that line delivered by the Tailer, through file system
// notifications, and through the poll alone. Reports p50-ms and p99-ms.
// Target: p99 under 50 ms with notifications.
func BenchmarkTailLatency(b *testing.B) {
	b.Run("notify", func(b *testing.B) { benchLatency(b, Options{}) })
	b.Run("poll-10ms", func(b *testing.B) { benchLatency(b, Options{NoNotify: true, Poll: 10 * time.Millisecond}) })
}

func benchLatency(b *testing.B, opts Options) {
	p := filepath.Join(b.TempDir(), "s.jsonl")
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	tl, err := New(p, opts)
	if err != nil {
		b.Fatal(err)
	}
	delivered := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tl.Run(ctx, func(linereader.Line) error {
			delivered <- time.Now()
			return nil
		})
	}()
	defer func() { cancel(); <-done }()
	if err := tl.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	rec := []byte(`{"type":"assistant","message":{"id":"msg_1","content":[{"type":"text","text":"` + strings.Repeat("x", 520) + `"}]}}` + "\n")
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-delivered:
			lat = append(lat, at.Sub(start))
		case <-time.After(5 * time.Second):
			b.Fatal("line not delivered within 5s")
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1.0), "max-ms")
}
