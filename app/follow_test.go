package app

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// watchWriter is a follower's output: it keeps what was written, when
// each write ended, and wakes whoever waits for a text to appear.
type watchWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	ends  []int // buf's length after each write
	times []time.Time
	wrote chan struct{}
}

func newWatchWriter() *watchWriter { return &watchWriter{wrote: make(chan struct{}, 1)} }

func (w *watchWriter) Write(p []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	w.buf.Write(p)
	w.ends = append(w.ends, w.buf.Len())
	w.times = append(w.times, now)
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor waits until text appears in the output after byte from, and
// returns when the write that completed it ended and the offset after it.
func (w *watchWriter) waitFor(text string, from int, within time.Duration) (time.Time, int, bool) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		s := w.buf.String()
		if i := strings.Index(s[min(from, len(s)):], text); i >= 0 {
			end := from + i + len(text)
			k := sort.SearchInts(w.ends, end)
			at := w.times[k]
			w.mu.Unlock()
			return at, end, true
		}
		w.mu.Unlock()
		select {
		case <-w.wrote:
		case <-deadline.C:
			return time.Time{}, from, false
		}
	}
}

// followRig is a session written on one home as app.Run writes it (runner,
// sink, outbox, live text deltas) to the in-process relay, and `happy log
// --follow`'s reading of it on another home: the message stream
// (FollowSessionEvents) into a FollowPrinter, in the readable layout.
type followRig struct {
	ag   *pushAgent
	out  *watchWriter
	sess *relay.Session

	mu   sync.Mutex
	rows []string    // plaintexts of the rows the printer took, in order
	acks []time.Time // when the relay's acknowledgements of the writer's posts arrived
}

func newFollowRig(tb testing.TB) *followRig {
	envA, connA, connB := twoDevices(tb)
	r := &followRig{ag: &pushAgent{events: make(chan agent.Event)}, out: newWatchWriter()}
	tag, _ := NewTag()
	sess, err := connA.Client.OpenSession(context.Background(), relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{}`),
		OnSent: func([]relay.Ack) {
			now := time.Now()
			r.mu.Lock()
			r.acks = append(r.acks, now)
			r.mu.Unlock()
		}})
	if err != nil {
		tb.Fatal(err)
	}
	r.sess = sess
	ctx, cancel := context.WithCancel(context.Background())
	live := startLive(sess)
	red := mapper.NewReducer(mapper.Config{SessionID: tag, Directory: "/w"})
	runner := session.NewRunner(session.Options{Agent: r.ag, Reducer: red, Sink: session.NewSink(sess, red), Log: envA.Log, OnBus: live.observe})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = runner.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		wg.Wait()
		live.stop()
		_ = sess.Close()
	})
	r.ag.events <- &agent.UserPrompt{PromptID: "p", Text: "Go."}
	r.ag.events <- &agent.TurnStarted{TurnID: "t"}
	sid, err := sess.WaitCreated(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	o, err := FindSession(ctx, connB, sid)
	if err != nil {
		tb.Fatal(err)
	}
	rb, after, err := ReadTranscript(ctx, connB, o, ReadOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	printer := NewFollowPrinter(r.out, rb, FollowPrinterOptions{Text: export.TextOptions{SessionID: sid}})
	if err := printer.Print(false); err != nil {
		tb.Fatal(err)
	}
	events := make(chan RowEvent, 256)
	wg.Add(2)
	go func() { defer wg.Done(); _ = FollowSessionEvents(ctx, connB, o, after, events) }()
	go func() {
		defer wg.Done()
		for {
			select {
			case ev := <-events:
				if ev.Live == nil && ev.Plain != nil {
					r.mu.Lock()
					r.rows = append(r.rows, string(ev.Plain))
					r.mu.Unlock()
				}
				if err := printer.Take(ev); err != nil {
					tb.Error(err)
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return r
}

// send hands the events to the runner (each returns once it took it).
func (r *followRig) send(evs ...agent.Event) {
	for _, ev := range evs {
		r.ag.events <- ev
	}
}

// ackAfter returns when the first acknowledgement after t arrived.
func (r *followRig) ackAfter(t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acks {
		if a.After(t) {
			return a, true
		}
	}
	return time.Time{}, false
}

// storedHas reports whether a row the printer took holds text.
func (r *followRig) storedHas(text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.rows {
		if strings.Contains(p, text) {
			return true
		}
	}
	return false
}

// A tool that completes after a text the agent never said was over (ACP
// reports no text end) is printed by a follower on another home as soon as
// the relay has it: no later event of the agent has to come first.
func TestFollowPrintsACompletedToolAtOnce(t *testing.T) {
	r := newFollowRig(t)
	r.send(&agent.MessageStarted{Message: "m"},
		&agent.TextDelta{Message: "m", Block: "b", Delta: "Let me look."},
		&agent.ToolCall{Message: "m", CallID: "c1", Tool: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolCompleted{CallID: "c1", Output: "a.go"})
	// Nothing more is sent: the agent pauses.
	if _, _, ok := r.out.waitFor("● bash ls — completed  [c1]\n  │ a.go\n", 0, 10*time.Second); !ok {
		t.Fatalf("the follower did not print the completed tool; it printed:\n%s", r.out.String())
	}
	if got, want := r.out.String(), "> Go.\nLet me look.\n● bash ls — completed  [c1]\n  │ a.go\n"; got != want {
		t.Fatalf("the follower printed\n%q\nwant\n%q", got, want)
	}
}

// Streamed text reaches `happy log --follow`'s output from the live text
// deltas, before any stored version holds it (the sink stores a streaming
// message about once a second), in order and each piece once.
func TestFollowPrintsLiveText(t *testing.T) {
	r := newFollowRig(t)
	r.send(&agent.MessageStarted{Message: "m"}, &agent.TextDelta{Message: "m", Block: "b", Delta: "Hello"})
	_, from, ok := r.out.waitFor("Hello", 0, 10*time.Second)
	if !ok {
		t.Fatalf("the new text part was not printed: %q", r.out.String())
	}
	text := "Hello"
	for _, d := range []string{",", " wö", "rld", " 😀"} {
		text += d
		r.send(&agent.TextDelta{Message: "m", Block: "b", Delta: d})
		if _, from, ok = r.out.waitFor(d, from, 10*time.Second); !ok {
			t.Fatalf("delta %q was not printed: %q", d, r.out.String())
		}
		if r.storedHas(text) {
			t.Fatalf("%q was printed only after a stored version held it", text)
		}
	}
	if got, want := r.out.String(), "> Go.\n"+text; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
	// The final version settles the line, each piece written once.
	r.send(&agent.TextFinal{Message: "m", Block: "b", Text: text}, &agent.StepFinished{Message: "m", Finish: agent.FinishStop})
	if _, _, ok := r.out.waitFor(text+"\n", 0, 10*time.Second); !ok {
		t.Fatalf("the settled text: %q", r.out.String())
	}
}

// BenchmarkEventToFollower measures what a person on another home waits
// for: from an agent event handed to the writer's runner to the line that
// shows it printed by `happy log --follow`'s reader (FollowSessionEvents
// into a FollowPrinter) over the in-process relay on loopback. The writer
// is what app.Run runs: runner, reducer, sink, durable outbox (commit and
// fsync), sender, live deltas.
//
//   - tool: a tool call completing after the text before it, the agent then
//     pausing (each iteration is a model step of its own); also reported
//     from the relay's acknowledgement of the version that shows it to
//     the follower's line (stored-p50-ms, stored-p99-ms: the reader's part,
//     the stream and the printing);
//   - new-text: the first words of a text part in a message already
//     stored (the part's first version, stored at once);
//   - text: a streamed piece of text (a live delta; the stored versions
//     stay coalesced).
//
// Reported: p50-ms and p99-ms.
func BenchmarkEventToFollower(b *testing.B) {
	b.Run("tool", func(b *testing.B) {
		r := newFollowRig(b)
		var lat, fromStore []time.Duration
		from := 0
		for i := 0; b.Loop(); i++ {
			msg, id := fmt.Sprintf("m%d", i), fmt.Sprintf("c%d", i)
			cmd := "echo " + id
			in, _ := json.Marshal(map[string]string{"command": cmd})
			r.send(&agent.MessageStarted{Message: msg},
				&agent.TextDelta{Message: msg, Block: "b", Delta: "Running " + id + "."},
				&agent.ToolCall{Message: msg, CallID: id, Tool: "bash", Input: in},
				&agent.ToolRunning{CallID: id})
			// The clock runs on a quiet pipeline: the running tool reached
			// the relay first.
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := r.sess.Flush(fctx); err != nil {
				b.Fatal(err)
			}
			fcancel()
			t0 := time.Now()
			r.send(&agent.ToolCompleted{CallID: id, Output: "ok"})
			at, end, ok := r.out.waitFor("● bash "+cmd+" — completed  ["+id+"]\n", from, 10*time.Second)
			if !ok {
				b.Fatalf("the follower never printed %s: %q", id, r.out.String())
			}
			lat = append(lat, at.Sub(t0))
			if ack, ok := r.ackAfter(t0); ok {
				fromStore = append(fromStore, at.Sub(ack))
			}
			from = end
			r.send(&agent.StepFinished{Message: msg, Finish: agent.FinishToolCalls})
		}
		reportLatency(b, lat)
		if len(fromStore) > 0 {
			sort.Slice(fromStore, func(i, j int) bool { return fromStore[i] < fromStore[j] })
			b.ReportMetric(float64(fromStore[len(fromStore)/2].Microseconds())/1000, "stored-p50-ms")
			b.ReportMetric(float64(fromStore[min(len(fromStore)-1, len(fromStore)*99/100)].Microseconds())/1000, "stored-p99-ms")
		}
	})
	b.Run("new-text", func(b *testing.B) {
		r := newFollowRig(b)
		var lat []time.Duration
		from := 0
		for i := 0; b.Loop(); i++ {
			msg, piece := fmt.Sprintf("m%d", i), fmt.Sprintf("Step %d.", i)
			r.send(&agent.MessageStarted{Message: msg})
			fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := r.sess.Flush(fctx); err != nil {
				b.Fatal(err)
			}
			fcancel()
			t0 := time.Now()
			r.send(&agent.TextDelta{Message: msg, Block: "b", Delta: piece})
			at, end, ok := r.out.waitFor(piece, from, 10*time.Second)
			if !ok {
				b.Fatalf("the follower never printed %q", piece)
			}
			lat = append(lat, at.Sub(t0))
			from = end
			r.send(&agent.StepFinished{Message: msg, Finish: agent.FinishStop})
		}
		reportLatency(b, lat)
	})
	b.Run("text", func(b *testing.B) {
		r := newFollowRig(b)
		r.send(&agent.MessageStarted{Message: "m"}, &agent.TextDelta{Message: "m", Block: "b", Delta: "start"})
		_, from, ok := r.out.waitFor("start", 0, 10*time.Second)
		if !ok {
			b.Fatal("the text part was never printed")
		}
		var lat []time.Duration
		for i := 0; b.Loop(); i++ {
			piece := fmt.Sprintf(" w%d", i)
			t0 := time.Now()
			r.send(&agent.TextDelta{Message: "m", Block: "b", Delta: piece})
			at, end, ok := r.out.waitFor(piece, from, 10*time.Second)
			if !ok {
				b.Fatalf("the follower never printed %q", piece)
			}
			lat = append(lat, at.Sub(t0))
			from = end
		}
		reportLatency(b, lat)
	})
}

// reportLatency reports the p50 and p99 of lat in milliseconds.
func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
	}
}
