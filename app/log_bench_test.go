package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// versionLog is a session.RecordStore that keeps every version the sink
// writes, in order, as the relay batch it would become: the localId
// "<record>.<version>" and the plaintext envelope.
type versionLog struct {
	last  map[string]int64
	local []string
	plain [][]byte
}

func (v *versionLog) Enqueue(_ context.Context, record string, build func(int64) ([]byte, error)) (int64, error) {
	n := v.last[record] + 1
	b, err := build(n)
	if err != nil {
		return 0, err
	}
	v.last[record] = n
	v.local = append(v.local, record+"."+strconv.FormatInt(n, 10))
	v.plain = append(v.plain, b)
	return n, nil
}

// logTurn is one turn of a scripted session: a prompt, an answer streamed
// in three deltas, a shell call that runs and completes, and a closing
// text. Flushed after every event, it gives about 14 versions: a message
// is written several times as it grows, and each turn adds new messages.
func logTurn(i int) []agent.Event {
	m1, m2, call := fmt.Sprintf("m%d.1", i), fmt.Sprintf("m%d.2", i), fmt.Sprintf("c%d", i)
	at := int64(i) * 10_000
	return []agent.Event{
		&agent.UserPrompt{EventBase: agent.EventBase{Time: at}, PromptID: fmt.Sprintf("p%d", i), Text: fmt.Sprintf("step %d: list the files and count them", i)},
		&agent.TurnStarted{TurnID: fmt.Sprintf("t%d", i)},
		&agent.MessageStarted{EventBase: agent.EventBase{Time: at + 100}, Message: m1},
		&agent.TextDelta{Message: m1, Block: "0", Delta: "Looking at "},
		&agent.TextDelta{Message: m1, Block: "0", Delta: "the folder "},
		&agent.TextDelta{Message: m1, Block: "0", Delta: "first."},
		&agent.ToolCall{Message: m1, CallID: call, Tool: "bash", Input: json.RawMessage(`{"command":"ls -la | wc -l"}`)},
		&agent.ToolRunning{CallID: call},
		&agent.ToolCompleted{CallID: call, Output: "total 48\ndrwxr-xr-x  5 u u 4096 .\n-rw-r--r--  1 u u  120 a.go\n12", Title: "ls -la | wc -l"},
		&agent.StepFinished{Message: m1, Finish: agent.FinishToolCalls},
		&agent.TextDelta{Message: m2, Block: "0", Delta: "There are "},
		&agent.TextFinal{Message: m2, Block: "0", Text: "There are 12 entries in the folder."},
		&agent.TurnEnded{EventBase: agent.EventBase{Time: at + 9000}, Reason: agent.TurnCompleted},
	}
}

// scriptVersions drives a reducer and sink through turns until n versions
// exist (the last turn cut at n), every event flushed at once.
func scriptVersions(tb testing.TB, sessionID string, n int) *versionLog {
	red := mapper.NewReducer(mapper.Config{SessionID: sessionID, Directory: "/w", ProviderID: "anthropic", ModelID: "m"})
	vl := &versionLog{last: map[string]int64{}}
	sink := session.NewSink(vl, red)
	for i := 0; len(vl.local) < n; i++ {
		for _, ev := range logTurn(i) {
			sink.Observe(red.Apply(ev))
			if err := sink.Flush(context.Background(), time.UnixMilli(int64(i)), true); err != nil {
				tb.Fatal(err)
			}
		}
	}
	vl.local, vl.plain = vl.local[:n], vl.plain[:n]
	return vl
}

// logSession creates a relay session holding n message versions written as
// happy's sink writes them (encrypted with the session's key), posted in
// batches of relay.MaxBatch, and returns it as another device opens it.
func logSession(b testing.TB, n int) (*Conn, Opened) {
	_, connA, connB := twoDevices(b)
	ctx := context.Background()
	tag, _ := NewTag()
	sess, err := connA.Client.OpenSession(ctx, relay.SessionOptions{Tag: tag, Metadata: json.RawMessage(`{"path":"/w","summary":{"text":"linear"}}`)})
	if err != nil {
		b.Fatal(err)
	}
	sid, err := sess.WaitCreated(ctx)
	if err != nil {
		b.Fatal(err)
	}
	ci := sess.Cipher()
	_ = sess.Close()
	vl := scriptVersions(b, sid, n)
	batch := make([]relay.OutgoingMessage, 0, relay.MaxBatch)
	send := func() {
		if _, err := connA.API.SendMessages(ctx, sid, batch); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i, plain := range vl.plain {
		sealed, err := ci.Seal(plain)
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, relay.OutgoingMessage{LocalID: vl.local[i], Content: crypto.EncodeBase64(sealed)})
		if len(batch) == relay.MaxBatch {
			send()
		}
	}
	if len(batch) > 0 {
		send()
	}
	o, err := FindSession(ctx, connB, sid)
	if err != nil {
		b.Fatal(err)
	}
	return connB, o
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHappyLog times what `happy log SESSION` does (cmd/happy
// newLogCmd) on a session of 100, 10,000 and 100,000 message versions:
// find the session, read every page and decrypt it into a Readback
// (ReadTranscript), assemble the document and write the readable text
// (export.Text, to the null device, as `happy log > file` writes). The
// relay runs in this process, so the phases include its side of the reads
// (and cpu-ns/version its CPU). Metrics per stored version:
// ns/version (wall), cpu-ns/version (the process's user+system CPU:
// wall-clock figures on a busy machine mostly measure waiting), its three
// phases read-, doc- and text-cpu-ns/version, allocs/version and
// B/version. The cost per version should stay flat as the session grows.
func BenchmarkHappyLog(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("versions=%d", n), func(b *testing.B) {
			conn, o := logSession(b, n)
			out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer out.Close()
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			var read, doc, text, wall, cpu time.Duration
			var allocs, bytes uint64
			for range b.N {
				runtime.GC()
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				c0, t0 := cpuTime(), time.Now()
				found, err := FindSession(ctx, conn, o.Info.ID)
				if err != nil {
					b.Fatal(err)
				}
				rb, _, err := ReadTranscript(ctx, conn, found, ReadOptions{})
				if err != nil {
					b.Fatal(err)
				}
				c1 := cpuTime()
				tr := rb.Transcript()
				c2 := cpuTime()
				if err := export.Text(out, tr, export.TextOptions{SessionID: found.Info.ID, Title: found.Title()}); err != nil {
					b.Fatal(err)
				}
				c3, t3 := cpuTime(), time.Now()
				runtime.ReadMemStats(&m1)
				read, doc, text, cpu, wall = read+c1-c0, doc+c2-c1, text+c3-c2, cpu+c3-c0, wall+t3.Sub(t0)
				allocs, bytes = allocs+m1.Mallocs-m0.Mallocs, bytes+m1.TotalAlloc-m0.TotalAlloc
				if len(tr.Dropped) != 0 || len(tr.Messages) == 0 {
					b.Fatalf("transcript: %d messages, dropped %+v", len(tr.Messages), tr.Dropped)
				}
			}
			per := float64(b.N) * float64(n)
			b.ReportMetric(float64(wall.Nanoseconds())/per, "ns/version")
			b.ReportMetric(float64(cpu.Nanoseconds())/per, "cpu-ns/version")
			b.ReportMetric(float64(read.Nanoseconds())/per, "read-cpu-ns/version")
			b.ReportMetric(float64(doc.Nanoseconds())/per, "doc-cpu-ns/version")
			b.ReportMetric(float64(text.Nanoseconds())/per, "text-cpu-ns/version")
			b.ReportMetric(float64(allocs)/per, "allocs/version")
			b.ReportMetric(float64(bytes)/per, "B/version")
		})
	}
}

// TestLogSessionScriptIsOrdered checks the bench's script: its versions
// rebuild the reducer's transcript, with several versions per message.
func TestLogSessionScriptIsOrdered(t *testing.T) {
	vl := scriptVersions(t, "ses_script", 3*14)
	perRecord := map[string]int{}
	for _, l := range vl.local {
		perRecord[l[:strings.LastIndexByte(l, '.')]]++
	}
	var multi []string
	for rec, k := range perRecord {
		if k > 1 {
			multi = append(multi, rec)
		}
	}
	sort.Strings(multi)
	if len(multi) < 3 {
		t.Fatalf("records with several versions: %v (all %v)", multi, perRecord)
	}
	rb := session.NewReadback(mapper.Session{ID: "ses_fallback"})
	for i, p := range vl.plain {
		rb.Add(int64(i+1), vl.local[i], p)
	}
	tr := rb.Transcript()
	if len(tr.Dropped) != 0 || tr.Session.ID == "ses_fallback" || len(tr.Messages) < 6 {
		t.Fatalf("transcript: session %q, %d messages, dropped %+v", tr.Session.ID, len(tr.Messages), tr.Dropped)
	}
}

// BenchmarkHappyLogJSON measures the memory of `happy log --json` on a
// session of 10,000 and 100,000 message versions: streamed
// (WriteTranscriptJSON, what the command runs) and, for comparison, whole
// (the transcript read into memory, then encoded and indented at once, as
// the command did before). A goroutine samples the heap (HeapAlloc: live
// objects and garbage not yet collected) every 2 ms. Metrics:
// peak-heap-MiB, the highest sample above the heap before the run, and
// peak-heap-B/version.
func BenchmarkHappyLogJSON(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		conn, o := logSession(b, n)
		for _, mode := range []string{"streamed", "whole"} {
			b.Run(fmt.Sprintf("versions=%d/%s", n, mode), func(b *testing.B) {
				out, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer out.Close()
				ctx := context.Background()
				var peak uint64
				for range b.N {
					runtime.GC()
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					base := ms.HeapAlloc
					stop, done := make(chan struct{}), make(chan uint64)
					go func() {
						top := uint64(0)
						tick := time.NewTicker(2 * time.Millisecond)
						defer tick.Stop()
						for {
							var m runtime.MemStats
							runtime.ReadMemStats(&m)
							top = max(top, m.HeapAlloc)
							select {
							case <-stop:
								done <- top
								return
							case <-tick.C:
							}
						}
					}()
					if mode == "streamed" {
						_, err = WriteTranscriptJSON(ctx, conn, o, out)
					} else {
						var rb *session.Readback
						if rb, _, err = ReadTranscript(ctx, conn, o, ReadOptions{}); err == nil {
							enc := json.NewEncoder(out)
							enc.SetEscapeHTML(false)
							enc.SetIndent("", "  ")
							err = enc.Encode(rb.Transcript())
						}
					}
					close(stop)
					top := <-done
					if err != nil {
						b.Fatal(err)
					}
					peak = max(peak, top-min(top, base))
				}
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
				b.ReportMetric(float64(peak)/float64(n), "peak-heap-B/version")
			})
		}
	}
}
