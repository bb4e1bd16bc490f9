package compat

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an in-memory outbox: records in enqueue order, last versions.
type memStore struct {
	mu       sync.Mutex
	versions map[string]int64
	rows     []row
	fail     error
}

type row struct {
	record  string
	version int64
	body    []byte
}

func newMemStore() *memStore { return &memStore{versions: map[string]int64{}} }

func (s *memStore) Enqueue(_ context.Context, record string, build func(int64) ([]byte, error)) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return 0, s.fail
	}
	v := s.versions[record] + 1
	b, err := build(v)
	if err != nil {
		return 0, err
	}
	s.versions[record] = v
	s.rows = append(s.rows, row{record, v, b})
	return v, nil
}

func (s *memStore) LastVersion(record string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[record]
}

func (s *memStore) legacy() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]byte
	for _, r := range s.rows {
		if strings.HasPrefix(r.record, RecordPrefix) {
			out = append(out, r.body)
		}
	}
	return out
}

func (s *memStore) canonical() []row {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []row
	for _, r := range s.rows {
		if !strings.HasPrefix(r.record, RecordPrefix) {
			out = append(out, r)
		}
	}
	return out
}

// relayState is the agentState on a fake relay: every write goes through
// the writer's updater with the current value, as compare-and-set does.
type relayState struct {
	mu     sync.Mutex
	value  json.RawMessage
	writes int
}

func (r *relayState) update(_ context.Context, fn Updater) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	next, err := fn(r.value)
	if err != nil {
		return err
	}
	r.value, r.writes = next, r.writes+1
	return nil
}

var clock = func() time.Time { return time.UnixMilli(1_800_000_000_000) }

func loadEvents(t *testing.T, path string) []agent.Event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []agent.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		ev, err := agent.DecodeEvent(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// replay reduces a capture's agent events through the reducer and a sink
// with (or without) the compat writer, as the runner does.
type replayed struct {
	store  *memStore
	state  *relayState
	w      *Writer
	states []string // the owned agentState after each change, as JSON
}

func replay(t *testing.T, flavor string, evs []agent.Event, on bool) replayed {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-compat-1", ProjectID: "prj", Directory: "/home/dev/run/work",
		Agent: "build", ProviderID: "fake", Source: flavor})
	rp := replayed{store: newMemStore(), state: &relayState{}}
	sink := session.NewSink(rp.store, red)
	if on {
		rp.w = New(Options{Store: rp.store, RootID: red.RootID(), Flavor: flavor, Now: clock, UpdateState: rp.state.update})
		sink.SetCompanion(rp.w)
	}
	last := ""
	for _, ev := range evs {
		sink.Observe(red.Apply(ev))
		if err := sink.Flush(context.Background(), clock(), true); err != nil {
			t.Fatal(err)
		}
		if on {
			b, _ := Merge(nil, rp.w.Snapshot())
			if s := string(b); s != last {
				rp.states, last = append(rp.states, s), s
			}
		}
	}
	if on {
		if err := rp.w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := rp.w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return rp
}

// captureEvents are a capture's events, with the prompt the runner records
// first where the capture (Claude's stream-json) has none.
func captureEvents(t *testing.T, name string) []agent.Event {
	evs := loadEvents(t, filepath.Join("testdata", "replay", name, "events.jsonl"))
	for _, ev := range evs {
		if _, ok := ev.(*agent.UserPrompt); ok {
			return evs
		}
	}
	return append([]agent.Event{&agent.UserPrompt{PromptID: "relay:1", Text: "Run `echo hi > hi.txt`"}}, evs...)
}

var flavors = map[string]string{"claude": "claude", "codex": "codex", "acp": "codex-acp"}

// TestReplayLegacyEnvelopes replays a Claude, a Codex and an ACP capture:
// every legacy record passes the app's shapes, the sequence is the golden
// one (legacy.jsonl, -update), and the agentState transitions are the
// golden ones (agentstate.jsonl).
func TestReplayLegacyEnvelopes(t *testing.T) {
	for name, flavor := range flavors {
		t.Run(name, func(t *testing.T) {
			rp := replay(t, flavor, captureEvents(t, name), true)
			recs := rp.store.legacy()
			var buf bytes.Buffer
			for _, r := range recs {
				if err := validateRecord(r); err != nil {
					t.Errorf("%s: %v", r, err)
				}
				buf.Write(r)
				buf.WriteByte('\n')
			}
			checkSequence(t, recs)
			golden.Check(t, filepath.Join("testdata", "replay", name, "legacy.jsonl"), buf.Bytes())
			var sb bytes.Buffer
			for _, s := range rp.states {
				if err := validateAgentState([]byte(s)); err != nil {
					t.Errorf("agentState %s: %v", s, err)
				}
				sb.WriteString(s + "\n")
			}
			golden.Check(t, filepath.Join("testdata", "replay", name, "agentstate.jsonl"), sb.Bytes())
			if rp.state.value == nil && len(rp.states) > 1 {
				t.Errorf("the agentState changed but was never written")
			}
			if err := validateAgentState(rp.state.value); rp.state.value != nil && err != nil {
				t.Errorf("relay agentState %s: %v", rp.state.value, err)
			}
		})
	}
}

// checkSequence checks what the app relies on across records: unique ids,
// every turn started before its content and ended once, one tool result per
// call after its start.
func checkSequence(t *testing.T, recs [][]byte) {
	t.Helper()
	ids := map[string]bool{}
	open := map[string]bool{}
	ended := map[string]bool{}
	started := map[string]bool{}
	results := map[string]int{}
	for _, r := range recs {
		var m struct {
			Role    string `json:"role"`
			Content struct {
				ID   string `json:"id"`
				Role string `json:"role"`
				Turn string `json:"turn"`
				Ev   struct {
					T    string `json:"t"`
					Call string `json:"call"`
				} `json:"ev"`
				Data struct {
					CallID string `json:"callId"`
					ID     string `json:"id"`
				} `json:"data"`
			} `json:"content"`
		}
		if err := json.Unmarshal(r, &m); err != nil {
			t.Fatal(err)
		}
		id := m.Content.ID + m.Content.Data.ID
		if ids[id] {
			t.Errorf("id %s twice", id)
		}
		ids[id] = true
		if m.Role == "agent" {
			if !started[m.Content.Data.CallID] {
				t.Errorf("result of %s before its start", m.Content.Data.CallID)
			}
			results[m.Content.Data.CallID]++
			continue
		}
		turn := m.Content.Turn
		switch m.Content.Ev.T {
		case "turn-start":
			if open[turn] || ended[turn] {
				t.Errorf("turn %s started twice", turn)
			}
			open[turn] = true
		case "turn-end":
			if !open[turn] {
				t.Errorf("turn %s ended but not open", turn)
			}
			open[turn], ended[turn] = false, true
		default:
			if m.Content.Role == "agent" && !open[turn] {
				t.Errorf("%s in turn %s, which is not open", m.Content.Ev.T, turn)
			}
			if m.Content.Ev.T == "tool-call-start" {
				started[m.Content.Ev.Call] = true
			}
		}
	}
	for turn, o := range open {
		if o {
			t.Errorf("turn %s never ended", turn)
		}
	}
	for call, n := range results {
		if n != 1 {
			t.Errorf("call %s has %d results", call, n)
		}
	}
	for call := range started {
		if results[call] != 1 {
			t.Errorf("call %s has no result", call)
		}
	}
}

// TestCanonicalUnchangedByCompat: the canonical records are byte for byte
// the same with compat on and off.
func TestCanonicalUnchangedByCompat(t *testing.T) {
	for name, flavor := range flavors {
		t.Run(name, func(t *testing.T) {
			evs := captureEvents(t, name)
			on, off := replay(t, flavor, evs, true), replay(t, flavor, evs, false)
			a, b := on.store.canonical(), off.store.canonical()
			if len(a) != len(b) || len(a) == 0 {
				t.Fatalf("%d canonical versions on, %d off", len(a), len(b))
			}
			for i := range a {
				if a[i].record != b[i].record || a[i].version != b[i].version || !bytes.Equal(a[i].body, b[i].body) {
					t.Fatalf("version %d differs:\non  %s %d %s\noff %s %d %s", i, a[i].record, a[i].version, a[i].body, b[i].record, b[i].version, b[i].body)
				}
			}
			if len(on.store.legacy()) == 0 || len(off.store.legacy()) != 0 {
				t.Fatalf("legacy records: %d on, %d off", len(on.store.legacy()), len(off.store.legacy()))
			}
		})
	}
}

// TestReplayAgentStateTransitions checks field by field the permission of
// the Codex capture (blocked → requests; declined → completedRequests
// denied) and of the ACP capture.
func TestReplayAgentStateTransitions(t *testing.T) {
	for _, c := range []struct {
		name, call, tool string
	}{
		{"codex", "call_fake_1", "Bash"},
		{"acp", "call_fake_0001", "Bash"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rp := replay(t, flavors[c.name], captureEvents(t, c.name), true)
			if len(rp.states) < 2 {
				t.Fatalf("states %q", rp.states)
			}
			var blocked, done struct {
				Requests          map[string]Request          `json:"requests"`
				CompletedRequests map[string]CompletedRequest `json:"completedRequests"`
			}
			first := -1
			for i, s := range rp.states {
				if strings.Contains(s, `"requests":{"`+c.call) {
					first = i
					break
				}
			}
			if first < 0 {
				t.Fatalf("no state with %s pending: %q", c.call, rp.states)
			}
			_ = json.Unmarshal([]byte(rp.states[first]), &blocked)
			_ = json.Unmarshal([]byte(rp.states[len(rp.states)-1]), &done)
			req := blocked.Requests[c.call]
			if req.Tool != c.tool || req.ToolUseID != c.call || req.CreatedAt != clock().UnixMilli() || req.Arguments["command"] == nil {
				t.Errorf("request %+v", req)
			}
			if len(done.Requests) != 0 {
				t.Errorf("still pending: %+v", done.Requests)
			}
			cr := done.CompletedRequests[c.call]
			if cr.Status != "denied" || cr.Decision != "denied" || cr.Tool != c.tool || cr.CompletedAt == 0 {
				t.Errorf("completed %+v", cr)
			}
			var relay map[string]json.RawMessage
			_ = json.Unmarshal(rp.state.value, &relay)
			if !bytes.Contains(relay["completedRequests"], []byte(c.call)) || string(relay["requests"]) != "{}" {
				t.Errorf("relay agentState %s", rp.state.value)
			}
		})
	}
}

// TestFlushSkipsRecordsTheStoreHas: a record already in the store (written
// before a restart) is not written again, and a failed write keeps the
// rest queued.
func TestFlushSkipsRecordsTheStoreHas(t *testing.T) {
	st := newMemStore()
	w := New(Options{Store: st, RootID: "ses_root", Now: clock})
	w.add("a", map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "x"}})
	w.add("b", map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "y"}})
	w.add("a", map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "again"}})
	st.versions[RecordPrefix+"a"] = 1
	st.fail = errors.New("disk full")
	if err := w.Flush(context.Background()); err == nil || !w.Pending() {
		t.Fatalf("flush %v pending %v", err, w.Pending())
	}
	st.fail = nil
	if err := w.Flush(context.Background()); err != nil || w.Pending() {
		t.Fatalf("flush %v pending %v", err, w.Pending())
	}
	if len(st.rows) != 1 || st.rows[0].record != "legacy:b" || st.rows[0].version != 1 {
		t.Fatalf("rows %+v", st.rows)
	}
}

func TestProvider(t *testing.T) {
	for in, want := range map[string]string{"claude": "claude", "claude-acp": "claude", "codex": "codex", "codex-acp": "codex",
		"gemini": "gemini", "opencode": "opencode", "someagent": "claude", "": "claude"} {
		if got := Provider(in); got != want {
			t.Errorf("Provider(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestValidateMetadata(t *testing.T) {
	for _, c := range []struct{ in, err string }{
		{`{"path":"/w","host":"h"}`, ""},
		{`{"path":"/w","host":"h","flavor":null,"summary":{"text":"t","updatedAt":1},"startedBy":"daemon","hostPid":3,"oneShot":true,"acpSessionId":"x"}`, ""},
		{`{"host":"h"}`, "path: required"},
		{`{"path":"/w","host":"h","startedBy":"ci"}`, `startedBy: must be "daemon" or "terminal"`},
		{`{"path":"/w","host":"h","machineId":null,"summary":{"text":"t"}}`, "machineId: must be a string, summary: must be {text: string, updatedAt: number}"},
		{`{"path":"/w","host":"h","tools":["a",1],"hostPid":"1","startedFromDaemon":1}`, "hostPid: must be a number, startedFromDaemon: must be a boolean, tools: must be an array of strings"},
		{`[]`, "not a JSON object"},
	} {
		err := ValidateMetadata([]byte(c.in))
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %v", c.in, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrMetadata) || !strings.HasSuffix(err.Error(), ": "+c.err) {
			t.Errorf("%s: %v, want …%s", c.in, err, c.err)
		}
	}
}

// TestMergeKeepsForeignFields: completed entries of other writers and
// other keys survive; requests are ours alone.
func TestMergeKeepsForeignFields(t *testing.T) {
	st := newState()
	st.CompletedRequests["mine"] = CompletedRequest{Request: Request{Tool: "Bash", Arguments: map[string]any{}}, Status: "approved", Decision: "approved"}
	out, err := Merge(json.RawMessage(`{"controlledByUser":false,"requests":{"stale":{"tool":"X","arguments":{}}},"completedRequests":{"old":{"tool":"Y","arguments":{},"status":"denied"}}}`), st)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"communications":{},"completedCommunications":{},"completedRequests":{"mine":{"tool":"Bash","arguments":{},"createdAt":0,"completedAt":0,"status":"approved","decision":"approved"},"old":{"tool":"Y","arguments":{},"status":"denied"}},"controlledByUser":false,"requests":{}}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
}

func TestSettle(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{`{"controlledByUser":false,"requests":{"c1":{"tool":"Bash","arguments":{"command":"ls"},"createdAt":5}},"completedRequests":{"c0":{"tool":"Read","arguments":{},"status":"approved"}},"communications":{"q1":{"kind":"form","form":{"questions":[]}}}}`,
			`{"communications":{},"completedCommunications":{"q1":{"completedAt":9,"form":{"questions":[]},"kind":"form","status":"cancelled"}},"completedRequests":{"c0":{"tool":"Read","arguments":{},"status":"approved"},"c1":{"arguments":{"command":"ls"},"completedAt":9,"createdAt":5,"decision":"abort","reason":"wrapper-exited","status":"canceled","tool":"Bash"}},"controlledByUser":false,"requests":{}}`},
		{`{"requests":{},"completedRequests":{"c0":{}}}`, ""},
		{`null`, ""},
		{`[1]`, ""},
		{`{"requests":"x"}`, ""},
	} {
		out, changed, err := Settle(json.RawMessage(c.in), agent.ReasonWrapperExited, 9)
		if err != nil {
			t.Fatal(err)
		}
		if c.out == "" {
			if changed || string(out) != c.in {
				t.Errorf("%s: changed to %s", c.in, out)
			}
			continue
		}
		if !changed || string(out) != c.out {
			t.Errorf("%s:\ngot  %s\nwant %s", c.in, out, c.out)
		}
		if err := validateAgentState(out); err != nil {
			t.Errorf("%s: %v", out, err)
		}
	}
}

// TestEmptyTurnStartsAndEnds: a turn with nothing to show still has its
// start and end (the app's thinking flag and ready marker), after the prompt.
func TestEmptyTurnStartsAndEnds(t *testing.T) {
	rp := replay(t, "codex", []agent.Event{&agent.UserPrompt{PromptID: "p1", Text: "hello"}, &agent.TurnStarted{TurnID: "t"},
		&agent.TurnEnded{TurnID: "t", Reason: agent.TurnCompleted}}, true)
	var got []string
	for _, r := range rp.store.legacy() {
		if err := validateRecord(r); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		var m struct {
			Content struct {
				Role string
				Ev   struct{ T, Text string }
			}
		}
		_ = json.Unmarshal(r, &m)
		got = append(got, m.Content.Role+" "+m.Content.Ev.T+" "+m.Content.Ev.Text)
	}
	if want := "user text hello|agent turn-start |agent turn-end "; strings.Join(got, "|") != want {
		t.Fatalf("got %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestNativeToolRawProviderInput: the agent's input kept as its JSON
// text (as the ACP decoder keeps it) gives the same native tool as the
// parsed one.
func TestNativeToolRawProviderInput(t *testing.T) {
	for _, pin := range []any{
		json.RawMessage(`{"file_path":"/w/a","old_string":"x","n":1}`),
		agent.Object{"file_path": "/w/a", "old_string": "x", "n": json.Number("1")},
	} {
		tp := &mapper.ToolPart{Tool: agent.ToolEdit, Metadata: agent.Object{agent.MetaProviderTool: "Edit", agent.MetaProviderInput: pin}}
		name, args := NativeTool(tp, "claude")
		want := map[string]any{"file_path": "/w/a", "old_string": "x", "n": json.Number("1")}
		if name != "Edit" || !reflect.DeepEqual(args, want) {
			t.Fatalf("NativeTool with providerInput %T = %s %v, want Edit %v", pin, name, args, want)
		}
	}
}

// The readers' localId check (session.CheckRecord) knows the prefix of
// the legacy records this package writes.
func TestRecordPrefixIsTheReadersOne(t *testing.T) {
	if RecordPrefix != session.LegacyRecordPrefix {
		t.Fatalf("RecordPrefix %q, session.LegacyRecordPrefix %q", RecordPrefix, session.LegacyRecordPrefix)
	}
}
