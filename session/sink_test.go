package session

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// RecordVersion is one version a memStore holds.
type RecordVersion struct {
	Record    string
	Version   int64
	Plaintext []byte
}

// LocalID is the localId the relay client stores the version under.
func (v RecordVersion) LocalID() string { return v.Record + "." + strconv.FormatInt(v.Version, 10) }

// memStore is an in-memory RecordStore; each Flush's versions are grouped
// into one "put" for assertions.
type memStore struct {
	mu     sync.Mutex
	last   map[string]int64
	puts   [][]RecordVersion
	open   bool // the current put is still being filled
	failed error
}

func (m *memStore) Enqueue(_ context.Context, rec string, build func(int64) ([]byte, error)) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed != nil {
		return 0, m.failed
	}
	v := m.last[rec] + 1
	body, err := build(v)
	if err != nil {
		return 0, err
	}
	m.last[rec] = v
	if !m.open {
		m.puts = append(m.puts, nil)
		m.open = true
	}
	m.puts[len(m.puts)-1] = append(m.puts[len(m.puts)-1], RecordVersion{rec, v, body})
	return v, nil
}

// endPut closes the current group (call after each Flush).
func (m *memStore) endPut() {
	m.mu.Lock()
	m.open = false
	m.mu.Unlock()
}

func (m *memStore) snapshotPuts() [][]RecordVersion {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]RecordVersion(nil), m.puts...)
}

func (m *memStore) lastPut(t *testing.T) []RecordVersion {
	t.Helper()
	if len(m.puts) == 0 {
		t.Fatal("nothing was put")
	}
	return m.puts[len(m.puts)-1]
}

type envelope struct {
	Kind    string          `json:"kind"`
	Version int64           `json:"version"`
	Info    json.RawMessage `json:"info"`
	Parts   []struct {
		Type  string `json:"type"`
		Text  string `json:"text"`
		State struct {
			Status string `json:"status"`
		} `json:"state"`
	} `json:"parts"`
	Session *struct {
		ID string `json:"id"`
	} `json:"session"`
}

func decodeEnv(t *testing.T, b []byte) envelope {
	t.Helper()
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("envelope %s: %v", b, err)
	}
	return e
}

func records(vs []RecordVersion) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Record)
	}
	return out
}

func TestSinkCoalescesStreamingAndFlushesStateChanges(t *testing.T) {
	ctx := context.Background()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w", ProviderID: "anthropic", ModelID: "m"})
	store := &memStore{last: map[string]int64{}}
	sink := NewSink(store, red)
	t0 := time.UnixMilli(1_000_000)
	apply := func(evs ...agent.Event) {
		for _, ev := range evs {
			sink.Observe(red.Apply(ev))
		}
	}

	apply(&agent.UserPrompt{EventBase: agent.EventBase{Time: 1000}, PromptID: "p1", Text: "hello"},
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"},
		&agent.TextDelta{Message: "m1", Block: "b0", Delta: "Hel"})
	if err := flushed(store, sink, ctx, t0, false); err != nil {
		t.Fatal(err)
	}
	first := store.lastPut(t)
	if len(first) != 3 {
		t.Fatalf("first flush wrote %v, want session, user message, assistant message", records(first))
	}
	kinds := []string{decodeEnv(t, first[0].Plaintext).Kind, decodeEnv(t, first[1].Plaintext).Kind, decodeEnv(t, first[2].Plaintext).Kind}
	if kinds[0] != KindSession || kinds[1] != KindMessage || kinds[2] != KindMessage {
		t.Fatalf("kinds %v", kinds)
	}
	asstRec := first[2].Record
	if first[2].Version != 1 || decodeEnv(t, first[2].Plaintext).Version != 1 {
		t.Fatalf("assistant version %d", first[2].Version)
	}

	// Streaming within the interval waits.
	apply(&agent.TextDelta{Message: "m1", Block: "b0", Delta: "lo"})
	if err := flushed(store, sink, ctx, t0.Add(200*time.Millisecond), false); err != nil {
		t.Fatal(err)
	}
	if len(store.puts) != 1 {
		t.Fatalf("a streaming change was sent inside the interval: %v", records(store.lastPut(t)))
	}
	due, ok := sink.NextDue(t0.Add(200 * time.Millisecond))
	if !ok || !due.Equal(t0.Add(time.Second)) {
		t.Fatalf("NextDue = %v, %v; want %v", due, ok, t0.Add(time.Second))
	}

	// A tool blocked on permission flushes at once.
	apply(&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: json.RawMessage(`{"command":"rm x"}`)},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"rm x"}}})
	due, ok = sink.NextDue(t0.Add(300 * time.Millisecond))
	if !ok || !due.Equal(t0.Add(300*time.Millisecond)) {
		t.Fatalf("NextDue after block = %v, %v", due, ok)
	}
	if err := flushed(store, sink, ctx, t0.Add(300*time.Millisecond), false); err != nil {
		t.Fatal(err)
	}
	second := store.lastPut(t)
	if len(second) != 1 || second[0].Record != asstRec || second[0].Version != 2 {
		t.Fatalf("second flush %v", second)
	}
	env := decodeEnv(t, second[0].Plaintext)
	var sawText, sawBlocked bool
	for _, p := range env.Parts {
		sawText = sawText || (p.Type == "text" && p.Text == "Hello")
		sawBlocked = sawBlocked || (p.Type == "tool" && p.State.Status == "blocked")
	}
	if !sawText || !sawBlocked {
		t.Fatalf("version 2 lacks the streamed text or the blocked tool: %s", second[0].Plaintext)
	}
	if sink.Pending() {
		t.Fatal("records still dirty after flush")
	}
}

func TestSinkVersionsContinueFromStoreAndSurviveFailures(t *testing.T) {
	ctx := context.Background()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay1"})
	store := &memStore{last: map[string]int64{}}
	sink := NewSink(store, red)
	sink.Observe(red.Apply(&agent.UserPrompt{PromptID: "p1", Text: "x"}))
	rootID := red.RootID()
	store.last[rootID] = 7 // written by an earlier process
	store.failed = errors.New("disk full")
	if err := flushed(store, sink, ctx, time.UnixMilli(0), true); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Flush err %v", err)
	}
	if !sink.Pending() {
		t.Fatal("a failed flush forgot its records")
	}
	store.failed = nil
	if err := flushed(store, sink, ctx, time.UnixMilli(0), true); err != nil {
		t.Fatal(err)
	}
	for _, v := range store.lastPut(t) {
		if v.Record == rootID && v.Version != 8 {
			t.Fatalf("session version %d, want 8 (after the stored 7)", v.Version)
		}
	}
	if got := store.lastPut(t); len(got) != 2 {
		t.Fatalf("wrote %v", records(got))
	}
}

func TestTruncatePart(t *testing.T) {
	big := strings.Repeat("é", 200) // 400 bytes
	p := &mapper.TextPart{PartBase: mapper.PartBase{ID: "prt_1"}, Text: big, Metadata: agent.Object{"k": "v"}}
	got := TruncatePart(p, 101).(*mapper.TextPart)
	if len(got.Text) != 100 || !utf8.ValidString(got.Text) {
		t.Fatalf("cut to %d bytes, valid=%v", len(got.Text), utf8.ValidString(got.Text))
	}
	if got.Metadata["truncated"] != true || got.Metadata["originalBytes"] != 400 || got.Metadata["k"] != "v" {
		t.Fatalf("metadata %v", got.Metadata)
	}
	if p.Text != big || len(p.Metadata) != 1 {
		t.Fatal("TruncatePart changed its input")
	}
	if same := TruncatePart(p, 1000); same != mapper.Part(p) {
		t.Fatal("a small part was copied")
	}
	tool := &mapper.ToolPart{State: mapper.ToolState{Status: mapper.StatusCompleted, Output: strings.Repeat("x", 50) + "✅"}}
	tt := TruncatePart(tool, 52).(*mapper.ToolPart)
	if tt.State.Output != strings.Repeat("x", 50) || tt.State.Metadata["originalBytes"] != 53 {
		t.Fatalf("tool output %q meta %v", tt.State.Output, tt.State.Metadata)
	}
}

// flushed runs one Flush as one group of versions in store.
func flushed(store *memStore, sink *Sink, ctx context.Context, now time.Time, force bool) error {
	defer store.endPut()
	return sink.Flush(ctx, now, force)
}

// asyncStore is a memStore whose versions commit when waited for; the
// commit of failRec fails once.
type asyncStore struct {
	*memStore
	failRec string
	waited  []string
}

func (a *asyncStore) EnqueueAsync(ctx context.Context, rec string, build func(int64) ([]byte, error)) (int64, func() error, error) {
	v, err := a.Enqueue(ctx, rec, build)
	if err != nil {
		return 0, nil, err
	}
	return v, func() error {
		a.waited = append(a.waited, rec)
		if rec == a.failRec {
			a.failRec = ""
			return errors.New("fsync failed")
		}
		return nil
	}, nil
}

// TestSinkAsyncStoreFailureKeepsLaterRecordsDirty: with an async store the
// sink queues every due record and then waits; a failed commit keeps that
// record and every later one dirty, in their order, and the records before
// it are done.
func TestSinkAsyncStoreFailureKeepsLaterRecordsDirty(t *testing.T) {
	ctx := context.Background()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay1"})
	mem := &memStore{last: map[string]int64{}}
	sink := NewSink(mem, red)
	sink.Observe(red.Apply(&agent.UserPrompt{PromptID: "p1", Text: "x"}))
	order := append([]string(nil), sink.order...)
	if len(order) != 2 {
		t.Fatalf("dirty records %v, want the session and the prompt", order)
	}
	store := &asyncStore{memStore: mem, failRec: order[1]}
	sink.store = store
	if err := sink.Flush(ctx, time.UnixMilli(0), true); err == nil || !strings.Contains(err.Error(), "fsync failed") {
		t.Fatalf("Flush err %v", err)
	}
	if got := sink.order; len(got) != 1 || got[0] != order[1] {
		t.Fatalf("still dirty %v, want [%s]", got, order[1])
	}
	if len(store.waited) != 2 {
		t.Fatalf("waited for %v, want both queued before waiting", store.waited)
	}
	if err := sink.Flush(ctx, time.UnixMilli(0), true); err != nil || sink.Pending() {
		t.Fatalf("second Flush: %v, pending %v", err, sink.Pending())
	}
}

// A part new to a message already stored is written at once, even inside
// the streaming interval: a follower learns of it (its kind and place)
// with its first words, and the live deltas then extend it. Its growth
// after that waits for the interval, as any streaming does.
func TestSinkWritesANewPartAtOnce(t *testing.T) {
	ctx := context.Background()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay1", Directory: "/w", ProviderID: "anthropic", ModelID: "m"})
	store := &memStore{last: map[string]int64{}}
	sink := NewSink(store, red)
	t0 := time.UnixMilli(1_000_000)
	apply := func(evs ...agent.Event) {
		for _, ev := range evs {
			sink.Observe(red.Apply(ev))
		}
	}
	apply(&agent.UserPrompt{PromptID: "p1", Text: "hello"}, &agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{Message: "m1"}, &agent.ReasoningDelta{Message: "m1", Block: "r0", Delta: "Hmm"})
	if err := flushed(store, sink, ctx, t0, false); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		evs   []agent.Event
		at    time.Duration
		parts []string // the new version's part types and texts, none when nothing is due
	}{
		{"the reasoning grows", []agent.Event{&agent.ReasoningDelta{Message: "m1", Block: "r0", Delta: "."}}, 100 * time.Millisecond, nil},
		{"a text part starts", []agent.Event{&agent.TextDelta{Message: "m1", Block: "b0", Delta: "Hi"}}, 200 * time.Millisecond,
			[]string{"step-start:", "reasoning:Hmm.", "text:Hi"}},
		{"the text grows", []agent.Event{&agent.TextDelta{Message: "m1", Block: "b0", Delta: " there"}}, 300 * time.Millisecond, nil},
		{"a tool call starts", []agent.Event{&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash"}}, 400 * time.Millisecond,
			[]string{"step-start:", "reasoning:Hmm.", "text:Hi there", "tool:"}},
	}
	for _, s := range steps {
		before := len(store.snapshotPuts())
		apply(s.evs...)
		if err := flushed(store, sink, ctx, t0.Add(s.at), false); err != nil {
			t.Fatal(err)
		}
		puts := store.snapshotPuts()
		if s.parts == nil {
			if len(puts) != before {
				t.Fatalf("%s: wrote %v inside the interval", s.name, records(puts[len(puts)-1]))
			}
			continue
		}
		if len(puts) != before+1 || len(puts[len(puts)-1]) != 1 {
			t.Fatalf("%s: wrote %d puts, want one version of the message", s.name, len(puts)-before)
		}
		var got []string
		for _, p := range decodeEnv(t, puts[len(puts)-1][0].Plaintext).Parts {
			got = append(got, p.Type+":"+p.Text)
		}
		if strings.Join(got, "|") != strings.Join(s.parts, "|") {
			t.Fatalf("%s: version has parts %q, want %q", s.name, got, s.parts)
		}
	}
}
