package home

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolve(t *testing.T) {
	uh, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no user home")
	}
	cases := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"explicit", map[string]string{"HAPPY_HOME_DIR": "/srv/happy"}, "/srv/happy"},
		{"tilde", map[string]string{"HAPPY_HOME_DIR": "~/h"}, filepath.Join(uh, "h")},
		{"default from HOME", map[string]string{"HOME": "/home/u"}, "/home/u/.happy"},
		{"cleaned", map[string]string{"HAPPY_HOME_DIR": "/srv//happy/"}, "/srv/happy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Resolve(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if d.Path() != tc.want {
				t.Fatalf("Path() = %q, want %q", d.Path(), tc.want)
			}
		})
	}
}

func TestLayout(t *testing.T) {
	d, err := New("/h")
	if err != nil {
		t.Fatal(err)
	}
	got := []string{d.Logs(), d.Server(), d.Outbox(), d.AccessKey(), d.Settings()}
	want := []string{"/h/logs", "/h/server", "/h/outbox", "/h/access.key", "/h/settings.json"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("layout[%d] = %q, want %q", i, got[i], want[i])
		}
	}
	if _, err := New(""); err == nil {
		t.Fatal("New(\"\") succeeded")
	}
}

func TestEnsureCreatesPrivateFolder(t *testing.T) {
	d, _ := New(filepath.Join(t.TempDir(), "a", "b"))
	if err := d.Ensure(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v, want 0700", st.Mode().Perm())
	}
}
