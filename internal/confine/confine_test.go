package confine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/internal/waitfor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixture: root/{a.txt, sub/b.txt, bin.dat, big.txt, in -> sub (relative),
// inabs -> root/sub (absolute), out -> outside (absolute), outrel -> ../outside/secret}
func fixture(t *testing.T) (*Root, string, string) {
	t.Helper()
	base := t.TempDir()
	dir, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{dir, filepath.Join(dir, "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(dir, "a.txt"):        "alpha\n",
		filepath.Join(dir, "sub", "b.txt"): "beta\n",
		filepath.Join(dir, "bin.dat"):      "\x00\x01\xff\xfe",
		filepath.Join(dir, "big.txt"):      strings.Repeat("x", 101),
		filepath.Join(outside, "secret"):   "secret\n",
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"in": "sub", "inabs": filepath.Join(dir, "sub"), "out": outside, "outrel": "../outside/secret",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(dir, Limits{MaxReadBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, r.Dir(), outside
}

func TestReadFileConfinement(t *testing.T) {
	r, dir, outside := fixture(t)
	for _, c := range []struct {
		name, path, want string
		err              error
	}{
		{"relative", "a.txt", "alpha\n", nil},
		{"absolute inside", filepath.Join(dir, "sub", "b.txt"), "beta\n", nil},
		{"dot-dot that stays inside", "sub/../a.txt", "alpha\n", nil},
		{"symlink inside (relative)", "in/b.txt", "beta\n", nil},
		{"symlink inside (absolute)", "inabs/b.txt", "beta\n", nil},
		{"binary file", "bin.dat", "\x00\x01\xff\xfe", nil},
		{"dot-dot escape", "../outside/secret", "", ErrOutside},
		{"deep dot-dot escape", "sub/../../outside/secret", "", ErrOutside},
		{"absolute outside", filepath.Join(outside, "secret"), "", ErrOutside},
		{"absolute /etc", "/etc/passwd", "", ErrOutside},
		{"symlink to outside folder", "out/secret", "", ErrOutside},
		{"symlink to outside file", "outrel", "", ErrOutside},
		{"non-existent", "nope.txt", "", fs.ErrNotExist},
		{"too big", "big.txt", "", ErrTooBig},
		{"a folder", "sub", "", ErrNotRegular},
		{"a FIFO (no writer: never blocks)", "fifo", "", ErrNotRegular},
		{"empty", "", "", ErrBadPath},
		{"NUL", "a\x00b", "", ErrBadPath},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := r.ReadFile(c.path)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("ReadFile(%q) = %q, %v; want %v", c.path, got, err, c.err)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("ReadFile(%q) = %q, %v; want %q", c.path, got, err, c.want)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	r, dir, outside := fixture(t)
	ptr := func(s string) *string { return &s }
	alpha := Hash([]byte("alpha\n"))
	for _, c := range []struct {
		name, path string
		expected   *string
		err        error
	}{
		{"new file", "new.txt", nil, nil},
		{"new file in a linked folder", "in/new.txt", nil, nil},
		{"existing without hash", "a.txt", nil, ErrExists},
		{"wrong hash", "a.txt", ptr("00"), ErrHashMismatch},
		{"right hash", "a.txt", ptr(alpha), nil},
		{"hash of a missing file", "missing.txt", ptr(alpha), fs.ErrNotExist},
		{"outside", "../outside/new", nil, ErrOutside},
		{"through a link outside", "out/new", nil, ErrOutside},
		{"a folder", "sub", nil, ErrNotRegular},
		{"no parent", "nodir/x", nil, fs.ErrNotExist},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, err := r.WriteFile(c.path, []byte("new content"), c.expected)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("WriteFile(%q) = %q, %v; want %v", c.path, h, err, c.err)
				}
				return
			}
			if err != nil || h != Hash([]byte("new content")) {
				t.Fatalf("WriteFile(%q) = %q, %v", c.path, h, err)
			}
			b, err := os.ReadFile(filepath.Join(dir, c.path))
			if err != nil || string(b) != "new content" {
				t.Fatalf("file = %q, %v", b, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file appeared outside: %v", err)
	}
	if _, err := r.WriteFile("x", make([]byte, DefaultMaxWriteBytes+1), nil); !errors.Is(err, ErrTooBig) {
		t.Fatalf("big write: %v", err)
	}
}

func TestSHA256(t *testing.T) {
	if got := Hash([]byte("")); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatal(got)
	}
}

func TestListAndTree(t *testing.T) {
	r, dir, _ := fixture(t)
	entries, truncated, err := r.List(".")
	if err != nil || truncated {
		t.Fatal(err, truncated)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name+":"+e.Type)
	}
	want := "sub:directory,a.txt:file,big.txt:file,bin.dat:file,fifo:other,in:other,inabs:other,out:other,outrel:other"
	if strings.Join(got, ",") != want {
		t.Fatalf("list %s", strings.Join(got, ","))
	}
	if _, _, err := r.List("out"); !errors.Is(err, ErrOutside) {
		t.Fatalf("list through a link outside: %v", err)
	}
	if _, _, err := r.List("a.txt"); !errors.Is(err, ErrNotDir) {
		t.Fatalf("list a file: %v", err)
	}
	tree, truncated, err := r.Tree(".", 5)
	if err != nil || truncated {
		t.Fatal(err)
	}
	var walk func(n *Node, depth int) []string
	walk = func(n *Node, depth int) []string {
		out := []string{strings.Repeat(" ", depth) + n.Name + ":" + n.Type}
		for _, c := range n.Children {
			out = append(out, walk(c, depth+1)...)
		}
		return out
	}
	if got := strings.Join(walk(tree, 0), "|"); got != "root:directory| sub:directory|  b.txt:file| a.txt:file| big.txt:file| bin.dat:file" {
		t.Fatalf("tree %s", got)
	}
	if tree.Path != dir || tree.Children[0].Path != filepath.Join(dir, "sub") {
		t.Fatalf("paths %s %s", tree.Path, tree.Children[0].Path)
	}
	shallow, _, _ := r.Tree(".", 0)
	if shallow.Children != nil {
		t.Fatalf("depth 0 has children")
	}
	small, _ := Open(dir, Limits{MaxTreeEntries: 3})
	defer small.Close()
	if tr, truncated, err := small.Tree(".", 5); err != nil || !truncated || len(walk(tr, 0)) != 3 {
		t.Fatalf("capped tree: %v %v %d", err, truncated, len(walk(tr, 0)))
	}
}

func TestRun(t *testing.T) {
	r, dir, outside := fixture(t)
	ctx := context.Background()
	res, err := r.Run(ctx, Command{Path: "/bin/sh", Args: []string{"-c", "pwd; echo err >&2; exit 3"}})
	if err != nil || res.Stdout != dir+"\n" || res.Stderr != "err\n" || res.ExitCode != 3 || res.Truncated {
		t.Fatalf("run = %+v, %v", res, err)
	}
	res, err = r.Run(ctx, Command{Path: "/bin/sh", Args: []string{"-c", "pwd"}, Dir: "in"})
	if err != nil || res.Stdout != filepath.Join(dir, "sub")+"\n" {
		t.Fatalf("cwd through a link inside = %+v, %v", res, err)
	}
	for _, bad := range []string{"../outside", outside, "out", "a.txt", "nope"} {
		if _, err := r.Run(ctx, Command{Path: "/bin/sh", Args: []string{"-c", "true"}, Dir: bad}); err == nil {
			t.Fatalf("cwd %q accepted", bad)
		}
	}
	res, err = r.Run(ctx, Command{Path: "/bin/sh", Args: []string{"-c", "head -c 5000 /dev/zero | tr '\\0' a"}, MaxOutput: 1000})
	if err != nil || !res.Truncated || res.Stdout != strings.Repeat("a", 1000)+TruncationMarker || res.ExitCode != 0 {
		t.Fatalf("capped = %d bytes truncated=%v %v", len(res.Stdout), res.Truncated, err)
	}
}

func TestRunTimeoutKillsTheGroup(t *testing.T) {
	r, _, _ := fixture(t)
	var pgid int
	// A child in the background keeps the group alive after the shell.
	res, err := r.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", "sleep 60 & echo started; wait"},
		Timeout: 300 * time.Millisecond, OnStart: func(p int) { pgid = p }})
	if !errors.Is(err, ErrTimeout) || !res.TimedOut || res.ExitCode != -1 || res.Stdout != "started\n" {
		t.Fatalf("timeout = %+v, %v", res, err)
	}
	// The background sleep was killed with the group; once its new parent
	// (init) has reaped its zombie, nothing of the group is left.
	err = nil
	if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 5 * time.Second}).True(func() bool {
		err = syscall.Kill(-pgid, 0)
		return errors.Is(err, syscall.ESRCH)
	}) {
		t.Fatalf("kill(-%d, 0) = %v, want ESRCH", pgid, err)
	}
}

func TestClampTimeout(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{0: DefaultTimeout, -1: DefaultTimeout, time.Second: time.Second, time.Hour: MaxTimeout} {
		if got := ClampTimeout(in); got != want {
			t.Errorf("ClampTimeout(%v) = %v, want %v", in, got, want)
		}
	}
}
