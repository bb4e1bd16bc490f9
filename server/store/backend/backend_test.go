package backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParse(t *testing.T) {
	dir := t.TempDir()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		want Spec
		str  string
	}{
		{"postgres://u:pw@h:5432/db?sslmode=disable", Spec{Postgres, "postgres://u:pw@h:5432/db?sslmode=disable"}, "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgresql://h/db", Spec{Postgres, "postgresql://h/db"}, "postgresql://h/db"},
		{"postgres://u@h/db", Spec{Postgres, "postgres://u@h/db"}, "postgres://u@h/db"},
		{"sqlite:/x/y.db", Spec{SQLite, "/x/y.db"}, "sqlite:/x/y.db"},
		{"sqlite:" + dir, Spec{SQLite, filepath.Join(dir, "happy.db")}, "sqlite:" + filepath.Join(dir, "happy.db")},
		{"sqlite:rel/h.db", Spec{SQLite, filepath.Join(wd, "rel/h.db")}, "sqlite:" + filepath.Join(wd, "rel/h.db")},
	}
	for _, c := range cases {
		got, err := Parse(c.name)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("Parse(%q) = %+v (%q), %v; want %+v (%q)", c.name, got, got.String(), err, c.want, c.str)
		}
	}
	for _, bad := range []string{"", "x", "/path/happy.db", "sqlite:", "mysql://u:secret@h/db", "sqlite:a\x00b", "POSTGRES://h/db"} {
		_, err := Parse(bad)
		if !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q) error %v, want ErrSpec", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) error shows the password: %v", bad, err)
		}
	}
}

func TestOpenSQLite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "folder")
	st, err := Open(context.Background(), Spec{SQLite, filepath.Join(dir, "happy.db")}, Options{Synchronous: "full"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if got := st.MigratedAtOpen(); len(got) != 4 || got[0] != "0001_init.sql" || got[1] != "0002_token_revocations.sql" || got[2] != "0003_auth_challenges.sql" || got[3] != "0004_web_push.sql" {
		t.Fatalf("migrated %v", got)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("folder %v %v", fi, err)
	}
	if _, err := Open(context.Background(), Spec{SQLite, filepath.Join(dir, "b.db")}, Options{Synchronous: "off"}); err == nil {
		t.Fatal("synchronous off accepted")
	}
	if _, err := Open(context.Background(), Spec{Kind: "mysql"}, Options{}); !errors.Is(err, ErrSpec) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// FuzzParse: any name parses or is refused with ErrSpec, never a panic, and
// a password never shows in String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"postgres://u:pw@h/db", "sqlite:/x", "sqlite:", "postgresql://@/", "postgres://a:b@c@d/e", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s, err := Parse(name)
		if err != nil {
			if !errors.Is(err, ErrSpec) {
				t.Fatalf("Parse(%q): %v is not ErrSpec", name, err)
			}
			return
		}
		if s.Kind != SQLite && s.Kind != Postgres {
			t.Fatalf("Parse(%q) kind %q", name, s.Kind)
		}
		if s.Kind == Postgres && strings.Contains(name, ":pw@") && strings.Contains(s.String(), ":pw@") {
			t.Fatalf("String of %q shows the password: %q", name, s.String())
		}
	})
}
