package acp

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// replayHead is a traffic log up to a permission request for tool call t1
// (id 7; options y allow_once, n reject_once) in the first turn.
const replayHead = `{"t":1000,"dir":"c2a","msg":{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}}
{"t":1000,"dir":"a2c","msg":{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1}}}
{"t":1000,"dir":"c2a","msg":{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/x","mcpServers":[]}}}
{"t":1000,"dir":"a2c","msg":{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}}
{"t":1001,"dir":"c2a","msg":{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"s1","prompt":[{"type":"text","text":"hi"}]}}}
{"t":1002,"dir":"a2c","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"partial"}}}}}
{"t":1003,"dir":"a2c","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"rm x","kind":"execute","status":"pending","rawInput":{"command":"rm x"}}}}}
{"t":1004,"dir":"a2c","msg":{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"s1","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"y","name":"Yes","kind":"allow_once"},{"optionId":"n","name":"No","kind":"reject_once"}]}}}
`

// A log that stops in the middle of a turn (a crash, a copy taken while
// the agent ran) ends that turn as truncated: the blocked tool is settled
// and the assistant message is closed.
func TestReplayClosesOpenTurnAtEnd(t *testing.T) {
	evs, err := Replay(strings.NewReader(replayHead))
	if err != nil {
		t.Fatal(err)
	}
	last, ok := evs[len(evs)-1].(*agent.TurnEnded)
	if !ok || last.TurnID != "turn-1" || last.Reason != agent.TurnTruncated || last.Error == "" || last.Time != 1004 {
		t.Fatalf("last event %T %+v, want turn-1 ended truncated at 1004", evs[len(evs)-1], evs[len(evs)-1])
	}
	tr, err := transcriptOf(mapper.Config{SessionID: "noend"})(Replay(strings.NewReader(replayHead)))
	if err != nil {
		t.Fatal(err)
	}
	tp, msg, n := toolPart(tr, "t1")
	if n != 1 || tp.State.Status != mapper.StatusError {
		t.Fatalf("tool %d parts, %+v", n, tp)
	}
	if b := tp.State.Block; b == nil || b.Decision != agent.DecisionReject || b.Reason != agent.ReasonCancelled {
		t.Errorf("block %+v", tp.State.Block)
	}
	if msg == nil || msg.Time.Completed == nil || *msg.Time.Completed != 1004 || msg.Finish == "" {
		t.Errorf("assistant message left open: %+v", msg)
	}
	// A complete log gets no extra turn end.
	d := NewDecoder()
	frames, _, _ := readFrames(strings.NewReader(replayHead + `{"t":1005,"dir":"a2c","msg":{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}}` + "\n"))
	for _, f := range frames {
		d.Decode(f)
	}
	if evs := d.Finish(); len(evs) != 0 {
		t.Errorf("Finish after the turn ended: %+v", evs)
	}
}

// The wire answer is what the agent got: happy's decision note only adds
// the reason when it agrees, and stands in when the wire answer cannot be
// read; a contradiction is recorded as dropped.
func TestReplayDecisionNoteVersusWire(t *testing.T) {
	cases := []struct {
		name       string
		note, wire string // the note frame's msg, the response's result
		decision   agent.Decision
		reason     string
		dropped    int
	}{
		{"note contradicts the wire", `{"happy":"decision","request":7,"decision":"reject","reason":"timeout"}`,
			`{"outcome":{"outcome":"selected","optionId":"y"}}`, agent.DecisionOnce, "", 1},
		{"note agrees and adds the reason", `{"happy":"decision","request":7,"decision":"reject","reason":"timeout"}`,
			`{"outcome":{"outcome":"selected","optionId":"n"}}`, agent.DecisionReject, agent.ReasonTimeout, 0},
		{"always answered with allow_once agrees", `{"happy":"decision","request":7,"decision":"always"}`,
			`{"outcome":{"outcome":"selected","optionId":"y"}}`, agent.DecisionAlways, "", 0},
		{"wire cancelled, note once", `{"happy":"decision","request":7,"decision":"once"}`,
			`{"outcome":{"outcome":"cancelled"}}`, agent.DecisionReject, agent.ReasonCancelled, 1},
		{"unreadable wire answer: the note stands in", `{"happy":"decision","request":7,"decision":"reject","reason":"timeout"}`,
			`{"outcome":{"outcome":"selected","optionId":"zz"}}`, agent.DecisionReject, agent.ReasonTimeout, 0},
		{"no note", ``, `{"outcome":{"outcome":"selected","optionId":"n"}}`, agent.DecisionReject, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			log.WriteString(replayHead)
			if tc.note != "" {
				log.WriteString(`{"t":1005,"dir":"note","msg":` + tc.note + "}\n")
			}
			log.WriteString(`{"t":1005,"dir":"c2a","msg":{"jsonrpc":"2.0","id":7,"result":` + tc.wire + "}}\n")
			evs, err := Replay(&log)
			if err != nil {
				t.Fatal(err)
			}
			var res []*agent.ToolResolved
			var drops []agent.Dropped
			for _, e := range evs {
				switch e := e.(type) {
				case *agent.ToolResolved:
					res = append(res, e)
				case *agent.DroppedInput:
					drops = append(drops, e.Dropped)
				}
			}
			if len(res) != 1 || res[0].CallID != "t1" || res[0].Decision != tc.decision || res[0].Reason != tc.reason {
				t.Fatalf("resolved %+v, want %s/%q", res, tc.decision, tc.reason)
			}
			if len(drops) != tc.dropped {
				t.Fatalf("dropped %+v, want %d", drops, tc.dropped)
			}
			if tc.dropped == 1 && (drops[0].Kind != "session/request_permission" || drops[0].Reason != agent.DropInvalidField) {
				t.Errorf("dropped %+v", drops[0])
			}
		})
	}
}

// TestDecodeBufferContract: Decode returns the decoder's buffer, which the
// next frame reuses (its slots cleared: no event of a past frame is held
// there), nil for a frame without events; Finish returns a slice of its
// own, which a later Decode does not touch.
func TestDecodeBufferContract(t *testing.T) {
	tr, err := jsonrpc.ReadTraffic(strings.NewReader(replayHead))
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	var prev []agent.Event
	var kept []agent.Event // copies, as a caller that keeps them makes
	for i, f := range tr.Frames {
		evs := d.Decode(f)
		if evs != nil && len(evs) == 0 {
			t.Fatalf("frame %d: an empty non-nil slice, want nil", i)
		}
		if len(prev) > 0 && len(evs) > 0 && &prev[0] != &evs[0] && cap(prev) >= len(evs) {
			t.Errorf("frame %d: a new slice although the buffer had room", i)
		}
		if slices.ContainsFunc(evs[len(evs):cap(evs)], func(e agent.Event) bool { return e != nil }) {
			t.Errorf("frame %d: the buffer still holds a past frame's events", i)
		}
		kept = append(kept, evs...)
		if len(evs) > 0 {
			prev = evs
		}
	}
	want, err := Replay(strings.NewReader(replayHead))
	if err != nil {
		t.Fatal(err)
	}
	fin := d.Finish()
	if len(fin) != 1 {
		t.Fatalf("Finish: %d events, want the truncated turn's end", len(fin))
	}
	kept = append(kept, fin...)
	if len(kept) != len(want) {
		t.Fatalf("%d events, Replay gives %d", len(kept), len(want))
	}
	for i := range kept {
		if !reflect.DeepEqual(kept[i], want[i]) {
			t.Errorf("event %d: %+v, Replay gives %+v", i, kept[i], want[i])
		}
	}
	end := fin[0]
	d.Decode(tr.Frames[len(tr.Frames)-1]) // refused (a repeated request id) or not: it must not touch fin
	if fin[0] != end {
		t.Error("Decode after Finish changed the slice Finish returned")
	}
}

// TestDecodeBufferBounded: a buffer that grew past keptEvents (a frame of
// many events) is not kept for the frames after it.
func TestDecodeBufferBounded(t *testing.T) {
	tr, err := jsonrpc.ReadTraffic(strings.NewReader(replayHead))
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder()
	d.out = make([]agent.Event, keptEvents+1)
	for i := range d.out {
		d.out[i] = &agent.TextDelta{}
	}
	d.Decode(tr.Frames[0])
	if cap(d.out) > keptEvents {
		t.Errorf("the buffer keeps room for %d events, want at most %d", cap(d.out), keptEvents)
	}
}
