// Package sdk drives Claude Code in remote (SDK) mode: the CLI started with
// stream-json on stdin and stdout and its permission prompts routed to us,
//
//	claude --input-format stream-json --output-format stream-json --verbose \
//	       --permission-prompt-tool stdio --include-partial-messages [args…]
//
// and the SDK control protocol on top of those pipes (one JSON object per
// line each way):
//
//	us → CLI   {"type":"control_request","request_id":ID,"request":{"subtype":"initialize"|"interrupt"|"set_permission_mode",…}}
//	CLI → us   {"type":"control_response","response":{"subtype":"success"|"error","request_id":ID,"response":…,"error":…}}
//	CLI → us   {"type":"control_request","request_id":ID,"request":{"subtype":"can_use_tool","tool_name",…}}
//	us → CLI   {"type":"control_response","response":{"subtype":"success","request_id":ID,"response":{"behavior":"allow"|"deny",…}}}
//	CLI → us   {"type":"control_cancel_request","request_id":ID}
//	us → CLI   {"type":"user","message":{"role":"user","content":[…]},"parent_tool_use_id":null,"session_id":""}
//
// The shapes come from captures of Claude Code 2.1.197 in this mode. Every
// stdout line is handed to the caller as an Output event, in order. The
// control protocol is this package's: its lines are marked (Output.Control)
// and reported as events of their own (PermissionRequest,
// PermissionCancelled, Refused), the one account of what Claude waits for.
// Control requests are answered here (can_use_tool through the caller's
// Respond, anything else with an error response: never ignored).
// With Options.Record every message of both directions, stderr and the exit
// are written as a traffic log ({"t","dir","msg"}), which `happy replay`
// reads back.
package sdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/happy-dev/happy/adapters/claude/perm"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
	"github.com/happy-dev/happy/internal/proc"
	"github.com/happy-dev/happy/internal/queue"
)

// DefaultBinary is the command started when Options.Binary is empty (looked
// up in PATH).
const DefaultBinary = "claude"

// BaseArgs returns the flags SDK mode always passes, before Options.Args.
func BaseArgs() []string {
	return []string{
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--permission-prompt-tool", "stdio",
		"--include-partial-messages",
	}
}

// Permission modes accepted by SetPermissionMode (Claude Code's own names).
const (
	ModeDefault           = "default"
	ModeAcceptEdits       = "acceptEdits"
	ModeBypassPermissions = "bypassPermissions"
	ModePlan              = "plan"
	ModeDontAsk           = "dontAsk"
)

// Errors callers branch on.
var (
	// ErrExited: the CLI is gone; nothing more can be sent or awaited.
	ErrExited = errors.New("claude exited")
	// ErrUnknownRequest: Respond named a can_use_tool request that was never
	// received, or that the CLI cancelled.
	ErrUnknownRequest = errors.New("unknown permission request")
	// ErrAnswered: the request was answered already (the first answer wins).
	ErrAnswered = errors.New("permission request already answered")
	// ErrCancelled: the CLI withdrew the request (control_cancel_request).
	ErrCancelled = errors.New("permission request cancelled by claude")
	// ErrUnknownMode: SetPermissionMode got a mode Claude Code does not name.
	ErrUnknownMode = errors.New("unknown permission mode")
	// ErrControl: the CLI answered one of our control requests with an
	// error (see *ControlError).
	ErrControl = errors.New("control request failed")
)

// ControlError is the CLI's error answer to one of our control requests.
type ControlError struct {
	Subtype string // the request's subtype ("interrupt", …)
	Message string // the CLI's error text
}

func (e *ControlError) Error() string {
	return fmt.Sprintf("claude refused %s: %s", e.Subtype, e.Message)
}

// Unwrap makes errors.Is(err, ErrControl) true.
func (e *ControlError) Unwrap() error { return ErrControl }

// Options configure Start.
type Options struct {
	// Binary is the claude executable (a path, or a name looked up in
	// PATH); DefaultBinary when empty.
	Binary string
	// Args are passed after BaseArgs unchanged (--model, --resume <id>,
	// --settings <file>, …).
	Args []string
	// Env is the whole environment of the CLI; nil means this process's.
	Env []string
	// Dir is the working folder of the CLI; "" means this process's.
	Dir string
	// Record, when set, receives a traffic log of the session.
	Record io.Writer
	// StderrLine is called with each line the CLI writes on stderr
	// (without the newline), for the log. Nil discards them (they are still
	// recorded).
	StderrLine func(line string)
	// MaxLine bounds one stdout line in bytes; 0 means no limit. Longer
	// lines become Output events with Line.Oversize set.
	MaxLine int
	// Grace is how long Close waits for the CLI to exit after closing its
	// stdin, and the SIGTERM→SIGKILL delay after that; proc.DefaultGrace
	// when zero.
	Grace time.Duration
	// Now stamps traffic log records; time.Now when nil.
	Now func() time.Time
}

// Event is what the Client reports, in stdout order (closed union):
// *Output, *PermissionRequest, *PermissionCancelled, *Refused, *Exited.
type Event interface{ isEvent() }

// Output is one line of the CLI's stdout, every line including control
// messages. Line.Data is owned by the event. Control is set on a line of
// the control protocol (control_request, control_response,
// control_cancel_request) that this client handled: what it means comes as
// the events that follow it, so a decoder of the transcript skips it.
type Output struct {
	Line    linereader.Line
	Control bool
}

// PermissionRequest is a can_use_tool control request: the CLI waits until
// Respond is called with its RequestID (or it cancels the request). It
// follows the Output event of the same line.
type PermissionRequest struct {
	RequestID   string
	ToolName    string          // "Bash", "Edit", "mcp__server__tool", …
	DisplayName string          // as the CLI would show it; may be empty
	Input       json.RawMessage // the tool input (a JSON object)
	ToolUseID   string          // the tool_use block id; may be empty
	Description string
	BlockedPath string
	// DecisionReason is Claude's reason for asking, when it sent one as a
	// string (anything else is left out).
	DecisionReason string
	AgentID        string          // set when a subagent asks
	Suggestions    json.RawMessage // permission_suggestions as sent (a JSON array), nil when absent
}

// PermissionCancelled says the CLI withdrew a can_use_tool request (the turn
// was interrupted); answering it is no longer possible.
type PermissionCancelled struct {
	RequestID string
}

// Refused reports a control request from the CLI that we answered with an
// error response (unknown subtype, unusable fields) or could not answer at
// all (no request id). Reason says why; Drop is the class of the refusal
// for a Dropped record (agent.DropUnknownType for a subtype this client does
// not serve, agent.DropMissingID, agent.DropInvalidField).
type Refused struct {
	RequestID string
	Subtype   string
	Reason    string
	Drop      agent.DropReason
}

// Exited is the last event: the CLI ended. State is its exit state; Err is
// what waiting for it reported (nil for a clean exit code 0). Stderr is
// the last lines the CLI wrote on stderr (at most StderrTail lines, each
// cut to 512 bytes): what it said when it refused its arguments or failed.
type Exited struct {
	State  *os.ProcessState
	Err    error
	Stderr []string
}

// StderrTail is how many of the CLI's last stderr lines Exited keeps.
const StderrTail = 20

func (*Output) isEvent()              {}
func (*PermissionRequest) isEvent()   {}
func (*PermissionCancelled) isEvent() {}
func (*Refused) isEvent()             {}
func (*Exited) isEvent()              {}

// Answer is the canonical answer to a permission request (see package
// perm), translated for can_use_tool as the decision table of docs/ARCHITECTURE.md says:
//
//	once   → {"behavior":"allow","updatedInput":…}
//	always → {"behavior":"allow","updatedInput":…,"updatedPermissions":<the request's suggestions>}
//	reject → {"behavior":"deny","message":…}
//	Abort  → {"behavior":"deny","message":…,"interrupt":true}, then an interrupt control request
type Answer = perm.Answer

// permState is one can_use_tool request: while settled is nil Claude
// waits for its answer; then settled says why it no longer does
// (ErrAnswered, ErrCancelled).
type permState struct {
	input       json.RawMessage
	suggestions json.RawMessage
	settled     error
}

type waiter struct {
	subtype string
	ch      chan controlResult
}

type controlResult struct {
	response json.RawMessage
	err      error
}

// Client is a running Claude Code CLI in SDK mode. Its methods are safe for
// concurrent use.
type Client struct {
	opts  Options
	proc  *proc.Process
	stdin *os.File
	rec   *trafficlog.Writer
	q     *queue.Unbounded[Event] // Events: the routing of control responses never waits for the consumer

	wmu sync.Mutex // serialises stdin writes (and their records)

	mu      sync.Mutex
	nextID  int
	waiters map[string]waiter
	// perms holds every can_use_tool request of the session by request id,
	// open or settled: the one table of what Claude waits for.
	perms   map[string]*permState
	exited  bool          // the CLI is gone
	done    chan struct{} // the CLI exited and everything was read
	state   *os.ProcessState
	waitErr error
	stderr  []string // the last StderrTail lines

	closeOnce sync.Once
}

// Start launches the CLI and returns at once; call Initialize next.
// Cancelling ctx ends the CLI's process group. Errors: proc.ErrNotStarted
// (wrapped) when it cannot be launched.
func Start(ctx context.Context, opts Options) (*Client, error) {
	if opts.Binary == "" {
		opts.Binary = DefaultBinary
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Grace <= 0 {
		opts.Grace = proc.DefaultGrace
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start claude: stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("start claude: stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("start claude: stderr pipe: %w", err)
	}
	cmd := exec.Command(opts.Binary, append(BaseArgs(), opts.Args...)...)
	cmd.Env = opts.Env
	cmd.Dir = opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	p, err := proc.Start(ctx, cmd, proc.Options{Grace: opts.Grace})
	closeAll(inR, outW, errW) // the child's ends
	if err != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("start claude: %w", err)
	}
	c := &Client{
		opts:    opts,
		proc:    p,
		stdin:   inW,
		q:       queue.New[Event](),
		waiters: map[string]waiter{},
		perms:   map[string]*permState{},
		done:    make(chan struct{}),
	}
	if opts.Record != nil {
		c.rec = trafficlog.NewWriter(opts.Record, opts.Now)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); c.readStdout(outR) }()
	go func() { defer readers.Done(); c.readStderr(errR) }()
	go c.finish(&readers, outR, errR)
	return c, nil
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// Pid is the CLI's process id (and process group id).
func (c *Client) Pid() int { return c.proc.Pid() }

// Events delivers what the CLI does, in order; it is closed after the
// Exited event (or when Close is called). Events are queued without bound
// between the pipe and this channel, so a slow consumer never blocks the
// routing of control responses.
func (c *Client) Events() <-chan Event { return c.q.Out() }

// Done is closed when the CLI has exited and all its output was read.
func (c *Client) Done() <-chan struct{} { return c.done }

// Initialize sends the initialize control request and returns the CLI's
// answer (commands, models, account, …) as sent.
func (c *Client) Initialize(ctx context.Context) (json.RawMessage, error) {
	p, err := c.SendInitialize(ctx)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// SendInitialize sends the initialize control request without waiting for
// the answer, so that the first prompt can follow at once (the CLI answers
// initialize only when it is ready).
func (c *Client) SendInitialize(ctx context.Context) (*Pending, error) {
	return c.begin(ctx, "initialize", initializeRequest{Subtype: "initialize"})
}

// Interrupt asks the CLI to stop the current turn.
func (c *Client) Interrupt(ctx context.Context) error {
	_, err := c.request(ctx, "interrupt", plainRequest{Subtype: "interrupt"})
	return err
}

// SetPermissionMode switches Claude's permission mode (one of the Mode*
// constants); ErrUnknownMode for anything else.
func (c *Client) SetPermissionMode(ctx context.Context, mode string) error {
	switch mode {
	case ModeDefault, ModeAcceptEdits, ModeBypassPermissions, ModePlan, ModeDontAsk:
	default:
		return fmt.Errorf("set permission mode: %w %q", ErrUnknownMode, mode)
	}
	_, err := c.request(ctx, "set_permission_mode", modeRequest{Subtype: "set_permission_mode", Mode: mode})
	return err
}

// SendUser sends a text prompt as a user message.
func (c *Client) SendUser(ctx context.Context, text string) error {
	type textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	content, err := json.Marshal([]textBlock{{"text", text}})
	if err != nil {
		return fmt.Errorf("send prompt: %w", err)
	}
	return c.SendUserContent(ctx, content)
}

// SendUserContent sends a user message whose content is the given JSON
// array of Anthropic content blocks (text, image, …).
func (c *Client) SendUserContent(ctx context.Context, content json.RawMessage) error {
	if !json.Valid(content) || !bytes.HasPrefix(bytes.TrimSpace(content), []byte("[")) {
		return fmt.Errorf("send prompt: content is not a JSON array")
	}
	msg := struct {
		Type            string  `json:"type"`
		Message         any     `json:"message"`
		ParentToolUseID *string `json:"parent_tool_use_id"`
		SessionID       string  `json:"session_id"`
	}{
		Type: "user",
		Message: struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}{"user", content},
	}
	return c.send(ctx, msg)
}

// Respond answers the can_use_tool request requestID (see Answer for the
// translation). The first answer wins: a second one gets ErrAnswered, an
// request the CLI cancelled ErrCancelled, an unknown one ErrUnknownRequest,
// an invalid decision agent.ErrUnknownDecision (nothing is sent then).
func (c *Client) Respond(ctx context.Context, requestID string, a Answer) error {
	v, err := a.Verdict()
	if err != nil {
		return fmt.Errorf("answer permission request %s: %w", requestID, err)
	}
	c.mu.Lock()
	p := c.perms[requestID]
	open := p != nil && p.settled == nil && !c.exited
	var settled error
	switch {
	case open:
		p.settled = ErrAnswered
	case c.exited:
		settled = ErrExited
	case p == nil:
		settled = ErrUnknownRequest
	default:
		settled = p.settled
	}
	c.mu.Unlock()
	if !open {
		return fmt.Errorf("answer permission request %s: %w", requestID, settled)
	}
	reply := permissionResult{Behavior: "deny", Message: v.Message, Interrupt: v.Interrupt}
	if v.Allow {
		reply = permissionResult{Behavior: "allow", UpdatedInput: p.input}
		if v.UpdatedInput != nil {
			reply.UpdatedInput = v.UpdatedInput
		}
		if v.Always && perm.HasSuggestions(p.suggestions) {
			reply.UpdatedPermissions = p.suggestions
		}
	}
	err = c.send(ctx, controlResponseMsg{
		Type:     "control_response",
		Response: controlResponseBody{Subtype: "success", RequestID: requestID, Response: reply},
	})
	if err != nil {
		return fmt.Errorf("answer permission request %s: %w", requestID, err)
	}
	if a.Abort {
		if err := c.Interrupt(ctx); err != nil {
			return fmt.Errorf("abort turn after permission request %s: %w", requestID, err)
		}
	}
	return nil
}

// permissionResult is the can_use_tool answer on the wire.
type permissionResult struct {
	Behavior           string          `json:"behavior"`
	UpdatedInput       json.RawMessage `json:"updatedInput,omitempty"`
	UpdatedPermissions json.RawMessage `json:"updatedPermissions,omitempty"`
	Message            string          `json:"message,omitempty"`
	Interrupt          bool            `json:"interrupt,omitempty"`
}

// Close ends the session: it closes the CLI's stdin (the CLI exits at end
// of input), waits up to the grace period, then ends its process group
// (SIGTERM, SIGKILL). It returns the exit state. Events still queued are
// dropped; read Events until it closes before calling Close to get them all.
func (c *Client) Close() (*os.ProcessState, error) {
	c.closeOnce.Do(func() {
		c.wmu.Lock()
		_ = c.stdin.Close()
		c.wmu.Unlock()
		t := time.NewTimer(c.opts.Grace)
		select {
		case <-c.done:
		case <-t.C:
			_ = c.proc.Stop()
		}
		t.Stop()
		<-c.done
		go func() { // what nobody read is dropped
			for range c.q.Out() {
			}
		}()
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.waitErr
}

// Wait blocks until the CLI has exited and its output was read, and returns
// its exit state.
func (c *Client) Wait() (*os.ProcessState, error) {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state, c.waitErr
}

// controlRequestMsg is one of our control requests on the wire.
type controlRequestMsg struct {
	Type      string `json:"type"`
	RequestID string `json:"request_id"`
	Request   any    `json:"request"`
}

type initializeRequest struct {
	Subtype string    `json:"subtype"`
	Hooks   *struct{} `json:"hooks"` // always null: hooks are not registered over this channel
}

type modeRequest struct {
	Subtype string `json:"subtype"`
	Mode    string `json:"mode"`
}

type plainRequest struct {
	Subtype string `json:"subtype"`
}

type controlResponseMsg struct {
	Type     string              `json:"type"`
	Response controlResponseBody `json:"response"`
}

type controlResponseBody struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Response  any    `json:"response,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Pending is a control request that was sent and waits for its response.
type Pending struct {
	c  *Client
	id string
	w  waiter
}

// Wait blocks until the CLI answers the request, the CLI exits (ErrExited)
// or ctx ends. An error answer is a *ControlError.
func (p *Pending) Wait(ctx context.Context) (json.RawMessage, error) {
	select {
	case r := <-p.w.ch:
		return r.response, r.err
	case <-ctx.Done():
		p.c.mu.Lock()
		delete(p.c.waiters, p.id)
		p.c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", p.w.subtype, ctx.Err())
	}
}

// request sends a control request and waits for its response.
func (c *Client) request(ctx context.Context, subtype string, req any) (json.RawMessage, error) {
	p, err := c.begin(ctx, subtype, req)
	if err != nil {
		return nil, err
	}
	return p.Wait(ctx)
}

// begin sends a control request and returns at once.
func (c *Client) begin(ctx context.Context, subtype string, req any) (*Pending, error) {
	c.mu.Lock()
	if c.exited {
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", subtype, ErrExited)
	}
	c.nextID++
	id := "req_" + subtype + "_" + strconv.Itoa(c.nextID)
	w := waiter{subtype: subtype, ch: make(chan controlResult, 1)}
	c.waiters[id] = w
	c.mu.Unlock()
	if err := c.send(ctx, controlRequestMsg{Type: "control_request", RequestID: id, Request: req}); err != nil {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
		return nil, fmt.Errorf("%s: %w", subtype, err)
	}
	return &Pending{c: c, id: id, w: w}, nil
}

// send writes one message line on the CLI's stdin and records it.
func (c *Client) send(ctx context.Context, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.stdin.SetWriteDeadline(dl)
		defer func() { _ = c.stdin.SetWriteDeadline(time.Time{}) }()
	}
	stop := context.AfterFunc(ctx, func() { _ = c.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	// Recorded before it is written: once written, the CLI's reaction can
	// reach the stdout reader before this goroutine runs again.
	if c.rec != nil {
		_ = c.rec.Message(trafficlog.C2A, b)
	}
	if _, err := c.stdin.Write(append(b, '\n')); err != nil {
		if c.rec != nil {
			_ = c.rec.Text(trafficlog.Note, "the previous c2a message could not be written: "+err.Error())
		}
		if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			return fmt.Errorf("write to claude: %w", ErrExited)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("write to claude: %w", ctxErr)
		}
		return fmt.Errorf("write to claude: %w", err)
	}
	return nil
}

// push queues an event for delivery.
func (c *Client) push(ev Event) { c.q.Push(ev) }

// envelope is what the router reads of a stdout line.
type envelope struct {
	Type      string          `json:"type"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	Response  *struct {
		Subtype   string          `json:"subtype"`
		RequestID string          `json:"request_id"`
		Response  json.RawMessage `json:"response"`
		Error     string          `json:"error"`
	} `json:"response"`
}

type canUseTool struct {
	Subtype               string          `json:"subtype"`
	ToolName              string          `json:"tool_name"`
	DisplayName           string          `json:"display_name"`
	Input                 json.RawMessage `json:"input"`
	PermissionSuggestions json.RawMessage `json:"permission_suggestions"`
	BlockedPath           string          `json:"blocked_path"`
	Description           string          `json:"description"`
	DecisionReason        json.RawMessage `json:"decision_reason"`
	ToolUseID             string          `json:"tool_use_id"`
	AgentID               string          `json:"agent_id"`
}

var controlMarker = []byte(`"control_`)

func (c *Client) readStdout(r *os.File) {
	defer r.Close()
	lr, err := linereader.New(r, linereader.Options{MaxLine: c.opts.MaxLine})
	if err != nil {
		c.push(&Refused{Reason: "stdout reader: " + err.Error(), Drop: agent.DropInvalidField})
		_, _ = io.Copy(io.Discard, r)
		return
	}
	for {
		l, err := lr.Next()
		if err != nil {
			if pending := lr.PendingSize(); pending > 0 && c.rec != nil {
				_ = c.rec.Text(trafficlog.Note, fmt.Sprintf("stdout ended inside a line (%d bytes without newline)", pending))
			}
			if !errors.Is(err, io.EOF) && c.rec != nil {
				_ = c.rec.Text(trafficlog.Note, "stdout read error: "+err.Error())
			}
			return
		}
		l.Data = bytes.Clone(l.Data)
		c.record(l)
		// Route before the line is handed on: whoever decodes it may answer
		// a permission request at once, and the request must already be
		// known here. The events routing makes still follow the line.
		var later []Event
		control := false
		if !l.Oversize && bytes.Contains(l.Data, controlMarker) {
			control = c.route(l.Data, &later)
		}
		c.push(&Output{Line: l, Control: control})
		for _, e := range later {
			c.push(e)
		}
	}
}

// record writes one stdout line to the traffic log.
func (c *Client) record(l linereader.Line) {
	if c.rec == nil {
		return
	}
	switch {
	case l.Oversize:
		_ = c.rec.Text(trafficlog.Note, fmt.Sprintf("stdout line %d of %d bytes exceeds the limit, skipped", l.Number, l.Size))
	case len(bytes.TrimSpace(l.Data)) == 0:
	case json.Valid(l.Data):
		_ = c.rec.Message(trafficlog.A2C, l.Data)
	default:
		_ = c.rec.Text(trafficlog.Note, "stdout line "+strconv.FormatInt(l.Number, 10)+" is not JSON: "+string(linereader.Prefix(l.Data, linereader.PrefixSize)))
	}
}

// route handles the control protocol part of a stdout line. It reports
// whether the line was a control message (then handled here).
func (c *Client) route(line []byte, out *[]Event) bool {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		return false // the decoder drops it; nothing to answer
	}
	switch env.Type {
	case "control_response":
		if env.Response == nil {
			return true
		}
		c.mu.Lock()
		w, ok := c.waiters[env.Response.RequestID]
		delete(c.waiters, env.Response.RequestID)
		c.mu.Unlock()
		if !ok {
			return true
		}
		if env.Response.Subtype == "success" {
			w.ch <- controlResult{response: env.Response.Response}
		} else {
			msg := env.Response.Error
			if msg == "" {
				msg = "response subtype " + strconv.Quote(env.Response.Subtype)
			}
			w.ch <- controlResult{err: &ControlError{Subtype: w.subtype, Message: msg}}
		}
	case "control_cancel_request":
		c.mu.Lock()
		p := c.perms[env.RequestID]
		open := p != nil && p.settled == nil
		if open {
			p.settled = ErrCancelled
		}
		c.mu.Unlock()
		if open {
			*out = append(*out, &PermissionCancelled{RequestID: env.RequestID})
		}
	case "control_request":
		c.controlRequest(env, out)
	default:
		return false
	}
	return true
}

func (c *Client) controlRequest(env envelope, out *[]Event) {
	var req canUseTool
	if len(env.Request) == 0 || json.Unmarshal(env.Request, &req) != nil {
		c.refuse(out, env.RequestID, "", agent.DropInvalidField, "request is not a JSON object")
		return
	}
	if env.RequestID == "" {
		*out = append(*out, &Refused{Subtype: req.Subtype, Reason: "control request without request_id (cannot be answered)", Drop: agent.DropMissingID})
		return
	}
	if req.Subtype != "can_use_tool" {
		c.refuse(out, env.RequestID, req.Subtype, agent.DropUnknownType, "unsupported control request subtype "+strconv.Quote(req.Subtype))
		return
	}
	if req.ToolName == "" {
		c.refuse(out, env.RequestID, req.Subtype, agent.DropMissingID, "can_use_tool without tool_name")
		return
	}
	in := bytes.TrimSpace(req.Input)
	if len(in) == 0 || in[0] != '{' {
		c.refuse(out, env.RequestID, req.Subtype, agent.DropInvalidField, "can_use_tool input is not a JSON object")
		return
	}
	c.mu.Lock()
	c.perms[env.RequestID] = &permState{input: req.Input, suggestions: req.PermissionSuggestions}
	c.mu.Unlock()
	var sugg json.RawMessage
	if s := bytes.TrimSpace(req.PermissionSuggestions); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		sugg = req.PermissionSuggestions
	}
	var reason string
	_ = json.Unmarshal(req.DecisionReason, &reason) // a string, or left out
	*out = append(*out, &PermissionRequest{
		RequestID:      env.RequestID,
		ToolName:       req.ToolName,
		DisplayName:    req.DisplayName,
		Input:          req.Input,
		ToolUseID:      req.ToolUseID,
		Description:    req.Description,
		BlockedPath:    req.BlockedPath,
		DecisionReason: reason,
		AgentID:        req.AgentID,
		Suggestions:    sugg,
	})
}

// refuse answers a control request with an error response and reports it.
func (c *Client) refuse(out *[]Event, id, subtype string, drop agent.DropReason, reason string) {
	*out = append(*out, &Refused{RequestID: id, Subtype: subtype, Reason: reason, Drop: drop})
	if id == "" {
		return
	}
	// Not from the stdout reader itself: a CLI blocked writing stdout while
	// we block writing its stdin would deadlock both.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.Grace)
		defer cancel()
		_ = c.send(ctx, controlResponseMsg{
			Type:     "control_response",
			Response: controlResponseBody{Subtype: "error", RequestID: id, Error: reason},
		})
	}()
}

func (c *Client) readStderr(r *os.File) {
	defer r.Close()
	lr, err := linereader.New(r, linereader.Options{MaxLine: 1 << 20})
	if err != nil {
		_, _ = io.Copy(io.Discard, r)
		return
	}
	for {
		l, err := lr.Next()
		if err != nil {
			if p := lr.Pending(); len(p) > 0 {
				c.stderrLine(string(p))
			}
			return
		}
		c.stderrLine(string(l.Data))
	}
}

func (c *Client) stderrLine(s string) {
	c.mu.Lock()
	if len(c.stderr) == StderrTail {
		c.stderr = append(c.stderr[:0], c.stderr[1:]...)
	}
	c.stderr = append(c.stderr, agent.CutUTF8(s, 512))
	c.mu.Unlock()
	if c.rec != nil {
		_ = c.rec.Text(trafficlog.Stderr, s)
	}
	if c.opts.StderrLine != nil {
		c.opts.StderrLine(s)
	}
}

// OutputDrain bounds how long, once the CLI's process group has ended,
// the client waits for its stdout and stderr to reach end of file. A
// descendant that left the group (setsid) and inherited them can hold them
// open; after OutputDrain our ends are closed (what was not read by then is
// lost) and the exit is reported.
const OutputDrain = 2 * time.Second

// finish waits for the process and the pipes (the pipes at most
// OutputDrain after the process), then reports the exit.
func (c *Client) finish(readers *sync.WaitGroup, out, errOut *os.File) {
	st, err := c.proc.Wait()
	drained := make(chan struct{})
	go func() {
		readers.Wait()
		close(drained)
	}()
	t := time.NewTimer(OutputDrain)
	select {
	case <-drained:
	case <-t.C:
		if c.rec != nil {
			_ = c.rec.Text(trafficlog.Note, fmt.Sprintf("the CLI exited but its stdout or stderr was still open %v later (a detached descendant?); closed them", OutputDrain))
		}
		_ = out.Close()
		_ = errOut.Close()
		<-drained
	}
	t.Stop()
	c.mu.Lock()
	c.exited = true
	c.state, c.waitErr = st, err
	tail := append([]string(nil), c.stderr...)
	waiters := c.waiters
	c.waiters = map[string]waiter{}
	c.mu.Unlock()
	for _, w := range waiters {
		w.ch <- controlResult{err: fmt.Errorf("%s: %w", w.subtype, ErrExited)}
	}
	if c.rec != nil {
		code, sig := exitOf(st)
		_ = c.rec.Exit(code, sig)
	}
	// stdin is closed before the exit is reported: whoever sees Exited
	// and still sends gets ErrExited for a closed pipe, never a write to a
	// pipe nobody reads.
	c.wmu.Lock()
	_ = c.stdin.Close()
	c.wmu.Unlock()
	c.push(&Exited{State: st, Err: err, Stderr: tail})
	c.q.Close()
	close(c.done)
}

// exitOf splits an exit state into a code or a signal name.
func exitOf(st *os.ProcessState) (*int, string) {
	if st == nil {
		return nil, ""
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, signalName(ws.Signal())
	}
	code := st.ExitCode()
	return &code, ""
}
