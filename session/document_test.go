package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// memRows is a RowSource over rows held in memory (seq = index+1); opened
// counts the rows it decrypted.
type memRows struct {
	local  []string
	plain  [][]byte
	opened int
}

func (m *memRows) source(after int64, fn func(int64, string, func() ([]byte, error)) error) error {
	for i := max(after, 0); i < int64(len(m.local)); i++ {
		p := m.plain[i]
		if err := fn(i+1, m.local[i], func() ([]byte, error) { m.opened++; return p, nil }); err != nil {
			return err
		}
	}
	return nil
}

// WriteDocument writes, byte for byte, what EncodeTranscript writes of
// Transcript(): with a subagent, todos, dropped records, an orphan
// message, a refused row, and winning versions in any order on the relay.
func TestWriteDocumentIsTheTranscript(t *testing.T) {
	_, versions := scriptedSession(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 10; round++ {
		rows := &memRows{}
		add := func(local string, plain []byte) {
			rows.local, rows.plain = append(rows.local, local), append(rows.plain, plain)
		}
		for _, k := range rng.Perm(len(versions)) {
			add(versions[k].LocalID(), versions[k].Plaintext)
		}
		add("msg_1.1", []byte(`{"kind":"message","version":1,"info":{"id":"msg_1","sessionID":"ses_gone","role":"user","time":{"created":1},"agent":"","model":{"providerID":"","modelID":""}},"parts":[]}`))
		add("msg_x.1", []byte(`{"kind":"message","version":1}`))
		full, index := NewReadback(mapper.Session{ID: "ses_fallback"}), NewReadbackIndex(mapper.Session{ID: "ses_fallback"})
		for i := range rows.local {
			full.Add(int64(i+1), rows.local[i], rows.plain[i])
			index.Add(int64(i+1), rows.local[i], rows.plain[i])
		}
		want, err := mapper.EncodeTranscript(full.Transcript())
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := index.WriteDocument(&got, rows.source); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Fatalf("round %d: streamed\n%s\nwant\n%s", round, got.String(), want)
		}
		if tr := full.Transcript(); len(tr.Children) != 1 || len(tr.Dropped) < 2 || rows.opened != countMessages(tr) {
			t.Fatalf("round %d: %d children, %d dropped; %d rows decrypted for %d messages", round, len(tr.Children), len(tr.Dropped), rows.opened, countMessages(tr))
		}
	}
}

func countMessages(t mapper.Transcript) int {
	n := len(t.Messages)
	for _, c := range t.Children {
		n += countMessages(c)
	}
	return n
}

// A relay that serves another row on the second read, or no longer has a
// row, makes WriteDocument fail saying so, never write a wrong document.
func TestWriteDocumentRefusesRowsThatChanged(t *testing.T) {
	_, versions := scriptedSession(t)
	rows := &memRows{}
	for _, v := range versions {
		rows.local, rows.plain = append(rows.local, v.LocalID()), append(rows.plain, v.Plaintext)
	}
	rb := NewReadbackIndex(mapper.Session{ID: "ses_fallback"})
	for i := range rows.local {
		rb.Add(int64(i+1), rows.local[i], rows.plain[i])
	}
	last := len(rows.local) - 1
	for last >= 0 && !strings.HasPrefix(rows.local[last], "msg_") {
		last--
	}
	// An earlier version of the same message under the winning row's seq.
	swapped := &memRows{local: rows.local, plain: append([][]byte(nil), rows.plain...)}
	rec := rows.local[last][:strings.LastIndexByte(rows.local[last], '.')]
	for i := range rows.local {
		if strings.HasPrefix(rows.local[i], rec+".") {
			swapped.plain[last] = rows.plain[i]
			break
		}
	}
	if err := rb.WriteDocument(&bytes.Buffer{}, swapped.source); err == nil || !strings.Contains(err.Error(), "read again is not version") {
		t.Fatalf("a swapped row: %v", err)
	}
	gone := &memRows{local: rows.local[:last], plain: rows.plain[:last]}
	if err := rb.WriteDocument(&bytes.Buffer{}, gone.source); err == nil || !strings.Contains(err.Error(), "the relay no longer has the row") {
		t.Fatalf("a missing row: %v", err)
	}
	stop := errors.New("relay down")
	if err := rb.WriteDocument(&bytes.Buffer{}, func(int64, func(int64, string, func() ([]byte, error)) error) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("a failing read: %v", err)
	}
}

// turnRows generates the rows of a long session without holding them: one
// turn's versions, written by the reducer and sink as happy writes them,
// repeated with the ids of turn i made unique, so a session of n versions
// costs the generator nothing that grows with n.
type turnRows struct {
	local []string
	plain [][]byte
	n     int
}

func newTurnRows(t *testing.T, n int) *turnRows {
	red := mapper.NewReducer(mapper.Config{SessionID: "relay-long", Directory: "/w", ProviderID: "anthropic", ModelID: "m"})
	store := &memStore{last: map[string]int64{}}
	sink := NewSink(store, red)
	in := json.RawMessage(`{"command":"ls -la | wc -l"}`)
	for i, ev := range []agent.Event{
		&agent.UserPrompt{PromptID: "p", Text: "list the files and count them"},
		&agent.TurnStarted{TurnID: "t"},
		&agent.MessageStarted{Message: "m1"},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "Looking at "},
		&agent.TextDelta{Message: "m1", Block: "0", Delta: "the folder first."},
		&agent.ToolCall{Message: "m1", CallID: "c", Tool: "bash", Input: in},
		&agent.ToolRunning{CallID: "c"},
		&agent.ToolCompleted{CallID: "c", Output: "total 48\ndrwxr-xr-x  5 u u 4096 .\n-rw-r--r--  1 u u  120 a.go\n12"},
		&agent.StepFinished{Message: "m1", Finish: agent.FinishToolCalls},
		&agent.TextDelta{Message: "m2", Block: "0", Delta: "There are "},
		&agent.TextFinal{Message: "m2", Block: "0", Text: "There are 12 entries in the folder."},
		&agent.TurnEnded{Reason: agent.TurnCompleted},
	} {
		sink.Observe(red.Apply(ev))
		if err := flushed(store, sink, t.Context(), time.UnixMilli(int64(i)*2000), true); err != nil {
			t.Fatal(err)
		}
	}
	g := &turnRows{n: n}
	for _, p := range store.puts {
		for _, v := range p {
			if strings.HasPrefix(v.Record, "msg_") {
				g.local, g.plain = append(g.local, v.LocalID()), append(g.plain, v.Plaintext)
			}
		}
	}
	// The session record once, first.
	for _, p := range store.puts {
		for _, v := range p {
			if strings.HasPrefix(v.Record, "ses_") {
				g.local, g.plain = append([]string{v.LocalID()}, g.local...), append([][]byte{v.Plaintext}, g.plain...)
				return g
			}
		}
	}
	t.Fatal("no session record")
	return nil
}

// row returns row i (0-based) of the generated session.
func (g *turnRows) row(i int) (string, []byte) {
	if i == 0 {
		return g.local[0], g.plain[0]
	}
	per := len(g.local) - 1
	turn, k := (i-1)/per, 1+(i-1)%per
	r := strings.NewReplacer("msg_0000000000", fmt.Sprintf("msg_%010d", turn), "prt_0000000000", fmt.Sprintf("prt_%010d", turn))
	return r.Replace(g.local[k]), []byte(r.Replace(string(g.plain[k])))
}

func (g *turnRows) source(after int64, fn func(int64, string, func() ([]byte, error)) error) error {
	for i := max(after, 0); i < int64(g.n); i++ {
		local, plain := g.row(int(i))
		if err := fn(i+1, local, func() ([]byte, error) { return plain, nil }); err != nil {
			return err
		}
	}
	return nil
}

// heapAfterGC is the live heap in bytes.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// countingWriter counts what is written and keeps nothing.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// The streamed document holds an index of the session's messages, not
// their versions: the live heap while a session is read and written grows
// by at most 64 bytes per version from 1,500 to 9,000 versions (checked
// every 500 rows of both reads; the index costs about 150 bytes per
// message, whatever its number of versions), where the whole transcript in
// memory and its encoding (what happy log --json held) grow by more than
// 250 (its message versions are short; real ones are longer).
func TestWriteDocumentMemoryDoesNotGrowWithVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 21,000 generated versions four times")
	}
	peak := func(n int, full bool) uint64 {
		g := newTurnRows(t, n)
		base := heapAfterGC()
		top := uint64(0)
		sample := func(i int64) {
			if i%500 == 0 {
				top = max(top, heapAfterGC()-min(base, heapAfterGC()))
			}
		}
		fallback := mapper.Session{ID: "ses_fallback"}
		rb := NewReadbackIndex(fallback)
		if full {
			rb = NewReadback(fallback)
		}
		_ = g.source(0, func(seq int64, local string, open func() ([]byte, error)) error {
			plain, _ := open()
			rb.Add(seq, local, plain)
			sample(seq)
			return nil
		})
		var out countingWriter
		if full {
			// What happy log --json did: the document, then its encoding.
			doc, err := mapper.EncodeTranscript(rb.Transcript())
			if err != nil {
				t.Fatal(err)
			}
			top = max(top, heapAfterGC()-min(base, heapAfterGC()))
			runtime.KeepAlive(doc)
			return top
		}
		err := rb.WriteDocument(&out, func(after int64, fn func(int64, string, func() ([]byte, error)) error) error {
			return g.source(after, func(seq int64, local string, open func() ([]byte, error)) error {
				sample(seq)
				return fn(seq, local, open)
			})
		})
		if err != nil || out.n < int64(n)*100 {
			t.Fatalf("%d versions: wrote %d bytes, %v", n, out.n, err)
		}
		runtime.KeepAlive(rb)
		return top
	}
	const small, large = 1_500, 9_000
	perVersion := func(full bool) float64 {
		return (float64(peak(large, full)) - float64(peak(small, full))) / (large - small)
	}
	streamed, whole := perVersion(false), perVersion(true)
	t.Logf("live heap per version: streamed %.0f B, whole transcript %.0f B", streamed, whole)
	if whole < 250 {
		t.Fatalf("the whole transcript grows by %.0f B a version: the measurement does not see it", whole)
	}
	if streamed > 64 {
		t.Fatalf("the streamed document grows by %.0f B a version (the whole transcript: %.0f B)", streamed, whole)
	}
}
