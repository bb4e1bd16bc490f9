package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/sio"
	"github.com/happy-dev/happy/server"
	"github.com/happy-dev/happy/server/bus"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/server/store/postgres/pgtest"
)

// rowLog records the message seqs of one session's new-message updates a
// socket receives, and whether it disconnected.
type rowLog struct {
	mu   sync.Mutex
	seqs []int64
	lost []string
	got  chan struct{}
}

func logRows(c *sio.Client, sid string) *rowLog {
	l := &rowLog{got: make(chan struct{}, 1)}
	c.On("update", func(args []any, _ func(...any)) {
		m, _ := args[0].(map[string]any)
		body, _ := m["body"].(map[string]any)
		if body["t"] != "new-message" || body["sid"] != sid {
			return
		}
		msg, _ := body["message"].(map[string]any)
		seq, _ := msg["seq"].(float64)
		l.mu.Lock()
		l.seqs = append(l.seqs, int64(seq))
		l.mu.Unlock()
		select {
		case l.got <- struct{}{}:
		default:
		}
	})
	c.OnDisconnect(func(reason string) {
		l.mu.Lock()
		l.lost = append(l.lost, reason)
		l.mu.Unlock()
	})
	return l
}

// want waits until the socket received n rows (failing after 20 s), then
// checks it received exactly 1…n, once each, in order, without a
// disconnection.
func (l *rowLog) want(t *testing.T, what string, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		have := len(l.seqs)
		l.mu.Unlock()
		if have >= n {
			break
		}
		select {
		case <-l.got:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("%s: received rows %v, want 1…%d", what, l.seqs, n)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(l.seqs, want) {
		t.Fatalf("%s: received rows %v, want 1…%d once each in order", what, l.seqs, n)
	}
	if len(l.lost) > 0 {
		t.Fatalf("%s: socket disconnected (%v)", what, l.lost)
	}
}

func lids(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, from+i)
	}
	return out
}

// With the in-process bus cut and resumed: the rows another instance wrote
// while this instance's bus was cut reach its sockets when the bus is back,
// in seq order and once each, as do the rows before and after; a row
// stored before the resume whose update arrives after it (the catch-up
// already sent it) is not sent twice. Both a session-scoped and a
// user-scoped socket are followed, neither disconnects.
func TestBusGapCatchUpMemory(t *testing.T) {
	var mem bus.Memory
	b, other := mem.Join(), mem.Join()
	t.Cleanup(func() { _ = b.Close(); _ = other.Close() }) // after the relay closed
	if err := other.Start(func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	r := servertest.StartConfig(t, server.Config{Bus: b, Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)})
	acct := servertest.NewAccount(t, r.URL)
	a := api{t: t, base: r.URL, token: acct.Token}
	sid := a.createSession("gap", "m")["id"].(string)
	// A session of the account nothing was sent of before the gap.
	quiet := a.createSession("quiet", "m")["id"].(string)
	sess := logRows(sessionSocket(t, r.URL, acct.Token, sid), sid)
	user := logRows(userSocket(t, r.URL, acct.Token), sid)
	userQuiet := logRows(userSocket(t, r.URL, acct.Token), quiet)

	r.Server.ForeignAppend(t, other, acct.Token, sid, lids("before", 0, 3)...)
	sess.want(t, "session socket before the gap", 3)
	user.want(t, "user socket before the gap", 3)

	mem.Cut(b)
	r.Server.ForeignAppend(t, other, acct.Token, sid, lids("gap", 0, 5)...)
	r.Server.ForeignAppend(t, other, acct.Token, quiet, lids("quiet", 0, 2)...)
	// Stored before the resume, announced after it: the catch-up sends it,
	// its update must not send it again.
	late := r.Server.ForeignStore(t, acct.Token, sid, "overlap")
	mem.Resume(b)
	if err := other.Publish(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	// (Rows written after the catch-up read the store come by the bus alone.)
	server.WaitUntil(t, 10*time.Second, "catch-up done", func() bool { return r.Server.CaughtUp() >= 8 })
	r.Server.ForeignAppend(t, other, acct.Token, sid, lids("after", 0, 2)...)

	sess.want(t, "session socket", 11)
	user.want(t, "user socket", 11)
	userQuiet.want(t, "user socket, quiet session", 2)
	if got := r.Server.CaughtUp(); got != 8 {
		t.Errorf("rows caught up: %d, want 8 (5 + 1 of the session, 2 of the quiet one)", got)
	}
}

// The PostgreSQL bus loses its LISTEN connection while relay A writes rows
// of a session that sockets on relay B follow: B's sockets still receive
// every row exactly once, in seq order, without a disconnection (B catches
// them up from the store when its LISTEN is back). The LISTEN connections
// are ended with pg_terminate_backend rather than by restarting PostgreSQL:
// it cuts exactly the connection that carries the notifications while the
// store stays up, so A keeps committing rows whose notifications B never
// gets (a restart also stops A's writes, leaving only the notifications in
// flight to lose), and it takes milliseconds instead of a server restart.
func TestClusterBusGapPostgres(t *testing.T) {
	db := pgtest.URL(t)
	rs := startClusterOn(t, db, "postgres", 2, server.Config{})
	a := newAPI(t, rs[0])
	sid := a.createSession("gap", "m")["id"].(string)
	sess := logRows(sessionSocket(t, rs[1].URL, a.token, sid), sid)
	user := logRows(userSocket(t, rs[1].URL, a.token), sid)
	n := 0
	post := func(prefix string, k int) {
		var msgs [][2]string
		for _, l := range lids(prefix, 0, k) {
			msgs = append(msgs, [2]string{l, "c"})
		}
		a.postMessages(sid, msgs...)
		n += k
	}
	post("before", 3)
	sess.want(t, "session socket before the gap", n)
	user.want(t, "user socket before the gap", n)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pc, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(context.Background())
	var killed int
	if err := pc.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN `+bus.PostgresChannel+`'`).Scan(&killed); err != nil {
		t.Fatal(err)
	}
	eq(t, "LISTEN connections ended", killed, 2)
	notReady := func() bool {
		resp, err := http.Get(rs[1].URL + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}
	server.WaitUntil(t, 5*time.Second, "relay B not listening", notReady)
	for i := range 4 {
		post(fmt.Sprintf("gap%d", i), 3)
	}
	if !notReady() {
		t.Fatal("relay B listened again before the rows of the gap were written: the test proves nothing")
	}
	waitReady(t, rs[1].URL)
	post("after", 2)
	sess.want(t, "session socket", n)
	user.want(t, "user socket", n)
}
