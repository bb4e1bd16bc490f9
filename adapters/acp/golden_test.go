package acp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	gold "github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
)

// captures are the real traffic logs under testdata/captures.
var captures = []string{
	"gemini-acp", "gemini-acp-reject", "ccacp-acp", "acpsdk-example",
	"gemini-multi-turn", "gemini-long-output-raw-u2028", "claude-code-acp-todo",
	"codex-acp-tools", "opencode-tools", "gemini-tools", "ccacp-tools",
	"codex-acp", "codex-acp-reject", "opencode-acp", "opencode-acp-reject",
}

// golden compares got with testdata/golden/<name>, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	gold.Check(t, filepath.Join("testdata", "golden", name), got)
}

func firstDiff(want, got string) string { return gold.Diff([]byte(want), []byte(got)) }

func encodeEvents(t *testing.T, evs []agent.Event) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, e := range evs {
		line, err := agent.EncodeEvent(e)
		if err != nil {
			t.Fatalf("encode %T: %v", e, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// reduce folds events into a transcript and its indented JSON document.
// transcriptOf returns a function reducing what a replay returned to the
// transcript of cfg (the reducing happy replay does).
func transcriptOf(cfg mapper.Config) func([]agent.Event, error) (mapper.Transcript, error) {
	return func(evs []agent.Event, err error) (mapper.Transcript, error) {
		red := mapper.NewReducer(cfg)
		for _, e := range evs {
			red.Apply(e)
		}
		return red.Transcript(), err
	}
}

func reduce(t *testing.T, session string, evs []agent.Event) (mapper.Transcript, []byte) {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: session, Directory: "/home/dev/run/work"})
	for _, e := range evs {
		red.Apply(e)
	}
	tr := red.Transcript()
	b, err := mapper.EncodeTranscript(tr)
	if err != nil {
		t.Fatalf("encode transcript: %v", err)
	}
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	pretty.WriteByte('\n')
	return tr, pretty.Bytes()
}

func decodeAll(frames []jsonrpc.Frame) []agent.Event {
	d := NewDecoder()
	var evs []agent.Event
	for _, f := range frames {
		evs = append(evs, d.Decode(f)...)
	}
	return evs
}

func readCapture(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "captures", name, "rpc-traffic.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestGoldenCaptures(t *testing.T) {
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			evs, err := Replay(bytes.NewReader(readCapture(t, name)))
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".events.jsonl", encodeEvents(t, evs))
			_, doc := reduce(t, name, evs)
			golden(t, name+".transcript.json", doc)
		})
	}
}

// regressionFrames turns a regression input (messages carrying "dir" as
// "client->agent" / "agent->client", "variant", "note" members that are not
// part of the message) into frames, keeping the lines for which keep
// returns true. Notes are not traffic.
func regressionFrames(t *testing.T, name string, keep func(variant string) bool) []jsonrpc.Frame {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "regressions", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var frames []jsonrpc.Frame
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for i := 1; sc.Scan(); i++ {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s line %d: %v", name, i, err)
		}
		var dir, variant string
		_ = json.Unmarshal(m["dir"], &dir)
		_ = json.Unmarshal(m["variant"], &variant)
		delete(m, "dir")
		delete(m, "variant")
		delete(m, "note")
		if keep != nil && !keep(variant) {
			continue
		}
		fd := trafficlog.A2C
		switch dir {
		case "client->agent":
			fd = trafficlog.C2A
		case "note":
			continue
		}
		msg, _ := json.Marshal(m)
		frames = append(frames, frame(int64(1000*i), fd, string(msg)))
	}
	return frames
}

// readFrames reads a traffic log into its frames and bad records.
func readFrames(r io.Reader) ([]jsonrpc.Frame, map[int][]agent.Dropped, error) {
	tr, err := jsonrpc.ReadTraffic(r)
	for i, b := range tr.Bad {
		if len(b) == 0 {
			delete(tr.Bad, i)
		}
	}
	return tr.Frames, tr.Bad, err
}

func frame(t int64, dir trafficlog.Dir, msg string) jsonrpc.Frame {
	return jsonrpc.FrameOf(trafficlog.Record{T: t, Dir: dir, Msg: json.RawMessage(msg)})
}

// regressionCases builds the frames of each regression scenario.
func regressionCases(t *testing.T) map[string][]jsonrpc.Frame {
	cases := map[string][]jsonrpc.Frame{}
	b18 := regressionFrames(t, "B18-acp-permission-before-toolcall.jsonl", nil)
	cases["B18-acp-permission-before-toolcall"] = b18
	// Approved variant (the file's note): proceed_once, then only a
	// tool_call_update for the id seen in the permission request.
	cases["B18-approved"] = []jsonrpc.Frame{
		b18[0], b18[1],
		frame(3000, trafficlog.C2A, `{"jsonrpc":"2.0","id":7,"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}}`),
		frame(3500, trafficlog.A2C, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"tool_call_update","toolCallId":"mcp_lookup_get_code-1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"code 42 is ok"}}]}}}`),
		frame(4000, trafficlog.A2C, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Code 42 is ok."}}}}`),
		frame(5000, trafficlog.A2C, `{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`),
	}
	// Non-unique ids: the same static toolCallId in two turns.
	second := []jsonrpc.Frame{
		frame(6000, trafficlog.C2A, `{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"sess-1","prompt":[{"type":"text","text":"again"}]}}`),
		frame(6100, trafficlog.A2C, `{"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"sess-1","toolCall":{"toolCallId":"mcp_lookup_get_code-1","title":"get_code (lookup MCP)","kind":"other","status":"pending","rawInput":{"code":43}},"options":[{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}]}}`),
		frame(6200, trafficlog.C2A, `{"jsonrpc":"2.0","id":8,"result":{"outcome":{"outcome":"selected","optionId":"proceed_once"}}}`),
		frame(6300, trafficlog.A2C, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-1","update":{"sessionUpdate":"tool_call_update","toolCallId":"mcp_lookup_get_code-1","status":"completed"}}}`),
		frame(6400, trafficlog.A2C, `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`),
	}
	cases["B18-reused-id"] = append(append([]jsonrpc.Frame(nil), cases["B18-approved"]...), second...)
	// B20: the prompt, the pending permission, happy's cancel and its
	// cancelled answer, then each of the three responses, then the late
	// chunk.
	for _, v := range []string{"A", "B", "C"} {
		fr := regressionFrames(t, "B20-acp-cancel.jsonl", func(variant string) bool { return variant == "" || variant == v })
		withAnswer := append([]jsonrpc.Frame{}, fr[:3]...)
		withAnswer = append(withAnswer, frame(3500, trafficlog.C2A, `{"jsonrpc":"2.0","id":11,"result":{"outcome":{"outcome":"cancelled"}}}`))
		withAnswer = append(withAnswer, fr[3:]...)
		cases["B20-acp-cancel-"+v] = withAnswer
	}
	return cases
}

func TestGoldenRegressions(t *testing.T) {
	for name, frames := range regressionCases(t) {
		t.Run(name, func(t *testing.T) {
			evs := decodeAll(frames)
			golden(t, name+".events.jsonl", encodeEvents(t, evs))
			_, doc := reduce(t, name, evs)
			golden(t, name+".transcript.json", doc)
		})
	}
}
