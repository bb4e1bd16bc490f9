package storetest

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/happy-dev/happy/server/store"
)

// RunConcurrency runs the cases with concurrent writers spread over
// b.Instances stores on one database (for PostgreSQL: several relay
// instances): seqs stay gap-free and ordered, a tag or machine id is created
// once, a compare-and-set succeeds once per version, and a sweep expires a
// session once.
func RunConcurrency(t *testing.T, b Backend) {
	cases := []struct {
		name string
		fn   func(t *testing.T, stores []store.Store)
	}{
		{"AppendSeqsGapFreeAndOrdered", testConcurrentAppends},
		{"GetOrCreateOnce", testConcurrentCreate},
		{"CompareAndSetOncePerVersion", testConcurrentCAS},
		{"ExpireOnce", testConcurrentExpire},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			openOn := b.NewDB(t)
			n := max(b.Instances, 1)
			stores := make([]store.Store, n)
			for i := range stores {
				stores[i] = openOn(t)
			}
			c.fn(t, stores)
		})
	}
}

// run starts n workers, worker i on stores[i%len(stores)], and waits; the
// first error fails the test.
func run(t *testing.T, stores []store.Store, n int, fn func(i int, s store.Store) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(i, stores[i%len(stores)]); err != nil {
				errs <- fmt.Errorf("worker %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

type batchOutcome struct {
	firstSeq, firstUpd int64
	n                  int
	session            int
}

// testConcurrentAppends: 8 writers append batches to two sessions of one
// account (re-sending some localIds another writer may have stored first)
// while others allocate update seqs directly. Every session's message seqs
// are 1..n with each localId once, every update seq of the account is
// allocated once with none missing, and within a session a later message
// batch has later update seqs.
func testConcurrentAppends(t *testing.T, stores []store.Store) {
	s0 := stores[0]
	a := account(t, s0, "pk")
	sess := []store.Session{session(t, s0, a.ID, "one", 1), session(t, s0, a.ID, "two", 1)}
	const writers, batches, per = 8, 12, 5
	var mu sync.Mutex
	var outcomes []batchOutcome
	var direct [][2]int64 // first update seq, count
	run(t, stores, writers+2, func(w int, s store.Store) error {
		if w >= writers {
			for i := range batches {
				n := 1 + i%3
				first, err := s.NextUpdateSeqs(ctx, a.ID, n)
				if err != nil {
					return err
				}
				mu.Lock()
				direct = append(direct, [2]int64{first, int64(n)})
				mu.Unlock()
			}
			return nil
		}
		si := w % 2
		for bn := range batches {
			msgs := make([]store.NewMessage, 0, per+1)
			for i := range per {
				msgs = append(msgs, store.NewMessage{LocalID: fmt.Sprintf("w%d-b%d-%d", w, bn, i), Content: "c"})
			}
			// Shared by the writers of the session: stored once.
			msgs = append(msgs, store.NewMessage{LocalID: fmt.Sprintf("shared-%d", bn), Content: fmt.Sprint("from ", w)})
			res, err := s.AppendMessages(ctx, a.ID, sess[si].ID, msgs, int64(10+bn))
			if err != nil {
				return err
			}
			if len(res.Rows) != per+1 {
				return fmt.Errorf("batch %d: %d rows, want %d", bn, len(res.Rows), per+1)
			}
			for i, c := range res.Created {
				if c.Seq != res.Created[0].Seq+int64(i) {
					return fmt.Errorf("batch %d: created seqs not consecutive: %d after %d", bn, c.Seq, res.Created[0].Seq)
				}
			}
			if len(res.Created) > 0 {
				mu.Lock()
				outcomes = append(outcomes, batchOutcome{firstSeq: res.Created[0].Seq, firstUpd: res.FirstUpdateSeq, n: len(res.Created), session: si})
				mu.Unlock()
			}
		}
		return nil
	})

	// Message seqs per session: 1..n, each localId once.
	for si, x := range sess {
		var all []store.Message
		for after := int64(0); ; {
			page, more, err := s0.Messages(ctx, a.ID, x.ID, store.Page{After: after, Limit: 100})
			noErr(t, "read back", err)
			all = append(all, page...)
			if !more {
				break
			}
			after = page[len(page)-1].Seq
		}
		wantN := (writers/2)*batches*per + batches
		if len(all) != wantN {
			t.Fatalf("session %d holds %d messages, want %d", si, len(all), wantN)
		}
		seen := map[string]bool{}
		for i, m := range all {
			if m.Seq != int64(i+1) {
				t.Fatalf("session %d: message %d has seq %d (a gap or a duplicate)", si, i, m.Seq)
			}
			if seen[*m.LocalID] {
				t.Fatalf("session %d: localId %s stored twice", si, *m.LocalID)
			}
			seen[*m.LocalID] = true
		}
		got, err := s0.Session(ctx, a.ID, x.ID)
		noErr(t, "session", err)
		eq(t, "session seq", got.Seq, int64(wantN))
	}

	// Update seqs of the account: every one allocated once, none missing.
	used := map[int64]bool{}
	mark := func(first, n int64) {
		for i := first; i < first+n; i++ {
			if used[i] {
				t.Fatalf("update seq %d allocated twice", i)
			}
			used[i] = true
		}
	}
	for _, o := range outcomes {
		mark(o.firstUpd, int64(o.n))
	}
	for _, d := range direct {
		mark(d[0], d[1])
	}
	for i := int64(1); i <= int64(len(used)); i++ {
		if !used[i] {
			t.Fatalf("update seq %d missing among %d", i, len(used))
		}
	}
	last, err := s0.NextUpdateSeqs(ctx, a.ID, 1)
	noErr(t, "next update seq", err)
	eq(t, "next update seq follows the last allocated", last, int64(len(used)+1))

	// Within a session, message order is update order.
	for si := range sess {
		var list []batchOutcome
		for _, o := range outcomes {
			if o.session == si {
				list = append(list, o)
			}
		}
		sort.Slice(list, func(i, j int) bool { return list[i].firstSeq < list[j].firstSeq })
		for i := 1; i < len(list); i++ {
			if list[i].firstUpd <= list[i-1].firstUpd {
				t.Fatalf("session %d: the batch from seq %d got update seq %d, before the batch from seq %d (update seq %d)",
					si, list[i].firstSeq, list[i].firstUpd, list[i-1].firstSeq, list[i-1].firstUpd)
			}
		}
	}
}

// testConcurrentCreate: racing creations of one account key, session tag and
// machine id agree on one row, created once.
func testConcurrentCreate(t *testing.T, stores []store.Store) {
	const workers = 12
	var mu sync.Mutex
	accts := map[string]int{}
	run(t, stores, workers, func(_ int, s store.Store) error {
		a, err := s.UpsertAccount(ctx, "racing-key", 1)
		if err != nil {
			return err
		}
		mu.Lock()
		accts[a.ID]++
		mu.Unlock()
		return nil
	})
	if len(accts) != 1 {
		t.Fatalf("one key gave %d accounts", len(accts))
	}
	var acct string
	for id := range accts {
		acct = id
	}
	sessions, machines := map[string]int{}, map[string]int{}
	createdS, createdM := 0, 0
	run(t, stores, workers, func(i int, s store.Store) error {
		x, c1, err := s.GetOrCreateSession(ctx, acct, store.NewSession{Tag: "racing-tag", Metadata: fmt.Sprint(i)}, int64(i))
		if err != nil {
			return err
		}
		m, c2, err := s.GetOrCreateMachine(ctx, acct, store.NewMachine{ID: "racing-machine", Metadata: fmt.Sprint(i)}, int64(i))
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sessions[x.ID+"/"+x.Metadata]++
		machines[m.ID+"/"+m.Metadata]++
		if c1 {
			createdS++
		}
		if c2 {
			createdM++
		}
		return nil
	})
	if len(sessions) != 1 || createdS != 1 {
		t.Fatalf("racing tag: sessions %v, %d created", sessions, createdS)
	}
	if len(machines) != 1 || createdM != 1 {
		t.Fatalf("racing machine: %v, %d created", machines, createdM)
	}
}

// testConcurrentCAS: writers that retry on a mismatch each win once per
// round; every version from 1 to the total is won exactly once.
func testConcurrentCAS(t *testing.T, stores []store.Store) {
	s0 := stores[0]
	a := account(t, s0, "pk")
	x := session(t, s0, a.ID, "t", 1)
	_, _, err := s0.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "m", Metadata: "m"}, 1)
	noErr(t, "machine", err)
	const workers, rounds = 6, 8
	var mu sync.Mutex
	won := map[int64]int{}
	wonM := map[int64]int{}
	run(t, stores, workers, func(w int, s store.Store) error {
		for r := range rounds {
			expected := int64(0)
			for {
				res, err := s.UpdateSessionMetadata(ctx, a.ID, x.ID, fmt.Sprintf("w%d-r%d", w, r), expected, 2)
				if err != nil {
					return err
				}
				if res.OK {
					mu.Lock()
					won[res.Version]++
					mu.Unlock()
					break
				}
				expected = res.Version
			}
			expected = 1
			for {
				res, err := s.UpdateMachineMetadata(ctx, a.ID, "m", fmt.Sprintf("w%d-r%d", w, r), expected, 2)
				if err != nil {
					return err
				}
				if res.OK {
					mu.Lock()
					wonM[res.Version]++
					mu.Unlock()
					break
				}
				expected = res.Version
			}
		}
		return nil
	})
	for v := int64(1); v <= workers*rounds; v++ {
		if won[v] != 1 {
			t.Fatalf("session metadata version %d won %d times", v, won[v])
		}
		if wonM[v+1] != 1 {
			t.Fatalf("machine metadata version %d won %d times", v+1, wonM[v+1])
		}
	}
	got, err := s0.Session(ctx, a.ID, x.ID)
	noErr(t, "read", err)
	eq(t, "final version", got.MetadataVersion, int64(workers*rounds))
}

// testConcurrentExpire: sweeps racing on every store expire each idle
// session exactly once.
func testConcurrentExpire(t *testing.T, stores []store.Store) {
	s0 := stores[0]
	a := account(t, s0, "pk")
	want := map[string]bool{}
	for i := range 40 {
		want[session(t, s0, a.ID, fmt.Sprint("idle", i), 5).ID] = true
	}
	session(t, s0, a.ID, "fresh", 50)
	var mu sync.Mutex
	got := map[string]int{}
	run(t, stores, 6, func(_ int, s store.Store) error {
		for range 3 {
			exp, err := s.ExpireSessions(ctx, 10)
			if err != nil {
				return err
			}
			mu.Lock()
			for _, p := range exp {
				got[p.ID]++
			}
			mu.Unlock()
		}
		return nil
	})
	if len(got) != len(want) {
		t.Fatalf("%d sessions expired, want %d", len(got), len(want))
	}
	for id, n := range got {
		if !want[id] || n != 1 {
			t.Fatalf("session %s expired %d times (idle: %v)", id, n, want[id])
		}
	}
}
