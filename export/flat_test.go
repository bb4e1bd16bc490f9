package export

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
)

func i64(v int64) *int64 { return &v }

// exchange is seed 001's full exchange example plus a child session and a
// question, built as Go values, with the canonical tool names and inputs
// (the seed's example says writeFile and subagent_type).
func exchange() mapper.Transcript {
	const ses = "ses_01xyz"
	user := &mapper.UserMessage{ID: "msg_01abc", SessionID: ses, Role: mapper.RoleUser, Time: mapper.UserTime{Created: 1753120000000},
		Agent: "build", Model: mapper.ModelRef{ProviderID: "anthropic", ModelID: "claude-sonnet-4-6"}}
	asst := func(id string, created, completed int64, finish string) *mapper.AssistantMessage {
		return &mapper.AssistantMessage{ID: id, SessionID: ses, Role: mapper.RoleAssistant,
			Time: mapper.AssistantTime{Created: created, Completed: i64(completed)}, ParentID: "msg_01abc",
			ModelID: "claude-sonnet-4-6", ProviderID: "anthropic", Agent: "build",
			Path: mapper.MessagePath{Cwd: "/home/user/app", Root: "/home/user/app"}, Finish: finish}
	}
	base := func(id, msg string) mapper.PartBase { return mapper.PartBase{ID: id, SessionID: ses, MessageID: msg} }
	child := mapper.Transcript{
		Session: mapper.Session{ID: "ses_child_001", ParentID: ses, Title: "Find all API endpoints (@explore)", Directory: "/home/user/app"},
		Messages: []mapper.MessageWithParts{
			{Info: &mapper.UserMessage{ID: "msg_c1", SessionID: "ses_child_001", Role: mapper.RoleUser, Time: mapper.UserTime{Created: 1753120005100}},
				Parts: []mapper.Part{&mapper.TextPart{PartBase: mapper.PartBase{ID: "prt_c1", SessionID: "ses_child_001", MessageID: "msg_c1"}, Text: "Find API endpoints"}}},
			{Info: &mapper.AssistantMessage{ID: "msg_c2", SessionID: "ses_child_001", Role: mapper.RoleAssistant, Time: mapper.AssistantTime{Created: 1753120005200, Completed: i64(1753120011000)}, Finish: "stop"},
				Parts: []mapper.Part{
					&mapper.ToolPart{PartBase: mapper.PartBase{ID: "prt_c2", SessionID: "ses_child_001", MessageID: "msg_c2"}, CallID: "call_grep", Tool: "grep",
						State: mapper.ToolState{Status: mapper.StatusCompleted, Input: agent.Object{"pattern": "router"}, Output: "src/api/server.ts", Title: "grep router", Metadata: agent.Object{}, Time: mapper.ToolTime{Start: 1753120005300, End: 1753120005400}}},
					&mapper.TextPart{PartBase: mapper.PartBase{ID: "prt_c3", SessionID: "ses_child_001", MessageID: "msg_c2"}, Text: "Found one endpoint file."},
				}},
		},
	}
	return mapper.Transcript{
		Session: mapper.Session{ID: ses, ProjectID: "prj", Directory: "/home/user/app", Title: "hello"},
		Messages: []mapper.MessageWithParts{
			{Info: user, Parts: []mapper.Part{&mapper.TextPart{PartBase: base("prt_001", "msg_01abc"), Text: "Create hello.txt with 'hello world'."}}},
			{Info: asst("msg_02def", 1753120001000, 1753120004000, "tool-calls"), Parts: []mapper.Part{
				&mapper.StepStartPart{PartBase: base("prt_010", "msg_02def"), Snapshot: "a1b2c3d4"},
				&mapper.ReasoningPart{PartBase: base("prt_011", "msg_02def"), Text: "I'll create the file using writeFile...", Time: mapper.PartTime{Start: 1753120001100, End: i64(1753120001400)}},
				&mapper.ToolPart{PartBase: base("prt_012", "msg_02def"), CallID: "call_abc123", Tool: "write", State: mapper.ToolState{
					Status: mapper.StatusCompleted, Input: agent.Object{"path": "hello.txt", "content": "hello world\n"},
					Output: "Created hello.txt (12 bytes)", Title: "write hello.txt", Metadata: agent.Object{},
					Time: mapper.ToolTime{Start: 1753120001500, End: 1753120003800},
					Block: &mapper.Block{Type: mapper.BlockPermission, ID: "per_001", Permission: "write", Patterns: []string{"hello.txt"},
						Decision: agent.DecisionOnce, DecidedAt: i64(1753120002500)}}},
				&mapper.ToolPart{PartBase: base("prt_014", "msg_02def"), CallID: "call_q", Tool: "question", State: mapper.ToolState{
					Status: mapper.StatusCompleted, Input: agent.Object{}, Output: "User answered: Which database? = PostgreSQL", Title: "question", Metadata: agent.Object{},
					Time: mapper.ToolTime{Start: 1753120003900, End: 1753120003990},
					Block: &mapper.Block{Type: mapper.BlockQuestion, ID: "q_001", Questions: []agent.QuestionInfo{{Question: "Which database?", Header: "DB choice"}},
						Answers: [][]string{{"PostgreSQL"}}, DecidedAt: i64(1753120003950)}}},
				&mapper.StepFinishPart{PartBase: base("prt_013", "msg_02def"), Reason: "tool-calls"},
			}},
			{Info: asst("msg_03ghi", 1753120004100, 1753120012000, "stop"), Parts: []mapper.Part{
				&mapper.ToolPart{PartBase: base("prt_030", "msg_03ghi"), CallID: "call_task_001", Tool: "task", State: mapper.ToolState{
					Status: mapper.StatusCompleted, Input: agent.Object{"description": "Find API endpoints", "agent": "explore"},
					Output: "task_id: ses_child_001", Title: "task → explore", Metadata: agent.Object{"sessionId": "ses_child_001"},
					Time: mapper.ToolTime{Start: 1753120005000, End: 1753120011500}}},
				&mapper.ToolPart{PartBase: base("prt_031", "msg_03ghi"), CallID: "call_rm", Tool: "bash", State: mapper.ToolState{
					Status: mapper.StatusError, Input: agent.Object{"command": "rm -rf /"}, Error: "rejected by user",
					Time:  mapper.ToolTime{Start: 1753120011600, End: 1753120011700},
					Block: &mapper.Block{Type: mapper.BlockPermission, ID: "per_002", Permission: "bash", Patterns: []string{"rm -rf /"}, Decision: agent.DecisionReject, DecidedAt: i64(1753120011650)}}},
				&mapper.TextPart{PartBase: base("prt_021", "msg_03ghi"), Text: "Done. Created `hello.txt` with \"hello world\"."},
			}},
		},
		Children: []mapper.Transcript{child},
	}
}

func TestFlatGolden(t *testing.T) {
	got := Flat(exchange())
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, ev := range got {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	golden.Check(t, filepath.Join("testdata", "exchange.flat.jsonl"), buf.Bytes())
}

func TestFlatOrderAndPairs(t *testing.T) {
	evs := Flat(exchange())
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	// One turn: starts after the prompt, ends once; every tool-call-start has one tool-call-end.
	if types[0] != TypeText || types[1] != TypeTurnStart || types[len(types)-1] != TypeTurnEnd {
		t.Fatalf("order %v", types)
	}
	starts, ends := map[string]int{}, map[string]int{}
	for _, e := range evs {
		switch e.Type {
		case TypeToolCallStart:
			starts[e.CallID]++
		case TypeToolCallEnd:
			ends[e.CallID]++
		}
	}
	for id, n := range starts {
		if n != 1 || ends[id] != 1 {
			t.Errorf("call %s: %d starts, %d ends", id, n, ends[id])
		}
	}
	// Child events carry parentId/agentId; the task's end follows them.
	var sawChild bool
	for _, e := range evs {
		if e.AgentID == "ses_child_001" {
			sawChild = true
			if e.ParentID != "call_task_001" || e.Turn != "msg_01abc" {
				t.Errorf("child event %+v", e)
			}
		}
	}
	if !sawChild {
		t.Fatal("no child events")
	}
	last := evs[len(evs)-1]
	if last.Status != "completed" || last.Time != 1753120012000 {
		t.Fatalf("turn-end %+v", last)
	}
}

func TestFlatOpenTurnHasNoEnd(t *testing.T) {
	tr := exchange()
	tr.Messages[2].Info.(*mapper.AssistantMessage).Time.Completed = nil
	evs := Flat(tr)
	if evs[len(evs)-1].Type == TypeTurnEnd {
		t.Fatal("turn-end for an unfinished turn")
	}
}

func TestFlatAbortedTurnIsCancelled(t *testing.T) {
	tr := exchange()
	tr.Messages[2].Info.(*mapper.AssistantMessage).Finish = agent.FinishAborted
	evs := Flat(tr)
	if last := evs[len(evs)-1]; last.Type != TypeTurnEnd || last.Status != "cancelled" {
		t.Fatalf("last %+v", last)
	}
}

func TestTextGolden(t *testing.T) {
	tr := exchange()
	tr.Todos = []agent.Todo{{Content: "write the spec", Status: agent.TodoCompleted, Priority: agent.PriorityHigh}, {Content: "run the tests", Status: agent.TodoPending, Priority: agent.PriorityLow}}
	tr.Dropped = []agent.Dropped{{Source: "claude-jsonl", Line: 12, Kind: "mystery", Reason: agent.DropUnknownType, Detail: "record type not known"},
		{Source: agent.SourceControl, Kind: "prompt", Reason: agent.DropReplayed, Detail: "id 0123 was used before"}}
	var buf bytes.Buffer
	if err := Text(&buf, tr, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "exchange.txt"), buf.Bytes())
}

// A decision a rule made reads as such, with the rule; a person's does not.
func TestTextRuleDecisions(t *testing.T) {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-rules", Directory: "/w"})
	in := json.RawMessage(`{"command":"echo hi"}`)
	for _, ev := range []agent.Event{
		&agent.UserPrompt{PromptID: "p", Text: "Say hi, then clean up."},
		&agent.TurnStarted{TurnID: "t"},
		&agent.ToolCall{Message: "m", CallID: "c1", Tool: "bash", Input: in},
		&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"echo hi"}}},
		&agent.ToolResolved{CallID: "c1", Decision: agent.DecisionOnce, Reason: agent.ReasonRule, Rule: &agent.MatchedRule{Permission: "bash", Pattern: "echo hi*", Action: "allow"}},
		&agent.ToolCompleted{CallID: "c1", Output: "hi"},
		&agent.ToolCall{Message: "m", CallID: "c2", Tool: "bash", Input: json.RawMessage(`{"command":"rm -rf build"}`)},
		&agent.ToolBlocked{CallID: "c2", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm -rf build"}}},
		&agent.ToolResolved{CallID: "c2", Decision: agent.DecisionReject, Reason: agent.ReasonRule, Rule: &agent.MatchedRule{Permission: "bash", Pattern: "rm *", Action: "deny"}},
		&agent.ToolCall{Message: "m", CallID: "c3", Tool: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		&agent.ToolBlocked{CallID: "c3", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"ls"}}},
		&agent.ToolResolved{CallID: "c3", Decision: agent.DecisionOnce},
		&agent.ToolCompleted{CallID: "c3", Output: "a.go"},
		&agent.TurnEnded{TurnID: "t", Reason: agent.TurnCompleted},
	} {
		red.Apply(ev)
	}
	var buf bytes.Buffer
	if err := Text(&buf, red.Transcript(), TextOptions{}); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "rules.txt"), buf.Bytes())
}

// FlatSettled stops before the first event that may still change, and is
// the whole of Flat once nothing streams.
func TestFlatSettled(t *testing.T) {
	ids := func(evs []FlatEvent) []string {
		out := make([]string, len(evs))
		for i, e := range evs {
			out[i] = e.ID
		}
		return out
	}
	full := ids(Flat(exchange()))
	cases := []struct {
		name   string
		change func(*mapper.Transcript)
		upTo   string // the first id left out ("" = all of Flat)
	}{
		{"complete", func(*mapper.Transcript) {}, ""},
		{"last text still streams", func(tr *mapper.Transcript) {
			tr.Messages[2].Info.(*mapper.AssistantMessage).Time.Completed = nil
		}, "prt_021"},
		{"text with an end time is settled", func(tr *mapper.Transcript) {
			tr.Messages[2].Info.(*mapper.AssistantMessage).Time.Completed = nil
			tr.Messages[2].Parts[2].(*mapper.TextPart).Time = &mapper.PartTime{Start: 1, End: i64(2)}
		}, "msg_01abc.turn-end-never"},
		{"reasoning still streams", func(tr *mapper.Transcript) {
			m := tr.Messages[1].Info.(*mapper.AssistantMessage)
			m.Time.Completed = nil
			tr.Messages[1].Parts[1].(*mapper.ReasoningPart).Time.End = nil
			tr.Messages[1].Parts = tr.Messages[1].Parts[:2] // its last part
		}, "prt_011"},
		// An agent that never says a text ended (ACP) went on to a tool:
		// the text is settled, and the tool after it is not held back.
		{"a text followed by a later part is settled", func(tr *mapper.Transcript) {
			m := tr.Messages[1].Info.(*mapper.AssistantMessage)
			m.Time.Completed = nil
			tr.Messages[1].Parts[1].(*mapper.ReasoningPart).Time.End = nil
			tr.Messages[2].Info.(*mapper.AssistantMessage).Time.Completed = nil
			tr.Messages[2].Parts = []mapper.Part{
				&mapper.TextPart{PartBase: mapper.PartBase{ID: "prt_029", SessionID: "ses_01xyz", MessageID: "msg_03ghi"}, Text: "Let me look.", Time: &mapper.PartTime{Start: 1}},
				tr.Messages[2].Parts[0], tr.Messages[2].Parts[1],
				&mapper.TextPart{PartBase: mapper.PartBase{ID: "prt_032", SessionID: "ses_01xyz", MessageID: "msg_03ghi"}, Text: "Still", Time: &mapper.PartTime{Start: 2}},
			}
		}, "prt_032"},
		{"tool input still streams", func(tr *mapper.Transcript) {
			tr.Messages[2].Parts[1].(*mapper.ToolPart).State = mapper.ToolState{Status: mapper.StatusPending, Input: agent.Object{}}
		}, "prt_031"},
		{"the model goes on after tools", func(tr *mapper.Transcript) {
			tr.Messages = tr.Messages[:2] // msg_02def finished with tool-calls
		}, "msg_01abc.turn-end"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := exchange()
			tc.change(&tr)
			all, got := ids(Flat(tr)), ids(FlatSettled(tr))
			want := all
			for i, id := range all {
				if id == tc.upTo {
					want = all[:i]
				}
			}
			if tc.upTo == "msg_01abc.turn-end-never" {
				want = all[:len(all)-0]
				for i, id := range all {
					if id == "msg_01abc.turn-end" {
						want = all[:i]
					}
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("FlatSettled\n%v\nwant\n%v", got, want)
			}
			if tc.upTo == "" && strings.Join(got, " ") != strings.Join(full, " ") {
				t.Fatalf("a complete transcript loses events: %v", got)
			}
		})
	}
}

// A tool line names the canonical tool and the telling member of its input,
// whatever agent made the call.
func TestToolSummary(t *testing.T) {
	cases := []struct {
		tool  string
		in    agent.Object
		title string
		want  string
	}{
		{agent.ToolBash, agent.Object{"command": "echo hi", "description": "Print hi"}, "Print hi", "echo hi"},
		{agent.ToolBash, agent.Object{"command": "cat <<EOF\nx\nEOF"}, "", "cat <<EOF …"},
		{agent.ToolBash, agent.Object{}, "Terminal", "Terminal"},
		{agent.ToolRead, agent.Object{"path": "/w/a.go", "offset": 3}, "", "/w/a.go"},
		{agent.ToolWrite, agent.Object{"path": "/w/a.txt", "content": "x"}, "", "/w/a.txt"},
		{agent.ToolEdit, agent.Object{"path": "/w/a.go", "oldString": "a", "newString": "b"}, "", "/w/a.go"},
		{agent.ToolGlob, agent.Object{"pattern": "*.go", "path": "/w"}, "", "*.go in /w"},
		{agent.ToolGrep, agent.Object{"pattern": "TODO"}, "", "TODO"},
		{agent.ToolFetch, agent.Object{"url": "https://x.test", "prompt": "sum"}, "", "https://x.test"},
		{agent.ToolSearch, agent.Object{"query": "go json"}, "", "go json"},
		{agent.ToolTask, agent.Object{"agent": "explore"}, "", "explore"},
		{agent.ToolTodo, agent.Object{"todos": []any{map[string]any{}, map[string]any{}}}, "2 todos", "2 todos"},
		{agent.ToolQuestion, agent.Object{"questions": []any{map[string]any{"question": "Which?"}, map[string]any{}}}, "", "Which? (+1 more)"},
		{agent.ToolPlan, agent.Object{"plan": "1. do\n2. check"}, "", "1. do …"},
		{agent.ToolQuestion, agent.Object{}, "question", ""},
		{"mcp:docs/search", agent.Object{"q": "x"}, "search", "search"},
		{agent.ToolOther, agent.Object{"b": 1, "a": 2}, "", "(a, b)"},
	}
	for _, c := range cases {
		if got := toolSummary(c.tool, c.in, c.title); got != c.want {
			t.Errorf("toolSummary(%s, %v, %q) = %q, want %q", c.tool, c.in, c.title, got, c.want)
		}
	}
}

// A prompt sent while the previous turn runs is on the relay where it was
// sent, among that turn's steps (a device writes it before the agent takes
// it): each prompt still gets its own turn-start/turn-end pair, and each
// step the turn of the prompt it answers (its parentID).
func TestFlatPromptDuringTurn(t *testing.T) {
	const ses = "ses_q"
	user := func(id, text string, at int64) mapper.MessageWithParts {
		return mapper.MessageWithParts{Info: &mapper.UserMessage{ID: id, SessionID: ses, Role: mapper.RoleUser, Time: mapper.UserTime{Created: at}},
			Parts: []mapper.Part{&mapper.TextPart{PartBase: mapper.PartBase{ID: id + ".p", SessionID: ses, MessageID: id}, Text: text}}}
	}
	step := func(id, parent string, at int64, finish string) mapper.MessageWithParts {
		return mapper.MessageWithParts{Info: &mapper.AssistantMessage{ID: id, SessionID: ses, Role: mapper.RoleAssistant, ParentID: parent,
			Time: mapper.AssistantTime{Created: at, Completed: i64(at + 5)}, Finish: finish},
			Parts: []mapper.Part{&mapper.TextPart{PartBase: mapper.PartBase{ID: id + ".p", SessionID: ses, MessageID: id}, Text: id}}}
	}
	cases := []struct {
		name string
		msgs []mapper.MessageWithParts
		want string
	}{
		{"sent after the first step", []mapper.MessageWithParts{
			user("u1", "first", 10), step("a1", "u1", 20, agent.FinishToolCalls), user("u2", "second", 30),
			step("a2", "u1", 40, agent.FinishStop), step("a3", "u2", 50, agent.FinishStop),
		}, "u1.p user text; u1.turn-start u1 turn-start; a1.p u1 text; u2.p user text; a2.p u1 text; u1.turn-end u1 turn-end@45; " +
			"u2.turn-start u2 turn-start; a3.p u2 text; u2.turn-end u2 turn-end@55"},
		{"sent before the first step", []mapper.MessageWithParts{
			user("u1", "first", 10), user("u2", "second", 15), step("a1", "u1", 20, agent.FinishStop), step("a2", "u2", 40, agent.FinishStop),
		}, "u1.p user text; u2.p user text; u1.turn-start u1 turn-start; a1.p u1 text; u1.turn-end u1 turn-end@25; " +
			"u2.turn-start u2 turn-start; a2.p u2 text; u2.turn-end u2 turn-end@45"},
		{"a step without a known prompt stays in the turn before it", []mapper.MessageWithParts{
			user("u1", "first", 10), step("a1", "", 20, agent.FinishStop),
		}, "u1.p user text; u1.turn-start u1 turn-start; a1.p u1 text; u1.turn-end u1 turn-end@25"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Flat(mapper.Transcript{Session: mapper.Session{ID: ses}, Messages: tc.msgs}) {
				s := e.ID + " "
				if e.Role == "user" {
					s += "user "
				} else {
					s += e.Turn + " "
				}
				s += e.Type
				if e.Type == TypeTurnEnd {
					s += "@" + strconv.FormatInt(e.Time, 10)
				}
				got = append(got, s)
			}
			if g := strings.Join(got, "; "); g != tc.want {
				t.Fatalf("events\n%s\nwant\n%s", g, tc.want)
			}
		})
	}
}

// A text emptied once it ended (the words of a model call that broke off
// and was retried) is no event; one still streaming is, as it may grow.
func TestFlatSkipsEmptiedText(t *testing.T) {
	tr := exchange()
	asst := tr.Messages[2]
	asst.Parts[2].(*mapper.TextPart).Text = ""
	for _, e := range Flat(tr) {
		if e.ID == "prt_021" {
			t.Fatalf("emptied text is an event: %+v", e)
		}
	}
	asst.Info.(*mapper.AssistantMessage).Time.Completed = nil
	found := false
	for _, e := range Flat(tr) {
		found = found || e.ID == "prt_021"
	}
	if !found {
		t.Fatal("a streaming text that is empty so far is left out")
	}
}

// A tool call's child session is shown under it only with something in it,
// and without a dangling " — " when it has no title.
func TestTextSubagentHeader(t *testing.T) {
	tr := exchange()
	child := &tr.Children[0]
	render := func() string {
		var buf bytes.Buffer
		if err := Text(&buf, tr, TextOptions{}); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	child.Session.Title = ""
	if out := render(); !strings.Contains(out, "  subagent ses_child_001\n") || strings.Contains(out, "ses_child_001 —") {
		t.Fatalf("untitled child:\n%s", out)
	}
	child.Messages = nil
	if out := render(); strings.Contains(out, "subagent") {
		t.Fatalf("empty child has a header:\n%s", out)
	}
}
