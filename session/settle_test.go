package session

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// killedMidTurn is what a happy that died mid-turn left on the relay: a
// completed first turn, then a second one whose message streams text, has
// a tool running and one blocked on a permission.
func killedMidTurn(t *testing.T) (*memStore, *Readback) {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-k", Directory: "/w", ProviderID: "anthropic", ModelID: "m"})
	store := &memStore{last: map[string]int64{}}
	sink := NewSink(store, red)
	evs := []agent.Event{
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 1000}, PromptID: "p1", Text: "first"},
		&agent.TurnStarted{TurnID: "t1"},
		&agent.TextFinal{EventBase: agent.EventBase{Time: 1100}, Message: "m1", Block: "0", Text: "Hi."},
		&agent.StepFinished{Message: "m1", Finish: agent.FinishStop},
		&agent.TurnEnded{EventBase: agent.EventBase{Time: 1200}, TurnID: "t1", Reason: agent.TurnCompleted},
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 2000}, PromptID: "p2", Text: "second"},
		&agent.TurnStarted{TurnID: "t2"},
		&agent.MessageStarted{EventBase: agent.EventBase{Time: 2100}, Message: "m2"},
		&agent.TextDelta{Message: "m2", Block: "0", Delta: "Working"},
		&agent.ToolCall{Message: "m2", CallID: "run", Tool: "bash", Input: json.RawMessage(`{"command":"sleep 9"}`)},
		&agent.ToolRunning{EventBase: agent.EventBase{Time: 2200}, CallID: "run"},
		&agent.ToolCall{Message: "m2", CallID: "ask", Tool: "bash", Input: json.RawMessage(`{"command":"rm x"}`)},
		&agent.ToolRunning{CallID: "ask"},
		&agent.ToolBlocked{EventBase: agent.EventBase{Time: 2300}, CallID: "ask", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm x"}}},
	}
	for i, ev := range evs {
		sink.Observe(red.Apply(ev))
		if err := flushed(store, sink, context.Background(), time.UnixMilli(int64(i)*2000), true); err != nil {
			t.Fatal(err)
		}
	}
	rb := NewReadback(mapper.Session{ID: "ses_fallback"})
	seq := int64(0)
	for _, put := range store.puts {
		for _, v := range put {
			seq++
			rb.Add(seq, v.LocalID(), v.Plaintext)
		}
	}
	return store, rb
}

func TestSettleClosesWhatADeadWriterLeftOpen(t *testing.T) {
	store, rb := killedMidTurn(t)
	const at = 9000
	got := rb.Settle(agent.ReasonWrapperExited, at)
	if len(got) != 1 {
		t.Fatalf("%d settled messages, want 1 (the open assistant message): %+v", len(got), got)
	}
	s := got[0]
	am, ok := s.Message.Info.(*mapper.AssistantMessage)
	if !ok || s.Record != am.ID {
		t.Fatalf("settled %T record %q", s.Message.Info, s.Record)
	}
	if s.ReadVersion != store.last[s.Record] {
		t.Fatalf("read version %d, the writer's last %d", s.ReadVersion, store.last[s.Record])
	}
	if am.Time.Completed == nil || *am.Time.Completed != at || am.Finish != agent.FinishError || am.Error == nil ||
		am.Error.Name != agent.ErrNameUnknown || am.Error.Data.Kind != agent.ErrorInternal ||
		am.Error.Data.Message != "happy exited before the turn ended (wrapper-exited)" {
		t.Fatalf("message info %+v error %+v", am, am.Error)
	}
	var tools []*mapper.ToolPart
	for _, p := range s.Message.Parts {
		switch x := p.(type) {
		case *mapper.ToolPart:
			tools = append(tools, x)
		case *mapper.TextPart:
			if x.Time == nil || x.Time.End == nil || *x.Time.End != at || x.Text != "Working" {
				t.Fatalf("text part %+v", x)
			}
		}
	}
	if len(tools) != 2 {
		t.Fatalf("%d tools", len(tools))
	}
	for _, tp := range tools {
		st := tp.State
		if st.Status != mapper.StatusError || st.Error != agent.ReasonWrapperExited || st.Time.End != at {
			t.Fatalf("tool %s state %+v", tp.CallID, st)
		}
	}
	if b := tools[1].State.Block; tools[1].CallID != "ask" || b == nil || b.Decision != agent.DecisionReject || b.Reason != agent.ReasonWrapperExited || b.DecidedAt == nil || *b.DecidedAt != at {
		t.Fatalf("blocked tool settled as %+v", tools[1].State.Block)
	}
	last, ok := s.Message.Parts[len(s.Message.Parts)-1].(*mapper.StepFinishPart)
	if !ok || last.Reason != agent.FinishError || last.MessageID != am.ID {
		t.Fatalf("last part %+v", s.Message.Parts[len(s.Message.Parts)-1])
	}
	for _, p := range s.Message.Parts[:len(s.Message.Parts)-1] {
		if p.Base().ID >= last.ID {
			t.Fatalf("step-finish id %s does not sort after part %s", last.ID, p.Base().ID)
		}
	}

	// The settled version, once on the relay, leaves nothing to settle, and
	// it is what readers keep.
	body, err := MessageEnvelope(s.Message, s.ReadVersion+1)
	if err != nil {
		t.Fatal(err)
	}
	rb.Add(1000, s.Message.Info.MessageID()+"."+strconv.FormatInt(s.ReadVersion+1, 10), body)
	if again := rb.Settle(agent.ReasonWrapperExited, at+1); len(again) != 0 {
		t.Fatalf("settled twice: %+v", again)
	}
	tr := rb.Transcript()
	if n := len(tr.Dropped); n != 0 {
		t.Fatalf("read back with %d dropped: %+v", n, tr.Dropped)
	}
	final := tr.Messages[len(tr.Messages)-1]
	if fa := final.Info.(*mapper.AssistantMessage); fa.Finish != agent.FinishError {
		t.Fatalf("readers see finish %q", fa.Finish)
	}
}

// A transcript whose turns all ended has nothing to settle.
func TestSettleNothingOpen(t *testing.T) {
	_, versions := scriptedSession(t)
	rb := NewReadback(mapper.Session{ID: "ses_fallback"})
	for i, v := range versions {
		rb.Add(int64(i+1), v.LocalID(), v.Plaintext)
	}
	if got := rb.Settle(agent.ReasonWrapperExited, 1); got != nil {
		t.Fatalf("settled %+v", got)
	}
}

// A reducer continuing a read-back session from NextPosition makes ids the
// session does not have yet, and keeps the root session's id.
func TestNextPositionAvoidsCollisions(t *testing.T) {
	_, rb := killedMidTurn(t)
	next := rb.NextPosition()
	if next == 0 {
		t.Fatal("no position")
	}
	old := map[string]bool{}
	tr := rb.Transcript()
	for _, m := range tr.Messages {
		old[m.Info.MessageID()] = true
		for _, p := range m.Parts {
			old[p.Base().ID] = true
		}
	}
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-k", Directory: "/w", FirstPosition: next})
	if red.RootID() != tr.Session.ID {
		t.Fatalf("root %s, read back %s", red.RootID(), tr.Session.ID)
	}
	// The same provider identities as the first run.
	red.Apply(&agent.UserPrompt{EventBase: agent.EventBase{Time: 5000}, PromptID: "p1", Text: "first"})
	red.Apply(&agent.TextFinal{EventBase: agent.EventBase{Time: 5100}, Message: "m1", Block: "0", Text: "Again."})
	for _, m := range red.Transcript().Messages {
		if old[m.Info.MessageID()] {
			t.Fatalf("message id %s reused", m.Info.MessageID())
		}
		for _, p := range m.Parts {
			if old[p.Base().ID] {
				t.Fatalf("part id %s reused", p.Base().ID)
			}
		}
	}
	if got := NewReadback(mapper.Session{ID: "x"}).NextPosition(); got != 0 {
		t.Fatalf("empty read-back: %d", got)
	}
}
