package acp

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// Regressions found running the pinned codex-acp 0.16.0 and OpenCode
// 1.18.33 for real (testdata/captures/*-reject).

// captureFrames reads the frames of a capture.
func captureFrames(t *testing.T, name string) []jsonrpc.Frame {
	t.Helper()
	frames, bad, err := readFrames(bytes.NewReader(readCapture(t, name)))
	if err != nil || len(bad) > 0 {
		t.Fatalf("%s: %v %v", name, err, bad)
	}
	return frames
}

// canonicalJSON rewrites a JSON value with object members in sorted order.
func canonicalJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}

// edited returns frames with each frame for which edit returns a non-nil
// list replaced by that list (an empty list removes the frame).
func edited(frames []jsonrpc.Frame, edit func(f jsonrpc.Frame) []jsonrpc.Frame) []jsonrpc.Frame {
	var out []jsonrpc.Frame
	for _, f := range frames {
		if r := edit(f); r != nil {
			out = append(out, r...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// isDecisionNote reports whether f is happy's decision note.
func isDecisionNote(f jsonrpc.Frame) bool {
	return f.Dir == trafficlog.Note && bytes.Contains(f.Data, []byte(`"happy":"decision"`))
}

// isPermissionAnswer reports whether f is happy's answer to a permission
// request (the only response happy sends in these captures).
func isPermissionAnswer(f jsonrpc.Frame) bool {
	return f.Dir == trafficlog.C2A && bytes.Contains(f.Data, []byte(`"outcome":{`))
}

// codex-acp offers one option of kind reject_once ("abort"); selecting it
// ends the prompt with stopReason cancelled although happy never sent
// session/cancel. A turn the agent ends because happy rejected a tool (a
// person, a deny rule, the permission timeout) is a rejected turn, not an
// interrupted one; a turn happy itself cancelled stays interrupted.
func TestCodexACPRejectionEndsTheTurnRejected(t *testing.T) {
	const reqID = `"e9a6ca4d-9be5-49e0-8fda-387c14e8f2e7"`
	frames := captureFrames(t, "codex-acp-reject")
	note := func(decision, reason string) func(jsonrpc.Frame) []jsonrpc.Frame {
		return func(f jsonrpc.Frame) []jsonrpc.Frame {
			if !isDecisionNote(f) {
				return nil
			}
			n := `{"happy":"decision","request":` + reqID + `,"decision":"` + decision + `"`
			if reason != "" {
				n += `,"reason":"` + reason + `"`
			}
			return []jsonrpc.Frame{frame(f.T, trafficlog.Note, n+"}")}
		}
	}
	answer := func(result string) func(jsonrpc.Frame) []jsonrpc.Frame {
		return func(f jsonrpc.Frame) []jsonrpc.Frame {
			if !isPermissionAnswer(f) {
				return nil
			}
			return []jsonrpc.Frame{frame(f.T, trafficlog.C2A, `{"jsonrpc":"2.0","id":`+reqID+`,"result":`+result+`}`)}
		}
	}
	cancelFirst := func(f jsonrpc.Frame) []jsonrpc.Frame {
		if !isDecisionNote(f) {
			return nil
		}
		return []jsonrpc.Frame{frame(f.T, trafficlog.C2A, `{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"01a231ef-d518-71f0-a5b6-680233872425"}}`), f}
	}
	cases := []struct {
		name     string
		frames   []jsonrpc.Frame
		turn     string
		finish   string
		decision agent.Decision
		reason   string
	}{
		{"a person rejects (as recorded)", frames, agent.TurnCompleted, agent.FinishToolCalls, agent.DecisionReject, ""},
		{"the permission timeout", edited(frames, note("reject", agent.ReasonTimeout)), agent.TurnCompleted, agent.FinishToolCalls, agent.DecisionReject, agent.ReasonTimeout},
		{"a deny rule", edited(frames, note("reject", "denied by rule")), agent.TurnCompleted, agent.FinishToolCalls, agent.DecisionReject, "denied by rule"},
		{"happy abort", edited(edited(edited(frames, cancelFirst), note("reject", agent.ReasonCancelled)), answer(`{"outcome":{"outcome":"cancelled"}}`)),
			agent.TurnInterrupted, agent.FinishAborted, agent.DecisionReject, agent.ReasonCancelled},
		{"allowed, then the agent cancels on its own", edited(edited(frames, note("once", "")), answer(`{"outcome":{"outcome":"selected","optionId":"approved"}}`)),
			agent.TurnInterrupted, agent.FinishAborted, agent.DecisionOnce, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs := decodeAll(tc.frames)
			end, ok := evs[len(evs)-1].(*agent.TurnEnded)
			if !ok || end.Reason != tc.turn || end.Error != "" {
				t.Fatalf("last event %s, want TurnEnded %s", eventLines(t, evs[len(evs)-1:]), tc.turn)
			}
			tr, _ := reduce(t, "codex-acp", evs)
			tp, msg, n := toolPart(tr, "call_fake_0001")
			if n != 1 || tp.State.Status != mapper.StatusError {
				t.Fatalf("%d tool parts, %+v", n, tp)
			}
			if b := tp.State.Block; b == nil || b.Decision != tc.decision || b.Reason != tc.reason {
				t.Errorf("block %+v, want %s %q", tp.State.Block, tc.decision, tc.reason)
			}
			if msg == nil || msg.Finish != tc.finish || msg.Error != nil {
				t.Errorf("message %+v, want finish %s", msg, tc.finish)
			}
			if len(tr.Dropped) != 0 {
				t.Errorf("dropped: %+v", tr.Dropped)
			}
		})
	}
}

// The same, live: codex-acp (replayed from its capture) under the session
// runner, the tool rejected by a person, a deny rule or the permission
// timeout. The run ends with a completed turn and one rejection, which
// happy <agent> -p reports as exit 1 ("permission request(s) were
// rejected"), not 130.
func TestLiveCodexACPRejection(t *testing.T) {
	script, _ := filepath.Abs(filepath.Join("testdata", "captures", "codex-acp-reject", "rpc-traffic.jsonl"))
	person := answerWith(agent.DecisionReject)
	nobody := func(*session.Runner, *agent.ToolBlocked) {} // the runner answers itself
	for _, tc := range []struct {
		name   string
		cfg    func(*session.Options)
		answer func(*session.Runner, *agent.ToolBlocked)
		reason string
	}{
		{"a person", nil, person, ""},
		{"a deny rule", func(o *session.Options) {
			o.Rules = []mapper.PermissionRule{{Permission: "bash", Pattern: "*", Action: mapper.ActionDeny}}
		}, nobody, agent.ReasonRule},
		{"the permission timeout", func(o *session.Options) { o.PermissionTimeout = time.Millisecond }, nobody, agent.ReasonTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &syncBuffer{}
			opts := Options{
				Command: []string{testExe(t)}, Env: []string{"ACP_FAKE_SCRIPT=" + script}, Cwd: t.TempDir(),
				Settings: rpcagent.Settings{Record: rec, CallTimeout: 10 * time.Second, StopGrace: time.Second},
			}
			tr, res := runSessionWith(t, opts, tc.cfg, "Create hi.txt", tc.answer)
			if strings.Contains(string(rec.Bytes()), "MISMATCH") {
				t.Fatalf("happy's traffic differs from the capture:\n%s", rec.Bytes())
			}
			if res.TurnReason != agent.TurnCompleted || res.Rejected != 1 || res.TurnError != "" {
				t.Errorf("result %+v, want a completed turn with 1 rejection", res)
			}
			tp, _, _ := toolPart(tr, "call_fake_0001")
			if tp == nil || tp.State.Status != mapper.StatusError || tp.State.Block == nil ||
				tp.State.Block.Decision != agent.DecisionReject || tp.State.Block.Reason != tc.reason {
				t.Errorf("tool %+v", tp)
			}
			if !strings.Contains(string(rec.Bytes()), `"result":{"outcome":{"optionId":"abort","outcome":"selected"}}`) {
				t.Errorf("happy did not select codex-acp's reject_once option:\n%s", rec.Bytes())
			}
		})
	}
}

// OpenCode asks for permission with the command alone (its tool_call had the
// description and cwd too) and, after happy's rejection, sends its own
// failed update for the tool happy already settled, with the whole input
// and its error as rawOutput. Confirming a terminal state is no error: the
// input keeps every member, the failure's detail is merged, nothing is
// dropped. A contradicting end (completed after the rejection) still is.
func TestOpenCodeRejectionConfirmed(t *testing.T) {
	frames := captureFrames(t, "opencode-acp-reject")
	evs := decodeAll(frames)
	wantInput := `{"command":"echo hi > hi.txt","cwd":"/home/dev/run/work","description":"Write hi.txt"}`
	var blocked *agent.ToolBlocked
	for _, e := range evs {
		if b, ok := e.(*agent.ToolBlocked); ok {
			blocked = b
		}
	}
	if blocked == nil || canonicalJSON(t, blocked.Input) != wantInput {
		t.Fatalf("the permission shows input %s, want %s", blocked.Input, wantInput)
	}
	tr, _ := reduce(t, "opencode", evs)
	if len(tr.Dropped) != 0 {
		t.Errorf("dropped: %+v", tr.Dropped)
	}
	tp, msg, n := toolPart(tr, "toolu_fake_0002")
	if n != 1 || tp.State.Status != mapper.StatusError || tp.State.Error != "rejected" || tp.Tool != agent.ToolBash {
		t.Fatalf("%d tool parts, %+v", n, tp)
	}
	if got := canonicalJSON(t, mustJSON(tp.State.Input)); got != wantInput {
		t.Errorf("input %s, want %s", got, wantInput)
	}
	if got := canonicalJSON(t, mustJSON(tp.State.Metadata)); got != `{"rawOutput":{"error":"The user rejected permission to use this specific tool call."}}` {
		t.Errorf("state metadata %s", got)
	}
	if b := tp.State.Block; b == nil || b.Decision != agent.DecisionReject || b.Reason != "" || b.Permission != "bash" {
		t.Errorf("block %+v", tp.State.Block)
	}
	if got := canonicalJSON(t, mustJSON(tp.Metadata)); got != `{"locations":[{"path":"/home/dev/run/work"}],"providerTool":"bash"}` {
		t.Errorf("part metadata %s", got)
	}
	if msg == nil || msg.Finish != agent.FinishToolCalls {
		t.Errorf("message %+v", msg)
	}

	// The agent claiming the rejected tool completed contradicts it.
	completed := edited(frames, func(f jsonrpc.Frame) []jsonrpc.Frame {
		if f.Dir != trafficlog.A2C || !bytes.Contains(f.Data, []byte(`"status":"failed"`)) {
			return nil
		}
		var m map[string]any
		if err := json.Unmarshal(f.Data, &m); err != nil {
			t.Fatal(err)
		}
		u := m["params"].(map[string]any)["update"].(map[string]any)
		u["status"] = "completed"
		u["content"] = []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "hi"}}}
		delete(u, "rawOutput")
		return []jsonrpc.Frame{frame(f.T, trafficlog.A2C, string(mustJSON(m)))}
	})
	tr, _ = reduce(t, "opencode", decodeAll(completed))
	tp, _, _ = toolPart(tr, "toolu_fake_0002")
	if tp.State.Status != mapper.StatusError || tp.State.Output != "" {
		t.Errorf("the rejected tool became %+v", tp.State)
	}
	if len(tr.Dropped) != 1 || tr.Dropped[0].Reason != agent.DropIllegalTransition || tr.Dropped[0].Kind != "ToolCompleted" {
		t.Errorf("dropped %+v, want the completion refused", tr.Dropped)
	}
}
