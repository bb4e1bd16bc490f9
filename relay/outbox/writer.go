package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
)

// The writer's prepared statements (Store.wstmts), by index.
const (
	stmtVersion = iota
	stmtInsertPending
	stmtPutVersion
	stmtDeletePending
)

var writerSQL = [...]string{
	stmtVersion:       `SELECT version FROM versions WHERE session = ? AND record = ?`,
	stmtInsertPending: `INSERT INTO pending (session, local_id, record, version, content, enqueued_at) VALUES (?, ?, ?, ?, ?, ?)`,
	stmtPutVersion: `INSERT INTO versions (session, record, version) VALUES (?, ?, ?)
		ON CONFLICT (session, record) DO UPDATE SET version = excluded.version`,
	stmtDeletePending: `DELETE FROM pending WHERE session = ? AND local_id = ?`,
}

// stmt is the writer's prepared statement i inside tx (database/sql reuses
// the connection's prepared statement: the writer has one connection).
func (s *Store) stmt(ctx context.Context, tx *sql.Tx, i int) *sql.Stmt {
	return tx.StmtContext(ctx, s.wstmts[i])
}

// Stats are counters of the writer since Open.
type Stats struct {
	Commits    int64 // transactions committed
	Operations int64 // operations committed (appends, removals, …) across them
	// Syncs is the number of fsyncs of the WAL the syncer made, each for
	// every commit written since the one before (0 where commits sync
	// themselves: synchronous=FULL without the syncer, or NORMAL).
	Syncs int64
}

// Stats returns the writer's counters; Operations/Commits is the average
// group size.
func (s *Store) Stats() Stats {
	s.statMu.Lock()
	defer s.statMu.Unlock()
	return Stats{Commits: s.commits, Operations: s.grouped, Syncs: s.syncCount}
}

// writer is the single goroutine that writes: it takes every queued
// operation (up to MaxGroup), applies them in one transaction and answers.
func (s *Store) writer() {
	defer close(s.done)
	if s.pipelined {
		defer func() { close(s.syncs); <-s.synced }()
	}
	batch := make([]*op, 0, MaxGroup)
	for {
		batch = batch[:0]
		select {
		case o := <-s.ops:
			batch = append(batch, o)
		case <-s.quit:
			// Drain what was queued before Close, then stop.
			for {
				select {
				case o := <-s.ops:
					batch = append(batch, o)
					if len(batch) == MaxGroup {
						s.commit(batch)
						batch = batch[:0]
					}
				default:
					if len(batch) > 0 {
						s.commit(batch)
					}
					return
				}
			}
		}
	fill:
		for len(batch) < MaxGroup {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		s.commit(batch)
	}
}

// commit applies batch in one transaction. An operation that fails its own
// checks (a stale version) is answered with its error and leaves no trace;
// a failure of the transaction itself fails every operation of the batch.
func (s *Store) commit(batch []*op) {
	ctx := context.Background()
	results := make([]error, len(batch))
	// A group of removals only commits without its own fsync: losing one
	// to a power cut (a process crash loses nothing, the WAL is written)
	// only means acknowledged rows are sent again, which the relay answers
	// with their original seq. The next full commit syncs the WAL, these
	// frames included. This keeps one fsync, not two, on the path of every
	// version.
	if s.full {
		want := "FULL"
		if onlyRemovals(batch) {
			want = "NORMAL"
		}
		if want == "NORMAL" || s.relaxed {
			if _, err := s.w.ExecContext(ctx, `PRAGMA synchronous = `+want); err != nil && want == "FULL" {
				for _, o := range batch {
					o.err <- fmt.Errorf("outbox: restore synchronous=FULL: %w", err)
				}
				return
			}
			s.relaxed = want == "NORMAL"
		}
	}
	err := func() error {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("outbox: begin: %w", err)
		}
		defer func() { _ = tx.Rollback() }()
		now := s.now().UnixMilli()
		for i, o := range batch {
			if err := s.apply(ctx, tx, o, now, &results[i]); err != nil {
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("outbox: commit: %w", err)
		}
		return nil
	}()
	if err != nil {
		err = &WriteError{Path: filepath.Join(s.dir, FileName), Err: err}
	}
	if err == nil {
		s.statMu.Lock()
		s.commits++
		s.grouped += int64(len(batch))
		s.statMu.Unlock()
	}
	if err == nil && s.pipelined && !onlyRemovals(batch) {
		// Readable now; durable once the syncer's fsync returns. A removal
		// needs no sync of its own (see above).
		group := make([]*op, len(batch))
		for i, o := range batch {
			o.result = results[i]
			if o.staged != nil && o.result == nil {
				o.staged()
			}
			group[i] = o
		}
		s.syncs <- group
		return
	}
	for i, o := range batch {
		if err != nil {
			o.err <- err
		} else {
			if o.staged != nil && results[i] == nil {
				o.staged()
			}
			o.err <- results[i]
		}
	}
}

// syncer makes the writer's commits durable: it takes every group committed
// since its last sync, fsyncs the WAL once for all of them and answers their
// callers. A failed sync fails every operation of those groups (their rows
// may still be sent: a caller told about them by AppendStaged may have, and
// the relay keeps one copy per localId).
func (s *Store) syncer() {
	defer close(s.synced)
	var groups []*op
	for {
		g, ok := <-s.syncs
		if !ok {
			return
		}
		groups = append(groups[:0], g...)
	more:
		for {
			select {
			case g, ok := <-s.syncs:
				if !ok {
					break more
				}
				groups = append(groups, g...)
			default:
				break more
			}
		}
		err := s.syncFile(filepath.Join(s.dir, FileName))
		if err != nil {
			err = &WriteError{Path: filepath.Join(s.dir, FileName), Err: err}
		}
		if err == nil {
			s.statMu.Lock()
			s.syncCount++
			s.statMu.Unlock()
		}
		for _, o := range groups {
			if err != nil {
				o.err <- err
			} else {
				o.err <- o.result
			}
		}
		clear(groups)
	}
}

// onlyRemovals reports whether every operation of batch is a removal.
func onlyRemovals(batch []*op) bool {
	for _, o := range batch {
		if o.kind != opRemove {
			return false
		}
	}
	return true
}

// apply runs one operation inside tx. A returned error aborts the whole
// transaction; *result receives an error that concerns this operation only.
func (s *Store) apply(ctx context.Context, tx *sql.Tx, o *op, now int64, result *error) error {
	switch o.kind {
	case opAppend:
		// Check every version first so a refused call writes nothing.
		last := map[[2]string]int64{}
		for _, e := range o.entries {
			k := [2]string{e.Session, e.Record}
			v, seen := last[k]
			if !seen {
				err := s.stmt(ctx, tx, stmtVersion).QueryRowContext(ctx, e.Session, e.Record).Scan(&v)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return fmt.Errorf("outbox: read version: %w", err)
				}
			}
			if e.Version <= v {
				*result = fmt.Errorf("%w: record %q version %d (last %d)", ErrStaleVersion, e.Record, e.Version, v)
				return nil
			}
			last[k] = e.Version
		}
		for _, e := range o.entries {
			if _, err := s.stmt(ctx, tx, stmtInsertPending).ExecContext(ctx,
				e.Session, LocalID(e.Record, e.Version), e.Record, e.Version, e.Content, now); err != nil {
				return fmt.Errorf("outbox: append %s: %w", LocalID(e.Record, e.Version), err)
			}
		}
		for k, v := range last {
			if _, err := s.stmt(ctx, tx, stmtPutVersion).ExecContext(ctx, k[0], k[1], v); err != nil {
				return fmt.Errorf("outbox: store version: %w", err)
			}
		}
	case opRemove:
		for _, id := range o.ids {
			res, err := s.stmt(ctx, tx, stmtDeletePending).ExecContext(ctx, o.session, id)
			if err != nil {
				return fmt.Errorf("outbox: remove %s: %w", id, err)
			}
			n, _ := res.RowsAffected()
			o.removed += int(n)
		}
	case opReject:
		res, err := tx.ExecContext(ctx, `INSERT INTO rejected (session, local_id, record, version, content, enqueued_at, reason, rejected_at)
			SELECT session, local_id, record, version, content, enqueued_at, ?, ? FROM pending WHERE session = ? AND local_id = ?`,
			o.reason, now, o.session, o.ids[0])
		if err != nil {
			return fmt.Errorf("outbox: reject %s: %w", o.ids[0], err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			*result = fmt.Errorf("outbox: reject %s: no such pending row", o.ids[0])
			return nil
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM pending WHERE session = ? AND local_id = ?`, o.session, o.ids[0]); err != nil {
			return fmt.Errorf("outbox: reject %s: %w", o.ids[0], err)
		}
	case opPutSession:
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (session, relay_id, state) VALUES (?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET relay_id = excluded.relay_id, state = excluded.state`, o.session, o.relayID, o.state); err != nil {
			return fmt.Errorf("outbox: store session %q: %w", o.session, err)
		}
	case opMarkLive:
		if _, err := tx.ExecContext(ctx, `INSERT INTO live (session, pid, started_at) VALUES (?, ?, ?)
			ON CONFLICT (session) DO UPDATE SET pid = excluded.pid, started_at = excluded.started_at`, o.session, o.pid, now); err != nil {
			return fmt.Errorf("outbox: mark %q live: %w", o.session, err)
		}
	case opClearLive:
		if _, err := tx.ExecContext(ctx, `DELETE FROM live WHERE session = ?`, o.session); err != nil {
			return fmt.Errorf("outbox: clear live %q: %w", o.session, err)
		}
	case opConflict:
		if _, err := tx.ExecContext(ctx, `INSERT INTO conflicts (session, local_id, seq, detail, detected_at) VALUES (?, ?, ?, ?, ?)`,
			o.session, o.ids[0], o.seq, o.reason, now); err != nil {
			return fmt.Errorf("outbox: note conflict %s: %w", o.ids[0], err)
		}
	}
	return nil
}
