package acp

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// badOpaque are raw JSON values an agent may send as a tool's rawInput or
// rawOutput that a text kept as it is could carry differently from its
// parse: invalid UTF-8, lone surrogates, NUL, repeated names, numbers out
// of float range or negative zero, deep nesting, long strings.
var badOpaque = map[string]string{
	"invalid-utf8":     "{\"a\":\"\xff\xfe\",\"b\":1}",
	"invalid-utf8-key": "{\"\xc3\x28\":1}",
	"lone-surrogate":   `{"a":"\ud800","b":"\udfff x"}`,
	"surrogate-pair":   `{"a":"\ud83d\ude00"}`,
	"nul":              `{"a":"\u0000","\u0000":"b"}`,
	"duplicate-keys":   `{"a":1,"a":2,"b":{"c":1,"c":"x"}}`,
	"huge-numbers":     `{"a":1e400,"b":-1e400,"c":123456789012345678901234567890,"d":-0,"e":0.0000000000000000000000001}`,
	"negative-zero":    `-0`,
	"html-and-seps":    `{"a":"<&>\u2028\u2029"}`,
	"escaped-key":      `{"\u0061":1,"a":2}`,
	"deep-100":         strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100),
	"deep-obj-200":     strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200),
	"long-string":      `{"a":"` + strings.Repeat("x\\n\\u00e9", 40000) + `"}`,
	"deep-5001":        strings.Repeat(`[`, 5001) + strings.Repeat(`]`, 5001),
	"top-string":       `"plain"`,
	"top-number":       `1e400`,
	"empty-object":     `{}`,
	"empty-array":      `[]`,
	"whitespace":       " \t{ \"b\" : [ 1 , 2 ] , \"a\" : null } \n",
}

// badOpaqueFrames is a turn with a tool whose announced input is v (kept
// as the agent's input in metadata: it differs from the canonical one),
// asked for permission with v as its input, and completed with v as its
// raw output.
func badOpaqueFrames(v string) []string {
	v = strings.TrimSpace(v)
	return append(append([]string{}, opened[:2]...),
		`> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`,
		upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Run","kind":"execute","status":"pending","rawInput":`+v+`}`),
		`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"t1","rawInput":{"command":"ls","x":`+v+`}},"options":[{"optionId":"a","name":"A","kind":"allow_once"}]}}`,
		`> {"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"a"}}}`,
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress","rawInput":{"command":"ls","y":`+v+`}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","rawOutput":`+v+`}`),
		// The same result again, written otherwise: no change.
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","rawOutput":[`+v+`][0]}`),
		`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
	)
}

// TestTooDeepOpaqueDropped: a frame nesting deeper than encoding/json
// decodes is refused whole, with a record, not lost.
func TestTooDeepOpaqueDropped(t *testing.T) {
	v := strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001)
	lines := badOpaqueFrames(v)
	evs := decodeAll(script(lines...))
	dropped := 0
	for _, e := range evs {
		switch x := e.(type) {
		case *agent.DroppedInput:
			if x.Dropped.Reason != agent.DropUnparseableJSON {
				t.Errorf("dropped for %q, want %q", x.Dropped.Reason, agent.DropUnparseableJSON)
			}
			dropped++
		case *agent.ToolCall, *agent.ToolCompleted, *agent.ToolBlocked:
			t.Errorf("a %T from a frame nested too deep", e)
		}
	}
	// The agent's five frames carrying it (not happy's answer, not the
	// end of the turn).
	if want := 5; dropped != want {
		t.Errorf("%d frames dropped, want %d", dropped, want)
	}
}

// TestBadOpaqueValues: every bad value goes through the decoder (no event
// changed after it came out), the reducer (nothing refused), the
// transcript encoder and decoder (the same transcript back, nothing
// refused), and the events' JSON (each event decodes back).
func TestBadOpaqueValues(t *testing.T) {
	for name, v := range badOpaque {
		t.Run(name, func(t *testing.T) {
			lines := badOpaqueFrames(v)
			// The repeat written as [v][0] is not JSON: drop it, but keep a
			// second copy of the completion, with other spacing.
			lines[len(lines)-2] = upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed", "rawOutput" :  ` + strings.TrimSpace(v) + ` }`)
			frames := script(lines...)
			evs := decodeUnchanged(t, name, frames)
			var sawOut bool
			for _, e := range evs {
				if err := agent.ValidateEvent(e); err != nil {
					t.Fatalf("invalid %T: %v", e, err)
				}
				b, err := agent.EncodeEvent(e)
				if err != nil {
					t.Fatalf("encode %T: %v", e, err)
				}
				if _, err := agent.DecodeEvent(b); err != nil {
					t.Fatalf("decode %s: %v", b, err)
				}
				if c, ok := e.(*agent.ToolCompleted); ok {
					if _, ok := c.Metadata["rawOutput"]; !ok {
						t.Fatalf("ToolCompleted without its rawOutput: %s", b)
					}
					sawOut = true
				}
			}
			if !sawOut {
				t.Fatalf("no ToolCompleted in %d events", len(evs))
			}
			red := mapper.NewReducer(mapper.Config{SessionID: "s", Directory: "/w"})
			for _, e := range evs {
				red.Apply(e)
			}
			tr := red.Transcript()
			if len(tr.Dropped) > 0 {
				t.Fatalf("reducer dropped %+v", tr.Dropped)
			}
			enc, err := mapper.EncodeTranscript(tr)
			if err != nil {
				t.Fatalf("encode transcript: %v", err)
			}
			back, rep, err := mapper.DecodeTranscript(enc)
			if err != nil {
				t.Fatalf("decode transcript: %v", err)
			}
			if len(rep.Refused) > 0 || len(back.Dropped) > 0 {
				t.Fatalf("decode transcript refused %+v %+v", rep.Refused, back.Dropped)
			}
			// The tool part keeps the agent's input and its raw output.
			var tp *mapper.ToolPart
			for _, m := range back.Messages {
				for _, p := range m.Parts {
					if x, ok := p.(*mapper.ToolPart); ok {
						tp = x
					}
				}
			}
			if tp == nil || tp.State.Status != mapper.StatusCompleted {
				t.Fatalf("no completed tool part in %s", enc)
			}
			if _, ok := tp.State.Metadata["rawOutput"]; !ok {
				t.Fatalf("tool state metadata without rawOutput: %.300v", tp.State.Metadata)
			}
			if _, ok := tp.Metadata[agent.MetaProviderInput]; !ok {
				t.Fatalf("tool part metadata without providerInput: %.300v", tp.Metadata)
			}
			again, err := mapper.EncodeTranscript(back)
			if err != nil {
				t.Fatalf("encode again: %v", err)
			}
			if !bytes.Equal(enc, again) {
				t.Fatalf("transcript does not round-trip:\n%s\n%s", firstDiff(string(enc), string(again)), "")
			}
		})
	}
}

// TestRepeatedInputOtherText: an agent repeating a tool's input as the
// same value written otherwise (spacing, member order) repeats the
// announcement, which is not sent again (the agent's input kept as its
// text is compared by value).
func TestRepeatedInputOtherText(t *testing.T) {
	for _, again := range []string{
		`{"command":"ls","x":{"a":1,"b":[1,2]}}`,
		`{ "command" : "ls", "x" : { "a" : 1, "b" : [ 1 , 2 ] } }`,
		`{"x":{"b":[1,2],"a":1},"command":"ls"}`,
		`{"x":{"b":[1,2],"\u0061":1},"command":"l\u0073"}`,
	} {
		frames := script(append(append([]string{}, opened[:2]...),
			`> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"hi"}]}}`,
			upd(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"Run","kind":"execute","status":"pending","rawInput":{"command":"ls","x":{"a":1,"b":[1,2]}}}`),
			upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress","rawInput":`+again+`}`),
			upd(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","rawOutput":"ok"}`),
			`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`)...)
		calls := 0
		for _, e := range decodeUnchanged(t, again, frames) {
			if _, ok := e.(*agent.ToolCall); ok {
				calls++
			}
		}
		if calls != 1 {
			t.Errorf("input again as %s: %d ToolCall events, want 1", again, calls)
		}
	}
}

// decodeUnchanged decodes frames with one decoder, Finish included, and
// fails when an event reads otherwise at the end than when it came out
// (a value an event shares with the decoder changed by a later frame).
func decodeUnchanged(t *testing.T, name string, frames []jsonrpc.Frame) []agent.Event {
	t.Helper()
	d := NewDecoder()
	var evs []agent.Event
	var seen []string // each event encoded as it came out
	for _, f := range frames {
		for _, e := range d.Decode(f) {
			evs = append(evs, e)
			seen = append(seen, dumpEvent(e))
		}
	}
	for _, e := range d.Finish() {
		evs = append(evs, e)
		seen = append(seen, dumpEvent(e))
	}
	for i := range seen {
		if now := dumpEvent(evs[i]); now != seen[i] {
			t.Fatalf("%s: event %d changed after it came out:\nthen %s\nnow  %s", name, i, seen[i], now)
		}
	}
	return evs
}

func dumpEvent(e agent.Event) string {
	b, err := json.Marshal(e)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
