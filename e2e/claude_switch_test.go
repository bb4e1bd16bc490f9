//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// switchDoc is what the switch test reads of a transcript document.
type switchDoc struct {
	Messages []struct {
		Info struct {
			Role   string `json:"role"`
			Finish string `json:"finish"`
		} `json:"info"`
		Parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"messages"`
	Dropped []json.RawMessage `json:"dropped"`
}

// turns lists the user prompts and assistant texts of the root session in
// transcript order ("user: …", "assistant: …").
func (d switchDoc) turns() []string {
	var out []string
	for _, m := range d.Messages {
		for _, p := range m.Parts {
			if p.Type == "text" && strings.TrimSpace(p.Text) != "" {
				out = append(out, m.Info.Role+": "+p.Text)
			}
		}
	}
	return out
}

// Scenario 3b: `happy claude` in a terminal switches modes. A prompt typed in
// Claude's own UI is answered (local mode); a prompt sent from another
// machine hands the session to remote mode (Claude resumed in SDK mode) and
// is answered there; a key in the terminal brings Claude's UI back (local
// mode, the same Claude session resumed), where the next prompt is answered;
// Ctrl-C twice ends it. The terminal is restored, nothing of the agent's
// process group is left, and the relay transcript has the three turns in
// order, each prompt once.
func TestE2EClaudeSwitch(t *testing.T) {
	claudeBin := agentBinary(t, "CLAUDE")
	relay := startRelay(t)
	hs := homes(t, relay.URL, 2)
	work := t.TempDir()
	model, err := fakemodel.New(fakemodel.Script{Decide: func(r fakemodel.Request) fakemodel.Reply {
		switch {
		case !r.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case r.ToolDone:
			return fakemodel.Reply{Text: "Printed hi."}
		case strings.Contains(r.LastText, "Run echo hi"):
			return fakemodel.Reply{ToolName: "Bash", ToolInput: map[string]any{"command": "echo hi", "description": "Print hi"}}
		case strings.Contains(r.LastText, "Say two"):
			return fakemodel.Reply{Text: "Answer two."}
		case strings.Contains(r.LastText, "Say three"):
			return fakemodel.Reply{Text: "Answer three."}
		}
		return fakemodel.Reply{Text: "Unexpected request."}
	}})
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
	// since reports whether the screen shows sub after byte offset mark.
	since := func(mark int, sub string) bool { return strings.Contains(scr.String()[mark:], sub) }
	typePrompt := func(text string) {
		t.Helper()
		time.Sleep(300 * time.Millisecond)
		if _, err := master.Write([]byte(text)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if _, err := master.Write([]byte("\r")); err != nil {
			t.Fatal(err)
		}
	}
	// wait is waitFor that shows the screen's end and happy's log when it
	// times out.
	wait := func(d time.Duration, what string, fn func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !fn() {
			if time.Now().After(deadline) {
				s := scr.String()
				var logs []string
				files, _ := filepath.Glob(filepath.Join(hs[0], "logs", "*"))
				for _, f := range files {
					b, _ := os.ReadFile(f)
					logs = append(logs, f+":\n"+string(b))
				}
				t.Fatalf("timed out waiting for %s\nscreen (end):\n%q\nhappy logs:\n%s", what, s[max(0, len(s)-4000):], strings.Join(logs, "\n"))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	readDoc := func(sid string) (switchDoc, string, bool) {
		code, out, _ := happyRun(t, envB, work, "log", sid, "--json")
		var d switchDoc
		if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
			return d, out, false
		}
		return d, out, true
	}

	// 1. Local mode: a prompt typed in Claude's own UI.
	wait(30*time.Second, "Claude's prompt on screen", func() bool { return scr.contains("shortcuts") })
	typePrompt("Run echo hi")
	wait(60*time.Second, "the local answer on screen", func() bool { return scr.contains("Printed") })
	var sid string
	wait(30*time.Second, "the local turn on the relay", func() bool {
		code, out, _ := happyRun(t, envB, work, "sessions", "--json")
		var list []struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
			return false
		}
		sid = list[0].ID
		d, _, ok := readDoc(sid)
		return ok && strings.Join(d.turns(), "|") == "user: Run echo hi|assistant: Printed hi."
	})

	// 2. A prompt from home B: Claude continues in remote mode.
	mark := len(scr.String())
	if code, out, errOut := happyRun(t, envB, work, "send", sid, "Say two"); code != 0 {
		t.Fatalf("happy send: %d\n%s%s", code, out, errOut)
	}
	wait(60*time.Second, "the remote turn on the relay", func() bool {
		d, _, ok := readDoc(sid)
		return ok && strings.Join(d.turns(), "|") == "user: Run echo hi|assistant: Printed hi.|user: Say two|assistant: Answer two."
	})
	wait(10*time.Second, "the remote-mode notice", func() bool { return since(mark, "Claude continues in remote mode") })
	if strings.Count(scr.String(), "Claude continues in remote mode") != 1 {
		t.Fatalf("the remote-mode notice is not printed once:\n%s", scr.String())
	}

	// 3. A key in the terminal: Claude's UI is back (the session resumed).
	mark = len(scr.String())
	if _, err := master.Write([]byte(" ")); err != nil {
		t.Fatal(err)
	}
	wait(30*time.Second, "Claude's prompt on screen again", func() bool { return since(mark, "shortcuts") })
	typePrompt("Say three")
	// Claude's UI moves the cursor between words instead of printing spaces.
	wait(60*time.Second, "the second local answer on screen", func() bool { return since(mark, "three.") })
	var doc string
	wait(30*time.Second, "the third turn on the relay", func() bool {
		d, out, ok := readDoc(sid)
		doc = out
		return ok && strings.Join(d.turns(), "|") ==
			"user: Run echo hi|assistant: Printed hi.|user: Say two|assistant: Answer two.|user: Say three|assistant: Answer three."
	})

	// 4. Ctrl-C twice ends Claude; happy ends with it.
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
	if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
		t.Fatal("processes of happy's group still run")
	}

	// The transcript: three turns in order, each prompt once, nothing
	// dropped, every assistant message finished.
	d, out, ok := readDoc(sid)
	if !ok {
		t.Fatalf("final transcript unreadable:\n%s", out)
	}
	doc = out
	if got := strings.Join(d.turns(), "|"); got != "user: Run echo hi|assistant: Printed hi.|user: Say two|assistant: Answer two.|user: Say three|assistant: Answer three." {
		t.Fatalf("turns %s", got)
	}
	if len(d.Dropped) != 0 {
		t.Fatalf("dropped records: %s", d.Dropped)
	}
	for i, m := range d.Messages {
		if m.Info.Role == "assistant" && m.Info.Finish == "" {
			t.Fatalf("assistant message %d has no finish:\n%s", i, doc)
		}
	}
	// Claude itself continued one conversation: the model saw the earlier
	// turns with each later prompt (remote mode resumed the local session,
	// local mode then resumed what remote mode added).
	history := map[string][]string{
		"Say two":   {"Run echo hi", "Printed hi."},
		"Say three": {"Run echo hi", "Printed hi.", "Say two", "Answer two."},
	}
	seen := map[string]bool{}
	for _, r := range model.Requests() {
		want, ok := history[r.LastText]
		if !ok || !r.HasTools {
			continue
		}
		seen[r.LastText] = true
		for _, w := range want {
			if !strings.Contains(string(r.Body), w) {
				t.Errorf("the model request for %q lacks %q from the earlier turns", r.LastText, w)
			}
		}
	}
	if !seen["Say two"] || !seen["Say three"] {
		t.Fatalf("model requests for the later prompts not found (seen %v)", seen)
	}
	golden(t, "claude-switch.json", normalize(t, []byte(doc), map[string]string{work: "<WORK>", ch: "<HOME>"}))
}
