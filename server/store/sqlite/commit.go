package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/happy-dev/happy/server/store"
)

// Group commit of message appends.
//
// Every AppendMessages (and StartAppend) is queued for one committer
// goroutine, which takes everything queued so far (up to maxGroupRequests
// requests or maxGroupMessages messages), runs each request inside one
// write transaction under its own SAVEPOINT, commits once and only then
// answers every request of the group. A request is therefore acknowledged
// only after the commit that holds its rows, exactly as with one
// transaction per request; concurrent requests share the commit's WAL
// writes (the session, account and index pages each written once per
// group instead of once per request). Requests are served in queue order,
// so seqs (per session and per account) are allocated in the order the
// requests were started.
//
// A request that fails on its own (an unknown session) is rolled back to
// its savepoint and answered with its error; the group goes on. A failed
// commit (or BEGIN) answers every request of the group with that error.
const (
	maxGroupRequests = 64
	maxGroupMessages = 4000
)

// errStoreClosed answers appends queued or started after Close.
var errStoreClosed = errors.New("sqlite: store closed")

// appendReq is one queued append; res and err are set by the committer
// before done is closed.
type appendReq struct {
	ctx       context.Context
	accountID string
	sessionID string
	uniq      []store.NewMessage
	now       int64

	res  store.AppendResult
	err  error
	done chan struct{}
}

// committer is the queue of appends and the state of its goroutine.
type committer struct {
	mu      sync.Mutex
	queue   []*appendReq
	closed  bool
	wake    chan struct{} // capacity 1: something was queued
	stopped chan struct{} // closed when the goroutine has ended

	// beforeCommit, when set (tests), runs before each COMMIT; an error
	// fails the commit as a database error would.
	beforeCommit func() error
	// commits counts committed groups, appends the appends they held.
	commits, appends int64
}

func newCommitter() *committer {
	return &committer{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// StartAppend queues an append (same arguments and result as
// AppendMessages) and returns at once with the function that waits for
// its outcome. Appends are committed in the order they were started, so
// two appends started one after the other get their session and account
// seqs in that order. The wait returns only after the commit holding the
// rows (or with its error); ctx, when it ends before the append's turn,
// makes the wait return ctx's error with nothing written.
func (s *Store) StartAppend(ctx context.Context, accountID, sessionID string, msgs []store.NewMessage, now int64) func() (store.AppendResult, error) {
	// First occurrence of a localId wins.
	seen := make(map[string]struct{}, len(msgs))
	uniq := make([]store.NewMessage, 0, len(msgs))
	for _, m := range msgs {
		if _, ok := seen[m.LocalID]; ok {
			continue
		}
		seen[m.LocalID] = struct{}{}
		uniq = append(uniq, m)
	}
	r := &appendReq{ctx: ctx, accountID: accountID, sessionID: sessionID, uniq: uniq, now: now, done: make(chan struct{})}
	c := s.commit
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return func() (store.AppendResult, error) { return store.AppendResult{}, errStoreClosed }
	}
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return func() (store.AppendResult, error) {
		<-r.done
		return r.res, r.err
	}
}

// CommitStats returns how many group commits of appends were made and how
// many appends they held (appends/commits is the mean group size).
func (s *Store) CommitStats() (commits, appends int64) {
	s.commit.mu.Lock()
	defer s.commit.mu.Unlock()
	return s.commit.commits, s.commit.appends
}

// AppendMessages implements store.Store (through the group committer).
func (s *Store) AppendMessages(ctx context.Context, accountID, sessionID string, msgs []store.NewMessage, now int64) (store.AppendResult, error) {
	return s.StartAppend(ctx, accountID, sessionID, msgs, now)()
}

// closeCommitter refuses new appends, lets the committer finish what is
// queued and waits for it.
func (s *Store) closeCommitter() {
	c := s.commit
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	<-c.stopped
}

// commitLoop is the committer goroutine.
func (s *Store) commitLoop() {
	c := s.commit
	defer close(c.stopped)
	for {
		<-c.wake
		for {
			c.mu.Lock()
			group, n := c.take()
			closed := c.closed
			c.mu.Unlock()
			if n == 0 {
				if closed {
					return
				}
				break
			}
			s.commitGroup(group)
		}
	}
}

// take removes the next group from the queue (c.mu held) and returns it
// with its length.
func (c *committer) take() ([]*appendReq, int) {
	msgs, n := 0, 0
	for n < len(c.queue) && n < maxGroupRequests {
		if n > 0 && msgs+len(c.queue[n].uniq) > maxGroupMessages {
			break
		}
		msgs += len(c.queue[n].uniq)
		n++
	}
	group := make([]*appendReq, n)
	copy(group, c.queue)
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return group, n
}

// commitGroup runs group in one transaction and answers each request.
func (s *Store) commitGroup(group []*appendReq) {
	ctx := context.Background()
	live := group[:0:0]
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			close(r.done)
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// Statements are prepared before the transaction takes the writer's
	// only connection.
	prep := map[string]*sql.Stmt{}
	fail := func(err error) {
		for _, r := range live {
			if r.err == nil {
				r.res, r.err = store.AppendResult{}, err
			}
			close(r.done)
		}
	}
	for _, r := range live {
		for _, q := range appendQueries(len(r.uniq)) {
			if _, ok := prep[q]; ok {
				continue
			}
			st, err := s.stmt(ctx, q)
			if err != nil {
				fail(fmt.Errorf("sqlite: append messages: prepare: %w", err))
				return
			}
			prep[q] = st
		}
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("sqlite: append messages: %w", err))
		return
	}
	defer func() { _ = tx.Rollback() }()
	savepoints := len(live) > 1
	for _, r := range live {
		if savepoints {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT append"); err != nil {
				fail(fmt.Errorf("sqlite: append messages: savepoint: %w", err))
				return
			}
		}
		r.res, r.err = appendTx(ctx, tx, prep, r)
		if !savepoints {
			continue
		}
		if r.err != nil {
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO append"); err != nil {
				fail(fmt.Errorf("sqlite: append messages: rollback to savepoint: %w", err))
				return
			}
		}
		if _, err := tx.ExecContext(ctx, "RELEASE append"); err != nil {
			fail(fmt.Errorf("sqlite: append messages: release savepoint: %w", err))
			return
		}
	}
	if !savepoints && live[0].err != nil {
		_ = tx.Rollback()
		close(live[0].done)
		return
	}
	if c := s.commit; c.beforeCommit != nil {
		if err := c.beforeCommit(); err != nil {
			fail(fmt.Errorf("sqlite: append messages: commit: %w", err))
			return
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("sqlite: append messages: commit: %w", err))
		return
	}
	s.commit.mu.Lock()
	s.commit.commits++
	s.commit.appends += int64(len(live))
	s.commit.mu.Unlock()
	for _, r := range live {
		if r.err == nil {
			for _, c := range r.res.Created {
				c.Content = ""
				r.res.Rows = append(r.res.Rows, c)
			}
			sort.Slice(r.res.Rows, func(i, j int) bool { return r.res.Rows[i].Seq < r.res.Rows[j].Seq })
		} else {
			r.res = store.AppendResult{}
		}
		close(r.done)
	}
}

// Queries of AppendMessages.
const (
	qFindSession  = `SELECT 1 FROM sessions WHERE id = ? AND account_id = ?`
	qAllocSeqs    = `UPDATE sessions SET seq = seq + ?, updated_at = ? WHERE id = ? RETURNING seq`
	qAllocUpdates = `UPDATE accounts SET seq = seq + ? WHERE id = ? RETURNING seq`
)

const insertMsgPrefix = `INSERT INTO session_messages (id, session_id, seq, local_id, content, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`

// qFindLocalIDs is the lookup of n localIds of a session.
func qFindLocalIDs(n int) string {
	return `SELECT id, seq, local_id, created_at, updated_at FROM session_messages WHERE session_id = ? AND local_id IN (?` + strings.Repeat(",?", n-1) + `)`
}

// qInsertMessages is the multi-row insert of n messages.
func qInsertMessages(n int) string {
	return insertMsgPrefix + strings.Repeat(",(?, ?, ?, ?, ?, ?, ?)", n-1)
}

// appendQueries lists the statements worth keeping prepared for an append
// of n distinct localIds (size-dependent ones only up to maxPreparedBatch).
func appendQueries(n int) []string {
	qs := []string{qFindSession, qAllocSeqs, qAllocUpdates}
	if n > 0 && n <= maxPreparedBatch {
		qs = append(qs, qFindLocalIDs(n), qInsertMessages(n))
	}
	return qs
}

// appendTx runs one append inside tx. Created rows keep their content;
// the caller adds them to Rows once the commit succeeded.
func appendTx(ctx context.Context, tx *sql.Tx, prep map[string]*sql.Stmt, r *appendReq) (store.AppendResult, error) {
	var res store.AppendResult
	uniq, sessionID, now := r.uniq, r.sessionID, r.now
	var one int
	if err := txQueryRow(ctx, tx, prep, qFindSession, sessionID, r.accountID).Scan(&one); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return res, store.ErrNotFound
		}
		return res, fmt.Errorf("sqlite: append messages: find session: %w", err)
	}
	existing := make(map[string]bool, len(uniq))
	if len(uniq) > 0 {
		args := make([]any, 0, len(uniq)+1)
		args = append(args, sessionID)
		for _, m := range uniq {
			args = append(args, m.LocalID)
		}
		q := qFindLocalIDs(len(uniq))
		var rows *sql.Rows
		var err error
		if st := prep[q]; st != nil {
			rows, err = tx.StmtContext(ctx, st).QueryContext(ctx, args...)
		} else {
			rows, err = tx.QueryContext(ctx, q, args...)
		}
		if err != nil {
			return res, fmt.Errorf("sqlite: append messages: find local ids: %w", err)
		}
		for rows.Next() {
			var m store.Message
			var lid string
			if err := rows.Scan(&m.ID, &m.Seq, &lid, &m.CreatedAt, &m.UpdatedAt); err != nil {
				rows.Close()
				return res, fmt.Errorf("sqlite: append messages: scan: %w", err)
			}
			m.SessionID = sessionID
			m.LocalID = &lid
			existing[lid] = true
			res.Rows = append(res.Rows, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return res, fmt.Errorf("sqlite: append messages: find local ids: %w", err)
		}
	}
	n := len(uniq) - len(existing)
	if n == 0 {
		return res, nil
	}
	var last int64
	if err := txQueryRow(ctx, tx, prep, qAllocSeqs, n, now, sessionID).Scan(&last); err != nil {
		return res, fmt.Errorf("sqlite: append messages: allocate seqs: %w", err)
	}
	seq := last - int64(n) + 1
	res.Created = make([]store.Message, 0, n)
	args := make([]any, 0, 7*n)
	for _, m := range uniq {
		if existing[m.LocalID] {
			continue
		}
		lid := m.LocalID
		row := store.Message{ID: store.NewMessageID(now), SessionID: sessionID, Seq: seq, LocalID: &lid, Content: m.Content, CreatedAt: now, UpdatedAt: now}
		args = append(args, row.ID, sessionID, row.Seq, lid, m.Content, now, now)
		res.Created = append(res.Created, row)
		seq++
	}
	// One multi-row INSERT: far cheaper than n statements.
	q := qInsertMessages(n)
	var err error
	if st := prep[q]; st != nil {
		_, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		_, err = tx.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return res, fmt.Errorf("sqlite: append messages: insert %d rows from seq %d: %w", n, res.Created[0].Seq, err)
	}
	var lastUpd int64
	if err := txQueryRow(ctx, tx, prep, qAllocUpdates, n, r.accountID).Scan(&lastUpd); err != nil {
		return res, fmt.Errorf("sqlite: append messages: allocate update seqs: %w", err)
	}
	res.FirstUpdateSeq = lastUpd - int64(n) + 1
	return res, nil
}
