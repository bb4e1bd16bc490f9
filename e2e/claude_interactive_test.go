//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// screen collects what a PTY shows.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Contains(s.buf.Bytes(), []byte(sub))
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Scenario 3: `happy claude` in a terminal: Claude's own UI runs in the PTY
// happy proxies; a prompt typed there is answered; Ctrl-C ends it; the
// terminal is restored and the transcript on the relay is complete.
func TestE2EClaudeInteractive(t *testing.T) {
	claudeBin := agentBinary(t, "CLAUDE")
	relay := startRelay(t)
	hs := homes(t, relay.URL, 2)
	work := t.TempDir()
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "Bash",
		ToolInput: map[string]any{"command": "echo hi", "description": "Print hi"},
		FinalText: "Printed hi.",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer model.Close()
	ch := claudeHome(t, work, "sk-e2e-dummy-key-0123456789")
	envA := claudeEnv(ch, hs[0], relay.URL, model.URL, claudeBin)
	envB := claudeEnv(ch, hs[1], relay.URL, model.URL, claudeBin)

	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no PTY: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	if err := pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	before, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(happyBin, "claude", "--", "--model", "claude-sonnet-4-5")
	cmd.Env, cmd.Dir = envA, work
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	scr := &screen{}
	go func() { _, _ = copyUntilErr(scr, master) }()

	deadline := time.Now().Add(30 * time.Second)
	for !scr.contains("shortcuts") {
		if time.Now().After(deadline) {
			t.Fatalf("no Claude prompt on screen after 30 s:\n%q", scr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := master.Write([]byte("Run echo hi")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := master.Write([]byte("\r")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the answer on screen", func() bool { return scr.contains("Printed") })

	// From another machine: the transcript has the prompt, the tool and the answer.
	var sid, doc string
	waitFor(t, 30*time.Second, "the turn on the relay", func() bool {
		code, out, _ := happyRun(t, envB, work, "sessions", "--json")
		var list []struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
			return false
		}
		sid = list[0].ID
		code, doc, _ = happyRun(t, envB, work, "log", sid, "--json")
		return code == 0 && strings.Contains(doc, `"text": "Run echo hi"`) && strings.Contains(doc, `"text": "Printed hi."`) &&
			strings.Contains(doc, `"status": "completed"`) && strings.Contains(doc, `"finish": "stop"`)
	})

	// Ctrl-C twice ends Claude; happy ends with it.
	for i := 0; i < 2; i++ {
		_, _ = master.Write([]byte{0x03})
		time.Sleep(500 * time.Millisecond)
	}
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("happy claude did not exit after Ctrl-C; screen:\n%s", scr.String())
	}
	after, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	if after.Lflag != before.Lflag || after.Iflag != before.Iflag || after.Oflag != before.Oflag {
		t.Fatalf("terminal not restored: lflag %#x→%#x iflag %#x→%#x oflag %#x→%#x", before.Lflag, after.Lflag, before.Iflag, after.Iflag, before.Oflag, after.Oflag)
	}
	if !scr.contains("happy: session " + sid + " ended") {
		t.Fatalf("no end notice for %s on screen", sid)
	}
	// Nothing of the agent's process group is left.
	if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
		t.Fatal("processes of happy's group still run")
	}
	_, doc, _ = happyRun(t, envB, work, "log", sid, "--json")
	golden(t, "claude-interactive.json", normalize(t, []byte(doc), map[string]string{work: "<WORK>", ch: "<HOME>"}))
}

// copyUntilErr copies r to w until r fails (the PTY closes).
func copyUntilErr(w *screen, r *os.File) (int64, error) {
	var n int64
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		if k > 0 {
			_, _ = w.Write(buf[:k])
			n += int64(k)
		}
		if err != nil {
			return n, err
		}
	}
}
