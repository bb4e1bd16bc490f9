package mapper

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func newTestReducer(relay string) *Reducer {
	return NewReducer(Config{SessionID: relay, ProjectID: "prj", Directory: "/w", Agent: "build", ProviderID: "anthropic", ModelID: "m"})
}

func applyAll(r *Reducer, evs ...agent.Event) []BusEvent {
	var out []BusEvent
	for _, ev := range evs {
		out = append(out, r.Apply(ev)...)
	}
	return out
}

// collectIDs returns every id in a transcript, in document order.
func collectIDs(tr Transcript) []string {
	ids := []string{tr.Session.ID}
	for _, m := range tr.Messages {
		ids = append(ids, m.Info.MessageID())
		for _, p := range m.Parts {
			ids = append(ids, p.Base().ID)
			if tp, ok := p.(*ToolPart); ok && tp.State.Block != nil {
				ids = append(ids, tp.State.Block.ID)
			}
		}
	}
	for _, c := range tr.Children {
		ids = append(ids, collectIDs(c)...)
	}
	return ids
}

func sampleEvents() []agent.Event {
	return []agent.Event{
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 10}, PromptID: "u1", Text: "go"},
		&agent.TextDelta{EventBase: agent.EventBase{Time: 11}, Delta: "a"},
		&agent.ToolCall{EventBase: agent.EventBase{Time: 12}, CallID: "c1", Tool: "bash", Input: json.RawMessage(`{"command":"ls"}`)},
		&agent.ToolBlocked{EventBase: agent.EventBase{Time: 13}, CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"ls"}}},
		&agent.SubagentStarted{EventBase: agent.EventBase{Time: 14}, CallID: "c1", Child: "k", Prompt: "look"},
		&agent.TextFinal{EventBase: agent.EventBase{Session: "k", Time: 15}, Text: "seen"},
		&agent.TurnEnded{EventBase: agent.EventBase{Time: 16}, Reason: agent.TurnCompleted},
	}
}

func TestReducerIDsDeterministicPerRelaySession(t *testing.T) {
	a, b, c := newTestReducer("relay-A"), newTestReducer("relay-A"), newTestReducer("relay-B")
	applyAll(a, sampleEvents()...)
	applyAll(b, sampleEvents()...)
	applyAll(c, sampleEvents()...)
	ia, ib, ic := collectIDs(a.Transcript()), collectIDs(b.Transcript()), collectIDs(c.Transcript())
	if !reflect.DeepEqual(ia, ib) {
		t.Fatalf("same relay session, different ids:\n%v\n%v", ia, ib)
	}
	if len(ia) != len(ic) {
		t.Fatalf("different shapes: %d vs %d ids", len(ia), len(ic))
	}
	for i := range ia {
		if ia[i] == ic[i] {
			t.Errorf("id %s shared by two relay sessions", ia[i])
		}
	}
	// Every id carries the prefix of what it names.
	tr := a.Transcript()
	for _, want := range []struct{ id, prefix string }{
		{tr.Session.ID, PrefixSession}, {tr.Children[0].Session.ID, PrefixSession},
		{tr.Messages[0].Info.MessageID(), PrefixMessage}, {tr.Messages[1].Parts[1].Base().ID, PrefixPart},
		{tr.Messages[1].Parts[2].(*ToolPart).State.Block.ID, PrefixPermission},
	} {
		if _, ok := IDPosition(want.id, want.prefix); !ok {
			t.Errorf("id %q does not have prefix %q and the id shape", want.id, want.prefix)
		}
	}
	if got := a.RootID(); got != tr.Session.ID {
		t.Errorf("RootID = %s, transcript root %s", got, tr.Session.ID)
	}
}

func TestReducerNilEvents(t *testing.T) {
	r := newTestReducer("r")
	var nilCall *agent.ToolCall
	bus := applyAll(r, nil, nilCall)
	if len(bus) != 1 || bus[0].EventType() != EvSessionCreated {
		t.Fatalf("bus = %v, want one session.created", bus)
	}
	d := r.Transcript().Dropped
	if len(d) != 1 || d[0].Reason != agent.DropInvalidField || d[0].Kind != "" {
		// A typed nil and an untyped nil are the same refusal (nothing to encode).
		t.Fatalf("dropped = %+v", d)
	}
	// An event type from elsewhere cannot exist (closed union); an invalid
	// event is refused with the validator's reason.
	applyAll(r, &agent.ToolCall{Tool: "bash"}, &agent.ToolResolved{CallID: "x", Decision: "maybe"})
	d = r.Transcript().Dropped
	if len(d) != 3 || d[1].Reason != agent.DropMissingID || d[2].Reason != agent.DropUnknownDecision {
		t.Fatalf("dropped = %+v", d)
	}
	if !strings.Contains(d[2].Raw, `"decision":"maybe"`) || d[2].Source != "mapper" || d[2].Kind != "ToolResolved" {
		t.Fatalf("refusal record = %+v", d[2])
	}
}

// Snapshots handed out (bus events, Message, Transcript) never change when
// later events are applied.
func TestReducerSnapshotsAreImmutable(t *testing.T) {
	r := newTestReducer("r")
	bus := applyAll(r,
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 1}, PromptID: "u", Text: "x"},
		&agent.TextDelta{EventBase: agent.EventBase{Time: 2}, Block: "b", Delta: "one"},
		&agent.ToolCall{EventBase: agent.EventBase{Time: 3}, CallID: "c", Tool: "bash", Input: json.RawMessage(`{"a":1}`)},
	)
	var textPart *TextPart
	var toolPart *ToolPart
	for _, ev := range bus {
		if pu, ok := ev.(*MessagePartUpdated); ok {
			switch p := pu.Part.(type) {
			case *TextPart:
				textPart = p
			case *ToolPart:
				toolPart = p
			}
		}
	}
	msgID := textPart.MessageID
	before, _ := r.Message(msgID)
	trBefore := r.Transcript()
	beforeJSON, _ := EncodeMessageWithParts(before)

	applyAll(r,
		&agent.TextDelta{EventBase: agent.EventBase{Time: 4}, Block: "b", Delta: " two"},
		&agent.TextFinal{EventBase: agent.EventBase{Time: 5}, Block: "b", Text: "one two three"},
		&agent.ToolRunning{EventBase: agent.EventBase{Time: 6}, CallID: "c"},
		&agent.ToolBlocked{EventBase: agent.EventBase{Time: 7}, CallID: "c", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"x"}}},
		&agent.ToolResolved{EventBase: agent.EventBase{Time: 8}, CallID: "c", Decision: agent.DecisionOnce},
		&agent.ToolCompleted{EventBase: agent.EventBase{Time: 9}, CallID: "c", Output: "done", Metadata: agent.Object{"k": "v"}},
		&agent.TurnEnded{EventBase: agent.EventBase{Time: 10}, Reason: agent.TurnCompleted},
	)
	if textPart.Text != "one" || textPart.Time.End != nil {
		t.Errorf("published text part changed: %+v", textPart)
	}
	if toolPart.State.Status != StatusPending || toolPart.State.Block != nil || len(toolPart.State.Metadata) != 0 {
		t.Errorf("published tool part changed: %+v", toolPart.State)
	}
	if afterJSON, _ := EncodeMessageWithParts(before); string(afterJSON) != string(beforeJSON) {
		t.Errorf("Message snapshot changed:\n%s\n%s", beforeJSON, afterJSON)
	}
	if len(trBefore.Messages[1].Parts) != 3 {
		t.Errorf("Transcript snapshot changed: %d parts", len(trBefore.Messages[1].Parts))
	}
	now, _ := r.Message(msgID)
	if got := now.Parts[1].(*TextPart).Text; got != "one two three" {
		t.Errorf("current text = %q", got)
	}
	if _, ok := r.Message("msg_nope"); ok {
		t.Error("Message of an unknown id found")
	}
}

// An event without a time takes the latest time seen; nothing reads the
// clock.
func TestReducerTimeFallback(t *testing.T) {
	r := newTestReducer("r")
	applyAll(r,
		&agent.UserPrompt{PromptID: "u", Text: "x"}, // no time seen yet: 0
		&agent.TextDelta{EventBase: agent.EventBase{Time: 500}, Delta: "a"},
		&agent.ToolCall{CallID: "c", Tool: "bash"},
		&agent.ToolRunning{CallID: "c"},
		&agent.ToolCompleted{EventBase: agent.EventBase{Time: 400}, CallID: "c"}, // earlier than seen: kept as given
		&agent.TurnEnded{Reason: agent.TurnCompleted},
	)
	tr := r.Transcript()
	if tr.Session.Time.Created != 500 {
		t.Errorf("session created %d, want the first time seen (500)", tr.Session.Time.Created)
	}
	if c := tr.Messages[0].Info.(*UserMessage).Time.Created; c != 0 {
		t.Errorf("user message created %d, want 0 (no time seen)", c)
	}
	a := tr.Messages[1].Info.(*AssistantMessage)
	tool := tr.Messages[1].Parts[2].(*ToolPart)
	if tool.State.Time.Start != 500 || tool.State.Time.End != 400 || *a.Time.Completed != 500 {
		t.Errorf("times: tool %+v, message completed %d", tool.State.Time, *a.Time.Completed)
	}
}

func TestReducerUsageAbsentStaysAbsent(t *testing.T) {
	r := newTestReducer("r")
	out := int64(7)
	cost := 0.5
	applyAll(r,
		&agent.UserPrompt{PromptID: "u"},
		&agent.TextFinal{Message: "m", Text: "hi"},
		&agent.Usage{Message: "m", Tokens: &agent.Tokens{Output: &out}},
		&agent.StepFinished{Message: "m", Finish: agent.FinishLength},
	)
	a := r.Transcript().Messages[1].Info.(*AssistantMessage)
	if a.Cost != nil || a.Tokens.Input != nil || a.Tokens.Reasoning != nil || a.Tokens.Cache.Read != nil || *a.Tokens.Output != 7 {
		t.Fatalf("usage = cost %v tokens %+v", a.Cost, a.Tokens)
	}
	if a.Finish != agent.FinishLength {
		t.Fatalf("finish = %q", a.Finish)
	}
	// A later report fills in what was absent and reaches the step-finish.
	applyAll(r, &agent.Usage{Message: "m", Cost: &cost})
	m := r.Transcript().Messages[1]
	sf := m.Parts[len(m.Parts)-1].(*StepFinishPart)
	if *m.Info.(*AssistantMessage).Cost != 0.5 || *sf.Cost != 0.5 || *sf.Tokens.Output != 7 || sf.Tokens.Input != nil {
		t.Fatalf("step-finish = %+v", sf)
	}
	// Usage for nothing is refused as an orphan.
	applyAll(r, &agent.Usage{Message: "unknown", Cost: &cost})
	if d := r.Transcript().Dropped; len(d) != 1 || d[0].Reason != agent.DropOrphan {
		t.Fatalf("dropped = %+v", d)
	}
}

// Events for a session key never announced open a child of the root, so
// their content is kept; SubagentStarted later names it.
func TestReducerImplicitChild(t *testing.T) {
	r := newTestReducer("r")
	applyAll(r,
		&agent.TextFinal{EventBase: agent.EventBase{Session: "side", Time: 5}, Text: "hello from a sidechain"},
		&agent.SubagentStarted{EventBase: agent.EventBase{Time: 6}, Child: "side", Title: "Side task"},
		&agent.SubagentEnded{EventBase: agent.EventBase{Time: 7}, Child: "side"},
	)
	tr := r.Transcript()
	if len(tr.Children) != 1 {
		t.Fatalf("children = %d", len(tr.Children))
	}
	c := tr.Children[0]
	if c.Session.ParentID != tr.Session.ID || c.Session.Title != "Side task" || len(c.Messages) != 1 {
		t.Fatalf("child = %+v, %d messages", c.Session, len(c.Messages))
	}
	if a := c.Messages[0].Info.(*AssistantMessage); a.Finish != agent.FinishStop || a.ParentID != "" {
		t.Fatalf("child message = %+v", a)
	}
	if s, ok := r.Session(c.Session.ID); !ok || s.Title != "Side task" {
		t.Fatalf("Session(child) = %+v, %v", s, ok)
	}
}

// Applying a delta costs the same in a short and in a long session: no
// part of the work re-scans the transcript.
func TestReducerDeltaCostIndependentOfLength(t *testing.T) {
	measure := func(n int) float64 {
		r := newTestReducer("r")
		for _, ev := range longSession(n) {
			r.Apply(ev)
		}
		r.Apply(&agent.TurnStarted{TurnID: "x"})
		d := &agent.TextDelta{Message: "x", Block: "0", Delta: "tok "}
		r.Apply(d)
		return testing.AllocsPerRun(200, func() { r.Apply(d) })
	}
	short, long := measure(100), measure(20_000)
	if short != long || long > 3 {
		t.Fatalf("allocations per delta: %v in a short session, %v in a long one", short, long)
	}
}

func TestReducerTodosAndRuntimeRules(t *testing.T) {
	r := newTestReducer("r")
	todos := []agent.Todo{{Content: "a", Status: agent.TodoPending, Priority: agent.PriorityHigh}}
	bus := applyAll(r,
		&agent.TodosUpdated{Todos: todos},
		&agent.ToolBlocked{CallID: "c", Tool: "edit", Permission: &agent.PermissionRequest{Permission: "edit", Patterns: []string{"a.go"}, Always: []string{"*.go"}}},
		&agent.ToolResolved{CallID: "c", Decision: agent.DecisionAlways},
	)
	root := r.RootID()
	if got := r.Todos(root); !reflect.DeepEqual(got, todos) {
		t.Fatalf("Todos = %+v", got)
	}
	todos[0].Content = "changed by the caller"
	if got := r.Todos(root); got[0].Content != "a" {
		t.Fatal("the reducer shares the caller's todo slice")
	}
	if got := r.RuntimeRules(root); !reflect.DeepEqual(got, []PermissionRule{{Permission: "edit", Pattern: "*.go", Action: ActionAllow}}) {
		t.Fatalf("RuntimeRules = %+v", got)
	}
	var n int
	for _, ev := range bus {
		if ev.EventType() == EvTodoUpdated {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d todo.updated events, want 1", n)
	}
}

func TestEncodeDecodeEveryEvent(t *testing.T) {
	one, two := int64(1), 2
	yes := true
	cost := 0.25
	evs := []agent.Event{
		&agent.SessionInfo{EventBase: agent.EventBase{Time: 1}, ProviderSessionID: "s", ProviderID: "p", ModelID: "m", Agent: "a", Cwd: "/c", Title: "t"},
		&agent.TurnStarted{TurnID: "t"},
		&agent.UserPrompt{EventBase: agent.EventBase{Session: "k"}, PromptID: "u", Text: "<b>&", Files: []agent.PromptFile{{Mime: "image/png", Filename: "f", URL: "data:,"}}, Synthetic: true},
		&agent.MessageStarted{Message: "m", ProviderID: "p", ModelID: "x"},
		&agent.TextDelta{Message: "m", Block: "b", Delta: "d"},
		&agent.TextFinal{Message: "m", Block: "b", Text: "t"},
		&agent.ReasoningDelta{Message: "m", Block: "b", Delta: "d"},
		&agent.ReasoningFinal{Message: "m", Block: "b", Text: "t", Metadata: agent.Object{"signature": "s", "n": json.Number("12345678901234567890")}},
		&agent.ToolCall{Message: "m", CallID: "c", Tool: "bash", Title: "t", Input: json.RawMessage(`{"command":"ls"}`), Metadata: agent.Object{"k": "v"}},
		&agent.ToolInputDelta{CallID: "c", Delta: "{"},
		&agent.ToolRunning{CallID: "c"},
		&agent.ToolBlocked{Message: "m", CallID: "c", Tool: "edit", Input: json.RawMessage(`{}`), Permission: &agent.PermissionRequest{ID: "p", Permission: "edit", Patterns: []string{"a"}, Always: []string{"*"}, Metadata: agent.Object{"diff": "x"}}},
		&agent.ToolBlocked{CallID: "c", Question: &agent.QuestionRequest{ID: "q", Questions: []agent.QuestionInfo{{Question: "?", Header: "h", Options: []agent.QuestionOption{{Label: "l", Description: "d"}}, Multiple: &yes}}}},
		&agent.ToolResolved{CallID: "c", Decision: agent.DecisionReject, Reason: agent.ReasonTimeout},
		&agent.ToolResolved{CallID: "c", Answers: [][]string{{"l"}}},
		&agent.ToolResolved{CallID: "c", Decision: agent.DecisionOnce, Reason: agent.ReasonRule, Rule: &agent.MatchedRule{Permission: "bash", Pattern: "ls*", Action: "allow"}},
		&agent.ToolCompleted{CallID: "c", Output: "o", Title: "t", Metadata: agent.Object{"exit": json.Number("0")}, Files: []agent.PromptFile{{Mime: "text/plain", URL: "data:,x"}}},
		&agent.ToolFailed{CallID: "c", Error: "e", Metadata: agent.Object{"exit": json.Number("2")}},
		&agent.Usage{Message: "m", Tokens: &agent.Tokens{Input: &one, Cache: agent.CacheTokens{Write: &one}}, Cost: &cost},
		&agent.StepFinished{Message: "m", Finish: agent.FinishStop},
		&agent.SubagentStarted{CallID: "c", Child: "k", Title: "t", Agent: "a", Prompt: "p", Description: "d"},
		&agent.SubagentEnded{Child: "k"},
		&agent.TodosUpdated{Todos: []agent.Todo{{Content: "c", Status: agent.TodoCompleted, Priority: agent.PriorityLow}}},
		&agent.Compaction{ID: "x", Message: "m", Auto: true, Overflow: &yes},
		&agent.Retry{Message: "m", Attempt: 2, Error: agent.MessageError{Name: agent.ErrNameAPI, Data: agent.ErrorData{Message: "m", Kind: agent.ErrorRateLimit, StatusCode: &two}}},
		&agent.AgentError{Message: "m", Kind: agent.ErrorAuth, Text: "t", StatusCode: &two},
		&agent.TurnEnded{TurnID: "t", Reason: agent.TurnFailed, Error: "e"},
		&agent.DroppedInput{Dropped: agent.Dropped{Source: "s", Line: 3, Kind: "k", Reason: agent.DropOversize, Detail: "d", Raw: "r"}},
	}
	names := map[string]bool{}
	for _, ev := range evs {
		raw, err := agent.EncodeEvent(ev)
		if err != nil {
			t.Fatalf("%T: %v", ev, err)
		}
		names[agent.EventName(ev)] = true
		if !strings.HasPrefix(string(raw), `{"type":"`+agent.EventName(ev)+`"`) {
			t.Fatalf("encoding does not start with its type: %s", raw)
		}
		back, err := agent.DecodeEvent(raw)
		if err != nil {
			t.Fatalf("decode %s: %v", raw, err)
		}
		if !reflect.DeepEqual(back, ev) {
			t.Fatalf("round trip of %s:\n got %#v\nwant %#v", raw, back, ev)
		}
	}
	if len(names) != 25 {
		t.Fatalf("covered %d event types, want all 25", len(names))
	}
	if got, _ := agent.EncodeEvent(&agent.TurnStarted{}); string(got) != `{"type":"TurnStarted"}` {
		t.Fatalf("empty event encodes as %s", got)
	}
	if got, _ := agent.EncodeEvent(&agent.UserPrompt{PromptID: "u", Text: "<&>"}); !strings.Contains(string(got), `"<&>"`) {
		t.Fatalf("HTML escaped: %s", got)
	}
}

func TestDecodeEventRefusals(t *testing.T) {
	cases := []struct {
		in     string
		reason agent.DropReason
		typ    string
	}{
		{`{"type":"TextDelta"`, agent.DropUnparseableJSON, ""},
		{`<html>`, agent.DropUnparseableJSON, ""},
		{`[{"type":"TextDelta"}]`, agent.DropNotAnObject, ""},
		{`"TextDelta"`, agent.DropNotAnObject, ""},
		{`null`, agent.DropNotAnObject, ""},
		{`{}`, agent.DropInvalidField, ""},
		{`{"type":3}`, agent.DropInvalidField, ""},
		{`{"type":"Teleport"}`, agent.DropUnknownType, "Teleport"},
		{`{"type":"TextDelta","delta":5}`, agent.DropInvalidField, "TextDelta"},
		{`{"type":"TextDelta","time":1.5}`, agent.DropInvalidField, "TextDelta"},
		{`{"type":"TextDelta","time":-3}`, agent.DropInvalidField, "TextDelta"},
		{`{"type":"ToolCall","tool":"bash"}`, agent.DropMissingID, "ToolCall"},
		{`{"type":"UserPrompt","text":"x"}`, agent.DropMissingID, "UserPrompt"},
		{`{"type":"SubagentStarted","callID":"c"}`, agent.DropMissingID, "SubagentStarted"},
		{`{"type":"ToolBlocked","callID":"c"}`, agent.DropInvalidField, "ToolBlocked"},
		{`{"type":"ToolBlocked","callID":"c","permission":{},"question":{}}`, agent.DropInvalidField, "ToolBlocked"},
		{`{"type":"ToolResolved","callID":"c","decision":"allow"}`, agent.DropUnknownDecision, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c","decision":"ONCE"}`, agent.DropUnknownDecision, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c"}`, agent.DropInvalidField, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c","decision":"once","rule":{"permission":"bash","pattern":"*","action":"allow"}}`, agent.DropInvalidField, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c","decision":"once","reason":"rule","rule":{"permission":"bash","pattern":"*","action":"deny"}}`, agent.DropInvalidField, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c","decision":"reject","reason":"rule","rule":{"permission":"bash","pattern":"*","action":"allow"}}`, agent.DropInvalidField, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c","decision":"once","reason":"rule","rule":{"permission":"bash","pattern":"*","action":"ask"}}`, agent.DropInvalidField, "ToolResolved"},
		{`{"type":"ToolResolved","callID":"c","decision":"once","reason":"rule","rule":{"pattern":"*","action":"allow"}}`, agent.DropInvalidField, "ToolResolved"},
		{`{"type":"StepFinished","finish":"done"}`, agent.DropInvalidField, "StepFinished"},
		{`{"type":"Retry","attempt":-1}`, agent.DropInvalidField, "Retry"},
	}
	for _, c := range cases {
		_, err := agent.DecodeEvent([]byte(c.in))
		var ee *agent.EventError
		if !errors.As(err, &ee) || !errors.Is(err, agent.ErrBadEvent) {
			t.Errorf("%s: err = %v, want an *EventError", c.in, err)
			continue
		}
		if ee.Reason != c.reason || ee.Type != c.typ {
			t.Errorf("%s: reason %s type %q, want %s %q (%v)", c.in, ee.Reason, ee.Type, c.reason, c.typ, err)
		}
		d := ee.Dropped("log", 4, []byte(c.in))
		if d.Reason != c.reason || d.Line != 4 || d.Raw != c.in || d.Source != "log" {
			t.Errorf("%s: Dropped = %+v", c.in, d)
		}
	}
	// Members an event does not have are ignored (a newer writer).
	ev, err := agent.DecodeEvent([]byte(`{"type":"TextDelta","delta":"x","futureField":{"a":1}}`))
	if err != nil || ev.(*agent.TextDelta).Delta != "x" {
		t.Fatalf("unknown member: %v, %v", ev, err)
	}
	// Raw is cut to 512 bytes on a UTF-8 boundary.
	long := `{"type":"Nope","x":"` + strings.Repeat("é", 400) + `"}`
	_, err = agent.DecodeEvent([]byte(long))
	var ee *agent.EventError
	errors.As(err, &ee)
	if d := ee.Dropped("log", 1, []byte(long)); len(d.Raw) > 512 || !strings.HasPrefix(long, d.Raw) || !json.Valid([]byte(`"`+d.Raw[20:]+`"`)) {
		t.Fatalf("raw cut wrongly: %d bytes", len(d.Raw))
	}
	if _, err := agent.EncodeEvent(nil); !errors.Is(err, agent.ErrBadEvent) {
		t.Fatalf("EncodeEvent(nil) = %v", err)
	}
	nan := 0.0
	nan = nan / nan
	if _, err := agent.EncodeEvent(&agent.Usage{Cost: &nan}); !errors.Is(err, agent.ErrBadEvent) {
		t.Fatalf("EncodeEvent(NaN cost) = %v", err)
	}
}

// A prompt's file without a mime type becomes a file part of
// application/octet-stream: the transcript stays encodable (a file part
// without a mime type is refused by the codec, and with it the whole
// transcript).
func TestReducerPromptFileWithoutMime(t *testing.T) {
	r := newTestReducer("r")
	applyAll(r, &agent.UserPrompt{EventBase: agent.EventBase{Time: 1}, PromptID: "u", Text: "look",
		Files: []agent.PromptFile{{Filename: "notes", URL: "file:///w/notes"}, {Mime: "image/png", Filename: "a.png", URL: "file:///w/a.png"}}})
	tr := r.Transcript()
	if len(tr.Dropped) != 0 {
		t.Fatalf("dropped = %+v", tr.Dropped)
	}
	var mimes []string
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if fp, ok := p.(*FilePart); ok {
				mimes = append(mimes, fp.Mime)
			}
		}
	}
	if want := []string{"application/octet-stream", "image/png"}; !slices.Equal(mimes, want) {
		t.Fatalf("file part mimes = %q, want %q", mimes, want)
	}
	b, err := EncodeTranscript(tr)
	if err != nil {
		t.Fatalf("EncodeTranscript: %v", err)
	}
	back, rep, err := DecodeTranscript(b)
	if err != nil || len(back.Dropped) != 0 || len(back.Messages) != 1 || len(back.Messages[0].Parts) != 3 {
		t.Fatalf("DecodeTranscript: %v, %+v, %+v", err, rep, back)
	}
}

// Usage of a model call with no visible output (Codex on a resumed thread,
// a refusal, a question asked through request_user_input) belongs to its
// turn: it is the usage of the turn's step, which exists without content,
// and nothing is dropped. The output that follows in the turn joins that
// step.
func TestReducerUsageWithoutOutputIsTheTurns(t *testing.T) {
	in, out := int64(1200), int64(3)
	t.Run("a turn with no output", func(t *testing.T) {
		r := newTestReducer("r")
		applyAll(r,
			&agent.UserPrompt{EventBase: agent.EventBase{Time: 10}, PromptID: "u", Text: "do it"},
			&agent.TurnStarted{EventBase: agent.EventBase{Time: 11}, TurnID: "t"},
			&agent.Usage{EventBase: agent.EventBase{Time: 12}, Tokens: &agent.Tokens{Input: &in, Output: &out}},
			&agent.TurnEnded{EventBase: agent.EventBase{Time: 13}, TurnID: "t", Reason: agent.TurnCompleted},
		)
		tr := r.Transcript()
		if len(tr.Dropped) != 0 || len(tr.Messages) != 2 {
			t.Fatalf("%d messages, dropped %+v", len(tr.Messages), tr.Dropped)
		}
		a := tr.Messages[1].Info.(*AssistantMessage)
		if a.ParentID != tr.Messages[0].Info.MessageID() || a.Tokens == nil || *a.Tokens.Input != 1200 || *a.Tokens.Output != 3 ||
			a.Time.Created != 12 || a.Time.Completed == nil || *a.Time.Completed != 13 || a.Finish != agent.FinishStop {
			t.Fatalf("the turn's step: %+v tokens %+v", a, a.Tokens)
		}
		sf, ok := tr.Messages[1].Parts[len(tr.Messages[1].Parts)-1].(*StepFinishPart)
		if !ok || sf.Tokens == nil || *sf.Tokens.Input != 1200 {
			t.Fatalf("parts %+v", tr.Messages[1].Parts)
		}
	})
	t.Run("output after the usage", func(t *testing.T) {
		r := newTestReducer("r")
		applyAll(r,
			&agent.UserPrompt{PromptID: "u", Text: "go on"},
			&agent.Usage{Tokens: &agent.Tokens{Input: &in}},
			&agent.TextFinal{Text: "done"},
			&agent.TurnEnded{Reason: agent.TurnCompleted},
		)
		tr := r.Transcript()
		if len(tr.Dropped) != 0 || len(tr.Messages) != 2 {
			t.Fatalf("%d messages, dropped %+v", len(tr.Messages), tr.Dropped)
		}
		if a := tr.Messages[1].Info.(*AssistantMessage); *a.Tokens.Input != 1200 {
			t.Fatalf("tokens %+v", a.Tokens)
		}
		if tp, ok := tr.Messages[1].Parts[1].(*TextPart); !ok || tp.Text != "done" {
			t.Fatalf("parts %+v", tr.Messages[1].Parts)
		}
	})
}

// A turn stopped (or failed) before the agent said anything still says how
// it ended: its step exists without content and finishes aborted (error
// for the other reasons); a completed turn without output gets none.
func TestReducerTurnEndedBeforeAnyStep(t *testing.T) {
	cases := []struct {
		reason, finish string
		steps          int
	}{
		{agent.TurnInterrupted, agent.FinishAborted, 1},
		{agent.TurnAgentExited, agent.FinishError, 1},
		{agent.TurnCompleted, "", 0},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			r := newTestReducer("r")
			applyAll(r,
				&agent.UserPrompt{EventBase: agent.EventBase{Time: 10}, PromptID: "u", Text: "long job"},
				&agent.TurnStarted{EventBase: agent.EventBase{Time: 11}},
				&agent.TurnEnded{EventBase: agent.EventBase{Time: 20}, Reason: c.reason},
			)
			tr := r.Transcript()
			if len(tr.Messages) != 1+c.steps {
				t.Fatalf("%d messages", len(tr.Messages))
			}
			if c.steps == 0 {
				return
			}
			a := tr.Messages[1].Info.(*AssistantMessage)
			if a.Finish != c.finish || a.Time.Completed == nil || *a.Time.Completed != 20 || a.ParentID != tr.Messages[0].Info.MessageID() {
				t.Fatalf("step %+v", a)
			}
		})
	}
}

// A prompt that reached the agent before the agent named its model (a
// phone's prompt to a Claude still starting) is answered by the model the
// agent names next: its user message takes that model, in a
// message.updated. Later prompts take the session's model as they come;
// a message already answered keeps what it has.
func TestReducerPromptBeforeTheModelIsKnown(t *testing.T) {
	r := NewReducer(Config{SessionID: "r", Directory: "/w", Agent: "build", ProviderID: "openai"})
	out := applyAll(r,
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 1}, PromptID: "u1", Text: "first"},
		&agent.SessionInfo{EventBase: agent.EventBase{Time: 2}, ProviderID: "anthropic", ModelID: "sonnet"},
	)
	var updated []ModelRef
	for _, ev := range out {
		if mu, ok := ev.(*MessageUpdated); ok {
			if u, ok := mu.Info.(*UserMessage); ok {
				updated = append(updated, u.Model)
			}
		}
	}
	if want := []ModelRef{{ProviderID: "openai"}, {ProviderID: "anthropic", ModelID: "sonnet"}}; !slices.Equal(updated, want) {
		t.Fatalf("user message.updated models = %+v, want %+v", updated, want)
	}
	applyAll(r,
		&agent.TextFinal{EventBase: agent.EventBase{Time: 3}, Text: "one"},
		&agent.TurnEnded{EventBase: agent.EventBase{Time: 4}, Reason: agent.TurnCompleted},
		&agent.SessionInfo{EventBase: agent.EventBase{Time: 5}, ModelID: "opus"},
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 6}, PromptID: "u2", Text: "second"},
		&agent.SessionInfo{EventBase: agent.EventBase{Time: 7}, ModelID: "haiku"},
	)
	var models []string
	for _, m := range r.Transcript().Messages {
		if u, ok := m.Info.(*UserMessage); ok {
			models = append(models, u.Model.ModelID)
		}
	}
	if want := []string{"sonnet", "opus"}; !slices.Equal(models, want) {
		t.Fatalf("user message models = %q, want %q", models, want)
	}
}
