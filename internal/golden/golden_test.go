package golden

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDiff(t *testing.T) {
	cases := []struct{ want, got, diff string }{
		{"a\nb\n", "a\nb\n", ""},
		{"a\nb\nc", "a\nx\nc", "line 2:\n  want: b\n  got:  x"},
		{"a\n", "a\nb\n", "line 2:\n  want: \n  got:  b"},
		{"a", "a\n", "want 1 lines, got 2"},
	}
	for _, c := range cases {
		if got := Diff([]byte(c.want), []byte(c.got)); got != c.diff {
			t.Errorf("Diff(%q, %q) = %q, want %q", c.want, c.got, got, c.diff)
		}
	}
}

// recorder is a testing.TB that records failures; Fatalf stops the
// check as it would stop a test.
type recorder struct {
	testing.TB
	errors []string
}

type fatal struct{}

func (r *recorder) Helper()                        {}
func (r *recorder) Errorf(format string, a ...any) { r.errors = append(r.errors, format) }
func (r *recorder) Fatalf(format string, a ...any) {
	r.errors = append(r.errors, format)
	panic(fatal{})
}

// check runs Check on r, stopping where Fatalf would.
func (r *recorder) check(path string, got []byte) {
	defer func() {
		if v := recover(); v != nil && v != (fatal{}) {
			panic(v)
		}
	}()
	Check(r, path, got)
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "case", "expected.txt")
	r := &recorder{TB: t}
	r.check(path, []byte("x\n"))
	if len(r.errors) != 1 {
		t.Fatalf("a missing golden file gave %d failures, want 1", len(r.errors))
	}

	*update = true
	r.check(path, []byte("x\n"))
	*update = false
	if b, err := os.ReadFile(path); err != nil || string(b) != "x\n" {
		t.Fatalf("-update wrote %q, %v", b, err)
	}

	r.errors = nil
	r.check(path, []byte("x\n"))
	r.check(path, []byte("y\n"))
	if len(r.errors) != 1 {
		t.Fatalf("same then different output gave %d failures, want 1", len(r.errors))
	}
}

func TestIndent(t *testing.T) {
	if got := string(Indent(t, []byte(`{"a":[1,{"b":2}]}`))); got != "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ]\n}\n" {
		t.Fatalf("Indent = %q", got)
	}
}

func TestCases(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"b-case", "a-case"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	Cases(t, dir, func(t *testing.T, d string) { got = append(got, filepath.Base(d)) })
	if !slices.Equal(got, []string{"a-case", "b-case"}) {
		t.Fatalf("cases %v", got)
	}
}
