package local

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
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	xterm "golang.org/x/term"

	"github.com/happy-dev/happy/adapters/claude/hooks"
	"github.com/happy-dev/happy/agent"
)

// The test binary plays two programs:
//   - `<test binary> hook <event>`: happy's hook command (hooks.Forward);
//   - with roleEnv=claude: a fake Claude Code TUI. It reads --settings to
//     find its hook commands and runs them the way Claude does (sh -c, the
//     payload on stdin), writes its transcript from a captured session JSONL
//     (fakeScenarioEnv: r1 or r11-answer-3) under fakeProjectsEnv, and
//     reads keys: Enter submits the prompt, '1' / '3' answer its own
//     permission dialog Yes / No (killing the hook, as Claude does), 'q'
//     quits. SIGTERM ends it after its SessionEnd hook.
const (
	roleEnv         = "LOCAL_TEST_ROLE"
	fakeScenarioEnv = "LOCAL_TEST_SCENARIO"
	fakeProjectsEnv = "LOCAL_TEST_PROJECTS"
	fakeDataEnv     = "LOCAL_TEST_DATA"
)

func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && os.Args[1] == "hook" {
		if len(os.Args) != 3 {
			os.Exit(1)
		}
		if err := hooks.Forward(context.Background(), os.Args[2], os.Stdin, os.Stdout, os.Getenv, nil); err != nil {
			fmt.Fprintln(os.Stderr, "hook:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(roleEnv) == "claude" {
		os.Exit(runFakeClaude())
	}
	goleak.VerifyTestMain(m)
}

type fakeClaude struct {
	hooks      map[string]string
	sessionID  string
	transcript string
	cwd        string
	keys       chan byte
}

func runFakeClaude() int {
	c := &fakeClaude{hooks: map[string]string{}, keys: make(chan byte, 16)}
	source := "startup"
	var settings string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--settings":
			i++
			settings = args[i]
		case "--session-id":
			i++
			c.sessionID = args[i]
		case "--resume":
			i++
			c.sessionID, source = args[i], "resume"
		}
	}
	fmt.Printf("FAKE ARGS %s\r\n", strings.Join(args[2:], " "))
	if err := c.readSettings(settings); err != nil {
		fmt.Printf("FAKE SETTINGS ERROR %v\r\n", err)
		return 3
	}
	if c.sessionID == "" {
		c.sessionID = "00000000-0000-4000-8000-000000000000"
	}
	c.cwd, _ = os.Getwd()
	c.transcript = filepath.Join(os.Getenv(fakeProjectsEnv), c.sessionID+".jsonl")
	lines, err := readLines(filepath.Join(os.Getenv(fakeDataEnv), os.Getenv(fakeScenarioEnv)+".session.jsonl"))
	if err != nil {
		fmt.Printf("FAKE DATA ERROR %v\r\n", err)
		return 3
	}
	if _, err := xterm.MakeRaw(0); err != nil { // as Claude's TUI does
		fmt.Printf("FAKE RAW ERROR %v\r\n", err)
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			b, err := r.ReadByte()
			if err != nil {
				close(c.keys)
				return
			}
			c.keys <- b
		}
	}()
	c.hook(hooks.EventSessionStart, map[string]any{"source": source, "model": "claude-opus-4-8[1m]"}, nil)
	fmt.Print("FAKE READY\r\n")
	for {
		select {
		case <-term:
			c.hook(hooks.EventSessionEnd, map[string]any{"reason": "other"}, nil)
			return 0
		case k, ok := <-c.keys:
			if !ok {
				return 4
			}
			switch k {
			case 'q':
				c.hook(hooks.EventSessionEnd, map[string]any{"reason": "prompt_input_exit"}, nil)
				fmt.Print("FAKE BYE\r\n")
				return 0
			case 'x': // dies in the middle of writing a record
				f, _ := os.OpenFile(c.transcript, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
				_, _ = f.WriteString(`{"type":"assistant","message":{"id":"msg_cut"`)
				f.Close()
				return 9
			case '\r':
				if os.Getenv(fakeScenarioEnv) == "r20-subagent" {
					c.subagentTurn(lines)
				} else {
					c.turn(lines)
				}
			}
		}
	}
}

func (c *fakeClaude) readSettings(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for ev, groups := range s.Hooks {
		c.hooks[ev] = groups[0].Hooks[0].Command
	}
	return nil
}

// hook runs the command for event with the payload; cancel, when it
// fires, kills the hook (Claude's dialog was answered first).
func (c *fakeClaude) hook(event string, fields map[string]any, cancel <-chan struct{}) (string, bool) {
	payload := map[string]any{"session_id": c.sessionID, "transcript_path": c.transcript, "cwd": c.cwd, "hook_event_name": event}
	for k, v := range fields {
		payload[k] = v
	}
	body, _ := json.Marshal(payload)
	cmd := exec.Command("sh", "-c", c.hooks[event])
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdin = bytes.NewReader(body)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		fmt.Printf("FAKE HOOK %s START ERROR %v\r\n", event, err)
		return "", false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Printf("FAKE HOOK %s FAILED %v\r\n", event, err)
		}
		return out.String(), true
	case <-cancel:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return "", false
	}
}

// turn plays one prompt of the scenario's transcript.
func (c *fakeClaude) turn(lines [][]byte) {
	toolAt := -1
	var tool struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	for i, l := range lines {
		var r struct {
			Type    string `json:"type"`
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		_ = json.Unmarshal(l, &r)
		var blocks []json.RawMessage
		if r.Type == "assistant" && json.Unmarshal(r.Message.Content, &blocks) == nil && len(blocks) == 1 && bytes.Contains(blocks[0], []byte(`"tool_use"`)) {
			_ = json.Unmarshal(blocks[0], &tool)
			toolAt = i
			break
		}
	}
	c.hook(hooks.EventUserPromptSubmit, map[string]any{"prompt": "Run echo hi", "permission_mode": "default"}, nil)
	c.write(lines[:toolAt+1])
	c.hook(hooks.EventPreToolUse, map[string]any{"tool_name": tool.Name, "tool_input": tool.Input, "tool_use_id": tool.ID}, nil)
	// The dialog is drawn and the PermissionRequest hook races it.
	answered := make(chan struct{})
	hookDone := make(chan struct{})
	watched := make(chan struct{})
	var key byte
	go func() {
		defer close(watched)
		for {
			select {
			case k, ok := <-c.keys:
				if !ok {
					return
				}
				if k == '1' || k == '3' {
					key = k
					close(answered)
					return
				}
			case <-hookDone:
				return
			}
		}
	}()
	out, ok := c.hook(hooks.EventPermissionRequest, map[string]any{"tool_name": tool.Name, "tool_input": tool.Input,
		"permission_suggestions": []any{map[string]any{"type": "addDirectories", "directories": []string{c.cwd}, "destination": "session"}}}, answered)
	close(hookDone)
	<-watched
	allowed := false
	if ok {
		var o struct {
			HookSpecificOutput struct {
				Decision struct{ Behavior string } `json:"decision"`
			} `json:"hookSpecificOutput"`
		}
		_ = json.Unmarshal([]byte(out), &o)
		fmt.Printf("FAKE HOOK DECISION %s\r\n", o.HookSpecificOutput.Decision.Behavior)
		allowed = o.HookSpecificOutput.Decision.Behavior == "allow"
	} else {
		fmt.Printf("FAKE DIALOG ANSWER %c\r\n", key)
		allowed = key == '1'
	}
	c.write(lines[toolAt+1:])
	if allowed {
		c.hook(hooks.EventPostToolUse, map[string]any{"tool_name": tool.Name, "tool_input": tool.Input, "tool_use_id": tool.ID,
			"tool_response": map[string]any{"stdout": "", "stderr": ""}}, nil)
		c.hook(hooks.EventStop, map[string]any{"last_assistant_message": "Done: the command printed hi."}, nil)
	}
	fmt.Print("FAKE TURN DONE\r\n")
}

// subagentTurn plays the r20 run: an Agent call whose subagent runs Bash,
// here with a permission prompt inside the subagent.
func (c *fakeClaude) subagentTurn(lines [][]byte) {
	const agentID = "a6788af70d49fc1b9"
	sub, err := readLines(filepath.Join(os.Getenv(fakeDataEnv), "r20-subagent.agent-"+agentID+".jsonl"))
	if err != nil {
		fmt.Printf("FAKE DATA ERROR %v\r\n", err)
		return
	}
	subPath := filepath.Join(strings.TrimSuffix(c.transcript, ".jsonl"), "subagents", "agent-"+agentID+".jsonl")
	if err := os.MkdirAll(filepath.Dir(subPath), 0o700); err != nil {
		return
	}
	agentInput := json.RawMessage(`{"description":"Say hi via subagent","prompt":"SUBAGENT_TASK: run echo hi","subagent_type":"general-purpose"}`)
	bashInput := json.RawMessage(`{"command":"echo hi","description":"Print hi"}`)
	sa := map[string]any{"agent_id": agentID, "agent_type": "general-purpose"}
	with := func(m map[string]any) map[string]any {
		for k, v := range sa {
			m[k] = v
		}
		return m
	}
	c.hook(hooks.EventUserPromptSubmit, map[string]any{"prompt": "Use a subagent to run echo hi"}, nil)
	c.writeTo(c.transcript, lines[:8])
	c.hook(hooks.EventPreToolUse, map[string]any{"tool_name": "Agent", "tool_input": agentInput, "tool_use_id": "toolu_fake_3"}, nil)
	c.hook(hooks.EventSubagentStart, map[string]any{"agent_id": agentID, "agent_type": "general-purpose"}, nil)
	c.writeTo(subPath, sub[:4])
	c.hook(hooks.EventPreToolUse, with(map[string]any{"tool_name": "Bash", "tool_input": bashInput, "tool_use_id": "toolu_fake_4"}), nil)
	out, _ := c.hook(hooks.EventPermissionRequest, with(map[string]any{"tool_name": "Bash", "tool_input": bashInput}), nil)
	fmt.Printf("FAKE SUBAGENT HOOK OUTPUT %s\r\n", out)
	c.writeTo(subPath, sub[4:])
	c.hook(hooks.EventPostToolUse, with(map[string]any{"tool_name": "Bash", "tool_input": bashInput, "tool_use_id": "toolu_fake_4"}), nil)
	c.hook(hooks.EventSubagentStop, with(map[string]any{"agent_transcript_path": subPath}), nil)
	c.writeTo(c.transcript, lines[8:])
	c.hook(hooks.EventPostToolUse, map[string]any{"tool_name": "Agent", "tool_input": agentInput, "tool_use_id": "toolu_fake_3"}, nil)
	c.hook(hooks.EventStop, map[string]any{"last_assistant_message": "Done: the command printed hi."}, nil)
	fmt.Print("FAKE TURN DONE\r\n")
}

func (c *fakeClaude) write(lines [][]byte) { c.writeTo(c.transcript, lines) }

func (c *fakeClaude) writeTo(path string, lines [][]byte) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Printf("FAKE WRITE ERROR %v\r\n", err)
		return
	}
	defer f.Close()
	for _, l := range lines {
		_, _ = f.Write(append(append([]byte(nil), l...), '\n'))
	}
}

func readLines(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			out = append(out, l)
		}
	}
	return out, nil
}

// run is one local session against the fake Claude.
type run struct {
	t      *testing.T
	agent  *Agent
	keys   *os.File
	mu     sync.Mutex
	out    bytes.Buffer
	wrote  chan struct{} // a token after each terminal write (capacity 1)
	events []agent.Event
	evc    chan agent.Event
}

func (r *run) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case r.wrote <- struct{}{}:
	default:
	}
	return r.out.Write(p)
}

func (r *run) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

func startLocal(t *testing.T, scenario, projects string, mod func(*Options)) *run {
	t.Helper()
	data, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	keysR, keysW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, keys: keysW, wrote: make(chan struct{}, 1), evc: make(chan agent.Event, 1024)}
	opts := Options{
		Binary:      os.Args[0],
		Env:         append(os.Environ(), roleEnv+"=claude", fakeScenarioEnv+"="+scenario, fakeProjectsEnv+"="+projects, fakeDataEnv+"="+data, "GORACE=atexit_sleep_ms=0"),
		HookCommand: []string{os.Args[0], "hook"},
		StateDir:    t.TempDir(),
		In:          keysR,
		Out:         r,
		Grace:       2 * time.Second,
		Poll:        50 * time.Millisecond,
	}
	if mod != nil {
		mod(&opts)
	}
	a, err := Start(context.Background(), opts)
	if err != nil {
		keysR.Close()
		t.Fatal(err)
	}
	r.agent = a
	go func() {
		for ev := range a.Events() {
			r.evc <- ev
		}
		close(r.evc)
	}()
	t.Cleanup(func() {
		keysW.Close()
		_ = a.Close()
		keysR.Close()
	})
	return r
}

func (r *run) expectOutput(s string) {
	r.t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	for !strings.Contains(r.output(), s) {
		select {
		case <-r.wrote:
		case <-timeout.C:
			r.t.Fatalf("output never had %q:\n%q", s, r.output())
		}
	}
}

// until collects events until pred matches one (returned).
func (r *run) until(pred func(agent.Event) bool) agent.Event {
	r.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-r.evc:
			if !ok {
				r.t.Fatalf("events ended; got %s", describeAll(r.events))
			}
			r.events = append(r.events, ev)
			if pred(ev) {
				return ev
			}
		case <-timeout:
			r.t.Fatalf("event not seen after 20s; got %s\nclaude's output: %q", describeAll(r.events), r.output())
		}
	}
}

func (r *run) drain() {
	r.t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case ev, ok := <-r.evc:
			if !ok {
				return
			}
			r.events = append(r.events, ev)
		case <-timeout:
			r.t.Fatalf("events not closed after 20s; got %s", describeAll(r.events))
		}
	}
}

func (r *run) key(s string) {
	r.t.Helper()
	if _, err := r.keys.WriteString(s); err != nil {
		r.t.Fatal(err)
	}
}

// describe names the events the tests check.
func describe(ev agent.Event) string {
	switch e := ev.(type) {
	case *agent.UserPrompt:
		return "prompt " + e.Text
	case *agent.ToolCall:
		return "call " + e.CallID + " " + e.Tool + at(e.Session)
	case *agent.SubagentStarted:
		return "subagent " + e.Child + " from " + e.CallID
	case *agent.SubagentEnded:
		return "subagent-ended " + e.Child
	case *agent.ToolBlocked:
		if e.Permission != nil {
			return fmt.Sprintf("blocked %s %s %v", e.CallID, e.Permission.Permission, e.Permission.Patterns) + at(e.Session)
		}
		return "blocked " + e.CallID + " question"
	case *agent.ToolResolved:
		return fmt.Sprintf("resolved %s %s %s", e.CallID, e.Decision, e.Reason)
	case *agent.ToolCompleted:
		return "completed " + e.CallID + at(e.Session)
	case *agent.ToolFailed:
		return "failed " + e.CallID
	case *agent.TurnEnded:
		return "turn-ended " + e.Reason + at(e.Session)
	case *agent.DroppedInput:
		return fmt.Sprintf("dropped %s %s", e.Dropped.Kind, e.Dropped.Reason)
	}
	return ""
}

// at names a child session.
func at(session string) string {
	if session == "" {
		return ""
	}
	return " @" + session
}

func describeAll(evs []agent.Event) string {
	var out []string
	for _, ev := range evs {
		if d := describe(ev); d != "" {
			out = append(out, d)
		}
	}
	return strings.Join(out, " | ")
}

func TestPermissionAnsweredRemotely(t *testing.T) {
	projects := t.TempDir()
	r := startLocal(t, "r1", projects, func(o *Options) { o.SessionID = "cbe164e8-ff82-4bd9-8bc9-0ca70dc52318" })
	r.expectOutput("FAKE READY")
	r.expectOutput("FAKE ARGS --session-id cbe164e8-ff82-4bd9-8bc9-0ca70dc52318")
	r.key("\r")
	b := r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.ToolBlocked); return ok }).(*agent.ToolBlocked)
	if err := r.agent.Decide(context.Background(), b.CallID, agent.Verdict{Decision: agent.DecisionOnce}); err != nil {
		t.Fatal(err)
	}
	if err := r.agent.Decide(context.Background(), b.CallID, agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, agent.ErrStale) {
		t.Fatalf("second answer: %v", err)
	}
	r.until(func(ev agent.Event) bool {
		e, ok := ev.(*agent.TurnEnded)
		return ok && e.Reason == agent.TurnCompleted
	})
	r.expectOutput("FAKE HOOK DECISION allow")
	if got := r.agent.SessionID(); got != "cbe164e8-ff82-4bd9-8bc9-0ca70dc52318" {
		t.Fatalf("session id %q", got)
	}
	if err := r.agent.Prompt(context.Background(), agent.Prompt{Text: "hi"}); !errors.Is(err, ErrPromptInLocalMode) {
		t.Fatalf("prompt: %v", err)
	}
	r.key("q")
	r.drain()
	want := "prompt Run echo hi | call toolu_fake_3 bash | blocked toolu_fake_3 bash [echo hi > hi.txt] | completed toolu_fake_3 | turn-ended completed"
	if got := describeAll(r.events); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	res, err := r.agent.Result()
	if err != nil || res.ExitCode() != 0 {
		t.Fatalf("result %+v %v", res, err)
	}
}

func TestPermissionAnsweredInClaudesDialog(t *testing.T) {
	r := startLocal(t, "r11-answer-3", t.TempDir(), nil)
	r.expectOutput("FAKE READY")
	r.key("\r")
	b := r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.ToolBlocked); return ok }).(*agent.ToolBlocked)
	r.agent.mu.Lock()
	hook := r.agent.pending[b.CallID]
	r.agent.mu.Unlock()
	if hook == nil {
		t.Fatalf("no permission hook waits for %s", b.CallID)
	}
	r.key("3") // No, in Claude's own dialog
	r.expectOutput("FAKE DIALOG ANSWER 3")
	r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.TurnEnded); return ok })
	select { // Claude gives up the hook call once its dialog was answered
	case <-hook.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the permission hook never settled after the answer in Claude's dialog")
	}
	if o := hook.Outcome(); o != hooks.OutcomeHookGone {
		t.Fatalf("hook outcome %q, want %q", o, hooks.OutcomeHookGone)
	}
	if err := r.agent.Decide(context.Background(), b.CallID, agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, agent.ErrStale) {
		t.Fatalf("late remote answer: %v, want ErrStale", err)
	}
	r.key("q")
	r.drain()
	want := "prompt Run echo hi | call toolu_fake_3 bash | blocked toolu_fake_3 bash [echo hi > hi.txt] | resolved toolu_fake_3 reject answered-in-agent | failed toolu_fake_3 | turn-ended interrupted"
	if got := describeAll(r.events); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

// TestHandoffAndResume: local mode stops cleanly (SIGTERM, SessionEnd, the
// transcript read to its end), and a new local run resumes the same Claude
// session with --resume, following only what is written after.
func TestHandoffAndResume(t *testing.T) {
	projects := t.TempDir()
	const id = "11111111-2222-4333-8444-555555555555"
	r := startLocal(t, "r1", projects, func(o *Options) { o.SessionID = id })
	r.expectOutput("FAKE READY")
	r.key("\r")
	b := r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.ToolBlocked); return ok }).(*agent.ToolBlocked)
	if err := r.agent.Decide(context.Background(), b.CallID, agent.Verdict{Decision: agent.DecisionOnce}); err != nil {
		t.Fatal(err)
	}
	r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.TurnEnded); return ok })
	go func() { // Handoff returns once every event was read
		for range r.evc {
		}
	}()
	h, err := r.agent.Handoff(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	transcript := filepath.Join(projects, id+".jsonl")
	fi, _ := os.Stat(transcript)
	if h.SessionID != id || h.TranscriptPath != transcript || fi == nil || h.Offset != fi.Size() {
		t.Fatalf("handoff %+v (transcript size %v)", h, fi)
	}
	r2 := startLocal(t, "r1", projects, func(o *Options) { o.Resume, o.ResumeOffset = h.SessionID, h.Offset })
	r2.expectOutput("FAKE ARGS --resume " + id)
	r2.expectOutput("FAKE READY") // keys before it would meet a terminal not yet raw
	r2.key("\r")
	b2 := r2.until(func(ev agent.Event) bool { _, ok := ev.(*agent.ToolBlocked); return ok }).(*agent.ToolBlocked)
	if err := r2.agent.Decide(context.Background(), b2.CallID, agent.Verdict{Decision: agent.DecisionReject, Reason: "not now"}); err != nil {
		t.Fatal(err)
	}
	r2.expectOutput("FAKE HOOK DECISION deny")
	r2.key("q")
	r2.drain()
	// The resumed run saw the new turn only (the same records, written
	// again by the fake, are new lines past the saved end).
	got := describeAll(r2.events)
	if strings.Count(got, "prompt Run echo hi") != 1 || !strings.HasPrefix(got, "prompt Run echo hi") {
		t.Fatalf("resumed events %s", got)
	}
}

// TestSubagent: the subagent's transcript is followed once its
// SubagentStart hook arrives, its records go into the child session of the
// Agent call, and a permission asked inside the subagent blocks the right
// call in that child session.
func TestSubagent(t *testing.T) {
	r := startLocal(t, "r20-subagent", t.TempDir(), func(o *Options) { o.SessionID = "5d8a3d59-15e7-4fe1-81c2-c31171c0953f" })
	r.expectOutput("FAKE READY")
	r.key("\r")
	b := r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.ToolBlocked); return ok }).(*agent.ToolBlocked)
	if err := r.agent.Decide(context.Background(), b.CallID, agent.Verdict{Decision: agent.DecisionAlways}); err != nil {
		t.Fatal(err)
	}
	r.expectOutput(`FAKE SUBAGENT HOOK OUTPUT {"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`)
	r.until(func(ev agent.Event) bool { e, ok := ev.(*agent.TurnEnded); return ok && e.Session == "" })
	r.key("q")
	r.drain()
	want := "prompt Use a subagent to run echo hi | call toolu_fake_3 task | subagent toolu_fake_3 from toolu_fake_3 | " +
		"call toolu_fake_4 bash @toolu_fake_3 | blocked toolu_fake_4 bash [echo hi] @toolu_fake_3 | " +
		"completed toolu_fake_4 @toolu_fake_3 | turn-ended completed @toolu_fake_3 | subagent-ended toolu_fake_3 | completed toolu_fake_3 | turn-ended completed"
	if got := describeAll(r.events); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

// TestRecordCutShort: Claude dies in the middle of a transcript record; the
// fragment is reported (Dropped), not silently lost, and the turn is closed.
func TestRecordCutShort(t *testing.T) {
	r := startLocal(t, "r1", t.TempDir(), nil)
	r.expectOutput("FAKE READY")
	r.key("\r")
	b := r.until(func(ev agent.Event) bool { _, ok := ev.(*agent.ToolBlocked); return ok }).(*agent.ToolBlocked)
	if err := r.agent.Decide(context.Background(), b.CallID, agent.Verdict{Decision: agent.DecisionOnce}); err != nil {
		t.Fatal(err)
	}
	r.expectOutput("FAKE TURN DONE")
	r.key("x")
	r.drain()
	got := describeAll(r.events)
	if want := "prompt Run echo hi | call toolu_fake_3 bash | blocked toolu_fake_3 bash [echo hi > hi.txt] | completed toolu_fake_3 | turn-ended completed | dropped assistant unparseable_json"; got != want {
		t.Fatalf("events %s", got)
	}
	res, _ := r.agent.Result()
	if res.ExitCode() != 9 {
		t.Fatalf("exit %d", res.ExitCode())
	}
}

func TestStartRequiresHookCommand(t *testing.T) {
	if _, err := Start(context.Background(), Options{StateDir: t.TempDir(), Out: &bytes.Buffer{}}); err == nil {
		t.Fatal("started without a hook command")
	}
	_, err := Start(context.Background(), Options{Binary: "/nonexistent/claude", HookCommand: []string{"happy", "hook"}, StateDir: t.TempDir(), Out: &bytes.Buffer{}})
	if err == nil {
		t.Fatal("started a missing binary")
	}
}

func TestCompleteLinesEnd(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]int64{"": 0, "a\n": 2, "a\nb": 2, "no newline": 0, "a\nb\n" + strings.Repeat("x", 100<<10): 4}
	for content, want := range cases {
		p := filepath.Join(dir, "t.jsonl")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := completeLinesEnd(p); got != want {
			t.Errorf("completeLinesEnd(%.20q) = %d, want %d", content, got, want)
		}
	}
	if got := completeLinesEnd(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing file: %d", got)
	}
}

func TestQuestionInput(t *testing.T) {
	in := json.RawMessage(`{"questions":[{"question":"Which?","options":[{"label":"A"},{"label":"B"}]},{"question":"More?"}]}`)
	got, err := questionInput(in, [][]string{{"A", "B"}, {"no"}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(got, &m)
	if a, _ := m["answers"].(map[string]any); a["Which?"] != "A, B" || a["More?"] != "no" {
		t.Fatalf("answers %s", got)
	}
	if _, err := questionInput(in, [][]string{{"A"}}); err == nil {
		t.Fatal("answer count not checked")
	}
	if _, err := questionInput(json.RawMessage(`[1]`), nil); err == nil {
		t.Fatal("non-object input accepted")
	}
}
