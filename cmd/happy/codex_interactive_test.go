package main

import (
	"encoding/json"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
)

// secondTurn is Codex's side of a second turn on the thread of the
// codex-app capture, answering "Second answer.".
const secondTurn = `{"t":1,"dir":"c2a","msg":{"id":4,"method":"turn/start","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","input":[{"type":"text","text":"And now?"}]}}}
{"t":2,"dir":"a2c","msg":{"id":4,"result":{"turn":{"id":"turn-2","items":[],"status":"inProgress","error":null}}}}
{"t":3,"dir":"a2c","msg":{"method":"turn/started","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","turn":{"id":"turn-2","items":[],"status":"inProgress","error":null}}}}
{"t":4,"dir":"a2c","msg":{"method":"item/completed","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","turnId":"turn-2","item":{"type":"agentMessage","id":"msg-2","text":"Second answer."}}}}
{"t":5,"dir":"a2c","msg":{"method":"turn/completed","params":{"threadId":"01a227ce-b3b3-76c0-8c71-6476bf69416c","turn":{"id":"turn-2","items":[],"status":"completed","error":null}}}}
`

// waitOutput polls what a running happy wrote until it holds want.
func waitOutput(t *testing.T, what string, b *syncBuffer, want string, done <-chan int) {
	t.Helper()
	shown := waitfor.Poll{}.True(func() bool {
		select {
		case code := <-done:
			t.Fatalf("happy exited %d before %s showed %q:\n%s", code, what, want, b.String())
		default:
		}
		return strings.Contains(b.String(), want)
	})
	if !shown {
		t.Fatalf("%s never showed %q:\n%s", what, want, b.String())
	}
}

// happy codex without -p runs one prompt after another on one thread: the
// first typed at the prompt line, the second sent with happy send from
// another home of the account; each answer is printed, and the end of the
// prompt line's input (Ctrl-D) ends the session with exit 0.
func TestCodexInteractive(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	log, err := os.ReadFile(filepath.Join(fc.dir, "app-server.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(log), `{"t":1795964187836,"dir":"exit"`)
	if !ok {
		t.Fatal("the capture does not end with Codex's exit")
	}
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(head+secondTurn), 0o644); err != nil {
		t.Fatal(err)
	}
	env := codexTestEnv(t, fc)
	envB := map[string]string{"HAPPY_SERVER_URL": env["HAPPY_SERVER_URL"], "HAPPY_HOME_DIR": t.TempDir()}
	creds, err := os.ReadFile(filepath.Join(env["HAPPY_HOME_DIR"], crypto.CredentialsFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(envB["HAPPY_HOME_DIR"], crypto.CredentialsFileName), creds, 0o600); err != nil {
		t.Fatal(err)
	}

	inR, inW := io.Pipe()
	defer inW.Close()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	f := newFactory(inR, stdout, stderr, func(k string) string { return env[k] })
	f.isTerminal = func(any) bool { return true }
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"codex", "--codex-protocol", "app-server", "--allow", "bash:echo hi*"}, f)
	}()

	waitOutput(t, "stderr", stderr, "codex> ", done)
	line, _, _ := strings.Cut(stderr.String(), "\n")
	sid, _, ok := strings.Cut(strings.TrimPrefix(line, "happy: session "), " ")
	if !ok || !strings.Contains(line, "type a prompt, or send one with: happy send "+sid) {
		t.Fatalf("first notice %q", line)
	}
	if _, err := io.WriteString(inW, "Run `echo hi > hi.txt` in the shell and tell me what happened\n"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, "stdout", stdout, "Done: the command printed hi.\n", done)
	if code, out, errOut := runHappy(t, envB, "send", sid, "And now?"); code != exitOK {
		t.Fatalf("happy send: %d %s %s", code, out, errOut)
	}
	waitOutput(t, "stdout", stdout, "Second answer.\n", done)
	inW.Close() // Ctrl-D
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d\nstderr: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("happy codex did not end at the end of its input")
	}
	if m := fc.mismatch(t); m != "" {
		t.Fatalf("happy's traffic differs from the script:\n%s", m)
	}
	if want := "Done: the command printed hi.\n> And now?\nSecond answer.\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if !strings.Contains(stderr.String(), "happy: session "+sid+" ended") {
		t.Errorf("no end notice: %s", stderr.String())
	}
	if strings.Contains(stderr.String(), "asks to use") {
		t.Errorf("the call --allow answered was announced as waiting:\n%s", stderr.String())
	}
	// One thread, a turn/start on it per prompt.
	var threads []string
	starts := 0
	for _, l := range fc.lines(t, "recv.jsonl") {
		var m struct {
			Method string `json:"method"`
			Params struct {
				ThreadID string `json:"threadId"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(l), &m)
		switch m.Method {
		case "thread/start", "thread/resume":
			starts++
		case "turn/start":
			threads = append(threads, m.Params.ThreadID)
		}
	}
	if starts != 1 || len(threads) != 2 || threads[0] != threads[1] || threads[0] == "" {
		t.Errorf("thread starts %d, turns on %q", starts, threads)
	}
	// The session on the relay has both turns and is ended.
	o, tr := readSession(t, env, sid)
	if o.Metadata.LifecycleState != "ended" {
		t.Errorf("lifecycle %q", o.Metadata.LifecycleState)
	}
	var texts []string
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				texts = append(texts, string(m.Info.MessageRole())+": "+tp.Text)
			}
		}
	}
	want := []string{"user: Run `echo hi > hi.txt` in the shell and tell me what happened", "assistant: Done: the command printed hi.", "user: And now?", "assistant: Second answer."}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("transcript texts %q, want %q", texts, want)
	}
}

// servedCodex runs `happy codex` without a terminal on stdin (prompts come
// from happy send) with a fake Codex whose capture does not exit, and
// returns its environment, its session id, its first stderr line, its
// output and the channel of its exit code. SIGINT is caught for the test,
// which ends the run with it.
func servedCodex(t *testing.T, stdin string) (env map[string]string, sid, line string, stdout, stderr *syncBuffer, done chan int, fc *fakeCodex) {
	t.Helper()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	t.Cleanup(func() { signal.Stop(sig) })
	fc = newFakeCodex(t, "", "codex-app", "")
	log, err := os.ReadFile(filepath.Join(fc.dir, "app-server.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(log), `{"t":1795964187836,"dir":"exit"`)
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(head), 0o644); err != nil {
		t.Fatal(err)
	}
	env = codexTestEnv(t, fc)
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	f := newFactory(strings.NewReader(stdin), stdout, stderr, func(k string) string { return env[k] })
	done = make(chan int, 1)
	go func() {
		done <- run([]string{"codex", "--codex-protocol", "app-server", "--allow", "bash:echo hi*"}, f)
	}()
	waitOutput(t, "stderr", stderr, "(Ctrl-C ends it)\n", done)
	line, _, _ = strings.Cut(stderr.String(), "\n")
	sid, _, _ = strings.Cut(strings.TrimPrefix(line, "happy: session "), " ")
	return env, sid, line, stdout, stderr, done, fc
}

// Without a terminal on stdin there is no prompt line: what stdin holds is
// not a prompt, prompts come from happy send, and SIGINT ends the session
// (exit 130, the session ended on the relay).
func TestCodexInteractiveWithoutTerminal(t *testing.T) {
	env, sid, line, stdout, stderr, done, fc := servedCodex(t, "not a prompt\n")
	if want := "happy: session " + sid + ` — send prompts with: happy send ` + sid + ` "…" (Ctrl-C ends it)`; line != want {
		t.Fatalf("notice %q, want %q", line, want)
	}
	code, out, errOut := runHappy(t, env, "send", sid, "Run `echo hi > hi.txt` in the shell and tell me what happened", "--receipt-timeout", "20s")
	if code != exitOK || errOut != "" {
		t.Fatalf("happy send: %d %s", code, errOut)
	}
	// Its receipts, each once, in order.
	if !regexp.MustCompile(`^sent msg_[0-9a-f]{25}\nstored \(seq [1-9][0-9]*\)\nreceived by the session\nhanded to codex\ncodex started\n$`).MatchString(out) {
		t.Fatalf("happy send printed %q", out)
	}
	// The answer is on the relay (no prompt line prints it here).
	var messages int
	answered := waitfor.Poll{Every: 50 * time.Millisecond}.True(func() bool {
		_, tr := readSession(t, env, sid)
		var all strings.Builder
		for _, m := range tr.Messages {
			all.WriteString(string(m.Info.MessageRole()) + ": " + fmtParts(m.Parts) + "\n")
		}
		messages = len(tr.Messages)
		return strings.HasSuffix(all.String(), "assistant: Done: the command printed hi.\n")
	})
	if !answered {
		t.Fatalf("the relay prompt was never answered: %d messages", messages)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitInterrupted {
			t.Fatalf("exit %d, want 130\nstderr: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("happy codex did not end on SIGINT")
	}
	if stdout.String() != "" {
		t.Errorf("stdout %q", stdout.String())
	}
	if o, _ := readSession(t, env, sid); o.Metadata.LifecycleState != "ended" {
		t.Errorf("lifecycle %q", o.Metadata.LifecycleState)
	}
	for _, l := range fc.lines(t, "recv.jsonl") {
		if strings.Contains(l, "not a prompt") {
			t.Errorf("stdin went to codex: %s", l)
		}
	}
}

// fmtParts joins the text of a message's text parts.
func fmtParts(parts []mapper.Part) string {
	var b strings.Builder
	for _, p := range parts {
		if tp, ok := p.(*mapper.TextPart); ok {
			b.WriteString(tp.Text)
		}
	}
	return b.String()
}

// happy send --wait returns when the prompt's turn has ended and prints its
// answer; happy wait returns once the session is idle with the last
// answer, and a stale or timed-out wait says so.
func TestSendWaitAndWait(t *testing.T) {
	env, sid, _, _, _, done, _ := servedCodex(t, "")

	// Idle before any prompt.
	if code, out, errOut := runHappy(t, env, "wait", sid, "--timeout", "20s"); code != exitOK || out != "" {
		t.Fatalf("happy wait before a prompt = %d %q %q", code, out, errOut)
	}
	code, out, errOut := runHappy(t, env, "send", sid, "Run `echo hi > hi.txt` in the shell and tell me what happened", "--wait", "--timeout", "30s")
	if code != exitOK || out != "Done: the command printed hi.\n" || !strings.HasPrefix(errOut, "happy: sent msg_") {
		t.Fatalf("happy send --wait = %d %q %q", code, out, errOut)
	}
	if code, out, errOut := runHappy(t, env, "wait", sid, "--timeout", "20s"); code != exitOK || out != "Done: the command printed hi.\n" {
		t.Fatalf("happy wait = %d %q %q", code, out, errOut)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("happy codex did not end on SIGINT")
	}
	// Ended: idle, with the last answer.
	if code, out, _ := runHappy(t, env, "wait", sid); code != exitOK || out != "Done: the command printed hi.\n" {
		t.Fatalf("happy wait of an ended session = %d %q", code, out)
	}
}
