package codex

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// firstLines returns the first n lines of a capture's traffic log and the
// time of its last record.
func firstLines(t *testing.T, capture string, n int) ([]byte, int64) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "captures", capture, "rpc-traffic.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	if n > len(lines) {
		t.Fatalf("%s has %d lines, fewer than %d", capture, len(lines), n)
	}
	head := bytes.Join(lines[:n], nil)
	frames, _, err := readFrames(bytes.NewReader(head))
	if err != nil || len(frames) == 0 {
		t.Fatalf("%s: %d frames, %v", capture, len(frames), err)
	}
	return head, frames[len(frames)-1].T
}

// A log that stops inside a turn (a crash, a copy taken while Codex ran)
// ends that turn as truncated: no tool stays pending, running or blocked
// and no assistant message stays open. A complete log gets no extra end.
func TestReplayEndsOpenTurnAtEnd(t *testing.T) {
	cases := []struct {
		name    string
		capture string
		lines   int // 0: the whole log
		blocked bool
	}{
		{"app-server: waiting for an approval", "codex-app-decline", 28, true},
		{"app-server: answer streaming", "codex-app-decline", 42, false},
		{"mcp: answer streaming", "codex0150-mcp-server", 37, false},
		{"app-server: complete", "codex-app-decline", 0, false},
		{"mcp: complete", "codex0150-mcp-server", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.lines
			if n == 0 {
				raw, err := os.ReadFile(filepath.Join("testdata", "captures", tc.capture, "rpc-traffic.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				n = len(bytes.SplitAfter(raw, []byte("\n")))
			}
			head, last := firstLines(t, tc.capture, n)
			evs, err := Replay(bytes.NewReader(head), ProtocolAuto)
			if err != nil {
				t.Fatal(err)
			}
			truncated := 0
			for _, e := range evs {
				if te, ok := e.(*agent.TurnEnded); ok && te.Reason == agent.TurnTruncated {
					truncated++
				}
			}
			end, isEnd := evs[len(evs)-1].(*agent.TurnEnded)
			if tc.lines == 0 {
				if truncated != 0 || !isEnd || end.Reason != agent.TurnCompleted {
					t.Fatalf("complete log: %d truncated turns, last event %T %+v", truncated, evs[len(evs)-1], evs[len(evs)-1])
				}
				return
			}
			if truncated != 1 || !isEnd || end.Reason != agent.TurnTruncated || end.TurnID == "" || end.Error == "" || end.Time != last {
				t.Fatalf("%d truncated turns, last event %T %+v, want a truncated turn end at %d", truncated, evs[len(evs)-1], evs[len(evs)-1], last)
			}
			tr, _ := reduce(t, "relay-trunc", evs)
			tools, msgs := 0, 0
			for _, m := range tr.Messages {
				am, ok := m.Info.(*mapper.AssistantMessage)
				if !ok {
					continue
				}
				msgs++
				if am.Time.Completed == nil || am.Finish == "" {
					t.Errorf("assistant message %s left open: %+v", am.ID, am)
				} else if m.Info == lastAssistant(tr) && *am.Time.Completed != last {
					t.Errorf("last assistant message completed at %d, want %d", *am.Time.Completed, last)
				}
				for _, p := range m.Parts {
					tp, ok := p.(*mapper.ToolPart)
					if !ok {
						continue
					}
					tools++
					if st := tp.State.Status; st != mapper.StatusError && st != mapper.StatusCompleted {
						t.Errorf("tool %s stays %s", tp.CallID, st)
					}
					if b := tp.State.Block; tc.blocked && (b == nil || b.Decision != agent.DecisionReject || b.Reason != agent.ReasonCancelled) {
						t.Errorf("tool %s block %+v", tp.CallID, b)
					}
				}
			}
			if msgs == 0 || (tc.blocked && tools == 0) {
				t.Errorf("%d assistant messages, %d tools", msgs, tools)
			}
		})
	}
}

func lastAssistant(tr mapper.Transcript) mapper.Message {
	for i := len(tr.Messages) - 1; i >= 0; i-- {
		if am, ok := tr.Messages[i].Info.(*mapper.AssistantMessage); ok {
			return am
		}
	}
	return nil
}

// A turn whose only model call shows nothing (Codex on a resumed thread, a
// refusal, request_user_input) still reports its usage: the usage is the
// turn's step, not a Dropped orphan. The traffic is the codex-app capture
// up to the prompt, its first usage report, and a turn/completed without
// items.
func TestReplayUsageOfATurnWithoutOutput(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "captures", "codex-app", "rpc-traffic.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(raw, []byte("\n"))
	var log []byte
	for _, n := range []int{1, 4, 5, 6, 13, 14, 15, 20, 21, 22, 23, 24, 34} { // 1-based lines of the capture
		log = append(log, lines[n-1]...)
	}
	log = append(log, `{"t":1795964187811,"dir":"a2c","msg":{"method":"turn/completed","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","turn":{"id":"01a227ce-b3d3-7bb2-bfd7-076c40458e4a","items":[],"status":"completed","error":null}}}}`+"\n"...)
	evs, err := Replay(bytes.NewReader(log), ProtocolAuto)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := reduce(t, "relay-usage", evs)
	if len(tr.Dropped) != 0 || len(tr.Messages) != 2 {
		t.Fatalf("%d messages, dropped %+v", len(tr.Messages), tr.Dropped)
	}
	a, ok := tr.Messages[1].Info.(*mapper.AssistantMessage)
	if !ok || a.ParentID != tr.Messages[0].Info.MessageID() || a.Tokens == nil || *a.Tokens.Input != 10 || *a.Tokens.Output != 5 ||
		a.Finish != agent.FinishStop || a.Time.Completed == nil || *a.Time.Completed != 1795964187811 {
		t.Fatalf("the turn's step: %+v", tr.Messages[1].Info)
	}
}
