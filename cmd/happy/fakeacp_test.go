package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fake ACP agent: the test binary run with fakeACPEnv naming its state
// folder (calls: the methods it got, one a line; history.json: the turns
// of its one session, which session/load replays, mostly after its
// answer) and fakeACPCapsEnv
// saying how it continues a session: load, resume (both advertised) or
// none.
const (
	fakeACPEnv     = "HAPPY_FAKE_ACP_DIR"
	fakeACPCapsEnv = "HAPPY_FAKE_ACP_CAPS"
	fakeACPSession = "acp-sess-1"
)

// fakeACP writes the fake ACP agent's wrapper script and returns its path
// and its state folder.
func fakeACP(t *testing.T, caps string) (path, dir string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, "fake-acp")
	script := fmt.Sprintf("#!/bin/sh\n%s=%q %s=%q exec %q \"$@\"\n", fakeACPEnv, dir, fakeACPCapsEnv, caps, exe)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, dir
}

type fakeACPTurn struct{ Prompt, Answer string }

// runFakeACP serves one ACP connection on stdio, one request at a time.
func runFakeACP(dir, caps string) int {
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	reply := func(id json.RawMessage, result any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	fail := func(id json.RawMessage, code int, msg string) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	}
	update := func(u map[string]any) {
		send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": fakeACPSession, "update": u}})
	}
	chunk := func(kind, text string) {
		update(map[string]any{"sessionUpdate": kind, "content": map[string]any{"type": "text", "text": text}})
	}
	histPath := filepath.Join(dir, "history.json")
	var history []fakeACPTurn
	if b, err := os.ReadFile(histPath); err == nil {
		_ = json.Unmarshal(b, &history)
	}
	// hung is the id of a prompt the agent went silent in ("hang…"
	// prompts), answered only when happy cancels the turn.
	var hung json.RawMessage
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				SessionID string `json:"sessionId"`
				Prompt    []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.Method == "" {
			continue // a response
		}
		if m.ID == nil {
			if m.Method == "session/cancel" && hung != nil {
				appendLine(filepath.Join(dir, "calls"), m.Method)
				reply(hung, map[string]any{"stopReason": "cancelled"})
				hung = nil
			}
			continue
		}
		appendLine(filepath.Join(dir, "calls"), m.Method)
		switch m.Method {
		case "initialize":
			sc := map[string]any{}
			if caps == "resume" {
				sc["resume"] = map[string]any{}
			}
			reply(m.ID, map[string]any{"protocolVersion": 1, "agentInfo": map[string]any{"name": "fake-acp", "version": "1.0"},
				"agentCapabilities": map[string]any{"loadSession": caps == "load" || caps == "resume", "sessionCapabilities": sc}})
		case "session/new":
			reply(m.ID, map[string]any{"sessionId": fakeACPSession})
		case "session/load", "session/resume":
			if m.Params.SessionID != fakeACPSession {
				fail(m.ID, -32002, "no session "+m.Params.SessionID)
				continue
			}
			if m.Method != "session/load" {
				reply(m.ID, map[string]any{})
				continue
			}
			// Like Gemini CLI: the answer comes after the replay's first
			// update, the rest of the replay after the answer.
			for i, t := range history {
				chunk("user_message_chunk", t.Prompt)
				if i == 0 {
					reply(m.ID, map[string]any{})
				}
				chunk("agent_message_chunk", t.Answer)
			}
			if len(history) == 0 {
				reply(m.ID, map[string]any{})
			}
		case "session/prompt":
			var text []string
			for _, b := range m.Params.Prompt {
				text = append(text, b.Text)
			}
			if p := strings.Join(text, ""); strings.HasPrefix(p, "hang") {
				// Goes silent mid-turn: after some text, or inside a
				// running tool ("hang in a tool").
				chunk("agent_message_chunk", "Looking")
				if strings.Contains(p, "in a tool") {
					update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "make", "kind": "execute", "status": "in_progress", "rawInput": map[string]any{"command": "make"}})
				}
				hung = m.ID
				continue
			}
			if p := strings.Join(text, ""); strings.HasPrefix(p, "long ") {
				longTurn(dir, p, update, chunk)
				reply(m.ID, map[string]any{"stopReason": "end_turn"})
				appendLine(filepath.Join(dir, "calls"), "finished")
				continue
			}
			t := fakeACPTurn{Prompt: strings.Join(text, ""), Answer: "Answer to " + strings.Join(text, "")}
			chunk("agent_message_chunk", t.Answer)
			history = append(history, t)
			b, _ := json.Marshal(history)
			_ = os.WriteFile(histPath, b, 0o644)
			reply(m.ID, map[string]any{"stopReason": "end_turn"})
		default:
			fail(m.ID, -32601, "fake acp: "+m.Method)
		}
	}
	return 0
}

// longTurn plays a "long N" prompt: N steps, each a shell tool call that
// starts and completes with its output ("step I" / "out I"), then the
// answer "finished N steps". After nine tenths of the steps it creates
// the file at90 in dir and waits (at most two minutes) for a file go
// there, so a fault test can act at that point of the turn; when dir holds
// a file hold, it waits for a file end there before the answer too.
func longTurn(dir, prompt string, update func(map[string]any), chunk func(kind, text string)) {
	n, _ := strconv.Atoi(strings.TrimPrefix(prompt, "long "))
	for i := 1; i <= n; i++ {
		if i == n*9/10+1 {
			_ = os.WriteFile(filepath.Join(dir, "at90"), nil, 0o600)
			waitFile(filepath.Join(dir, "go"))
		}
		id := fmt.Sprintf("call-%d", i)
		update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": id, "title": fmt.Sprintf("step %d", i),
			"kind": "execute", "status": "in_progress", "rawInput": map[string]any{"command": fmt.Sprintf("echo %d", i)}})
		update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": fmt.Sprintf("out %d", i)}}}})
	}
	if _, err := os.Stat(filepath.Join(dir, "hold")); err == nil {
		waitFile(filepath.Join(dir, "end"))
	}
	chunk("agent_message_chunk", fmt.Sprintf("finished %d steps", n))
}

// waitFile waits (at most two minutes) for the file path to exist.
func waitFile(path string) {
	for range 24000 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}
