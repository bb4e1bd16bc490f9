package dual

import (
	"testing"

	"github.com/happy-dev/happy/agent"
)

// BenchmarkQueue measures the event queue between a mode's stream and
// Events: one event pushed by a forwarder and received by the runner.
func BenchmarkQueue(b *testing.B) {
	q := newQueue()
	ev := &agent.TextDelta{Message: "msg_1", Delta: "x"}
	done := make(chan int)
	go func() {
		n := 0
		for range q.out {
			n++
		}
		done <- n
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.push(ev)
	}
	q.close()
	if n := <-done; n != b.N {
		b.Fatalf("delivered %d of %d", n, b.N)
	}
}

// BenchmarkSwitchRoundTrip measures one full switch cycle against the fake
// Claude: a prompt in local mode (Claude's UI stopped, SDK mode started
// with --resume, the prompt answered) and a key (SDK mode stopped, the UI
// resumed and ready), process starts included.
func BenchmarkSwitchRoundTrip(b *testing.B) {
	r := newRun(b)
	r.start(nil)
	r.expectOutput("FAKE TUI READY", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.prompt("two"); err != nil {
			b.Fatal(err)
		}
		r.turnEnded()
		r.key("x")
		r.waitMode(ModeLocal)
		r.expectOutput("FAKE TUI READY", i+2)
	}
	b.StopTimer()
	if err := r.agent.Close(); err != nil {
		b.Fatal(err)
	}
	r.drain()
}
