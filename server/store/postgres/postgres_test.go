package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/server/store"
	. "github.com/happy-dev/happy/server/store/postgres"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
	"github.com/happy-dev/happy/server/store/sqlite/sqlitetest"
	"github.com/happy-dev/happy/server/store/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// backend is the PostgreSQL store for the shared suite: a fresh database
// per test; the concurrency cases spread their writers over three stores
// (three pools, as three relay instances would).
func backend() storetest.Backend {
	return storetest.Backend{
		NewDB: func(t testing.TB) func(testing.TB) store.Store {
			u := pgtest.URL(t)
			return func(t testing.TB) store.Store {
				s, err := Open(ctx, u, Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				return s
			}
		},
		Instances: 3,
	}
}

func TestConformance(t *testing.T) { storetest.Run(t, backend()) }

func TestConcurrency(t *testing.T) { storetest.RunConcurrency(t, backend()) }

func TestCopyFromSQLite(t *testing.T) { storetest.RunCopy(t, sqlitetest.Backend(), backend()) }

func TestCopyToSQLite(t *testing.T) { storetest.RunCopy(t, backend(), sqlitetest.Backend()) }

func TestCopyBetweenDatabases(t *testing.T) { storetest.RunCopy(t, backend(), backend()) }

// BenchmarkIngest: go test -run '^$' -bench Ingest ./server/store/postgres
// (with HAPPY_TEST_POSTGRES set).
func BenchmarkIngest(b *testing.B) { storetest.BenchmarkIngest(b, backend()) }

// TestMigrations: a fresh database gets every migration once, even when
// several instances open it at the same moment; reopening applies nothing.
func TestMigrations(t *testing.T) {
	names, err := Migrations()
	if err != nil || len(names) == 0 || names[0] != "0001_init.sql" {
		t.Fatalf("migrations %v %v", names, err)
	}
	u := pgtest.URL(t)
	var mu sync.Mutex
	var applied [][]string
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(ctx, u, Options{MaxConns: 2})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			applied = append(applied, s.MigratedAtOpen())
			mu.Unlock()
			_ = s.Close()
		}()
	}
	wg.Wait()
	var total []string
	for _, a := range applied {
		total = append(total, a...)
	}
	if !slices.Equal(total, names) {
		t.Fatalf("four concurrent opens applied %v, want %v once", applied, names)
	}
	s, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := s.MigratedAtOpen(); len(m) != 0 {
		t.Fatalf("reopen applied %v", m)
	}
	list, err := s.AppliedMigrations(ctx)
	if err != nil || len(list) != len(names) || list[0].Name != names[0] {
		t.Fatalf("applied migrations %+v %v", list, err)
	}
	if now := time.Now().UnixMilli(); list[0].AppliedAt < now-60_000 || list[0].AppliedAt > now+1000 {
		t.Fatalf("applied at %d, now %d", list[0].AppliedAt, now)
	}
}

// TestSchemaMatchesTables: the columns of every copied table are those of
// store.Tables, in order, so copies between backends line up.
func TestSchemaMatchesTables(t *testing.T) {
	s := pgtest.Open(t)
	for _, tb := range store.Tables {
		rows, err := s.Pool().Query(ctx, `SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, tb.Name)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for rows.Next() {
			var name, typ string
			if err := rows.Scan(&name, &typ); err != nil {
				t.Fatal(err)
			}
			got = append(got, name+" "+typ)
		}
		rows.Close()
		for _, c := range tb.Columns {
			typ := map[store.Kind]string{store.Int: "bigint", store.Bool: "boolean", store.Bytes: "bytea"}[c.Kind]
			if c.Kind == store.Text || c.Kind == store.NullText {
				typ = "bytea"
				if c.Name == "id" || strings.HasSuffix(c.Name, "account_id") || c.Name == "name" || (c.Name == "session_id" && tb.Name != "usage_reports") {
					typ = "text"
				}
				if tb.Name == "machines" && c.Name == "id" {
					typ = "bytea"
				}
			}
			want = append(want, c.Name+" "+typ)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s columns:\n got  %v\n want %v", tb.Name, got, want)
		}
	}
}

// TestOpenErrors: a bad URL and an unreachable server are errors, quickly.
func TestOpenErrors(t *testing.T) {
	if _, err := Open(ctx, "postgres://happy@127.0.0.1:1/x?connect_timeout=2&sslmode=disable", Options{}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("unreachable server: %v", err)
	}
	if _, err := Open(ctx, "postgres://%zz", Options{}); err == nil {
		t.Fatal("bad URL accepted")
	}
	u := pgtest.URL(t)
	noDB, err := pgtest.WithDatabase(u, "happy_no_such_database")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, noDB, Options{}); err == nil {
		t.Fatal("missing database accepted")
	}
	// A broken migration leaves nothing behind.
	s, err := Open(ctx, u, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Pool().Exec(ctx, `DROP TABLE attachments`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(ctx, `DELETE FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, u, Options{})
	if !errors.Is(err, ErrMigration) {
		t.Fatalf("re-applying 0001 over existing tables: %v, want ErrMigration", err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, `SELECT COUNT(*) FROM information_schema.tables WHERE table_name = 'attachments'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("a failed migration left tables behind: %d %v", n, err)
	}
}

// proxy forwards loopback connections to a PostgreSQL server; cut closes
// its listener and every connection (the server "restarts"), start listens
// again on the same address.
type proxy struct {
	target, addr string
	mu           sync.Mutex
	l            net.Listener
	conns        []net.Conn
	wg           sync.WaitGroup
}

func (p *proxy) start(t *testing.T) {
	t.Helper()
	addr := p.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.l, p.addr = l, l.Addr().String()
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, d)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); _, _ = io.Copy(d, c); _ = d.Close() }()
			go func() { defer p.wg.Done(); _, _ = io.Copy(c, d); _ = c.Close() }()
		}
	}()
}

func (p *proxy) cut() {
	p.mu.Lock()
	_ = p.l.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}

// TestServerRestart: while the database cannot be reached, reads and writes
// fail with store.ErrUnavailable (retryable) and write nothing; once it is
// back, the same store carries on, seqs without a gap.
func TestServerRestart(t *testing.T) {
	u := pgtest.URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{target: pu.Host}
	p.start(t)
	defer p.cut()
	pu.Host = p.addr
	s, err := Open(ctx, pu.String(), Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := s.UpsertAccount(ctx, "pk", 1)
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := s.GetOrCreateSession(ctx, a.ID, store.NewSession{Tag: "t", Metadata: "m"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(i int) []store.NewMessage {
		return []store.NewMessage{{LocalID: fmt.Sprint("a", i), Content: "c"}, {LocalID: fmt.Sprint("b", i), Content: "c"}}
	}
	if _, err := s.AppendMessages(ctx, a.ID, x.ID, batch(0), 2); err != nil {
		t.Fatal(err)
	}
	p.cut()
	for i := range 3 {
		_, err := s.AppendMessages(ctx, a.ID, x.ID, batch(1), 3)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("append %d while the database is away: %v, want store.ErrUnavailable", i, err)
		}
		_, err = s.Session(ctx, a.ID, x.ID)
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("read %d while the database is away: %v, want store.ErrUnavailable", i, err)
		}
	}
	p.start(t)
	res, err := s.AppendMessages(ctx, a.ID, x.ID, batch(1), 4)
	if err != nil {
		t.Fatalf("append after the database came back: %v", err)
	}
	if len(res.Created) != 2 || res.Created[0].Seq != 3 || res.FirstUpdateSeq != 3 {
		t.Fatalf("after the restart: %+v", res)
	}
}
