// Package appserver runs Codex through `codex app-server` (line-delimited
// JSON-RPC without the "jsonrpc" member, protocol v2: threads, turns,
// items): it starts Codex, opens or resumes a thread, sends prompts as
// turns, answers approvals and questions, interrupts turns, and publishes
// what Codex does as agent events, decoded by codex.AppServerDecoder (the
// decoder `happy replay` uses, so a recorded session replays to the same
// events).
//
// Turns never overlap and always end: by Codex's turn/completed; after a
// silence of Options.TurnCheck (restarted by every notification of the
// thread or its sub-agents, suspended while an approval waits) by
// thread/read telling the turn is over (regressions B13/B16), asked again
// after every further silence; after an Interrupt (a person, or the
// session runner's idle watch: the client never interrupts on its own) by
// turn/interrupt, and InterruptGrace later by giving the turn up (a note
// in the traffic ends it in a replay too); or by Codex exiting
// (agent-exited). A sub-agent thread's turn/completed never ends the main
// turn.
//
// Answers name a call id only, so a request whose call id already waits
// for an answer in another thread is refused with a JSON-RPC error (one
// answer would otherwise answer both threads).
package appserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/codex/internal/live"
	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
)

// Errors callers branch on.
var (
	// ErrClosed: the session is closed or Codex exited.
	ErrClosed = rpcagent.ErrClosed
	// ErrNoPendingRequest: an answer for a call that waits for none.
	ErrNoPendingRequest = rpcagent.ErrNoPendingRequest
)

// Client is a live `codex app-server` session. Safe for concurrent use.
type Client struct {
	*live.Core

	mu              sync.Mutex
	children        map[string]bool // sub-agent threads
	turnID          string          // Codex's id of the running turn, once known
	ended           map[string]bool // turn ids already ended
	interruptWanted bool            // Interrupt came while turn/start was unanswered
}

var _ live.Protocol = (*Client)(nil)

// Start starts `codex app-server` and opens (or resumes) a thread.
// Cancelling ctx stops Codex. Errors: the start error of the binary, or
// the handshake's error (the process is stopped then).
func Start(ctx context.Context, opts codex.Options) (*Client, error) {
	c := newClient(opts)
	if err := c.Open(ctx, "app-server", nil, c.handshake, c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

// connect runs a session over an already connected stream (a fake
// app-server in tests): rwc carries Codex's output to read and its input
// to write.
func connect(ctx context.Context, rwc io.ReadWriteCloser, opts codex.Options) (*Client, error) {
	c := newClient(opts)
	if err := c.Open(ctx, "app-server", rwc, c.handshake, c.Close); err != nil {
		return nil, err
	}
	return c, nil
}

func newClient(opts codex.Options) *Client {
	c := &Client{children: map[string]bool{}, ended: map[string]bool{}}
	c.Core = live.New(opts, live.Config{Source: codex.SourceAppServer, OmitVersion: true,
		Decoder: codex.NewAppServerDecoder(), Handler: c, Protocol: c, OnIdle: c.idle})
	return c
}

func (c *Client) handshake(ctx context.Context) error {
	o := c.Opts
	init := map[string]any{"clientInfo": map[string]string{"name": o.ClientName, "title": o.ClientName, "version": o.ClientVersion}}
	if err := c.S.Call(ctx, "initialize", init, nil); err != nil {
		return fmt.Errorf("codex: initialize: %w", err)
	}
	if err := c.S.Notify(ctx, "initialized", struct{}{}); err != nil {
		return fmt.Errorf("codex: initialized: %w", err)
	}
	approval, sandbox := o.Mode.Policy()
	params := map[string]any{"approvalPolicy": approval, "sandbox": sandbox}
	if o.Cwd != "" {
		params["cwd"] = o.Cwd
	}
	if o.Model != "" {
		params["model"] = o.Model
	}
	method := "thread/start"
	if o.ResumeThreadID != "" {
		method = "thread/resume"
		params["threadId"] = o.ResumeThreadID
		params["excludeTurns"] = true
	}
	var res struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := c.S.Call(ctx, method, params, &res); err != nil {
		return fmt.Errorf("codex: %s: %w", method, err)
	}
	if res.Thread.ID == "" {
		return fmt.Errorf("codex: %s: response without thread.id", method)
	}
	c.SetThread(res.Thread.ID, true)
	return nil
}

// StartTurn implements rpcagent.Protocol: turn/start. The turn ends with
// Codex's turn/completed (or the reconciliation after a silence).
func (c *Client) StartTurn(ctx context.Context, n int, p codex.Prompt) error {
	input := []map[string]any{{"type": "text", "text": p.Text}}
	for _, im := range p.Images {
		if im.Path != "" {
			input = append(input, map[string]any{"type": "localImage", "path": im.Path})
		} else {
			input = append(input, map[string]any{"type": "image", "url": im.URL})
		}
	}
	for _, t := range p.Texts {
		input = append(input, map[string]any{"type": "text", "text": t})
	}
	var res struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	if err := c.S.Call(ctx, "turn/start", map[string]any{"threadId": c.ThreadID(), "input": input}, &res); err != nil {
		return fmt.Errorf("codex: turn/start: %w", err)
	}
	cur, running := c.S.Running()
	mine := running && cur == n
	c.mu.Lock()
	// turn/started may have come first; and a turn Codex already ended
	// (turn/completed before this response) is never adopted.
	if mine && c.turnID == "" && !c.ended[res.Turn.ID] {
		c.turnID = res.Turn.ID
	}
	wanted := mine && c.interruptWanted && c.turnID == res.Turn.ID
	if mine {
		c.interruptWanted = false
	}
	c.mu.Unlock()
	c.S.Activity()
	if wanted {
		// Interrupt was asked before the turn had an id.
		go func() { _ = c.Interrupt(context.Background()) }()
	}
	return nil
}

// turnDone ends the running turn on Codex's word that turn id ended ("" =
// whatever runs). A turn ended already (turn/completed before the
// turn/start response, or a late end of a turn given up) never ends
// another.
func (c *Client) turnDone(id string) {
	c.mu.Lock()
	if id != "" {
		if c.ended[id] || (c.turnID != "" && c.turnID != id) {
			c.ended[id] = true
			c.mu.Unlock()
			return
		}
		c.ended[id] = true
	}
	c.mu.Unlock()
	if n, ok := c.S.Running(); ok {
		c.S.EndTurn(n)
	}
}

// TurnEnded implements rpcagent.Protocol: the turn's id and the main
// thread's pending requests are forgotten (Codex resolved them with the
// turn); a sub-agent thread's, whose thread goes on, get Codex's cancel,
// for the session settles them with the main turn and nobody will answer
// them.
func (c *Client) TurnEnded(int) {
	c.mu.Lock()
	c.turnID, c.interruptWanted = "", false
	c.mu.Unlock()
	main := c.ThreadID()
	var ctx context.Context
	for _, p := range c.S.TakePermissions() {
		if p.Data.Thread == "" || p.Data.Thread == main {
			continue
		}
		if ctx == nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(context.Background(), time.Second)
			defer cancel()
		}
		if err := c.Cancel(ctx, p, agent.ReasonCancelled); err != nil {
			c.S.Logger().Warn().Err(err).Str("call", p.CallID).Msg("cancel a sub-agent's request at the main turn's end")
		}
	}
}

// InterruptTurn implements rpcagent.Protocol: pending requests are answered
// with Codex's cancel, then turn/interrupt (at once when the turn has an
// id, else as soon as turn/start tells it).
func (c *Client) InterruptTurn(ctx context.Context, _ int, _ bool) error {
	c.S.CancelPermissions(ctx, agent.ReasonCancelled)
	c.mu.Lock()
	turn := c.turnID
	if turn == "" {
		c.interruptWanted = true
	}
	c.mu.Unlock()
	if turn == "" {
		return nil
	}
	if err := c.S.Call(ctx, "turn/interrupt", map[string]string{"threadId": c.ThreadID(), "turnId": turn}, nil); err != nil {
		c.S.Logger().Warn().Err(err).Str("turn", turn).Msg("turn/interrupt")
	}
	return nil
}

// Abandon implements rpcagent.Protocol: a note in the traffic makes the
// decoder end the turn, and the next queued prompt starts.
func (c *Client) Abandon(n int, reason string) {
	c.mu.Lock()
	turn := c.turnID
	c.mu.Unlock()
	c.S.Note(codex.Abandoned(c.ThreadID(), turn, reason))
	c.S.EndTurn(n)
}

// idle runs when turn n stayed silent for TurnCheck: happy asks Codex
// what became of the turn (B13/B16: turn/completed lost) and ends it from
// the answer. A turn still in progress, one whose id is not known yet, or
// a failed thread/read is checked again after the next silence: a turn
// is never interrupted here, for silence is the session runner's to
// judge (its idle watch, docs/ARCHITECTURE.md "Stalled agents").
func (c *Client) idle(n, _ int) {
	c.mu.Lock()
	turn := c.turnID
	c.mu.Unlock()
	if turn != "" && c.turnLost(turn) {
		return
	}
	c.mu.Lock()
	same := c.turnID == turn
	c.mu.Unlock()
	if same {
		c.S.IdleAgain(n)
	}
}

// turnLost asks Codex (thread/read) whether turn ended without happy
// hearing of it, and if so ends it (the decoder has ended it from the same
// response) and reports true.
func (c *Client) turnLost(turn string) bool {
	var res struct {
		Thread struct {
			Turns []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"turns"`
		} `json:"thread"`
	}
	if err := c.S.Call(context.Background(), "thread/read", map[string]any{"threadId": c.ThreadID(), "includeTurns": true}, &res); err != nil {
		c.S.Logger().Warn().Err(err).Str("turn", turn).Msg("reconcile turn with thread/read")
		return false
	}
	for _, t := range res.Thread.Turns {
		if t.ID == turn && t.Status != "inProgress" {
			c.turnDone(turn)
			return true
		}
	}
	return false
}

// params are the members of Codex's notifications and requests the client
// needs for its bookkeeping (the decoder reads the rest).
type params struct {
	ThreadID  string          `json:"threadId"`
	Conv      string          `json:"conversationId"` // legacy requests' thread
	ItemID    string          `json:"itemId"`
	CallID    string          `json:"callId"`
	RequestID json.RawMessage `json:"requestId"`
	Turn      struct {
		ID string `json:"id"`
	} `json:"turn"`
	Thread struct {
		ID     string  `json:"id"`
		Parent *string `json:"parentThreadId"`
	} `json:"thread"`
	Available []json.RawMessage `json:"availableDecisions"`
	Amendment json.RawMessage   `json:"proposedExecpolicyAmendment"`
	Questions []struct {
		ID string `json:"id"`
	} `json:"questions"`
}

// Handle implements jsonrpc.Handler: lifecycle bookkeeping (the decoder
// already turned the frame into events).
func (c *Client) Handle(ctx context.Context, in *jsonrpc.Incoming) {
	var p params
	if len(in.Params) > 0 && in.Params[0] == '{' {
		_ = json.Unmarshal(in.Params, &p)
	}
	if in.Notif {
		c.notification(in.Method, p)
		return
	}
	switch in.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval",
		"execCommandApproval", "applyPatchApproval", "item/tool/requestUserInput":
		callID := p.ItemID
		if callID == "" {
			callID = p.CallID
		}
		if callID == "" {
			_ = in.Fail(ctx, jsonrpc.CodeInvalidParams, "happy: approval request without item id")
			return
		}
		thread := p.ThreadID
		if thread == "" {
			thread = p.Conv
		}
		if c.S.Waits(callID, func(o codex.Request) bool { return o.Thread != thread }) {
			// Answers name the call id only: one would answer both threads'
			// requests (another sub-agent's command approved with this one).
			_ = in.Fail(ctx, jsonrpc.CodeInvalidParams, "happy: call id "+callID+" already waits for an answer in another thread")
			return
		}
		r := codex.Request{Method: in.Method, Thread: thread, Available: p.Available, Amendment: p.Amendment}
		for _, q := range p.Questions {
			r.Questions = append(r.Questions, q.ID)
		}
		c.Ask(ctx, callID, in, r) // the idle watch waits while it is pending
	default:
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not support "+in.Method)
	}
}

// notification follows the threads and turns: sub-agent threads, the id
// of the running turn, requests Codex resolved by itself, the end of the
// main thread's turn; activity of the thread or its sub-agents restarts
// the idle window.
func (c *Client) notification(method string, p params) {
	main := c.ThreadID()
	_, running := c.S.Running()
	c.mu.Lock()
	if method == "thread/started" && p.Thread.Parent != nil && (*p.Thread.Parent == main || c.children[*p.Thread.Parent]) {
		c.children[p.Thread.ID] = true
	}
	mine := p.ThreadID != "" && (p.ThreadID == main || c.children[p.ThreadID])
	isMain := p.ThreadID != "" && p.ThreadID == main
	if method == "turn/started" && isMain && !c.ended[p.Turn.ID] && running && c.turnID == "" {
		c.turnID = p.Turn.ID
	}
	c.mu.Unlock()
	if method == "serverRequest/resolved" {
		if id, ok := jsonrpc.ParseID(p.RequestID); ok {
			c.S.Withdraw(id)
		}
	}
	if mine || method == "serverRequest/resolved" {
		c.S.Activity()
	}
	if method == "turn/completed" && isMain {
		c.turnDone(p.Turn.ID)
	}
}
