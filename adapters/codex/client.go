package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/queue"
)

// Errors callers branch on.
var (
	// ErrClosed: the session is closed or Codex exited.
	ErrClosed = errors.New("codex: session closed")
	// ErrNoPendingRequest: Answer for a call that does not wait for one.
	ErrNoPendingRequest = errors.New("codex: no pending request for this call")
	// ErrUnknownDecision: a decision other than once, always, reject.
	ErrUnknownDecision = errors.New("codex: unknown decision")
	// ErrUnknownMode: a permission mode name this adapter does not know.
	ErrUnknownMode = errors.New("codex: unknown permission mode")
)

// PermissionMode is happy's permission mode, translated to Codex's
// approval policy and sandbox as Codex's own presets do (Codex 0.171
// accepts the approval policies on-request and never; untrusted is
// refused):
//
//	default    on-request + workspace-write     (asks before leaving the workspace sandbox)
//	read-only  on-request + read-only           (asks before any write)
//	safe-yolo  never      + workspace-write     (never asks; stays in the workspace)
//	yolo       never      + danger-full-access  (never asks; no sandbox)
type PermissionMode string

// Permission modes.
const (
	ModeDefault  PermissionMode = "default"
	ModeReadOnly PermissionMode = "read-only"
	ModeSafeYolo PermissionMode = "safe-yolo"
	ModeYolo     PermissionMode = "yolo"
)

// ParsePermissionMode accepts the four mode names ("" means default).
// Errors: ErrUnknownMode.
func ParsePermissionMode(s string) (PermissionMode, error) {
	switch m := PermissionMode(s); m {
	case ModeDefault, ModeReadOnly, ModeSafeYolo, ModeYolo:
		return m, nil
	case "":
		return ModeDefault, nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownMode, s)
}

// Policy returns Codex's approval policy and sandbox mode for m.
func (m PermissionMode) Policy() (approval, sandbox string) {
	switch m {
	case ModeReadOnly:
		return "on-request", "read-only"
	case ModeSafeYolo:
		return "never", "workspace-write"
	case ModeYolo:
		return "never", "danger-full-access"
	}
	return "on-request", "workspace-write"
}

// Image is an image input of a prompt: a URL (data: or http(s):) or a
// local file path. Exactly one is set.
type Image struct {
	URL  string
	Path string
}

// Prompt is one user prompt.
type Prompt struct {
	Text   string
	Images []Image
}

// Defaults of Options.
const (
	DefaultIdleTimeout    = 5 * time.Minute
	DefaultInterruptGrace = 30 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	DefaultStopGrace      = 3 * time.Second
)

// Options configure a Codex session.
type Options struct {
	// Binary is the codex executable; "" means "codex" on PATH.
	Binary string
	// Args are extra arguments after the subcommand (app-server or mcp-server).
	Args []string
	// Env is added to this process's environment (CODEX_HOME passes
	// through from it unless CodexHome is set).
	Env []string
	// CodexHome, when set, is passed as CODEX_HOME.
	CodexHome string
	// Cwd is the working folder of Codex's thread (and of the process
	// unless ProcessDir is set).
	Cwd string
	// ProcessDir, when set, is the working folder of the codex process.
	ProcessDir string
	// Protocol selects app-server, mcp or auto (see ChooseProtocol).
	Protocol Protocol
	// Mode is the permission mode ("" = default).
	Mode PermissionMode
	// Model overrides the configured model when set.
	Model string
	// ResumeThreadID continues an existing thread instead of starting one.
	ResumeThreadID string
	// ClientName and ClientVersion identify happy to Codex.
	ClientName, ClientVersion string
	// IdleTimeout is how long a turn may stay silent (no notification of
	// its thread or its sub-agents) before happy asks Codex for the
	// thread's state; it is suspended while an approval is pending. Two
	// silent windows in a row with the turn still in progress make happy
	// interrupt it. 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// InterruptGrace is how long happy waits for a turn to end after
	// turn/interrupt before giving it up; 0 means DefaultInterruptGrace.
	InterruptGrace time.Duration
	// CallTimeout bounds every request but the turn itself; 0 means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Record, when set, receives the traffic log of the session.
	Record io.Writer
	// Logger receives diagnostics (Codex's stderr included).
	Logger zerolog.Logger
	// Now is the clock of frames; nil means time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.Binary == "" {
		o.Binary = "codex"
	}
	if o.Mode == "" {
		o.Mode = ModeDefault
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.InterruptGrace <= 0 {
		o.InterruptGrace = DefaultInterruptGrace
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.ClientName == "" {
		o.ClientName = "happy"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "0.0.0"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Client is a live Codex session: it starts `codex app-server` (or `codex
// mcp-server`), sends prompts, answers approvals, interrupts turns, and
// publishes what Codex does as agent events on Events. The same frames go
// through the same decoder as `happy replay`, so a recorded session replays
// to the same events.
//
// Turns never overlap: a prompt sent while a turn runs is queued and
// started when the turn ends. A turn always ends: by Codex's own
// turn/completed, by reconciliation with thread/read after a silence, by
// interrupt, or by Codex exiting. Safe for concurrent use.
type Client struct {
	opts  Options
	proto Protocol
	conn  *jsonrpc.Conn
	proc  *jsonrpc.Process
	dec   Decoder
	q     *queue.Unbounded[agent.Event]

	mu        sync.Mutex
	thread    string                // main thread (app-server) or conversation (mcp)
	children  map[string]bool       // sub-agent threads
	active    bool                  // a turn is starting or running
	turnID    string                // its id once known (app-server)
	turnReq   *jsonrpc.Pending      // the tools/call of the turn (mcp)
	turnStop  context.CancelFunc    // stops waiting for the tools/call (mcp)
	ended     map[string]bool       // turn ids already ended
	queue     []Prompt              // prompts waiting for the turn to end
	pending   map[string][]*pending // requests waiting for an answer, by call id, in arrival order
	watchdog  *time.Timer
	giveUp    *time.Timer
	strikes   int
	closed    bool
	firstCall bool // mcp: the next prompt is the first tools/call
	// interruptWanted: Interrupt came while turn/start was unanswered.
	interruptWanted bool
	exitOnce        sync.Once

	heldMu sync.Mutex
	held   []agent.Event // events of the frame being handled

	// runnerOwnsControl: a session runner records prompts and answers in
	// the transcript itself (see Agent), so their echo is not published.
	runnerOwnsControl atomic.Bool
}

// withoutControlEcho removes what a session runner already recorded: the
// user prompts (it applies its own when it sends one) and the resolutions
// read back from happy's own answers. Resolutions Codex reports by itself
// (serverRequest/resolved) stay.
func withoutControlEcho(evs []agent.Event, dir trafficlog.Dir) []agent.Event {
	out := evs[:0:0]
	for _, e := range evs {
		switch e.(type) {
		case *agent.UserPrompt:
			continue
		case *agent.ToolResolved:
			if dir == trafficlog.C2A {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

type pending struct {
	in        *jsonrpc.Incoming
	method    string
	available []json.RawMessage
	amendment json.RawMessage
	qids      []string
}

// Start starts Codex and opens (or resumes) a thread. Cancelling ctx stops
// Codex. Errors: ErrUnknownProtocol, the start error of the binary, or the
// handshake's error (the process is stopped then).
func Start(ctx context.Context, opts Options) (*Client, error) {
	opts.defaults()
	proto := opts.Protocol
	if proto == "" || proto == ProtocolAuto {
		p, _, err := ChooseProtocol(ctx, opts.Binary)
		if err != nil {
			return nil, err
		}
		proto = p
	}
	sub := "app-server"
	if proto == ProtocolMCP {
		sub = "mcp-server"
	}
	cmd := exec.Command(opts.Binary, append([]string{sub}, opts.Args...)...)
	cmd.Dir = opts.Cwd
	if opts.ProcessDir != "" {
		cmd.Dir = opts.ProcessDir
	}
	cmd.Env = append(os.Environ(), opts.Env...)
	if opts.CodexHome != "" {
		cmd.Env = append(cmd.Env, "CODEX_HOME="+opts.CodexHome)
	}
	c := newClient(opts, proto)
	p, err := jsonrpc.Start(ctx, cmd, c, c.connOptions())
	if err != nil {
		return nil, fmt.Errorf("codex: start %s %s: %w", opts.Binary, sub, err)
	}
	c.conn, c.proc = p.Conn, p
	go func() {
		<-p.Exited()
		c.shutdown()
	}()
	if err := c.handshake(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Connect runs a session over an already connected byte stream (a fake
// server in tests, a socket): rwc carries Codex's output to read and its
// input to write. Closing the client closes rwc.
func Connect(ctx context.Context, rwc io.ReadWriteCloser, opts Options) (*Client, error) {
	opts.defaults()
	proto := opts.Protocol
	if proto == "" || proto == ProtocolAuto {
		proto = ProtocolAppServer
	}
	c := newClient(opts, proto)
	c.conn = jsonrpc.New(ctx, rwc, c, c.connOptions())
	go func() {
		<-c.conn.Done()
		c.shutdown()
	}()
	if err := c.handshake(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func newClient(opts Options, proto Protocol) *Client {
	return &Client{
		opts: opts, proto: proto, dec: NewDecoder(proto), q: queue.New[agent.Event](),
		children: map[string]bool{}, ended: map[string]bool{}, pending: map[string][]*pending{},
		firstCall: true,
	}
}

func (c *Client) connOptions() jsonrpc.Options {
	o := jsonrpc.Options{
		OmitVersion: c.proto == ProtocolAppServer,
		CallTimeout: c.opts.CallTimeout,
		Source:      SourceAppServer,
		Tap:         c.tap,
		Logger:      c.opts.Logger,
		Now:         c.opts.Now,
	}
	if c.proto == ProtocolMCP {
		o.Source = SourceMCP
	}
	if c.opts.Record != nil {
		o.Recorder = jsonrpc.TrafficRecorder(c.opts.Record)
	}
	return o
}

// tap decodes every frame, in traffic order, into events. The events of a
// request or notification from Codex are held until Handle has done its
// bookkeeping for it (so a consumer that sees a blocked tool can answer it
// at once); everything else is published at once.
func (c *Client) tap(f jsonrpc.Frame) {
	evs := c.dec.Decode(f)
	if c.runnerOwnsControl.Load() {
		evs = withoutControlEcho(evs, f.Dir)
	}
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	// A frame that never reached Handle (refused by the connection)
	// must not keep its events back.
	c.q.Push(c.held...)
	c.held = nil
	if f.Dir == trafficlog.A2C && f.Msg != nil && f.Msg.Kind != jsonrpc.KindResponse {
		c.held = evs
		return
	}
	c.q.Push(evs...)
}

// release publishes the events held for the frame being handled.
func (c *Client) release() {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	c.q.Push(c.held...)
	c.held = nil
}

// Events delivers the session's agent events in order. It is closed after
// Codex exited (or Close) and every event was delivered.
func (c *Client) Events() <-chan agent.Event { return c.q.Out() }

// Protocol is the protocol in use.
func (c *Client) Protocol() Protocol { return c.proto }

// ThreadID is Codex's thread (conversation) id; "" until known.
func (c *Client) ThreadID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.thread
}

func (c *Client) handshake(ctx context.Context) error {
	if c.proto == ProtocolMCP {
		return c.mcpHandshake(ctx)
	}
	init := map[string]any{"clientInfo": map[string]string{"name": c.opts.ClientName, "title": c.opts.ClientName, "version": c.opts.ClientVersion}}
	if err := c.conn.Call(ctx, "initialize", init, nil); err != nil {
		return fmt.Errorf("codex: initialize: %w", err)
	}
	if err := c.conn.Notify(ctx, "initialized", struct{}{}); err != nil {
		return fmt.Errorf("codex: initialized: %w", err)
	}
	approval, sandbox := c.opts.Mode.Policy()
	params := map[string]any{"approvalPolicy": approval, "sandbox": sandbox}
	if c.opts.Cwd != "" {
		params["cwd"] = c.opts.Cwd
	}
	if c.opts.Model != "" {
		params["model"] = c.opts.Model
	}
	method := "thread/start"
	if c.opts.ResumeThreadID != "" {
		method = "thread/resume"
		params["threadId"] = c.opts.ResumeThreadID
		params["excludeTurns"] = true
	}
	var res struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := c.conn.Call(ctx, method, params, &res); err != nil {
		return fmt.Errorf("codex: %s: %w", method, err)
	}
	if res.Thread.ID == "" {
		return fmt.Errorf("codex: %s: response without thread.id", method)
	}
	c.mu.Lock()
	c.thread = res.Thread.ID
	c.mu.Unlock()
	return nil
}

// Prompt sends a prompt: it starts a turn at once when none runs, else it
// queues the prompt behind the running turn (never a second concurrent
// turn). Errors: ErrClosed, or the error of turn/start.
func (c *Client) Prompt(ctx context.Context, p Prompt) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.active || len(c.queue) > 0 {
		c.queue = append(c.queue, p)
		c.mu.Unlock()
		return nil
	}
	c.active = true
	c.turnID = ""
	c.mu.Unlock()
	return c.startTurn(ctx, p)
}

// Queued is the number of prompts waiting for the running turn to end.
func (c *Client) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// startTurn sends a turn's request; c.active is already set.
func (c *Client) startTurn(ctx context.Context, p Prompt) error {
	if c.proto == ProtocolMCP {
		return c.mcpStartTurn(ctx, p)
	}
	c.mu.Lock()
	thread := c.thread
	c.mu.Unlock()
	input := []map[string]any{{"type": "text", "text": p.Text}}
	for _, im := range p.Images {
		if im.Path != "" {
			input = append(input, map[string]any{"type": "localImage", "path": im.Path})
		} else {
			input = append(input, map[string]any{"type": "image", "url": im.URL})
		}
	}
	var res struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	err := c.conn.Call(ctx, "turn/start", map[string]any{"threadId": thread, "input": input}, &res)
	c.mu.Lock()
	if err != nil {
		c.mu.Unlock()
		c.turnDone("")
		return fmt.Errorf("codex: turn/start: %w", err)
	}
	if c.turnID == "" && !c.ended[res.Turn.ID] {
		c.turnID = res.Turn.ID
	}
	already := c.ended[res.Turn.ID]
	wanted := c.interruptWanted && c.turnID == res.Turn.ID
	c.interruptWanted = false
	c.resetWatchdogLocked()
	c.mu.Unlock()
	if already {
		c.turnDone(res.Turn.ID)
	} else if wanted {
		// Interrupt was asked before the turn had an id.
		go c.abandon(context.Background(), "interrupted by the user")
	}
	return nil
}

// turnDone ends the running turn (id "" = whatever runs) and starts the
// next queued prompt.
func (c *Client) turnDone(id string) {
	c.mu.Lock()
	if id != "" {
		if c.ended[id] {
			// Already ended (turn/completed before the turn/start response,
			// or a late end of a turn given up): never end another turn.
			c.mu.Unlock()
			return
		}
		c.ended[id] = true
	}
	if !c.active || (id != "" && c.turnID != "" && c.turnID != id) {
		c.mu.Unlock()
		return
	}
	c.active, c.turnID, c.strikes, c.interruptWanted = false, "", 0, false
	// Requests of the ended turn can no longer be answered.
	clear(c.pending)
	c.stopTimersLocked()
	if c.turnStop != nil {
		c.turnStop()
		c.turnStop = nil
	}
	c.turnReq = nil
	if c.closed || len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	next := c.queue[0]
	c.queue = c.queue[1:]
	c.active = true
	c.mu.Unlock()
	go func() {
		if err := c.startTurn(context.Background(), next); err != nil {
			c.opts.Logger.Warn().Err(err).Msg("start queued prompt")
		}
	}()
}

func (c *Client) stopTimersLocked() {
	if c.watchdog != nil {
		c.watchdog.Stop()
	}
	if c.giveUp != nil {
		c.giveUp.Stop()
		c.giveUp = nil
	}
}

// resetWatchdogLocked restarts the idle window of the running turn; it
// stays stopped while an approval is pending.
func (c *Client) resetWatchdogLocked() {
	if !c.active || c.closed || len(c.pending) > 0 {
		if c.watchdog != nil {
			c.watchdog.Stop()
		}
		return
	}
	c.strikes = 0
	if c.watchdog == nil {
		c.watchdog = time.AfterFunc(c.opts.IdleTimeout, c.onIdle)
		return
	}
	c.watchdog.Reset(c.opts.IdleTimeout)
}

// onIdle runs when a turn stayed silent for IdleTimeout.
func (c *Client) onIdle() {
	c.mu.Lock()
	if !c.active || c.closed || len(c.pending) > 0 {
		c.mu.Unlock()
		return
	}
	c.strikes++
	strikes, thread, turn := c.strikes, c.thread, c.turnID
	c.mu.Unlock()
	if c.proto == ProtocolMCP || turn == "" {
		c.abandon(context.Background(), "no activity for "+c.opts.IdleTimeout.String())
		return
	}
	// Ask Codex what became of the turn (B13/B16: turn/completed lost).
	var res struct {
		Thread struct {
			Turns []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"turns"`
		} `json:"thread"`
	}
	err := c.conn.Call(context.Background(), "thread/read", map[string]any{"threadId": thread, "includeTurns": true}, &res)
	if err != nil {
		c.opts.Logger.Warn().Err(err).Str("turn", turn).Msg("reconcile turn with thread/read")
		c.abandon(context.Background(), "no activity and thread/read failed")
		return
	}
	for _, t := range res.Thread.Turns {
		if t.ID == turn && t.Status != "inProgress" {
			c.turnDone(turn) // the decoder has ended it from the same response
			return
		}
	}
	if strikes >= 2 {
		c.abandon(context.Background(), "turn still in progress after two silent windows")
		return
	}
	c.mu.Lock()
	if c.active && c.turnID == turn && c.watchdog != nil && len(c.pending) == 0 {
		c.watchdog.Reset(c.opts.IdleTimeout)
	}
	c.mu.Unlock()
}

// abandon interrupts the running turn and, when Codex does not end it
// within InterruptGrace, gives it up: a note in the traffic makes the
// decoder end it, and the next queued prompt starts.
func (c *Client) abandon(ctx context.Context, reason string) {
	c.mu.Lock()
	if !c.active {
		c.mu.Unlock()
		return
	}
	thread, turn := c.thread, c.turnID
	if c.proto == ProtocolAppServer && turn == "" {
		c.interruptWanted = true
	}
	c.mu.Unlock()
	if err := c.interruptTurn(ctx); err != nil {
		c.opts.Logger.Warn().Err(err).Msg("interrupt silent turn")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.active || c.turnID != turn || c.giveUp != nil {
		return
	}
	c.giveUp = time.AfterFunc(c.opts.InterruptGrace, func() {
		c.mu.Lock()
		still := c.active && c.turnID == turn
		key := turn
		if c.proto == ProtocolMCP && c.turnReq != nil {
			key = requestKey(mustObject(c.turnReq.ID()))
		}
		c.mu.Unlock()
		if !still {
			return
		}
		note, _ := json.Marshal(happyNote{Happy: noteAbandoned, ThreadID: thread, TurnID: key, Reason: reason})
		c.conn.Note(note)
		c.turnDone(turn)
	})
}

// Interrupt cancels the running turn: pending approvals are answered with
// Codex's cancel (abort), then the turn is interrupted. Codex ends it with
// an interrupted status; if it does not within InterruptGrace the turn is
// given up. With no turn running it does nothing. Errors: ErrClosed, or the
// interrupt request's error.
func (c *Client) Interrupt(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	active := c.active
	c.mu.Unlock()
	if !active {
		return nil
	}
	c.abandon(ctx, "interrupted by the user")
	return nil
}

func (c *Client) interruptTurn(ctx context.Context) error {
	c.mu.Lock()
	var cancels []*pending
	for k, ps := range c.pending {
		cancels = append(cancels, ps...)
		delete(c.pending, k)
	}
	thread, turn, req := c.thread, c.turnID, c.turnReq
	c.mu.Unlock()
	for _, p := range cancels {
		if err := p.in.Reply(ctx, cancelAnswer(p)); err != nil {
			c.opts.Logger.Warn().Err(err).Str("method", p.method).Msg("cancel pending request")
		}
	}
	if c.proto == ProtocolMCP {
		if req == nil {
			return nil
		}
		return c.conn.Notify(ctx, "notifications/cancelled", map[string]any{"requestId": req.ID(), "reason": "interrupted"})
	}
	if turn == "" {
		return nil
	}
	return c.conn.Call(ctx, "turn/interrupt", map[string]string{"threadId": thread, "turnId": turn}, nil)
}

func cancelAnswer(p *pending) any {
	switch p.method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		return map[string]string{"decision": "cancel"}
	case "item/tool/requestUserInput":
		return map[string]any{"answers": map[string]any{}}
	}
	return map[string]string{"decision": "abort"}
}

// Answer answers the approval request of tool call callID with a canonical
// decision (once → accept, always → acceptForSession, reject → decline;
// the legacy and MCP forms for older Codex). "always" uses the proposed
// exec-policy amendment when Codex does not offer acceptForSession, and
// accept when it lists its decisions and offers neither. Every request
// pending for the call (Codex may ask more than once) gets the answer.
// Errors: ErrUnknownDecision, ErrNoPendingRequest, ErrClosed, or the write
// error.
func (c *Client) Answer(ctx context.Context, callID string, d agent.Decision) error {
	if d != agent.DecisionOnce && d != agent.DecisionAlways && d != agent.DecisionReject {
		return fmt.Errorf("%w: %q", ErrUnknownDecision, d)
	}
	ps, err := c.takePending(callID, false)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		if err := p.in.Reply(ctx, answerFor(p, d)); err != nil {
			errs = append(errs, fmt.Errorf("codex: answer %s: %w", callID, err))
		}
	}
	return errors.Join(errs...)
}

// AnswerQuestion answers a question request (item/tool/requestUserInput)
// of call callID: answers[i] are the labels chosen for question i.
// Errors: ErrNoPendingRequest, ErrClosed, or the write error.
func (c *Client) AnswerQuestion(ctx context.Context, callID string, answers [][]string) error {
	ps, err := c.takePending(callID, true)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		res := map[string]any{}
		for i, q := range p.qids {
			var a []string
			if i < len(answers) {
				a = answers[i]
			}
			if a == nil {
				a = []string{}
			}
			res[q] = map[string]any{"answers": a}
		}
		if err := p.in.Reply(ctx, map[string]any{"answers": res}); err != nil {
			errs = append(errs, fmt.Errorf("codex: answer question %s: %w", callID, err))
		}
	}
	return errors.Join(errs...)
}

// cancel answers the approval request of callID with Codex's cancel
// (abort) form: the decision of a turn being aborted.
func (c *Client) cancel(ctx context.Context, callID string) error {
	ps, err := c.takePending(callID, false)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range ps {
		if err := p.in.Reply(ctx, cancelAnswer(p)); err != nil {
			errs = append(errs, fmt.Errorf("codex: cancel %s: %w", callID, err))
		}
	}
	return errors.Join(errs...)
}

// takePending removes and returns every request pending for callID that
// is a question (question) or an approval (!question): Codex may ask more
// than once for one call, and each request waits for its own answer.
func (c *Client) takePending(callID string, question bool) ([]*pending, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	var took, kept []*pending
	for _, p := range c.pending[callID] {
		if (p.method == "item/tool/requestUserInput") == question {
			took = append(took, p)
		} else {
			kept = append(kept, p)
		}
	}
	if len(took) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoPendingRequest, callID)
	}
	if len(kept) == 0 {
		delete(c.pending, callID)
	} else {
		c.pending[callID] = kept
	}
	c.resetWatchdogLocked()
	return took, nil
}

// answerFor builds the response to an approval request.
func answerFor(p *pending, d agent.Decision) any {
	switch p.method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		switch d {
		case agent.DecisionOnce:
			return map[string]any{"decision": "accept"}
		case agent.DecisionReject:
			return map[string]any{"decision": "decline"}
		}
		if p.available == nil || offers(p.available, "acceptForSession") {
			return map[string]any{"decision": "acceptForSession"}
		}
		if len(p.amendment) > 0 && string(p.amendment) != "null" && offers(p.available, "acceptWithExecpolicyAmendment") {
			return map[string]any{"decision": map[string]any{"acceptWithExecpolicyAmendment": map[string]json.RawMessage{"execpolicy_amendment": p.amendment}}}
		}
		// Codex listed its decisions and "for the session" is not among
		// them: accept this once rather than send one it did not offer.
		return map[string]any{"decision": "accept"}
	default: // execCommandApproval, applyPatchApproval, elicitation/create
		switch d {
		case agent.DecisionOnce:
			return map[string]any{"decision": "approved"}
		case agent.DecisionReject:
			return map[string]any{"decision": "denied"}
		}
		return map[string]any{"decision": "approved_for_session"}
	}
}

// offers reports whether a decision (a string, or the key of an object
// decision) is among the available ones.
func offers(available []json.RawMessage, name string) bool {
	for _, a := range available {
		var s string
		if json.Unmarshal(a, &s) == nil && s == name {
			return true
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(a, &obj) == nil {
			if _, ok := obj[name]; ok {
				return true
			}
		}
	}
	return false
}

// Handle implements jsonrpc.Handler: lifecycle bookkeeping (the decoder
// already turned the frame into events in the tap).
func (c *Client) Handle(ctx context.Context, in *jsonrpc.Incoming) {
	defer c.release()
	if c.proto == ProtocolMCP {
		c.mcpHandle(ctx, in)
		return
	}
	var p struct {
		ThreadID  string          `json:"threadId"`
		ItemID    string          `json:"itemId"`
		CallID    string          `json:"callId"`
		Conv      string          `json:"conversationId"`
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
	if len(in.Params) > 0 && in.Params[0] == '{' {
		_ = json.Unmarshal(in.Params, &p)
	}
	if in.Notif {
		c.mu.Lock()
		if in.Method == "thread/started" && p.Thread.Parent != nil && (*p.Thread.Parent == c.thread || c.children[*p.Thread.Parent]) {
			c.children[p.Thread.ID] = true
		}
		mine := p.ThreadID != "" && (p.ThreadID == c.thread || c.children[p.ThreadID])
		if mine && c.watchdog != nil {
			c.resetWatchdogLocked()
		}
		main := p.ThreadID != "" && p.ThreadID == c.thread
		switch {
		case in.Method == "turn/started" && main && !c.ended[p.Turn.ID] && c.active && c.turnID == "":
			c.turnID = p.Turn.ID
			c.resetWatchdogLocked()
		case in.Method == "serverRequest/resolved":
			for k, ps := range c.pending {
				kept := ps[:0]
				for _, q := range ps {
					if idString(mustObject(q.in.ID)) != idString(p.RequestID) {
						kept = append(kept, q)
					}
				}
				if len(kept) == 0 {
					delete(c.pending, k)
				} else {
					c.pending[k] = kept
				}
			}
			c.resetWatchdogLocked()
		}
		c.mu.Unlock()
		if in.Method == "turn/completed" && main {
			c.turnDone(p.Turn.ID)
		}
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
		pd := &pending{in: in, method: in.Method, available: p.Available, amendment: p.Amendment}
		for _, q := range p.Questions {
			pd.qids = append(pd.qids, q.ID)
		}
		c.mu.Lock()
		c.pending[callID] = append(c.pending[callID], pd)
		c.resetWatchdogLocked() // stops it while the approval is pending
		c.mu.Unlock()
	default:
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not support "+in.Method)
	}
}

// Close stops Codex (stdin closed, then its process group ended after a
// grace period) and waits until every event was delivered. Open turns end
// with reason agent-exited.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.q.Wait()
		return nil
	}
	c.closed = true
	c.stopTimersLocked()
	c.queue = nil
	c.mu.Unlock()
	var err error
	if c.proc != nil {
		err = c.proc.Stop(DefaultStopGrace)
	} else {
		err = c.conn.Close()
		// No process: record the end of the stream as an exit.
		c.exitOnce.Do(func() {
			c.tap(jsonrpc.Frame{T: c.opts.Now().UnixMilli(), Dir: trafficlog.Exit, Data: []byte(`{"code":null,"sig":null}`), JSON: true})
		})
	}
	c.shutdown()
	c.q.Wait()
	return err
}

// shutdown runs when Codex is gone: nothing more will be read.
func (c *Client) shutdown() {
	if c.proc != nil {
		<-c.proc.Exited() // the exit frame was tapped
	} else {
		c.exitOnce.Do(func() {
			c.tap(jsonrpc.Frame{T: c.opts.Now().UnixMilli(), Dir: trafficlog.Exit, Data: []byte(`{"code":null,"sig":null}`), JSON: true})
		})
	}
	c.mu.Lock()
	c.closed = true
	c.active = false
	c.stopTimersLocked()
	if c.turnStop != nil {
		c.turnStop()
		c.turnStop = nil
	}
	c.mu.Unlock()
	c.q.Close()
}
