//go:build unix

package private

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func mode(t *testing.T, p string) fs.FileMode {
	t.Helper()
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

// With umask 0, and over files and folders that existed with wide modes,
// everything comes out 0600 (files) and 0700 (folders); MkdirAll leaves an
// existing parent alone.
func TestModesWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	root := t.TempDir()
	parent := filepath.Join(root, "shared")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, "a", "b")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, "own")
	if err := os.Mkdir(own, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Dir(own); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(root, "wide")
	if err := os.WriteFile(wide, []byte("x"), 0o666); err != nil {
		t.Fatal(err)
	}
	f, err := OpenAppend(wide)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	made := filepath.Join(dir, "made")
	f, err = Create(made)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	written := filepath.Join(dir, "written")
	if err := WriteFile(written, []byte("y")); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(root, "db")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Restrict(other); err != nil || Restrict(filepath.Join(root, "missing")) != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{
		parent: fs.ModeDir | 0o755, filepath.Join(parent, "a"): fs.ModeDir | 0o700, dir: fs.ModeDir | 0o700, own: fs.ModeDir | 0o700,
		wide: 0o600, made: 0o600, written: 0o600, other: 0o600,
	} {
		if got := mode(t, p); got != want {
			t.Errorf("%s: %v, want %v", p, got, want)
		}
	}
	// A reader changes nothing.
	if err := os.Chmod(other, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenFile(other, os.O_RDONLY); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if got := mode(t, other); got != 0o644 {
		t.Errorf("a read made %s %v", other, got)
	}
	if err := Dir(written); err == nil {
		t.Error("Dir of a file: no error")
	}
}
