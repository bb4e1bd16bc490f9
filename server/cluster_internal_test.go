package server

import (
	"fmt"

	"github.com/happy-dev/happy/server/bus"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// The sequencer sends an account's updates in seq order: in order at
// once; out of order held until the gap fills; a gap that never fills
// given up after the wait (counted), the held ones then in order; a late
// one after that still sent (counted); an account first seen through a
// local update not held, through a remote one held for the wait.
func TestSequencer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newSequencer(200*time.Millisecond, time.Now)
		// Emits run under the sequencer's lock (a timer's too): reading
		// what they wrote under it orders the reads after them.
		var sent []string
		send := func(acct string, seq int64, local bool) {
			q.deliver(acct, seq, local, func() { sent = append(sent, fmt.Sprintf("%s%d", acct, seq)) })
		}
		var out []string
		snap := func() {
			q.mu.Lock()
			out = append([]string(nil), sent...)
			q.mu.Unlock()
		}
		send("a", 5, true) // first seen locally: starts at once
		send("a", 7, false)
		send("a", 6, false)
		send("a", 8, true)
		snap()
		if want := []string{"a5", "a6", "a7", "a8"}; !slices.Equal(out, want) {
			t.Fatalf("in order after a swap: %v, want %v", out, want)
		}
		q.mu.Lock()
		sent = nil
		q.mu.Unlock()
		send("a", 10, false) // 9 never comes
		send("a", 11, false)
		time.Sleep(199 * time.Millisecond)
		synctest.Wait()
		snap()
		if len(out) != 0 {
			t.Fatalf("sent before the wait ended: %v", out)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		snap()
		if want := []string{"a10", "a11"}; !slices.Equal(out, want) || q.gaps.Load() != 1 || q.depth() != 0 {
			t.Fatalf("after the wait: %v (gaps %d, held %d), want %v", out, q.gaps.Load(), q.depth(), want)
		}
		send("a", 9, false)
		snap()
		if q.late.Load() != 1 || out[len(out)-1] != "a9" {
			t.Fatalf("late update: %v (late %d)", out, q.late.Load())
		}
		q.mu.Lock()
		sent = nil
		q.mu.Unlock()
		send("b", 3, false) // first seen from another instance: held
		send("b", 2, false)
		synctest.Wait()
		snap()
		if len(out) != 0 {
			t.Fatalf("first remote updates sent at once: %v", out)
		}
		time.Sleep(201 * time.Millisecond)
		synctest.Wait()
		snap()
		if want := []string{"b2", "b3"}; !slices.Equal(out, want) || q.gaps.Load() != 1 {
			t.Fatalf("first remote updates: %v (gaps %d), want %v", out, q.gaps.Load(), want)
		}
		send("b", 3, false) // a repeat of a sent seq
		if q.late.Load() != 2 {
			t.Fatalf("repeat not counted late: %d", q.late.Load())
		}
		q.forget(0)
		time.Sleep(time.Millisecond)
		q.forget(0)
		q.mu.Lock()
		n := len(q.accts)
		q.mu.Unlock()
		if n != 0 {
			t.Fatalf("idle accounts kept: %d", n)
		}
		q.stop()
	})
}

func TestOwnRooms(t *testing.T) {
	for _, c := range []struct {
		acct  string
		rooms []string
		want  bool
	}{
		{"a1", []string{"user:a1", "user:a1:user-scoped", "user:a1:session:s"}, true},
		{"a1", []string{"user:a10:user-scoped"}, false},
		{"a1", []string{"user:a2:user-scoped"}, false},
		{"", []string{"user::user-scoped"}, false},
		{"a1", nil, true},
	} {
		if got := ownRooms(c.acct, c.rooms); got != c.want {
			t.Errorf("ownRooms(%q, %v) = %v, want %v", c.acct, c.rooms, got, c.want)
		}
	}
}

// FuzzBusMessage: whatever arrives from the bus, the relay never panics;
// what it cannot read is logged and dropped.
func FuzzBusMessage(f *testing.F) {
	for _, seed := range []string{
		`{"k":"u","f":"x","a":"a1","r":["user:a1:user-scoped"],"s":1,"b":{"id":"i","seq":1,"body":{},"createdAt":1}}`,
		`{"k":"us","f":"x","a":"a1","r":["user:a1:session:s"],"w":"s","i":[{"s":2,"b":{}},{"s":3,"b":null}]}`,
		`{"k":"e","f":"x","a":"a1","r":["user:a2:user-scoped"],"b":{"type":"activity"}}`,
		`{"k":"stop","f":"x","a":"a1","id":"s"}`,
		`{"k":"resume","f":"x","a":"a1","id":"s"}`,
		`{"k":"revoke","f":"x","a":"a1","s":3}`,
		`{"k":"call","f":"x","a":"a1","id":"c","m":"m1:x","b":{"p":1}}`,
		`{"k":"accept","f":"x","t":"","id":"c"}`,
		`{"k":"go","f":"x","id":"c"}`,
		`{"k":"result","f":"x","id":"c","b":{"ok":true}}`,
		`{"k":"u","f":"x","a":"a1","r":["user:a1"],"s":-1}`,
		`[1,2]`, `not json`, ``, `{"k":7}`,
	} {
		f.Add([]byte(seed))
	}
	b := new(bus.Memory).Join()
	defer b.Close() // after the relay
	srv, err := New(Config{DataDir: f.TempDir(), Bus: b, RPCGrace: 5 * time.Millisecond, ReorderWait: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	defer srv.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		srv.cl.receive(b)
	})
}
