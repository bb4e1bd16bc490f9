package acp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/queue"
)

// Errors callers branch on.
var (
	// ErrClosed: the session is closed or the agent exited.
	ErrClosed = errors.New("acp: session closed")
	// ErrNoPendingRequest: Decide for a call that waits for no answer.
	ErrNoPendingRequest = errors.New("acp: no pending permission request for this call")
	// ErrAuthRequired: the agent wants authentication and no method was
	// configured (the error lists the methods it offers).
	ErrAuthRequired = errors.New("acp: the agent requires authentication")
	// ErrUnsupported: the agent does not advertise what was asked for (an
	// image prompt, an MCP transport, continuing a session, a mode).
	ErrUnsupported = errors.New("acp: not supported by the agent")
)

// Defaults of Options.
const (
	DefaultCallTimeout = 60 * time.Second
	DefaultCancelGrace = 20 * time.Second
	DefaultStopGrace   = 2 * time.Second
)

// EnvVar is an environment variable (schema EnvVariable).
type EnvVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Header is an HTTP header (schema HttpHeader).
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MCPServer is an MCP server the agent should connect to (schema
// McpServer): a stdio server (Command, Args, Env) or, with Type "http" or
// "sse", a remote one (URL, Headers). It marshals to the schema's shape.
type MCPServer struct {
	Name    string   `json:"name"`
	Type    string   `json:"type,omitempty"` // "" (stdio), "http", "sse"
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	Env     []EnvVar `json:"env,omitempty"`
	URL     string   `json:"url,omitempty"`
	Headers []Header `json:"headers,omitempty"`
}

func (s MCPServer) wire() map[string]any {
	if s.Type == "" {
		args, env := s.Args, s.Env
		if args == nil {
			args = []string{}
		}
		if env == nil {
			env = []EnvVar{}
		}
		return map[string]any{"name": s.Name, "command": s.Command, "args": args, "env": env}
	}
	h := s.Headers
	if h == nil {
		h = []Header{}
	}
	return map[string]any{"type": s.Type, "name": s.Name, "url": s.URL, "headers": h}
}

// Options configure an ACP session.
type Options struct {
	// Command is the agent's argv: {"gemini", "--acp"}, {"opencode", "acp"}, …
	Command []string
	// Env is added to this process's environment for the agent.
	Env []string
	// Cwd is the session's working folder (absolute): the agent's cwd, the
	// folder fs requests are confined to, the default of terminals.
	Cwd string
	// MCPServers are passed to session/new (or load/resume).
	MCPServers []MCPServer
	// LoadSessionID continues an existing session (session/load, else
	// session/resume) instead of starting one.
	LoadSessionID string
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
	// ClientName and ClientVersion identify happy to the agent.
	ClientName, ClientVersion string
	// CallTimeout bounds every request but the prompt itself (which ends
	// when the agent says so); 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// CancelGrace is how long the agent gets to end a cancelled turn
	// before happy gives the turn up and restarts the agent; 0 means
	// DefaultCancelGrace.
	CancelGrace time.Duration
	// StopGrace is how long the agent gets to exit after its stdin closed
	// before its process group is ended; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Record, when set, receives the traffic log of the session.
	Record io.Writer
	// Logger receives diagnostics (the agent's stderr included).
	Logger zerolog.Logger
	// Now is the clock of frames; nil means time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = DefaultCancelGrace
	}
	if o.StopGrace <= 0 {
		o.StopGrace = DefaultStopGrace
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

// Prompt is one user prompt: text and attachments (data:, file:// or
// http(s) URLs).
type Prompt struct {
	Text  string
	Files []agent.PromptFile
}

// AuthMethod is an authentication method the agent offers.
type AuthMethod struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Mode is a session mode the agent offers.
type Mode struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// AgentInfo is what the agent said about itself in initialize.
type AgentInfo struct {
	Name, Version   string
	ProtocolVersion int64
	LoadSession     bool
	Resume          bool
	Image, Audio    bool
	EmbeddedContext bool
	MCPHTTP, MCPSSE bool
	AuthMethods     []AuthMethod
}

// Client is a live ACP session: it starts the agent, opens a session,
// sends prompts, answers permission requests, serves fs and terminal
// requests, cancels turns, and publishes what happens as agent events on
// Events. The frames go through the same decoder as `happy replay`, so a
// recorded session replays to the same transcript.
//
// Turns never overlap: a prompt sent while a turn runs is queued and sent
// when the turn ends. Safe for concurrent use.
type Client struct {
	opts Options
	q    *queue.Unbounded[agent.Event]
	dir  *folder
	term *terminals

	decMu  sync.Mutex
	dec    *Decoder
	heldMu sync.Mutex
	held   []agent.Event

	mu         sync.Mutex
	conn       *jsonrpc.Conn
	proc       *jsonrpc.Process
	gen        int
	info       AgentInfo
	sessionID  string
	modes      []Mode
	active     bool // a turn is starting or running
	cancelled  bool // session/cancel was sent for it
	turnGen    int  // increments per turn, to match late completions
	giveUp     *time.Timer
	queue      []Prompt
	pending    map[string][]*pendingPermission // by call id, oldest first
	closed     bool
	restarting bool
	dirOnce    sync.Once
}

type pendingPermission struct {
	in      *jsonrpc.Incoming
	options []PermissionOption
}

// Start starts the agent (Options.Command), initializes and opens the
// session. Cancelling ctx stops the agent. Errors: a *VersionError for a
// protocol version happy cannot speak, ErrAuthRequired, ErrUnsupported,
// the start error, or the handshake's error (the agent is stopped then).
func Start(ctx context.Context, opts Options) (*Client, error) {
	opts.defaults()
	if len(opts.Command) == 0 || opts.Command[0] == "" {
		return nil, errors.New("acp: no agent command")
	}
	c, err := newClient(opts)
	if err != nil {
		return nil, err
	}
	if err := c.launch(ctx); err != nil {
		c.release()
		return nil, err
	}
	if err := c.handshake(ctx, opts.LoadSessionID); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func newClient(opts Options) (*Client, error) {
	dir, err := openFolder(opts.Cwd, opts.MaxRead)
	if err != nil {
		return nil, err
	}
	return &Client{
		opts: opts, q: queue.New[agent.Event](), dir: dir, term: newTerminals(dir, nil),
		dec: NewDecoder(DecoderOptions{Live: true}), pending: map[string][]*pendingPermission{},
	}, nil
}

// release frees what newClient opened when Start fails before launch.
func (c *Client) release() {
	_ = c.dir.close()
	c.q.Close()
}

func (c *Client) connOptions() jsonrpc.Options {
	o := jsonrpc.Options{
		CallTimeout: c.opts.CallTimeout,
		Source:      Source,
		Tap:         c.tap,
		Logger:      c.opts.Logger,
		Now:         c.opts.Now,
	}
	if c.opts.Record != nil {
		o.Recorder = jsonrpc.TrafficRecorder(c.opts.Record)
	}
	return o
}

// launch starts the agent process and connects to it.
func (c *Client) launch(ctx context.Context) error {
	cmd := exec.Command(c.opts.Command[0], c.opts.Command[1:]...)
	cmd.Dir = c.opts.Cwd
	cmd.Env = append(os.Environ(), c.opts.Env...)
	ready := make(chan struct{})
	p, err := jsonrpc.Start(ctx, cmd, c.gated(ready), c.connOptions())
	if err != nil {
		close(ready)
		return fmt.Errorf("acp: start %s: %w", c.opts.Command[0], err)
	}
	c.mu.Lock()
	c.conn, c.proc = p.Conn, p
	c.gen++
	gen := c.gen
	c.mu.Unlock()
	close(ready)
	go func() {
		<-p.Exited()
		c.mu.Lock()
		current := gen == c.gen && !c.restarting
		c.mu.Unlock()
		if current {
			c.shutdown()
		}
	}()
	return nil
}

// gated hands requests to Handle once the connection is fully built: a
// reply must not race with the connection's construction (the wire
// connection starts reading before jsonrpc.New returns).
func (c *Client) gated(ready <-chan struct{}) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, in *jsonrpc.Incoming) {
		<-ready
		c.Handle(ctx, in)
	})
}

// tap decodes every frame, in traffic order. The events of a request or
// notification from the agent are held until Handle has done its
// bookkeeping for it (so that whoever sees a blocked tool can answer it at
// once); everything else is published at once.
func (c *Client) tap(f jsonrpc.Frame) {
	c.decMu.Lock()
	evs := c.dec.Decode(f)
	c.decMu.Unlock()
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	c.q.Push(c.held...)
	c.held = nil
	if f.Dir == trafficlog.A2C && f.Msg != nil && f.Msg.Kind != jsonrpc.KindResponse {
		c.held = evs
		return
	}
	c.q.Push(evs...)
}

// releaseHeld publishes the events held for the frame being handled.
func (c *Client) releaseHeld() {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	c.q.Push(c.held...)
	c.held = nil
}

// note writes a note of happy's into the traffic (decoded like any frame).
func (c *Client) note(n happyNote) {
	b, err := json.Marshal(n)
	if err != nil {
		return
	}
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Note(b)
	}
}

// Events delivers the session's agent events in order. It is closed after
// the agent exited (or Close) and every event was delivered.
func (c *Client) Events() <-chan agent.Event { return c.q.Out() }

// SessionID is the agent's session id.
func (c *Client) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// Info is what the agent said about itself.
func (c *Client) Info() AgentInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// Modes lists the session modes the agent offers.
func (c *Client) Modes() []Mode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.modes)
}

func (c *Client) capabilities() map[string]any {
	return map[string]any{
		"fs":       map[string]bool{"readTextFile": !c.opts.NoFS, "writeTextFile": !c.opts.NoFS},
		"terminal": !c.opts.NoTerminal,
	}
}

func (c *Client) call(ctx context.Context, method string, params, result any) error {
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil {
		return ErrClosed
	}
	return conn.Call(ctx, method, params, result)
}

// handshake initializes and opens the session (continuing sessionID when
// set).
func (c *Client) handshake(ctx context.Context, sessionID string) error {
	var res struct {
		ProtocolVersion json.RawMessage `json:"protocolVersion"`
		AgentInfo       *struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
		Caps struct {
			LoadSession bool `json:"loadSession"`
			Prompt      struct {
				Image    bool `json:"image"`
				Audio    bool `json:"audio"`
				Embedded bool `json:"embeddedContext"`
			} `json:"promptCapabilities"`
			MCP struct {
				HTTP bool `json:"http"`
				SSE  bool `json:"sse"`
			} `json:"mcpCapabilities"`
			Session struct {
				Resume json.RawMessage `json:"resume"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AuthMethods []AuthMethod `json:"authMethods"`
	}
	params := map[string]any{
		"protocolVersion":    ProtocolVersion,
		"clientCapabilities": c.capabilities(),
		"clientInfo":         map[string]string{"name": c.opts.ClientName, "version": c.opts.ClientVersion},
	}
	if err := c.call(ctx, "initialize", params, &res); err != nil {
		return fmt.Errorf("acp: initialize: %w", err)
	}
	v, err := CheckVersion(res.ProtocolVersion)
	if err != nil {
		return err
	}
	info := AgentInfo{ProtocolVersion: v, LoadSession: res.Caps.LoadSession, Resume: !isNull(res.Caps.Session.Resume),
		Image: res.Caps.Prompt.Image, Audio: res.Caps.Prompt.Audio, EmbeddedContext: res.Caps.Prompt.Embedded,
		MCPHTTP: res.Caps.MCP.HTTP, MCPSSE: res.Caps.MCP.SSE, AuthMethods: res.AuthMethods}
	if res.AgentInfo != nil {
		info.Name, info.Version = res.AgentInfo.Name, res.AgentInfo.Version
	}
	c.mu.Lock()
	c.info = info
	c.mu.Unlock()
	servers := []map[string]any{}
	for _, s := range c.opts.MCPServers {
		if (s.Type == "http" && !info.MCPHTTP) || (s.Type == "sse" && !info.MCPSSE) {
			return fmt.Errorf("%w: MCP server %q over %s", ErrUnsupported, s.Name, s.Type)
		}
		servers = append(servers, s.wire())
	}
	var sres struct {
		SessionID string `json:"sessionId"`
		Modes     *struct {
			Current   string `json:"currentModeId"`
			Available []Mode `json:"availableModes"`
		} `json:"modes"`
	}
	method := "session/new"
	sp := map[string]any{"cwd": c.opts.Cwd, "mcpServers": servers}
	if sessionID != "" {
		switch {
		case info.LoadSession:
			method = "session/load"
		case info.Resume:
			method = "session/resume"
		default:
			return fmt.Errorf("%w: continuing session %s (the agent offers neither session/load nor session/resume)", ErrUnsupported, sessionID)
		}
		sp["sessionId"] = sessionID
	}
	err = c.call(ctx, method, sp, &sres)
	var re *jsonrpc.RPCError
	if errors.As(err, &re) && re.Code == codeAuthRequired {
		if err := c.authenticate(ctx, info.AuthMethods); err != nil {
			return err
		}
		err = c.call(ctx, method, sp, &sres)
	}
	if err != nil {
		return fmt.Errorf("acp: %s: %w", method, err)
	}
	if sessionID == "" {
		if sres.SessionID == "" {
			return fmt.Errorf("acp: session/new: response without sessionId")
		}
		sessionID = sres.SessionID
	}
	c.mu.Lock()
	c.sessionID = sessionID
	if sres.Modes != nil {
		c.modes = sres.Modes.Available
	}
	c.mu.Unlock()
	if c.opts.Mode != "" {
		if err := c.SetMode(ctx, c.opts.Mode); err != nil {
			return err
		}
	}
	return nil
}

// authenticate runs the configured authentication method.
func (c *Client) authenticate(ctx context.Context, offered []AuthMethod) error {
	var ids []string
	for _, m := range offered {
		ids = append(ids, m.ID)
	}
	if c.opts.AuthMethod == "" {
		return fmt.Errorf("%w: choose one of the methods it offers (%s)", ErrAuthRequired, strings.Join(ids, ", "))
	}
	if !slices.Contains(ids, c.opts.AuthMethod) {
		return fmt.Errorf("%w: method %q is not offered (offered: %s)", ErrAuthRequired, c.opts.AuthMethod, strings.Join(ids, ", "))
	}
	if err := c.call(ctx, "authenticate", map[string]string{"methodId": c.opts.AuthMethod}, nil); err != nil {
		return fmt.Errorf("acp: authenticate with %s: %w", c.opts.AuthMethod, err)
	}
	return nil
}

// SetMode selects a session mode the agent offers (session/set_mode).
// Errors: ErrUnsupported for a mode the agent does not list, ErrClosed, or
// the agent's error.
func (c *Client) SetMode(ctx context.Context, id string) error {
	c.mu.Lock()
	modes, sid := c.modes, c.sessionID
	c.mu.Unlock()
	if !slices.ContainsFunc(modes, func(m Mode) bool { return m.ID == id }) {
		var ids []string
		for _, m := range modes {
			ids = append(ids, m.ID)
		}
		return fmt.Errorf("%w: mode %q (the agent offers: %s)", ErrUnsupported, id, strings.Join(ids, ", "))
	}
	if err := c.call(ctx, "session/set_mode", map[string]string{"sessionId": sid, "modeId": id}, nil); err != nil {
		return fmt.Errorf("acp: session/set_mode %s: %w", id, err)
	}
	return nil
}

// Prompt sends a prompt: at once when no turn runs, else queued behind the
// running turn. Errors: ErrClosed, ErrUnsupported for an attachment the
// agent cannot take, or the write error.
func (c *Client) Prompt(ctx context.Context, p Prompt) error {
	c.mu.Lock()
	info := c.info
	c.mu.Unlock()
	if _, err := promptBlocks(p, info); err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.active || len(c.queue) > 0 || c.restarting {
		c.queue = append(c.queue, p)
		c.mu.Unlock()
		return nil
	}
	c.active, c.cancelled = true, false
	c.mu.Unlock()
	return c.startTurn(p)
}

// promptBlocks builds the content of session/prompt: the text, and each
// attachment as an image, audio or embedded resource (data: URLs; only
// when the agent takes them) or a resource link (file://, http(s)://).
func promptBlocks(p Prompt, info AgentInfo) ([]map[string]any, error) {
	var blocks []map[string]any
	if p.Text != "" || len(p.Files) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": p.Text})
	}
	for _, f := range p.Files {
		if mime, data, ok := parseDataURL(f.URL); ok {
			if f.Mime != "" {
				mime = f.Mime
			}
			switch {
			case strings.HasPrefix(mime, "image/") && info.Image:
				blocks = append(blocks, map[string]any{"type": "image", "data": data, "mimeType": mime})
			case strings.HasPrefix(mime, "audio/") && info.Audio:
				blocks = append(blocks, map[string]any{"type": "audio", "data": data, "mimeType": mime})
			case info.EmbeddedContext:
				name := f.Filename
				if name == "" {
					name = "attachment"
				}
				res := map[string]any{"uri": "attachment:///" + url.PathEscape(name), "mimeType": mime}
				if text, err := base64.StdEncoding.DecodeString(data); err == nil && isText(mime, text) {
					res["text"] = string(text)
				} else {
					res["blob"] = data
				}
				blocks = append(blocks, map[string]any{"type": "resource", "resource": res})
			default:
				return nil, fmt.Errorf("%w: attachment %q (%s) as inline content", ErrUnsupported, f.Filename, mime)
			}
			continue
		}
		u, err := url.Parse(f.URL)
		if err != nil || (u.Scheme != "file" && u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: attachment URL %q", ErrUnsupported, f.URL)
		}
		name := f.Filename
		if name == "" {
			name = path.Base(u.Path)
		}
		link := map[string]any{"type": "resource_link", "uri": f.URL, "name": name}
		if f.Mime != "" {
			link["mimeType"] = f.Mime
		}
		blocks = append(blocks, link)
	}
	return blocks, nil
}

// isText reports whether an attachment can travel as a text resource.
func isText(mime string, b []byte) bool {
	return (strings.HasPrefix(mime, "text/") || mime == "application/json") && utf8.Valid(b)
}

// parseDataURL splits data:<mime>;base64,<data>.
func parseDataURL(u string) (mime, data string, ok bool) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", "", false
	}
	meta, data, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return "", "", false
	}
	return strings.TrimSuffix(meta, ";base64"), data, true
}

// startTurn sends a turn's session/prompt; c.active is already set. The
// turn ends when the agent answers it (or the connection ends).
func (c *Client) startTurn(p Prompt) error {
	c.mu.Lock()
	conn, sid, info := c.conn, c.sessionID, c.info
	c.turnGen++
	tg := c.turnGen
	c.mu.Unlock()
	blocks, err := promptBlocks(p, info)
	if err == nil && conn == nil {
		err = ErrClosed
	}
	var pend *jsonrpc.Pending
	if err == nil {
		pend, err = conn.Dispatch(context.Background(), "session/prompt", map[string]any{"sessionId": sid, "prompt": blocks})
	}
	if err != nil {
		c.turnDone(tg)
		return fmt.Errorf("acp: session/prompt: %w", err)
	}
	go func() {
		// The turn lasts as long as the agent works: no timeout here.
		if err := pend.Wait(context.Background(), time.Duration(math.MaxInt64), nil); err != nil {
			var re *jsonrpc.RPCError
			if !errors.As(err, &re) {
				c.opts.Logger.Debug().Err(err).Msg("prompt ended without a response")
			}
		}
		c.turnDone(tg)
	}()
	return nil
}

// turnDone ends turn tg (if it still runs) and sends the next queued
// prompt.
func (c *Client) turnDone(tg int) {
	c.mu.Lock()
	if !c.active || tg != c.turnGen {
		c.mu.Unlock()
		return
	}
	c.active, c.cancelled = false, false
	if c.giveUp != nil {
		c.giveUp.Stop()
		c.giveUp = nil
	}
	if c.closed || c.restarting || len(c.queue) == 0 {
		c.mu.Unlock()
		return
	}
	next := c.queue[0]
	c.queue = c.queue[1:]
	c.active = true
	c.mu.Unlock()
	if err := c.startTurn(next); err != nil {
		c.opts.Logger.Warn().Err(err).Msg("send queued prompt")
	}
}

// Interrupt cancels the running turn: session/cancel, then every pending
// permission is answered cancelled. The agent ends the turn; when it does
// not within CancelGrace, the turn is given up and the agent restarted.
// With no turn running it does nothing. Errors: ErrClosed, or the
// notification's write error.
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
	return c.cancelTurn(ctx)
}

// cancelTurn sends session/cancel once per turn and answers every pending
// permission cancelled.
func (c *Client) cancelTurn(ctx context.Context) error {
	c.mu.Lock()
	first := c.active && !c.cancelled
	if first {
		c.cancelled = true
	}
	conn, sid, tg := c.conn, c.sessionID, c.turnGen
	var all []*pendingPermission
	for id, ps := range c.pending {
		all = append(all, ps...)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	var err error
	if first && conn != nil {
		err = conn.Notify(ctx, "session/cancel", map[string]string{"sessionId": sid})
		c.mu.Lock()
		c.giveUp = time.AfterFunc(c.opts.CancelGrace, func() { c.abandon(tg) })
		c.mu.Unlock()
	}
	for _, p := range all {
		c.answer(ctx, p, Outcome{Cancelled: true}, agent.DecisionReject, agent.ReasonCancelled)
	}
	if err != nil {
		return fmt.Errorf("acp: session/cancel: %w", err)
	}
	return nil
}

// abandon gives up turn tg, which the agent did not end after
// session/cancel: a note ends it in the transcript, and the agent is
// restarted (its session loaded or resumed) so that the next prompt finds
// an agent that answers.
func (c *Client) abandon(tg int) {
	c.mu.Lock()
	if !c.active || c.turnGen != tg || c.closed {
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.note(happyNote{Happy: noteAbandoned, Reason: fmt.Sprintf("the agent did not end the turn within %s of session/cancel", c.opts.CancelGrace)})
	c.mu.Lock()
	canRestart := c.proc != nil
	if canRestart {
		c.restarting = true
	}
	c.mu.Unlock()
	c.turnDone(tg)
	if canRestart {
		c.restart()
	}
}

// restart replaces the agent process and continues the session in the new
// one (session/load or session/resume; a new session when the agent can
// do neither). Queued prompts are sent once it is ready.
func (c *Client) restart() {
	c.note(happyNote{Happy: noteRestart, Reason: "the agent did not end a cancelled turn"})
	c.mu.Lock()
	old, sid, info := c.proc, c.sessionID, c.info
	c.mu.Unlock()
	if err := old.Stop(c.opts.StopGrace); err != nil {
		c.opts.Logger.Warn().Err(err).Msg("stop unresponsive agent")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.opts.CallTimeout)
	defer cancel()
	err := c.launch(context.Background())
	if err == nil {
		if !info.LoadSession && !info.Resume {
			c.opts.Logger.Warn().Msg("the agent can neither load nor resume a session: the restarted agent starts a new one")
			sid = ""
		}
		err = c.handshake(ctx, sid)
	}
	c.mu.Lock()
	c.restarting = false
	c.mu.Unlock()
	if err != nil {
		c.opts.Logger.Error().Err(err).Msg("restart the agent")
		_ = c.Close()
		return
	}
	c.mu.Lock()
	if c.active || len(c.queue) == 0 || c.closed {
		c.mu.Unlock()
		return
	}
	next := c.queue[0]
	c.queue = c.queue[1:]
	c.active, c.cancelled = true, false
	c.mu.Unlock()
	if err := c.startTurn(next); err != nil {
		c.opts.Logger.Warn().Err(err).Msg("send queued prompt after restart")
	}
}

// Decide answers the oldest pending permission request of tool call
// callID, choosing the option by kind (see Choose). A rejection with
// reason cancelled means the turn is being aborted: session/cancel goes
// first. Errors: ErrNoPendingRequest, ErrUnknownDecision, ErrNoOption (the
// request stays pending), ErrClosed, or the write error.
func (c *Client) Decide(ctx context.Context, callID string, a Answer) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	ps := c.pending[callID]
	if len(ps) == 0 {
		c.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNoPendingRequest, callID)
	}
	p := ps[0]
	o, err := Choose(p.options, a)
	if err != nil {
		c.mu.Unlock()
		return err
	}
	if len(ps) == 1 {
		delete(c.pending, callID)
	} else {
		c.pending[callID] = ps[1:]
	}
	active := c.active
	c.mu.Unlock()
	if a.Decision == agent.DecisionReject && a.Reason == agent.ReasonCancelled && active {
		if err := c.cancelTurn(ctx); err != nil {
			c.opts.Logger.Warn().Err(err).Msg("cancel the turn")
		}
	}
	return c.answer(ctx, p, o, a.Decision, a.Reason)
}

// answer writes the decision note, then the response.
func (c *Client) answer(ctx context.Context, p *pendingPermission, o Outcome, d agent.Decision, reason string) error {
	id, _ := json.Marshal(p.in.ID)
	c.note(happyNote{Happy: noteDecision, Request: id, Decision: string(d), Reason: reason})
	if err := p.in.Reply(ctx, o.JSON()); err != nil {
		return fmt.Errorf("acp: answer permission request %s: %w", p.in.ID, err)
	}
	return nil
}

// Handle implements jsonrpc.Handler: the agent's requests (the decoder
// already turned the frame into events in the tap).
func (c *Client) Handle(ctx context.Context, in *jsonrpc.Incoming) {
	defer c.releaseHeld()
	if in.Notif {
		if in.Method == "$/cancel_request" {
			c.withdraw(ctx, in)
		}
		return
	}
	switch in.Method {
	case "session/request_permission":
		c.decMu.Lock()
		callID, opts, ok := c.dec.PermissionCall(in.ID)
		c.decMu.Unlock()
		if !ok {
			_ = in.Fail(ctx, jsonrpc.CodeInvalidParams, "happy: malformed permission request")
			return
		}
		c.mu.Lock()
		cancelled := c.cancelled
		if !cancelled {
			c.pending[callID] = append(c.pending[callID], &pendingPermission{in: in, options: opts})
		}
		c.mu.Unlock()
		if cancelled {
			// The turn is being cancelled: nobody will decide.
			_ = c.answer(ctx, &pendingPermission{in: in, options: opts}, Outcome{Cancelled: true}, agent.DecisionReject, agent.ReasonCancelled)
		}
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
	key := rawIDKey(p.RequestID)
	c.mu.Lock()
	var found *pendingPermission
	for callID, ps := range c.pending {
		for i, pp := range ps {
			if idKey(pp.in.ID) == key {
				found = pp
				c.pending[callID] = append(ps[:i:i], ps[i+1:]...)
				if len(c.pending[callID]) == 0 {
					delete(c.pending, callID)
				}
			}
		}
	}
	c.mu.Unlock()
	if found != nil {
		_ = found.in.Fail(ctx, codeRequestCancelled, "request cancelled")
	}
}

func (c *Client) checkSession(raw json.RawMessage) error {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	_ = json.Unmarshal(raw, &p)
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.SessionID != c.sessionID {
		return fmt.Errorf("unknown session %q", p.SessionID)
	}
	return nil
}

// fail answers a request with the error code that fits err.
func fail(ctx context.Context, in *jsonrpc.Incoming, err error) {
	code := jsonrpc.CodeInternalError
	switch {
	case errors.Is(err, ErrOutsideFolder), errors.Is(err, ErrUnknownTerminal), errors.Is(err, errBadParams):
		code = jsonrpc.CodeInvalidParams
	case errors.Is(err, os.ErrNotExist):
		code = codeResourceNotFound
	}
	_ = in.Fail(ctx, code, "happy: "+err.Error())
}

var errBadParams = errors.New("bad params")

func (c *Client) serveFS(ctx context.Context, in *jsonrpc.Incoming) {
	if err := c.checkSession(in.Params); err != nil {
		fail(ctx, in, fmt.Errorf("%w: %w", errBadParams, err))
		return
	}
	var p struct {
		Path    string  `json:"path"`
		Line    *int64  `json:"line"`
		Limit   *int64  `json:"limit"`
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(in.Params, &p); err != nil || p.Path == "" {
		fail(ctx, in, fmt.Errorf("%w: %s needs a path", errBadParams, in.Method))
		return
	}
	if in.Method == "fs/read_text_file" {
		var line, limit int64
		if p.Line != nil {
			line = *p.Line
		}
		if p.Limit != nil {
			limit = *p.Limit
		}
		text, err := c.dir.read(p.Path, line, limit)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, map[string]string{"content": text})
		return
	}
	if p.Content == nil {
		fail(ctx, in, fmt.Errorf("%w: fs/write_text_file needs content", errBadParams))
		return
	}
	before, err := c.dir.write(p.Path, *p.Content)
	if err != nil {
		fail(ctx, in, err)
		return
	}
	id, _ := json.Marshal(in.ID)
	n := happyNote{Happy: noteFSWrite, Request: id, Path: p.Path, Existed: before != nil}
	if before != nil {
		if len(*before) <= maxNoteBefore {
			n.Before = *before
		} else {
			n.BeforeOmitted = int64(len(*before))
		}
	}
	c.note(n)
	_ = in.Reply(ctx, struct{}{})
}

// maxNoteBefore bounds the previous content a fs-write note carries
// (bytes); a larger file's diff is recorded without it.
const maxNoteBefore = 256 << 10

func (c *Client) serveTerminal(ctx context.Context, in *jsonrpc.Incoming) {
	if err := c.checkSession(in.Params); err != nil {
		fail(ctx, in, fmt.Errorf("%w: %w", errBadParams, err))
		return
	}
	var p struct {
		TerminalID string `json:"terminalId"`
	}
	_ = json.Unmarshal(in.Params, &p)
	switch in.Method {
	case "terminal/create":
		var cp createTerminal
		if err := json.Unmarshal(in.Params, &cp); err != nil {
			fail(ctx, in, fmt.Errorf("%w: %w", errBadParams, err))
			return
		}
		id, err := c.term.create(cp)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, map[string]string{"terminalId": id})
	case "terminal/output":
		out, err := c.term.output(p.TerminalID)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, out)
	case "terminal/wait_for_exit":
		st, err := c.term.wait(ctx, p.TerminalID)
		if err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, st)
	case "terminal/kill":
		if err := c.term.kill(p.TerminalID); err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, struct{}{})
	case "terminal/release":
		if err := c.term.release(p.TerminalID); err != nil {
			fail(ctx, in, err)
			return
		}
		_ = in.Reply(ctx, struct{}{})
	}
}

// Close stops the session: pending permissions are answered cancelled,
// terminals are ended, the agent's stdin is closed and, after StopGrace,
// its process group ended. It waits until every event was delivered (the
// consumer must keep reading Events). An open turn ends agent-exited.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.q.Wait()
		return nil
	}
	c.closed = true
	c.queue = nil
	if c.giveUp != nil {
		c.giveUp.Stop()
		c.giveUp = nil
	}
	var all []*pendingPermission
	for id, ps := range c.pending {
		all = append(all, ps...)
		delete(c.pending, id)
	}
	p, conn := c.proc, c.conn
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	for _, pp := range all {
		_ = c.answer(ctx, pp, Outcome{Cancelled: true}, agent.DecisionReject, agent.ReasonAgentExited)
	}
	cancel()
	c.term.closeAll()
	var err error
	switch {
	case p != nil:
		err = p.Stop(c.opts.StopGrace)
	case conn != nil:
		err = conn.Close()
	}
	c.shutdown()
	c.q.Wait()
	return err
}

// shutdown runs when the agent is gone: nothing more will be read.
func (c *Client) shutdown() {
	c.mu.Lock()
	p := c.proc
	c.closed = true
	c.active = false
	if c.giveUp != nil {
		c.giveUp.Stop()
		c.giveUp = nil
	}
	c.mu.Unlock()
	if p != nil {
		<-p.Exited() // the exit frame was tapped
	}
	c.term.closeAll()
	c.releaseHeld()
	c.q.Close()
	c.dirOnce.Do(func() { _ = c.dir.close() })
}
