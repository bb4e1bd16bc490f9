//go:build unix

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// checkPrivate fails the test for every file under root that is not 0600
// and every folder that is not 0700 (root included).
func checkPrivate(t *testing.T, root string) (files int) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = fs.ModeDir | 0o700
		} else {
			files++
		}
		if info.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, info.Mode(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// With a umask that takes nothing away, what a run writes (its --record
// traffic log, and under the happy home the credentials, settings,
// outbox, locks and logs) is still readable by the user alone: files
// 0600, folders 0700, also those that existed with wider modes.
func TestWhatARunWritesIsPrivate(t *testing.T) {
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	fc := newFakeCodex(t, "", "codex-app", "")
	env := codexTestEnv(t, fc)
	// A home an older happy left readable by others is made private too.
	home := filepath.Join(env["HAPPY_HOME_DIR"], "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(env["HAPPY_HOME_DIR"], "access.key"), filepath.Join(home, "access.key")); err != nil {
		t.Fatal(err)
	}
	env["HAPPY_HOME_DIR"] = home
	// An earlier record file that other users could read is made private.
	rec := filepath.Join(t.TempDir(), "traffic.jsonl")
	if err := os.WriteFile(rec, []byte("old"), 0o666); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*", "--record", rec)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkPrivate(t, rec)
	if n := checkPrivate(t, home); n < 4 {
		t.Fatalf("only %d files under the home", n)
	}
}

// --initial-prompt-fd reads the first prompt from the descriptor (the
// daemon's pipe) to its end, and is refused with
// --initial-prompt or a descriptor that is not an inherited one.
func TestInitialPromptFromDescriptor(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("fix the build"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	o := &agentOptions{initialPromptFD: fd, startedBy: "daemon"}
	if err := o.checkStartFlags(); err != nil || o.initialPrompt != "fix the build" {
		t.Fatalf("prompt %q, %v", o.initialPrompt, err)
	}
	both := &agentOptions{initialPromptFD: 9, initialPrompt: "x"}
	if err := both.checkStartFlags(); err == nil || err.Error() != "--initial-prompt and --initial-prompt-fd are two ways of giving one prompt; give one" {
		t.Errorf("both: %v", err)
	}
	stderr := &agentOptions{initialPromptFD: 2}
	if err := stderr.checkStartFlags(); err == nil || err.Error() != "--initial-prompt-fd: initial prompt: descriptor 2 is not an inherited pipe (want 3 or more)" {
		t.Errorf("fd 2: %v", err)
	}
}
