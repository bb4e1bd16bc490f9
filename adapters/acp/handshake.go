package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
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

// handshake initializes and opens the session (continuing sessionID when
// set; known: the transcript holds its conversation).
func (c *Client) handshake(ctx context.Context, sessionID string, known bool) error {
	info, err := c.initialize(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.info = info
	c.mu.Unlock()
	return c.openSession(ctx, info, sessionID, known)
}

// initialize runs initialize and reads what the agent says about itself.
// Errors: a *VersionError, or the request's error.
func (c *Client) initialize(ctx context.Context) (AgentInfo, error) {
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
		"clientInfo":         map[string]string{"name": c.s.Settings().ClientName, "version": c.s.Settings().ClientVersion},
	}
	if err := c.s.Call(ctx, "initialize", params, &res); err != nil {
		return AgentInfo{}, fmt.Errorf("acp: initialize: %w", err)
	}
	v, err := CheckVersion(res.ProtocolVersion)
	if err != nil {
		return AgentInfo{}, err
	}
	info := AgentInfo{ProtocolVersion: v, LoadSession: res.Caps.LoadSession, Resume: !isNull(res.Caps.Session.Resume),
		Image: res.Caps.Prompt.Image, Audio: res.Caps.Prompt.Audio, EmbeddedContext: res.Caps.Prompt.Embedded,
		MCPHTTP: res.Caps.MCP.HTTP, MCPSSE: res.Caps.MCP.SSE, AuthMethods: res.AuthMethods}
	if res.AgentInfo != nil {
		info.Name, info.Version = res.AgentInfo.Name, res.AgentInfo.Version
	}
	return info, nil
}

// openSession opens the session: session/new, or for sessionID
// session/resume (no replay) when the agent advertises it, else
// session/load (the replayed conversation is left out of the events when
// known, the transcript holding it already), authenticating once when the agent asks for it, then selects
// Options.Mode. Errors: ErrUnsupported,
// ErrAuthRequired, or the requests' errors.
func (c *Client) openSession(ctx context.Context, info AgentInfo, sessionID string, known bool) error {
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
		case info.Resume:
			// Continues without replaying the conversation.
			method = "session/resume"
		case info.LoadSession:
			method = "session/load"
		default:
			return fmt.Errorf("%w: %s cannot continue session %s: it advertises neither loadSession (session/load) nor sessionCapabilities.resume (session/resume)",
				ErrUnsupported, c.agentName(info), sessionID)
		}
		sp["sessionId"] = sessionID
	}
	call := func() error {
		if method == "session/load" && known {
			// The conversation the agent replays is in the transcript
			// already (happy resume, a restart): the decoder leaves it out
			// until the next prompt, which logs the count (StartTurn).
			c.s.Note(happyNote{Happy: noteHistoryKnown})
		}
		return c.s.Call(ctx, method, sp, &sres)
	}
	err := call()
	var re *jsonrpc.RPCError
	if errors.As(err, &re) && re.Code == codeAuthRequired {
		if err := c.authenticate(ctx, info.AuthMethods); err != nil {
			return err
		}
		err = call()
	}
	if err != nil {
		return requestError(method, err)
	}
	if method == "session/load" {
		c.settleReplay(ctx)
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

// Bounds of settleReplay.
const (
	replayQuiet = 150 * time.Millisecond
	replayMax   = 30 * time.Second
)

// settleReplay returns once the agent has sent no session/update for
// replayQuiet (at most replayMax after the load's answer, or when ctx
// ends): agents go on streaming the replayed conversation after they
// answered session/load (Gemini CLI sends most of it then), and a prompt
// sent meanwhile would take the rest of the replay for its turn's output.
func (c *Client) settleReplay(ctx context.Context) {
	start := time.Now()
	c.lastUpdate.Store(start.UnixNano())
	for {
		wait := time.Until(time.Unix(0, c.lastUpdate.Load()).Add(replayQuiet))
		if wait <= 0 {
			return
		}
		if time.Since(start)+wait > replayMax {
			c.s.Logger().Warn().Dur("waited", time.Since(start)).Msg("session/load: the agent still replays the conversation; the next prompt goes out anyway")
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// geminiNoSession is the cause Gemini CLI gives when it does not find the
// session to load: it says so of a session it started less than about a
// minute ago.
const geminiNoSession = "No previous sessions found"

// requestError is the error of a failed session request (method): the
// agent's error with its cause (rpcDetails), and for a load or resume that
// Gemini CLI answers with geminiNoSession, what that means.
func requestError(method string, err error) error {
	det := rpcDetails(err)
	hint := ""
	if (method == "session/load" || method == "session/resume") && strings.Contains(det, geminiNoSession) {
		hint = " (Gemini CLI does not find a session it started less than about a minute ago, a Gemini CLI bug: resume it again in a minute)"
	}
	return fmt.Errorf("acp: %s: %w%s%s", method, err, det, hint)
}

// rpcDetails is ": <cause>" of an agent's error response when it says
// more than the message (errorText: data.details, where the TypeScript SDK
// puts Gemini CLI's "No previous sessions found for this project." under
// "Internal error"; data.message, codex-acp's), else "".
func rpcDetails(err error) string {
	var re *jsonrpc.RPCError
	if !errors.As(err, &re) {
		return ""
	}
	text := errorText(&jsonrpc.ErrorObject{Code: re.Code, Message: re.Message, Data: re.Data})
	if rest, ok := strings.CutPrefix(text, re.Message+": "); ok && re.Message != "" {
		return ": " + rest
	}
	return ""
}

// agentName names the agent in errors: its agentInfo name, else its
// command.
func (c *Client) agentName(info AgentInfo) string {
	if info.Name != "" {
		return info.Name
	}
	return c.opts.Command[0]
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
	if err := c.s.Call(ctx, "authenticate", map[string]string{"methodId": c.opts.AuthMethod}, nil); err != nil {
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
	if err := c.s.Call(ctx, "session/set_mode", map[string]string{"sessionId": sid, "modeId": id}, nil); err != nil {
		return fmt.Errorf("acp: session/set_mode %s: %w", id, err)
	}
	return nil
}
