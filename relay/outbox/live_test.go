package outbox

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

// Live records survive a reopen, are replaced by a second mark and go away
// with ClearLive.
func TestLiveRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if l, err := s.LiveSessions(ctx); err != nil || len(l) != 0 {
		t.Fatalf("empty store: %v %v", l, err)
	}
	if err := s.MarkLive(ctx, "b", 20); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLive(ctx, "a", 10); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLive(ctx, "a", 11); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLive(ctx, "", 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("empty session: %v", err)
	}
	_ = s.Close()
	s = openTest(t, dir)
	at := time.UnixMilli(1_700_000_000_000)
	got, err := s.LiveSessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Live{{Session: "a", PID: 11, StartedAt: at}, {Session: "b", PID: 20, StartedAt: at}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("live %+v\nwant %+v", got, want)
	}
	if ok, err := s.IsLive(ctx, "a"); !ok || err != nil {
		t.Fatalf("IsLive(a) = %v %v", ok, err)
	}
	if err := s.ClearLive(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearLive(ctx, "never"); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.IsLive(ctx, "a"); ok || err != nil {
		t.Fatalf("IsLive(a) after clear = %v %v", ok, err)
	}
	got, _ = s.LiveSessions(ctx)
	if !reflect.DeepEqual(got, want[1:]) {
		t.Fatalf("after clear %+v", got)
	}
}
