package mapper

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func ptr[T any](v T) *T { return &v }

// sampleAssistant is a model step with one part of every known type and a
// tool that was blocked, approved and completed.
func sampleAssistant() MessageWithParts {
	const sid, mid = "ses_01xyz", "msg_02def"
	base := func(id string) PartBase { return PartBase{ID: id, SessionID: sid, MessageID: mid} }
	tokens := &agent.Tokens{Input: ptr[int64](4200), Output: ptr[int64](340), Reasoning: ptr[int64](0),
		Cache: agent.CacheTokens{Read: ptr[int64](3800), Write: ptr[int64](400)}}
	return MessageWithParts{
		Info: &AssistantMessage{
			ID: mid, SessionID: sid, Role: RoleAssistant,
			Time:     AssistantTime{Created: 1753120001000, Completed: ptr[int64](1753120004000)},
			ParentID: "msg_01abc", ModelID: "claude-sonnet-4-6", ProviderID: "anthropic", Agent: "build",
			Path: MessagePath{Cwd: "/home/user/app", Root: "/home/user/app"},
			Cost: ptr(0.0087), Tokens: tokens, Finish: agent.FinishToolCalls,
		},
		Parts: []Part{
			&StepStartPart{PartBase: base("prt_010"), Snapshot: "a1b2c3d4"},
			&ReasoningPart{PartBase: base("prt_011"), Text: "I'll create the file using writeFile...",
				Time: PartTime{Start: 1753120001100, End: ptr[int64](1753120001400)}},
			&ToolPart{PartBase: base("prt_012"), CallID: "call_abc123", Tool: "writeFile", State: ToolState{
				Status: StatusCompleted,
				Input:  agent.Object{"path": "hello.txt", "content": "hello world\n"},
				Output: "Created hello.txt (12 bytes)", Title: "writeFile hello.txt", Metadata: agent.Object{},
				Time: ToolTime{Start: 1753120001500, End: 1753120003800},
				Block: &Block{Type: BlockPermission, ID: "per_001", Permission: "edit",
					Patterns: []string{"hello.txt"}, Metadata: agent.Object{"filepath": "hello.txt"},
					Decision: agent.DecisionOnce, DecidedAt: ptr[int64](1753120002500)},
			}},
			&TextPart{PartBase: base("prt_014"), Text: "a <b> & \u2028 \"quoted\"\n", Synthetic: true,
				Time: &PartTime{Start: 5}, Metadata: agent.Object{"n": json.Number("1.50")}},
			&FilePart{PartBase: base("prt_015"), Mime: "image/png", Filename: "a.png", URL: "data:image/png;base64,AA==",
				Source: json.RawMessage(`{"type":"file","path":"a.png"}`)},
			&SubtaskPart{PartBase: base("prt_016"), Prompt: "p", Description: "d", Agent: "explore",
				Model: &ModelRef{ProviderID: "anthropic", ModelID: "claude-haiku-4-5"}, Command: "c"},
			&AgentPart{PartBase: base("prt_017"), Name: "explore"},
			&SnapshotPart{PartBase: base("prt_018"), Snapshot: "e5f6"},
			&PatchPart{PartBase: base("prt_019"), Hash: "h", Files: []string{"a.go", "b.go"}},
			&CompactionPart{PartBase: base("prt_020"), Auto: true, Overflow: ptr(false)},
			&RetryPart{PartBase: base("prt_021"), Attempt: 2, Time: RetryTime{Created: 9},
				Error: APIError{Name: agent.ErrNameAPI, Data: agent.ErrorData{Message: "overloaded", Kind: agent.ErrorRateLimit,
					StatusCode: ptr(529), IsRetryable: ptr(true)}}},
			&StepFinishPart{PartBase: base("prt_022"), Reason: agent.FinishToolCalls, Snapshot: "e5f6g7h8",
				Cost: ptr(0.0087), Tokens: tokens},
		},
	}
}

func mustEncode(t *testing.T, m MessageWithParts) []byte {
	t.Helper()
	b, err := EncodeMessageWithParts(m)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return b
}

func TestMessageWithPartsRoundTrip(t *testing.T) {
	want := sampleAssistant()
	b := mustEncode(t, want)
	got, rep, err := DecodeMessageWithParts(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(rep.Refused) != 0 || rep.UnknownParts != 0 || rep.IgnoredFields != 0 {
		t.Fatalf("report = %+v, want empty", rep)
	}
	if b2 := mustEncode(t, got); string(b2) != string(b) {
		t.Fatalf("re-encode differs:\n%s\n%s", b, b2)
	}
	if len(got.Parts) != len(want.Parts) {
		t.Fatalf("parts = %d, want %d", len(got.Parts), len(want.Parts))
	}
	for i := range want.Parts {
		if got.Parts[i].PartType() != want.Parts[i].PartType() {
			t.Errorf("part %d type = %s, want %s", i, got.Parts[i].PartType(), want.Parts[i].PartType())
		}
	}
	tool := got.Parts[2].(*ToolPart)
	if tool.State.Block == nil || tool.State.Block.Decision != agent.DecisionOnce || *tool.State.Block.DecidedAt != 1753120002500 {
		t.Errorf("block = %+v", tool.State.Block)
	}
	a := got.Info.(*AssistantMessage)
	if *a.Cost != 0.0087 || *a.Tokens.Reasoning != 0 || *a.Tokens.Cache.Write != 400 {
		t.Errorf("usage = %v %+v", *a.Cost, a.Tokens)
	}
	text := got.Parts[3].(*TextPart)
	if text.Text != "a <b> & \u2028 \"quoted\"\n" || !text.Synthetic || text.Metadata["n"] != json.Number("1.50") {
		t.Errorf("text part = %+v", text)
	}
	// No HTML escaping; U+2028 escaped; numbers in metadata keep their text.
	for _, frag := range []string{`"text":"a <b> & \u2028 \"quoted\"\n"`, `"metadata":{"n":1.50}`} {
		if !strings.Contains(string(b), frag) {
			t.Errorf("encoding lacks %s", frag)
		}
	}
}

func TestPartMemberOrder(t *testing.T) {
	p := &TextPart{PartBase: PartBase{ID: "p", SessionID: "s", MessageID: "m"}, Text: "hi"}
	b, err := EncodePart(p)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"p","sessionID":"s","messageID":"m","type":"text","text":"hi"}`; string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
	// Through encoding/json the codec is used as well ("type" written).
	jb, err := json.Marshal(p)
	if err != nil || string(jb) != string(b) {
		t.Fatalf("json.Marshal = %s, %v", jb, err)
	}
	var back TextPart
	if err := json.Unmarshal(b, &back); err != nil || back.Text != "hi" || back.ID != "p" {
		t.Fatalf("json.Unmarshal = %+v, %v", back, err)
	}
	var wrong ReasoningPart
	if err := json.Unmarshal(b, &wrong); err == nil || !strings.Contains(err.Error(), `want a "reasoning" part, got "text"`) {
		t.Fatalf("unmarshal text into reasoning: %v", err)
	}
}

func TestNumbersKeepTheirText(t *testing.T) {
	in := `{"id":"p","sessionID":"s","messageID":"m","type":"tool","callID":"c","tool":"t","state":` +
		`{"status":"pending","input":{"a":1.50,"b":12345678901234567890123,"c":-0,"d":1e400,"e":[1.0,{"f":2E3}]},"raw":""}}`
	p, err := DecodePart([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodePart(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `"input":{"a":1.50,"b":12345678901234567890123,"c":-0,"d":1e400,"e":[1.0,{"f":2E3}]}`
	if !strings.Contains(string(b), want) {
		t.Fatalf("got %s\nwant it to contain %s", b, want)
	}
}

func TestAbsentNullZero(t *testing.T) {
	const head = `{"id":"m","sessionID":"s","role":"assistant","time":{"created":1},"parentID":"u",` +
		`"modelID":"x","providerID":"y","agent":"build","path":{"cwd":"/","root":"/"}`
	cases := []struct {
		name     string
		tail     string
		cost     *float64
		input    *int64
		tokens   bool
		errorMsg string
	}{
		{name: "absent", tail: `}`},
		{name: "zero", tail: `,"cost":0,"tokens":{"input":0}}`, cost: ptr(0.0), input: ptr[int64](0), tokens: true},
		{name: "tokens without counts", tail: `,"tokens":{}}`, tokens: true},
		{name: "null cost", tail: `,"cost":null}`, errorMsg: "cost: want a number, got null"},
		{name: "null token", tail: `,"tokens":{"input":null}}`, errorMsg: "tokens.input: want a number, got null"},
		{name: "negative", tail: `,"tokens":{"output":-1}}`, errorMsg: "tokens.output: token count -1 is negative"},
		{name: "fraction", tail: `,"tokens":{"output":1.5}}`, errorMsg: "tokens.output: want an integer, got 1.5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := DecodeMessage([]byte(head + c.tail))
			if c.errorMsg != "" {
				if err == nil || err.Error() != c.errorMsg {
					t.Fatalf("err = %v, want %q", err, c.errorMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			a := m.(*AssistantMessage)
			if !reflect.DeepEqual(a.Cost, c.cost) {
				t.Errorf("cost = %v, want %v", a.Cost, c.cost)
			}
			if (a.Tokens != nil) != c.tokens {
				t.Fatalf("tokens = %+v", a.Tokens)
			}
			if a.Tokens != nil && !reflect.DeepEqual(a.Tokens.Input, c.input) {
				t.Errorf("tokens.input = %v, want %v", a.Tokens.Input, c.input)
			}
			b, err := EncodeMessage(m)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != head+c.tail {
				t.Errorf("re-encoded %s\nwant        %s", b, head+c.tail)
			}
		})
	}
}

// partJSON builds a tool part around a state.
func toolJSON(state string) string {
	return `{"id":"p","sessionID":"s","messageID":"m","type":"tool","callID":"c","tool":"bash","state":` + state + `}`
}

const permBlock = `{"type":"permission","id":"per_1","permission":"bash","patterns":["ls"],"always":["ls *"],"metadata":{}}`

func TestDecodePartRefusals(t *testing.T) {
	cases := []struct {
		name   string
		in     string
		msg    string
		reason agent.DropReason
		is     error
	}{
		{"not json", `{"id":`, "not valid JSON", agent.DropUnparseableJSON, nil},
		{"array", `[1,2]`, "want an object, got an array", agent.DropNotAnObject, nil},
		{"string", `"x"`, "want an object, got a string", agent.DropNotAnObject, nil},
		{"missing id", `{"type":"text","sessionID":"s","messageID":"m","text":"x"}`, "id: missing", agent.DropMissingID, nil},
		{"empty sessionID", `{"id":"p","type":"text","sessionID":"","messageID":"m","text":"x"}`, "sessionID: empty", agent.DropMissingID, nil},
		{"missing messageID", `{"id":"p","type":"text","sessionID":"s","text":"x"}`, "messageID: missing", agent.DropMissingID, nil},
		{"id wrong type", `{"id":7,"type":"text","sessionID":"s","messageID":"m","text":"x"}`, "id: want a string, got a number", agent.DropInvalidField, nil},
		{"missing type", `{"id":"p","sessionID":"s","messageID":"m","text":"x"}`, "type: missing", agent.DropInvalidField, nil},
		{"null text", `{"id":"p","type":"text","sessionID":"s","messageID":"m","text":null}`, "text: want a string, got null", agent.DropInvalidField, nil},
		{"repeated member", `{"id":"p","type":"text","sessionID":"s","messageID":"m","text":"a","text":"b"}`, "text: member repeated", agent.DropInvalidField, nil},
		{"reasoning without time", `{"id":"p","type":"reasoning","sessionID":"s","messageID":"m","text":"a"}`, "time: missing", agent.DropInvalidField, nil},
		{"bad finish", `{"id":"p","type":"step-finish","sessionID":"s","messageID":"m","reason":"done"}`,
			`reason: unknown finish reason "done" (want stop, tool-calls, length, aborted or error)`, agent.DropInvalidField, nil},
		{"empty callID", toolJSON(`{"status":"pending","input":{},"raw":""}`)[:0] +
			`{"id":"p","sessionID":"s","messageID":"m","type":"tool","callID":"","tool":"bash","state":{"status":"pending","input":{},"raw":""}}`,
			"callID: empty", agent.DropMissingID, nil},
		{"unknown status", toolJSON(`{"status":"done","input":{}}`),
			`state.status: unknown tool status "done" (want pending, running, blocked, completed or error)`, agent.DropInvalidField, nil},
		{"input array", toolJSON(`{"status":"pending","input":[1,2],"raw":""}`),
			"state.input: tool input must be an object, got an array", agent.DropInvalidField, nil},
		{"input missing", toolJSON(`{"status":"pending","raw":""}`), "state.input: missing", agent.DropInvalidField, nil},
		{"pending with block", toolJSON(`{"status":"pending","input":{},"raw":"","block":` + permBlock + `}`),
			"state.block: a pending tool state has no block", agent.DropInvalidField, nil},
		{"running with output", toolJSON(`{"status":"running","input":{},"output":"x","time":{"start":1}}`),
			"state.output: a running tool state has no output", agent.DropInvalidField, nil},
		{"running with end", toolJSON(`{"status":"running","input":{},"time":{"start":1,"end":2}}`),
			"state.time.end: a running tool's time has no end", agent.DropInvalidField, nil},
		{"completed without output", toolJSON(`{"status":"completed","input":{},"title":"t","metadata":{},"time":{"start":1,"end":2}}`),
			"state.output: missing", agent.DropInvalidField, nil},
		{"completed without title", toolJSON(`{"status":"completed","input":{},"output":"o","metadata":{},"time":{"start":1,"end":2}}`),
			"state.title: missing", agent.DropInvalidField, nil},
		{"completed without metadata", toolJSON(`{"status":"completed","input":{},"output":"o","title":"t","time":{"start":1,"end":2}}`),
			"state.metadata: missing", agent.DropInvalidField, nil},
		{"completed without end", toolJSON(`{"status":"completed","input":{},"output":"o","title":"t","metadata":{},"time":{"start":1}}`),
			"state.time.end: missing", agent.DropInvalidField, nil},
		{"error without error", toolJSON(`{"status":"error","input":{},"time":{"start":1,"end":2}}`),
			"state.error: missing", agent.DropInvalidField, nil},
		{"blocked without block", toolJSON(`{"status":"blocked","input":{},"time":{"start":1}}`),
			"state: blocked tool needs an unresolved block", agent.DropInvalidField, nil},
		{"blocked with resolved block", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"metadata":{},"decision":"once","decidedAt":3}}`),
			"state: blocked tool needs an unresolved block", agent.DropInvalidField, nil},
		{"completed with unresolved block", toolJSON(`{"status":"completed","input":{},"output":"o","title":"t","metadata":{},"time":{"start":1,"end":2},"block":` + permBlock + `}`),
			"state.block: a completed tool cannot carry an unresolved block", agent.DropInvalidField, nil},
		{"completed with rejected block", toolJSON(`{"status":"completed","input":{},"output":"o","title":"t","metadata":{},"time":{"start":1,"end":2},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"metadata":{},"decision":"reject","decidedAt":3}}`),
			"state.block.decision: a completed tool cannot carry a rejected block", agent.DropInvalidField, nil},
		{"decision allow", toolJSON(`{"status":"error","input":{},"error":"e","time":{"start":1,"end":2},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"metadata":{},"decision":"allow","decidedAt":3}}`),
			`state.block.decision: unknown decision "allow" (want once, always or reject)`, agent.DropUnknownDecision, agent.ErrUnknownDecision},
		{"decision case", toolJSON(`{"status":"error","input":{},"error":"e","time":{"start":1,"end":2},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"metadata":{},"decision":"Once","decidedAt":3}}`),
			`state.block.decision: unknown decision "Once" (want once, always or reject)`, agent.DropUnknownDecision, agent.ErrUnknownDecision},
		{"resolved without decision", toolJSON(`{"status":"error","input":{},"error":"e","time":{"start":1,"end":2},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"metadata":{},"decidedAt":3}}`),
			"state.block.decision: missing", agent.DropInvalidField, nil},
		{"decision without decidedAt", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"always":[],"metadata":{},"decision":"once"}}`),
			"state.block.decision: an unresolved block (no decidedAt) has no decision", agent.DropInvalidField, nil},
		{"unresolved without always", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":` +
			`{"type":"permission","id":"per_1","permission":"bash","patterns":[],"metadata":{}}}`),
			"state.block.always: missing", agent.DropInvalidField, nil},
		{"block without id", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":` +
			`{"type":"permission","permission":"bash","patterns":[],"always":[],"metadata":{}}}`),
			"state.block.id: missing", agent.DropMissingID, nil},
		{"unknown block type", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":{"type":"vote","id":"b"}}`),
			`state.block.type: unknown block type "vote" (want permission or question)`, agent.DropInvalidField, nil},
		{"question with patterns", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":` +
			`{"type":"question","id":"q","patterns":[],"questions":[]}}`),
			"state.block.patterns: a question block has no patterns", agent.DropInvalidField, nil},
		{"question without questions", toolJSON(`{"status":"blocked","input":{},"time":{"start":1},"block":` +
			`{"type":"question","id":"q","questions":[]}}`),
			"state.block.questions: question block needs at least one question", agent.DropInvalidField, nil},
		{"answers mismatch", toolJSON(`{"status":"running","input":{},"time":{"start":1},"block":` +
			`{"type":"question","id":"q","questions":[{"question":"Q?","header":"h","options":[]}],"answers":[],"decidedAt":4}}`),
			"state.block.answers: 0 answers for 1 questions", agent.DropInvalidField, nil},
		{"question decided once", toolJSON(`{"status":"running","input":{},"time":{"start":1},"block":` +
			`{"type":"question","id":"q","questions":[{"question":"Q?","header":"h","options":[]}],"answers":[["a"]],"decision":"once","decidedAt":4}}`),
			`state.block.decision: a question is answered or rejected, not "once"`, agent.DropInvalidField, nil},
		{"answer not a list", toolJSON(`{"status":"running","input":{},"time":{"start":1},"block":` +
			`{"type":"question","id":"q","questions":[{"question":"Q?","header":"h","options":[]}],"answers":["a"],"decidedAt":4}}`),
			"state.block.answers[0]: want an array of labels, got a string", agent.DropInvalidField, nil},
		{"attachment not a file", toolJSON(`{"status":"completed","input":{},"output":"o","title":"t","metadata":{},"time":{"start":1,"end":2},` +
			`"attachments":[{"id":"a","sessionID":"s","messageID":"m","type":"text","text":"x"}]}`),
			`state.attachments[0].type: an attachment is a file part, not "text"`, agent.DropInvalidField, nil},
		{"time out of range", toolJSON(`{"status":"running","input":{},"time":{"start":99999999999999999999}}`),
			"state.time.start: integer 99999999999999999999 is out of range", agent.DropInvalidField, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := DecodePart([]byte(c.in))
			if err == nil {
				t.Fatalf("decoded %+v, want error %q", p, c.msg)
			}
			if err.Error() != c.msg {
				t.Fatalf("err = %q\nwant  %q", err, c.msg)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Reason != c.reason {
				t.Fatalf("reason = %v, want %s", fe, c.reason)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid")
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error does not wrap %v", c.is)
			}
		})
	}
}

func TestDecodeMessageRefusals(t *testing.T) {
	cases := []struct{ in, msg string }{
		{`{"id":"m","sessionID":"s","role":"system","time":{"created":1}}`, `role: unknown role "system" (want user or assistant)`},
		{`{"id":"m","sessionID":"s","time":{"created":1}}`, `role: missing`},
		{`{"id":"","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"}}`, `id: empty`},
		{`{"id":"m","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"}}`, `sessionID: missing`},
		{`{"id":"m","sessionID":"s","role":"user","time":{"created":"1"},"agent":"a","model":{"providerID":"p","modelID":"m"}}`, `time.created: want a number, got a string`},
		{`{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p"}}`, `model.modelID: missing`},
		{`{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"},"tools":{"bash":1}}`, `tools.bash: want a boolean`},
		{`{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"},"format":null}`, `format: null is not a value here; omit the member`},
		{`{"id":"m","sessionID":"s","role":"assistant","time":{"created":1},"parentID":"u","modelID":"x","providerID":"y","agent":"a","path":{"cwd":"/"}}`, `path.root: missing`},
	}
	for _, c := range cases {
		_, err := DecodeMessage([]byte(c.in))
		if err == nil || err.Error() != c.msg {
			t.Errorf("DecodeMessage(%s)\n err = %v\nwant %q", c.in, err, c.msg)
		}
	}
	var um UserMessage
	err := json.Unmarshal([]byte(`{"id":"m","sessionID":"s","role":"assistant","time":{"created":1},"parentID":"u","modelID":"x","providerID":"y","agent":"a","path":{"cwd":"/","root":"/"}}`), &um)
	if err == nil || !strings.Contains(err.Error(), `want a user message, got role "assistant"`) {
		t.Errorf("unmarshal assistant into UserMessage: %v", err)
	}
}

func TestErrorKindDegrades(t *testing.T) {
	in := `{"id":"m","sessionID":"s","role":"assistant","time":{"created":1},"parentID":"u","modelID":"x","providerID":"y","agent":"a",` +
		`"path":{"cwd":"/","root":"/"},"finish":"error","error":{"name":"APIError","data":{"message":"boom","kind":"quota_exceeded"}}}`
	m, err := DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if k := m.(*AssistantMessage).Error.Data.Kind; k != agent.ErrorInternal {
		t.Fatalf("kind = %q, want internal", k)
	}
}

func TestUnknownPartKeptAndCounted(t *testing.T) {
	in := `{"info":{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"build","model":{"providerID":"p","modelID":"x"}},` +
		`"parts":[{"id":"p1","sessionID":"s","messageID":"m","type":"text","text":"hi"},` +
		`{ "type" : "hologram", "id":"p2","sessionID":"s","messageID":"m","beam":{"z":1.0,"a":[true,null]},"text":"<x>"}]}`
	m, rep, err := DecodeMessageWithParts([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if rep.UnknownParts != 1 || len(m.Parts) != 2 {
		t.Fatalf("report %+v, parts %d", rep, len(m.Parts))
	}
	u, ok := m.Parts[1].(*UnknownPart)
	if !ok || u.Type != "hologram" || u.ID != "p2" || u.PartType() != "hologram" {
		t.Fatalf("part = %#v", m.Parts[1])
	}
	b := mustEncode(t, m)
	wantPart := `{"type":"hologram","id":"p2","sessionID":"s","messageID":"m","beam":{"z":1.0,"a":[true,null]},"text":"<x>"}`
	if !strings.HasSuffix(string(b), `,`+wantPart+`]}`) {
		t.Fatalf("unknown part not written back unchanged:\n%s", b)
	}
	m2, rep2, err := DecodeMessageWithParts(b)
	if err != nil || rep2.UnknownParts != 1 {
		t.Fatalf("second decode: %v %+v", err, rep2)
	}
	if b2 := mustEncode(t, m2); string(b2) != string(b) {
		t.Fatalf("not byte-stable:\n%s\n%s", b, b2)
	}
	// An unknown part still needs its ids.
	if _, err := DecodePart([]byte(`{"type":"hologram","id":"p2","sessionID":"s"}`)); err == nil || err.Error() != "messageID: missing" {
		t.Fatalf("unknown part without messageID: %v", err)
	}
}

func TestDecodeMessageWithPartsDropsBadParts(t *testing.T) {
	in := `{"info":{"id":"m","sessionID":"s","role":"assistant","time":{"created":1},"parentID":"u","modelID":"x","providerID":"y","agent":"a","path":{"cwd":"/","root":"/"}},` +
		`"parts":[` +
		`{"id":"p0","sessionID":"s","messageID":"m","type":"text","text":"kept"},` +
		`{"id":"p1","sessionID":"s","messageID":"m","type":"text","text":5},` +
		`{"id":"p2","sessionID":"s","messageID":"other","type":"text","text":"x"},` +
		toolJSON(`{"status":"blocked","input":{},"time":{"start":1}}`) + `,` +
		`{"id":"p0","sessionID":"s","messageID":"m","type":"text","text":"dup"},` +
		`[1],` +
		`{"id":"p5","sessionID":"s","messageID":"m","type":"agent","name":"also kept"}]}`
	in = strings.Replace(in, `"id":"p","sessionID":"s","messageID":"m","type":"tool"`, `"id":"p3","sessionID":"s","messageID":"m","type":"tool"`, 1)
	m, rep, err := DecodeMessageWithParts([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Parts) != 2 || m.Parts[0].Base().ID != "p0" || m.Parts[1].Base().ID != "p5" {
		t.Fatalf("kept parts = %v", m.Parts)
	}
	want := []struct {
		kind   string
		reason agent.DropReason
		detail string
	}{
		{"part:text", agent.DropInvalidField, "parts[1].text: want a string, got a number"},
		{"part:text", agent.DropInvalidField, `parts[2].messageID: part belongs to message "other", not "m"`},
		{"part:tool", agent.DropInvalidField, "parts[3].state: blocked tool needs an unresolved block"},
		{"part:text", agent.DropInvalidField, `parts[4].id: duplicate part id "p0"`},
		{"part", agent.DropNotAnObject, "parts[5]: want an object, got an array"},
	}
	if len(rep.Refused) != len(want) {
		t.Fatalf("refused = %+v", rep.Refused)
	}
	for i, w := range want {
		r := rep.Refused[i]
		if r.Source != DroppedSourceTranscript || r.Kind != w.kind || r.Reason != w.reason || r.Detail != w.detail || r.Raw == "" {
			t.Errorf("refused[%d] = %+v\nwant %+v", i, r, w)
		}
	}
	// The strict form refuses the whole message.
	var strict MessageWithParts
	if err := json.Unmarshal([]byte(in), &strict); err == nil || err.Error() != "parts[1].text: want a string, got a number" {
		t.Fatalf("strict unmarshal: %v", err)
	}
}

func TestIgnoredFieldsCounted(t *testing.T) {
	in := `{"id":"p","sessionID":"s","messageID":"m","type":"text","text":"x","future":1,"time":{"start":1,"later":2}}`
	var d decoder
	if _, err := decodeRoot(&d, []byte(in), d.part); err != nil {
		t.Fatal(err)
	}
	if d.report.IgnoredFields != 2 || !reflect.DeepEqual(d.report.IgnoredPaths, []string{"time.later", "future"}) {
		t.Fatalf("report = %+v", d.report)
	}
}

func TestEncodeRefusesWhatDecodeRefuses(t *testing.T) {
	base := PartBase{ID: "p", SessionID: "s", MessageID: "m"}
	cases := []struct {
		name string
		p    Part
		msg  string
	}{
		{"empty id", &TextPart{PartBase: PartBase{SessionID: "s", MessageID: "m"}}, "id: part id is empty"},
		{"blocked without block", &ToolPart{PartBase: base, CallID: "c", Tool: "t", State: ToolState{Status: StatusBlocked}},
			"state.block: blocked tool needs an unresolved block"},
		{"pending with title", &ToolPart{PartBase: base, CallID: "c", Tool: "t", State: ToolState{Status: StatusPending, Title: "x"}},
			"state.title: a pending tool state has no title"},
		{"no status", &ToolPart{PartBase: base, CallID: "c", Tool: "t"},
			`state.status: unknown tool status "" (want pending, running, blocked, completed or error)`},
		{"bad decision", &ToolPart{PartBase: base, CallID: "c", Tool: "t", State: ToolState{Status: StatusError, Error: "e",
			Block: &Block{Type: BlockPermission, ID: "b", Permission: "bash", Decision: "allow", DecidedAt: ptr[int64](1)}}},
			`state.block.decision: unknown decision "allow" (want once, always or reject)`},
		{"NaN in metadata", &TextPart{PartBase: base, Metadata: agent.Object{"x": nanValue()}}, "metadata: x: cannot encode NaN as JSON"},
		{"bad number", &TextPart{PartBase: base, Metadata: agent.Object{"x": json.Number("1.")}}, `metadata: x: invalid number literal "1."`},
		{"unknown without raw", &UnknownPart{PartBase: base, Type: "x"}, `unknown part "x" has no raw JSON to write back`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := EncodePart(c.p)
			if err == nil || err.Error() != c.msg {
				t.Fatalf("err = %v\nwant  %q", err, c.msg)
			}
			if !errors.Is(err, ErrInvalid) && c.name != "NaN in metadata" && c.name != "bad number" {
				t.Errorf("does not wrap ErrInvalid")
			}
		})
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestEncodeForeignValuesInObjects(t *testing.T) {
	type item struct {
		B string `json:"b"`
		A int    `json:"a"`
	}
	o := agent.Object{"s": item{B: "<x>", A: 1}, "m": map[string]string{"z": "1", "a": "2"}, "n": nil,
		"f": 0.0000001, "i": 3, "r": json.RawMessage(` {"y": 1, "x": [ 2 ]} `), "p": (*item)(nil)}
	b, err := EncodeObject(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"f":1e-7,"i":3,"m":{"a":"2","z":"1"},"n":null,"p":null,"r":{"x":[2],"y":1},"s":{"a":1,"b":"<x>"}}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	back, err := DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := EncodeObject(back)
	if err != nil || string(b2) != want {
		t.Fatalf("re-encode: %s %v", b2, err)
	}
	if _, err := DecodeObject([]byte(`[1,2]`)); err == nil || err.Error() != "want an object, got an array" {
		t.Fatalf("array: %v", err)
	}
}

func TestInvalidUTF8IsReplaced(t *testing.T) {
	p := &TextPart{PartBase: PartBase{ID: "p", SessionID: "s", MessageID: "m"}, Text: "a\xffb\x00"}
	b, err := EncodePart(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"text":"a\ufffdb\u0000"`) {
		t.Fatalf("got %s", b)
	}
}

func TestTranscriptArraysNeverNull(t *testing.T) {
	b, err := EncodeTranscript(Transcript{Session: Session{ID: "ses_1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"session":{"id":"ses_1","projectID":"","directory":"","title":"","time":{"created":0,"updated":0}},` +
		`"messages":[],"children":[],"todos":[],"dropped":[]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	tr, rep, err := DecodeTranscript(b)
	if err != nil || tr.Messages == nil || tr.Children == nil || tr.Todos == nil || tr.Dropped == nil || rep.IgnoredFields != 0 {
		t.Fatalf("decode: %+v %+v %v", tr, rep, err)
	}
	if _, _, err := DecodeTranscript([]byte(`{"session":{"id":"s","projectID":"","directory":"","title":"","time":{"created":0,"updated":0}},"messages":[],"children":[],"todos":null,"dropped":[]}`)); err == nil || err.Error() != "todos: want an array, got null" {
		t.Fatalf("null todos: %v", err)
	}
}

func TestDecodeTranscriptDropsBadMessages(t *testing.T) {
	user := func(id, sid string) string {
		return `{"info":{"id":"` + id + `","sessionID":"` + sid + `","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"}},"parts":[` +
			`{"id":"p_` + id + `","sessionID":"` + sid + `","messageID":"` + id + `","type":"text","text":"hi"}]}`
	}
	session := `{"id":"ses_1","projectID":"prj","directory":"/d","title":"t","time":{"created":1,"updated":2}}`
	child := `{"session":{"id":"ses_2","projectID":"prj","directory":"/d","parentID":"ses_1","title":"c","time":{"created":1,"updated":2}},` +
		`"messages":[` + user("m9", "ses_2") + `,` + strings.Replace(user("m8", "ses_2"), `"text":"hi"`, `"text":false`, 1) + `],"children":[],"todos":[],"dropped":[]}`
	in := `{"session":` + session + `,"messages":[` +
		user("m1", "ses_1") + `,` +
		user("m2", "ses_other") + `,` +
		user("m1", "ses_1") + `,` +
		`{"info":{"id":"m3","sessionID":"ses_1","role":"robot"},"parts":[]},` +
		user("m4", "ses_1") +
		`],"children":[` + child + `],"todos":[{"content":"x","status":"pending","priority":"high"}],` +
		`"dropped":[{"source":"claude-jsonl","line":7,"reason":"unparseable_json","raw":"{"}]}`
	tr, rep, err := DecodeTranscript([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range tr.Messages {
		ids = append(ids, m.Info.MessageID())
	}
	if !reflect.DeepEqual(ids, []string{"m1", "m4"}) {
		t.Fatalf("kept messages = %v", ids)
	}
	details := func(ds []agent.Dropped) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Kind+" "+string(d.Reason)+" "+d.Detail)
		}
		return out
	}
	wantRoot := []string{
		" unparseable_json ", // the record that was already there
		`message invalid_field messages[1].info.sessionID: message belongs to session "ses_other", not "ses_1"`,
		`message invalid_field messages[2].info.id: duplicate message id "m1"`,
		`message unknown_type messages[3].info.role: unknown role "robot" (want user or assistant)`,
	}
	if got := details(tr.Dropped); !reflect.DeepEqual(got, wantRoot) {
		t.Fatalf("root dropped:\n%q\nwant\n%q", got, wantRoot)
	}
	wantChild := []string{"part:text invalid_field children[0].messages[1].parts[0].text: want a string, got a boolean"}
	if got := details(tr.Children[0].Dropped); !reflect.DeepEqual(got, wantChild) {
		t.Fatalf("child dropped:\n%q\nwant\n%q", got, wantChild)
	}
	if len(rep.Refused) != 4 {
		t.Fatalf("report refused %d, want 4", len(rep.Refused))
	}
	// Re-encoding keeps the refusals and is then stable.
	b, err := EncodeTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	tr2, rep2, err := DecodeTranscript(b)
	if err != nil || len(rep2.Refused) != 0 {
		t.Fatalf("second decode: %v %+v", err, rep2)
	}
	b2, err := EncodeTranscript(tr2)
	if err != nil || string(b2) != string(b) {
		t.Fatalf("not stable: %v\n%s\n%s", err, b, b2)
	}

	// A child whose parentID is wrong, or a todo with an unknown status,
	// fails the whole document.
	bad := strings.Replace(in, `"parentID":"ses_1"`, `"parentID":"ses_x"`, 1)
	if _, _, err := DecodeTranscript([]byte(bad)); err == nil ||
		err.Error() != `children[0].session.parentID: child session's parentID "ses_x" is not the parent session id "ses_1"` {
		t.Fatalf("bad parent: %v", err)
	}
	bad = strings.Replace(in, `"status":"pending"`, `"status":"done"`, 1)
	if _, _, err := DecodeTranscript([]byte(bad)); err == nil || !errors.Is(err, agent.ErrUnknownTodoStatus) ||
		err.Error() != `todos[0].status: unknown todo status "done" (want pending, in_progress, completed or cancelled)` {
		t.Fatalf("bad todo: %v", err)
	}
}

func TestUnknownPartRawIsCheckedOnTheWayOut(t *testing.T) {
	base := PartBase{ID: "p", SessionID: "s", MessageID: "m"}
	cases := []struct {
		raw, want, err string
	}{
		{`{ "type": "x", "id": "p" }`, `{"type":"x","id":"p"}`, ""},
		{`{"type":`, "", `unknown part "x": raw JSON: unexpected end of JSON input`},
		{`[1]`, "", `unknown part "x": raw JSON is not an object`},
	}
	for _, c := range cases {
		b, err := EncodePart(&UnknownPart{PartBase: base, Type: "x", Raw: json.RawMessage(c.raw)})
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: err = %v, want %q", c.raw, err, c.err)
			}
			continue
		}
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %s, %v", c.raw, b, err)
		}
	}
}
