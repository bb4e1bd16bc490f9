package mapper

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper/schema"
)

// goldenConfig is the reducer configuration of every golden case; a case
// may add rules in config.json ({"rules": [...]}).
func goldenConfig(t *testing.T, dir string) Config {
	cfg := Config{
		SessionID:  "relay-golden-1",
		ProjectID:  "prj_golden",
		Directory:  "/home/user/app",
		Agent:      "build",
		ProviderID: "anthropic",
		ModelID:    "claude-sonnet-4-6",
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if os.IsNotExist(err) {
		return cfg
	}
	if err != nil {
		t.Fatal(err)
	}
	var extra struct {
		Rules []PermissionRule `json:"rules"`
		Title string           `json:"title"`
	}
	if err := json.Unmarshal(raw, &extra); err != nil {
		t.Fatalf("config.json: %v", err)
	}
	cfg.Rules, cfg.Title = extra.Rules, extra.Title
	return cfg
}

// loadEvents reads events.json, a JSON array of agent events in their JSON
// form. An element DecodeEvent refuses becomes a DroppedInput, as the
// traffic-log replayer records it.
func loadEvents(t *testing.T, path string) []agent.Event {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	evs := make([]agent.Event, 0, len(items))
	for i, item := range items {
		ev, err := agent.DecodeEvent(item)
		if err != nil {
			ee, ok := err.(*agent.EventError)
			if !ok {
				t.Fatalf("%s[%d]: %v is not an *EventError", path, i, err)
			}
			ev = &agent.DroppedInput{Dropped: ee.Dropped("events.json", int64(i+1), item)}
		}
		evs = append(evs, ev)
	}
	return evs
}

// runEvents applies evs to a new reducer and returns it and every bus event.
func runEvents(cfg Config, evs []agent.Event) (*Reducer, []BusEvent) {
	r := NewReducer(cfg)
	var bus []BusEvent
	for _, ev := range evs {
		bus = append(bus, r.Apply(ev)...)
	}
	return r, bus
}

func encodeIndented(t *testing.T, tr Transcript) []byte {
	t.Helper()
	raw, err := EncodeTranscript(tr)
	if err != nil {
		t.Fatalf("encode transcript: %v", err)
	}
	return golden.Indent(t, raw)
}

func encodeBusLog(t *testing.T, evs []BusEvent) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, ev := range evs {
		raw, err := EncodeChange(ev)
		if err != nil {
			t.Fatalf("encode change event %s: %v", ev.EventType(), err)
		}
		buf.Write(raw)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// isDelta reports whether ev is an append, the one kind of event that is
// not idempotent on its own (see Event).
func isDelta(ev agent.Event) bool {
	switch ev.(type) {
	case *agent.TextDelta, *agent.ReasoningDelta, *agent.ToolInputDelta:
		return true
	}
	return false
}

// checkTranscript asserts what must hold of every transcript the reducer
// builds: every part and message valid (tool states included), parts owned
// by their message and session, ids unique and ascending within a message,
// the step-start first and the step-finish last of an assistant message,
// the document matches the JSON schema (when v is not nil) and decodes
// back to the same bytes.
func checkTranscript(t testing.TB, v *schema.Validator, tr Transcript) {
	t.Helper()
	seen := map[string]bool{}
	var walk func(tr *Transcript)
	walk = func(tr *Transcript) {
		for mi, m := range tr.Messages {
			if err := ValidateMessage(m.Info); err != nil {
				t.Fatalf("message %d: %v", mi, err)
			}
			id := m.Info.MessageID()
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
			if mi > 0 && tr.Messages[mi-1].Info.MessageID() >= id {
				t.Fatalf("message ids not ascending: %s then %s", tr.Messages[mi-1].Info.MessageID(), id)
			}
			for pi, p := range m.Parts {
				if err := ValidatePart(p); err != nil {
					t.Fatalf("message %s part %d: %v", id, pi, err)
				}
				b := p.Base()
				if b.MessageID != id || b.SessionID != tr.Session.ID {
					t.Fatalf("part %s owned by %s/%s, in %s/%s", b.ID, b.SessionID, b.MessageID, tr.Session.ID, id)
				}
				if seen[b.ID] {
					t.Fatalf("duplicate id %s", b.ID)
				}
				seen[b.ID] = true
				if pi > 0 && m.Parts[pi-1].Base().ID >= b.ID && p.PartType() != PartStepFinish {
					t.Fatalf("part ids not ascending in %s: %s then %s", id, m.Parts[pi-1].Base().ID, b.ID)
				}
			}
			if a, ok := m.Info.(*AssistantMessage); ok {
				if len(m.Parts) == 0 || m.Parts[0].PartType() != PartStepStart {
					t.Fatalf("assistant message %s does not start with step-start", id)
				}
				last := m.Parts[len(m.Parts)-1]
				closed := a.Time.Completed != nil
				if closed != (last.PartType() == PartStepFinish) || (closed && a.Finish == "") {
					t.Fatalf("assistant message %s: completed=%v finish=%q last part %s", id, closed, a.Finish, last.PartType())
				}
				if closed && last.(*StepFinishPart).Reason != a.Finish {
					t.Fatalf("assistant message %s: finish %q, step-finish %q", id, a.Finish, last.(*StepFinishPart).Reason)
				}
				if a.Finish == agent.FinishError && a.Error == nil {
					t.Fatalf("assistant message %s finished error without an error", id)
				}
			}
		}
		for i := range tr.Children {
			c := &tr.Children[i]
			if c.Session.ParentID != tr.Session.ID {
				t.Fatalf("child %s has parent %s, want %s", c.Session.ID, c.Session.ParentID, tr.Session.ID)
			}
			walk(c)
		}
	}
	walk(&tr)
	raw, err := EncodeTranscript(tr)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if v != nil {
		if err := v.Transcript(raw); err != nil {
			t.Fatalf("transcript does not match the JSON schema: %v", err)
		}
	}
	back, rep, err := DecodeTranscript(raw)
	if err != nil {
		t.Fatalf("decode own transcript: %v", err)
	}
	_ = rep
	again, err := EncodeTranscript(back)
	if err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if !bytes.Equal(raw, again) {
		t.Fatalf("transcript does not survive a decode/encode round trip:\n%s", golden.Diff(raw, again))
	}
}

// noOpenTools asserts that nothing is left spinning.
func noOpenTools(t *testing.T, tr Transcript) {
	t.Helper()
	for _, m := range tr.Messages {
		if a, ok := m.Info.(*AssistantMessage); ok && a.Time.Completed == nil {
			t.Errorf("assistant message %s still open", a.ID)
		}
		for _, p := range m.Parts {
			if tp, ok := p.(*ToolPart); ok && tp.State.Status.Open() {
				t.Errorf("tool %s still %s", tp.CallID, tp.State.Status)
			}
		}
	}
	for _, c := range tr.Children {
		noOpenTools(t, c)
	}
}

// TestReducerGolden runs every case under testdata/reducer: events.json in,
// expected.json (the transcript document) and bus.jsonl (the bus events,
// one per line, as seed 001's SSE payloads) out. Each case is also run
// twice to prove determinism, and once with every non-delta event applied
// twice to prove idempotency.
func TestReducerGolden(t *testing.T) {
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	golden.Cases(t, filepath.Join("testdata", "reducer"), func(t *testing.T, dir string) {
		cfg := goldenConfig(t, dir)
		evs := loadEvents(t, filepath.Join(dir, "events.json"))
		r, bus := runEvents(cfg, evs)
		tr := r.Transcript()
		checkTranscript(t, v, tr)
		if len(evs) > 0 {
			if _, ended := evs[len(evs)-1].(*agent.TurnEnded); ended {
				noOpenTools(t, tr)
			}
		}
		doc := encodeIndented(t, tr)
		busLog := encodeBusLog(t, bus)
		golden.Check(t, filepath.Join(dir, "expected.json"), doc)
		golden.Check(t, filepath.Join(dir, "bus.jsonl"), busLog)

		// Determinism: the same events give the same bytes.
		r2, bus2 := runEvents(cfg, evs)
		if got := encodeIndented(t, r2.Transcript()); !bytes.Equal(got, doc) {
			t.Errorf("second run differs:\n%s", golden.Diff(doc, got))
		}
		if got := encodeBusLog(t, bus2); !bytes.Equal(got, busLog) {
			t.Errorf("second run's bus differs:\n%s", golden.Diff(busLog, got))
		}

		// Idempotency: a repeated event changes nothing and publishes
		// nothing.
		var doubled []agent.Event
		for _, ev := range evs {
			doubled = append(doubled, ev)
			if !isDelta(ev) {
				doubled = append(doubled, ev)
			}
		}
		r3, bus3 := runEvents(cfg, doubled)
		if got := encodeIndented(t, r3.Transcript()); !bytes.Equal(got, doc) {
			t.Errorf("repeating every event changed the transcript:\n%s", golden.Diff(doc, got))
		}
		if got := encodeBusLog(t, bus3); !bytes.Equal(got, busLog) {
			t.Errorf("repeating every event changed the bus:\n%s", golden.Diff(busLog, got))
		}

		// Every message's own snapshot matches the transcript.
		var all []MessageWithParts
		var collect func(tr Transcript)
		collect = func(tr Transcript) {
			all = append(all, tr.Messages...)
			for _, c := range tr.Children {
				collect(c)
			}
		}
		collect(tr)
		for _, m := range all {
			got, ok := r.Message(m.Info.MessageID())
			if !ok {
				t.Fatalf("Message(%s) not found", m.Info.MessageID())
			}
			a, _ := EncodeMessageWithParts(got)
			b, _ := EncodeMessageWithParts(m)
			if !bytes.Equal(a, b) {
				t.Fatalf("Message(%s) differs from the transcript", m.Info.MessageID())
			}
			if err := v.MessageWithParts(a); err != nil {
				t.Fatalf("Message(%s) does not match the JSON schema: %v", m.Info.MessageID(), err)
			}
		}
	})
}
