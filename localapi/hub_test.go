package localapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/sse"
	"github.com/happy-dev/happy/mapper"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// frames reads SSE bytes back with internal/sse and returns one line per
// frame: "event data" (retry-only frames as "retry N").
func frames(t *testing.T, b []byte) []string {
	t.Helper()
	r, err := sse.NewReader(bytes.NewReader(b), sse.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		f, ref, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if ref != nil {
			t.Fatalf("refusal: %v", ref)
		}
		if f.HasRetry && !f.HasData {
			out = append(out, fmt.Sprintf("retry %d", f.Retry))
			continue
		}
		out = append(out, f.Event+" "+f.Data)
	}
}

func textPart(id, text string) *mapper.TextPart {
	return &mapper.TextPart{PartBase: mapper.PartBase{ID: id, SessionID: "ses_1", MessageID: "msg_1"}, Text: text}
}

func delta(id, d string) *mapper.MessagePartDelta {
	return &mapper.MessagePartDelta{SessionID: "ses_1", MessageID: "msg_1", PartID: id, Field: "text", Delta: d}
}

func status(n int) *mapper.SessionStatus {
	return &mapper.SessionStatus{SessionID: "ses_1", Status: mapper.SessionStatusInfo{Type: mapper.SessionRetry, Attempt: n}}
}

func take(t *testing.T, s *Subscriber) []string {
	t.Helper()
	b, err := s.Take(nil)
	if err != nil {
		t.Fatalf("take: %v", err)
	}
	return frames(t, b)
}

func partUpdated(id, text string, dropped int) string {
	d := ""
	if dropped > 0 {
		d = fmt.Sprintf(`,"droppedDeltas":%d`, dropped)
	}
	return fmt.Sprintf(`message.part.updated {"type":"message.part.updated","properties":{"part":{"id":%q,"sessionID":"ses_1","messageID":"msg_1","type":"text","text":%q}%s}}`, id, text, d)
}

func deltaLine(id, d string) string {
	return fmt.Sprintf(`message.part.delta {"type":"message.part.delta","properties":{"sessionID":"ses_1","messageID":"msg_1","partID":%q,"field":"text","delta":%q}}`, id, d)
}

func statusLine(n int) string {
	return fmt.Sprintf(`session.status {"type":"session.status","properties":{"sessionID":"ses_1","status":{"type":"retry","attempt":%d}}}`, n)
}

func TestHubFansOutInOrder(t *testing.T) {
	h := NewHub(HubOptions{})
	a, b := h.Subscribe(), h.Subscribe()
	defer a.Close()
	defer b.Close()
	h.Publish([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_1", "he")}, delta("prt_1", "llo"), status(1)})
	want := []string{partUpdated("prt_1", "he", 0), deltaLine("prt_1", "llo"), statusLine(1)}
	select {
	case <-a.Ready():
	default:
		t.Fatal("subscriber a not signalled")
	}
	for name, s := range map[string]*Subscriber{"a": a, "b": b} {
		if got := take(t, s); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s got\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if got := take(t, s); len(got) != 0 {
			t.Errorf("%s: second take %q", name, got)
		}
	}
	// A late subscriber sees only what follows.
	c := h.Subscribe()
	defer c.Close()
	h.Publish([]mapper.BusEvent{status(2)})
	if got := take(t, c); len(got) != 1 || got[0] != statusLine(2) {
		t.Errorf("late subscriber %q", got)
	}
	if st := h.Stats(); st.Subscribers != 3 || st.Published != 4 || st.DroppedDeltas != 0 || st.Sessions != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestHubDropsDeltasAndResyncsThePart(t *testing.T) {
	h := NewHub(HubOptions{MaxDeltas: 2})
	slow, fast := h.Subscribe(), h.Subscribe()
	defer slow.Close()
	defer fast.Close()
	h.Publish([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_1", "a")}})
	var fastGot []string
	fastGot = append(fastGot, take(t, fast)...)
	for _, d := range []string{"b", "c", "d", "e", "f"} {
		h.Publish([]mapper.BusEvent{delta("prt_1", d)})
		fastGot = append(fastGot, take(t, fast)...) // keeps up: gets every delta
	}
	want := []string{
		partUpdated("prt_1", "a", 0), deltaLine("prt_1", "b"), deltaLine("prt_1", "c"),
		// d, e, f dropped; the part as the hub knows it, with the count.
		partUpdated("prt_1", "abcdef", 3),
	}
	if got := take(t, slow); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("slow got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if slow.Dropped() != 3 || fast.Dropped() != 0 {
		t.Errorf("dropped slow %d fast %d", slow.Dropped(), fast.Dropped())
	}
	if len(fastGot) != 6 || fastGot[5] != deltaLine("prt_1", "f") {
		t.Errorf("fast got %q", fastGot)
	}
	if st := h.Stats(); st.DroppedDeltas != 3 || st.Resynced != 1 || st.Disconnected != 0 {
		t.Errorf("stats %+v", st)
	}
	// Caught up: deltas flow again.
	h.Publish([]mapper.BusEvent{delta("prt_1", "g")})
	if got := take(t, slow); len(got) != 1 || got[0] != deltaLine("prt_1", "g") {
		t.Errorf("after catching up %q", got)
	}
}

func TestHubNextPartUpdateCarriesTheDropCount(t *testing.T) {
	h := NewHub(HubOptions{MaxDeltas: 1})
	s := h.Subscribe()
	defer s.Close()
	h.Publish([]mapper.BusEvent{
		&mapper.MessagePartUpdated{Part: textPart("prt_1", "a")},
		delta("prt_1", "b"), delta("prt_1", "c"), // c dropped
		delta("prt_2", "x"), // another part: dropped too (queue full), its own count
		&mapper.MessagePartUpdated{Part: textPart("prt_1", "abc!")},
	})
	want := []string{
		partUpdated("prt_1", "a", 0), deltaLine("prt_1", "b"),
		partUpdated("prt_1", "abc!", 1), // the published update stands for the dropped delta
	}
	// prt_2 is unknown to the hub (no part.updated ever): nothing to
	// resync it with.
	if got := take(t, s); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st := h.Stats(); st.DroppedDeltas != 2 || st.Resynced != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestHubNeverDropsStateAndBoundsASlowSubscriber(t *testing.T) {
	var logs bytes.Buffer
	h := NewHub(HubOptions{MaxPending: 3, MaxDeltas: 100, Log: zerologTo(&logs)})
	slow, fast := h.Subscribe(), h.Subscribe()
	defer fast.Close()
	var fastGot []string
	for i := 1; i <= 3; i++ {
		h.Publish([]mapper.BusEvent{status(i)})
		fastGot = append(fastGot, take(t, fast)...)
	}
	select {
	case <-slow.Done():
		t.Fatal("slow disconnected at the bound")
	default:
	}
	h.Publish([]mapper.BusEvent{status(4)}) // past MaxPending for slow
	fastGot = append(fastGot, take(t, fast)...)
	select {
	case <-slow.Done():
	default:
		t.Fatal("slow not disconnected past the bound")
	}
	b, err := slow.Take(nil)
	if !errors.Is(err, ErrTooSlow) || len(b) != 0 || !strings.Contains(err.Error(), "more than 3 state changes waiting") {
		t.Fatalf("slow take %q %v", b, err)
	}
	if len(fastGot) != 4 || fastGot[3] != statusLine(4) {
		t.Errorf("fast got %q", fastGot)
	}
	if st := h.Stats(); st.Disconnected != 1 || st.Subscribers != 1 {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(logs.String(), `"reason":"more than 3 state changes waiting"`) {
		t.Errorf("log %s", logs.String())
	}
	slow.Close() // after a disconnection: a no-op
}

func TestHubBoundsPendingBytes(t *testing.T) {
	big := strings.Repeat("x", 600)
	h := NewHub(HubOptions{MaxPendingBytes: 2000})
	s := h.Subscribe()
	h.Publish([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_1", big)}}) // ~750 bytes
	h.Publish([]mapper.BusEvent{delta("prt_1", big)})                                      // past half: dropped
	select {
	case <-s.Done():
		t.Fatal("disconnected by a delta")
	default:
	}
	h.Publish([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_2", big)}})
	h.Publish([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: textPart("prt_3", big)}}) // past 2000 bytes
	if _, err := s.Take(nil); !errors.Is(err, ErrTooSlow) || !strings.Contains(err.Error(), "more than 2000 bytes waiting") {
		t.Fatalf("take: %v", err)
	}
	if st := h.Stats(); st.DroppedDeltas != 1 || st.Disconnected != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestHubCloseEndsSubscribers(t *testing.T) {
	h := NewHub(HubOptions{})
	s := h.Subscribe()
	h.Close()
	if _, err := s.Take(nil); !errors.Is(err, ErrHubClosed) {
		t.Fatalf("take after close: %v", err)
	}
	late := h.Subscribe()
	<-late.Done()
	if _, err := late.Take(nil); !errors.Is(err, ErrHubClosed) {
		t.Fatalf("late: %v", err)
	}
	s2 := NewHub(HubOptions{}).Subscribe()
	s2.Close()
	if _, err := s2.Take(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

func TestHubRemovals(t *testing.T) {
	h := NewHub(HubOptions{MaxDeltas: 1})
	s := h.Subscribe()
	defer s.Close()
	info := &mapper.AssistantMessage{ID: "msg_1", SessionID: "ses_1", Role: mapper.RoleAssistant}
	h.Publish([]mapper.BusEvent{
		&mapper.SessionCreated{Info: mapper.Session{ID: "ses_1", Title: "t"}},
		&mapper.MessageUpdated{Info: info},
		&mapper.MessagePartUpdated{Part: textPart("prt_1", "a")},
		&mapper.MessagePartUpdated{Part: textPart("prt_2", "b")},
		delta("prt_2", "c"), delta("prt_2", "d"), // d dropped
	})
	h.RemovePart("ses_1", "msg_1", "prt_2") // no resync of a removed part
	got := take(t, s)
	if len(got) != 6 || got[5] != `message.part.removed {"type":"message.part.removed","properties":{"messageID":"msg_1","partID":"prt_2","sessionID":"ses_1"}}` {
		t.Fatalf("got %q", got)
	}
	msgs, ok := h.Messages("ses_1")
	if !ok || len(msgs) != 1 || len(msgs[0].Parts) != 1 || msgs[0].Parts[0].Base().ID != "prt_1" {
		t.Fatalf("messages %+v %v", msgs, ok)
	}
	h.RemoveMessage("ses_1", "msg_1")
	if got := take(t, s); len(got) != 1 || got[0] != `message.removed {"type":"message.removed","properties":{"messageID":"msg_1","sessionID":"ses_1"}}` {
		t.Fatalf("got %q", got)
	}
	if msgs, ok := h.Messages("ses_1"); !ok || len(msgs) != 0 {
		t.Fatalf("after removal %+v %v", msgs, ok)
	}
	if _, ok := h.Messages("ses_nope"); ok {
		t.Fatal("unknown session found")
	}
}

// reduce runs agent events through a real reducer, publishing every change
// to the hub, and returns the reducer.
func reduce(t *testing.T, h *Hub, sessionID string, evs ...agent.Event) *mapper.Reducer {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: sessionID, ProjectID: "/p", Directory: "/p", Agent: "build", ProviderID: "test"})
	for _, ev := range evs {
		h.Publish(red.Apply(ev))
	}
	return red
}

func script(n int) []agent.Event {
	in, _ := json.Marshal(map[string]string{"command": "ls"})
	call := fmt.Sprintf("call-%d", n)
	return []agent.Event{
		&agent.SessionInfo{Title: fmt.Sprintf("session %d", n)},
		&agent.UserPrompt{PromptID: "p1", Text: "list"},
		&agent.TurnStarted{TurnID: "1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "Let me "},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "look."},
		&agent.ToolCall{Message: "m1", CallID: call, Tool: "bash", Input: in},
		&agent.ToolRunning{CallID: call},
		&agent.ToolBlocked{CallID: call, Permission: &agent.PermissionRequest{ID: "req", Permission: "bash", Patterns: []string{"ls"}}},
		&agent.ToolResolved{CallID: call, Decision: agent.DecisionOnce},
		&agent.ToolCompleted{CallID: call, Output: "a\nb", Title: "ls"},
		&agent.TodosUpdated{Todos: []agent.Todo{{Content: "x", Status: "pending", Priority: "high"}}},
		&agent.StepFinished{Message: "m1", Finish: agent.FinishToolCalls},
		&agent.TextDelta{Message: "m2", Block: "0", Delta: "Two "},
		&agent.TextDelta{Message: "m2", Block: "0", Delta: "files."},
		&agent.StepFinished{Message: "m2", Finish: agent.FinishStop},
		&agent.TurnEnded{TurnID: "1", Reason: agent.TurnCompleted},
	}
}

// TestHubDocumentsEqualTheReducers: two sessions (a daemon's) feed one hub;
// what GET /session and GET /session/{id}/message serve equals each
// reducer's transcript.
func TestHubDocumentsEqualTheReducers(t *testing.T) {
	h := NewHub(HubOptions{})
	red1 := reduce(t, h, "relay-1", script(1)...)
	red2 := reduce(t, h, "relay-2", script(2)...)
	var want []mapper.Session
	for _, red := range []*mapper.Reducer{red1, red2} {
		tr := red.Transcript()
		want = append(want, tr.Session)
		got, ok := h.Messages(tr.Session.ID)
		if !ok {
			t.Fatalf("session %s unknown", tr.Session.ID)
		}
		gb, err := EncodeMessages(got)
		if err != nil {
			t.Fatal(err)
		}
		wb, err := EncodeMessages(tr.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(gb, wb) {
			t.Errorf("messages of %s:\n got %s\nwant %s", tr.Session.ID, gb, wb)
		}
		todos, _ := h.Todos(tr.Session.ID)
		if len(todos) != 1 || todos[0].Content != "x" {
			t.Errorf("todos %+v", todos)
		}
		if len(tr.Messages) != 3 {
			t.Errorf("reducer made %d messages", len(tr.Messages))
		}
	}
	gs, _ := EncodeSessions(h.Sessions())
	ws, _ := EncodeSessions(want)
	if !bytes.Equal(gs, ws) {
		t.Errorf("sessions:\n got %s\nwant %s", gs, ws)
	}
}

func zerologTo(w io.Writer) zerolog.Logger { return zerolog.New(w) }

// Sessions publishing from their own goroutines (a daemon's) reach a
// subscriber taking concurrently with every change, each session's in its
// order.
func TestHubManyPublishers(t *testing.T) {
	h := NewHub(HubOptions{})
	s := h.Subscribe()
	defer s.Close()
	const sessions, changes = 4, 200
	done := make(chan struct{})
	for i := range sessions {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 1; n <= changes; n++ {
				h.Publish([]mapper.BusEvent{&mapper.SessionStatus{SessionID: fmt.Sprintf("ses_%d", i),
					Status: mapper.SessionStatusInfo{Type: mapper.SessionRetry, Attempt: n}}})
			}
		}()
	}
	var all []byte
	for finished := 0; finished < sessions; {
		select {
		case <-s.Ready():
			var err error
			if all, err = s.Take(all); err != nil {
				t.Fatal(err)
			}
		case <-done:
			finished++
		}
	}
	all, _ = s.Take(all)
	last := map[string]int{}
	for _, f := range frames(t, all) {
		var ev struct {
			Properties struct {
				SessionID string `json:"sessionID"`
				Status    struct {
					Attempt int `json:"attempt"`
				} `json:"status"`
			} `json:"properties"`
		}
		_, data, _ := strings.Cut(f, " ")
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		p := ev.Properties
		if p.Status.Attempt != last[p.SessionID]+1 {
			t.Fatalf("%s: attempt %d after %d", p.SessionID, p.Status.Attempt, last[p.SessionID])
		}
		last[p.SessionID] = p.Status.Attempt
	}
	for i := range sessions {
		if last[fmt.Sprintf("ses_%d", i)] != changes {
			t.Fatalf("got %v", last)
		}
	}
}
