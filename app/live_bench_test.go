package app

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// liveRig is a session streaming one text part through the runner (live
// deltas on, as app.Run wires them) to the in-process relay, and a reader on
// another device following it (FollowSessionLive): stored versions set its
// in-memory text of the part, live deltas extend it (session.LiveText).
type liveRig struct {
	ag      *pushAgent
	applied chan int64 // the reader's part length (UTF-16 units) after each change
	length  int64      // the part's length at the agent

	mu     sync.Mutex
	text   *session.LiveText
	stored int // versions of the part the reader received
}

// newLiveRig starts the session with the text "start" and the reader, and
// returns once a delta reached the reader live.
func newLiveRig(tb testing.TB) *liveRig {
	envA, connA, connB := twoDevices(tb)
	r := &liveRig{ag: &pushAgent{events: make(chan agent.Event, 16)}, applied: make(chan int64, 1024), text: session.NewLiveText()}
	tag, _ := NewTag()
	sess, err := connA.Client.OpenSession(context.Background(), relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{}`)})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	live := startLive(sess)
	red := mapper.NewReducer(mapper.Config{SessionID: tag, Directory: "/w"})
	runner := session.NewRunner(session.Options{Agent: r.ag, Reducer: red, Sink: session.NewSink(sess, red), Log: envA.Log, OnBus: live.observe})
	done := make(chan struct{}, 3)
	go func() { _, _ = runner.Run(ctx); done <- struct{}{} }()
	tb.Cleanup(func() {
		cancel()
		<-done
		<-done
		<-done
		live.stop()
		_ = sess.Close()
	})
	r.ag.events <- &agent.TurnStarted{TurnID: "t"}
	r.ag.events <- &agent.MessageStarted{Message: "m"}
	r.push("start")
	sid, err := sess.WaitCreated(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	o, err := FindSession(ctx, connB, sid)
	if err != nil {
		tb.Fatal(err)
	}
	rows := make(chan RowEvent, 64)
	go func() {
		defer func() { done <- struct{}{} }()
		for {
			select {
			case ev := <-rows:
				r.row(ev)
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		_ = FollowSessionLive(ctx, connB, o, 0, rows, func(d session.LiveDelta, err error) {
			if err != nil {
				return
			}
			r.mu.Lock()
			out, t := r.text.Apply(d)
			r.mu.Unlock()
			if out == session.LiveApplied {
				r.note(t)
			}
		})
	}()
	for !r.wait(r.push("w"), 50*time.Millisecond) {
		r.wait(r.length, 1500*time.Millisecond) // the next stored version brings the reader level
	}
	return r
}

// row applies a stored version of the streaming message.
func (r *liveRig) row(ev RowEvent) {
	var env struct {
		Kind  string `json:"kind"`
		Parts []struct {
			ID        string `json:"id"`
			MessageID string `json:"messageID"`
			Type      string `json:"type"`
			Text      string `json:"text"`
		} `json:"parts"`
	}
	if ev.Plain == nil || json.Unmarshal(ev.Plain, &env) != nil || env.Kind != "message" {
		return
	}
	for _, p := range env.Parts {
		if p.Type == "text" {
			r.mu.Lock()
			r.stored++
			t := r.text.Stored(p.MessageID, p.ID, p.Text)
			r.mu.Unlock()
			r.note(t)
		}
	}
}

func (r *liveRig) note(text string) {
	select {
	case r.applied <- utf16Len(text):
	default:
	}
}

// push streams delta and returns the length the reader must reach.
func (r *liveRig) push(delta string) int64 {
	r.ag.events <- &agent.TextDelta{Message: "m", Block: "b", Delta: delta}
	r.length += utf16Len(delta)
	return r.length
}

// wait waits until the reader's part is at least want long, at most d.
func (r *liveRig) wait(want int64, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case n := <-r.applied:
			if n >= want {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// storedVersions is how many versions of the part the reader received.
func (r *liveRig) storedVersions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stored
}

// TestLiveTextReachesReader: deltas reach a following reader live, in
// order, before any stored version of them (the sink's interval is a
// second, and the reader sees each delta before the next is sent).
func TestLiveTextReachesReader(t *testing.T) {
	r := newLiveRig(t)
	stored := r.storedVersions()
	for _, d := range []string{"a", "é", "😀", "z"} {
		if !r.wait(r.push(d), 10*time.Second) {
			t.Fatalf("delta %q never reached the reader", d)
		}
	}
	r.mu.Lock()
	text, _ := r.text.Text(firstPart(r.text))
	r.mu.Unlock()
	if !strings.HasPrefix(text, "startw") || !strings.HasSuffix(text, "aé😀z") {
		t.Fatalf("reader text %q", text)
	}
	if got := r.storedVersions(); got > stored+1 {
		t.Fatalf("%d stored versions during 4 deltas, want coalesced (at most 1)", got-stored)
	}
}

// firstPart returns the key of the one part l knows.
func firstPart(l *session.LiveText) (string, string) {
	for _, k := range l.Keys() {
		return k[0], k[1]
	}
	return "", ""
}

// BenchmarkLiveTextToReader measures how long a streamed piece of text
// takes from the agent (a TextDelta handed to the runner) to a reader on
// another device that follows the session over the in-process relay's
// message stream and applies it to its text of the part. One delta is in
// flight at a time. Reported: p50-ms and p99-ms of that latency, and
// stored-per-s, the versions of the streaming message the relay stored per
// second meanwhile, which stay coalesced (about one per
// session.StreamInterval; run with -benchtime of a few seconds to see it).
func BenchmarkLiveTextToReader(b *testing.B) {
	r := newLiveRig(b)
	stored0 := r.storedVersions()
	var lat []time.Duration
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		if !r.wait(r.push("x"), 10*time.Second) {
			b.Fatal("the reader never saw the delta")
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	versions := r.storedVersions() - stored0
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(versions)/elapsed.Seconds(), "stored-per-s")
	}
}

// utf16Len is the length of s in UTF-16 code units (what offsets count).
func utf16Len(s string) int64 {
	var n int64
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}
