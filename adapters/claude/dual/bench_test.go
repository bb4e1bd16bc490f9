package dual

import "testing"

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
		r.key("  ")
		r.waitMode(ModeLocal)
		r.expectOutput("FAKE TUI READY", i+2)
	}
	b.StopTimer()
	if err := r.agent.Close(); err != nil {
		b.Fatal(err)
	}
	r.drain()
}
