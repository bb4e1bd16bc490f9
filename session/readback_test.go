package session

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// scriptedSession drives a reducer through a turn with a permission, a
// subagent and todos, flushing the sink after every event so that many
// versions of each record exist.
func scriptedSession(t *testing.T) (*mapper.Reducer, []RecordVersion) {
	t.Helper()
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-rb", Directory: "/w", ProviderID: "anthropic", ModelID: "m"})
	store := &memStore{last: map[string]int64{}}
	sink := NewSink(store, red)
	evs := []agent.Event{
		&agent.UserPrompt{EventBase: agent.EventBase{Time: 1000}, PromptID: "p1", Text: "do it"},
		&agent.TurnStarted{TurnID: "t1"},
		&agent.MessageStarted{EventBase: agent.EventBase{Time: 1100}, Message: "m1"},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "Work"},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "ing."},
		&agent.ToolCall{Message: "m1", CallID: "c1", Tool: "bash", Input: json.RawMessage(`{"command":"touch a"}`)},
		&agent.ToolRunning{CallID: "c1"},
		&agent.ToolBlocked{CallID: "c1", Permission: &agent.PermissionRequest{Permission: "bash", Patterns: []string{"touch a"}}},
		&agent.ToolResolved{EventBase: agent.EventBase{Time: 1500}, CallID: "c1", Decision: agent.DecisionOnce},
		&agent.ToolCompleted{CallID: "c1", Output: "", Title: "touch a"},
		&agent.ToolCall{Message: "m1", CallID: "task1", Tool: "task", Input: json.RawMessage(`{"prompt":"look"}`)},
		&agent.ToolRunning{CallID: "task1"},
		&agent.SubagentStarted{CallID: "task1", Child: "agent-1", Title: "Look around", Agent: "explore", Prompt: "look"},
		&agent.TextFinal{EventBase: agent.EventBase{Session: "agent-1"}, Message: "cm1", Block: "0", Text: "Found a."},
		&agent.SubagentEnded{Child: "agent-1"},
		&agent.ToolCompleted{CallID: "task1", Output: "Found a.", Title: "task"},
		&agent.TodosUpdated{Todos: []agent.Todo{{Content: "check a", Status: agent.TodoInProgress, Priority: agent.PriorityHigh}}},
		&agent.DroppedInput{Dropped: agent.Dropped{Source: "test", Line: 7, Kind: "mystery", Reason: agent.DropUnknownType, Detail: "not known"}},
		&agent.StepFinished{Message: "m1", Finish: agent.FinishToolCalls},
		&agent.TextFinal{Message: "m2", Block: "0", Text: "All done."},
		&agent.TurnEnded{EventBase: agent.EventBase{Time: 2000}, Reason: agent.TurnCompleted},
	}
	for i, ev := range evs {
		before := red.DroppedTotal()
		sink.Observe(red.Apply(ev))
		if red.DroppedTotal() != before {
			sink.MarkDropped(red.DroppedSessions())
		}
		if err := flushed(store, sink, context.Background(), time.UnixMilli(int64(i)*2000), true); err != nil {
			t.Fatal(err)
		}
	}
	var all []RecordVersion
	for _, p := range store.puts {
		all = append(all, p...)
	}
	return red, all
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReadbackRebuildsTheReducerTranscriptInAnyOrder(t *testing.T) {
	red, versions := scriptedSession(t)
	want := mustJSON(t, red.Transcript())
	if len(versions) < 10 {
		t.Fatalf("only %d versions", len(versions))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 20; round++ {
		order := rng.Perm(len(versions))
		rb := NewReadback(mapper.Session{ID: "ses_fallback"})
		// The relay numbers versions in write order (seq = k+1); a reader
		// may see them in any order, and some twice.
		for i, k := range order {
			rb.Add(int64(k+1), versions[k].LocalID(), versions[k].Plaintext)
			if i%3 == 0 { // duplicates change nothing
				rb.Add(int64(k+1), versions[k].LocalID(), versions[k].Plaintext)
			}
		}
		got := mustJSON(t, rb.Transcript())
		if got != want {
			t.Fatalf("round %d: readback differs\n got %s\nwant %s", round, got, want)
		}
	}
	if tr := red.Transcript(); len(tr.Children) != 1 || len(tr.Todos) != 1 || len(tr.Dropped) != 1 {
		t.Fatalf("scenario lacks a child, todos or a dropped record: %d children, %d todos, %d dropped", len(tr.Children), len(tr.Todos), len(tr.Dropped))
	}
}

func TestReadbackRefusesBadRecordsWithReasons(t *testing.T) {
	_, versions := scriptedSession(t)
	rb := NewReadback(mapper.Session{ID: "ses_fallback"})
	for i, v := range versions {
		rb.Add(int64(i+1), v.LocalID(), v.Plaintext)
	}
	bad := []struct {
		in     string
		reason agent.DropReason
	}{
		{`{"kind":"message"`, agent.DropUnparseableJSON},
		{`[1,2]`, agent.DropNotAnObject},
		{`{"kind":"message","sessionID":5}`, agent.DropNotAnObject},
		{`{"kind":"message"} {}`, agent.DropUnparseableJSON},
		{`{"kind":"message","version":0,"info":{},"parts":[]}`, agent.DropInvalidField},
		{`{"kind":"message","version":1.5,"info":{},"parts":[]}`, agent.DropInvalidField},
		{`{"kind":"message","version":2,"info":{"id":"","role":"user"},"parts":[]}`, agent.DropMissingID},
		{`{"kind":"blob","version":1}`, agent.DropUnknownType},
		{`{"kind":"todos","version":1,"sessionID":"s","todos":[{"content":"x","status":"maybe","priority":"high"}]}`, agent.DropInvalidField},
		{`{"kind":"session","version":1,"session":{}}`, agent.DropInvalidField},
		{`{"role":"agent","content":{}}`, agent.DropUnknownType},
	}
	base := len(rb.Transcript().Dropped)
	for i, b := range bad {
		rb.Add(int64(1000+i), "", []byte(b.in))
	}
	rb.Add(2000, "7d5c1f3e-reference-app-uuid", []byte(`{"role":"user","content":{"type":"text","text":"legacy"}}`))
	// The envelopes happy writes for the reference app (session/compat).
	rb.Add(2001, "legacy:prt_1.1", []byte(`{"role":"session","content":{"id":"prt_1","time":1,"role":"agent","turn":"msg_1","ev":{"t":"turn-start"}}}`))
	rb.Add(2002, "legacy:x.1", []byte(`{"role":"agent","content":{"type":"acp","provider":"claude","data":{"type":"tool-result","callId":"c","output":"","id":"x","isError":false}}}`))
	tr := rb.Transcript()
	if got := len(tr.Dropped) - base; got != len(bad) {
		t.Fatalf("%d dropped, want %d: %+v", got, len(bad), tr.Dropped)
	}
	for i, b := range bad {
		d := tr.Dropped[base+i]
		if d.Reason != b.reason || d.Line != int64(1000+i) || d.Source != DroppedSourceRelay {
			t.Errorf("%s: dropped %+v, want reason %s", b.in, d, b.reason)
		}
	}
	if rb.Legacy != 3 {
		t.Fatalf("legacy %d, want 3", rb.Legacy)
	}
}

// A record written with spaces and escapes rebuilds the same message as
// the compact one happy's sink writes.
func TestReadbackSpacedRecordIsTheSameMessage(t *testing.T) {
	const compact = `{"kind":"message","version":1,"info":{"id":"msg_1","sessionID":"ses_1","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"}},"parts":[{"id":"prt_1","sessionID":"ses_1","messageID":"msg_1","type":"text","text":"a<b"}]}`
	const spaced = "{ \"kind\" : \"message\", \"version\": 1,\n \"info\" : { \"id\": \"msg_1\", \"sessionID\": \"ses_1\", \"role\": \"user\", \"time\": {\"created\": 1}, \"agent\": \"a\", \"model\": {\"providerID\": \"p\", \"modelID\": \"m\"} } ,\n \"parts\" : [ {\"id\": \"prt_1\", \"sessionID\": \"ses_1\", \"messageID\": \"msg_1\", \"type\": \"text\", \"text\": \"a\\u003cb\"} ] }"
	var got []string
	for _, rec := range []string{compact, spaced} {
		rb := NewReadback(mapper.Session{ID: "ses_1"})
		rb.Add(1, "msg_1.1", []byte(rec))
		tr := rb.Transcript()
		if len(tr.Dropped) != 1 || tr.Dropped[0].Reason != agent.DropOrphan {
			t.Fatalf("%s: dropped %+v, want the one orphan", rec, tr.Dropped)
		}
		got = append(got, mustJSON(t, rb.values["msg_1"]))
	}
	if got[0] != got[1] || !strings.Contains(got[0], `"text":"a\u003cb"`) {
		t.Fatalf("compact %s\nspaced  %s", got[0], got[1])
	}
}

func TestReadbackOrphanMessages(t *testing.T) {
	rb := NewReadback(mapper.Session{ID: "ses_fallback"})
	rb.Add(1, "msg_1.1", []byte(`{"kind":"message","version":1,"info":{"id":"msg_1","sessionID":"ses_gone","role":"user","time":{"created":1},"agent":"","model":{"providerID":"","modelID":""}},"parts":[]}`))
	tr := rb.Transcript()
	if len(tr.Dropped) != 1 || tr.Dropped[0].Reason != agent.DropOrphan {
		t.Fatalf("dropped %+v", tr.Dropped)
	}
	if tr.Messages == nil || tr.Children == nil || tr.Todos == nil {
		t.Fatal("nil arrays in an empty transcript")
	}
}

func FuzzReadbackAdd(f *testing.F) {
	f.Add("m.1", []byte(`{"kind":"message","version":1,"info":{"id":"m","sessionID":"s","role":"user","time":{"created":1},"agent":"a","model":{"providerID":"p","modelID":"m"}},"parts":[{"id":"p","sessionID":"s","messageID":"m","type":"text","text":"x"}]}`))
	f.Add("s.3", []byte(`{"kind":"session","version":3,"session":{"id":"s","projectID":"","directory":"","title":"","time":{"created":1,"updated":1}}}`))
	f.Add("todos:s.1", []byte(`{"kind":"todos","version":1,"sessionID":"s","todos":[]}`))
	f.Add("legacy:p.1", []byte(`{"role":"session","content":{"id":"p","time":1,"role":"agent","turn":"m","ev":{"t":"turn-start"}}}`))
	f.Add("legacy:.1", []byte(`{"role":"agent","content":{"type":"acp","provider":"codex","data":{"type":"tool-result"}}}`))
	f.Fuzz(func(t *testing.T, localID string, data []byte) {
		rb := NewReadback(mapper.Session{ID: "ses_fallback"})
		rb.Add(1, localID, data)
		rb.Add(2, localID, data)
		tr := rb.Transcript()
		if _, err := json.Marshal(tr); err != nil {
			t.Fatalf("transcript does not encode: %v", err)
		}
		// The reader and the relay client's check agree on whose a row is.
		wrong := false
		for _, d := range tr.Dropped {
			wrong = wrong || d.Reason == agent.DropWrongLocalID
		}
		if wrong && CheckRecord(localID, data) == nil {
			t.Fatalf("readback refused %q under %q as wrong_localid; CheckRecord took it", data, localID)
		}
	})
}

// A relay that stores a row's ciphertext again under another localId (a
// replay, here of an early version of a message under a higher version of
// the same record, so that it would win) gets the copy refused as
// wrong_localid: the transcript is the one without it, and the relay
// client's check (CheckRecord) refuses the same rows.
func TestReadbackRefusesRowsUnderAnotherLocalID(t *testing.T) {
	red, versions := scriptedSession(t)
	want := mustJSON(t, red.Transcript())
	var first RecordVersion
	for _, v := range versions {
		if v.Version == 1 && strings.HasPrefix(v.Record, "msg_") {
			first = v
			break
		}
	}
	todos := versions[0]
	for _, v := range versions {
		if strings.HasPrefix(v.Record, "todos:") {
			todos = v
		}
	}
	legacy := []byte(`{"role":"session","content":{"id":"prt_1","time":1,"role":"agent","turn":"msg_1","ev":{"t":"turn-start"}}}`)
	replays := []struct {
		localID string
		plain   []byte
		detail  string
	}{
		{first.Record + ".99", first.Plaintext, `stored under localId "` + first.Record + `.99", but it is ` + first.Record + ` version 1`},
		{"msg_zzz.1", first.Plaintext, `stored under localId "msg_zzz.1", but it is ` + first.Record + ` version 1`},
		{"", first.Plaintext, `stored under localId "", but it is ` + first.Record + ` version 1`},
		{"todos:ses_other.7", todos.Plaintext, `stored under localId "todos:ses_other.7", but it is ` + todos.Record + ` version ` + strconv.FormatInt(todos.Version, 10)},
		{"legacy:prt_2.1", legacy, `stored under localId "legacy:prt_2.1", but it is the legacy envelope "prt_1"`},
	}
	rb := NewReadback(mapper.Session{ID: "ses_fallback"})
	for i, v := range versions {
		rb.Add(int64(i+1), v.LocalID(), v.Plaintext)
	}
	for i, r := range replays {
		rb.Add(int64(1000+i), r.localID, r.plain)
		if err := CheckRecord(r.localID, r.plain); !errors.Is(err, ErrWrongLocalID) {
			t.Errorf("CheckRecord(%q) = %v, want ErrWrongLocalID", r.localID, err)
		}
	}
	tr := rb.Transcript()
	dropped := tr.Dropped[len(tr.Dropped)-len(replays):]
	tr.Dropped = tr.Dropped[:len(tr.Dropped)-len(replays)]
	if got := mustJSON(t, tr); got != want {
		t.Fatalf("a replay changed the transcript\n got %s\nwant %s", got, want)
	}
	for i, r := range replays {
		d := dropped[i]
		if d.Reason != agent.DropWrongLocalID || d.Line != int64(1000+i) || d.Detail != ErrWrongLocalID.Error()+": "+r.detail {
			t.Errorf("replay %d: dropped %+v", i, d)
		}
	}
	for _, v := range versions {
		if err := CheckRecord(v.LocalID(), v.Plaintext); err != nil {
			t.Fatalf("CheckRecord of the writer's own %s: %v", v.LocalID(), err)
		}
	}
	if err := CheckRecord("legacy:prt_1.1", legacy); err != nil {
		t.Fatal(err)
	}
}
