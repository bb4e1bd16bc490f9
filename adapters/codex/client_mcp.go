package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
)

// MCPProtocolVersion is the MCP protocol version happy offers to `codex
// mcp-server`.
const MCPProtocolVersion = "2025-06-18"

// ErrNotCodexMCP: the MCP server does not offer Codex's tools.
var ErrNotCodexMCP = errors.New("codex: not a codex mcp-server")

// turnCallCap bounds the wait for a tools/call response; the turn itself
// is bounded by the idle watchdog, and the wait ends as soon as the turn
// ends (B13: a reply that never comes must not hold anything).
const turnCallCap = 24 * time.Hour

func (c *Client) mcpHandshake(ctx context.Context) error {
	init := map[string]any{
		"protocolVersion": MCPProtocolVersion,
		"capabilities":    map[string]any{"elicitation": map[string]any{}},
		"clientInfo":      map[string]string{"name": c.opts.ClientName, "version": c.opts.ClientVersion},
	}
	if err := c.conn.Call(ctx, "initialize", init, nil); err != nil {
		return fmt.Errorf("codex: initialize: %w", err)
	}
	if err := c.conn.Notify(ctx, "notifications/initialized", struct{}{}); err != nil {
		return fmt.Errorf("codex: initialized: %w", err)
	}
	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := c.conn.Call(ctx, "tools/list", struct{}{}, &tools); err != nil {
		return fmt.Errorf("codex: tools/list: %w", err)
	}
	have := map[string]bool{}
	for _, t := range tools.Tools {
		have[t.Name] = true
	}
	if !have["codex"] || !have["codex-reply"] {
		return fmt.Errorf("%w: tools/list has no codex and codex-reply", ErrNotCodexMCP)
	}
	if c.opts.ResumeThreadID != "" {
		c.mu.Lock()
		c.thread = c.opts.ResumeThreadID
		c.firstCall = false
		c.mu.Unlock()
	}
	return nil
}

// mcpStartTurn sends the prompt as a tools/call of codex (first prompt) or
// codex-reply (later ones) and returns once it is sent; the turn ends on
// task_complete / turn_aborted or on the call's response, whichever comes
// first.
func (c *Client) mcpStartTurn(ctx context.Context, p Prompt) error {
	if len(p.Images) > 0 {
		c.opts.Logger.Warn().Int("images", len(p.Images)).Msg("codex mcp-server takes text prompts only; images not sent")
	}
	c.mu.Lock()
	first, thread := c.firstCall, c.thread
	c.firstCall = false
	c.mu.Unlock()
	var params map[string]any
	if first {
		approval, sandbox := c.opts.Mode.Policy()
		args := map[string]any{"prompt": p.Text, "approval-policy": approval, "sandbox": sandbox}
		if c.opts.Cwd != "" {
			args["cwd"] = c.opts.Cwd
		}
		if c.opts.Model != "" {
			args["model"] = c.opts.Model
		}
		params = map[string]any{"name": "codex", "arguments": args}
	} else {
		params = map[string]any{"name": "codex-reply", "arguments": map[string]any{"prompt": p.Text, "threadId": thread, "conversationId": thread}}
	}
	req, err := c.conn.Dispatch(ctx, "tools/call", params)
	if err != nil {
		c.turnDone("")
		return fmt.Errorf("codex: tools/call: %w", err)
	}
	wctx, stop := context.WithCancel(context.Background())
	c.mu.Lock()
	c.turnReq, c.turnStop = req, stop
	c.resetWatchdogLocked()
	c.mu.Unlock()
	go func() {
		var res struct {
			Structured struct {
				ThreadID string `json:"threadId"`
			} `json:"structuredContent"`
		}
		err := req.Wait(wctx, turnCallCap, &res)
		c.mu.Lock()
		if res.Structured.ThreadID != "" && c.thread == "" {
			c.thread = res.Structured.ThreadID
		}
		mine := c.turnReq == req
		c.mu.Unlock()
		if errors.Is(err, context.Canceled) {
			return // the turn ended first; a late reply is discarded
		}
		if err != nil {
			c.opts.Logger.Warn().Err(err).Msg("codex tools/call")
		}
		if mine {
			c.turnDone("")
		}
	}()
	return nil
}

func (c *Client) mcpHandle(ctx context.Context, in *jsonrpc.Incoming) {
	if in.Notif {
		if in.Method != "codex/event" {
			return
		}
		var ev struct {
			Meta struct {
				ThreadID string `json:"threadId"`
			} `json:"_meta"`
			Msg struct {
				Type      string `json:"type"`
				ThreadID  string `json:"thread_id"`
				SessionID string `json:"session_id"`
			} `json:"msg"`
		}
		_ = json.Unmarshal(in.Params, &ev)
		c.mu.Lock()
		if c.thread == "" {
			for _, id := range []string{ev.Msg.ThreadID, ev.Msg.SessionID, ev.Meta.ThreadID} {
				if id != "" {
					c.thread = id
					break
				}
			}
		}
		c.resetWatchdogLocked()
		c.mu.Unlock()
		switch ev.Msg.Type {
		case "task_complete", "turn_complete", "turn_aborted":
			c.turnDone("")
		}
		return
	}
	if in.Method != "elicitation/create" {
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not support "+in.Method)
		return
	}
	var p struct {
		CallID string `json:"codex_call_id"`
	}
	_ = json.Unmarshal(in.Params, &p)
	if p.CallID == "" {
		_ = in.Reply(ctx, map[string]string{"decision": "denied"})
		return
	}
	c.mu.Lock()
	c.pending[p.CallID] = append(c.pending[p.CallID], &pending{in: in, method: in.Method})
	c.resetWatchdogLocked()
	c.mu.Unlock()
}

// MinAppServerVersion is the first Codex whose app-server speaks the v2
// thread/turn protocol with item notifications.
const MinAppServerVersion = "0.60.0"

// ErrVersion: `codex --version` failed or printed no version.
var ErrVersion = errors.New("codex: cannot tell the installed version")

// ChooseProtocol runs `binary --version` (at most 10 s) and picks
// app-server for Codex 0.60.0 and later (v2 threads and turns), mcp below.
// It returns the version it read ("0.171.0"). Errors: ErrVersion.
func ChooseProtocol(ctx context.Context, binary string) (Protocol, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s --version: %w", ErrVersion, binary, err)
	}
	return protocolForVersion(string(out))
}

// protocolForVersion picks the protocol from `codex --version` output
// ("codex-cli 0.171.0").
func protocolForVersion(out string) (Protocol, string, error) {
	ver, v, ok := findVersion(out)
	if !ok {
		return "", "", fmt.Errorf("%w: %q", ErrVersion, firstLine(out, 80))
	}
	_, min, _ := findVersion(MinAppServerVersion)
	for i := range v {
		if v[i] != min[i] {
			if v[i] > min[i] {
				return ProtocolAppServer, ver, nil
			}
			return ProtocolMCP, ver, nil
		}
	}
	return ProtocolAppServer, ver, nil
}

// findVersion finds the first "X.Y.Z" (decimal numbers) in s.
func findVersion(s string) (string, [3]int, bool) {
	for start := 0; start < len(s); start++ {
		if s[start] < '0' || s[start] > '9' || (start > 0 && s[start-1] >= '0' && s[start-1] <= '9') {
			continue
		}
		var v [3]int
		i, ok := start, true
		for part := 0; part < 3 && ok; part++ {
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i || j-i > 9 {
				ok = false
				break
			}
			v[part], _ = strconv.Atoi(s[i:j])
			i = j
			if part < 2 {
				if i >= len(s) || s[i] != '.' {
					ok = false
					break
				}
				i++
			}
		}
		if ok {
			return s[start:i], v, true
		}
	}
	return "", [3]int{}, false
}
