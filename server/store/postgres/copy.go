package postgres

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/happy-dev/happy/server/store"
)

var _ store.Copier = (*Store)(nil)

// snapshot is one REPEATABLE READ, READ ONLY transaction: one view of the
// whole database whatever other instances commit meanwhile.
type snapshot struct {
	tx pgx.Tx
}

// Snapshot implements store.Copier.
func (s *Store) Snapshot(ctx context.Context) (store.Snapshot, error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, errf("postgres: snapshot: %w", err)
	}
	return &snapshot{tx: tx}, nil
}

func (sn *snapshot) Close() error {
	return sn.tx.Rollback(context.Background())
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

func (sn *snapshot) Count(ctx context.Context, t store.Table) (int64, error) {
	if !knownTable(t.Name) {
		return 0, errf("postgres: count: unknown table %q", t.Name)
	}
	var n int64
	if err := sn.tx.QueryRow(ctx, `SELECT COUNT(*) FROM `+t.Name).Scan(&n); err != nil {
		return 0, errf("postgres: count %s: %w", t.Name, err)
	}
	return n, nil
}

func (sn *snapshot) Rows(ctx context.Context, t store.Table) iter.Seq2[[]any, error] {
	return func(yield func([]any, error) bool) {
		if !knownTable(t.Name) {
			yield(nil, errf("postgres: read: unknown table %q", t.Name))
			return
		}
		rows, err := sn.tx.Query(ctx, `SELECT `+strings.Join(colNames(t), ", ")+` FROM `+t.Name+` ORDER BY `+strings.Join(t.Key, ", "))
		if err != nil {
			yield(nil, errf("postgres: read %s: %w", t.Name, err))
			return
		}
		defer rows.Close()
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				yield(nil, errf("postgres: read %s: %w", t.Name, err))
				return
			}
			row, err := fromPostgres(t, vals)
			if err != nil {
				yield(nil, errf("postgres: read %s: %w", t.Name, err))
				return
			}
			if !yield(row, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(nil, errf("postgres: read %s: %w", t.Name, err))
		}
	}
}

// fromPostgres types one row as store.Snapshot promises: BYTEA holding
// strings becomes string.
func fromPostgres(t store.Table, vals []any) ([]any, error) {
	if len(vals) != len(t.Columns) {
		return nil, fmt.Errorf("%d values, want %d", len(vals), len(t.Columns))
	}
	for i, c := range t.Columns {
		v := vals[i]
		switch c.Kind {
		case store.Text, store.NullText:
			switch x := v.(type) {
			case []byte:
				vals[i] = string(x)
			case string:
			case nil:
				if c.Kind == store.Text {
					return nil, fmt.Errorf("column %s: NULL", c.Name)
				}
			default:
				return nil, fmt.Errorf("column %s: unexpected %T", c.Name, v)
			}
		case store.Int:
			if _, ok := v.(int64); !ok {
				return nil, fmt.Errorf("column %s: unexpected %T", c.Name, v)
			}
		case store.Bool:
			if _, ok := v.(bool); !ok {
				return nil, fmt.Errorf("column %s: unexpected %T", c.Name, v)
			}
		case store.Bytes:
			if _, ok := v.([]byte); !ok {
				return nil, fmt.Errorf("column %s: unexpected %T", c.Name, v)
			}
		}
	}
	return vals, nil
}

// Load implements store.Copier with COPY, one table after the other, in one
// transaction (replace truncates every table first, in that transaction).
func (s *Store) Load(ctx context.Context, replace bool, rows func(store.Table) iter.Seq2[[]any, error]) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return errf("postgres: load: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	names := make([]string, len(store.Tables))
	for i, t := range store.Tables {
		names[i] = t.Name
	}
	if replace {
		if _, err := tx.Exec(ctx, `TRUNCATE `+strings.Join(names, ", ")); err != nil {
			return errf("postgres: load: empty the tables: %w", err)
		}
	}
	bytea, err := byteaColumns(ctx, tx, names)
	if err != nil {
		return err
	}
	for _, t := range store.Tables {
		src := newCopySource(t, bytea, rows(t))
		_, err := tx.CopyFrom(ctx, pgx.Identifier{t.Name}, colNames(t), src)
		src.stop()
		if src.err != nil {
			return errf("postgres: load %s: %w", t.Name, src.err)
		}
		if err != nil {
			return errf("postgres: load %s: %w", t.Name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return errf("postgres: load: commit: %w", err)
	}
	return nil
}

// byteaColumns returns "table.column" for the BYTEA columns of tables.
func byteaColumns(ctx context.Context, tx pgx.Tx, tables []string) (map[string]bool, error) {
	rows, err := tx.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = ANY($1) AND data_type = 'bytea'`, tables)
	if err != nil {
		return nil, errf("postgres: load: read column types: %w", err)
	}
	out := map[string]bool{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			rows.Close()
			return nil, errf("postgres: load: read column types: %w", err)
		}
		out[t+"."+c] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, errf("postgres: load: read column types: %w", err)
	}
	return out, nil
}

// copySource feeds CopyFrom from a row iterator, checking each value
// against its column's kind and turning strings into bytes for BYTEA
// columns.
type copySource struct {
	t     store.Table
	bytea []bool
	next  func() ([]any, error, bool)
	stop  func()
	row   []any
	err   error
}

func newCopySource(t store.Table, bytea map[string]bool, rows iter.Seq2[[]any, error]) *copySource {
	next, stop := iter.Pull2(rows)
	b := make([]bool, len(t.Columns))
	for i, c := range t.Columns {
		b[i] = bytea[t.Name+"."+c.Name]
	}
	return &copySource{t: t, bytea: b, next: next, stop: stop}
}

func (c *copySource) Next() bool {
	row, err, ok := c.next()
	if !ok {
		return false
	}
	if err != nil {
		c.err = err
		return false
	}
	if len(row) != len(c.t.Columns) {
		c.err = fmt.Errorf("a row of %d values, want %d", len(row), len(c.t.Columns))
		return false
	}
	out := make([]any, len(row))
	for i, col := range c.t.Columns {
		v, err := toPostgres(col, c.bytea[i], row[i])
		if err != nil {
			c.err = err
			return false
		}
		out[i] = v
	}
	c.row = out
	return true
}

func (c *copySource) Values() ([]any, error) { return c.row, nil }

func (c *copySource) Err() error { return c.err }

func toPostgres(c store.Column, bytea bool, v any) (any, error) {
	ok := false
	switch x := v.(type) {
	case nil:
		ok = c.Kind == store.NullText
	case string:
		if c.Kind == store.Text || c.Kind == store.NullText {
			if bytea {
				return bs(x), nil
			}
			return x, nil
		}
	case int64:
		ok = c.Kind == store.Int
	case bool:
		ok = c.Kind == store.Bool
	case []byte:
		if c.Kind == store.Bytes {
			if x == nil {
				return []byte{}, nil
			}
			return x, nil
		}
	}
	if !ok {
		return nil, fmt.Errorf("column %s (%v): unexpected value %T", c.Name, c.Kind, v)
	}
	return v, nil
}
