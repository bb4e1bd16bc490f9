package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// BenchmarkEventToRelay measures the latency happy adds between an agent
// event and the relay storing the message version that shows it: the event
// goes through the runner, the reducer, the sink (envelope, encryption), the
// durable outbox (fsync) and the sender to an in-process relay on loopback,
// and the clock stops when the relay's acknowledgement arrives. Each
// iteration is a tool call finishing (a state change, flushed at once).
// Reported: p50-ms and p99-ms.
func BenchmarkEventToRelay(b *testing.B) {
	envA, connA, _ := twoDevices(b)
	ag := &pushAgent{events: make(chan agent.Event, 16)}
	tag, _ := NewTag()
	var mu sync.Mutex
	acked := map[string]time.Time{}
	ackCh := make(chan struct{}, 1024)
	sess, err := connA.Client.OpenSession(context.Background(), relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{}`),
		OnSent: func(acks []relay.Ack) {
			now := time.Now()
			mu.Lock()
			for _, a := range acks {
				acked[a.LocalID] = now
			}
			mu.Unlock()
			ackCh <- struct{}{}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	red := mapper.NewReducer(mapper.Config{SessionID: tag, Directory: "/w"})
	runner := session.NewRunner(session.Options{Agent: ag, Reducer: red, Sink: session.NewSink(sess, red), Log: envA.Log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = runner.Run(ctx) }()
	ag.events <- &agent.TurnStarted{TurnID: "t"}
	ag.events <- &agent.MessageStarted{Message: "m"}

	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("c%d", i)
		in, _ := json.Marshal(map[string]string{"command": "echo " + id})
		mu.Lock()
		start := len(acked)
		mu.Unlock()
		ag.events <- &agent.ToolCall{Message: "m", CallID: id, Tool: "bash", Input: in}
		ag.events <- &agent.ToolRunning{CallID: id}
		// Let the running state reach the relay, then time the completion.
		waitAcked(b, &mu, acked, ackCh, func(n int) bool { return n > start })
		time.Sleep(2 * time.Millisecond) // let a second flush of the same change settle
		mu.Lock()
		before := len(acked)
		mu.Unlock()
		t0 := time.Now()
		ag.events <- &agent.ToolCompleted{CallID: id, Output: "ok", Title: "echo"}
		waitAcked(b, &mu, acked, ackCh, func(n int) bool { return n > before })
		mu.Lock()
		var last time.Time
		for _, at := range acked {
			if at.After(last) {
				last = at
			}
		}
		mu.Unlock()
		lat = append(lat, last.Sub(t0))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	}
}

func waitAcked(b *testing.B, mu *sync.Mutex, acked map[string]time.Time, ch chan struct{}, ok func(int) bool) {
	deadline := time.After(10 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if ok(n) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			b.Fatal("no acknowledgement from the relay")
		}
	}
}

// pushAgent is an agent whose events the benchmark pushes.
type pushAgent struct{ events chan agent.Event }

func (a *pushAgent) Events() <-chan agent.Event                               { return a.events }
func (a *pushAgent) Prompt(context.Context, agent.Prompt) error               { return nil }
func (a *pushAgent) Decide(context.Context, string, agent.Verdict) error      { return nil }
func (a *pushAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *pushAgent) Interrupt(context.Context) error                          { return nil }
func (a *pushAgent) Close() error                                             { return nil }
