package acp

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// checkEvents fails on events the reducer would refuse as malformed (the
// decoder must produce valid events or Dropped records) and folds them
// into a reducer, which must not panic either.
func checkEvents(t *testing.T, evs []agent.Event) {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: "fuzz"})
	for _, e := range evs {
		if err := agent.ValidateEvent(e); err != nil {
			t.Fatalf("decoder produced an invalid %T: %v", e, err)
		}
		red.Apply(e)
	}
}

// FuzzDecoder feeds arbitrary frames: the input's lines alternate
// directions by their first byte ('<' agent, '>' happy, '#' note, '!' exit),
// after a preamble that opens session "s" with a prompt in flight.
func FuzzDecoder(f *testing.F) {
	f.Add([]byte("< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"completed"}}}`))
	f.Add([]byte("< " + `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t"},"options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}` + "\n> " + `{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}`))
	f.Add([]byte("< " + `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"max_tokens"}}` + "\n! {}"))
	f.Add([]byte("< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"a","status":"x","priority":"high"}]}}}`))
	f.Add([]byte("< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":1,"currency":"USD"}}}}`))
	// A permission that asks with part of the announced input, rejected;
	// the agent confirms the failure and ends the turn cancelled.
	f.Add([]byte("< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","kind":"execute","status":"in_progress","rawInput":{"command":"ls","cwd":"/w"}}}}` +
		"\n< " + `{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t","rawInput":{"command":"ls"},"locations":[]},"options":[{"optionId":"r","name":"R","kind":"reject_once"}]}}` +
		"\n# " + `{"happy":"decision","request":0,"decision":"reject","reason":"timeout"}` +
		"\n> " + `{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"r"}}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"t","status":"failed","rawInput":{"command":"ls","cwd":"/w","x":1},"rawOutput":{"error":"no"}}}}` +
		"\n< " + `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"cancelled"}}`))
	// A known-history load after the turn: its replay, before and after
	// the answer, is left out until the next prompt.
	f.Add([]byte("< " + `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}` +
		"\n# " + `{"happy":"history-known"}` +
		"\n> " + `{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s","cwd":"/w","mcpServers":[]}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"hi"}}}}` +
		"\n< " + `{"jsonrpc":"2.0","id":3,"result":{}}` +
		"\n< " + `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"t","status":"completed"}}}` +
		"\n> " + `{"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"next"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		frames := script(opened...)
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			dir := trafficlog.A2C
			switch line[0] {
			case '>':
				dir = trafficlog.C2A
			case '#':
				dir = trafficlog.Note
			case '!':
				dir = trafficlog.Exit
			}
			frames = append(frames, frame(int64(10+i), dir, string(bytes.TrimSpace(line[1:]))))
		}
		checkEvents(t, decodeAll(frames))
		checkEvents(t, decodeAll(frames))
	})
}

// FuzzReplay feeds arbitrary bytes as a traffic log.
func FuzzReplay(f *testing.F) {
	// Small seeds: minimising a new input costs time in proportion to its
	// size, and whole captures stall it.
	f.Add([]byte(`{"t":1,"dir":"c2a","msg":{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}}
{"t":2,"dir":"a2c","msg":{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s"}}}
{"t":3,"dir":"c2a","msg":{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}}
{"t":4,"dir":"a2c","msg":{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t"},"options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}}
{"t":5,"dir":"c2a","msg":{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}}
{"t":6,"dir":"a2c","msg":{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}}
{"t":7,"dir":"exit","msg":{"code":0,"sig":null}}`))
	f.Add([]byte(`{"t":1,"dir":"a2c","msg":"x"}` + "\n" + `{"t":"x"}` + "\n[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		evs, err := Replay(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("replay of an in-memory log failed: %v", err)
		}
		checkEvents(t, evs)
	})
}

// FuzzContentBlock feeds arbitrary JSON as a content block and as tool
// content.
func FuzzContentBlock(f *testing.F) {
	for _, s := range []string{`{"type":"text","text":"x"}`, `{"type":"image","data":"AA","mimeType":"image/png"}`,
		`{"type":"resource","resource":{"uri":"file:///a","text":"x"}}`, `{"type":"diff","path":"/a","newText":"x"}`,
		`{"type":"content","content":{"type":"resource_link","uri":"u","name":"n"}}`, `{"type":"terminal","terminalId":"t"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if b, err := decodeBlock(data); err == nil {
			_ = b.markdown()
			_, _ = b.promptFile()
		}
		_, _ = decodeToolContent(data)
	})
}

// BenchmarkDecodeCapture measures decoding a real multi-turn capture (both
// directions, notes, exit) into events.
func BenchmarkDecodeCapture(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "captures", "ccacp-acp", "rpc-traffic.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	frames, _, err := readFrames(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		d := NewDecoder()
		for _, f := range frames {
			d.Decode(f)
		}
	}
}
