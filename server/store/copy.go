package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"iter"
)

// Kind is the Go type of one column's values in the rows of a Snapshot and
// of Copier.Load.
type Kind uint8

// Column kinds.
const (
	// Text values are strings.
	Text Kind = iota + 1
	// NullText values are strings or nil (SQL NULL).
	NullText
	// Int values are int64.
	Int
	// Bool values are bool.
	Bool
	// Bytes values are []byte.
	Bytes
)

// Column is one column of a copied table.
type Column struct {
	Name string
	Kind Kind
}

// Table is one table of the store's content as copied between backends:
// its name and columns are the same in every backend's schema. Key lists the
// columns of its primary key; Rows yields rows in ascending (bytewise) key
// order.
type Table struct {
	Name    string
	Key     []string
	Columns []Column
}

// Migration is one applied schema migration of a backend: the name of its
// file and when it was applied (Unix milliseconds).
type Migration struct {
	Name      string
	AppliedAt int64
}

func col(name string, k Kind) Column { return Column{Name: name, Kind: k} }

// Tables is the whole content of a store, in an order where every row's
// references (an account, a session) come in an earlier table. The schema
// bookkeeping (applied migrations) is not content.
var Tables = []Table{
	{Name: "accounts", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("public_key", Text), col("seq", Int), col("created_at", Int), col("updated_at", Int)}},
	{Name: "sessions", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("account_id", Text), col("tag", Text), col("seq", Int), col("metadata", Text),
		col("metadata_version", Int), col("agent_state", NullText), col("agent_state_version", Int),
		col("data_encryption_key", NullText), col("active", Bool), col("last_active_at", Int),
		col("created_at", Int), col("updated_at", Int)}},
	{Name: "session_messages", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("session_id", Text), col("seq", Int), col("local_id", NullText), col("content", Text),
		col("created_at", Int), col("updated_at", Int)}},
	{Name: "machines", Key: []string{"account_id", "id"}, Columns: []Column{
		col("account_id", Text), col("id", Text), col("metadata", Text), col("metadata_version", Int),
		col("daemon_state", NullText), col("daemon_state_version", Int), col("data_encryption_key", NullText),
		col("seq", Int), col("active", Bool), col("last_active_at", Int), col("created_at", Int), col("updated_at", Int)}},
	{Name: "terminal_auth_requests", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("public_key", Text), col("supports_v2", Bool), col("response", NullText),
		col("response_account_id", NullText), col("created_at", Int)}},
	{Name: "token_revocations", Key: []string{"account_id"}, Columns: []Column{
		col("account_id", Text), col("generation", Int), col("revoked_at", Int)}},
	{Name: "auth_challenges", Key: []string{"digest"}, Columns: []Column{
		col("digest", Text), col("used_at", Int), col("keep_until", Int)}},
	{Name: "push_tokens", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("account_id", Text), col("token", Text), col("created_at", Int), col("updated_at", Int)}},
	{Name: "web_push_subscriptions", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("account_id", Text), col("endpoint", Text), col("p256dh", Text), col("auth", Text),
		col("created_at", Int), col("updated_at", Int)}},
	{Name: "usage_reports", Key: []string{"id"}, Columns: []Column{
		col("id", Text), col("account_id", Text), col("session_id", Text), col("key", Text), col("data", Text),
		col("created_at", Int), col("updated_at", Int)}},
	{Name: "attachments", Key: []string{"session_id", "name"}, Columns: []Column{
		col("session_id", Text), col("name", Text), col("data", Bytes), col("created_at", Int)}},
}

// Snapshot is a consistent, read-only view of a whole store. Its methods are
// called one at a time (a Rows loop ends before the next call).
type Snapshot interface {
	// Count returns the number of rows of t.
	Count(ctx context.Context, t Table) (int64, error)
	// Rows yields every row of t in key order, one value per column of
	// t.Columns, typed by its Kind. A failure is yielded as the last pair.
	Rows(ctx context.Context, t Table) iter.Seq2[[]any, error]
	// Close ends the view.
	Close() error
}

// Copier is a backend whose whole content can be read (Snapshot) and written
// (Load) — `happy server migrate --from … --to …`.
type Copier interface {
	// Snapshot opens a consistent view of the current content.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Load writes, table by table in Tables order, every row that rows(t)
	// yields (typed as Snapshot.Rows yields them), keeping ids, seqs and
	// times as given. With replace the current content is removed first.
	// The database part is one transaction: on an error it is unchanged.
	Load(ctx context.Context, replace bool, rows func(Table) iter.Seq2[[]any, error]) error
}

// ErrNotEmpty is returned by Copy when the target holds data and replacing it
// was not asked for.
var ErrNotEmpty = errors.New("store: the target is not empty")

// ErrCopyMismatch is returned by Copy when the target's content read back
// differs from what was copied.
var ErrCopyMismatch = errors.New("store: copy verification failed")

// TableCopy is the outcome of copying one table: its row count, equal in
// source and target after a verified Copy.
type TableCopy struct {
	Table string
	Rows  int64
}

// Copy copies the whole content of src into dst and verifies it: for every
// table, the target's row count and a SHA-256 of its rows (read back in key
// order) must equal the source's. dst must be empty (ErrNotEmpty) unless
// replace, which first removes its content. Stop the relays using src first:
// rows written to src during the copy are not copied.
func Copy(ctx context.Context, dst, src Copier, replace bool) ([]TableCopy, error) {
	if !replace {
		if err := requireEmpty(ctx, dst); err != nil {
			return nil, err
		}
	}
	ss, err := src.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: copy: read source: %w", err)
	}
	defer func() { _ = ss.Close() }()
	want := make(map[string]int64, len(Tables))
	for _, t := range Tables {
		n, err := ss.Count(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("store: copy: count source %s: %w", t.Name, err)
		}
		want[t.Name] = n
	}
	sums := map[string]*tableSum{}
	feed := func(t Table) iter.Seq2[[]any, error] {
		sum := newTableSum(t)
		sums[t.Name] = sum
		return func(yield func([]any, error) bool) {
			for row, err := range ss.Rows(ctx, t) {
				if err == nil {
					err = sum.add(row)
				}
				if !yield(row, err) || err != nil {
					return
				}
			}
		}
	}
	if err := dst.Load(ctx, replace, feed); err != nil {
		return nil, fmt.Errorf("store: copy: load target: %w", err)
	}
	out := make([]TableCopy, 0, len(Tables))
	for _, t := range Tables {
		s := sums[t.Name]
		if s == nil || s.n != want[t.Name] {
			got := int64(0)
			if s != nil {
				got = s.n
			}
			return nil, fmt.Errorf("%w: source %s changed during the copy (%d rows counted, %d read)", ErrCopyMismatch, t.Name, want[t.Name], got)
		}
	}
	ds, err := dst.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: copy: read target back: %w", err)
	}
	defer func() { _ = ds.Close() }()
	for _, t := range Tables {
		n, err := ds.Count(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("store: copy: count target %s: %w", t.Name, err)
		}
		if n != want[t.Name] {
			return nil, fmt.Errorf("%w: %s has %d rows in the source, %d in the target", ErrCopyMismatch, t.Name, want[t.Name], n)
		}
		back := newTableSum(t)
		for row, err := range ds.Rows(ctx, t) {
			if err != nil {
				return nil, fmt.Errorf("store: copy: read target %s: %w", t.Name, err)
			}
			if err := back.add(row); err != nil {
				return nil, fmt.Errorf("store: copy: read target %s: %w", t.Name, err)
			}
		}
		if back.n != n || !bytes.Equal(back.h.Sum(nil), sums[t.Name].h.Sum(nil)) {
			return nil, fmt.Errorf("%w: the rows of %s read back from the target differ from the source's", ErrCopyMismatch, t.Name)
		}
		out = append(out, TableCopy{Table: t.Name, Rows: n})
	}
	return out, nil
}

// requireEmpty returns ErrNotEmpty when any table of c has a row.
func requireEmpty(ctx context.Context, c Copier) error {
	s, err := c.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("store: copy: read target: %w", err)
	}
	defer func() { _ = s.Close() }()
	for _, t := range Tables {
		n, err := s.Count(ctx, t)
		if err != nil {
			return fmt.Errorf("store: copy: count target %s: %w", t.Name, err)
		}
		if n > 0 {
			return fmt.Errorf("%w: %s has %d rows", ErrNotEmpty, t.Name, n)
		}
	}
	return nil
}

// tableSum hashes a table's rows: each value as a kind byte, then its length
// and bytes (strings, bytes) or its 8 bytes (ints), so that no two distinct
// row sequences hash alike by concatenation.
type tableSum struct {
	t Table
	h hash.Hash
	n int64
}

func newTableSum(t Table) *tableSum { return &tableSum{t: t, h: sha256.New()} }

func (s *tableSum) add(row []any) error {
	if len(row) != len(s.t.Columns) {
		return fmt.Errorf("%s: a row of %d values, want %d", s.t.Name, len(row), len(s.t.Columns))
	}
	var num [9]byte
	for i, c := range s.t.Columns {
		v := row[i]
		switch x := v.(type) {
		case nil:
			if c.Kind != NullText {
				return fmt.Errorf("%s.%s: NULL in a %v column", s.t.Name, c.Name, c.Kind)
			}
			_, _ = s.h.Write([]byte{0})
		case string:
			if c.Kind != Text && c.Kind != NullText {
				return fmt.Errorf("%s.%s: a string in a %v column", s.t.Name, c.Name, c.Kind)
			}
			num[0] = 1
			binary.BigEndian.PutUint64(num[1:], uint64(len(x)))
			_, _ = s.h.Write(num[:])
			_, _ = s.h.Write([]byte(x))
		case []byte:
			if c.Kind != Bytes {
				return fmt.Errorf("%s.%s: bytes in a %v column", s.t.Name, c.Name, c.Kind)
			}
			num[0] = 2
			binary.BigEndian.PutUint64(num[1:], uint64(len(x)))
			_, _ = s.h.Write(num[:])
			_, _ = s.h.Write(x)
		case int64:
			if c.Kind != Int {
				return fmt.Errorf("%s.%s: an integer in a %v column", s.t.Name, c.Name, c.Kind)
			}
			num[0] = 3
			binary.BigEndian.PutUint64(num[1:], uint64(x))
			_, _ = s.h.Write(num[:])
		case bool:
			if c.Kind != Bool {
				return fmt.Errorf("%s.%s: a boolean in a %v column", s.t.Name, c.Name, c.Kind)
			}
			b := byte(4)
			if x {
				b = 5
			}
			_, _ = s.h.Write([]byte{b})
		default:
			return fmt.Errorf("%s.%s: unexpected value type %T", s.t.Name, c.Name, v)
		}
	}
	s.n++
	return nil
}

// String names the kind.
func (k Kind) String() string {
	switch k {
	case Text:
		return "text"
	case NullText:
		return "nullable text"
	case Int:
		return "integer"
	case Bool:
		return "boolean"
	case Bytes:
		return "bytes"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}
