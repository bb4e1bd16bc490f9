package dual

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	xterm "golang.org/x/term"

	"github.com/happy-dev/happy/adapters/claude/hooks"
)

// The test binary plays three programs:
//   - `<test binary> hook <event>`: happy's hook command (hooks.Forward);
//   - with roleEnv=claude and no --input-format: a fake Claude Code
//     terminal UI. It runs its hook commands from --settings the way Claude
//     does (sh -c, the payload on stdin), and reads keys: typed text then
//     Enter is a prompt, answered at once in its transcript
//     (<projects>/<session>.jsonl: the user record, an assistant text
//     "local: <prompt>", turn_duration) followed by the Stop hook; Ctrl-D
//     quits (SessionEnd hook). SIGTERM ends it after its SessionEnd hook.
//   - with roleEnv=claude and --input-format: a fake Claude Code in SDK
//     mode (stream-json). It answers initialize and interrupt, and each
//     user message with system/init, an assistant text "remote: <prompt>"
//     and a result, writing the same turn to the transcript of the resumed
//     session. A prompt containing "hang" gets no result until an
//     interrupt; one containing "crash" makes it exit with code 7 after
//     system/init. With forkEnv set, a resumed session gets a new id
//     (its transcript a copy of the old one), as Claude may do.
//
// Like Claude, both write the transcript from the first prompt on, and
// both refuse --resume of a session whose transcript does not exist
// ("No conversation found", exit code 1).
//
// Every start appends a line "<tui|sdk> <args>" to the file named by
// argvLogEnv.
const (
	roleEnv     = "DUAL_TEST_ROLE"
	projectsEnv = "DUAL_TEST_PROJECTS"
	argvLogEnv  = "DUAL_TEST_ARGV"
	forkEnv     = "DUAL_TEST_FORK"
	// noStartHookEnv: the TUI has not run its SessionStart hook yet (a
	// prompt arrives in the first moments of a session).
	noStartHookEnv = "DUAL_TEST_NO_START_HOOK"
)

// forkedID is the session id the fake gives a resumed session with forkEnv.
const forkedID = "99999999-8888-4777-8666-555555555555"

func runFakeClaude() int {
	args := os.Args[1:]
	sdkMode := false
	for _, a := range args {
		if a == "--input-format" {
			sdkMode = true
		}
	}
	kind := "tui"
	if sdkMode {
		kind = "sdk"
	}
	if f, err := os.OpenFile(os.Getenv(argvLogEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		fmt.Fprintf(f, "%s %s\n", kind, strings.Join(args, " "))
		f.Close()
	}
	if sdkMode {
		return runFakeSDK(args)
	}
	return runFakeTUI(args)
}

// transcriptRecords are the records of one turn as Claude writes them to
// its transcript.
func transcriptRecords(sid, cwd, prompt, answer string, n int) []map[string]any {
	ts := fmt.Sprintf("2026-11-29T15:%02d:00.000Z", n%60)
	return []map[string]any{
		{"type": "user", "promptId": fmt.Sprintf("prompt-%d", n), "uuid": fmt.Sprintf("u-%d", n), "timestamp": ts,
			"sessionId": sid, "cwd": cwd, "message": map[string]any{"role": "user", "content": prompt}},
		{"type": "assistant", "uuid": fmt.Sprintf("a-%d", n), "timestamp": ts, "sessionId": sid, "cwd": cwd, "requestId": fmt.Sprintf("req_%d", n),
			"message": map[string]any{"id": fmt.Sprintf("msg_fake_%d", n), "type": "message", "role": "assistant", "model": "claude-opus-4-8",
				"content": []any{map[string]any{"type": "text", "text": answer}}, "stop_reason": "end_turn",
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}},
		{"type": "system", "subtype": "turn_duration", "durationMs": 100, "uuid": fmt.Sprintf("d-%d", n), "timestamp": ts, "sessionId": sid},
	}
}

// appendRecords appends records to a transcript and returns how many lines
// it holds now.
func appendRecords(path string, recs []map[string]any) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	for _, r := range recs {
		b, _ := json.Marshal(r)
		_, _ = f.Write(append(b, '\n'))
	}
}

// turnsIn counts the turns a transcript holds (so message ids stay unique
// across runs).
func turnsIn(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte(`"turn_duration"`))
}

type fakeTUI struct {
	hooks      map[string]string
	sessionID  string
	transcript string
	cwd        string
}

func runFakeTUI(args []string) int {
	c := &fakeTUI{hooks: map[string]string{}}
	source := "startup"
	var settings string
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--settings":
			settings = args[i+1]
		case "--session-id":
			c.sessionID = args[i+1]
		case "--resume":
			c.sessionID, source = args[i+1], "resume"
		}
	}
	if err := c.readSettings(settings); err != nil {
		fmt.Printf("FAKE SETTINGS ERROR %v\r\n", err)
		return 3
	}
	if c.sessionID == "" {
		c.sessionID = "00000000-0000-4000-8000-000000000000"
	}
	c.cwd, _ = os.Getwd()
	c.transcript = filepath.Join(os.Getenv(projectsEnv), c.sessionID+".jsonl")
	if fi, err := os.Stat(c.transcript); source == "resume" && (err != nil || fi.Size() == 0) {
		fmt.Printf("No conversation found with session ID: %s\r\n", c.sessionID)
		return 1
	}
	if _, err := xterm.MakeRaw(0); err != nil { // as Claude's TUI does
		fmt.Printf("FAKE RAW ERROR %v\r\n", err)
		return 3
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	keys := make(chan byte, 64)
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			b, err := r.ReadByte()
			if err != nil {
				close(keys)
				return
			}
			keys <- b
		}
	}()
	if os.Getenv(noStartHookEnv) == "" {
		c.hook(hooks.EventSessionStart, map[string]any{"source": source, "model": "claude-opus-4-8"})
	}
	fmt.Printf("FAKE TUI READY %s\r\n", c.sessionID)
	var line []byte
	for {
		select {
		case <-term:
			c.hook(hooks.EventSessionEnd, map[string]any{"reason": "other"})
			return 0
		case k, ok := <-keys:
			if !ok {
				return 4
			}
			switch k {
			case 0x04:
				c.hook(hooks.EventSessionEnd, map[string]any{"reason": "prompt_input_exit"})
				fmt.Print("FAKE TUI BYE\r\n")
				return 0
			case '\r':
				prompt := string(line)
				line = nil
				c.hook(hooks.EventUserPromptSubmit, map[string]any{"prompt": prompt})
				n := turnsIn(c.transcript) + 1
				appendRecords(c.transcript, transcriptRecords(c.sessionID, c.cwd, prompt, "local: "+prompt, n))
				c.hook(hooks.EventStop, map[string]any{"last_assistant_message": "local: " + prompt})
				fmt.Printf("FAKE TUI ANSWERED %s\r\n", prompt)
			default:
				line = append(line, k)
			}
		}
	}
}

func (c *fakeTUI) readSettings(path string) error {
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

// hook runs the command for event with the payload and waits for it.
func (c *fakeTUI) hook(event string, fields map[string]any) {
	payload := map[string]any{"session_id": c.sessionID, "transcript_path": c.transcript, "cwd": c.cwd, "hook_event_name": event}
	for k, v := range fields {
		payload[k] = v
	}
	body, _ := json.Marshal(payload)
	cmd := exec.Command("sh", "-c", c.hooks[event])
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Printf("FAKE HOOK %s FAILED %v %s\r\n", event, err, out)
	}
}

func runFakeSDK(args []string) int {
	var sid string
	resume := false
	for i := 0; i+1 < len(args); i++ {
		switch args[i] {
		case "--resume":
			sid, resume = args[i+1], true
		case "--session-id":
			sid = args[i+1]
		}
	}
	projects := os.Getenv(projectsEnv)
	transcript := filepath.Join(projects, sid+".jsonl")
	if fi, err := os.Stat(transcript); resume && (err != nil || fi.Size() == 0) {
		// As Claude: it exits once the first prompt asks for the session.
		_, _ = bufio.NewReader(os.Stdin).ReadBytes('\n')
		fmt.Fprintf(os.Stderr, "No conversation found with session ID: %s\n", sid)
		return 1
	}
	if os.Getenv(forkEnv) != "" && resume {
		old, _ := os.ReadFile(transcript)
		sid = forkedID
		transcript = filepath.Join(projects, sid+".jsonl")
		_ = os.WriteFile(transcript, old, 0o600)
	}
	cwd, _ := os.Getwd()
	out := bufio.NewWriter(os.Stdout)
	write := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = out.Write(append(b, '\n'))
		_ = out.Flush()
	}
	respond := func(id string) {
		write(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": id, "response": map[string]any{}}})
	}
	result := func(subtype string, isErr bool) {
		write(map[string]any{"type": "result", "subtype": subtype, "is_error": isErr, "duration_ms": 10, "num_turns": 1,
			"session_id": sid, "total_cost_usd": 0.001, "usage": map[string]any{"input_tokens": 10, "output_tokens": 5}})
	}
	hanging := false
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0 // end of input: the session is over
		}
		var m struct {
			Type      string `json:"type"`
			RequestID string `json:"request_id"`
			Request   struct {
				Subtype string `json:"subtype"`
			} `json:"request"`
			Message struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			fmt.Fprintf(os.Stderr, "fake sdk: bad input %q\n", line)
			return 3
		}
		switch {
		case m.Type == "control_request" && m.Request.Subtype == "initialize":
			respond(m.RequestID)
		case m.Type == "control_request" && m.Request.Subtype == "interrupt":
			respond(m.RequestID)
			if hanging {
				hanging = false
				write(map[string]any{"type": "user", "session_id": sid, "parent_tool_use_id": nil,
					"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "[Request interrupted by user]"}}}})
				result("error_during_execution", true)
			}
		case m.Type == "user":
			prompt := ""
			if len(m.Message.Content) > 0 {
				prompt = m.Message.Content[0].Text
			}
			n := turnsIn(transcript) + 1
			write(map[string]any{"type": "system", "subtype": "init", "session_id": sid, "cwd": cwd, "model": "claude-opus-4-8", "permissionMode": "default"})
			if strings.Contains(prompt, "crash") {
				return 7
			}
			answer := "remote: " + prompt
			write(map[string]any{"type": "assistant", "session_id": sid, "parent_tool_use_id": nil, "uuid": fmt.Sprintf("ra-%d", n),
				"message": map[string]any{"id": fmt.Sprintf("msg_fake_%d", n), "type": "message", "role": "assistant", "model": "claude-opus-4-8",
					"content": []any{map[string]any{"type": "text", "text": answer}}, "stop_reason": nil,
					"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}})
			appendRecords(transcript, transcriptRecords(sid, cwd, prompt, answer, n))
			if strings.Contains(prompt, "hang") {
				hanging = true
				continue
			}
			result("success", false)
		default:
			fmt.Fprintf(os.Stderr, "fake sdk: unexpected %s\n", line)
		}
	}
}

// forwardHook runs `hook <event>` as happy's hook command does.
func forwardHook(event string) int {
	if err := hooks.Forward(context.Background(), event, os.Stdin, os.Stdout, os.Getenv, nil); err != nil {
		fmt.Fprintln(os.Stderr, "hook:", err)
		return 1
	}
	return 0
}
