// Package mcp runs Codex through `codex mcp-server` (Codex up to 0.153:
// MCP over stdio): each prompt is a tools/call of the "codex" tool (the
// first) or "codex-reply" (the next ones), progress comes as codex/event
// notifications, approvals as elicitation/create requests. What Codex does
// is published as agent events, decoded by codex.MCPDecoder (the decoder
// `happy replay` uses).
//
// A turn ends on task_complete / turn_complete / turn_aborted or on its
// tools/call response, whichever comes first; a response for a turn
// already ended is discarded (regression B13: a reply that never comes
// must not hold anything). An interrupted turn (notifications/cancelled) is
// given up InterruptGrace later. mcp-server cannot be asked about a turn,
// so there is no lost-turn-end check; a silent turn is the session
// runner's idle watch's to interrupt.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/codex/internal/live"
	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
)

// ProtocolVersion is the MCP protocol version happy offers to `codex
// mcp-server`.
const ProtocolVersion = "2025-06-18"

// Errors callers branch on.
var (
	// ErrClosed: the session is closed or Codex exited.
	ErrClosed = rpcagent.ErrClosed
	// ErrNoPendingRequest: an answer for a call that waits for none.
	ErrNoPendingRequest = rpcagent.ErrNoPendingRequest
	// ErrNotCodexMCP: the MCP server does not offer Codex's tools.
	ErrNotCodexMCP = errors.New("codex: not a codex mcp-server")
	// ErrCannotResume: Options.ResumeThreadID given to Start. mcp-server's
	// codex-reply finds only the threads of its own process, and its codex
	// tool always starts an empty thread: a thread of an earlier process
	// cannot be continued.
	ErrCannotResume = errors.New("codex mcp-server (Codex ≤ 0.153) cannot resume a thread in a new process: update Codex, or start a new session")
)

// turnCallCap bounds the wait for a tools/call response; the turn itself
// is bounded by the runner's idle watch, and the wait ends as soon as the turn
// ends.
const turnCallCap = 24 * time.Hour

// Client is a live `codex mcp-server` session. Safe for concurrent use.
type Client struct {
	*live.Core

	mu        sync.Mutex
	firstCall bool               // the next prompt is the first tools/call
	turnReq   *jsonrpc.Pending   // the tools/call of the running turn
	turnStop  context.CancelFunc // stops waiting for it

	// approvals names the call of each elicitation as the decoder does;
	// only Handle uses it (the connection calls Handle one frame at a time).
	approvals codex.MCPApprovals
}

var _ live.Protocol = (*Client)(nil)

// Start starts `codex mcp-server` and checks it offers Codex's tools.
// Cancelling ctx stops Codex. Errors: ErrCannotResume (with
// Options.ResumeThreadID, before anything starts), the start error of the
// binary, ErrNotCodexMCP, or the handshake's error (the process is stopped
// then).
func Start(ctx context.Context, opts codex.Options) (*Client, error) {
	if opts.ResumeThreadID != "" {
		return nil, ErrCannotResume
	}
	c := newClient(opts)
	if err := c.Open(ctx, "mcp-server", nil, c.handshake, c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

// connect runs a session over an already connected stream (a fake server
// in tests); with Options.ResumeThreadID the first prompt is a codex-reply
// on that thread, as it would be for a thread this server process started.
func connect(ctx context.Context, rwc io.ReadWriteCloser, opts codex.Options) (*Client, error) {
	c := newClient(opts)
	if err := c.Open(ctx, "mcp-server", rwc, c.handshake, c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

func newClient(opts codex.Options) *Client {
	c := &Client{firstCall: true}
	c.Core = live.New(opts, live.Config{Source: codex.SourceMCP, Decoder: codex.NewMCPDecoder(), Handler: c, Protocol: c,
		OnGone: c.stopWaiting, TextOnly: "codex mcp-server (Codex ≤ 0.153)"})
	return c
}

func (c *Client) handshake(ctx context.Context) error {
	init := map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    map[string]any{"elicitation": map[string]any{}},
		"clientInfo":      map[string]string{"name": c.Opts.ClientName, "version": c.Opts.ClientVersion},
	}
	if err := c.S.Call(ctx, "initialize", init, nil); err != nil {
		return fmt.Errorf("codex: initialize: %w", err)
	}
	if err := c.S.Notify(ctx, "notifications/initialized", struct{}{}); err != nil {
		return fmt.Errorf("codex: initialized: %w", err)
	}
	var tools struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := c.S.Call(ctx, "tools/list", struct{}{}, &tools); err != nil {
		return fmt.Errorf("codex: tools/list: %w", err)
	}
	have := map[string]bool{}
	for _, t := range tools.Tools {
		have[t.Name] = true
	}
	if !have["codex"] || !have["codex-reply"] {
		return fmt.Errorf("%w: tools/list has no codex and codex-reply", ErrNotCodexMCP)
	}
	if c.Opts.ResumeThreadID != "" {
		c.SetThread(c.Opts.ResumeThreadID, true)
		c.mu.Lock()
		c.firstCall = false
		c.mu.Unlock()
	}
	return nil
}

// StartTurn implements rpcagent.Protocol (images never reach it: Prompt
// refuses them, the tools take text only): the prompt goes out as a
// tools/call of codex (first prompt) or codex-reply (later ones); the turn
// ends on task_complete / turn_aborted or on the call's response,
// whichever comes first.
func (c *Client) StartTurn(ctx context.Context, n int, p codex.Prompt) error {
	if len(p.Texts) > 0 {
		p.Text = strings.Join(append([]string{p.Text}, p.Texts...), "\n\n")
	}
	c.mu.Lock()
	first := c.firstCall
	c.firstCall = false
	c.mu.Unlock()
	thread := c.ThreadID()
	var params map[string]any
	if first {
		approval, sandbox := c.Opts.Mode.Policy()
		args := map[string]any{"prompt": p.Text, "approval-policy": approval, "sandbox": sandbox}
		if c.Opts.Cwd != "" {
			args["cwd"] = c.Opts.Cwd
		}
		if c.Opts.Model != "" {
			args["model"] = c.Opts.Model
		}
		params = map[string]any{"name": "codex", "arguments": args}
	} else {
		params = map[string]any{"name": "codex-reply", "arguments": map[string]any{"prompt": p.Text, "threadId": thread, "conversationId": thread}}
	}
	req, err := c.S.Dispatch(ctx, "tools/call", params)
	if err != nil {
		return fmt.Errorf("codex: tools/call: %w", err)
	}
	wctx, stop := context.WithCancel(context.Background())
	c.mu.Lock()
	if cur, running := c.S.Running(); running && cur == n {
		c.turnReq, c.turnStop = req, stop
	} else {
		defer stop() // the turn ended already: its response is not awaited
	}
	c.mu.Unlock()
	c.S.Activity()
	go c.await(wctx, n, req)
	return nil
}

// await waits for the response of turn n's tools/call: it ends the turn
// unless the turn ended first (then the response is discarded).
func (c *Client) await(ctx context.Context, n int, req *jsonrpc.Pending) {
	var res struct {
		Structured struct {
			ThreadID string `json:"threadId"`
		} `json:"structuredContent"`
	}
	err := req.Wait(ctx, turnCallCap, &res)
	c.SetThread(res.Structured.ThreadID, false)
	if errors.Is(err, context.Canceled) {
		return
	}
	if err != nil {
		c.S.Logger().Warn().Err(err).Msg("codex tools/call")
	}
	c.S.EndTurn(n)
}

// TurnEnded implements rpcagent.Protocol: the tools/call is no longer
// awaited, and the turn's pending requests are forgotten.
func (c *Client) TurnEnded(int) {
	c.stopWaiting()
	c.S.ForgetPermissions()
}

func (c *Client) stopWaiting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turnStop != nil {
		c.turnStop()
	}
	c.turnReq, c.turnStop = nil, nil
}

// InterruptTurn implements rpcagent.Protocol: pending requests are answered
// with Codex's abort, then the turn's tools/call is cancelled
// (notifications/cancelled).
func (c *Client) InterruptTurn(ctx context.Context, _ int, _ bool) error {
	c.S.CancelPermissions(ctx, agent.ReasonCancelled)
	c.mu.Lock()
	req := c.turnReq
	c.mu.Unlock()
	if req == nil {
		return nil
	}
	if err := c.S.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": req.ID(), "reason": "interrupted"}); err != nil {
		c.S.Logger().Warn().Err(err).Msg("cancel the tools/call")
	}
	return nil
}

// Abandon implements rpcagent.Protocol: a note in the traffic makes the
// decoder end the turn (keyed by its tools/call), and the next queued
// prompt starts.
func (c *Client) Abandon(n int, reason string) {
	c.mu.Lock()
	key := ""
	if c.turnReq != nil {
		key = codex.RequestKey(c.turnReq.ID())
	}
	c.mu.Unlock()
	c.S.Note(codex.Abandoned(c.ThreadID(), key, reason))
	c.S.EndTurn(n)
}

// Handle implements jsonrpc.Handler: codex/event progress (the thread id,
// the end of the turn, activity for the idle watch, the calls approval
// events announce) and elicitation requests, each recorded under the tool
// call it is about (see codex.MCPApprovals; the decoder already turned
// the frame into events).
func (c *Client) Handle(ctx context.Context, in *jsonrpc.Incoming) {
	if in.Notif {
		if in.Method == "codex/event" {
			c.event(in)
		}
		return
	}
	if in.Method != "elicitation/create" {
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not support "+in.Method)
		return
	}
	e, err := codex.ParseElicitation(in.Params)
	if err != nil {
		_ = in.Fail(ctx, jsonrpc.CodeInvalidParams, "happy: "+err.Error())
		return
	}
	// An approval that names no call happy knows waits for a person like
	// any other, on the call the decoder synthesised for it: nothing is
	// ever answered without someone deciding (or a rule).
	callID, _ := c.approvals.Call(e)
	if callID == "" {
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy cannot show a "+e.Kind+" elicitation")
		return
	}
	c.Ask(ctx, callID, in, codex.Request{Method: in.Method})
}

// event reads a codex/event notification's thread and type.
func (c *Client) event(in *jsonrpc.Incoming) {
	c.approvals.Event(in.Params)
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
	for _, id := range []string{ev.Msg.ThreadID, ev.Msg.SessionID, ev.Meta.ThreadID} {
		if id != "" {
			c.SetThread(id, false)
			break
		}
	}
	c.S.Activity()
	switch ev.Msg.Type {
	case "task_complete", "turn_complete", "turn_aborted":
		if n, ok := c.S.Running(); ok {
			c.S.EndTurn(n)
		}
	}
}
