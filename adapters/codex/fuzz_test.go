package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// seedTraffic adds every capture and synthetic traffic log as a seed.
func seedTraffic(f *testing.F) {
	f.Helper()
	for _, pattern := range []string{"testdata/captures/*/rpc-traffic.jsonl", "testdata/synthetic/*.jsonl"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"t":1,"dir":"a2c","msg":{"method":"item/completed","params":{"threadId":"t","item":{"type":"commandExecution","id":"x","status":"failed"}}}}`))
	f.Add([]byte("{\"t\":1,\"dir\":\"a2c\",\"msg\":[1,2]}\nnot json\n{\"t\":2,\"dir\":\"exit\",\"msg\":{}}"))
}

// fuzzDecode runs traffic through a decoder and the reducer: no panic, every
// event encodes, and the transcript is valid for the codec.
func fuzzDecode(t *testing.T, data []byte, p Protocol) {
	evs, err := Replay(bytes.NewReader(data), p)
	if err != nil {
		t.Fatalf("replay of in-memory data failed: %v", err)
	}
	red := mapper.NewReducer(mapper.Config{SessionID: "fuzz"})
	for _, e := range evs {
		if _, err := agent.EncodeEvent(e); err != nil {
			t.Fatalf("decoder produced an event that does not encode: %T %v", e, err)
		}
		red.Apply(e)
	}
	if _, err := mapper.EncodeTranscript(red.Transcript()); err != nil {
		t.Fatalf("transcript does not encode: %v", err)
	}
}

func FuzzAppServerDecode(f *testing.F) {
	seedTraffic(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, data, ProtocolAppServer) })
}

func FuzzMCPDecode(f *testing.F) {
	seedTraffic(f)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, data, ProtocolMCP) })
}

// FuzzDecodeFrameMsg feeds one arbitrary message in each direction to both
// decoders, bypassing the traffic-log reader.
func FuzzDecodeFrameMsg(f *testing.F) {
	f.Add([]byte(`{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","status":"failed","items":[{"id":"i","type":"agentMessage","text":"x"}]}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"codex/event","params":{"msg":{"type":"exec_command_output_delta","call_id":"c","chunk":[1,2,300]}}}`))
	f.Add([]byte(`{"id":0,"result":{"decision":{"applyNetworkPolicyAmendment":{}}}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		for _, dec := range []Decoder{NewAppServerDecoder(), NewMCPDecoder()} {
			for _, dir := range []trafficlog.Dir{trafficlog.A2C, trafficlog.C2A, trafficlog.Note, trafficlog.Exit, "weird"} {
				for _, e := range dec.Decode(jsonrpc.NewFrame(1, dir, msg)) {
					if _, err := agent.EncodeEvent(e); err != nil {
						t.Fatalf("event does not encode: %T %v", e, err)
					}
				}
			}
		}
	})
}

func BenchmarkAppServerDecode(b *testing.B) {
	benchDecode(b, "testdata/captures/codex-app-multi-tool/rpc-traffic.jsonl", ProtocolAppServer)
}

func BenchmarkMCPDecode(b *testing.B) {
	benchDecode(b, "testdata/captures/codex0150-mcp-server/rpc-traffic.jsonl", ProtocolMCP)
}

func benchDecode(b *testing.B, path string, p Protocol) {
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	frames, _, err := readFrames(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dec := NewDecoder(p)
		for _, f := range frames {
			dec.Decode(f)
		}
	}
	b.ReportMetric(float64(len(frames)*b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkOutputBuffer writes 16 MiB of command output in 4 KiB chunks
// (memory stays bounded by the head+tail cap).
func BenchmarkOutputBuffer(b *testing.B) {
	chunk := bytes.Repeat([]byte("0123456789abcdé\n"), 240) // ~4 KiB
	b.SetBytes(int64(len(chunk)) * 4096)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var o outBuf
		for j := 0; j < 4096; j++ {
			o.write(chunk)
		}
		if len(o.String()) > outHeadMax+outTailMax+100 {
			b.Fatal("output not capped")
		}
	}
}
