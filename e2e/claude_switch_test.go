//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// switchDoc is what the switch tests read of a transcript document.
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
func (d switchDoc) turns() string {
	var out []string
	for _, m := range d.Messages {
		for _, p := range m.Parts {
			if p.Type == "text" && strings.TrimSpace(p.Text) != "" {
				out = append(out, m.Info.Role+": "+p.Text)
			}
		}
	}
	return strings.Join(out, "|")
}

// switchRun is `happy claude` running in a PTY (home A) against the fake
// model, with a second home (B) on the same relay account.
type switchRun struct {
	t           *testing.T
	model       *fakemodel.Server
	work, ch    string
	homeA       string
	envB        []string
	master, tty *os.File
	before      *unix.Termios
	cmd         *exec.Cmd
	exited      chan error
	gone        chan struct{} // closed when happy exited
	scr         *screen
	sid         string
	lastDoc     string // the last transcript document read, for failures
}

func startSwitchRun(t *testing.T, decide func(fakemodel.Request) fakemodel.Reply) *switchRun {
	t.Helper()
	claudeBin := agentBinary(t, "CLAUDE")
	relay := startRelay(t)
	hs := homes(t, relay.URL, 2)
	r := &switchRun{t: t, work: t.TempDir(), homeA: hs[0], exited: make(chan error, 1), gone: make(chan struct{}), scr: &screen{}}
	var err error
	if r.model, err = fakemodel.New(fakemodel.Script{Decide: decide}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.model.Close() })
	r.ch = claudeHome(t, r.work, "sk-e2e-dummy-key-0123456789")
	envA := claudeEnv(r.ch, hs[0], relay.URL, r.model.URL, claudeBin)
	r.envB = claudeEnv(r.ch, hs[1], relay.URL, r.model.URL, claudeBin)
	if r.master, r.tty, err = pty.Open(); err != nil {
		t.Skipf("no PTY: %v", err)
	}
	t.Cleanup(func() { r.master.Close(); r.tty.Close() })
	if err := pty.Setsize(r.master, &pty.Winsize{Rows: 40, Cols: 120}); err != nil {
		t.Fatal(err)
	}
	if r.before, err = unix.IoctlGetTermios(int(r.tty.Fd()), unix.TCGETS); err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(happyBin, "claude", "--", "--model", "claude-sonnet-4-5")
	r.cmd.Env, r.cmd.Dir = envA, r.work
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = r.tty, r.tty, r.tty
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait(); close(r.gone) }()
	t.Cleanup(func() { _ = r.cmd.Process.Kill() })
	go func() { _, _ = copyUntilErr(r.scr, r.master) }()
	r.wait(30*time.Second, "Claude's prompt on screen", func() bool { return r.scr.contains("shortcuts") })
	return r
}

// mark is the screen's current length, for since.
func (r *switchRun) mark() int { return len(r.scr.String()) }

// since reports whether the screen shows sub after byte offset mark.
func (r *switchRun) since(mark int, sub string) bool {
	return strings.Contains(r.scr.String()[mark:], sub)
}

// typePrompt types text into Claude's input box and submits it.
func (r *switchRun) typePrompt(text string) {
	r.t.Helper()
	time.Sleep(300 * time.Millisecond)
	r.key(text)
	time.Sleep(300 * time.Millisecond)
	r.key("\r")
}

func (r *switchRun) key(s string) {
	r.t.Helper()
	if _, err := r.master.Write([]byte(s)); err != nil {
		r.t.Fatal(err)
	}
}

// wait polls fn, and shows the screen's end and happy's log on timeout.
func (r *switchRun) wait(d time.Duration, what string, fn func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(d)
	for !fn() {
		if time.Now().After(deadline) {
			s := r.scr.String()
			r.t.Fatalf("timed out waiting for %s\nlast transcript read: %s\nscreen (end):\n%q\nhappy logs:\n%s", what, r.lastDoc, s[max(0, len(s)-4000):], r.logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// logs returns happy's log files of home A.
func (r *switchRun) logs() string {
	var logs []string
	files, _ := filepath.Glob(filepath.Join(r.homeA, "logs", "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		logs = append(logs, f+":\n"+string(b))
	}
	return strings.Join(logs, "\n")
}

// doc reads the relay transcript from home B.
func (r *switchRun) doc() (switchDoc, string, bool) {
	code, out, _ := happyRun(r.t, r.envB, r.work, "log", r.sid, "--json")
	r.lastDoc = out
	var d switchDoc
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		return d, out, false
	}
	return d, out, true
}

// waitTurns waits until the relay transcript's turns are want.
func (r *switchRun) waitTurns(d time.Duration, what, want string) {
	r.t.Helper()
	got := ""
	r.wait(d, what+" (transcript: "+want+")", func() bool {
		if r.sid == "" {
			code, out, _ := happyRun(r.t, r.envB, r.work, "sessions", "--json")
			var list []struct{ ID string }
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
				return false
			}
			r.sid = list[0].ID
		}
		doc, _, ok := r.doc()
		got = doc.turns()
		return ok && got == want
	})
}

// send sends a prompt from home B.
func (r *switchRun) send(text string) {
	r.t.Helper()
	if code, out, errOut := happyRun(r.t, r.envB, r.work, "send", r.sid, text); code != 0 {
		r.t.Fatalf("happy send: %d\n%s%s", code, out, errOut)
	}
}

// finish ends Claude with Ctrl-C twice and checks that happy ended with it,
// gave the terminal back as it found it and left no process behind.
//
// After a prompt from another device Claude runs in remote mode, where
// Ctrl-C takes control back: the first Ctrl-C then starts local
// Claude, and whether the second reaches it before it reads keys (a SIGINT
// from the terminal: it exits) or after (a first press: "Press Ctrl-C again
// to exit") depends on the machine's speed. So the pair is sent again, with
// a pause longer than Claude's double-press window, until happy exits.
func (r *switchRun) finish() {
	r.t.Helper()
	deadline := time.After(20 * time.Second)
	exited := false
	for !exited {
		_, _ = r.master.Write([]byte{0x03})
		time.Sleep(300 * time.Millisecond)
		_, _ = r.master.Write([]byte{0x03})
		select {
		case <-r.exited:
			exited = true
		case <-time.After(2 * time.Second):
		case <-deadline:
			r.t.Fatalf("happy claude did not exit after Ctrl-C; screen:\n%s", r.scr.String())
		}
	}
	after, err := unix.IoctlGetTermios(int(r.tty.Fd()), unix.TCGETS)
	if err != nil {
		r.t.Fatal(err)
	}
	if after.Lflag != r.before.Lflag || after.Iflag != r.before.Iflag || after.Oflag != r.before.Oflag {
		r.t.Fatalf("terminal not restored: lflag %#x→%#x iflag %#x→%#x oflag %#x→%#x", r.before.Lflag, after.Lflag, r.before.Iflag, after.Iflag, r.before.Oflag, after.Oflag)
	}
	if !r.scr.contains("happy: session " + r.sid + " ended") {
		r.t.Fatalf("no end notice for %s on screen", r.sid)
	}
	if err := syscall.Kill(-r.cmd.Process.Pid, 0); err == nil {
		r.t.Fatal("processes of happy's group still run")
	}
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
	r := startSwitchRun(t, func(q fakemodel.Request) fakemodel.Reply {
		switch {
		case !q.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case q.ToolDone:
			return fakemodel.Reply{Text: "Printed hi."}
		case strings.Contains(q.LastText, "Run echo hi"):
			return fakemodel.Reply{ToolName: "Bash", ToolInput: map[string]any{"command": "echo hi", "description": "Print hi"}}
		case strings.Contains(q.LastText, "Say two"):
			return fakemodel.Reply{Text: "Answer two."}
		case strings.Contains(q.LastText, "Say three"):
			return fakemodel.Reply{Text: "Answer three."}
		}
		return fakemodel.Reply{Text: "Unexpected request."}
	})

	// 1. Local mode: a prompt typed in Claude's own UI.
	r.typePrompt("Run echo hi")
	r.wait(60*time.Second, "the local answer on screen", func() bool { return r.scr.contains("Printed") })
	r.waitTurns(30*time.Second, "the local turn on the relay", "user: Run echo hi|assistant: Printed hi.")

	// 2. A prompt from home B: Claude continues in remote mode.
	mark := r.mark()
	r.send("Say two")
	r.waitTurns(60*time.Second, "the remote turn on the relay", "user: Run echo hi|assistant: Printed hi.|user: Say two|assistant: Answer two.")
	r.wait(10*time.Second, "the remote-mode notice", func() bool { return r.since(mark, "Claude continues in remote mode") })
	if n := strings.Count(r.scr.String(), "Claude continues in remote mode"); n != 1 {
		t.Fatalf("the remote-mode notice is printed %d times:\n%s", n, r.scr.String())
	}

	// 3. Space twice in the terminal: Claude's UI is back (the session
	// resumed).
	mark = r.mark()
	r.key("  ")
	r.wait(30*time.Second, "Claude's prompt on screen again", func() bool { return r.since(mark, "shortcuts") })
	r.typePrompt("Say three")
	// Claude's UI moves the cursor between words instead of printing spaces.
	r.wait(60*time.Second, "the second local answer on screen", func() bool { return r.since(mark, "three.") })
	const all = "user: Run echo hi|assistant: Printed hi.|user: Say two|assistant: Answer two.|user: Say three|assistant: Answer three."
	r.waitTurns(30*time.Second, "the third turn on the relay", all)

	// 4. Ctrl-C twice ends Claude; happy ends with it.
	r.finish()

	// The transcript: three turns in order, each prompt once, nothing
	// dropped, every assistant message finished.
	d, doc, ok := r.doc()
	if !ok {
		t.Fatalf("final transcript unreadable:\n%s", doc)
	}
	if got := d.turns(); got != all {
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
	for _, q := range r.model.Requests() {
		want, ok := history[q.LastText]
		if !ok || !q.HasTools {
			continue
		}
		seen[q.LastText] = true
		for _, w := range want {
			if !strings.Contains(string(q.Body), w) {
				t.Errorf("the model request for %q lacks %q from the earlier turns", q.LastText, w)
			}
		}
	}
	if !seen["Say two"] || !seen["Say three"] {
		t.Fatalf("model requests for the later prompts not found (seen %v)", seen)
	}
	golden(t, "claude-switch.json", ordinalToolIDs(normalize(t, []byte(doc), map[string]string{r.work: "<WORK>", r.ch: "<HOME>"})))
}

// fakeToolID is an id of the fake model's tool calls.
var fakeToolID = regexp.MustCompile(`toolu_fake_[0-9]{4}(_[0-9]+)?`)

// ordinalToolIDs names the fake model's tool call ids by their order of
// first appearance (toolu_1, toolu_2, …): the model numbers its responses
// in arrival order, and Claude's side requests (a title) race the main
// ones when the switches overlap them, so the raw number of the first tool
// call varies from run to run.
func ordinalToolIDs(doc []byte) []byte {
	seen := map[string]string{}
	return fakeToolID.ReplaceAllFunc(doc, func(id []byte) []byte {
		n, ok := seen[string(id)]
		if !ok {
			n = fmt.Sprintf("toolu_%d", len(seen)+1)
			seen[string(id)] = n
		}
		return []byte(n)
	})
}

// Space pressed twice while a remote turn runs (the first says it will
// interrupt the turn; another key before it is ignored): the turn is interrupted (it ends
// aborted on the relay, nothing left open), Claude's UI comes back, and the
// next prompt typed there is answered.
func TestE2EClaudeSwitchInterrupt(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	r := startSwitchRun(t, func(q fakemodel.Request) fakemodel.Reply {
		switch {
		case !q.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case strings.Contains(q.LastText, "Take your time"):
			// The model is slow: the turn runs until the test lets go.
			once.Do(func() { close(arrived) })
			select {
			case <-release:
			case <-time.After(60 * time.Second):
			}
			return fakemodel.Reply{Text: "Too late."}
		case strings.Contains(q.LastText, "Say three"):
			return fakemodel.Reply{Text: "Answer three."}
		}
		return fakemodel.Reply{Text: "Unexpected request."}
	})
	defer close(release)

	// The session appears on the relay once Claude's UI is up; a prompt is
	// sent once its root session record is there (happy send addresses
	// the prompt to it).
	r.wait(30*time.Second, "the session record on the relay", func() bool {
		if r.sid == "" {
			code, out, _ := happyRun(t, r.envB, r.work, "sessions", "--json")
			var list []struct{ ID string }
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
				return false
			}
			r.sid = list[0].ID
		}
		var d struct {
			Session struct{ ID string } `json:"session"`
		}
		_, out, ok := r.doc()
		return ok && json.Unmarshal([]byte(out), &d) == nil && strings.HasPrefix(d.Session.ID, "ses_")
	})
	mark := r.mark()
	r.send("Take your time")
	select {
	case <-arrived:
	case <-time.After(60 * time.Second):
		t.Fatalf("the remote prompt never reached the model; screen:\n%q", r.scr.String()[mark:])
	}
	r.wait(10*time.Second, "the remote-mode notice", func() bool { return r.since(mark, "Claude continues in remote mode") })
	mark = r.mark()
	r.key("q") // ignored
	r.key(" ")
	r.wait(10*time.Second, "the confirmation naming the interrupt", func() bool {
		return r.since(mark, "press space again to take control back here (this interrupts the turn from the other device).")
	})
	r.key(" ")
	r.wait(30*time.Second, "Claude's prompt on screen again", func() bool { return r.since(mark, "shortcuts") })
	// The turn was interrupted (the model had not answered yet, so no
	// assistant message was started) before remote mode was stopped.
	r.wait(10*time.Second, "the interrupt in happy's log", func() bool {
		return strings.Contains(r.logs(), "the remote turn ended after the interrupt")
	})
	r.typePrompt("Say three")
	r.wait(60*time.Second, "the local answer on screen", func() bool { return r.since(mark, "three.") })
	r.waitTurns(30*time.Second, "the local turn on the relay", "user: Take your time|user: Say three|assistant: Answer three.")
	r.finish()
	d, doc, _ := r.doc()
	if len(d.Dropped) != 0 {
		t.Fatalf("dropped records: %s", d.Dropped)
	}
	for i, m := range d.Messages {
		if m.Info.Role == "assistant" && m.Info.Finish == "" {
			t.Fatalf("assistant message %d has no finish:\n%s", i, doc)
		}
	}
	// The keys were consumed by happy: Claude's input box got neither the
	// ignored "q" nor the spaces.
	if strings.Contains(doc, "qSay three") || strings.Contains(doc, " Say three") {
		t.Fatal("a key of remote mode was typed into Claude")
	}
}
