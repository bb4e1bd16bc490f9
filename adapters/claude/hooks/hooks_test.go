package hooks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/claude/perm"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newServer(t *testing.T) (*Server, func(string) string) {
	t.Helper()
	s, err := NewServer(ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	env := map[string]string{}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return s, func(k string) string { return env[k] }
}

// call runs `happy hook <event>` in-process and returns its stdout.
func call(ctx context.Context, getenv func(string) string, event string, payload []byte) (string, error) {
	var out bytes.Buffer
	err := Forward(ctx, event, bytes.NewReader(payload), &out, getenv, nil)
	return out.String(), err
}

type capturedHook struct {
	Tag     string          `json:"tag"`
	Payload json.RawMessage `json:"payload"`
}

func loadHooks(t *testing.T, name string) []capturedHook {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".hooks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []capturedHook
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var h capturedHook
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatal(err)
		}
		out = append(out, h)
	}
	return out
}

func next(t *testing.T, s *Server) Event {
	t.Helper()
	select {
	case ev := <-s.Events():
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no hook event after 10s")
		return nil
	}
}

// replay posts a captured run's hooks in order; a PermissionRequest is
// answered by answer (on the events goroutine). It returns a description of
// every delivered event and the hook outputs by event.
func replay(t *testing.T, name string, answer func(*PermissionRequest)) (events []string, outputs map[string][]string, s *Server) {
	t.Helper()
	s, getenv := newServer(t)
	outputs = map[string][]string{}
	for _, h := range loadHooks(t, name) {
		done := make(chan struct{})
		var out string
		var err error
		go func() {
			defer close(done)
			out, err = call(context.Background(), getenv, h.Tag, h.Payload)
		}()
	wait:
		for {
			select {
			case <-done:
				break wait
			case ev := <-s.Events():
				events = append(events, describe(ev))
				if p, ok := ev.(*PermissionRequest); ok {
					answer(p)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("hook %s did not return", h.Tag)
			}
		}
		if err != nil {
			t.Fatalf("hook %s: %v", h.Tag, err)
		}
		outputs[h.Tag] = append(outputs[h.Tag], out)
	}
	// Events delivered after the last hook returned.
	for {
		select {
		case ev := <-s.Events():
			events = append(events, describe(ev))
			continue
		case <-time.After(50 * time.Millisecond):
		}
		break
	}
	return events, outputs, s
}

func describe(ev Event) string {
	switch e := ev.(type) {
	case *SessionStart:
		return fmt.Sprintf("SessionStart source=%s model=%s", e.Source, e.Model)
	case *UserPromptSubmit:
		return "UserPromptSubmit " + e.Prompt
	case *PreToolUse:
		return fmt.Sprintf("PreToolUse %s %s agent=%s", e.ToolName, e.ToolUseID, e.AgentID)
	case *PermissionRequest:
		return fmt.Sprintf("PermissionRequest %s matched=%s id=%s", e.ToolName, e.ToolUseID, e.ID)
	case *PermissionSettled:
		return fmt.Sprintf("PermissionSettled %s %s", e.Request.ID, e.Outcome)
	case *PostToolUse:
		return fmt.Sprintf("PostToolUse %s %s agent=%s", e.ToolName, e.ToolUseID, e.AgentID)
	case *Stop:
		return "Stop " + e.LastAssistantMessage
	case *SubagentStart:
		return fmt.Sprintf("SubagentStart %s %s", e.AgentID, e.AgentType)
	case *SubagentStop:
		return fmt.Sprintf("SubagentStop %s %s", e.AgentID, filepath.Base(e.AgentTranscriptPath))
	case *SessionEnd:
		return "SessionEnd " + e.Reason
	case *Invalid:
		return fmt.Sprintf("Invalid %s: %s", e.Event, e.Reason)
	case *Other:
		return "Other " + e.Event
	default:
		return fmt.Sprintf("%T", ev)
	}
}

func TestReplayPermissionAnsweredRemotely(t *testing.T) {
	events, outputs, s := replay(t, "r1", func(p *PermissionRequest) {
		if string(p.Suggestions) != `[{"type":"addDirectories","directories":["/home/dev/run/work"],"destination":"session"}]` {
			t.Errorf("suggestions %s", p.Suggestions)
		}
		if err := p.Answer(perm.Answer{Decision: agent.DecisionOnce}); err != nil {
			t.Errorf("answer: %v", err)
		}
	})
	want := []string{
		"SessionStart source=startup model=claude-opus-4-8[1m]",
		"UserPromptSubmit Run echo hi",
		"PreToolUse Bash toolu_fake_3 agent=",
		"PermissionRequest Bash matched=toolu_fake_3 id=perm-1",
		"PermissionSettled perm-1 answered",
		"PostToolUse Bash toolu_fake_3 agent=",
		"Stop Done: the command printed hi.",
		"SessionEnd prompt_input_exit",
	}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("events\n got %q\nwant %q", events, want)
	}
	if got := outputs[EventPermissionRequest]; !reflect.DeepEqual(got, []string{`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`}) {
		t.Fatalf("PermissionRequest output %q", got)
	}
	for _, ev := range []string{EventSessionStart, EventPreToolUse, EventPostToolUse, EventStop} {
		if got := outputs[ev]; len(got) != 1 || got[0] != "" {
			t.Fatalf("%s output %q, want none (no decision)", ev, got)
		}
	}
	id, path := s.Session()
	if id != "cbe164e8-ff82-4bd9-8bc9-0ca70dc52318" || path != "/home/dev/run/home/.claude/projects/-home-dev-run-work/cbe164e8-ff82-4bd9-8bc9-0ca70dc52318.jsonl" {
		t.Fatalf("session %q %q", id, path)
	}
}

func TestReplayPermissionDenied(t *testing.T) {
	_, outputs, _ := replay(t, "r9-pr-deny", func(p *PermissionRequest) {
		if err := p.Answer(perm.Answer{Decision: agent.DecisionReject, Message: "denied from the phone"}); err != nil {
			t.Errorf("answer: %v", err)
		}
	})
	want := `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"denied from the phone"}}}`
	if got := outputs[EventPermissionRequest]; len(got) != 1 || got[0] != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

func TestReplaySubagent(t *testing.T) {
	events, _, _ := replay(t, "r20-subagent", func(p *PermissionRequest) { t.Errorf("unexpected permission request %s", p.ToolName) })
	want := []string{
		"SessionStart source=startup model=claude-opus-4-8[1m]",
		"UserPromptSubmit Use a subagent to run echo hi",
		"PreToolUse Agent toolu_fake_3 agent=",
		"SubagentStart a6788af70d49fc1b9 general-purpose",
		"PreToolUse Bash toolu_fake_4 agent=a6788af70d49fc1b9",
		"PostToolUse Bash toolu_fake_4 agent=a6788af70d49fc1b9",
		"SubagentStop a6788af70d49fc1b9 agent-a6788af70d49fc1b9.jsonl",
		"PostToolUse Agent toolu_fake_3 agent=",
		"Stop Done: the command printed hi.",
		"SessionEnd prompt_input_exit",
	}
	if !reflect.DeepEqual(events, want) {
		t.Fatalf("events\n got %q\nwant %q", events, want)
	}
}

// TestReplayAnsweredInTUI: the person answers No in Claude's dialog, so
// Claude cancels the hook (here: the hook's context), and the request
// settles as hook-gone; a late remote answer is refused.
func TestReplayAnsweredInTUI(t *testing.T) {
	s, getenv := newServer(t)
	hooks := loadHooks(t, "r11-answer-3")
	for _, h := range hooks {
		if h.Tag != EventPermissionRequest {
			if _, err := call(context.Background(), getenv, h.Tag, h.Payload); err != nil {
				t.Fatal(err)
			}
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { _, err := call(ctx, getenv, h.Tag, h.Payload); errc <- err }()
		var p *PermissionRequest
		for p == nil {
			if e, ok := next(t, s).(*PermissionRequest); ok {
				p = e
			}
		}
		if p.ToolUseID != "toolu_fake_3" {
			t.Fatalf("matched %q", p.ToolUseID)
		}
		cancel() // the TUI answered: Claude kills the hook
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled hook: %v", err)
		}
		select {
		case <-p.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("request not settled after the hook went away")
		}
		if p.Outcome() != OutcomeHookGone {
			t.Fatalf("outcome %q", p.Outcome())
		}
		if ev, ok := next(t, s).(*PermissionSettled); !ok || ev.Request != p || ev.Outcome != OutcomeHookGone {
			t.Fatalf("settled event %#v", ev)
		}
		if err := p.Answer(perm.Answer{Decision: agent.DecisionOnce}); !errors.Is(err, ErrHookGone) {
			t.Fatalf("late answer: %v", err)
		}
	}
}

func payload(event string, fields string) []byte {
	return []byte(`{"session_id":"s","transcript_path":"/t.jsonl","cwd":"/w","hook_event_name":"` + event + `"` + fields + `}`)
}

// waitPermission posts a PermissionRequest and returns it as delivered,
// with a channel of the hook's output.
func waitPermission(t *testing.T, s *Server, getenv func(string) string, body []byte) (*PermissionRequest, chan string) {
	t.Helper()
	out := make(chan string, 1)
	go func() {
		o, err := call(context.Background(), getenv, EventPermissionRequest, body)
		if err != nil {
			o = "error: " + err.Error()
		}
		out <- o
	}()
	for {
		if p, ok := next(t, s).(*PermissionRequest); ok {
			return p, out
		}
	}
}

func TestMatchingFIFOAndByInput(t *testing.T) {
	s, getenv := newServer(t)
	pre := func(id, cmd, agentID string) {
		f := `,"tool_name":"Bash","tool_input":{"command":"` + cmd + `"},"tool_use_id":"` + id + `"`
		if agentID != "" {
			f += `,"agent_id":"` + agentID + `"`
		}
		if _, err := call(context.Background(), getenv, EventPreToolUse, payload(EventPreToolUse, f)); err != nil {
			t.Fatal(err)
		}
		next(t, s)
	}
	pre("A", "make", "")
	pre("B", "make", "")
	pre("C", "ls", "")
	pre("D", "make", "sub1")
	pre("E", "rm x", "")
	if _, err := call(context.Background(), getenv, EventPostToolUse, payload(EventPostToolUse, `,"tool_name":"Bash","tool_input":{"command":"rm x"},"tool_use_id":"E"`)); err != nil {
		t.Fatal(err)
	}
	next(t, s)
	cases := []struct {
		fields string
		want   string
	}{
		// Same input written with other spacing and key order matches.
		{`,"tool_name":"Bash","tool_input":{ "command" : "ls" }`, "C"},
		{`,"tool_name":"Bash","tool_input":{"command":"make"}`, "A"},
		{`,"tool_name":"Bash","tool_input":{"command":"make"},"agent_id":"sub1"`, "D"},
		{`,"tool_name":"Bash","tool_input":{"command":"make"}`, "B"},
		{`,"tool_name":"Bash","tool_input":{"command":"make"}`, ""},     // all matched already
		{`,"tool_name":"Bash","tool_input":{"command":"rm x"}`, ""},     // finished (PostToolUse)
		{`,"tool_name":"Write","tool_input":{"command":"ls"}`, ""},      // other tool
		{`,"tool_name":"Bash","tool_input":{"command":"ls","x":1}`, ""}, // other input
	}
	for i, c := range cases {
		p, out := waitPermission(t, s, getenv, payload(EventPermissionRequest, c.fields))
		if p.ToolUseID != c.want {
			t.Errorf("case %d: matched %q, want %q", i, p.ToolUseID, c.want)
		}
		if err := p.Answer(perm.Answer{Decision: agent.DecisionOnce}); err != nil {
			t.Fatal(err)
		}
		<-out
		next(t, s) // PermissionSettled
	}
}

func TestStopForgetsPendingCalls(t *testing.T) {
	s, getenv := newServer(t)
	for _, h := range []struct{ ev, fields string }{
		{EventPreToolUse, `,"tool_name":"Bash","tool_input":{"command":"a"},"tool_use_id":"A"`},
		{EventStop, ``},
	} {
		if _, err := call(context.Background(), getenv, h.ev, payload(h.ev, h.fields)); err != nil {
			t.Fatal(err)
		}
		next(t, s)
	}
	p, out := waitPermission(t, s, getenv, payload(EventPermissionRequest, `,"tool_name":"Bash","tool_input":{"command":"a"}`))
	if p.ToolUseID != "" {
		t.Fatalf("matched %q after the turn ended", p.ToolUseID)
	}
	_ = p.Answer(perm.Answer{Decision: agent.DecisionReject})
	<-out
}

func TestAnswerTranslations(t *testing.T) {
	sugg := `[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"make:*"}],"behavior":"allow","destination":"localSettings"}]`
	cases := []struct {
		name   string
		fields string
		answer perm.Answer
		want   string
	}{
		{"always with suggestions", `,"permission_suggestions":` + sugg, perm.Answer{Decision: agent.DecisionAlways},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedPermissions":` + sugg + `}}}`},
		{"always without suggestions", ``, perm.Answer{Decision: agent.DecisionAlways},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}`},
		{"once with updated input", ``, perm.Answer{Decision: agent.DecisionOnce, UpdatedInput: json.RawMessage(`{"command":"make -n"}`)},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"command":"make -n"}}}}`},
		{"reject default message", ``, perm.Answer{Decision: agent.DecisionReject},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"The user rejected this tool use."}}}`},
		{"abort", ``, perm.Answer{Abort: true},
			`{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"The user aborted the turn.","interrupt":true}}}`},
	}
	s, getenv := newServer(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, out := waitPermission(t, s, getenv, payload(EventPermissionRequest, `,"tool_name":"Bash","tool_input":{"command":"make"}`+c.fields))
			if err := p.Answer(perm.Answer{Decision: "allow"}); !errors.Is(err, agent.ErrUnknownDecision) {
				t.Fatalf("non-canonical decision: %v", err)
			}
			if err := p.Answer(c.answer); err != nil {
				t.Fatal(err)
			}
			if got := <-out; got != c.want {
				t.Fatalf("output\n got %s\nwant %s", got, c.want)
			}
			if ev, ok := next(t, s).(*PermissionSettled); !ok || ev.Outcome != OutcomeAnswered {
				t.Fatalf("settled %#v", ev)
			}
		})
	}
}

func TestFirstAnswerWins(t *testing.T) {
	s, getenv := newServer(t)
	p, out := waitPermission(t, s, getenv, payload(EventPermissionRequest, `,"tool_name":"Bash","tool_input":{}`))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := agent.DecisionOnce
			if i%2 == 1 {
				d = agent.DecisionReject
			}
			errs <- p.Answer(perm.Answer{Decision: d})
		}()
	}
	wg.Wait()
	close(errs)
	won := 0
	for err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrAnswered):
			t.Fatalf("answer: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d answers won", won)
	}
	if got := <-out; !strings.Contains(got, `"behavior"`) {
		t.Fatalf("output %q", got)
	}
}

func TestCloseReleasesWaitingHooks(t *testing.T) {
	s, getenv := newServer(t)
	p, out := waitPermission(t, s, getenv, payload(EventPermissionRequest, `,"tool_name":"Bash","tool_input":{}`))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-out; got != "" {
		t.Fatalf("output %q, want none (Claude's dialog decides)", got)
	}
	if p.Outcome() != OutcomeClosed {
		t.Fatalf("outcome %q", p.Outcome())
	}
	if err := p.Answer(perm.Answer{Decision: agent.DecisionOnce}); !errors.Is(err, ErrHookGone) {
		t.Fatalf("answer after close: %v", err)
	}
	if _, err := call(context.Background(), getenv, EventStop, payload(EventStop, "")); err == nil {
		t.Fatal("hook reached a closed server")
	}
}

func TestSecretRequired(t *testing.T) {
	s, getenv := newServer(t)
	wrong := func(k string) string {
		if k == EnvSecret {
			return strings.Repeat("0", 64)
		}
		return getenv(k)
	}
	_, err := call(context.Background(), wrong, EventStop, payload(EventStop, ""))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong secret: %v", err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/hook/Stop", strings.NewReader(string(payload(EventStop, ""))))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || s.Rejected() != 2 {
		t.Fatalf("no secret: %s, rejected %d", resp.Status, s.Rejected())
	}
	if _, err := call(context.Background(), getenv, EventStop, payload(EventStop, `,"last_assistant_message":"ok"`)); err != nil {
		t.Fatal(err)
	}
	if ev, ok := next(t, s).(*Stop); !ok || ev.LastAssistantMessage != "ok" {
		t.Fatalf("first delivered event %#v: a refused call got through", ev)
	}
}

func TestInvalidPayloads(t *testing.T) {
	s, getenv := newServer(t)
	cases := []struct {
		event string
		body  string
		want  error
	}{
		{EventStop, `{"session_id":`, ErrPayloadSyntax},
		{EventStop, `[1,2]`, ErrPayloadNotObj},
		{EventStop, `{"hook_event_name":"SessionEnd"}`, ErrEventNameClash},
		{EventPreToolUse, `{"tool_input":{}}`, ErrPayloadField},
		{EventPreToolUse, `{"tool_name":"Bash","tool_input":"ls"}`, ErrPayloadField},
		{EventPermissionRequest, `{"tool_name":"Bash"}`, ErrPayloadField},
		{EventStop, `{"stop_hook_active":"yes"}`, ErrPayloadField},
	}
	for _, c := range cases {
		_, err := call(context.Background(), getenv, c.event, []byte(c.body))
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "400") {
			t.Errorf("%s %s: %v", c.event, c.body, err)
			continue
		}
		inv, ok := next(t, s).(*Invalid)
		if !ok || inv.Event != c.event || string(inv.Prefix) != c.body {
			t.Errorf("%s %s: event %#v", c.event, c.body, inv)
		}
		if _, perr := Parse(c.event, []byte(c.body)); !errors.Is(perr, c.want) {
			t.Errorf("Parse(%s, %s) = %v, want %v", c.event, c.body, perr, c.want)
		}
	}
	if _, err := call(context.Background(), getenv, "Pre-Tool", []byte(`{}`)); !errors.Is(err, ErrEventNameFormat) {
		t.Errorf("bad event name: %v", err)
	}
}

func TestUnknownEventKept(t *testing.T) {
	s, getenv := newServer(t)
	body := payload("PreCompact", `,"trigger":"auto"`)
	if _, err := call(context.Background(), getenv, "PreCompact", body); err != nil {
		t.Fatal(err)
	}
	o, ok := next(t, s).(*Other)
	if !ok || o.Event != "PreCompact" || string(o.Raw) != string(body) || o.SessionID != "s" {
		t.Fatalf("event %#v", o)
	}
}

func TestForwardWithoutSession(t *testing.T) {
	err := Forward(context.Background(), EventStop, strings.NewReader("{}"), &bytes.Buffer{}, func(string) string { return "" }, nil)
	if !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("err %v", err)
	}
}

func TestServerOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "example.com:0", "nonsense"} {
		if _, err := NewServer(ServerOptions{Addr: addr}); err == nil {
			t.Errorf("listen on %q accepted", addr)
		}
	}
	s, err := NewServer(ServerOptions{Addr: "[::1]:0"})
	if err == nil {
		s.Close()
	}
}

func TestSettings(t *testing.T) {
	b, err := Settings(SettingsOptions{Command: []string{"/opt/my tools/happy", "hook"}})
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "settings.golden.json"), b)
	var f settingsFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Hooks) != len(Events()) {
		t.Fatalf("%d events registered", len(f.Hooks))
	}
	pr := f.Hooks[EventPermissionRequest][0]
	if pr.Matcher != "*" || pr.Hooks[0].Command != `'/opt/my tools/happy' hook PermissionRequest` || pr.Hooks[0].Timeout != 86400 {
		t.Fatalf("PermissionRequest hook %+v", pr)
	}
	if _, err := Settings(SettingsOptions{}); err == nil {
		t.Fatal("settings without a command")
	}
	dst := filepath.Join(t.TempDir(), "settings.json")
	if err := WriteSettings(dst, SettingsOptions{Command: []string{"/opt/my tools/happy", "hook"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	fi, _ := os.Stat(dst)
	if !bytes.Equal(got, b) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("written file mode %v", fi.Mode())
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/bin/happy": "/usr/bin/happy",
		"a b":            "'a b'",
		"it's":           `'it'\''s'`,
		"":               "''",
		"$HOME":          "'$HOME'",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(EventPreToolUse, []byte(`{"tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t"}`))
	f.Add(EventPermissionRequest, []byte(`{"tool_name":"Bash","tool_input":{},"permission_suggestions":[]}`))
	f.Add("Other", []byte(`{"x":1}`))
	f.Add(EventStop, []byte(`[`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		ev, err := Parse(name, body)
		if (ev == nil) == (err == nil) {
			t.Fatalf("Parse returned %v and %v", ev, err)
		}
		if ev != nil && ev.Base().Event != name {
			t.Fatalf("event %q for name %q", ev.Base().Event, name)
		}
	})
}
