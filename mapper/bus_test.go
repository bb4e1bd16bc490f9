package mapper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func partUpdated(id, text string) *MessagePartUpdated {
	return &MessagePartUpdated{Part: &TextPart{PartBase: PartBase{ID: id, SessionID: "ses", MessageID: "msg"}, Text: text}}
}

func delta(id, s string) *MessagePartDelta {
	return &MessagePartDelta{SessionID: "ses", MessageID: "msg", PartID: id, Field: "text", Delta: s}
}

func drain(t *testing.T, s *Subscription) []BusEvent {
	t.Helper()
	var out []BusEvent
	for {
		ev, ok := s.TryNext()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// describe renders events compactly for exact comparison.
func describe(evs []BusEvent) []string {
	var out []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *MessagePartUpdated:
			out = append(out, fmt.Sprintf("updated %s %q", e.Part.Base().ID, e.Part.(*TextPart).Text))
		case *MessagePartDelta:
			out = append(out, fmt.Sprintf("delta %s %q", e.PartID, e.Delta))
		default:
			out = append(out, ev.EventType())
		}
	}
	return out
}

func TestBusSlowSubscriber(t *testing.T) {
	defer goleak.VerifyNone(t)
	const backlog = 4
	b := NewBus(BusOptions{DeltaBacklog: backlog})
	slow := b.Subscribe()
	fast := b.Subscribe()

	var wantFast, gotFast []string
	pub := func(evs ...BusEvent) {
		if err := b.Publish(evs...); err != nil {
			t.Fatal(err)
		}
		// The fast subscriber reads after every publish: nothing to
		// coalesce or drop.
		gotFast = append(gotFast, describe(drain(t, fast))...)
		wantFast = append(wantFast, describe(evs)...)
	}

	// 1. A part and 1000 deltas: the slow subscriber's queue holds one
	// coalesced delta (the tail), nothing lost.
	pub(partUpdated("p1", ""))
	var full strings.Builder
	for i := range 1000 {
		s := fmt.Sprintf("%d,", i)
		full.WriteString(s)
		pub(delta("p1", s))
	}
	// 2. Four state events fill the backlog; then deltas of p2 cannot be
	// coalesced (the tail is a state event) and are dropped, and p2 stays
	// stale until its next part.updated, even for deltas that would fit.
	pub(partUpdated("p2", "a"), partUpdated("p3", ""), partUpdated("p4", ""), partUpdated("p5", ""))
	for range 10 {
		pub(delta("p2", "x"))
	}
	// 3. p2's state event resyncs it; its next delta is still dropped (the
	// queue is over the backlog) and p2 is stale again.
	pub(partUpdated("p2", "axxxxxxxxxx"))
	pub(delta("p2", "y"))
	pub(&SessionStatus{SessionID: "ses", Status: SessionStatusInfo{Type: SessionIdle}})

	got := describe(drain(t, slow))
	want := []string{
		`updated p1 ""`,
		fmt.Sprintf("delta p1 %q", full.String()),
		`updated p2 "a"`, `updated p3 ""`, `updated p4 ""`, `updated p5 ""`,
		`updated p2 "axxxxxxxxxx"`,
		"session.status",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("slow subscriber got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st := slow.Stats()
	if st != (SubscriptionStats{Delivered: 8, Coalesced: 999, Dropped: 11, Queued: 0}) {
		t.Fatalf("slow stats = %+v", st)
	}
	if strings.Join(gotFast, "\n") != strings.Join(wantFast, "\n") {
		t.Fatalf("fast subscriber did not get every event as published")
	}
	fs := fast.Stats()
	if fs != (SubscriptionStats{Delivered: uint64(len(wantFast)), Coalesced: 0, Dropped: 0, Queued: 0}) {
		t.Fatalf("fast stats = %+v, want %d delivered", fs, len(wantFast))
	}
	b.Close()
}

// The fast subscriber sees exactly what was published, in order.
func TestBusFastSubscriberSeesEverything(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := NewBus(BusOptions{DeltaBacklog: 3}) // a batch of 3 fits
	s := b.Subscribe()
	var want, got []string
	for i := range 50 {
		evs := []BusEvent{partUpdated("p", fmt.Sprint(i)), delta("p", "d"), delta("q", "e")}
		_ = b.Publish(evs...)
		want = append(want, describe(evs)...)
		got = append(got, describe(drain(t, s))...)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	if st := s.Stats(); st.Dropped != 0 || st.Coalesced != 0 || st.Delivered != 150 {
		t.Fatalf("stats = %+v", st)
	}
	b.Close()
}

// A coalesced delta is a copy: the event another subscriber holds is not
// changed.
func TestBusCoalesceDoesNotShare(t *testing.T) {
	b := NewBus(BusOptions{})
	a, c := b.Subscribe(), b.Subscribe()
	d1 := delta("p", "a")
	_ = b.Publish(d1)
	got, _ := a.TryNext()
	_ = b.Publish(delta("p", "b"))
	if d1.Delta != "a" || got.(*MessagePartDelta).Delta != "a" {
		t.Fatalf("published delta changed: %q", d1.Delta)
	}
	evs := drain(t, c)
	if len(evs) != 1 || evs[0].(*MessagePartDelta).Delta != "ab" {
		t.Fatalf("c got %v", describe(evs))
	}
	b.Close()
}

// Under a concurrent publisher and reader, state events arrive complete and
// in order, and a reader rebuilding text from part.updated + deltas never
// sees a gap: its text is always a prefix of the truth and ends equal to it.
func TestBusConcurrentNoGaps(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := NewBus(BusOptions{DeltaBacklog: 8})
	sub := b.Subscribe()
	const parts, deltas = 20, 200
	truth := make([]string, parts)
	done := make(chan error, 1)
	go func() {
		text := map[string]string{}
		nextState := 0
		for {
			ev, err := sub.Next(context.Background())
			if errors.Is(err, ErrBusClosed) {
				for i := range parts {
					if id := fmt.Sprint("p", i); text[id] != truth[i] {
						done <- fmt.Errorf("part %s ended %q, want %q", id, text[id], truth[i])
						return
					}
				}
				done <- nil
				return
			}
			if err != nil {
				done <- err
				return
			}
			switch e := ev.(type) {
			case *MessagePartUpdated:
				// State events: part p<i> updated (deltas+1) times each, in order.
				want := fmt.Sprint("p", nextState/(deltas+1))
				if e.Part.Base().ID != want {
					done <- fmt.Errorf("state event %d is for %s, want %s", nextState, e.Part.Base().ID, want)
					return
				}
				nextState++
				text[e.Part.Base().ID] = e.Part.(*TextPart).Text
			case *MessagePartDelta:
				text[e.PartID] += e.Delta
				var i int
				fmt.Sscanf(e.PartID, "p%d", &i)
				if !strings.HasPrefix(truth[i], text[e.PartID]) {
					done <- fmt.Errorf("gap in %s: %q is not a prefix of the text", e.PartID, text[e.PartID])
					return
				}
			}
		}
	}()
	// The publisher builds each part's text fully before publishing, so
	// truth is complete before any event of the part is read.
	for i := range parts {
		id := fmt.Sprint("p", i)
		var sb strings.Builder
		for j := range deltas {
			sb.WriteString(fmt.Sprintf("<%d.%d>", i, j))
		}
		truth[i] = sb.String()
		cur := ""
		for j := range deltas {
			d := fmt.Sprintf("<%d.%d>", i, j)
			_ = b.Publish(partUpdated(id, cur), delta(id, d))
			cur += d
		}
		_ = b.Publish(partUpdated(id, cur))
	}
	b.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st := sub.Stats()
	if st.Delivered+st.Coalesced+st.Dropped != parts*(2*deltas+1) {
		t.Fatalf("stats %+v do not account for %d events", st, parts*(2*deltas+1))
	}
}

func TestBusNextHonoursContextAndClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := NewBus(BusOptions{})
	s := b.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next(ctx)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Next after cancel = %v", err)
	}

	// Close delivers what is queued first, then ErrBusClosed.
	_ = b.Publish(partUpdated("p", "x"))
	go func() {
		var err error
		for err == nil {
			_, err = s.Next(context.Background())
		}
		errc <- err
	}()
	b.Close()
	if err := <-errc; !errors.Is(err, ErrBusClosed) {
		t.Fatalf("Next after Close = %v", err)
	}
	if st := s.Stats(); st.Delivered != 1 {
		t.Fatalf("queued event not delivered before close: %+v", st)
	}
	if err := b.Publish(partUpdated("p", "y")); !errors.Is(err, ErrBusClosed) {
		t.Fatalf("Publish after Close = %v", err)
	}
	if _, err := b.Subscribe().Next(context.Background()); !errors.Is(err, ErrBusClosed) {
		t.Fatalf("Subscribe after Close: Next = %v", err)
	}
	b.Close() // idempotent
}

func TestSubscriptionClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := NewBus(BusOptions{})
	s, other := b.Subscribe(), b.Subscribe()
	_ = b.Publish(partUpdated("p", "x"))
	idle := b.Subscribe() // subscribed after the publish: nothing queued

	// A reader blocked in Next on an empty queue is woken by Close.
	errc := make(chan error, 1)
	go func() {
		_, err := idle.Next(context.Background())
		errc <- err
	}()
	idle.Close()
	if err := <-errc; !errors.Is(err, ErrBusClosed) {
		t.Fatalf("blocked Next after Subscription.Close = %v", err)
	}

	// Close discards what was queued.
	s.Close()
	if _, err := s.Next(context.Background()); !errors.Is(err, ErrBusClosed) {
		t.Fatalf("Next after Subscription.Close = %v", err)
	}
	if _, ok := s.TryNext(); ok {
		t.Fatal("closed subscription still delivers")
	}
	_ = b.Publish(partUpdated("p", "y"))
	if n := len(drain(t, other)); n != 2 {
		t.Fatalf("other subscription got %d events, want 2", n)
	}
	s.Close() // idempotent
	b.Close()
}

func TestBusSkipsNil(t *testing.T) {
	b := NewBus(BusOptions{})
	s := b.Subscribe()
	var nilDelta *MessagePartDelta
	_ = b.Publish(nil, nilDelta, partUpdated("p", ""))
	if evs := drain(t, s); len(evs) != 1 {
		t.Fatalf("got %d events, want 1", len(evs))
	}
}
