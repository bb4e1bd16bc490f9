package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/adapters/codex/internal/codextest"
	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// replayFile decodes a traffic log of testdata/synthetic and checks the
// golden events and transcript.
func replayFile(t *testing.T, name string, p Protocol) ([]agent.Event, mapper.Transcript) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "synthetic", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evs, err := Replay(f, p)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, name+".events.jsonl", encodeEvents(t, evs))
	tr, doc := reduce(t, "relay-"+name, evs)
	golden(t, name+".transcript.json", doc)
	return evs, tr
}

// tools indexes the tool parts of a transcript (children included) by call id.
func tools(tr mapper.Transcript) map[string]*mapper.ToolPart {
	out := map[string]*mapper.ToolPart{}
	var walk func(mapper.Transcript)
	walk = func(tr mapper.Transcript) {
		for _, m := range tr.Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok {
					out[tp.CallID] = tp
				}
			}
		}
		for _, c := range tr.Children {
			walk(c)
		}
	}
	walk(tr)
	return out
}

func state(tp *mapper.ToolPart) string {
	if tp == nil {
		return "<none>"
	}
	s := string(tp.State.Status) + ":" + tp.State.Output + tp.State.Error
	if b := tp.State.Block; b != nil {
		s += fmt.Sprintf(" [%s %s %s %v]", b.Type, b.Decision, b.Reason, b.Answers)
	}
	return s
}

func TestDecodeAppServerAllKinds(t *testing.T) {
	evs, tr := replayFile(t, "appserver-all", ProtocolAppServer)
	got := tools(tr)
	for call, want := range map[string]string{
		"fc1": "completed: [permission always  []]",
		"m1":  "completed:found 3",
		"m2":  "error:server down",
		"w1":  "completed:",
		"c1":  "completed:Two files.",
		"e1":  "completed: [permission always  []]",
		"q1":  "error:cancelled [question   [[blue]]]",
		"iv1": "completed:",
		"e2":  "error:cancelled",
		"e3":  "error:agent-exited [permission reject agent-exited []]",
	} {
		if s := state(got[call]); !strings.HasPrefix(s, strings.SplitN(want, " [", 2)[0]) || (strings.Contains(want, "[") && !strings.HasSuffix(s, want[strings.Index(want, " ["):])) {
			t.Errorf("tool %s = %q, want %q", call, s, want)
		}
	}
	if fc := got["fc1"]; fc == nil || fc.Tool != "edit" || fc.State.Metadata["diff"] != "@@ -1 +1 @@\n-old\n+new\n+hello\n" {
		t.Errorf("fileChange part %+v", fc)
	}
	if fc := got["fc1"]; fc != nil && fc.State.Block != nil && strings.Join(fc.State.Block.Patterns, ",") != "" {
		t.Logf("fileChange patterns %v", fc.State.Block.Patterns)
	}
	if m := got["m1"]; m == nil || m.Tool != "mcp:docs/search" {
		t.Errorf("mcp tool name %+v", m)
	}
	// Reasoning: deltas and final agree, parts separated by a blank line.
	var reasoning, text []string
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			switch p := p.(type) {
			case *mapper.ReasoningPart:
				reasoning = append(reasoning, p.Text)
			case *mapper.TextPart:
				if _, ok := m.Info.(*mapper.AssistantMessage); ok {
					text = append(text, p.Text)
				}
			}
		}
	}
	if fmt.Sprint(reasoning) != "[First part.\n\nSecond part.]" {
		t.Errorf("reasoning %q", reasoning)
	}
	if fmt.Sprint(text) != "[All done.]" {
		t.Errorf("assistant text %q (delta and final must merge; a turn's item list must not repeat it)", text)
	}
	// The sub-agent is a child session with its own message.
	if len(tr.Children) != 1 || tr.Children[0].Session.Title != "explorer" || len(tr.Children[0].Messages) == 0 {
		t.Errorf("children %+v", tr.Children)
	}
	if len(tr.Todos) != 3 || tr.Todos[0].Status != agent.TodoInProgress || tr.Todos[2].Status != agent.TodoCompleted {
		t.Errorf("todos %+v", tr.Todos)
	}
	// Drops: unknown item, unknown method, a non-JSON line, an unknown decision.
	var drops []string
	for _, d := range tr.Dropped {
		drops = append(drops, d.Kind+":"+string(d.Reason))
	}
	if want := "[item:hologram:unknown_type item/teleport/delta:unknown_type :unparseable_json decision:unknown_decision]"; fmt.Sprint(drops) != want {
		t.Errorf("dropped %v, want %s", drops, want)
	}
	var retries, errs int
	var usage *agent.Usage
	for _, e := range evs {
		switch e := e.(type) {
		case *agent.Retry:
			retries++
			if e.Attempt != retries {
				t.Errorf("retry attempt %d, want %d", e.Attempt, retries)
			}
		case *agent.AgentError:
			errs++
			if e.Kind != agent.ErrorAuth || e.StatusCode == nil || *e.StatusCode != 401 {
				t.Errorf("agent error %+v", e)
			}
		case *agent.Usage:
			usage = e
		}
	}
	if retries != 2 || errs != 1 {
		t.Errorf("%d retries, %d errors", retries, errs)
	}
	if usage == nil || *usage.Tokens.Input != 60 || *usage.Tokens.Cache.Read != 40 || *usage.Tokens.Output != 50 || *usage.Tokens.Reasoning != 20 || usage.Tokens.Cache.Write != nil {
		t.Errorf("usage %+v", usage)
	}
	if got := fmt.Sprint(codextest.TurnEnds(evs)); got != "[tu1:completed tu3:failed tu4:agent-exited]" {
		t.Errorf("turn ends %s", got)
	}
}

func TestDecodeMCPAllKinds(t *testing.T) {
	evs, tr := replayFile(t, "mcp-all", ProtocolMCP)
	got := tools(tr)
	for call, want := range map[string]string{
		"p1": "error:rejected [permission reject  []]",
		"p2": "completed:Success",
		"m1": "completed:hit",
		"m2": "error:timeout",
		"w1": "completed:",
		"x1": "error:no such",
	} {
		if s := state(got[call]); s != want {
			t.Errorf("tool %s = %q, want %q", call, s, want)
		}
	}
	if p := got["p2"]; p == nil || p.Metadata["diff"] != "+x\n+y\n" {
		t.Errorf("added file diff %+v", p)
	}
	if got := fmt.Sprint(codextest.TurnEnds(evs)); got != "[t1:interrupted tools/call#4:failed]" {
		t.Errorf("turn ends %s (the late reply to the aborted turn must change nothing)", got)
	}
	var drops []string
	for _, d := range tr.Dropped {
		drops = append(drops, d.Kind+":"+string(d.Reason))
	}
	if fmt.Sprint(drops) != "[codex/event:time_travel:unknown_type]" {
		t.Errorf("dropped %v", drops)
	}
	users := 0
	for _, m := range tr.Messages {
		if _, ok := m.Info.(*mapper.UserMessage); ok {
			users++
		}
	}
	if users != 2 {
		t.Errorf("%d user messages, want 2 (prompt and user_message are one)", users)
	}
}

func TestOutBuf(t *testing.T) {
	var o outBuf
	for _, b := range []byte("h→é") { // split every multi-byte sequence
		o.write([]byte{b})
	}
	if o.String() != "h→é" {
		t.Errorf("byte-by-byte = %q", o.String())
	}
	var big outBuf
	chunk := strings.Repeat("ab", 1024) // 2 KiB
	for i := 0; i < 200; i++ {
		big.write([]byte(chunk))
	}
	s := big.String()
	if len(s) > outHeadMax+outTailMax+100 || !strings.Contains(s, "bytes of output omitted") || !strings.HasPrefix(s, "abab") || !strings.HasSuffix(s, "abab") {
		t.Errorf("capped output: %d bytes", len(s))
	}
	var trunc outBuf
	trunc.write([]byte{'x', 0xE2, 0x86})
	if trunc.String() != "x\uFFFD" {
		t.Errorf("truncated sequence = %q", trunc.String())
	}
}

func TestDecodeChunk(t *testing.T) {
	for _, tc := range []struct {
		in   string
		b64  bool
		want string
		err  bool
	}{
		{`"aGk="`, true, "hi", false},
		{`"aGk="`, false, "aGk=", false},
		{`"not base64!"`, true, "not base64!", false},
		{`[104,105]`, true, "hi", false},
		{`[256]`, true, "", true},
		{`{"a":1}`, true, "", true},
		{`null`, true, "", false},
	} {
		b, err := decodeChunk([]byte(tc.in), tc.b64)
		if (err != nil) != tc.err || string(b) != tc.want {
			t.Errorf("decodeChunk(%s, %v) = %q, %v", tc.in, tc.b64, b, err)
		}
	}
}

func TestDecision(t *testing.T) {
	for _, tc := range []struct {
		in     string
		d      agent.Decision
		reason string
		ok     bool
	}{
		{`"accept"`, agent.DecisionOnce, "", true},
		{`"approved"`, agent.DecisionOnce, "", true},
		{`"acceptForSession"`, agent.DecisionAlways, "", true},
		{`"approved_for_session"`, agent.DecisionAlways, "", true},
		{`{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}`, agent.DecisionAlways, "", true},
		{`{"approved_execpolicy_amendment":{"proposed_execpolicy_amendment":["ls"]}}`, agent.DecisionAlways, "", true},
		{`{"applyNetworkPolicyAmendment":{"network_policy_amendment":{"action":"deny","host":"x"}}}`, agent.DecisionReject, "", true},
		{`"decline"`, agent.DecisionReject, "", true},
		{`"denied"`, agent.DecisionReject, "", true},
		{`"cancel"`, agent.DecisionReject, agent.ReasonCancelled, true},
		{`"abort"`, agent.DecisionReject, agent.ReasonCancelled, true},
		{`"timed_out"`, agent.DecisionReject, agent.ReasonTimeout, true},
		{`"yes"`, "", "", false},
		{`true`, "", "", false},
		{`{"a":1,"b":2}`, "", "", false},
	} {
		d, r, ok := decision([]byte(tc.in))
		if d != tc.d || r != tc.reason || ok != tc.ok {
			t.Errorf("decision(%s) = %q %q %v", tc.in, d, r, ok)
		}
	}
}

func TestApprovalAnswer(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	enc := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	noSession := Request{Method: "item/commandExecution/requestApproval",
		Available: []json.RawMessage{raw(`"accept"`), raw(`{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}`), raw(`"cancel"`)},
		Amendment: raw(`["ls"]`)}
	withSession := Request{Method: "item/fileChange/requestApproval", Available: []json.RawMessage{raw(`"accept"`), raw(`"acceptForSession"`)}}
	onlyOnce := Request{Method: "item/commandExecution/requestApproval", Available: []json.RawMessage{raw(`"accept"`), raw(`"decline"`), raw(`"cancel"`)}}
	unlisted := Request{Method: "item/commandExecution/requestApproval"}
	legacy := Request{Method: "execCommandApproval"}
	mcp := Request{Method: "elicitation/create"}
	question := Request{Method: "item/tool/requestUserInput", Questions: []string{"q1", "q2"}}
	for _, tc := range []struct {
		r    Request
		d    agent.Decision
		want string
	}{
		{noSession, agent.DecisionOnce, `{"decision":"accept"}`},
		{noSession, agent.DecisionAlways, `{"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["ls"]}}}`},
		{noSession, agent.DecisionReject, `{"decision":"decline"}`},
		{withSession, agent.DecisionAlways, `{"decision":"acceptForSession"}`},
		// Neither acceptForSession nor an amendment offered: accept once.
		{onlyOnce, agent.DecisionAlways, `{"decision":"accept"}`},
		{unlisted, agent.DecisionAlways, `{"decision":"acceptForSession"}`},
		{legacy, agent.DecisionOnce, `{"decision":"approved"}`},
		{legacy, agent.DecisionAlways, `{"decision":"approved_for_session"}`},
		{mcp, agent.DecisionReject, `{"decision":"denied"}`},
	} {
		if got := enc(ApprovalAnswer(tc.r, tc.d)); got != tc.want {
			t.Errorf("ApprovalAnswer(%s, %s) = %s, want %s", tc.r.Method, tc.d, got, tc.want)
		}
	}
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{noSession, `{"decision":"cancel"}`},
		{mcp, `{"decision":"abort"}`},
		{legacy, `{"decision":"abort"}`},
		{question, `{"answers":{}}`},
	} {
		if got := enc(CancelAnswer(tc.r)); got != tc.want {
			t.Errorf("CancelAnswer(%s) = %s, want %s", tc.r.Method, got, tc.want)
		}
	}
	if got := enc(QuestionAnswer(question, [][]string{{"a", "b"}})); got != `{"answers":{"q1":{"answers":["a","b"]},"q2":{"answers":[]}}}` {
		t.Errorf("QuestionAnswer = %s", got)
	}
	if !question.IsQuestion() || noSession.IsQuestion() {
		t.Error("IsQuestion")
	}
}

func TestParse(t *testing.T) {
	for _, s := range []string{"", "default", "read-only", "safe-yolo", "yolo"} {
		if _, err := ParsePermissionMode(s); err != nil {
			t.Errorf("mode %q: %v", s, err)
		}
	}
	if _, err := ParsePermissionMode("bypass"); !errors.Is(err, ErrUnknownMode) {
		t.Errorf("unknown mode err = %v", err)
	}
	for m, want := range map[PermissionMode]string{ModeDefault: "on-request/workspace-write", ModeReadOnly: "on-request/read-only", ModeSafeYolo: "never/workspace-write", ModeYolo: "never/danger-full-access"} {
		if a, s := m.Policy(); a+"/"+s != want {
			t.Errorf("%s policy %s/%s", m, a, s)
		}
	}
	if _, err := ParseProtocol("acp"); !errors.Is(err, ErrUnknownProtocol) {
		t.Errorf("unknown protocol err = %v", err)
	}
	if p, err := ParseProtocol(""); p != ProtocolAuto || err != nil {
		t.Errorf("empty protocol = %s %v", p, err)
	}
}

// TestDuplicatePendingRequestID: a second server request under the id of
// one still unanswered is refused with a Dropped record (the first keeps
// its id); once the first is answered, the id may be used again.
func TestDuplicatePendingRequestID(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dec    Decoder
		frames []string
		reqs   string // the method of the duplicate request
	}{
		{"appserver", NewAppServerDecoder(), []string{
			`{"id":1,"method":"thread/start","params":{}}`,
			`{"id":1,"result":{"thread":{"id":"th1"},"model":"m"}}`,
			`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c1","command":"ls"}}`,
			`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c2","command":"rm x"}}`,
			`{"id":7,"result":{"decision":"accept"}}`,
			`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c3","command":"pwd"}}`,
		}, "item/commandExecution/requestApproval"},
		{"mcp", NewMCPDecoder(), []string{
			`{"id":7,"method":"elicitation/create","params":{"codex_elicitation":"exec-approval","codex_call_id":"c1","codex_command":["ls"]}}`,
			`{"id":7,"method":"elicitation/create","params":{"codex_elicitation":"exec-approval","codex_call_id":"c2","codex_command":["rm","x"]}}`,
			`{"id":7,"result":{"decision":"approved"}}`,
			`{"id":7,"method":"elicitation/create","params":{"codex_elicitation":"exec-approval","codex_call_id":"c3","codex_command":["pwd"]}}`,
		}, "elicitation/create"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var drops, blocked, resolved []string
			for _, fr := range tc.frames {
				dir := trafficlog.A2C
				if strings.Contains(fr, `"thread/start"`) || strings.Contains(fr, `"result":{"decision"`) {
					dir = trafficlog.C2A
				}
				for _, e := range tc.dec.Decode(jsonrpc.NewFrame(0, dir, []byte(fr))) {
					switch e := e.(type) {
					case *agent.DroppedInput:
						drops = append(drops, e.Dropped.Kind+"/"+string(e.Dropped.Reason)+"/"+e.Dropped.Detail)
					case *agent.ToolBlocked:
						blocked = append(blocked, e.CallID)
					case *agent.ToolResolved:
						resolved = append(resolved, e.CallID+":"+string(e.Decision))
					}
				}
			}
			if want := []string{tc.reqs + "/invalid_field/request id 7 is already pending"}; fmt.Sprint(drops) != fmt.Sprint(want) {
				t.Errorf("drops %q, want %q", drops, want)
			}
			if fmt.Sprint(blocked) != "[c1 c3]" || fmt.Sprint(resolved) != "[c1:once]" {
				t.Errorf("blocked %v resolved %v", blocked, resolved)
			}
		})
	}
}
