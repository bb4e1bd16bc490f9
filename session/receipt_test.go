package session

import (
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// A prompt another device sent (it has a relay message id) gets its
// receipts on the session's version of the row, from the runner's clock:
// received when the runner got it, handed when the agent took it (later for
// a prompt queued behind a running turn), started at the agent's first
// event of its turn. A prompt typed where the agent runs gets none.
func TestRunnerWritesPromptReceipts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var clock atomic.Int64
		clock.Store(1000)
		h := newHarness(t, Options{Now: func() time.Time { return time.UnixMilli(clock.Load()) }})
		h.agent.onPrompt = func(p agent.Prompt) {
			if p.Text == "one" {
				clock.Store(1200) // the agent takes a moment to accept it
			}
		}
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "one", MessageID: "msg_one"}, Key: "relay:1"}); err != nil {
			t.Fatal(err)
		}
		clock.Store(1500)
		h.agent.emit(&agent.TurnStarted{TurnID: "1"}, &agent.TextFinal{Message: "m1", Block: "0", Text: "a1"})
		synctest.Wait()
		clock.Store(1600)
		// Received while turn 1 runs: queued until it ends.
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "two", MessageID: "msg_two"}, Key: "relay:2"}); err != nil {
			t.Fatal(err)
		}
		clock.Store(2000)
		h.agent.emit(&agent.TurnEnded{TurnID: "1", Reason: agent.TurnCompleted})
		h.waitCall("prompt:two")
		clock.Store(2300)
		// The first event of turn 2 is not a TurnStarted: any event of the
		// root session counts.
		h.agent.emit(&agent.MessageStarted{Message: "m2"})
		h.agent.emit(&agent.TurnEnded{TurnID: "2", Reason: agent.TurnCompleted})
		synctest.Wait()
		clock.Store(3000)
		if err := h.control(ControlPrompt{Prompt: agent.Prompt{Text: "three"}}); err != nil {
			t.Fatal(err)
		}
		clock.Store(3100)
		h.agent.emit(&agent.TurnStarted{TurnID: "3"}, &agent.TurnEnded{TurnID: "3", Reason: agent.TurnCompleted})
		close(h.agent.events)
		h.wait()

		ms := func(v int64) *int64 { return &v }
		want := map[string]mapper.UserTime{
			"msg_one": {Created: 1200, Received: ms(1000), Handed: ms(1200), Started: ms(1500)},
			"msg_two": {Created: 2000, Received: ms(1600), Handed: ms(2000), Started: ms(2300)},
		}
		var users int
		for _, m := range h.red.Transcript().Messages {
			um, ok := m.Info.(*mapper.UserMessage)
			if !ok {
				continue
			}
			users++
			w, ok := want[um.ID]
			if !ok {
				w = mapper.UserTime{Created: 3000} // the local prompt
			}
			if got := fmtTime(um.Time); got != fmtTime(w) {
				t.Errorf("%s: time %s, want %s", um.ID, got, fmtTime(w))
			}
		}
		if users != 3 {
			t.Fatalf("%d user messages, want 3", users)
		}
		// The receipts reach the store: the last version of msg_one's row
		// has all three.
		if body := h.store.lastBody(t, "msg_one"); !strings.Contains(body, `"time":{"created":1200,"received":1000,"handed":1200,"started":1500}`) {
			t.Fatalf("stored row %s", body)
		}
	})
}

func fmtTime(u mapper.UserTime) string {
	p := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return time.UnixMilli(*v).UTC().Format("05.000")
	}
	return time.UnixMilli(u.Created).UTC().Format("05.000") + " r" + p(u.Received) + " h" + p(u.Handed) + " s" + p(u.Started)
}

// lastBody is the plaintext of the last version of record rec the store
// got.
func (m *memStore) lastBody(t *testing.T, rec string) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	body := ""
	for _, put := range m.puts {
		for _, v := range put {
			if v.Record == rec {
				body = string(v.Plaintext)
			}
		}
	}
	if body == "" {
		t.Fatalf("no version of %s stored", rec)
	}
	return body
}
