package app

import (
	"context"
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// BenchmarkLiveTextToReader measures how long a streamed piece of text
// takes from the agent (a TextDelta event handed to the runner) to a reader
// on another device that follows the session (FollowSessionLive over the
// in-process relay's message stream), which applies it to its in-memory
// text of the part (session.LiveText). One delta is in flight at a time.
// Reported: p50-ms and p99-ms of that latency, and stored-per-s, the
// versions of the streaming message the relay stored per second meanwhile,
// which stay coalesced (at most about one per session.StreamInterval).
func BenchmarkLiveTextToReader(b *testing.B) {
	envA, connA, connB := twoDevices(b)
	ag := &pushAgent{events: make(chan agent.Event, 16)}
	tag, _ := NewTag()
	sess, err := connA.Client.OpenSession(context.Background(), relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	defer sess.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	live := startLive(sess)
	defer live.stop()
	red := mapper.NewReducer(mapper.Config{SessionID: tag, Directory: "/w"})
	runner := session.NewRunner(session.Options{Agent: ag, Reducer: red, Sink: session.NewSink(sess, red), Log: envA.Log, OnBus: live.observe})
	go func() { _, _ = runner.Run(ctx) }()
	ag.events <- &agent.TurnStarted{TurnID: "t"}
	ag.events <- &agent.MessageStarted{Message: "m"}
	ag.events <- &agent.TextDelta{Message: "m", Block: "b", Delta: "start"}
	sid, err := sess.WaitCreated(ctx)
	if err != nil {
		b.Fatal(err)
	}
	o, err := FindSession(ctx, connB, sid)
	if err != nil {
		b.Fatal(err)
	}

	// The reader: stored versions set the part, live deltas extend it.
	var mu sync.Mutex
	text := session.NewLiveText()
	applied := make(chan int64, 1024) // UTF-16 length of the part after each change
	var stored int
	rows := make(chan RowEvent, 64)
	go func() {
		for ev := range rows {
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
				continue
			}
			mu.Lock()
			for _, p := range env.Parts {
				if p.Type == "text" {
					stored++
					t := text.Stored(p.MessageID, p.ID, p.Text)
					select {
					case applied <- utf16Len(t):
					default:
					}
				}
			}
			mu.Unlock()
		}
	}()
	go func() {
		_ = FollowSessionLive(ctx, connB, o, 0, rows, func(d session.LiveDelta, err error) {
			if err != nil {
				return
			}
			mu.Lock()
			out, t := text.Apply(d)
			mu.Unlock()
			if out == session.LiveApplied {
				select {
				case applied <- utf16Len(t):
				default:
				}
			}
		})
	}()
	// Wait until the reader follows: deltas until one arrives live.
	length := int64(len("start"))
	waitLen := func(want int64, d time.Duration) bool {
		deadline := time.After(d)
		for {
			select {
			case n := <-applied:
				if n >= want {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	for synced := false; !synced; {
		ag.events <- &agent.TextDelta{Message: "m", Block: "b", Delta: "w"}
		length++
		synced = waitLen(length, 50*time.Millisecond)
		if !synced {
			// Drain: the next stored version brings the reader level.
			waitLen(length, 1500*time.Millisecond)
		}
	}
	mu.Lock()
	stored0 := stored
	mu.Unlock()
	var lat []time.Duration
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		ag.events <- &agent.TextDelta{Message: "m", Block: "b", Delta: "x"}
		length++
		if !waitLen(length, 10*time.Second) {
			b.Fatal("the reader never saw the delta")
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(start)
	mu.Lock()
	versions := stored - stored0
	mu.Unlock()
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
