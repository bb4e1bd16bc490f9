package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/server/store"
)

// fixture opens a store at a fresh path with one account and two sessions.
func fixture(t *testing.T) (s *Store, path, acct string, sids [2]string) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "happy.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	a, err := s.UpsertAccount(ctx, "pk", 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sids {
		x, _, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: fmt.Sprint("t", i), Metadata: "m"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		sids[i] = x.ID
	}
	return s, path, a.ID, sids
}

// holdCommits makes the committer wait, before its next COMMIT, until
// the returned release is called; entered is closed when it waits.
func holdCommits(s *Store, fail error) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	first := true
	s.commit.beforeCommit = func() error {
		if first {
			first = false
			close(in)
			<-out
			return fail
		}
		return nil
	}
	return in, func() { close(out) }
}

func msgs(prefix string, n int) []store.NewMessage {
	out := make([]store.NewMessage, n)
	for i := range out {
		out[i] = store.NewMessage{LocalID: fmt.Sprintf("%s-%d", prefix, i), Content: prefix}
	}
	return out
}

// TestGroupCommitOrderAndDurability: appends queued while a commit runs
// share the next one; seqs (per session and per account) follow the
// order the appends were started; once an append's wait returned, its
// rows are visible to a separate connection to the file.
func TestGroupCommitOrderAndDurability(t *testing.T) {
	s, path, acct, sids := fixture(t)
	ctx := context.Background()
	entered, release := holdCommits(s, nil)
	first := s.StartAppend(ctx, acct, sids[0], msgs("a", 2), 10)
	<-entered // the committer holds "a" in a transaction
	var waits []func() (store.AppendResult, error)
	for i := range 6 {
		waits = append(waits, s.StartAppend(ctx, acct, sids[i%2], msgs(fmt.Sprint("b", i), 3), 11))
	}
	release()
	res, err := first()
	if err != nil || len(res.Created) != 2 || res.Created[0].Seq != 1 || res.FirstUpdateSeq != 1 {
		t.Fatalf("first append: %+v %v", res, err)
	}
	// Session 0 gets b0, b2, b4 after a (seqs 3..11), session 1 b1, b3,
	// b5 (1..9); account update seqs run on in start order from 3.
	wantSeq := [2]int64{3, 1}
	wantUpd := int64(3)
	for i, w := range waits {
		r, err := w()
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if len(r.Created) != 3 || len(r.Rows) != 3 {
			t.Fatalf("append %d: %d created, %d rows", i, len(r.Created), len(r.Rows))
		}
		for k, m := range r.Created {
			if m.Seq != wantSeq[i%2]+int64(k) || r.Rows[k].Seq != m.Seq || r.Rows[k].Content != "" || m.Content != fmt.Sprint("b", i) {
				t.Fatalf("append %d row %d: %+v (rows %+v), want seq %d", i, k, m, r.Rows[k], wantSeq[i%2]+int64(k))
			}
		}
		if r.FirstUpdateSeq != wantUpd {
			t.Fatalf("append %d: first update seq %d, want %d", i, r.FirstUpdateSeq, wantUpd)
		}
		wantSeq[i%2] += 3
		wantUpd += 3
	}
	commits, appends := s.CommitStats()
	if commits != 2 || appends != 7 {
		t.Fatalf("commits %d holding %d appends, want 2 holding 7", commits, appends)
	}
	other, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for i, sid := range sids {
		got, _, err := other.Messages(ctx, acct, sid, store.Page{Limit: 100})
		want := []int{11, 9}[i]
		if err != nil || len(got) != want {
			t.Fatalf("session %d from another connection: %d rows %v, want %d", i, len(got), err, want)
		}
		for k, m := range got {
			if m.Seq != int64(k+1) {
				t.Fatalf("session %d row %d: seq %d", i, k, m.Seq)
			}
		}
	}
}

// TestGroupCommitFailure: a failed commit fails every append of its
// group with the commit's error and leaves nothing behind; the next
// append starts where the store was.
func TestGroupCommitFailure(t *testing.T) {
	s, _, acct, sids := fixture(t)
	ctx := context.Background()
	boom := errors.New("disk on fire")
	entered, release := holdCommits(s, boom)
	w0 := s.StartAppend(ctx, acct, sids[0], msgs("a", 2), 10)
	<-entered
	release()
	if _, err := w0(); !errors.Is(err, boom) {
		t.Fatalf("append of the failed commit: %v, want %v", err, boom)
	}
	// A group of several, failed together: they queue while another
	// commit is held, and the commit of their group fails.
	entered, release = holdCommits(s, nil)
	blocker := s.StartAppend(ctx, acct, sids[1], msgs("x", 1), 11)
	<-entered
	var waits []func() (store.AppendResult, error)
	for i := range 4 {
		waits = append(waits, s.StartAppend(ctx, acct, sids[0], msgs(fmt.Sprint("g", i), 2), 12))
	}
	s.commit.beforeCommit = func() error { return boom } // read by the committer after release
	release()
	if _, err := blocker(); err != nil {
		t.Fatalf("blocker: %v", err)
	}
	for i, w := range waits {
		if r, err := w(); !errors.Is(err, boom) || len(r.Created) != 0 || len(r.Rows) != 0 {
			t.Fatalf("append %d of the failed group: %+v %v, want no rows and %v", i, r, err, boom)
		}
	}
	s.commit.beforeCommit = nil
	got, _, err := s.Messages(ctx, acct, sids[0], store.Page{Limit: 100})
	if err != nil || len(got) != 0 {
		t.Fatalf("rows after failed commits: %d %v", len(got), err)
	}
	r, err := s.AppendMessages(ctx, acct, sids[0], msgs("c", 1), 13)
	if err != nil || r.Created[0].Seq != 1 || r.FirstUpdateSeq != 2 {
		t.Fatalf("append after the failures: %+v %v (want seq 1, update seq 2: x took 1)", r, err)
	}
}

// TestGroupCommitOneFails: an append that fails on its own (unknown
// session) is rolled back alone; the rest of its group commits.
func TestGroupCommitOneFails(t *testing.T) {
	s, _, acct, sids := fixture(t)
	ctx := context.Background()
	entered, release := holdCommits(s, nil)
	blocker := s.StartAppend(ctx, acct, sids[0], msgs("x", 1), 10)
	<-entered
	good1 := s.StartAppend(ctx, acct, sids[0], msgs("g1", 2), 11)
	bad := s.StartAppend(ctx, acct, "no-such-session", msgs("b", 2), 11)
	foreign := s.StartAppend(ctx, "other-account", sids[1], msgs("f", 2), 11)
	good2 := s.StartAppend(ctx, acct, sids[0], msgs("g2", 2), 11)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	canceled := s.StartAppend(cctx, acct, sids[0], msgs("z", 2), 11)
	release()
	for _, w := range []func() (store.AppendResult, error){blocker, good1, good2} {
		if _, err := w(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := bad(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := foreign(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another account's session: %v", err)
	}
	if _, err := canceled(); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled append: %v", err)
	}
	got, _, err := s.Messages(ctx, acct, sids[0], store.Page{Limit: 100})
	if err != nil || len(got) != 5 || got[4].Seq != 5 || *got[4].LocalID != "g2-1" {
		t.Fatalf("session rows: %d %v", len(got), err)
	}
	if got, _, _ := s.Messages(ctx, acct, sids[1], store.Page{Limit: 100}); len(got) != 0 {
		t.Fatalf("foreign append wrote %d rows", len(got))
	}
}

// TestAppendAfterClose: appends after Close fail at once.
func TestAppendAfterClose(t *testing.T) {
	s, _, acct, sids := fixture(t)
	_ = s.Close()
	if _, err := s.AppendMessages(context.Background(), acct, sids[0], msgs("a", 1), 1); !errors.Is(err, errStoreClosed) {
		t.Fatalf("append after close: %v", err)
	}
}
