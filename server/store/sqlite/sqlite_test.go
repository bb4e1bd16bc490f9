package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/server/store"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "happy.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestMigrationsAndReopen(t *testing.T) {
	names, err := Migrations()
	if err != nil || len(names) == 0 || names[0] != "0001_init.sql" {
		t.Fatalf("migrations %v %v", names, err)
	}
	path := filepath.Join(t.TempDir(), "happy.db")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{Synchronous: SyncFull})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.UpsertAccount(ctx, "pk", 1)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("db file mode: %v %v", fi, err)
	}
	s, err = Open(ctx, path, Options{}) // migrations already applied: no error
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.UpsertAccount(ctx, "pk", 2)
	if err != nil || b.ID != a.ID || b.CreatedAt != 1 || b.UpdatedAt != 2 {
		t.Fatalf("account after reopen: %+v %v", b, err)
	}
	var mode string
	if err := s.w.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode %q %v", mode, err)
	}
	if _, err := Open(ctx, path, Options{Synchronous: "OFF"}); err == nil {
		t.Fatal("synchronous OFF accepted")
	}
}

func TestAppendMessagesRules(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	a, _ := s.UpsertAccount(ctx, "pk", 1)
	sess, created, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t", Metadata: "m"}, 1)
	if err != nil || !created {
		t.Fatal(err)
	}
	res, err := s.AppendMessages(ctx, a.ID, sess.ID, []store.NewMessage{{LocalID: "x", Content: "1"}, {LocalID: "y", Content: "2"}, {LocalID: "x", Content: "dup"}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2 || len(res.Created) != 2 || res.Created[0].Seq != 1 || res.Created[1].Seq != 2 || res.FirstUpdateSeq != 1 {
		t.Fatalf("first batch %+v", res)
	}
	res, err = s.AppendMessages(ctx, a.ID, sess.ID, []store.NewMessage{{LocalID: "z", Content: "3"}, {LocalID: "x", Content: "changed"}}, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 1 || res.Created[0].Seq != 3 || res.Rows[0].Seq != 1 || *res.Rows[0].LocalID != "x" || res.Rows[0].CreatedAt != 5 || res.FirstUpdateSeq != 3 {
		t.Fatalf("second batch %+v", res)
	}
	msgs, more, err := s.Messages(ctx, a.ID, sess.ID, store.Page{Limit: 10})
	if err != nil || more || len(msgs) != 3 || msgs[0].Content != "1" {
		t.Fatalf("messages %+v %v %v", msgs, more, err)
	}
	if _, err := s.AppendMessages(ctx, "other", sess.ID, []store.NewMessage{{LocalID: "q", Content: "q"}}, 7); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other account: %v", err)
	}
	first, err := s.NextUpdateSeqs(ctx, a.ID, 2)
	if err != nil || first != 4 {
		t.Fatalf("update seqs continue after message seqs: %d %v", first, err)
	}
}

func TestCompareAndSetAndExpire(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	a, _ := s.UpsertAccount(ctx, "pk", 1)
	sess, _, _ := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t", Metadata: "m0"}, 1)
	r, err := s.UpdateSessionMetadata(ctx, a.ID, sess.ID, "m1", 0, 2)
	if err != nil || !r.OK || r.Version != 1 || *r.Value != "m1" {
		t.Fatalf("cas ok: %+v %v", r, err)
	}
	r, err = s.UpdateSessionMetadata(ctx, a.ID, sess.ID, "m2", 0, 3)
	if err != nil || r.OK || r.Version != 1 || *r.Value != "m1" {
		t.Fatalf("cas mismatch: %+v %v", r, err)
	}
	if _, err := s.UpdateSessionAgentState(ctx, "other", sess.ID, nil, 0, 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other account: %v", err)
	}
	m, _, _ := s.GetOrCreateMachine(ctx, a.ID, store.NewMachine{ID: "m", Metadata: "x"}, 1)
	if m.Active {
		t.Fatal("new machine active")
	}
	r, err = s.UpdateMachineDaemonState(ctx, a.ID, "m", "running", 0, 50)
	if err != nil || !r.OK {
		t.Fatal(err)
	}
	exp, err := s.ExpireSessions(ctx, 10)
	if err != nil || len(exp) != 1 || exp[0].ID != sess.ID || exp[0].ActiveAt != 1 {
		t.Fatalf("expire sessions %+v %v", exp, err)
	}
	exp, err = s.ExpireMachines(ctx, 10)
	if err != nil || len(exp) != 0 {
		t.Fatalf("machine active at 50 expired at cutoff 10: %+v %v", exp, err)
	}
	exp, _ = s.ExpireMachines(ctx, 50)
	if len(exp) != 1 {
		t.Fatalf("machine not expired: %+v", exp)
	}
}

// FuzzOpen opens arbitrary bytes as a database file: an error, never a panic.
func FuzzOpen(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("SQLite format 3\x00garbage"))
	f.Add([]byte("not a database"))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "happy.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(context.Background(), path, Options{})
		if err == nil {
			_ = s.Close()
		}
	})
}

// The writer never checkpoints by itself (autocheckpoint off); the
// background checkpointer copies committed pages into the database file.
func TestBackgroundCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "happy.db")
	ctx := context.Background()
	s, err := Open(ctx, path, Options{CheckpointInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var auto int
	if err := s.w.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("writer wal_autocheckpoint = %d, %v; want 0", auto, err)
	}
	a, _ := s.UpsertAccount(ctx, "pk", 1)
	sess, _, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t", Metadata: "m"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("c", 64<<10)
	for i := 0; i < 20; i++ {
		if _, err := s.AppendMessages(ctx, a.ID, sess.ID, []store.NewMessage{{LocalID: fmt.Sprint(i), Content: big}}, 2); err != nil {
			t.Fatal(err)
		}
	}
	var size int64
	if !(waitfor.Poll{Within: 5 * time.Second}).True(func() bool {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		size = fi.Size()
		return size >= before.Size()+20*64<<10
	}) {
		t.Fatalf("database file %d bytes (was %d): the WAL was not checkpointed", size, before.Size())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // twice is fine
}
