package outbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	clock := time.UnixMilli(1_700_000_000_000)
	s, err := Open(context.Background(), dir, Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestAppendPendingRemove(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	if err := s.Append(ctx,
		Entry{Session: "a", Record: "msg_1", Version: 1, Content: "c1"},
		Entry{Session: "a", Record: "msg_2", Version: 1, Content: "c2"},
	); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, Entry{Session: "b", Record: "msg_9", Version: 3, Content: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, Entry{Session: "a", Record: "msg_1", Version: 2, Content: "c1b"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Pending(ctx, "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range got {
		ids = append(ids, fmt.Sprintf("%s=%s@%d", it.LocalID, it.Content, it.EnqueuedAt.UnixMilli()))
	}
	want := "msg_1.1=c1@1700000000000 msg_2.1=c2@1700000000000 msg_1.2=c1b@1700000000000"
	if strings.Join(ids, " ") != want {
		t.Fatalf("pending %q\nwant    %q", strings.Join(ids, " "), want)
	}
	if got[0].ID >= got[1].ID || got[1].ID >= got[2].ID || got[2].Record != "msg_1" || got[2].Version != 2 {
		t.Fatalf("order/fields %+v", got)
	}
	if l, _ := s.Pending(ctx, "a", 2); len(l) != 2 || l[1].LocalID != "msg_2.1" {
		t.Fatalf("limit: %+v", l)
	}
	sess, err := s.Sessions(ctx)
	if err != nil || strings.Join(sess, ",") != "a,b" {
		t.Fatalf("sessions %v %v", sess, err)
	}
	n, err := s.Remove(ctx, "a", []string{"msg_1.1", "msg_2.1", "nope"})
	if err != nil || n != 2 {
		t.Fatalf("remove %d %v", n, err)
	}
	if c, _ := s.Count(ctx, "a"); c != 1 {
		t.Fatalf("count a = %d", c)
	}
	if c, _ := s.Count(ctx, ""); c != 2 {
		t.Fatalf("count all = %d", c)
	}
	v, err := s.LastVersions(ctx, "a")
	if err != nil || len(v) != 2 || v["msg_1"] != 2 || v["msg_2"] != 1 {
		t.Fatalf("versions %v %v", v, err)
	}
}

func TestVersionsMonotonicAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if err := s.Append(ctx, Entry{Session: "a", Record: "r", Version: 5, Content: "x"}); err != nil {
		t.Fatal(err)
	}
	// Acknowledged rows leave the queue but their version stays.
	if n, err := s.Remove(ctx, "a", []string{"r.5"}); err != nil || n != 1 {
		t.Fatal(n, err)
	}
	_ = s.Close()
	s = openTest(t, dir)
	for _, tc := range []struct {
		entries []Entry
		err     error
	}{
		{[]Entry{{Session: "a", Record: "r", Version: 5, Content: "x"}}, ErrStaleVersion},
		{[]Entry{{Session: "a", Record: "r", Version: 4, Content: "x"}}, ErrStaleVersion},
		{[]Entry{{Session: "a", Record: "q", Version: 1, Content: "x"}, {Session: "a", Record: "q", Version: 1, Content: "y"}}, ErrStaleVersion},
		{[]Entry{{Session: "a", Record: "new", Version: 1, Content: "x"}, {Session: "a", Record: "r", Version: 2, Content: "y"}}, ErrStaleVersion},
		{[]Entry{{Session: "", Record: "r", Version: 9, Content: "x"}}, ErrInvalid},
		{[]Entry{{Session: "a", Record: "", Version: 9, Content: "x"}}, ErrInvalid},
		{[]Entry{{Session: "a", Record: "r", Version: 0, Content: "x"}}, ErrInvalid},
		{[]Entry{{Session: "a", Record: "r", Version: 9, Content: ""}}, ErrInvalid},
		{[]Entry{{Session: "a", Record: "r\n", Version: 9, Content: "x"}}, ErrInvalid},
		{[]Entry{{Session: "b", Record: "r", Version: 1, Content: "x"}}, nil}, // other session, own versions
		{[]Entry{{Session: "a", Record: "r", Version: 6, Content: "x"}, {Session: "a", Record: "r", Version: 8, Content: "y"}}, nil},
	} {
		err := s.Append(ctx, tc.entries...)
		if (tc.err == nil && err != nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Fatalf("%+v: err = %v, want %v", tc.entries, err, tc.err)
		}
	}
	// Refused calls left nothing behind (not even "new" or "q").
	v, _ := s.LastVersions(ctx, "a")
	if len(v) != 1 || v["r"] != 8 {
		t.Fatalf("versions %v", v)
	}
	p, _ := s.Pending(ctx, "a", 10)
	if len(p) != 2 || p[0].LocalID != "r.6" || p[1].LocalID != "r.8" {
		t.Fatalf("pending %+v", p)
	}
}

func TestRejectKeepsTheRow(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	_ = s.Append(ctx, Entry{Session: "a", Record: "r", Version: 1, Content: "big"}, Entry{Session: "a", Record: "s", Version: 1, Content: "ok"})
	if err := s.Reject(ctx, "a", "r.1", "HTTP 413: too large"); err != nil {
		t.Fatal(err)
	}
	if err := s.Reject(ctx, "a", "r.1", "again"); err == nil {
		t.Fatal("rejecting a missing row succeeded")
	}
	p, _ := s.Pending(ctx, "a", 10)
	if len(p) != 1 || p[0].LocalID != "s.1" {
		t.Fatalf("pending %+v", p)
	}
	r, err := s.RejectedItems(ctx, "a")
	if err != nil || len(r) != 1 || r[0].LocalID != "r.1" || r[0].Content != "big" || r[0].Reason != "HTTP 413: too large" || r[0].RejectedAt.UnixMilli() != 1700000000000 {
		t.Fatalf("rejected %+v %v", r, err)
	}
}

func TestSessionState(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, _, ok, err := s.Session(ctx, "tag"); ok || err != nil {
		t.Fatalf("missing: %v %v", ok, err)
	}
	if err := s.PutSession(ctx, "tag", "", []byte(`{"k":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSession(ctx, "tag", "cuid1", []byte(`{"k":2}`)); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s = openTest(t, dir)
	id, st, ok, err := s.Session(ctx, "tag")
	if !ok || err != nil || id != "cuid1" || string(st) != `{"k":2}` {
		t.Fatalf("got %q %q %v %v", id, st, ok, err)
	}
}

func TestLockExclusive(t *testing.T) {
	s := openTest(t, t.TempDir())
	unlock, err := s.Lock("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lock("a"); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v", err)
	}
	u2, err := s.Lock("b")
	if err != nil {
		t.Fatal(err)
	}
	u2()
	unlock()
	u3, err := s.Lock("a")
	if err != nil {
		t.Fatalf("after unlock: %v", err)
	}
	u3()
}

func TestClosedStore(t *testing.T) {
	s := openTest(t, t.TempDir())
	_ = s.Close()
	if err := s.Append(context.Background(), Entry{Session: "a", Record: "r", Version: 1, Content: "x"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentAppendsAllLand(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	const writers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for v := 1; v <= each; v++ {
				if err := s.Append(ctx, Entry{Session: "a", Record: fmt.Sprintf("w%d", w), Version: int64(v), Content: "x"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	p, err := s.Pending(ctx, "a", 10_000)
	if err != nil || len(p) != writers*each {
		t.Fatalf("%d rows, %v", len(p), err)
	}
	// Per writer the versions appear in order.
	next := map[string]int64{}
	for _, it := range p {
		if it.Version != next[it.Record]+1 {
			t.Fatalf("%s after version %d", it.LocalID, next[it.Record])
		}
		next[it.Record] = it.Version
	}
	st := s.Stats()
	if st.Operations != writers*each || st.Commits < 1 || st.Commits > st.Operations {
		t.Fatalf("stats %+v", st)
	}
}

// TestKillDuringAppends re-executes the test binary as a child that appends
// one version after another and prints each one once Append returned; the
// parent kills it with SIGKILL mid-stream. Every printed version must be in
// the outbox after reopening, and the next version after it must not be
// refused as stale unless it was in fact stored.
func TestKillDuringAppends(t *testing.T) {
	if os.Getenv("OUTBOX_CHILD_DIR") != "" {
		childAppend(os.Getenv("OUTBOX_CHILD_DIR"))
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillDuringAppends$")
	cmd.Env = append(os.Environ(), "OUTBOX_CHILD_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "acked "); ok {
			acked, _ = strconv.Atoi(v)
			if acked == 150 {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
	}
	_ = cmd.Wait()
	if acked != 150 {
		t.Fatalf("child acknowledged %d versions", acked)
	}
	s := openTest(t, dir)
	p, err := s.Pending(context.Background(), "a", 100_000)
	if err != nil {
		t.Fatal(err)
	}
	// At least every acknowledged version is there; at most the ones the
	// child had queued when it died. They are contiguous from 1.
	if len(p) < acked {
		t.Fatalf("%d rows after kill, %d were acknowledged", len(p), acked)
	}
	for i, it := range p {
		if it.Version != int64(i+1) || it.LocalID != "r."+strconv.Itoa(i+1) {
			t.Fatalf("row %d is %s", i, it.LocalID)
		}
	}
	v, _ := s.LastVersions(context.Background(), "a")
	if v["r"] != int64(len(p)) {
		t.Fatalf("last version %d, rows %d", v["r"], len(p))
	}
}

func childAppend(dir string) {
	s, err := Open(context.Background(), dir, Options{})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for v := int64(1); ; v++ {
		if err := s.Append(context.Background(), Entry{Session: "a", Record: "r", Version: v, Content: strings.Repeat("x", 200)}); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("acked", v)
	}
}

func FuzzAppendRoundTrip(f *testing.F) {
	f.Add("msg_01", int64(1), "Y29udGVudA==")
	f.Add("", int64(0), "")
	f.Add("a.b.c", int64(1<<62), "\x00")
	f.Add("r\x7f", int64(-1), "z")
	s := openTest(f, f.TempDir())
	f.Fuzz(func(t *testing.T, record string, version int64, content string) {
		ctx := context.Background()
		e := Entry{Session: "fuzz", Record: record, Version: version, Content: content}
		err := s.Append(ctx, e)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrStaleVersion) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		p, err := s.Pending(ctx, "fuzz", 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		last := p[len(p)-1]
		if last.Record != record || last.Version != version || last.Content != content || last.LocalID != LocalID(record, version) {
			t.Fatalf("stored %+v for %+v", last, e)
		}
	})
}

// TestRemovalSkipsOnlyItsOwnSync: without the syncer, a group of removals
// commits at synchronous=NORMAL and the writer is back at FULL for the next
// append (read on the writer connection itself: 2 is FULL, 1 NORMAL).
func TestRemovalSkipsOnlyItsOwnSync(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), Options{serialSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	level := func() int {
		var n int
		if err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := s.Append(ctx, Entry{Session: "a", Record: "r", Version: 1, Content: "c"}); err != nil {
		t.Fatal(err)
	}
	if got := level(); got != 2 {
		t.Fatalf("after an append: synchronous %d, want 2 (FULL)", got)
	}
	if n, err := s.Remove(ctx, "a", []string{"r.1"}); err != nil || n != 1 {
		t.Fatalf("Remove = %d, %v", n, err)
	}
	if got := level(); got != 1 || !s.relaxed {
		t.Fatalf("after a removal: synchronous %d (relaxed %v), want 1 (NORMAL)", got, s.relaxed)
	}
	if err := s.Append(ctx, Entry{Session: "a", Record: "r", Version: 2, Content: "c2"}); err != nil {
		t.Fatal(err)
	}
	if got := level(); got != 2 || s.relaxed {
		t.Fatalf("after the next append: synchronous %d (relaxed %v), want 2 (FULL)", got, s.relaxed)
	}
}

// TestStagedBeforeSync: with the syncer, an appended row is readable and
// AppendStaged's notification has run while the fsync is still under way;
// wait returns only after it, a removal queued meanwhile commits without
// waiting for it, and a failed sync fails the append.
func TestStagedBeforeSync(t *testing.T) {
	if !canSyncWAL {
		t.Skip("no syncer on this system")
	}
	ctx := context.Background()
	s := openTest(t, t.TempDir())
	release := make(chan error)
	syncing := make(chan struct{}, 4)
	// The syncer first reads syncFile after the first commit, which the
	// queueing below orders after this write.
	s.syncFile = func(db string) error {
		syncing <- struct{}{}
		if err := <-release; err != nil {
			return err
		}
		return syncWAL(db)
	}
	var level int
	if err := s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&level); err != nil || level != 1 {
		t.Fatalf("writer synchronous %d (%v), want 1 (NORMAL: the syncer syncs)", level, err)
	}

	staged := make(chan struct{})
	wait, err := s.AppendStaged(ctx, func() { close(staged) }, Entry{Session: "a", Record: "r", Version: 1, Content: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	<-staged
	<-syncing
	p, err := s.Pending(ctx, "a", 10)
	if err != nil || len(p) != 1 || p[0].LocalID != "r.1" {
		t.Fatalf("pending while syncing: %+v %v", p, err)
	}
	if n, err := s.Remove(ctx, "a", []string{"r.1"}); err != nil || n != 1 {
		t.Fatalf("Remove while syncing = %d, %v", n, err)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		t.Fatalf("wait returned %v before the sync", err)
	default:
	}
	release <- nil
	if err := <-done; err != nil {
		t.Fatalf("wait = %v", err)
	}
	if st := s.Stats(); st.Syncs != 1 || st.Commits != 2 {
		t.Fatalf("stats %+v, want 2 commits, 1 sync", st)
	}

	boom := errors.New("disk gone")
	wait, err = s.AppendStaged(ctx, nil, Entry{Session: "a", Record: "r", Version: 2, Content: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	<-syncing
	release <- boom
	if err := wait(); !errors.Is(err, boom) {
		t.Fatalf("wait after a failed sync = %v", err)
	}
	// A stale version is refused through the syncer too, after the sync.
	go func() { <-syncing; release <- nil }()
	if err := s.Append(ctx, Entry{Session: "a", Record: "r", Version: 1, Content: "old"}); !errors.Is(err, ErrStaleVersion) {
		t.Fatalf("stale append = %v", err)
	}
}
