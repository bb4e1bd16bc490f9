package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// Errors callers branch on.
var (
	// ErrClosed: the session is closed or the agent exited.
	ErrClosed = rpcagent.ErrClosed
	// ErrNoPendingRequest: Decide for a call that waits for no answer.
	ErrNoPendingRequest = rpcagent.ErrNoPendingRequest
	// ErrAuthRequired: the agent wants authentication and no method was
	// configured (the error lists the methods it offers).
	ErrAuthRequired = errors.New("acp: the agent requires authentication")
	// ErrUnsupported: the agent does not advertise what was asked for (an
	// image prompt, an MCP transport, continuing a session, a mode).
	ErrUnsupported = errors.New("acp: not supported by the agent")
)

// DefaultCancelGrace is the default of Options.CancelGrace.
const DefaultCancelGrace = 20 * time.Second

// Options configure an ACP session.
type Options struct {
	// Settings are the options every JSON-RPC adapter takes: client name
	// and version, call timeout (every request but the prompt itself,
	// which ends when the agent says so), stop grace, traffic log, logger
	// and clock.
	rpcagent.Settings
	// Command is the agent's argv: {"gemini", "--acp"}, {"opencode", "acp"}, …
	Command []string
	// Env is added to this process's environment for the agent.
	Env []string
	// Cwd is the session's working folder (absolute): the agent's cwd, the
	// folder fs requests are confined to, the default of terminals.
	Cwd string
	// MCPServers are passed to session/new (or load/resume).
	MCPServers []MCPServer
	// LoadSessionID continues an existing session instead of starting
	// one: session/resume when the agent advertises it (nothing is
	// replayed), else session/load, which replays the conversation. An
	// agent that offers neither gives ErrUnsupported.
	LoadSessionID string
	// HistoryKnown says the transcript holds LoadSessionID's conversation
	// already (happy resume continues the same relay session): what
	// session/load replays is left out of Events, counted and logged.
	// Without it the replay is decoded into the transcript (a new relay
	// session that starts from the agent's session).
	HistoryKnown bool
	// Mode, when set, is selected with session/set_mode once the session
	// is open (it must be one of the modes the agent lists).
	Mode string
	// AuthMethod is the authentication method used when the agent answers
	// session/new with "authentication required".
	AuthMethod string
	// NoFS and NoTerminal withhold the fs and terminal client
	// capabilities.
	NoFS, NoTerminal bool
	// MaxRead bounds fs/read_text_file (bytes); 0 means DefaultMaxRead.
	MaxRead int64
	// CancelGrace is how long the agent gets to end a cancelled turn
	// before happy gives the turn up and restarts the agent; 0 means
	// DefaultCancelGrace.
	CancelGrace time.Duration
}

// Client is a live ACP session: it starts the agent, opens a session,
// sends prompts, answers permission requests, serves fs and terminal
// requests, cancels turns, and publishes what happens as agent events on
// Events. The frames go through the same decoder as `happy replay`, so a
// recorded session replays to the same events.
//
// Turns never overlap: a prompt sent while a turn runs is queued and sent
// when the turn ends. Safe for concurrent use.
type Client struct {
	opts    Options
	s       *rpcagent.Session[Prompt, []PermissionOption]
	dec     *Decoder
	dir     *folder
	term    *terminals
	dirOnce sync.Once

	// lastUpdate is when the last session/update arrived (Unix ns, wall
	// clock): settleReplay waits for a load's replay to end.
	lastUpdate atomic.Int64

	mu        sync.Mutex
	info      AgentInfo
	sessionID string
	modes     []Mode
}

var _ rpcagent.Protocol[Prompt, []PermissionOption] = (*Client)(nil)

// Start starts the agent (Options.Command), initializes and opens the
// session. Cancelling ctx stops the agent. Errors: a *VersionError for a
// protocol version happy cannot speak, ErrAuthRequired, ErrUnsupported,
// the start error, or the handshake's error (the agent is stopped then).
func Start(ctx context.Context, opts Options) (*Client, error) {
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return nil, errors.New("acp: no agent command")
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = DefaultCancelGrace
	}
	dir, err := openFolder(opts.Cwd, opts.MaxRead)
	if err != nil {
		return nil, err
	}
	c := &Client{opts: opts, dec: NewDecoder(), dir: dir, term: newTerminals(dir, nil)}
	c.s = rpcagent.NewSession(rpcagent.SessionConfig{
		Config: rpcagent.Config{Settings: opts.Settings, Source: Source, Decoder: c.dec, Echo: echo, Handler: c,
			OnGone: c.gone},
		Grace:   opts.CancelGrace,
		OnClose: c.term.closeAll,
	}, rpcagent.Protocol[Prompt, []PermissionOption](c))
	if err := c.s.Launch(ctx, c.command()); err != nil {
		_ = c.s.Close()
		return nil, fmt.Errorf("acp: start %s: %w", opts.Command[0], err)
	}
	if err := c.handshake(ctx, opts.LoadSessionID, opts.HistoryKnown); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// command is the agent's process, in the session's folder.
func (c *Client) command() *exec.Cmd {
	cmd := exec.Command(c.opts.Command[0], c.opts.Command[1:]...)
	cmd.Dir = c.opts.Cwd
	cmd.Env = append(os.Environ(), c.opts.Env...)
	return cmd
}

// echo reports the events a session runner records itself: the prompt
// and the resolutions read back from happy's own frames (a prompt replayed
// by session/load comes from the agent and stays).
func echo(ev agent.Event, dir trafficlog.Dir) bool {
	switch ev.(type) {
	case *agent.UserPrompt, *agent.ToolResolved:
		return dir == trafficlog.C2A
	}
	return false
}

// gone runs when the agent is gone: its terminals end and the folder is
// released.
func (c *Client) gone() {
	c.term.closeAll()
	c.dirOnce.Do(func() { _ = c.dir.close() })
}

// Events delivers the session's agent events in order. It is closed after
// the agent exited (or Close) and every event was delivered.
func (c *Client) Events() <-chan agent.Event { return c.s.Events() }

// Prompt sends a prompt: at once when no turn runs, else queued behind the
// running turn (or behind the restart of an agent that did not end a
// cancelled turn). Errors: ErrClosed, ErrUnsupported for an attachment
// the agent cannot take, or the write error.
func (c *Client) Prompt(ctx context.Context, p Prompt) error {
	c.mu.Lock()
	info := c.info
	c.mu.Unlock()
	if _, err := promptBlocks(p, info); err != nil {
		return err
	}
	return c.s.Prompt(ctx, p)
}

// StartTurn implements rpcagent.Protocol: it sends turn n's session/prompt.
// The turn ends when the agent answers it (or the connection ends).
func (c *Client) StartTurn(_ context.Context, n int, p Prompt) error {
	c.mu.Lock()
	sid, info := c.sessionID, c.info
	c.mu.Unlock()
	blocks, err := promptBlocks(p, info)
	var pend *jsonrpc.Pending
	if err == nil {
		pend, err = c.s.Dispatch(context.Background(), "session/prompt", map[string]any{"sessionId": sid, "prompt": blocks})
	}
	if err != nil {
		return fmt.Errorf("acp: session/prompt: %w", err)
	}
	var skipped int
	c.s.WithDecoder(func() { skipped = c.dec.SkippedHistory() })
	if skipped > 0 {
		c.s.Logger().Info().Str("session", sid).Int("replayed_updates", skipped).
			Msg("session/load replayed the conversation: its updates were left out of the transcript, which holds them already")
	}
	go func() {
		// The turn lasts as long as the agent works: no timeout here.
		if err := pend.Wait(context.Background(), time.Duration(math.MaxInt64), nil); err != nil {
			var re *jsonrpc.RPCError
			if !errors.As(err, &re) {
				c.s.Logger().Debug().Err(err).Msg("prompt ended without a response")
			}
		}
		c.s.EndTurn(n)
	}()
	return nil
}

// TurnEnded implements rpcagent.Protocol; ACP keeps nothing per turn.
func (c *Client) TurnEnded(int) {}

// Interrupt cancels the running turn: session/cancel, then every pending
// permission is answered cancelled. The agent ends the turn; when it does
// not within CancelGrace, the turn is given up and the agent restarted.
// With no turn running it does nothing. Errors: ErrClosed, or the
// notification's write error.
func (c *Client) Interrupt(ctx context.Context) error {
	return c.s.Interrupt(ctx, fmt.Sprintf("the agent did not end the turn within %s of session/cancel", c.opts.CancelGrace))
}

// InterruptTurn implements rpcagent.Protocol: session/cancel once per
// turn, then every pending permission answered cancelled (the order the
// protocol asks for).
func (c *Client) InterruptTurn(ctx context.Context, _ int, first bool) error {
	var err error
	if first {
		c.mu.Lock()
		sid := c.sessionID
		c.mu.Unlock()
		err = c.s.Notify(ctx, "session/cancel", map[string]string{"sessionId": sid})
	}
	c.s.CancelPermissions(ctx, agent.ReasonCancelled)
	if err != nil {
		return fmt.Errorf("acp: session/cancel: %w", err)
	}
	return nil
}

// Abandon implements rpcagent.Protocol: turn n, which the agent did not end
// after session/cancel, is given up: a note ends it in the transcript, and
// the agent is restarted (its session loaded or resumed) so that the next
// prompt finds an agent that answers.
func (c *Client) Abandon(n int, reason string) {
	c.s.Note(happyNote{Happy: noteAbandoned, Reason: reason})
	c.s.Pause()
	c.s.EndTurn(n)
	c.restart()
}

// restart replaces the agent process and continues the session in the new
// one (session/resume or session/load, whose replay is left out; a new
// session when the agent can do neither). Queued prompts are sent once it is ready.
func (c *Client) restart() {
	c.s.Note(happyNote{Happy: noteRestart, Reason: "the agent did not end a cancelled turn"})
	c.mu.Lock()
	sid, info := c.sessionID, c.info
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.s.Settings().CallTimeout)
	defer cancel()
	err := c.s.Relaunch(context.Background(), c.command())
	if err == nil {
		if !info.LoadSession && !info.Resume {
			c.s.Logger().Warn().Msg("the agent can neither load nor resume a session: the restarted agent starts a new one")
			sid = ""
		}
		// The conversation is in the transcript: the load's replay is
		// left out.
		err = c.handshake(ctx, sid, true)
	}
	if err != nil {
		c.s.Logger().Error().Err(err).Msg("restart the agent")
		_ = c.Close()
		return
	}
	c.s.Resume()
}

// Decide answers the permission requests pending for tool call callID
// (every one: the agent may ask more than once for a call), choosing the
// option by kind (see Choose). A rejection with reason cancelled means the
// turn is being aborted: session/cancel goes first. Errors:
// ErrNoPendingRequest, ErrUnknownDecision, ErrNoOption (the requests stay
// pending), ErrClosed, or the write error.
func (c *Client) Decide(ctx context.Context, callID string, a Answer) error {
	ps, err := c.s.Take(callID, nil, func(opts []PermissionOption) error {
		_, err := Choose(opts, a)
		return err
	})
	if err != nil {
		return err
	}
	if _, running := c.s.Running(); running && a.Decision == agent.DecisionReject && a.Reason == agent.ReasonCancelled {
		if err := c.Interrupt(ctx); err != nil {
			c.s.Logger().Warn().Err(err).Msg("cancel the turn")
		}
	}
	var errs []error
	for _, p := range ps {
		o, _ := Choose(p.Data, a)
		errs = append(errs, c.answer(ctx, p, o, a.Decision, a.Reason))
	}
	return errors.Join(errs...)
}

// Cancel implements rpcagent.Protocol: the request is answered cancelled,
// with the reason in the decision note.
func (c *Client) Cancel(ctx context.Context, p *rpcagent.Permission[[]PermissionOption], reason string) error {
	return c.answer(ctx, p, Outcome{Cancelled: true}, agent.DecisionReject, reason)
}

// answer writes the decision note, then the response.
func (c *Client) answer(ctx context.Context, p *rpcagent.Permission[[]PermissionOption], o Outcome, d agent.Decision, reason string) error {
	id, _ := json.Marshal(p.In.ID)
	c.s.Note(happyNote{Happy: noteDecision, Request: id, Decision: string(d), Reason: reason})
	if err := p.In.Reply(ctx, o.JSON()); err != nil {
		return fmt.Errorf("acp: answer permission request %s: %w", p.In.ID, err)
	}
	return nil
}

// Handle implements jsonrpc.Handler: the agent's requests (the decoder
// already turned the frame into events).
func (c *Client) Handle(ctx context.Context, in *jsonrpc.Incoming) {
	if in.Notif {
		switch in.Method {
		case "$/cancel_request":
			c.withdraw(ctx, in)
		case "session/update":
			c.lastUpdate.Store(time.Now().UnixNano())
		}
		return
	}
	switch in.Method {
	case "session/request_permission":
		var callID string
		var opts []PermissionOption
		var ok bool
		c.s.WithDecoder(func() { callID, opts, ok = c.dec.PermissionCall(in.ID) })
		if !ok {
			_ = in.Fail(ctx, jsonrpc.CodeInvalidParams, "happy: malformed permission request")
			return
		}
		c.s.Ask(ctx, callID, in, opts)
	case "fs/read_text_file", "fs/write_text_file":
		if c.opts.NoFS {
			_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not offer "+in.Method)
			return
		}
		go c.serveFS(context.WithoutCancel(ctx), in)
	case "terminal/create", "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release":
		if c.opts.NoTerminal {
			_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not offer "+in.Method)
			return
		}
		go c.serveTerminal(context.WithoutCancel(ctx), in)
	default:
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not support "+in.Method)
	}
}

// withdraw handles $/cancel_request: a pending permission request the
// agent no longer needs is answered with "request cancelled".
func (c *Client) withdraw(ctx context.Context, in *jsonrpc.Incoming) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(in.Params, &p) != nil {
		return
	}
	if id, ok := jsonrpc.ParseID(p.RequestID); ok {
		if found := c.s.Withdraw(id); found != nil {
			_ = found.In.Fail(ctx, codeRequestCancelled, "request cancelled")
		}
	}
}

// Close stops the session: pending permissions are answered cancelled,
// terminals are ended, the agent's stdin is closed and, after StopGrace,
// its process group ended. It waits until every event was delivered (the
// consumer must keep reading Events). An open turn ends agent-exited.
func (c *Client) Close() error { return c.s.Close() }
