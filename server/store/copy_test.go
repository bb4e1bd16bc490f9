package store

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"testing"
)

// memCopier is an in-memory Copier; drop, when set, loses rows of one
// table on Load, and extra makes Count report more rows than Rows yields.
type memCopier struct {
	rows  map[string][][]any
	drop  string
	extra string
}

type memSnap struct{ m *memCopier }

func (s memSnap) Count(_ context.Context, t Table) (int64, error) {
	n := int64(len(s.m.rows[t.Name]))
	if t.Name == s.m.extra {
		n++
	}
	return n, nil
}

func (s memSnap) Rows(_ context.Context, t Table) iter.Seq2[[]any, error] {
	return func(yield func([]any, error) bool) {
		for _, r := range s.m.rows[t.Name] {
			if !yield(r, nil) {
				return
			}
		}
	}
}

func (memSnap) Close() error { return nil }

func (m *memCopier) Snapshot(context.Context) (Snapshot, error) { return memSnap{m}, nil }

func (m *memCopier) Load(_ context.Context, replace bool, rows func(Table) iter.Seq2[[]any, error]) error {
	next := map[string][][]any{}
	if !replace {
		for k, v := range m.rows {
			next[k] = v
		}
	}
	for _, t := range Tables {
		for r, err := range rows(t) {
			if err != nil {
				return err
			}
			if t.Name == m.drop {
				continue
			}
			next[t.Name] = append(next[t.Name], r)
		}
	}
	m.rows = next
	return nil
}

func filled() *memCopier {
	return &memCopier{rows: map[string][][]any{
		"accounts":         {{"c1", "pk", int64(3), int64(1), int64(2)}},
		"session_messages": {{"m1", "s1", int64(1), nil, "ct", int64(1), int64(1)}, {"m2", "s1", int64(2), "l", "", int64(1), int64(1)}},
		"attachments":      {{"s1", "a.enc", []byte{0, 1}, int64(5)}},
	}}
}

func TestCopy(t *testing.T) {
	ctx := context.Background()
	src, dst := filled(), &memCopier{}
	got, err := Copy(ctx, dst, src, false)
	if err != nil {
		t.Fatal(err)
	}
	var want []TableCopy
	for _, tb := range Tables {
		want = append(want, TableCopy{Table: tb.Name, Rows: int64(len(src.rows[tb.Name]))})
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if !reflect.DeepEqual(dst.rows["session_messages"], src.rows["session_messages"]) {
		t.Fatalf("copied %v", dst.rows)
	}
	if _, err := Copy(ctx, dst, src, false); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("non-empty target: %v", err)
	}
	if _, err := Copy(ctx, dst, src, true); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if _, err := Copy(ctx, &memCopier{drop: "attachments"}, src, false); !errors.Is(err, ErrCopyMismatch) {
		t.Fatalf("a target that lost rows: %v, want ErrCopyMismatch", err)
	}
	changing := filled()
	changing.extra = "accounts"
	if _, err := Copy(ctx, &memCopier{}, changing, false); !errors.Is(err, ErrCopyMismatch) {
		t.Fatalf("a source whose count and rows disagree: %v, want ErrCopyMismatch", err)
	}
	bad := filled()
	bad.rows["accounts"][0][2] = 3 // an int, not an int64
	if _, err := Copy(ctx, &memCopier{}, bad, false); err == nil {
		t.Fatal("a row of the wrong types was copied")
	}
	short := filled()
	short.rows["accounts"][0] = short.rows["accounts"][0][:4]
	if _, err := Copy(ctx, &memCopier{}, short, false); err == nil {
		t.Fatal("a short row was copied")
	}
}

// Two tables whose rows differ only in where one value ends and the next
// begins hash differently.
func TestTableSumSeparatesValues(t *testing.T) {
	tb := Table{Name: "t", Columns: []Column{{"a", Text}, {"b", Text}}}
	x, y := newTableSum(tb), newTableSum(tb)
	if err := x.add([]any{"ab", "c"}); err != nil {
		t.Fatal(err)
	}
	if err := y.add([]any{"a", "bc"}); err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(x.h.Sum(nil), y.h.Sum(nil)) {
		t.Fatal("rows (ab, c) and (a, bc) hash alike")
	}
	if err := x.add([]any{nil, "c"}); err == nil {
		t.Fatal("NULL accepted in a text column")
	}
}

func TestValidAttachmentName(t *testing.T) {
	for name, want := range map[string]bool{
		"a.enc": true, "A-b_c.9": true, "x": true, "": false, ".a": false, "a/b": false, `a\b`: false,
		"é": false, "a b": false, "..": false, string(make([]byte, 201)): false,
	} {
		if got := ValidAttachmentName(name); got != want {
			t.Errorf("ValidAttachmentName(%q) = %v", name, got)
		}
	}
	long := make([]byte, 200)
	for i := range long {
		long[i] = 'a'
	}
	if !ValidAttachmentName(string(long)) {
		t.Error("a 200-byte name refused")
	}
}
