package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/mapper"
)

// checkEvents asserts what every consumer relies on: each event is valid
// and encodes, and a reducer takes them without panicking.
func checkEvents(t *testing.T, red *mapper.Reducer, evs []agent.Event) {
	for _, ev := range evs {
		if err := agent.ValidateEvent(ev); err != nil {
			t.Fatalf("decoder emitted an invalid event %T: %v", ev, err)
		}
		if _, err := agent.EncodeEvent(ev); err != nil {
			t.Fatalf("event %T does not encode: %v", ev, err)
		}
		red.Apply(ev)
	}
}

// fuzzSeeds adds the first lines of a few captures as seeds.
func fuzzSeeds(f testing.TB, add func(line []byte)) {
	for _, p := range []string{
		"claude-partial/stdout.jsonl",
		"claude-sdk-stdio-deny/sdk-traffic.jsonl",
		"claude-claude-task/claude-project/a3ba2153-280d-414f-b455-2c0308493d25.jsonl",
		"interactive-r9-pr-deny/session/8a453d5e-3de0-4aed-8fcc-ccf48fbdcd0c.jsonl",
	} {
		data, err := os.ReadFile(filepath.Join("testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) < 4096 {
				add(l)
			}
		}
	}
}

// FuzzDecodeRecord feeds one arbitrary line to a decoder of each form (a
// second time too, as a re-read would), then finishes the stream: no
// panic, and every event is valid.
func FuzzDecodeRecord(f *testing.F) {
	fuzzSeeds(f, func(l []byte) { f.Add(l) })
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":"x","stop_reason":7}}`))
	f.Add([]byte(`{"t":1,"dir":"c2a","msg":{"type":"control_response","response":{"request_id":"r","response":{"behavior":"allow"}}}}`))
	f.Add([]byte(`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"image"}]}]},"toolUseResult":{"stdout":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, form := range []Form{FormSessionJSONL, FormStreamJSON, FormTrafficLog} {
			dec, err := NewDecoder(form, Options{Recent: 8})
			if err != nil {
				t.Fatal(err)
			}
			red := mapper.NewReducer(mapper.Config{SessionID: "fuzz"})
			checkEvents(t, red, dec.Decode(line, 1))
			checkEvents(t, red, dec.Decode(line, 2))
			checkEvents(t, red, dec.Idle())
			checkEvents(t, red, dec.Finish(EndOfStream{Exited: true}))
			if _, err := mapper.EncodeTranscript(red.Transcript()); err != nil {
				t.Fatalf("transcript does not encode: %v", err)
			}
		}
	})
}

// FuzzDecodeStream feeds arbitrary bytes, split into lines by the line
// reader, to one decoder per form: sequences of records (tool calls and
// results, turns, subagents in any order) never panic and only produce
// valid events.
func FuzzDecodeStream(f *testing.F) {
	// Small seeds: the fuzzer's minimisation is slow on large inputs.
	var seed [][]byte
	fuzzSeeds(f, func(l []byte) {
		if len(l) < 1024 {
			seed = append(seed, l)
		}
	})
	for i := 0; i+3 <= len(seed); i += 3 {
		f.Add(bytes.Join(seed[i:i+3], []byte("\n")), uint16(0))
	}
	f.Add([]byte(`{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"Agent","input":{"prompt":"p"}}]}}
{"type":"user","isSidechain":true,"agentId":"a","message":{"content":"p"}}
{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}}`), uint16(0))
	f.Add([]byte("{\"type\":\"result\"}\n{\"type\":\"result\"}\n"), uint16(10))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint16) {
		for _, form := range []Form{FormSessionJSONL, FormStreamJSON, FormTrafficLog} {
			dec, _ := NewDecoder(form, Options{Recent: 16})
			red := mapper.NewReducer(mapper.Config{SessionID: "fuzz"})
			lr, _ := linereader.New(bytes.NewReader(data), linereader.Options{MaxLine: int(maxLine)})
			for {
				l, err := lr.Next()
				if err != nil {
					break
				}
				checkEvents(t, red, dec.DecodeLine(l))
			}
			checkEvents(t, red, dec.Incomplete(lr.Pending(), lr.PendingSize(), lr.LineNumber()+1))
			checkEvents(t, red, dec.Finish(EndOfStream{}))
		}
	})
}

// FuzzTopLevelType compares the structural scanner that lets skipped kinds
// pass undecoded with encoding/json: on valid JSON they name the same type.
func FuzzTopLevelType(f *testing.F) {
	fuzzSeeds(f, func(l []byte) { f.Add(l) })
	f.Add([]byte(`{"type":"queue-operation","TYPE":"assistant"}`))
	f.Add([]byte(`{"typ\u0065":"x","type":"progress"}`))
	f.Add([]byte(`{"a":[{"type":"x"}],"type":5,"type":"mode"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		typ, ok := topLevelType(line)
		var r struct {
			Type string `json:"type"`
		}
		err := json.Unmarshal(line, &r)
		var typeErr *json.UnmarshalTypeError
		if !ok || !json.Valid(line) || (err != nil && !errors.As(err, &typeErr)) {
			return
		}
		if string(typ) != r.Type {
			t.Fatalf("scanner says type %q, encoding/json %q", typ, r.Type)
		}
	})
}

// FuzzDetectForm checks that form detection never panics and names a
// form only with a nil error.
func FuzzDetectForm(f *testing.F) {
	fuzzSeeds(f, func(l []byte) { f.Add(l) })
	f.Fuzz(func(t *testing.T, data []byte) {
		form, err := DetectForm(bytes.Split(data, []byte("\n")))
		if (err == nil) == (form == FormUnknown) {
			t.Fatalf("form %v with error %v", form, err)
		}
	})
}

// syntheticJSONL writes a session JSONL of about size bytes made of real
// Claude Code 2.1.197 records (the session JSONLs of several captures:
// prompts, attachments, thinking, parallel tools, a subagent call, a 106 KB
// output kept as a 30 KB stdout plus a preview, turn bookkeeping), repeated
// with every uuid and message and tool id made unique per copy.
func syntheticJSONL(size int) []byte {
	var tmpl []byte
	for _, p := range []string{
		"claude-long-output/claude-project/03d3aaba-d7b7-465c-bac3-1b57d46fe749.jsonl",
		"claude-parallel/claude-project/24813172-4e02-474f-802e-46ed88ee7978.jsonl",
		"claude-thinking/claude-project/24c4ad27-8dc8-47ad-abf7-8bf19df22631.jsonl",
		"claude-claude-task/claude-project/a3ba2153-280d-414f-b455-2c0308493d25.jsonl",
		"interactive-r1/session/cbe164e8-ff82-4bd9-8bc9-0ca70dc52318.jsonl",
	} {
		b, err := os.ReadFile(filepath.Join("testdata", p))
		if err != nil {
			panic(err)
		}
		tmpl = append(tmpl, b...)
	}
	ids := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|msg_(?:rich|fake)_[0-9]+|toolu_[A-Za-z0-9_]+|req_(?:rich|fake)_[0-9]+`)
	var buf bytes.Buffer
	for k := 0; buf.Len() < size; k++ {
		suffix := []byte(fmt.Sprintf("-%d", k))
		buf.Write(ids.ReplaceAllFunc(tmpl, func(id []byte) []byte { return append(append([]byte(nil), id...), suffix...) }))
	}
	return buf.Bytes()
}

// The bulk reading budget (docs/ARCHITECTURE.md, "Mapping and
// delivery"): a session JSONL is read back (resume, replay) at least at
// minCPUMBps per core, allocating at most maxBytesPerByte per input byte.
const (
	minCPUMBps      = 100
	maxBytesPerByte = 10
)

// BenchmarkDecodeJSONL measures mapping throughput of a large session
// JSONL (line reader + decoder, no reducer): MB/s of wall time, and
// cpu-MB/s, the input divided by the CPU time the process used (garbage
// collection included), which a machine shared with other work does not
// distort. Memory: B/byte is what is allocated per input byte;
// retained-KB is what the decoder still holds at the end, which follows
// the open state, not the file size. It fails when B/byte is above
// maxBytesPerByte, or when even its fastest pass (best-cpu-MB/s: a pass
// of at least 50 ms of CPU, which other work on the machine slows least)
// reads less than minCPUMBps.
func BenchmarkDecodeJSONL(b *testing.B) {
	for _, mb := range []int{8, 32} {
		data := syntheticJSONL(mb << 20)
		b.Run(fmt.Sprintf("%dMB", mb), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			var retained, allocated uint64
			var events int
			var cpu, best time.Duration
			for b.Loop() {
				c0 := cpuTime()
				dec, _ := NewDecoder(FormSessionJSONL, Options{})
				lr, _ := linereader.New(bytes.NewReader(data), linereader.Options{})
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				events = 0
				for {
					l, err := lr.Next()
					if err != nil {
						break
					}
					evs := dec.DecodeLine(l)
					events += len(evs)
				}
				events += len(dec.Finish(EndOfStream{}))
				pass := cpuTime() - c0
				cpu += pass
				if best == 0 || pass < best {
					best = pass
				}
				b.StopTimer()
				runtime.GC()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if after.HeapAlloc > before.HeapAlloc {
					retained = after.HeapAlloc - before.HeapAlloc
				}
				allocated += after.TotalAlloc - before.TotalAlloc
				runtime.KeepAlive(dec)
				b.StartTimer()
			}
			b.ReportMetric(float64(retained)/1024, "retained-KB")
			perByte := float64(allocated) / float64(len(data)) / float64(b.N)
			b.ReportMetric(perByte, "B/byte")
			if perByte > maxBytesPerByte {
				b.Errorf("allocated %.2f bytes per input byte, the budget is %d", perByte, maxBytesPerByte)
			}
			if cpu > 0 {
				b.ReportMetric(float64(len(data))*float64(b.N)/(1<<20)/cpu.Seconds(), "cpu-MB/s")
			}
			if best >= 50*time.Millisecond {
				rate := float64(len(data)) / (1 << 20) / best.Seconds()
				b.ReportMetric(rate, "best-cpu-MB/s")
				if rate < minCPUMBps {
					b.Errorf("read %.1f MB per CPU second at best, the budget is at least %d", rate, minCPUMBps)
				}
			}
			b.ReportMetric(float64(events)/float64(len(data))*(1<<20), "events/MB")
		})
	}
}

// BenchmarkReplayTranscript measures the whole replay path of `happy
// replay` (decoder and reducer) over the same input.
func BenchmarkReplayTranscript(b *testing.B) {
	data := syntheticJSONL(8 << 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		red := mapper.NewReducer(mapper.Config{SessionID: "bench"})
		_, err := Replay(b.Context(), bytes.NewReader(data), ReplayOptions{Form: FormSessionJSONL}, func(ev agent.Event) error {
			red.Apply(ev)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
