package mapper

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper/schema"
)

func newValidator(t testing.TB) *schema.Validator {
	t.Helper()
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// variantsTranscript is a transcript with every part type, every tool
// state and block form, an unknown part, a child session, todos and
// dropped records. testdata/model/variants.json is its encoding.
func variantsTranscript() Transcript {
	const sid = "ses_var"
	received, handed, started := int64(990), int64(1000), int64(1010)
	user := &UserMessage{ID: "msg_u", SessionID: sid, Time: UserTime{Created: 1000, Received: &received, Handed: &handed, Started: &started}, Agent: "build",
		Model:  ModelRef{ProviderID: "openai", ModelID: "gpt-5"},
		Format: json.RawMessage(`{"type":"json_schema","schema":{"type":"object"}}`), System: "You are terse.",
		Tools: map[string]bool{"bash": true, "webfetch": false}, Variant: "high",
		Summary: &UserSummary{Title: "Fix tests", Diffs: []agent.FileDiff{{File: "a.go", Before: "x", After: "y", Additions: 1, Deletions: 1, Status: "modified"}}}}
	userPart := &TextPart{PartBase: PartBase{ID: "prt_u0", SessionID: sid, MessageID: "msg_u"}, Text: "Fix the tests.", Ignored: true}

	sample := sampleAssistant() // every known part type
	a := *sample.Info.(*AssistantMessage)
	a.SessionID, a.ParentID = sid, "msg_u"
	var parts []Part
	for _, p := range sample.Parts {
		b := p.Base()
		b.SessionID = sid
		parts = append(parts, p)
	}
	parts = append(parts, &UnknownPart{PartBase: PartBase{ID: "prt_unk", SessionID: sid, MessageID: a.ID}, Type: "hologram",
		Raw: json.RawMessage(`{"id":"prt_unk","sessionID":"ses_var","messageID":"msg_02def","type":"hologram","beam":[1.0,2e3]}`)})

	tool := func(id string, st ToolState) Part {
		return &ToolPart{PartBase: PartBase{ID: id, SessionID: sid, MessageID: "msg_t"}, CallID: "call_" + id, Tool: "bash",
			State: st, Metadata: agent.Object{"provider": "codex"}}
	}
	in := agent.Object{"command": "go test ./...", "timeout": json.Number("120")}
	perm := Block{Type: BlockPermission, ID: "per_v", Permission: "bash", Patterns: []string{"go test ./..."},
		Always: []string{"go test *"}, Metadata: agent.Object{"cwd": "/src"}}
	pending := PendingState(agent.Object{}, `{"command":"go te`)
	running, _ := PendingState(in, "").Run(2000)
	running.Title, running.Metadata = "go test", agent.Object{"progress": json.Number("0.5")}
	blocked, _ := running.Ask(perm)
	always, _ := blocked.Decide(agent.DecisionAlways, 2100, "")
	completed, _ := always.Complete("ok", "go test", agent.Object{"exit": json.Number("0")}, 2200)
	completed.Attachments = []FilePart{{PartBase: PartBase{ID: "prt_att", SessionID: sid, MessageID: "msg_t"},
		Mime: "text/plain", Filename: "out.txt", URL: "data:text/plain;base64,b2s="}}
	qblocked, _ := running.Ask(questionRequest())
	qrejected, _ := qblocked.Settle(agent.ReasonTimeout, 2300)
	rejected, _ := blocked.Decide(agent.DecisionReject, 2400, "")
	settled, _ := pending.Settle(agent.ReasonAgentExited, 2500)
	failed, _ := running.Fail("exit status 1", nil, 2600)
	byRule, _ := blocked.DecideByRule(agent.DecisionOnce, 2610, PermissionRule{Permission: "bash", Pattern: "go test *", Action: ActionAllow})
	ruleDone, _ := byRule.Complete("ok", "go test", nil, 2620)
	ruleDenied, _ := blocked.DecideByRule(agent.DecisionReject, 2630, PermissionRule{Permission: "bash", Pattern: "go *", Action: ActionDeny})
	errMsg := &AssistantMessage{ID: "msg_t", SessionID: sid, Time: AssistantTime{Created: 1900, Completed: ptr[int64](2700)},
		ParentID: "msg_u", ModelID: "gpt-5", ProviderID: "openai", Agent: "build", Path: MessagePath{Cwd: "/src", Root: "/src"},
		Finish: agent.FinishError, Error: &agent.MessageError{Name: agent.ErrNameAPI, Data: agent.ErrorData{Message: "stream broke", Kind: agent.ErrorTransport,
			ProviderID: "openai", StatusCode: ptr(502), IsRetryable: ptr(false), ResponseBody: "<html>bad gateway</html>"}},
		Summary: ptr(false), Variant: "high"}
	toolParts := []Part{
		tool("t1", pending), tool("t2", running), tool("t3", blocked), tool("t4", always), tool("t5", completed),
		tool("t6", qblocked), tool("t7", qrejected), tool("t8", rejected), tool("t9", settled), tool("t10", failed),
		tool("t11", ruleDone), tool("t12", ruleDenied),
	}

	child := Transcript{
		Session: Session{ID: "ses_var_child", ProjectID: "prj", Directory: "/src", ParentID: sid, Title: "child",
			Time: SessionTime{Created: 2000, Updated: 2100}},
	}
	return Transcript{
		Session: Session{ID: sid, ProjectID: "prj", Directory: "/src", Title: "variants",
			Time:       SessionTime{Created: 1000, Updated: 2700, Compacting: ptr[int64](2650)},
			Permission: []PermissionRule{{Permission: "*", Pattern: "*", Action: ActionAsk}, {Permission: "read", Pattern: "src/**", Action: ActionAllow}},
			Summary:    &SessionSummary{Additions: 3, Deletions: 1, Files: 2, Diffs: []agent.FileDiff{{File: "b.go", Before: "", After: "package b\n", Additions: 1, Status: "added"}}}},
		Messages: []MessageWithParts{
			{Info: user, Parts: []Part{userPart}},
			{Info: &a, Parts: parts},
			{Info: errMsg, Parts: toolParts},
		},
		Children: []Transcript{child},
		Todos:    []agent.Todo{{Content: "make it pass", Status: agent.TodoCancelled, Priority: agent.PriorityMedium}},
		Dropped: []agent.Dropped{
			{Source: "codex-rpc", Line: 12, Kind: "item/weird", Reason: agent.DropUnknownType, Detail: "unknown item type", Raw: `{"type":"item/weird"}`},
			{Source: "claude-jsonl", Reason: agent.DropUnparseableJSON},
		},
	}
}

// TestGoldenTranscripts checks every testdata/model/*.json document: it
// validates against the schema, decodes without refusals, unknown members
// or loss, and re-encodes to the same bytes. The three seed examples were
// written by hand; variants.json is the encoding of variantsTranscript.
// With -update, each file is rewritten in canonical form.
func TestGoldenTranscripts(t *testing.T) {
	v := newValidator(t)
	// variants.json is exactly the encoding of the Go fixture (checked, or
	// written first with -update).
	b, err := EncodeTranscript(variantsTranscript())
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "model", "variants.json"), golden.Indent(t, b))
	files, err := filepath.Glob(filepath.Join("testdata", "model", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("golden files = %v", files)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Transcript(data); err != nil {
				t.Fatalf("schema: %v", err)
			}
			tr, rep, err := DecodeTranscript(data)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(rep.Refused) != 0 || rep.IgnoredFields != 0 {
				t.Fatalf("decode report: %+v", rep)
			}
			out, err := EncodeTranscript(tr)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			// The file is in canonical form (rewritten so with -update).
			golden.Check(t, f, golden.Indent(t, out))
		})
	}
}

func loadGolden(t *testing.T, name string) (Transcript, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "model", name))
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := DecodeTranscript(data)
	if err != nil {
		t.Fatal(err)
	}
	return tr, data
}

func TestGoldenSeedExamples(t *testing.T) {
	ex, _ := loadGolden(t, "exchange.json")
	if len(ex.Messages) != 3 {
		t.Fatalf("exchange: %d messages", len(ex.Messages))
	}
	if u, ok := ex.Messages[0].Info.(*UserMessage); !ok || u.Model.ModelID != "claude-sonnet-4-6" ||
		ex.Messages[0].Parts[0].(*TextPart).Text != "Create hello.txt with 'hello world'." {
		t.Errorf("exchange user message = %+v", ex.Messages[0])
	}
	a := ex.Messages[1].Info.(*AssistantMessage)
	if a.ParentID != "msg_01abc" || *a.Cost != 0.0087 || *a.Tokens.Cache.Read != 3800 || a.Finish != agent.FinishToolCalls || *a.Time.Completed != 1753120004000 {
		t.Errorf("exchange assistant = %+v", a)
	}
	tool := ex.Messages[1].Parts[2].(*ToolPart)
	b := tool.State.Block
	if tool.CallID != "call_abc123" || tool.State.Status != StatusCompleted || tool.State.Output != "Created hello.txt (12 bytes)" ||
		b.Type != BlockPermission || b.ID != "per_001" || b.Decision != agent.DecisionOnce || *b.DecidedAt != 1753120002500 ||
		!reflect.DeepEqual(b.Patterns, []string{"hello.txt"}) || b.Always != nil {
		t.Errorf("exchange tool = %+v, block %+v", tool, b)
	}
	files := b.Metadata["files"].([]any)[0].(map[string]any)
	if files["additions"] != json.Number("1") || files["after"] != "hello world\n" {
		t.Errorf("block metadata = %v", b.Metadata)
	}
	if got := Evaluate(ex.Session.Permission, "edit", b.Patterns); got != ActionAsk {
		t.Errorf("session rule on the edit = %s, want ask", got)
	}

	q, _ := loadGolden(t, "question.json")
	qt := q.Messages[1].Parts[1].(*ToolPart)
	qb := qt.State.Block
	if qt.Tool != "question" || qb.Type != BlockQuestion || qb.ID != "q_001" || qb.Questions[0].Header != "DB choice" ||
		!reflect.DeepEqual(qb.Answers, [][]string{{"PostgreSQL"}}) || qb.Decision != "" || qt.State.Output != "User answered: Which database? = PostgreSQL" {
		t.Errorf("question tool = %+v, block %+v", qt, qb)
	}

	s, _ := loadGolden(t, "subagent.json")
	task := s.Messages[1].Parts[0].(*ToolPart)
	if len(s.Children) != 1 {
		t.Fatalf("subagent: %d children", len(s.Children))
	}
	c := s.Children[0]
	if c.Session.ID != task.State.Metadata["sessionId"] || c.Session.ParentID != s.Session.ID || c.Session.Title != "Find all API endpoints (@explore)" {
		t.Errorf("child session = %+v, task metadata %v", c.Session, task.State.Metadata)
	}
	if got := Evaluate(c.Session.Permission, "edit", []string{"src/api/server.ts"}); got != ActionDeny {
		t.Errorf("child edit = %s, want deny", got)
	}
	if got := Evaluate(c.Session.Permission, "read", []string{"src/api/server.ts"}); got != ActionAsk {
		t.Errorf("child read = %s, want ask", got)
	}
	if len(c.Messages) != 2 || c.Messages[1].Info.(*AssistantMessage).Agent != "explore" {
		t.Errorf("child messages = %+v", c.Messages)
	}
	if len(s.Todos) != 3 || s.Todos[1] != (agent.Todo{Content: "Document each endpoint", Status: agent.TodoInProgress, Priority: agent.PriorityMedium}) {
		t.Errorf("todos = %+v", s.Todos)
	}
}

// TestSchemaAndDecoderAgree mutates the golden exchange into documents both
// the schema and the decoder must refuse (the decoder by an error or by a
// refused record).
func TestSchemaAndDecoderAgree(t *testing.T) {
	v := newValidator(t)
	_, golden := loadGolden(t, "exchange.json")
	cases := []struct{ name, old, new string }{
		{"unknown decision", `"decision": "once"`, `"decision": "allow"`},
		{"decision with case", `"decision": "once"`, `"decision": "Once"`},
		{"resolved without decidedAt", `"decidedAt": 1753120002500`, `"reason": "x"`},
		{"completed without output", `"output": "Created hello.txt (12 bytes)",`, ``},
		{"blocked with a resolved block", `"status": "completed"`, `"status": "blocked"`},
		{"tool input array", `"input": {`, `"input": [1], "x": {`},
		{"unknown role", `"role": "user"`, `"role": "system"`},
		{"empty part id", `"id": "prt_001"`, `"id": ""`},
		{"null cost", `"cost": 0.0087,`, `"cost": null,`},
		{"fractional time", `"decidedAt": 1753120002500`, `"decidedAt": 1753120002500.5`},
		{"null todos", `"todos": []`, `"todos": null`},
		{"missing dropped", `,
  "dropped": []`, ``},
		{"negative tokens", `"output": 340`, `"output": -340`},
		{"unknown finish", `"finish": "stop"`, `"finish": "done"`},
		{"unknown todo status", `"todos": []`, `"todos": [{"content": "x", "status": "done", "priority": "low"}]`},
		{"unknown action", `"action": "ask"`, `"action": "maybe"`},
		{"missing session id", `"id": "ses_01xyz",`, ``},
		{"rule without reason rule", `"decidedAt": 1753120002500`, `"decidedAt": 1753120002500, "rule": {"permission": "edit", "pattern": "*", "action": "allow"}`},
		{"allow rule rejects", `"decision": "once",
              "decidedAt": 1753120002500`, `"decision": "reject", "decidedAt": 1753120002500, "reason": "rule", "rule": {"permission": "edit", "pattern": "*", "action": "allow"}`},
		{"deny rule allows", `"decidedAt": 1753120002500`, `"decidedAt": 1753120002500, "reason": "rule", "rule": {"permission": "edit", "pattern": "*", "action": "deny"}`},
		{"ask rule decides", `"decidedAt": 1753120002500`, `"decidedAt": 1753120002500, "reason": "rule", "rule": {"permission": "edit", "pattern": "*", "action": "ask"}`},
		{"rule without pattern", `"decidedAt": 1753120002500`, `"decidedAt": 1753120002500, "reason": "rule", "rule": {"permission": "edit", "action": "allow"}`},
		{"rule without permission", `"decidedAt": 1753120002500`, `"decidedAt": 1753120002500, "reason": "rule", "rule": {"permission": "", "pattern": "*", "action": "allow"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !bytes.Contains(golden, []byte(c.old)) {
				t.Fatalf("golden lacks %q", c.old)
			}
			doc := bytes.Replace(golden, []byte(c.old), []byte(c.new), 1)
			err := v.Transcript(doc)
			if !errors.Is(err, schema.ErrMismatch) {
				t.Errorf("schema accepted it (err %v)", err)
			}
			_, rep, err := DecodeTranscript(doc)
			if err == nil && len(rep.Refused) == 0 {
				t.Errorf("decoder accepted it")
			}
		})
	}
	if err := v.Transcript([]byte(`{"session":`)); !errors.Is(err, schema.ErrNotJSON) {
		t.Errorf("truncated document: %v", err)
	}
	// The one message of the exchange validates on its own too.
	m := bytes.Index(golden, []byte(`"info"`))
	if m < 0 {
		t.Fatal("no message in golden")
	}
	tr, _, _ := DecodeTranscript(golden)
	mb, err := EncodeMessageWithParts(tr.Messages[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := v.MessageWithParts(mb); err != nil {
		t.Errorf("message: %v", err)
	}
	if err := v.MessageWithParts([]byte(strings.Replace(string(mb), `"role":"assistant"`, `"role":"robot"`, 1))); !errors.Is(err, schema.ErrMismatch) {
		t.Errorf("robot message accepted: %v", err)
	}
}
