package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/happy-dev/happy/server/store"
)

var _ store.Copier = (*Store)(nil)

// snapshot is one read transaction on its own connection (deferred, so that
// it takes no write lock): SQLite in WAL mode keeps its view from the first
// read on, whatever the writer commits meanwhile. Attachment files are read
// from the folder as they are, for the sessions of that view.
type snapshot struct {
	s  *Store
	db *sql.DB
	tx *sql.Tx
}

// Snapshot implements store.Copier.
func (s *Store) Snapshot(ctx context.Context) (store.Snapshot, error) {
	db, err := sql.Open("sqlite", s.dsn("deferred", "query_only(1)"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: snapshot: %w", err)
	}
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: snapshot: %w", err)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
		_ = tx.Rollback()
		_ = db.Close()
		return nil, fmt.Errorf("sqlite: snapshot: %w", err)
	}
	return &snapshot{s: s, db: db, tx: tx}, nil
}

func (sn *snapshot) Close() error {
	_ = sn.tx.Rollback()
	return sn.db.Close()
}

// sessionIDs lists the view's session ids in order.
func (sn *snapshot) sessionIDs(ctx context.Context) ([]string, error) {
	rows, err := sn.tx.QueryContext(ctx, `SELECT id FROM sessions ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func (sn *snapshot) Count(ctx context.Context, t store.Table) (int64, error) {
	if t.Name == "attachments" {
		ids, err := sn.sessionIDs(ctx)
		if err != nil {
			return 0, fmt.Errorf("sqlite: count attachments: %w", err)
		}
		var n int64
		for _, id := range ids {
			ents, err := sessionAttachments(sn.s.attDir, id)
			if err != nil {
				return 0, fmt.Errorf("sqlite: count attachments: %w", err)
			}
			n += int64(len(ents))
		}
		return n, nil
	}
	if !knownTable(t.Name) {
		return 0, fmt.Errorf("sqlite: count: unknown table %q", t.Name)
	}
	var n int64
	if err := sn.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t.Name).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count %s: %w", t.Name, err)
	}
	return n, nil
}

func knownTable(name string) bool {
	return slices.ContainsFunc(store.Tables, func(t store.Table) bool { return t.Name == name })
}

func colNames(t store.Table) []string {
	out := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		out[i] = c.Name
	}
	return out
}

func (sn *snapshot) Rows(ctx context.Context, t store.Table) iter.Seq2[[]any, error] {
	if t.Name == "attachments" {
		return sn.attachmentRows(ctx)
	}
	return func(yield func([]any, error) bool) {
		if !knownTable(t.Name) {
			yield(nil, fmt.Errorf("sqlite: read: unknown table %q", t.Name))
			return
		}
		rows, err := sn.tx.QueryContext(ctx, `SELECT `+strings.Join(colNames(t), ", ")+` FROM `+t.Name+` ORDER BY `+strings.Join(t.Key, ", "))
		if err != nil {
			yield(nil, fmt.Errorf("sqlite: read %s: %w", t.Name, err))
			return
		}
		defer rows.Close()
		dst := make([]any, len(t.Columns))
		for i, c := range t.Columns {
			switch c.Kind {
			case store.Text:
				dst[i] = new(string)
			case store.NullText:
				dst[i] = new(sql.NullString)
			case store.Int, store.Bool:
				dst[i] = new(int64)
			case store.Bytes:
				dst[i] = new([]byte)
			}
		}
		for rows.Next() {
			if err := rows.Scan(dst...); err != nil {
				yield(nil, fmt.Errorf("sqlite: read %s: %w", t.Name, err))
				return
			}
			row := make([]any, len(t.Columns))
			for i, c := range t.Columns {
				switch c.Kind {
				case store.Text:
					row[i] = *dst[i].(*string)
				case store.NullText:
					if ns := dst[i].(*sql.NullString); ns.Valid {
						row[i] = ns.String
					}
				case store.Int:
					row[i] = *dst[i].(*int64)
				case store.Bool:
					row[i] = *dst[i].(*int64) != 0
				case store.Bytes:
					row[i] = slices.Clone(*dst[i].(*[]byte))
				}
			}
			if !yield(row, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(nil, fmt.Errorf("sqlite: read %s: %w", t.Name, err))
		}
	}
}

// attachmentRows yields (session_id, name, data, created_at) for the files
// of the view's sessions; created_at is the file's modification time.
func (sn *snapshot) attachmentRows(ctx context.Context) iter.Seq2[[]any, error] {
	return func(yield func([]any, error) bool) {
		ids, err := sn.sessionIDs(ctx)
		if err != nil {
			yield(nil, fmt.Errorf("sqlite: read attachments: %w", err))
			return
		}
		for _, id := range ids {
			ents, err := sessionAttachments(sn.s.attDir, id)
			if err != nil {
				yield(nil, fmt.Errorf("sqlite: read attachments of %s: %w", id, err))
				return
			}
			for _, e := range ents {
				path := filepath.Join(sn.s.attDir, "sessions", id, "attachments", e.Name())
				b, err := os.ReadFile(path)
				if err != nil {
					yield(nil, fmt.Errorf("sqlite: read attachment: %w", err))
					return
				}
				fi, err := os.Stat(path)
				if err != nil {
					yield(nil, fmt.Errorf("sqlite: read attachment: %w", err))
					return
				}
				if !yield([]any{id, e.Name(), b, fi.ModTime().UnixMilli()}, nil) {
					return
				}
			}
		}
	}
}

// Load implements store.Copier. Attachment files are written into a
// staging folder beside the attachments folder and moved into place after
// the database transaction commits (with replace, the old folder is
// removed then).
func (s *Store) Load(ctx context.Context, replace bool, rows func(store.Table) iter.Seq2[[]any, error]) (err error) {
	if err := os.MkdirAll(filepath.Dir(s.attDir), 0o700); err != nil {
		return fmt.Errorf("sqlite: load: %w", err)
	}
	staging, err := os.MkdirTemp(filepath.Dir(s.attDir), filepath.Base(s.attDir)+".load-*")
	if err != nil {
		return fmt.Errorf("sqlite: load: %w", err)
	}
	defer func() { _ = os.RemoveAll(staging) }()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: load: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if replace {
		for _, t := range slices.Backward(store.Tables) {
			if t.Name == "attachments" {
				continue
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+t.Name); err != nil {
				return fmt.Errorf("sqlite: load: empty %s: %w", t.Name, err)
			}
		}
	}
	for _, t := range store.Tables {
		if t.Name == "attachments" {
			if err := loadAttachmentFiles(staging, rows(t)); err != nil {
				return err
			}
			continue
		}
		if err := loadTable(ctx, tx, t, rows(t)); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: load: commit: %w", err)
	}
	s.attMu.Lock()
	defer s.attMu.Unlock()
	if replace {
		return swapFolder(s.attDir, staging)
	}
	return mergeSessions(s.attDir, staging)
}

func loadTable(ctx context.Context, tx *sql.Tx, t store.Table, rows iter.Seq2[[]any, error]) error {
	q := `INSERT INTO ` + t.Name + ` (` + strings.Join(colNames(t), ", ") + `) VALUES (?` + strings.Repeat(", ?", len(t.Columns)-1) + `)`
	st, err := tx.PrepareContext(ctx, q)
	if err != nil {
		return fmt.Errorf("sqlite: load %s: %w", t.Name, err)
	}
	defer st.Close()
	args := make([]any, len(t.Columns))
	for row, err := range rows {
		if err != nil {
			return fmt.Errorf("sqlite: load %s: %w", t.Name, err)
		}
		if len(row) != len(t.Columns) {
			return fmt.Errorf("sqlite: load %s: a row of %d values, want %d", t.Name, len(row), len(t.Columns))
		}
		for i, c := range t.Columns {
			v, err := toSQLite(c, row[i])
			if err != nil {
				return fmt.Errorf("sqlite: load %s: %w", t.Name, err)
			}
			args[i] = v
		}
		if _, err := st.ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("sqlite: load %s: %w", t.Name, err)
		}
	}
	return nil
}

// toSQLite checks v against the column's kind and converts booleans to 0/1.
func toSQLite(c store.Column, v any) (any, error) {
	ok := false
	switch x := v.(type) {
	case nil:
		ok = c.Kind == store.NullText
	case string:
		ok = c.Kind == store.Text || c.Kind == store.NullText
	case int64:
		ok = c.Kind == store.Int
	case bool:
		if c.Kind == store.Bool {
			return b2i(x), nil
		}
	case []byte:
		ok = c.Kind == store.Bytes
	}
	if !ok {
		return nil, fmt.Errorf("column %s (%v): unexpected value %T", c.Name, c.Kind, v)
	}
	return v, nil
}

func loadAttachmentFiles(root string, rows iter.Seq2[[]any, error]) error {
	for row, err := range rows {
		if err != nil {
			return fmt.Errorf("sqlite: load attachments: %w", err)
		}
		if len(row) != 4 {
			return fmt.Errorf("sqlite: load attachments: a row of %d values, want 4", len(row))
		}
		sid, ok1 := row[0].(string)
		name, ok2 := row[1].(string)
		data, ok3 := row[2].([]byte)
		at, ok4 := row[3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return fmt.Errorf("sqlite: load attachments: unexpected row types %T %T %T %T", row[0], row[1], row[2], row[3])
		}
		if !safeSegment(sid) || !store.ValidAttachmentName(name) {
			return fmt.Errorf("sqlite: load attachments: session %q, name %q: not a file name", sid, name)
		}
		if err := writeFileAtomic(filepath.Join(root, "sessions", sid, "attachments", name), data, at); err != nil {
			return fmt.Errorf("sqlite: load attachments: %w", err)
		}
	}
	return nil
}

// swapFolder replaces dir by staging (whose content moves; staging is left
// empty).
func swapFolder(dir, staging string) error {
	old := fmt.Sprintf("%s.old-%d", dir, time.Now().UnixNano())
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sqlite: load: attachments were loaded into %s but not moved into place: %w", staging, err)
	}
	if err := os.Rename(staging, dir); err != nil {
		return fmt.Errorf("sqlite: load: attachments were loaded into %s but not moved into place: %w", staging, err)
	}
	_ = os.RemoveAll(old)
	return nil
}

// mergeSessions moves each session folder of staging into dir, replacing a
// leftover folder of the same session.
func mergeSessions(dir, staging string) error {
	ents, err := os.ReadDir(filepath.Join(staging, "sessions"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlite: load: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		return fmt.Errorf("sqlite: load: %w", err)
	}
	for _, e := range ents {
		dst := filepath.Join(dir, "sessions", e.Name())
		_ = os.RemoveAll(dst)
		if err := os.Rename(filepath.Join(staging, "sessions", e.Name()), dst); err != nil {
			return fmt.Errorf("sqlite: load: attachments of session %s were not moved into place: %w", e.Name(), err)
		}
	}
	return nil
}
