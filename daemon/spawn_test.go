//go:build unix

package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/home"
)

// promptFile is where the fake session in mode "prompt" writes the first
// prompt it read (in its working folder).
const promptFile = "prompt-read.txt"

// fakePromptSession is the fake session of mode "prompt": it reads its
// first prompt as happy does (--initial-prompt-fd), writes it to
// promptFile, reports and runs until SIGTERM.
func fakePromptSession() error {
	for _, a := range os.Args[1:] {
		v, ok := strings.CutPrefix(a, "--initial-prompt-fd=")
		if !ok {
			continue
		}
		var fd int
		if _, err := fmt.Sscan(v, &fd); err != nil {
			return err
		}
		p, err := app.ReadInitialPrompt(fd)
		if err != nil {
			return err
		}
		return os.WriteFile(promptFile, []byte(p), 0o600)
	}
	return nil
}

// A spawned session's first prompt reaches it on an inherited pipe, never
// on its command line: the process's argv (which every local user can read
// in /proc and ps) holds the flag naming the descriptor, not the text.
func TestSpawnPromptIsNotInArgv(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc to read a process's argv from")
	}
	h, err := home.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{env: app.Env{Home: h, Log: zerolog.New(zerolog.NewTestWriter(t))}, children: map[int]*child{},
		kick: make(chan struct{}, 1), stopped: make(chan struct{}),
		opts: Options{SpawnTimeout: 10 * time.Second, StopGrace: 2 * time.Second, Command: func(args []string) *exec.Cmd {
			cmd := exec.Command(exe, args...)
			cmd.Env = append(os.Environ(), fakeSessionEnv+"=prompt")
			return cmd
		}}}
	dir := t.TempDir()
	secret := "deploy with the key sk-live-0123456789 " + strings.Repeat("é", 30000)
	params, _ := json.Marshal(SpawnRequest{Type: "spawn-in-directory", Directory: dir, Agent: "codex", Prompt: secret})
	rep := d.spawn(context.Background(), params)
	if rep.Type != SpawnSuccess {
		t.Fatalf("spawn: %+v", rep)
	}
	defer func() {
		d.mu.Lock()
		c := d.children[rep.PID]
		d.mu.Unlock()
		if c != nil {
			_ = c.p.Stop()
		}
		d.wg.Wait()
	}()
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", rep.PID))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	want := []string{exe, "codex", "--started-by", "daemon", "--initial-prompt-fd=4"}
	if fmt.Sprint(argv) != fmt.Sprint(want) {
		t.Fatalf("argv %q\nwant %q", argv, want)
	}
	got, err := os.ReadFile(filepath.Join(dir, promptFile))
	if err != nil || string(got) != secret {
		t.Fatalf("the session read %d bytes (%v), want the %d of the prompt", len(got), err, len(secret))
	}
}
