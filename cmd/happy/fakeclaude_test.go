//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// The test binary also plays two programs, chosen in TestMain:
//   - `<test binary> hook <event>`: happy's hook command, as the hooks of
//     Claude's local mode run it (happy's own executable is the test
//     binary when happy runs inside a test);
//   - with fakeClaudeEnv set (by the wrapper script fakeClaude writes): a
//     fake Claude Code. Every command line goes to <dir>/calls. In SDK mode
//     (no --settings) it speaks stream-json: it answers initialize, and
//     each prompt (after a Bash call `echo hi` and its result when the
//     prompt says "tool") with "Answer to PROMPT", plus " (after: P1; P2)" naming
//     the prompts its session (--resume ID, else a fixed new id) had
//     before, which it keeps in <dir>/history-<id>. In local mode
//     (--settings, the hook settings of happy) it runs its hooks as Claude
//     does; Enter starts a turn: it writes testdata/claude/r1.session.jsonl
//     up to the tool call as its transcript, starts `sleep 300` in its own
//     process group (the running tool) and asks permission with the
//     PermissionRequest hook. SIGTERM ends it after its SessionEnd hook.
const (
	fakeClaudeEnv     = "HAPPY_TEST_FAKE_CLAUDE"
	fakeClaudeDataEnv = "HAPPY_TEST_FAKE_CLAUDE_DATA"
)

func TestMain(m *testing.M) {
	if len(os.Args) >= 2 && os.Args[1] == "hook" {
		os.Exit(run(os.Args[1:], newFactory(os.Stdin, os.Stdout, os.Stderr, os.Getenv)))
	}
	if dir := os.Getenv(fakeACPEnv); dir != "" {
		os.Exit(runFakeACP(dir, os.Getenv(fakeACPCapsEnv)))
	}
	if dir := os.Getenv(fakeClaudeEnv); dir != "" {
		os.Exit(runFakeClaude(dir, os.Args[1:]))
	}
	// The Socket.IO library of the in-process relays keeps timer
	// goroutines of its own after the relays close.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent(),
		goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetTimeout.func1"),
		goleak.IgnoreTopFunction("github.com/zishang520/socket.io/v3/pkg/utils.SetInterval.func1"))
}

// fakeClaude writes the fake Claude's wrapper script and returns its path
// and its state folder.
func fakeClaude(t *testing.T) (path, dir string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := filepath.Abs(filepath.Join("testdata", "claude", "r1.session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, "claude")
	script := fmt.Sprintf("#!/bin/sh\n%s=%q %s=%q exec %q \"$@\"\n", fakeClaudeEnv, dir, fakeClaudeDataEnv, data, exe)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

func runFakeClaude(dir string, args []string) int {
	appendLine(filepath.Join(dir, "calls"), strings.Join(args, " "))
	var settings, sid, resume string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--settings":
			settings = args[i+1]
		case "--session-id":
			sid = args[i+1]
		case "--resume":
			resume = args[i+1]
		}
	}
	if resume != "" {
		sid = resume
	}
	if sid == "" {
		sid = "5e55f0c1-0000-4000-8000-000000000001"
	}
	if settings != "" {
		return fakeLocal(dir, settings, sid, resume != "")
	}
	return fakeSDK(dir, sid)
}

func appendLine(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}

func readLinesOf(path string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// fakeSDK is the fake's SDK mode (stream-json on stdin and stdout).
func fakeSDK(dir, sid string) int {
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(b)
		out.WriteByte('\n')
		out.Flush()
	}
	cwd, _ := os.Getwd()
	hist := filepath.Join(dir, "history-"+sid)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; in.Scan(); n++ {
		var msg struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Message   struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil {
			continue
		}
		switch msg.Type {
		case "control_request":
			send(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": msg.RequestID, "response": map[string]any{}}})
		case "user":
			var text string
			if json.Unmarshal(msg.Message.Content, &text) != nil {
				var blocks []struct{ Type, Text string }
				_ = json.Unmarshal(msg.Message.Content, &blocks)
				for _, b := range blocks {
					if b.Type == "text" {
						text += b.Text
					}
				}
			}
			answer := "Answer to " + text
			if before := readLinesOf(hist); len(before) > 0 {
				answer += " (after: " + strings.Join(before, "; ") + ")"
			}
			appendLine(hist, text)
			usage := map[string]any{"input_tokens": 1, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
			send(map[string]any{"type": "system", "subtype": "init", "cwd": cwd, "session_id": sid, "tools": []string{"Bash"},
				"mcp_servers": []any{}, "model": "claude-fake-1", "permissionMode": "default"})
			if strings.Contains(text, "tool") {
				// A Bash call and its result before the answer.
				call := fmt.Sprintf("toolu_sdk_%d", n)
				send(map[string]any{"type": "assistant", "message": map[string]any{"id": fmt.Sprintf("msg_tool_%d", n), "type": "message", "role": "assistant",
					"model": "claude-fake-1", "content": []any{map[string]any{"type": "tool_use", "id": call, "name": "Bash", "input": map[string]any{"command": "echo hi"}}},
					"stop_reason": nil, "usage": usage}, "parent_tool_use_id": nil, "session_id": sid, "uuid": fmt.Sprintf("00000000-0000-4000-8001-%012d", n)})
				send(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call, "content": "hi", "is_error": false}}},
					"parent_tool_use_id": nil, "session_id": sid, "uuid": fmt.Sprintf("00000000-0000-4000-8002-%012d", n)})
			}
			send(map[string]any{"type": "assistant", "message": map[string]any{"id": fmt.Sprintf("msg_fake_%d", n), "type": "message", "role": "assistant",
				"model": "claude-fake-1", "content": []any{map[string]any{"type": "text", "text": answer}}, "stop_reason": nil, "usage": usage},
				"parent_tool_use_id": nil, "session_id": sid, "uuid": fmt.Sprintf("00000000-0000-4000-8000-%012d", n)})
			send(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 1, "result": answer,
				"stop_reason": "end_turn", "session_id": sid, "total_cost_usd": 0, "usage": usage})
		}
	}
	return 0
}

// fakeLocal is the fake's local (terminal) mode.
func fakeLocal(dir, settings, sid string, resumed bool) int {
	b, err := os.ReadFile(settings)
	if err != nil {
		fmt.Printf("FAKE SETTINGS ERROR %v\r\n", err)
		return 3
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		fmt.Printf("FAKE SETTINGS ERROR %v\r\n", err)
		return 3
	}
	cwd, _ := os.Getwd()
	transcript := filepath.Join(dir, sid+".jsonl")
	hook := func(event string, fields map[string]any) string {
		payload := map[string]any{"session_id": sid, "transcript_path": transcript, "cwd": cwd, "hook_event_name": event}
		for k, v := range fields {
			payload[k] = v
		}
		body, _ := json.Marshal(payload)
		var cmdline string
		if g := s.Hooks[event]; len(g) > 0 && len(g[0].Hooks) > 0 {
			cmdline = g[0].Hooks[0].Command
		}
		if cmdline == "" {
			return ""
		}
		cmd := exec.Command("sh", "-c", cmdline)
		cmd.Stdin = bytes.NewReader(body)
		var out bytes.Buffer
		cmd.Stdout = &out
		_ = cmd.Run()
		return out.String()
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	keys := make(chan byte, 16)
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			k, err := r.ReadByte()
			if err != nil {
				close(keys)
				return
			}
			keys <- k
		}
	}()
	source := "startup"
	if resumed {
		source = "resume"
	}
	hook("SessionStart", map[string]any{"source": source, "model": "claude-opus-4-8[1m]"})
	fmt.Print("FAKE READY\r\n")
	decided := make(chan string, 1)
	for {
		select {
		case <-term:
			hook("SessionEnd", map[string]any{"reason": "other"})
			return 0
		case d := <-decided:
			fmt.Printf("FAKE HOOK DECISION %s\r\n", d)
		case k, ok := <-keys:
			if !ok {
				return 4
			}
			if k != '\r' && k != '\n' { // Enter (a cooked terminal makes it \n)
				continue
			}
			lines := readLinesOf(os.Getenv(fakeClaudeDataEnv))
			if len(lines) < 8 {
				fmt.Print("FAKE DATA ERROR\r\n")
				return 3
			}
			hook("UserPromptSubmit", map[string]any{"prompt": "Run echo hi", "permission_mode": "default"})
			for _, l := range lines[:8] {
				appendLine(transcript, l)
			}
			in := map[string]any{"command": "echo hi > hi.txt", "description": "Print hi"}
			hook("PreToolUse", map[string]any{"tool_name": "Bash", "tool_input": in, "tool_use_id": "toolu_fake_3"})
			tool := exec.Command("sleep", "300")
			if err := tool.Start(); err != nil {
				fmt.Printf("FAKE TOOL ERROR %v\r\n", err)
				return 3
			}
			appendLine(filepath.Join(dir, "tool.pid"), fmt.Sprint(tool.Process.Pid))
			go func() {
				out := hook("PermissionRequest", map[string]any{"tool_name": "Bash", "tool_input": in})
				decided <- strings.TrimSpace(out)
			}()
			fmt.Print("FAKE TOOL RUNNING\r\n")
		}
	}
}
