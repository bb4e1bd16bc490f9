package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/internal/proc"
)

func TestMain(m *testing.M) {
	if script := os.Getenv(fakeScriptEnv); script != "" {
		os.Exit(runFakeClaude(script))
	}
	if os.Getenv("SDK_FAKE_SLEEP") != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if os.Getenv("SDK_FAKE_ESCAPE") != "" {
		os.Exit(escapeCLI())
	}
	if os.Getenv("SDK_FAKE_HANG") != "" {
		signalIgnoreTerm()
		fmt.Println(`{"type":"system","subtype":"init","session_id":"hang"}`)
		// A CLI that ignores EOF and SIGTERM: only SIGKILL ends it. It
		// blocks reading a pipe nobody writes to (a bare select{} would be
		// reported as a deadlock).
		r, w, err := os.Pipe()
		if err != nil {
			os.Exit(4)
		}
		_, _ = r.Read(make([]byte, 1))
		runtime.KeepAlive(w) // a collected write end would close the pipe
		os.Exit(5)
	}
	goleak.VerifyTestMain(m)
}

func signalIgnoreTerm() { signal.Ignore(syscall.SIGTERM) }

// escapeCLI starts a grandchild in a new session (out of the CLI's process
// group) that inherits stdout and stderr and sleeps, prints its pid as the
// session id, and exits 0.
func escapeCLI() int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SDK_FAKE_SLEEP=1")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf(`{"type":"system","subtype":"init","session_id":"%d"}`+"\n", cmd.Process.Pid)
	return 0
}

// TestDetachedDescendantHoldingPipes: the CLI exits leaving a detached
// grandchild that holds its stdout and stderr open; Exited still comes
// (about OutputDrain later), after the line written before the exit, and
// Close returns.
func TestDetachedDescendantHoldingPipes(t *testing.T) {
	var rec syncBuffer
	rec.b = &bytes.Buffer{}
	c, err := Start(context.Background(), Options{
		Binary: os.Args[0],
		Env:    append(os.Environ(), "SDK_FAKE_ESCAPE=1", "GORACE=atexit_sleep_ms=0"),
		Grace:  time.Second,
		Record: &rec,
		Now:    func() time.Time { return time.UnixMilli(1_700_000_000_000) },
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	defer func() {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	timeout := time.After(OutputDrain + 10*time.Second)
	var exited *Exited
	for exited == nil {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				t.Fatal("events closed without Exited")
			}
			switch e := ev.(type) {
			case *Output:
				var m struct {
					SessionID string `json:"session_id"`
				}
				_ = json.Unmarshal(e.Line.Data, &m)
				pid, _ = strconv.Atoi(m.SessionID)
			case *Exited:
				exited = e
			}
		case <-timeout:
			t.Fatal("no Exited while a detached grandchild holds the pipes")
		}
	}
	if pid <= 0 {
		t.Fatal("the line written before the exit was not read")
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("grandchild %d not running (the test checks nothing): %v", pid, err)
	}
	if exited.State == nil || exited.State.ExitCode() != 0 {
		t.Fatalf("exit state %v", exited.State)
	}
	if _, err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got := rec.b.String()
	if !strings.HasSuffix(got, `{"t":1700000000000,"dir":"exit","msg":{"code":0,"sig":null}}`+"\n") ||
		!strings.Contains(got, `"dir":"note","msg":"the CLI exited but its stdout or stderr was still open 2s later`) {
		t.Fatalf("record:\n%s", got)
	}
}

// fake describes one run of the fake CLI.
type fake struct {
	client *Client
	argv   string
	stderr *lines
	record *bytes.Buffer
}

type lines struct {
	mu sync.Mutex
	l  []string
}

func (l *lines) add(s string) { l.mu.Lock(); l.l = append(l.l, s); l.mu.Unlock() }
func (l *lines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.l...)
}

// startFake starts the test binary as a fake CLI replaying script.
func startFake(t *testing.T, ctx context.Context, script string, mod func(*Options)) *fake {
	t.Helper()
	dir := t.TempDir()
	f := &fake{argv: filepath.Join(dir, "argv.json"), stderr: &lines{}, record: &bytes.Buffer{}}
	opts := Options{
		Binary: os.Args[0],
		Args:   []string{"--model", "claude-opus-4-8", "--resume", "abc"},
		// GORACE: a race-enabled fake would otherwise sleep 1s before exiting.
		Env:        append(os.Environ(), fakeScriptEnv+"="+script, fakeArgvEnv+"="+f.argv, "GORACE=atexit_sleep_ms=0"),
		Record:     &syncBuffer{b: f.record},
		StderrLine: f.stderr.add,
		Grace:      2 * time.Second,
		Now:        func() time.Time { return time.UnixMilli(1_700_000_000_000) },
	}
	if mod != nil {
		mod(&opts)
	}
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Close() })
	f.client = c
	return f
}

type syncBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// drive consumes events until Exited, calling onPerm for each permission
// request, and returns the stdout lines and the other events.
func drive(t *testing.T, c *Client, onPerm func(*PermissionRequest), onOther func(Event)) (out [][]byte, exited *Exited) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-c.Events():
			if !ok {
				if exited == nil {
					t.Fatal("events closed without Exited")
				}
				return out, exited
			}
			switch e := ev.(type) {
			case *Output:
				out = append(out, e.Line.Data)
			case *PermissionRequest:
				if onPerm == nil {
					t.Fatalf("unexpected permission request %+v", e)
				}
				onPerm(e)
			case *Exited:
				exited = e
			default:
				if onOther == nil {
					t.Fatalf("unexpected event %#v", ev)
				}
				onOther(ev)
			}
		case <-timeout:
			t.Fatal("no Exited event after 30s")
		}
	}
}

// scriptA2C returns the a2c messages of a script, compacted.
func scriptA2C(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		rec, err := trafficlog.Decode(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if rec.Dir == trafficlog.A2C {
			out = append(out, compact(t, rec.Msg))
		}
	}
	return out
}

func compact(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.Bytes()
}

func checkExit(t *testing.T, f *fake, e *Exited, code int) {
	t.Helper()
	if e.State == nil || e.State.ExitCode() != code {
		t.Fatalf("exit %v (err %v), want code %d; fake stderr: %q", e.State, e.Err, code, f.stderr.all())
	}
	for _, l := range f.stderr.all() {
		if strings.HasPrefix(l, "MISMATCH") {
			t.Fatalf("fake CLI saw a wrong message: %s", l)
		}
	}
}

// goldenRecord compares the recorded traffic log with a golden file.
// stderr records are left out: stderr and stdout are read concurrently, so
// their interleaving is not deterministic (tests check stderr separately).
func goldenRecord(t *testing.T, f *fake, name string) {
	t.Helper()
	var got []byte
	for _, l := range bytes.SplitAfter(f.record.Bytes(), []byte("\n")) {
		if !bytes.Contains(l, []byte(`"dir":"stderr"`)) {
			got = append(got, l...)
		}
	}
	golden.Check(t, filepath.Join("testdata", name+".record.golden.jsonl"), got)
}

func TestAllowCapture(t *testing.T) {
	script := "testdata/allow.traffic.jsonl"
	f := startFake(t, context.Background(), script, nil)
	c := f.client
	pending, err := c.SendInitialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SendUser(context.Background(), "Run echo hi > hi.txt"); err != nil {
		t.Fatal(err)
	}
	var perms []*PermissionRequest
	out, exited := drive(t, c, func(p *PermissionRequest) {
		perms = append(perms, p)
		if err := c.Respond(context.Background(), p.RequestID, Answer{Decision: agent.DecisionOnce}); err != nil {
			t.Errorf("respond: %v", err)
		}
		if err := c.Respond(context.Background(), p.RequestID, Answer{Decision: agent.DecisionReject}); !errors.Is(err, ErrAnswered) {
			t.Errorf("second answer: %v, want ErrAnswered", err)
		}
	}, nil)
	checkExit(t, f, exited, 0)
	initResp, err := pending.Wait(context.Background())
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	var init struct {
		Commands []struct{ Name string } `json:"commands"`
	}
	if err := json.Unmarshal(initResp, &init); err != nil || len(init.Commands) == 0 || init.Commands[0].Name != "deep-research" {
		t.Fatalf("initialize response %s (%v)", initResp, err)
	}
	if len(perms) != 1 {
		t.Fatalf("%d permission requests, want 1", len(perms))
	}
	p := perms[0]
	if p.RequestID != "fa78c024-a403-4160-8fc0-5f3805ab2954" || p.ToolName != "Bash" || p.DisplayName != "Bash" ||
		p.ToolUseID != "toolu_fake_2" || p.Description != "Print hi" || p.BlockedPath != "/home/dev/run/work/hi.txt" {
		t.Fatalf("permission request %+v", p)
	}
	if string(compact(t, p.Input)) != `{"command":"echo hi > hi.txt","description":"Print hi"}` {
		t.Fatalf("input %s", p.Input)
	}
	var sugg []map[string]any
	if err := json.Unmarshal(p.Suggestions, &sugg); err != nil || len(sugg) != 2 || sugg[0]["type"] != "addRules" {
		t.Fatalf("suggestions %s", p.Suggestions)
	}
	want := scriptA2C(t, script)
	if len(out) != len(want) {
		t.Fatalf("%d stdout lines, want %d", len(out), len(want))
	}
	for i := range want {
		got := bytes.Replace(compact(t, out[i]), []byte(`"req_initialize_1"`), []byte(`"req_init_1"`), 1)
		if !bytes.Equal(got, want[i]) {
			t.Fatalf("stdout line %d:\n got %s\nwant %s", i+1, out[i], want[i])
		}
	}
	var argv []string
	b, err := os.ReadFile(f.argv)
	if err != nil || json.Unmarshal(b, &argv) != nil {
		t.Fatalf("argv file: %v %s", err, b)
	}
	wantArgv := append(BaseArgs(), "--model", "claude-opus-4-8", "--resume", "abc")
	if !reflect.DeepEqual(argv, wantArgv) {
		t.Fatalf("argv %q, want %q", argv, wantArgv)
	}
	if !reflect.DeepEqual(BaseArgs(), []string{"--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--permission-prompt-tool", "stdio", "--include-partial-messages"}) {
		t.Fatalf("base args %q", BaseArgs())
	}
	goldenRecord(t, f, "allow")
}

func TestDenyCapture(t *testing.T) {
	f := startFake(t, context.Background(), "testdata/deny.traffic.jsonl", nil)
	c := f.client
	if _, err := c.SendInitialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.SendUser(context.Background(), "Run echo hi > hi.txt"); err != nil {
		t.Fatal(err)
	}
	_, exited := drive(t, c, func(p *PermissionRequest) {
		// An unknown decision is refused and nothing is sent (the fake
		// would see it as a mismatch).
		for _, d := range []agent.Decision{"allow", "", "ALWAYS", "deny"} {
			if err := c.Respond(context.Background(), p.RequestID, Answer{Decision: d}); !errors.Is(err, agent.ErrUnknownDecision) {
				t.Errorf("decision %q: %v, want ErrUnknownDecision", d, err)
			}
		}
		if err := c.Respond(context.Background(), p.RequestID, Answer{Decision: agent.DecisionOnce, Abort: true}); err == nil {
			t.Error("decision plus abort accepted")
		}
		if err := c.Respond(context.Background(), p.RequestID, Answer{Decision: agent.DecisionReject, Message: "denied by driver"}); err != nil {
			t.Errorf("respond: %v", err)
		}
	}, nil)
	checkExit(t, f, exited, 0)
	goldenRecord(t, f, "deny")
}

func TestDecisions(t *testing.T) {
	f := startFake(t, context.Background(), "testdata/decisions.traffic.jsonl", nil)
	c := f.client
	if err := c.SendUser(context.Background(), "go"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var cancelled []string
	var seen []string
	_, exited := drive(t, c, func(p *PermissionRequest) {
		seen = append(seen, p.RequestID)
		var err error
		switch p.RequestID {
		case "p1":
			err = c.Respond(ctx, "p1", Answer{Decision: agent.DecisionAlways})
		case "p2":
			in := json.RawMessage(`{"questions":[{"question":"Which?","header":"Pick","options":[{"label":"A"},{"label":"B"}]}],"answers":{"Which?":"B"}}`)
			err = c.Respond(ctx, "p2", Answer{Decision: agent.DecisionOnce, UpdatedInput: in})
		case "p3":
			// left unanswered: the CLI cancels it
		case "p4":
			err = c.Respond(ctx, "p4", Answer{Abort: true})
		}
		if err != nil {
			t.Errorf("respond %s: %v", p.RequestID, err)
		}
	}, func(ev Event) {
		pc, ok := ev.(*PermissionCancelled)
		if !ok {
			t.Errorf("unexpected event %#v", ev)
			return
		}
		cancelled = append(cancelled, pc.RequestID)
		if err := c.Respond(ctx, pc.RequestID, Answer{Decision: agent.DecisionOnce}); !errors.Is(err, ErrCancelled) {
			t.Errorf("answer after cancel: %v, want ErrCancelled", err)
		}
	})
	checkExit(t, f, exited, 1)
	if !reflect.DeepEqual(seen, []string{"p1", "p2", "p3", "p4"}) || !reflect.DeepEqual(cancelled, []string{"p3"}) {
		t.Fatalf("requests %v, cancelled %v", seen, cancelled)
	}
	if err := c.Respond(ctx, "nope", Answer{Decision: agent.DecisionOnce}); !errors.Is(err, ErrExited) {
		t.Fatalf("answer after exit: %v", err)
	}
	goldenRecord(t, f, "decisions")
}

func TestControlRequestsAndRefusals(t *testing.T) {
	f := startFake(t, context.Background(), "testdata/control.traffic.jsonl", nil)
	c := f.client
	ctx := context.Background()
	resp, err := c.Initialize(ctx)
	if err != nil || string(resp) != `{"commands":[],"models":[]}` {
		t.Fatalf("initialize: %s, %v", resp, err)
	}
	if err := c.SetPermissionMode(ctx, "yolo"); !errors.Is(err, ErrUnknownMode) {
		t.Fatalf("unknown mode: %v", err)
	}
	if err := c.SetPermissionMode(ctx, ModeAcceptEdits); err != nil {
		t.Fatalf("set mode: %v", err)
	}
	err = c.Interrupt(ctx)
	var ce *ControlError
	if !errors.As(err, &ce) || !errors.Is(err, ErrControl) || ce.Subtype != "interrupt" || ce.Message != "no turn to interrupt" {
		t.Fatalf("interrupt error %v", err)
	}
	var refused []Refused
	_, exited := drive(t, c, func(p *PermissionRequest) { t.Errorf("unexpected permission request %+v", p) }, func(ev Event) {
		r, ok := ev.(*Refused)
		if !ok {
			t.Errorf("unexpected event %#v", ev)
			return
		}
		refused = append(refused, *r)
	})
	checkExit(t, f, exited, 0)
	want := []Refused{
		{RequestID: "cli-1", Subtype: "hook_callback", Reason: `unsupported control request subtype "hook_callback"`, Drop: agent.DropUnknownType},
		{RequestID: "cli-2", Subtype: "can_use_tool", Reason: "can_use_tool without tool_name", Drop: agent.DropMissingID},
		{RequestID: "cli-3", Reason: "request is not a JSON object", Drop: agent.DropInvalidField},
		{Subtype: "can_use_tool", Reason: "control request without request_id (cannot be answered)", Drop: agent.DropMissingID},
	}
	if !reflect.DeepEqual(refused, want) {
		t.Fatalf("refused\n got %+v\nwant %+v", refused, want)
	}
	if got := f.stderr.all(); !reflect.DeepEqual(got, []string{"shutting down"}) {
		t.Fatalf("stderr %q", got)
	}
	if _, err := c.Initialize(ctx); !errors.Is(err, ErrExited) {
		t.Fatalf("request after exit: %v", err)
	}
	if err := c.SendUser(ctx, "late"); !errors.Is(err, ErrExited) {
		t.Fatalf("send after exit: %v", err)
	}
	goldenRecord(t, f, "control")
}

// writeScript writes a traffic log script from (dir, msg) pairs.
func writeScript(t *testing.T, recs ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(recs, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The lines of the control protocol are marked as such, whatever else
// mentions it: a decoder of the transcript skips exactly those, and learns
// what they meant from the events that follow them.
func TestControlLinesAreMarked(t *testing.T) {
	script := writeScript(t,
		`{"t":1,"dir":"a2c","msg":{"type":"system","subtype":"init","session_id":"S"}}`,
		`{"t":2,"dir":"a2c","msg":{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"a \"control_request\" line"}]}}}`,
		`{"t":3,"dir":"a2c","msg":{"type":"control_request","request_id":"p1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"decision_reason":"asked by rule"}}}`,
		`{"t":4,"dir":"a2c","msg":{"type":"control_cancel_request","request_id":"p1"}}`,
		`{"t":5,"dir":"a2c","msg":{"type":"control_response","response":{"subtype":"success","request_id":"nobody"}}}`,
		`{"t":6,"dir":"a2c","msg":{"type":"result","subtype":"success"}}`,
		`{"t":7,"dir":"exit","msg":{"code":0,"sig":null}}`)
	f := startFake(t, context.Background(), script, nil)
	var got []string
	for ev := range f.client.Events() {
		switch e := ev.(type) {
		case *Output:
			got = append(got, fmt.Sprintf("line %d control=%v", e.Line.Number, e.Control))
		case *PermissionRequest:
			got = append(got, "request "+e.RequestID+" "+e.DecisionReason)
		case *PermissionCancelled:
			got = append(got, "cancelled "+e.RequestID)
		case *Exited:
			got = append(got, "exited")
		default:
			t.Errorf("unexpected %#v", ev)
		}
	}
	want := []string{"line 1 control=false", "line 2 control=false", "line 3 control=true", "request p1 asked by rule",
		"line 4 control=true", "cancelled p1", "line 5 control=true", "line 6 control=false", "exited"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %q\nwant %q", got, want)
	}
	if err := f.client.Respond(context.Background(), "p1", Answer{Decision: agent.DecisionOnce}); !errors.Is(err, ErrExited) {
		t.Fatalf("answer after exit: %v", err)
	}
}

func TestLinesOfAnyLength(t *testing.T) {
	big := strings.Repeat("é€x", 1<<18) // 1.5 MiB of text, multi-byte sequences
	line := fmt.Sprintf(`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":%q}]}}`, big)
	script := writeScript(t,
		`{"t":1,"dir":"a2c","msg":`+line+`}`,
		`{"t":2,"dir":"a2c","msg":{"type":"result","subtype":"success"}}`,
		`{"t":3,"dir":"exit","msg":{"code":0,"sig":null}}`)
	t.Run("unlimited", func(t *testing.T) {
		f := startFake(t, context.Background(), script, func(o *Options) { o.Record = nil })
		out, exited := drive(t, f.client, nil, nil)
		checkExit(t, f, exited, 0)
		if len(out) != 2 || string(out[0]) != line || string(out[1]) != `{"type":"result","subtype":"success"}` {
			t.Fatalf("got %d lines, first %d bytes (want %d)", len(out), len(out[0]), len(line))
		}
	})
	t.Run("limited", func(t *testing.T) {
		f := startFake(t, context.Background(), script, func(o *Options) { o.MaxLine = 1 << 19 })
		var got []*Output
		c := f.client
		for ev := range c.Events() {
			if o, ok := ev.(*Output); ok {
				got = append(got, o)
			}
		}
		if len(got) != 2 || !got[0].Line.Oversize || got[0].Line.Size != int64(len(line)) || got[1].Line.Oversize ||
			string(got[1].Line.Data) != `{"type":"result","subtype":"success"}` {
			t.Fatalf("lines %+v", got)
		}
		if !strings.Contains(f.record.String(), fmt.Sprintf(`"stdout line 1 of %d bytes exceeds the limit, skipped"`, len(line))) {
			t.Fatalf("record lacks the oversize note:\n%.400s", f.record.String())
		}
	})
}

func TestCrashFailsPendingRequests(t *testing.T) {
	script := writeScript(t,
		`{"t":1,"dir":"c2a","msg":{"type":"control_request","request_id":"X1","request":{"subtype":"initialize","hooks":null}}}`,
		`{"t":2,"dir":"stderr","msg":"fatal: boom"}`,
		`{"t":3,"dir":"exit","msg":{"code":2,"sig":null}}`)
	f := startFake(t, context.Background(), script, nil)
	_, err := f.client.Initialize(context.Background())
	if !errors.Is(err, ErrExited) {
		t.Fatalf("initialize against a crashing CLI: %v", err)
	}
	_, exited := drive(t, f.client, nil, nil)
	checkExit(t, f, exited, 2)
	if !strings.Contains(f.record.String(), `{"t":1700000000000,"dir":"stderr","msg":"fatal: boom"}`) ||
		!strings.HasSuffix(f.record.String(), `{"t":1700000000000,"dir":"exit","msg":{"code":2,"sig":null}}`+"\n") {
		t.Fatalf("record:\n%s", f.record.String())
	}
}

func TestKilledBySignalIsRecorded(t *testing.T) {
	script := writeScript(t, `{"t":1,"dir":"exit","msg":{"code":null,"sig":"SIGKILL"}}`)
	f := startFake(t, context.Background(), script, nil)
	_, exited := drive(t, f.client, nil, nil)
	ws, _ := exited.State.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("state %v", exited.State)
	}
	if got := f.record.String(); got != `{"t":1700000000000,"dir":"exit","msg":{"code":null,"sig":"SIGKILL"}}`+"\n" {
		t.Fatalf("record %q", got)
	}
}

func TestCloseEndsAtEndOfInput(t *testing.T) {
	script := writeScript(t, `{"t":1,"dir":"a2c","msg":{"type":"system","subtype":"init","session_id":"s"}}`)
	f := startFake(t, context.Background(), script, nil)
	start := time.Now()
	st, err := f.client.Close()
	if err != nil || st.ExitCode() != 0 {
		t.Fatalf("close: %v %v", st, err)
	}
	if d := time.Since(start); d >= 2*time.Second {
		t.Fatalf("close waited %v: stdin EOF did not end the CLI", d)
	}
}

func TestCloseKillsStubbornCLI(t *testing.T) {
	c, err := Start(context.Background(), Options{
		Binary: os.Args[0],
		Env:    append(os.Environ(), "SDK_FAKE_HANG=1"),
		Grace:  200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := <-c.Events() // the CLI is up
	if _, ok := ev.(*Output); !ok {
		t.Fatalf("first event %#v", ev)
	}
	st, _ := c.Close()
	ws, _ := st.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("state %v, want SIGKILL after ignoring EOF and SIGTERM", st)
	}
}

func TestContextCancelEndsCLI(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	script := writeScript(t, `{"t":1,"dir":"a2c","msg":{"type":"system","subtype":"init","session_id":"s"}}`)
	f := startFake(t, ctx, script, nil)
	<-f.client.Events()
	cancel()
	_, exited := drive(t, f.client, nil, nil)
	ws, _ := exited.State.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Fatalf("state %v, want SIGTERM", exited.State)
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := Start(context.Background(), Options{Binary: filepath.Join(t.TempDir(), "claude")})
	if !errors.Is(err, proc.ErrNotStarted) {
		t.Fatalf("err %v", err)
	}
}

func TestSendUserContentRefusesNonArray(t *testing.T) {
	c := &Client{}
	for _, in := range []string{`{"type":"text"}`, `"hi"`, `[`, ``} {
		if err := c.SendUserContent(context.Background(), json.RawMessage(in)); err == nil {
			t.Errorf("content %q accepted", in)
		}
	}
}

// FuzzRoute feeds arbitrary stdout lines to the control router: it never
// panics, and every control request with an id is either turned into a
// permission request or refused.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{
		`{"type":"control_request","request_id":"a","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{}}}`,
		`{"type":"control_request","request_id":"a","request":{"subtype":"x"}}`,
		`{"type":"control_request","request_id":"a","request":[]}`,
		`{"type":"control_response","response":{"subtype":"success","request_id":"req_initialize_1"}}`,
		`{"type":"control_cancel_request","request_id":"a"}`,
		`{"type":"control_request"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Skip(err)
		}
		defer r.Close()
		go func() { _, _ = bufio.NewReader(r).WriteTo(devNull{}) }()
		c := &Client{
			opts:    Options{Grace: time.Second},
			stdin:   w,
			waiters: map[string]waiter{"req_initialize_1": {subtype: "initialize", ch: make(chan controlResult, 1)}},
			perms:   map[string]*permState{},
		}
		var evs []Event
		c.route(line, &evs)
		c.wmu.Lock()
		w.Close()
		c.wmu.Unlock()
		for _, ev := range evs {
			if p, ok := ev.(*PermissionRequest); ok && (p.RequestID == "" || p.ToolName == "") {
				t.Fatalf("permission request without id or tool: %+v", p)
			}
		}
	})
}

type devNull struct{}

func (devNull) Write(p []byte) (int, error) { return len(p), nil }
