package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/claude/hooks"
	"github.com/happy-dev/happy/adapters/claude/perm"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/waitfor"
)

// runHook runs `happy hook ARGS…` in-process with payload on stdin and env.
func runHook(t *testing.T, env map[string]string, payload string, args ...string) (int, string, string) {
	t.Helper()
	env["HAPPY_HOME_DIR"] = t.TempDir()
	var out, errb bytes.Buffer
	f := newFactory(strings.NewReader(payload), &out, &errb, func(k string) string { return env[k] })
	code := run(append([]string{"hook"}, args...), f)
	return code, out.String(), errb.String()
}

func hookEnv(s *hooks.Server) map[string]string {
	env := map[string]string{}
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

func TestHookCommandForwardsAndPrintsAnswer(t *testing.T) {
	s, err := hooks.NewServer(hooks.ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		for ev := range s.Events() {
			if p, ok := ev.(*hooks.PermissionRequest); ok {
				_ = p.Answer(perm.Answer{Decision: agent.DecisionReject, Message: "not now"})
			}
		}
	}()
	payload := `{"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}`
	code, stdout, stderr := runHook(t, hookEnv(s), payload, "PermissionRequest")
	want := `{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"not now"}}}`
	if code != exitOK || stdout != want || stderr != "" {
		t.Fatalf("happy hook = (%d, %q, %q), want (0, %q, \"\")", code, stdout, stderr, want)
	}
	start := `{"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"}`
	if code, stdout, _ := runHook(t, hookEnv(s), start, "SessionStart"); code != exitOK || stdout != "" {
		t.Fatalf("SessionStart = (%d, %q)", code, stdout)
	}
	waitfor.Poll{Every: 10 * time.Millisecond, Within: 5 * time.Second}.Until(t, "the session id learned from SessionStart", func() bool {
		id, _ := s.Session()
		return id == "s1"
	})
}

// Exit code 2 would block the tool in a PreToolUse hook: every failure
// exits 1.
func TestHookCommandFailuresExitOne(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"outside a session", map[string]string{}, []string{"Stop"}, "no happy session"},
		{"no event", map[string]string{}, nil, "usage: happy hook EVENT"},
		{"two events", map[string]string{}, []string{"Stop", "Start"}, "usage: happy hook EVENT"},
		{"flag-like event", map[string]string{}, []string{"--bogus"}, "no happy session"},
		{"server gone", map[string]string{hooks.EnvURL: "http://127.0.0.1:1", hooks.EnvSecret: "x"}, []string{"Stop"}, "connection refused"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runHook(t, c.env, "{}", c.args...)
			if code != exitFailed || stdout != "" || !strings.Contains(stderr, c.want) {
				t.Fatalf("happy hook %v = (%d, %q, %q), want exit 1 mentioning %q", c.args, code, stdout, stderr, c.want)
			}
		})
	}
}
