package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// syncBuffer is a bytes.Buffer safe for the recorder and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b.Bytes()...)
}

func testExe(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// fakeOptions starts the scripted fake agent in a fresh working folder.
func fakeOptions(t *testing.T, rec *syncBuffer, env ...string) Options {
	t.Helper()
	o := Options{
		Command: []string{testExe(t)}, Env: append([]string{"ACP_FAKE_AGENT=1"}, env...),
		Cwd: t.TempDir(), CancelGrace: 400 * time.Millisecond,
		Settings: rpcagent.Settings{CallTimeout: 10 * time.Second, StopGrace: 500 * time.Millisecond},
	}
	if rec != nil {
		o.Record = rec
	}
	return o
}

// untilTurns reads events until n turns ended (then keeps the channel
// drained in the background until it closes).
func untilTurns(t *testing.T, c *Client, n int, onEvent func(agent.Event)) []agent.Event {
	t.Helper()
	var evs []agent.Event
	deadline := time.After(20 * time.Second)
	ended := 0
	for ended < n {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed after %d turns:\n%s", ended, eventLines(t, evs))
			}
			evs = append(evs, e)
			if _, ok := e.(*agent.TurnEnded); ok {
				ended++
			}
			if onEvent != nil {
				onEvent(e)
			}
		case <-deadline:
			t.Fatalf("timed out after %d turns:\n%s", ended, eventLines(t, evs))
		}
	}
	return evs
}

// closeAndDrain closes the client and returns the events that came after.
func closeAndDrain(t *testing.T, c *Client) []agent.Event {
	t.Helper()
	var rest []agent.Event
	done := make(chan struct{})
	go func() {
		for e := range c.Events() {
			rest = append(rest, e)
		}
		close(done)
	}()
	if err := c.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	<-done
	return rest
}

// checkSent validates every message of a recorded traffic log against the
// ACP schema.
func checkSent(t *testing.T, traffic []byte) {
	t.Helper()
	frames, bad, err := readFrames(bytes.NewReader(traffic))
	if err != nil || len(bad) > 0 {
		t.Fatalf("recorded traffic: %v %v", err, bad)
	}
	v := newValidator(t)
	for i, f := range frames {
		v.check("recorded frame "+strconv.Itoa(i), f)
	}
}

// TestLiveAgainstCaptures drives the client against a fake agent replaying
// each real capture: the client must send what the real driver sent (the
// same requests, the same permission answers, chosen by kind), and its
// events must equal a live decoding of the capture.
func TestLiveAgainstCaptures(t *testing.T) {
	cases := []struct {
		name     string
		decision agent.Decision
	}{
		{"gemini-acp", agent.DecisionOnce},
		{"gemini-acp-reject", agent.DecisionReject},
		{"ccacp-acp", agent.DecisionOnce},
		{"acpsdk-example", agent.DecisionOnce},
		{"gemini-multi-turn", agent.DecisionOnce},
		{"gemini-long-output-raw-u2028", agent.DecisionOnce},
		{"claude-code-acp-todo", agent.DecisionOnce},
		{"codex-acp", agent.DecisionOnce},
		{"codex-acp-reject", agent.DecisionReject},
		{"opencode-acp", agent.DecisionOnce},
		{"opencode-acp-reject", agent.DecisionReject},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script, _ := filepath.Abs(filepath.Join("testdata", "captures", tc.name, "rpc-traffic.jsonl"))
			raw := readCapture(t, tc.name)
			prompts := capturePrompts(t, raw)
			rec := &syncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := Start(ctx, Options{
				Command: []string{testExe(t)}, Env: []string{"ACP_FAKE_SCRIPT=" + script},
				Cwd: t.TempDir(), Settings: rpcagent.Settings{Record: rec, CallTimeout: 10 * time.Second, StopGrace: time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range prompts {
				if err := c.Prompt(ctx, Prompt{Text: p}); err != nil {
					t.Fatal(err)
				}
			}
			evs := untilTurns(t, c, len(prompts), func(e agent.Event) {
				if b, ok := e.(*agent.ToolBlocked); ok && b.Permission != nil {
					if err := c.Decide(ctx, b.CallID, Answer{Decision: tc.decision}); err != nil {
						t.Errorf("decide %s: %v", b.CallID, err)
					}
				}
			})
			evs = append(evs, closeAndDrain(t, c)...)
			if strings.Contains(string(rec.Bytes()), "MISMATCH") {
				t.Fatalf("the client's traffic differs from the capture:\n%s", rec.Bytes())
			}
			want, err := Replay(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			got, wantL := liveLines(t, evs), liveLines(t, want)
			if got != wantL {
				t.Errorf("live events differ from the capture's:\n%s", firstDiff(wantL, got))
			}
			// What was recorded replays to the same events.
			again, err := Replay(bytes.NewReader(rec.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if g := liveLines(t, again); g != got {
				t.Errorf("replay of the recorded traffic differs from the live events:\n%s", firstDiff(got, g))
			}
			checkSent(t, rec.Bytes())
		})
	}
}

// liveLines renders events without times, working folders and the
// traffic-log records the captures' driver added (they are not the
// agent's): a driver-error record and the exit the fake cannot reproduce.
func liveLines(t *testing.T, evs []agent.Event) string {
	t.Helper()
	var keep []agent.Event
	for _, e := range evs {
		switch x := e.(type) {
		case *agent.SessionInfo:
			x.Cwd = ""
		case *agent.DroppedInput:
			if x.Dropped.Source == jsonrpc.TrafficSource {
				continue
			}
		}
		keep = append(keep, e)
	}
	return eventLines(t, keep)
}

// capturePrompts lists the prompt texts a capture's driver sent.
func capturePrompts(t *testing.T, raw []byte) []string {
	t.Helper()
	frames, _, err := readFrames(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range frames {
		if f.Dir != trafficlog.C2A {
			continue
		}
		var m struct {
			Method string `json:"method"`
			Params struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(f.Data, &m) == nil && m.Method == "session/prompt" {
			out = append(out, m.Params.Prompt[0].Text)
		}
	}
	return out
}

// runSession drives the fake agent through the session runner (as happy's
// commands do) with one prompt, answering each permission with answer.
func runSession(t *testing.T, opts Options, prompt string, answer func(r *session.Runner, b *agent.ToolBlocked)) (mapper.Transcript, session.Result) {
	t.Helper()
	return runSessionWith(t, opts, nil, prompt, answer)
}

// runSessionWith is runSession with the runner's options adjusted by cfg
// (rules, permission timeout) when it is not nil.
func runSessionWith(t *testing.T, opts Options, cfg func(*session.Options), prompt string, answer func(r *session.Runner, b *agent.ToolBlocked)) (mapper.Transcript, session.Result) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	red := mapper.NewReducer(mapper.Config{SessionID: "live", Directory: opts.Cwd})
	var runner *session.Runner
	so := session.Options{
		Agent: NewAgent(c), Reducer: red, OneShot: true,
		OnBus: func(bus []mapper.BusEvent) {
			for _, b := range bus {
				pu, ok := b.(*mapper.MessagePartUpdated)
				if !ok {
					continue
				}
				if tp, ok := pu.Part.(*mapper.ToolPart); ok && tp.State.Status == mapper.StatusBlocked && tp.State.Block.DecidedAt == nil {
					go answer(runner, &agent.ToolBlocked{CallID: tp.CallID})
				}
			}
		},
	}
	if cfg != nil {
		cfg(&so)
	}
	runner = session.NewRunner(so)
	if err := runner.Control(ctx, session.ControlPrompt{Prompt: agent.Prompt{Text: prompt}}); err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return red.Transcript(), res
}

func answerWith(d agent.Decision) func(*session.Runner, *agent.ToolBlocked) {
	return func(r *session.Runner, b *agent.ToolBlocked) {
		reply := make(chan error, 1)
		_ = r.Control(context.Background(), session.ControlAnswer{Answer: session.Answer{CallID: b.CallID, Decision: d}, Reply: reply})
		<-reply
	}
}

func TestLivePermissions(t *testing.T) {
	cases := []struct {
		name     string
		answer   func(*session.Runner, *agent.ToolBlocked)
		status   mapper.ToolStatus
		output   string
		decision agent.Decision
		reason   string
		finish   string
		turn     string
		sent     string // happy's answer on the wire
	}{
		{"once", answerWith(agent.DecisionOnce), mapper.StatusCompleted, "removed (yes)", agent.DecisionOnce, "", agent.FinishStop, agent.TurnCompleted, `{"outcome":{"optionId":"yes","outcome":"selected"}}`},
		{"always", answerWith(agent.DecisionAlways), mapper.StatusCompleted, "removed (always)", agent.DecisionAlways, "", agent.FinishStop, agent.TurnCompleted, `{"outcome":{"optionId":"always","outcome":"selected"}}`},
		{"reject", answerWith(agent.DecisionReject), mapper.StatusError, "", agent.DecisionReject, "", agent.FinishStop, agent.TurnCompleted, `{"outcome":{"optionId":"no","outcome":"selected"}}`},
		{"abort", func(r *session.Runner, _ *agent.ToolBlocked) {
			reply := make(chan error, 1)
			_ = r.Control(context.Background(), session.ControlAbort{Reply: reply})
			<-reply
		}, mapper.StatusError, "", agent.DecisionReject, agent.ReasonCancelled, agent.FinishAborted, agent.TurnInterrupted, `{"outcome":{"outcome":"cancelled"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &syncBuffer{}
			tr, res := runSession(t, fakeOptions(t, rec), "permission", tc.answer)
			if res.TurnReason != tc.turn {
				t.Errorf("turn %q, want %q", res.TurnReason, tc.turn)
			}
			tp, msg, n := toolPart(tr, "t1")
			if n != 1 {
				t.Fatalf("%d tool parts", n)
			}
			if tp.State.Status != tc.status || tp.State.Output != tc.output {
				t.Errorf("tool %s %q, want %s %q", tp.State.Status, tp.State.Output, tc.status, tc.output)
			}
			if b := tp.State.Block; b == nil || b.Decision != tc.decision || b.Reason != tc.reason || b.Permission != "bash" || strings.Join(b.Patterns, ",") != "rm -rf build" {
				t.Errorf("block %+v", tp.State.Block)
			}
			if msg.Finish != tc.finish && !(tc.finish == agent.FinishStop && msg.Finish == agent.FinishToolCalls) {
				t.Errorf("finish %q, want %q", msg.Finish, tc.finish)
			}
			if len(tr.Dropped) != 0 {
				t.Errorf("dropped: %+v", tr.Dropped)
			}
			if !strings.Contains(string(rec.Bytes()), `"result":`+tc.sent) {
				t.Errorf("happy's answer %s not in the traffic:\n%s", tc.sent, rec.Bytes())
			}
			if tc.name == "abort" && !strings.Contains(string(rec.Bytes()), `"method":"session/cancel"`) {
				t.Error("no session/cancel")
			}
			checkSent(t, rec.Bytes())
			// The replay of the recorded traffic tells the same story.
			rt, err := transcriptOf(mapper.Config{SessionID: "replay"})(Replay(bytes.NewReader(rec.Bytes())))
			if err != nil {
				t.Fatal(err)
			}
			rp, _, _ := toolPart(rt, "t1")
			if rp == nil || rp.State.Status != tp.State.Status || rp.State.Block.Decision != tc.decision || rp.State.Block.Reason != tc.reason {
				t.Errorf("replay: %+v", rp)
			}
		})
	}
}

// A turn the agent never ends after session/cancel is given up after the
// grace period; the agent is restarted, its session loaded, and the next
// prompt is answered by the new process. The client runs as a runner's
// Agent: the echo of happy's own prompts is left out of its events, and so
// is the conversation the loaded session replays (the transcript has it);
// the mode the load reports stays.
func TestLiveCancelGraceRestart(t *testing.T) {
	rec := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started, err := Start(ctx, fakeOptions(t, rec))
	if err != nil {
		t.Fatal(err)
	}
	c := NewAgent(started).Client
	if err := c.Prompt(ctx, Prompt{Text: "hang"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Prompt(ctx, Prompt{Text: "after-restart"}); err != nil { // queued
		t.Fatal(err)
	}
	var evs []agent.Event
	evs = append(evs, untilTurns(t, c, 1, func(e agent.Event) {
		if d, ok := e.(*agent.TextDelta); ok && d.Delta == "working" {
			if err := c.Interrupt(ctx); err != nil {
				t.Errorf("interrupt: %v", err)
			}
		}
	})...)
	evs = append(evs, untilTurns(t, c, 1, nil)...)
	evs = append(evs, closeAndDrain(t, c)...)
	want := `{"type":"SessionInfo","providerSessionID":"sess-1","agent":"default"}
{"type":"TurnStarted","turnID":"turn-1"}
{"type":"TextDelta","delta":"working"}
{"type":"TurnEnded","turnID":"turn-1","reason":"interrupted","error":"the agent did not end the turn within 400ms of session/cancel"}
{"type":"SessionInfo","providerSessionID":"sess-1","agent":"default"}
{"type":"SessionInfo","agent":"plan"}
{"type":"TurnStarted","turnID":"turn-2"}
{"type":"TextDelta","delta":"echo: after-restart"}
{"type":"TurnEnded","turnID":"turn-2","reason":"completed"}`
	if got := liveLines(t, evs); got != want {
		t.Errorf("events differ:\n%s", firstDiff(want, got))
	}
	traffic := string(rec.Bytes())
	if strings.Count(traffic, `"method":"initialize"`) != 2 || !strings.Contains(traffic, `"method":"session/load"`) || !strings.Contains(traffic, `"happy":"restart"`) {
		t.Errorf("no restart with session/load in the traffic:\n%s", traffic)
	}
	checkSent(t, rec.Bytes())
}

// Interrupt without a pending permission: session/cancel, the agent
// answers cancelled, the turn is interrupted and its open tool settled.
func TestLiveInterrupt(t *testing.T) {
	rec := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, fakeOptions(t, rec))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Prompt(ctx, Prompt{Text: "slow"}); err != nil {
		t.Fatal(err)
	}
	evs := untilTurns(t, c, 1, func(e agent.Event) {
		if _, ok := e.(*agent.ToolRunning); ok {
			if err := c.Interrupt(ctx); err != nil {
				t.Errorf("interrupt: %v", err)
			}
		}
	})
	closeAndDrain(t, c)
	tr, _ := reduce(t, "int", evs)
	tp, msg, _ := toolPart(tr, "s1")
	if tp == nil || tp.State.Status != mapper.StatusError || msg.Finish != agent.FinishAborted {
		t.Fatalf("tool %+v finish %+v", tp, msg)
	}
}

func TestLiveFSConfinement(t *testing.T) {
	rec := &syncBuffer{}
	opts := fakeOptions(t, rec)
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(opts.Cwd, "a.txt"), []byte("l1\nl2\nl3\nl4\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(opts.Cwd, "notes.md"), []byte("one\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(filepath.Dir(opts.Cwd), "outside.txt"), []byte("secret"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "outside.txt"), []byte("secret"), 0o644))
	must(t, os.Symlink(outside, filepath.Join(opts.Cwd, "escape")))
	tr, res := runSession(t, opts, "fs", answerWith(agent.DecisionOnce))
	if res.TurnReason != agent.TurnCompleted {
		t.Fatalf("turn %q", res.TurnReason)
	}
	want := `read inside: "l1\nl2\nl3\nl4\n"
read lines 2-3: "l2\nl3\n"
read missing: error -32002
read outside: error -32602
read relative: error -32602
read through symlink: error -32602
write notes: ok
write new: ok
write outside: error -32602
write through symlink: error -32602
wrong session: error -32602
`
	if got := assistantText(tr); got != want {
		t.Errorf("outcomes differ:\n%s", firstDiff(want, got))
	}
	for path, content := range map[string]string{"notes.md": "one\ntwo\nthree\n", "sub/dir/new.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(opts.Cwd, path)); err != nil || string(b) != content {
			t.Errorf("%s: %q %v", path, b, err)
		}
	}
	for _, p := range []string{filepath.Join(filepath.Dir(opts.Cwd), "evil.txt"), filepath.Join(outside, "evil.txt")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s was written outside the folder", p)
		}
	}
	tp, _, _ := toolPart(tr, "w1")
	diffs, _ := tp.Metadata["diffs"].([]any)
	// Both writes happened while w1 was the open tool; the first names
	// its location.
	if tp == nil || len(diffs) != 2 {
		t.Fatalf("edit metadata: %+v", tp)
	}
	d := diffs[0].(map[string]any)
	if d["file"] != filepath.Join(opts.Cwd, "notes.md") || d["before"] != "one\n" || d["after"] != "one\ntwo\nthree\n" || d["status"] != "modified" || d["additions"] != json.Number("2") || d["deletions"] != json.Number("0") {
		t.Errorf("diff %+v", d)
	}
	d = diffs[1].(map[string]any)
	if d["file"] != filepath.Join(opts.Cwd, "sub/dir/new.txt") || d["before"] != "" || d["status"] != "added" || d["additions"] != json.Number("1") {
		t.Errorf("diff %+v", d)
	}
	checkSent(t, rec.Bytes())
}

func TestLiveTerminals(t *testing.T) {
	rec := &syncBuffer{}
	opts := fakeOptions(t, rec)
	sub := filepath.Join(opts.Cwd, "sub")
	must(t, os.Mkdir(sub, 0o755))
	opts.Env = append(opts.Env, "ACP_FAKE_SUBDIR="+sub, "ACP_FAKE_CWD="+opts.Cwd)
	tr, res := runSession(t, opts, "terminal", answerWith(agent.DecisionOnce))
	if res.TurnReason != agent.TurnCompleted {
		t.Fatalf("turn %q", res.TurnReason)
	}
	want := `limit create: term-1
limit wait: {"exitCode":0,"signal":null}
limit output: {"output":"rld","truncated":true,"exitStatus":{"exitCode":0,"signal":null}}
limit release: {}
exit wait: {"exitCode":3,"signal":null}
exit output: {"output":"hi\n` + sub + `\n","truncated":false,"exitStatus":{"exitCode":3,"signal":null}}
kill: {}
kill wait: {"exitCode":null,"signal":"SIGTERM"}
kill release: {}
released output: error -32602
outside cwd: error -32602
`
	if got := assistantText(tr); got != want {
		t.Errorf("outcomes differ:\n%s", firstDiff(want, got))
	}
	// The background child of the killed command went with its group.
	pid, err := os.ReadFile(filepath.Join(opts.Cwd, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if alive(strings.TrimSpace(string(pid))) {
		t.Errorf("background child %s outlived the terminal", strings.TrimSpace(string(pid)))
	}
	// The tool embedding the terminal shows its output.
	tp, _, _ := toolPart(tr, "x1")
	if tp == nil || tp.State.Output != "rld" {
		t.Errorf("tool with a terminal: %+v", tp)
	}
	checkSent(t, rec.Bytes())
}

// alive reports whether a process exists and is not a zombie (an orphan
// whose reaper does not reap is dead all the same).
func alive(pid string) bool {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// assistantText joins the text parts of the assistant messages.
func assistantText(tr mapper.Transcript) string {
	var b strings.Builder
	for _, m := range tr.Messages {
		if _, ok := m.Info.(*mapper.AssistantMessage); !ok {
			continue
		}
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				b.WriteString(tp.Text)
			}
		}
	}
	return b.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestLiveVersionRefused(t *testing.T) {
	for _, tc := range []struct {
		version string
		reason  string
		agent   *int64
	}{
		{"2", VersionTooNew, ptr(int64(2))},
		{"0", VersionTooOld, ptr(int64(0))},
		{"null", VersionUnreadable, nil},
		{`"1"`, VersionUnreadable, nil},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err := Start(ctx, fakeOptions(t, nil, "ACP_FAKE_VERSION="+tc.version))
		cancel()
		var ve *VersionError
		if !errors.As(err, &ve) || ve.Reason != tc.reason || ve.Expected != 1 || (ve.Agent == nil) != (tc.agent == nil) || (ve.Agent != nil && *ve.Agent != *tc.agent) {
			t.Errorf("version %s: %v", tc.version, err)
		}
	}
}

func TestLiveAuthentication(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := Start(ctx, fakeOptions(t, nil, "ACP_FAKE_AUTH=1"))
	if !errors.Is(err, ErrAuthRequired) || !strings.Contains(err.Error(), "key") {
		t.Fatalf("without a method: %v", err)
	}
	rec := &syncBuffer{}
	opts := fakeOptions(t, rec, "ACP_FAKE_AUTH=1")
	opts.AuthMethod = "key"
	opts.Mode = "plan"
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetMode(ctx, "yolo"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown mode: %v", err)
	}
	closeAndDrain(t, c)
	traffic := string(rec.Bytes())
	if !strings.Contains(traffic, `"method":"authenticate","params":{"methodId":"key"}`) || !strings.Contains(traffic, `"modeId":"plan"`) {
		t.Errorf("traffic:\n%s", traffic)
	}
	checkSent(t, rec.Bytes())
}

// Prompt content: text, an image, a text attachment and a file link, as
// the agent advertises (image and embedded context); a URL the protocol
// cannot carry is refused before anything is sent.
func TestLivePromptContent(t *testing.T) {
	rec := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Start(ctx, fakeOptions(t, rec))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Prompt(ctx, Prompt{Text: "x", Files: []agent.PromptFile{{Filename: "x", URL: "ftp://host/x"}}})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("ftp attachment: %v", err)
	}
	err = c.Prompt(ctx, Prompt{Text: "echo-prompt", Files: []agent.PromptFile{
		{Mime: "image/png", Filename: "a.png", URL: "data:image/png;base64,iVBO"},
		{Mime: "text/plain", Filename: "notes.txt", URL: "data:text/plain;base64,aGVsbG8K"},
		{Filename: "main.go", URL: "file:///w/main.go"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	evs := untilTurns(t, c, 1, nil)
	closeAndDrain(t, c)
	var text string
	for _, e := range evs {
		if d, ok := e.(*agent.TextDelta); ok {
			text += d.Delta
		}
	}
	want := `[{"text":"echo-prompt","type":"text"},{"data":"iVBO","mimeType":"image/png","type":"image"},{"resource":{"mimeType":"text/plain","text":"hello\n","uri":"attachment:///notes.txt"},"type":"resource"},{"name":"main.go","type":"resource_link","uri":"file:///w/main.go"}]`
	var got any
	_ = json.Unmarshal([]byte(text), &got)
	if b, _ := json.Marshal(got); string(b) != want {
		t.Errorf("prompt sent:\n%s\nwant\n%s", b, want)
	}
	checkSent(t, rec.Bytes())
}

func TestPromptBlocks(t *testing.T) {
	img := agent.PromptFile{Mime: "image/png", URL: "data:image/png;base64,iVBO"}
	bin := agent.PromptFile{Mime: "application/zip", Filename: "a.zip", URL: "data:application/zip;base64,UEsD"}
	cases := []struct {
		name string
		p    Prompt
		info AgentInfo
		want string
		err  error
	}{
		{"text only", Prompt{Text: "hi"}, AgentInfo{}, `[{"text":"hi","type":"text"}]`, nil},
		{"no text, no file: an empty text block", Prompt{}, AgentInfo{}, `[{"text":"","type":"text"}]`, nil},
		{"image the agent takes", Prompt{Files: []agent.PromptFile{img}}, AgentInfo{Image: true}, `[{"data":"iVBO","mimeType":"image/png","type":"image"}]`, nil},
		{"image the agent does not take", Prompt{Files: []agent.PromptFile{img}}, AgentInfo{}, "", ErrUnsupported},
		{"image as embedded context", Prompt{Files: []agent.PromptFile{img}}, AgentInfo{EmbeddedContext: true}, `[{"resource":{"blob":"iVBO","mimeType":"image/png","uri":"attachment:///attachment"},"type":"resource"}]`, nil},
		{"binary blob", Prompt{Files: []agent.PromptFile{bin}}, AgentInfo{EmbeddedContext: true}, `[{"resource":{"blob":"UEsD","mimeType":"application/zip","uri":"attachment:///a.zip"},"type":"resource"}]`, nil},
		{"link", Prompt{Text: "see", Files: []agent.PromptFile{{URL: "https://example.org/doc.md", Mime: "text/markdown"}}}, AgentInfo{}, `[{"text":"see","type":"text"},{"mimeType":"text/markdown","name":"doc.md","type":"resource_link","uri":"https://example.org/doc.md"}]`, nil},
		{"not base64 data URL", Prompt{Files: []agent.PromptFile{{URL: "data:text/plain,hi"}}}, AgentInfo{EmbeddedContext: true}, "", ErrUnsupported},
		{"text file as embedded text", Prompt{Text: "read", Files: []agent.PromptFile{{Mime: "text/plain", Filename: "notes.txt", URL: "data:text/plain;base64,aGkK"}}}, AgentInfo{EmbeddedContext: true}, `[{"text":"read","type":"text"},{"resource":{"mimeType":"text/plain","text":"hi\n","uri":"attachment:///notes.txt"},"type":"resource"}]`, nil},
		{"text file without embedded context", Prompt{Files: []agent.PromptFile{{Mime: "text/plain", Filename: "notes.txt", URL: "data:text/plain;base64,aGkK"}}}, AgentInfo{Image: true}, "", ErrUnsupported},
	}
	for _, tc := range cases {
		b, err := promptBlocks(tc.p, tc.info)
		if tc.err != nil {
			if !errors.Is(err, tc.err) || !errors.Is(err, agent.ErrUnsupportedInput) {
				t.Errorf("%s: err %v, want %v and agent.ErrUnsupportedInput", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got := string(mustJSON(b)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

func TestFolderPaths(t *testing.T) {
	dir := t.TempDir()
	f, err := openFolder(dir, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	must(t, os.WriteFile(filepath.Join(dir, "big.txt"), []byte("0123456789ab"), 0o644))
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{dir, true}, {dir + "/a/b", true}, {dir + "/a/../b", true}, {dir + "/..", false},
		{dir + "/../x", false}, {"a", false}, {"/etc/passwd", false}, {dir + "x/y", false},
	} {
		_, err := f.rel(tc.path)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrOutsideFolder)) {
			t.Errorf("rel(%q): %v", tc.path, err)
		}
	}
	if _, err := f.read(dir+"/big.txt", 0, 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("read over the limit: %v", err)
	}
	if _, err := f.write(dir, "x"); err == nil {
		t.Error("wrote the folder itself")
	}
}
