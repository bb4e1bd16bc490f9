package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/relay/outbox"
)

// TestBacklogListAndDiscard: the outbox's waiting versions are listed per
// session with their relay and age, oldest session first; a session a
// running happy holds is listed as held and cannot be discarded; discarding
// moves every waiting version to the rejected rows with the reason and
// leaves the other sessions alone.
func TestBacklogListAndDiscard(t *testing.T) {
	ctx := context.Background()
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(1_800_000_000_000)
	env := Env{Home: h, Now: func() time.Time { return at }}
	if got, err := Backlogs(ctx, env); err != nil || got != nil {
		t.Fatalf("a home without an outbox: %v, %v", got, err)
	}

	clock := at.Add(-time.Hour)
	st, err := outbox.Open(ctx, h.Outbox(), outbox.Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	state := `{"v":1,"account":"acct","relay":"https://gone.example","variant":"dataKey","metadata":"bWQ=","dataEncryptionKey":null}`
	if err := st.PutSession(ctx, "old", "rel-old", []byte(state)); err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		if err := st.Append(ctx, outbox.Entry{Session: "old", Record: "m1", Version: v, Content: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	clock = at.Add(-time.Minute)
	if err := st.Append(ctx, outbox.Entry{Session: "held", Record: "m1", Version: 1, Content: "c"}); err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock("held")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()

	got, err := Backlogs(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Backlog{
		{Session: "old", RelayID: "rel-old", Relay: "https://gone.example", Waiting: 3, Oldest: at.Add(-time.Hour)},
		{Session: "held", Waiting: 1, Oldest: at.Add(-time.Minute), Running: true},
	}
	if len(got) != len(want) {
		t.Fatalf("backlogs %+v", got)
	}
	for i := range want {
		if got[i].Session != want[i].Session || got[i].RelayID != want[i].RelayID || got[i].Relay != want[i].Relay ||
			got[i].Waiting != want[i].Waiting || !got[i].Oldest.Equal(want[i].Oldest) || got[i].Running != want[i].Running {
			t.Errorf("backlog %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	if n, err := DiscardBacklog(ctx, env, "held"); !errors.Is(err, ErrBacklogRunning) || n != 0 {
		t.Fatalf("discarding a held session: %d, %v", n, err)
	}
	if n, err := DiscardBacklog(ctx, env, "old"); err != nil || n != 3 {
		t.Fatalf("discard: %d, %v", n, err)
	}
	if n, err := st.Count(ctx, "old"); err != nil || n != 0 {
		t.Fatalf("after the discard %d wait (%v)", n, err)
	}
	rejected, err := st.RejectedItems(ctx, "old")
	if err != nil || len(rejected) != 3 {
		t.Fatalf("rejected %+v, %v", rejected, err)
	}
	for _, r := range rejected {
		if r.Reason != "discarded on this machine with happy outbox discard at 2027-01-15T08:00:00Z" {
			t.Errorf("%s: reason %q", r.LocalID, r.Reason)
		}
	}
	got, err = Backlogs(ctx, env)
	if err != nil || len(got) != 1 || got[0].Session != "held" {
		t.Fatalf("after the discard: %+v, %v", got, err)
	}
	if n, err := DiscardBacklog(ctx, env, "old"); err != nil || n != 0 {
		t.Fatalf("discarding again: %d, %v", n, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}
