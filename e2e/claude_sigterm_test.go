//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// children lists the pids of pid's child processes (from /proc).
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(s); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// sigtermDoc is the part of `happy log --json` the SIGTERM test reads.
type sigtermDoc struct {
	Messages []struct {
		Info struct {
			Role string `json:"role"`
			Time struct {
				Completed *int64 `json:"completed"`
			} `json:"time"`
			Finish string `json:"finish"`
		} `json:"info"`
		Parts []struct {
			Type   string `json:"type"`
			CallID string `json:"callID"`
			State  struct {
				Status string `json:"status"`
				Error  string `json:"error"`
			} `json:"state"`
		} `json:"parts"`
	} `json:"messages"`
}

// SIGTERM to an interactive `happy claude` while a tool runs: happy exits
// 130, the session is ended on the relay with nothing left open (the tool
// an error, the answer completed with a finish), and Claude's process group
// is gone.
func TestE2EClaudeInteractiveSIGTERM(t *testing.T) {
	claudeBin := agentBinary(t, "CLAUDE")
	relay := startRelay(t)
	hs := homes(t, relay.URL, 2)
	work := t.TempDir()
	model, err := fakemodel.New(fakemodel.Script{
		ToolName:  "Bash",
		ToolInput: map[string]any{"command": "sleep 120", "description": "Wait two minutes"},
		FinalText: "Waited.",
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
	cmd := exec.Command(happyBin, "claude", "--allow", "bash:sleep *", "--", "--model", "claude-sonnet-4-5")
	cmd.Env, cmd.Dir = envA, work
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		exited <- code
	}()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
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
	if _, err := master.Write([]byte("Wait two minutes")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := master.Write([]byte("\r")); err != nil {
		t.Fatal(err)
	}

	// From another machine: the tool is open (running, or blocked if the
	// rule did not answer).
	var sid, status string
	waitFor(t, 60*time.Second, "an open tool on the relay", func() bool {
		code, out, _ := happyRun(t, envB, work, "sessions", "--json")
		var list []struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
			return false
		}
		sid = list[0].ID
		code, out, _ = happyRun(t, envB, work, "log", sid, "--json")
		var doc sigtermDoc
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
			return false
		}
		for _, m := range doc.Messages {
			for _, p := range m.Parts {
				if p.Type == "tool" && (p.State.Status == "running" || p.State.Status == "blocked") {
					status = p.State.Status
					return true
				}
			}
		}
		return false
	})
	t.Logf("tool %s when happy gets SIGTERM", status)
	agents := children(cmd.Process.Pid)
	if len(agents) == 0 {
		t.Fatal("happy has no child process (Claude)")
	}
	// Every process under happy (Claude, the shell running the tool, sleep).
	var tree []int
	for todo := agents; len(todo) > 0; {
		pid := todo[0]
		todo = append(todo[1:], children(pid)...)
		tree = append(tree, pid)
	}
	t.Logf("processes under happy: %v", tree)
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Fatalf("happy exit %d after SIGTERM, want 130; screen:\n%s", code, scr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("happy claude did not exit after SIGTERM; screen:\n%s", scr.String())
	}
	for _, pid := range append(agents, cmd.Process.Pid) {
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("process group %d after the exit: kill(-pgid, 0) = %v, want ESRCH", pid, err)
		}
	}
	// A tool's process may sit in a group of its own (Claude starts some
	// detached) and end a moment after happy: it must be gone within
	// seconds, not run on (the tool was a two-minute sleep).
	for _, pid := range tree {
		waitFor(t, 10*time.Second, fmt.Sprintf("process %d (under happy) to end after the exit", pid), func() bool {
			return gone(pid)
		})
	}

	code, out, _ := happyRun(t, envB, work, "sessions", "--json")
	var list []struct{ ID, State string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].ID != sid || list[0].State != "ended" {
		t.Fatalf("sessions after SIGTERM: %s", out)
	}
	code, out, _ = happyRun(t, envB, work, "log", sid, "--json")
	var doc sigtermDoc
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("happy log: %d %s", code, out)
	}
	tools, last := 0, -1
	for i, m := range doc.Messages {
		if m.Info.Role == "assistant" {
			last = i
		}
		for _, p := range m.Parts {
			if p.Type != "tool" {
				continue
			}
			tools++
			switch p.State.Status {
			case "pending", "running", "blocked":
				t.Fatalf("tool %s left %s:\n%s", p.CallID, p.State.Status, out)
			}
		}
	}
	if tools == 0 || last < 0 {
		t.Fatalf("no tool or no answer in the transcript:\n%s", out)
	}
	if a := doc.Messages[last].Info; a.Time.Completed == nil || a.Finish == "" {
		t.Fatalf("last assistant message open: %+v\n%s", a, out)
	}
}

// gone reports whether process pid has ended: no such process, or a zombie
// waiting for a parent that is not this test.
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses: "pid (comm) S …".
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}
