package app

import (
	"bytes"
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
	"github.com/happy-dev/happy/relay/outbox"
	"github.com/happy-dev/happy/session"
)

// BenchmarkEventToRelay measures the latency happy adds between an agent
// event and the relay storing the message version that shows it: the event
// goes through the runner, the reducer, the sink (envelope, encryption), the
// durable outbox (commit and fsync) and the sender to an in-process relay on
// loopback, and the clock stops when the relay's acknowledgement arrives.
// Each iteration is a tool call finishing (a state change, flushed at once):
//
//   - step: every iteration is a model step of its own, an assistant message
//     with one tool call (closed after the clock stopped), so each version
//     has the same size (about 1 KiB);
//   - long-message: every call is one more part of one assistant message,
//     so each version carries all the calls before it (about 300 bytes of
//     ciphertext per call: 30 KiB at the 100th).
//
// Reported: p50-ms and p99-ms.
func BenchmarkEventToRelay(b *testing.B) {
	b.Run("step", func(b *testing.B) { benchEventToRelay(b, true) })
	b.Run("long-message", func(b *testing.B) { benchEventToRelay(b, false) })
}

func benchEventToRelay(b *testing.B, steps bool) {
	envA, connA, _ := twoDevices(b)
	// Unbuffered: a send returns once the runner took the event.
	ag := &pushAgent{events: make(chan agent.Event)}
	tag, _ := NewTag()
	var mu sync.Mutex
	acked := map[string]time.Time{}
	ackCh := make(chan struct{}, 1)
	sess, err := connA.Client.OpenSession(context.Background(), relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{}`),
		OnSent: func(acks []relay.Ack) {
			now := time.Now()
			mu.Lock()
			for _, a := range acks {
				acked[a.LocalID] = now
			}
			mu.Unlock()
			select {
			case ackCh <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	red := mapper.NewReducer(mapper.Config{SessionID: tag, Directory: "/w"})
	store := &watchStore{Session: sess}
	runner := session.NewRunner(session.Options{Agent: ag, Reducer: red, Sink: session.NewSink(store, red), Log: envA.Log})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _, _ = runner.Run(ctx) }()
	ag.events <- &agent.TurnStarted{TurnID: "t"}
	if !steps {
		ag.events <- &agent.MessageStarted{Message: "m"}
	}

	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := fmt.Sprintf("c%d", i)
		msg := "m"
		if steps {
			msg = fmt.Sprintf("m%d", i)
			ag.events <- &agent.MessageStarted{Message: msg}
		}
		in, _ := json.Marshal(map[string]string{"command": "echo " + id})
		ag.events <- &agent.ToolCall{Message: msg, CallID: id, Tool: "bash", Input: in}
		ag.events <- &agent.ToolRunning{CallID: id}
		// Let the running state reach the relay first, so the clock runs
		// on a quiet pipeline (a version flushed late is told apart below).
		ag.events <- &agent.Usage{Message: msg} // no change; taken once the runner handled the events before it
		fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
		if err := sess.Flush(fctx); err != nil {
			b.Fatal(err)
		}
		fcancel()
		store.reset()
		t0 := time.Now()
		ag.events <- &agent.ToolCompleted{CallID: id, Output: "ok", Title: "echo"}
		lat = append(lat, waitShown(b, store, &mu, acked, ackCh, id).Sub(t0))
		if steps {
			ag.events <- &agent.StepFinished{Message: msg, Finish: agent.FinishToolCalls}
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	}
}

// watchStore is the session as the sink's record store, keeping a copy of
// every version built since reset (localId and plaintext), so the benchmark
// knows which version first shows a change.
type watchStore struct {
	*relay.Session
	mu    sync.Mutex
	built []builtVersion
}

type builtVersion struct {
	localID string
	body    []byte
}

func (w *watchStore) reset() {
	w.mu.Lock()
	w.built = nil
	w.mu.Unlock()
}

func (w *watchStore) watch(rec string, build func(int64) ([]byte, error)) func(int64) ([]byte, error) {
	return func(v int64) ([]byte, error) {
		body, err := build(v)
		if err == nil {
			w.mu.Lock()
			w.built = append(w.built, builtVersion{localID: outbox.LocalID(rec, v), body: bytes.Clone(body)})
			w.mu.Unlock()
		}
		return body, err
	}
}

// Enqueue is relay.Session.Enqueue, watched.
func (w *watchStore) Enqueue(ctx context.Context, rec string, build func(int64) ([]byte, error)) (int64, error) {
	return w.Session.Enqueue(ctx, rec, w.watch(rec, build))
}

// EnqueueAsync is relay.Session.EnqueueAsync, watched.
func (w *watchStore) EnqueueAsync(ctx context.Context, rec string, build func(int64) ([]byte, error)) (int64, func() error, error) {
	return w.Session.EnqueueAsync(ctx, rec, w.watch(rec, build))
}

// waitShown waits for the relay's acknowledgement of the first version
// built since the store's reset in which the tool call callID is completed,
// and returns when that acknowledgement arrived.
func waitShown(b *testing.B, w *watchStore, mu *sync.Mutex, acked map[string]time.Time, ch chan struct{}, callID string) time.Time {
	deadline := time.After(10 * time.Second)
	target, seen := "", 0
	for {
		if target == "" {
			w.mu.Lock()
			built := w.built[seen:]
			seen = len(w.built)
			w.mu.Unlock()
			for _, bv := range built {
				if target == "" && showsCompleted(b, bv.body, callID) {
					target = bv.localID
				}
			}
		}
		if target != "" {
			mu.Lock()
			at, ok := acked[target]
			mu.Unlock()
			if ok {
				return at
			}
		}
		select {
		case <-ch:
		case <-time.After(100 * time.Microsecond): // built, not acknowledged yet
		case <-deadline:
			b.Fatalf("no acknowledgement of the version completing %s (version %q)", callID, target)
		}
	}
}

// showsCompleted reports whether a message envelope holds the tool call
// callID completed.
func showsCompleted(b *testing.B, body []byte, callID string) bool {
	var env struct {
		Parts []struct {
			CallID string `json:"callID"`
			State  struct {
				Status string `json:"status"`
			} `json:"state"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		b.Fatal(err)
	}
	for _, p := range env.Parts {
		if p.CallID == callID && p.State.Status == "completed" {
			return true
		}
	}
	return false
}

// pushAgent is an agent whose events the benchmark pushes.
type pushAgent struct{ events chan agent.Event }

func (a *pushAgent) Events() <-chan agent.Event                               { return a.events }
func (a *pushAgent) Prompt(context.Context, agent.Prompt) error               { return nil }
func (a *pushAgent) Decide(context.Context, string, agent.Verdict) error      { return nil }
func (a *pushAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *pushAgent) Interrupt(context.Context) error                          { return nil }
func (a *pushAgent) Close() error                                             { return nil }
