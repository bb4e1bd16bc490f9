package openclaw

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/queue"
)

// DefaultURL is where a local gateway listens unless configured otherwise.
const DefaultURL = "ws://127.0.0.1:18789"

// Protocol versions this client speaks: 3 is the version the gateway
// protocol was published with, 4 the one the pinned gateway (openclaw
// 2026.9.6) requires of operator clients; the frames happy uses are the
// same in both.
const (
	MinProtocol = 3
	MaxProtocol = 4
)

// Errors of the client.
var (
	// ErrClosed: the client was closed, or the gateway is gone.
	ErrClosed = errors.New("openclaw: the gateway connection is closed")
	// ErrHandshake wraps a connect request the gateway refused.
	ErrHandshake = errors.New("openclaw: the gateway refused the connection")
	// ErrNotAnswering: the address took no WebSocket connection, or took
	// one but never answered connect (or answered with frames that are not
	// the gateway protocol) within Options.ConnectTimeout.
	ErrNotAnswering = errors.New("not an OpenClaw gateway, or not answering")
)

// DefaultConnectTimeout bounds the dial and the connect handshake of one
// connection attempt unless Options.ConnectTimeout says otherwise.
const DefaultConnectTimeout = 15 * time.Second

// maxHandshakeJunk is how many frames that are not the gateway protocol the
// handshake takes (each a Dropped record) before it gives up.
const maxHandshakeJunk = 16

// Options configure a Client.
type Options struct {
	// URL is the gateway's WebSocket address (DefaultURL when empty).
	URL string
	// Token is the gateway's shared token (connect.params.auth.token); ""
	// sends none.
	Token string
	// AgentID is the OpenClaw agent to run ("" for the gateway's default).
	AgentID string
	// SessionKey is the session to open or continue; "" makes a new one,
	// agent:<agent>:happy-<random>.
	SessionKey string
	// Record, when not nil, receives the traffic log (see traffic.go).
	Record io.Writer
	// Version is happy's version, sent as client.version.
	Version string
	// ReconnectAttempts is how often a lost connection is dialled again
	// before the gateway counts as gone (default 5; negative: never). The
	// count goes on across reconnects that bring nothing new: it starts
	// again only when the gateway delivers a new event, so a gateway that
	// answers connect and then stays silent is gone after this many.
	ReconnectAttempts int
	// ConnectTimeout bounds the dial and the connect handshake of each
	// connection attempt (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// ReconnectDelay is the wait before the first attempt, doubled for
	// each next one (default 250ms).
	ReconnectDelay time.Duration
	// SilenceLimit is how long the gateway may send nothing (it sends a
	// tick every hello-ok policy.tickIntervalMs) before the connection
	// counts as lost; 0 takes three tick intervals.
	SilenceLimit time.Duration
	// StartupWait bounds how long a gateway that says it is still starting
	// (a retryable UNAVAILABLE answer to connect) is waited for (default
	// two minutes).
	StartupWait time.Duration
	// Now and After are the clock (time.Now and time.After by default);
	// tests inject theirs.
	Now   func() time.Time
	After func(time.Duration) <-chan time.Time
	// Dialer dials the WebSocket (websocket.DefaultDialer by default).
	Dialer *websocket.Dialer

	// newKey makes a prompt's idempotency key (random; tests fix it).
	newKey func() string
}

func (o *Options) defaults() {
	if o.URL == "" {
		o.URL = DefaultURL
	}
	if o.ReconnectAttempts == 0 {
		o.ReconnectAttempts = 5
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.ReconnectDelay <= 0 {
		o.ReconnectDelay = 250 * time.Millisecond
	}
	if o.StartupWait <= 0 {
		o.StartupWait = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.newKey == nil {
		o.newKey = func() string { return "happy-" + randomHex(8) }
	}
	if o.Dialer == nil {
		o.Dialer = websocket.DefaultDialer
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.SessionKey == "" {
		a := o.AgentID
		if a == "" {
			a = "main"
		}
		o.SessionKey = "agent:" + a + ":happy-" + randomHex(6)
	}
}

// Client is a connection to an OpenClaw gateway as an operator client
// driving one session: it implements agent.Agent. Build one with Start.
type Client struct {
	opts Options
	rec  *recorder
	q    *queue.Unbounded[agent.Event]

	wmu  sync.Mutex // writes, and the swap of conn
	conn *websocket.Conn

	dmu     sync.Mutex // the decoder, the prompt queue and the waiters
	dec     *Decoder
	running bool
	queued  []agent.Prompt
	waiters map[string]chan Frame
	// resolved: by approval id, closed when the gateway broadcasts
	// exec.approval.resolved for it (Decide waits for that, not for the
	// response, which comes when the run is over).
	resolved map[string]chan struct{}
	tick     time.Duration
	frames   atomic.Int64
	lost     atomic.Int64 // reconnect attempts since the last new event
	goneMu   sync.Mutex
	gone     error // why the gateway counts as gone (nil: not gone, or closed by happy)
	ids      atomic.Int64
	closing  atomic.Bool
	done     chan struct{} // closed when the reader has ended
	stopOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
}

// Start connects to the gateway and completes the connect handshake.
// Errors: the dial error, or ErrHandshake wrapping the gateway's error
// (a wrong token: code AUTH_…/UNAUTHORIZED; a client that needs pairing:
// NOT_PAIRED).
func Start(ctx context.Context, opts Options) (*Client, error) {
	opts.defaults()
	c := &Client{opts: opts, rec: newRecorder(opts.Record), q: queue.New[agent.Event](), dec: NewDecoder(),
		waiters: map[string]chan Frame{}, resolved: map[string]chan struct{}{}, done: make(chan struct{}), stop: make(chan struct{})}
	conn, tick, err := c.dial(ctx)
	if err != nil {
		c.q.Close()
		return nil, err
	}
	c.conn, c.tick = conn, tick
	c.dec.sessionKey = opts.SessionKey // announced here; a replay learns it from the first prompt
	c.q.Push(&agent.SessionInfo{EventBase: agent.EventBase{Time: c.now()}, ProviderSessionID: opts.SessionKey, Agent: opts.AgentID})
	c.wg.Add(2)
	go c.read()
	go c.watch()
	return c, nil
}

// SessionKey is the gateway session the client drives.
func (c *Client) SessionKey() string { return c.opts.SessionKey }

func (c *Client) now() int64 { return c.opts.Now().UnixMilli() }

func (c *Client) nextID() string { return fmt.Sprintf("happy-%d", c.ids.Add(1)) }

// dial opens a connection and runs the handshake on it: connect goes
// first (no device identity is signed, so the challenge's nonce is not
// needed), then frames are read until its response. A retryable refusal
// (UNAVAILABLE while the gateway starts its sidecars) is tried again after
// its retryAfterMs, for at most StartupWait. Each attempt is bounded by
// ConnectTimeout (ErrNotAnswering).
func (c *Client) dial(ctx context.Context) (*websocket.Conn, time.Duration, error) {
	start := c.opts.Now()
	for {
		conn, tick, retry, err := c.attempt(ctx)
		if err == nil {
			return conn, tick, nil
		}
		if retry <= 0 || c.opts.Now().Sub(start) > c.opts.StartupWait {
			return nil, 0, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-c.opts.After(retry):
		}
	}
}

// attempt is one dial and handshake, given up after ConnectTimeout.
func (c *Client) attempt(ctx context.Context) (*websocket.Conn, time.Duration, time.Duration, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var late atomic.Bool
	timer := c.opts.After(c.opts.ConnectTimeout)
	go func() {
		select {
		case <-timer:
			late.Store(true)
			cancel()
		case <-actx.Done():
		}
	}()
	// The dialer watches the context only until the TCP connection is up:
	// closing that connection ends a WebSocket upgrade that never comes.
	d := *c.opts.Dialer
	inner := d.NetDialContext
	if inner == nil && d.NetDial != nil {
		inner = func(_ context.Context, network, addr string) (net.Conn, error) { return d.NetDial(network, addr) }
	} else if inner == nil {
		inner = (&net.Dialer{}).DialContext
	}
	var unwatch func() bool
	d.NetDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := inner(ctx, network, addr)
		if err == nil {
			unwatch = context.AfterFunc(actx, func() { _ = nc.Close() })
		}
		return nc, err
	}
	conn, _, err := d.DialContext(actx, c.opts.URL, nil)
	if unwatch != nil {
		unwatch()
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, 0, 0, ctx.Err()
		case late.Load():
			return nil, 0, 0, c.notAnswering(fmt.Sprintf("no WebSocket connection within %s", c.opts.ConnectTimeout))
		}
		return nil, 0, 0, fmt.Errorf("openclaw: dial %s: %w", c.opts.URL, err)
	}
	conn.SetReadLimit(64 << 20)
	tick, retry, err := c.handshake(actx, conn)
	if err != nil {
		_ = conn.Close()
		if ctx.Err() == nil && late.Load() {
			err = c.notAnswering(fmt.Sprintf("no answer to connect within %s", c.opts.ConnectTimeout))
		}
		return nil, 0, retry, err
	}
	return conn, tick, 0, nil
}

// notAnswering is ErrNotAnswering for the gateway's URL and why.
func (c *Client) notAnswering(why string) error {
	return fmt.Errorf("openclaw: %s: %w: %s", c.opts.URL, ErrNotAnswering, why)
}

// handshake sends connect on conn and waits for hello-ok. retry > 0 when
// the refusal says to try again after that long.
func (c *Client) handshake(ctx context.Context, conn *websocket.Conn) (tick, retry time.Duration, err error) {
	id := c.nextID()
	params := map[string]any{
		"minProtocol": MinProtocol, "maxProtocol": MaxProtocol,
		"client": map[string]any{"id": "gateway-client", "displayName": "happy", "version": c.opts.Version,
			"platform": runtime.GOOS, "mode": "backend"},
		"role": "operator", "scopes": []string{"operator.read", "operator.write", "operator.approvals", "operator.admin"},
		"caps": []string{"tool-events", "exec-approvals"}, "userAgent": "happy/" + c.opts.Version, "locale": "en-US",
	}
	logged := params
	if c.opts.Token != "" {
		params = cloneMap(params)
		params["auth"] = map[string]any{"token": c.opts.Token}
		logged = cloneMap(logged)
		logged["auth"] = map[string]any{"token": "[redacted]"}
	}
	data, _ := json.Marshal(map[string]any{"type": TypeReq, "id": id, "method": "connect", "params": params})
	shown, _ := json.Marshal(map[string]any{"type": TypeReq, "id": id, "method": "connect", "params": logged})
	c.record(C2A, shown)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	if err := conn.WriteMessage(websocket.TextMessage, data); err != nil {
		return 0, 0, fmt.Errorf("openclaw: send connect: %w", err)
	}
	junk, firstJunk := 0, ""
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			if ctx.Err() != nil {
				return 0, 0, ctx.Err()
			}
			return 0, 0, fmt.Errorf("openclaw: connect to %s: %w", c.opts.URL, err)
		}
		f, err := DecodeFrame(msg)
		if err != nil || f.Type != TypeRes || f.ID != id {
			// The challenge, or anything before the answer: decoded as
			// a replay decodes it, so that junk is a Dropped record.
			if c.handle(Record{T: c.now(), Dir: A2C, Msg: msg}) {
				if junk++; junk >= maxHandshakeJunk {
					return 0, 0, c.notAnswering(fmt.Sprintf("%d frames that are not the gateway protocol, the first %q",
						junk, agent.CutUTF8(firstJunk, 120)))
				}
				if firstJunk == "" {
					firstJunk = string(msg)
				}
			}
			continue
		}
		c.record(A2C, msg)
		if !f.Succeeded() {
			if f.Error != nil && f.Error.Retryable {
				retry = time.Duration(max(f.Error.RetryAfterMs, 100)) * time.Millisecond
			}
			return 0, retry, fmt.Errorf("%w: %s", ErrHandshake, errorText(f.Error))
		}
		var hello struct {
			Protocol int `json:"protocol"`
			Policy   struct {
				TickIntervalMs int64 `json:"tickIntervalMs"`
			} `json:"policy"`
		}
		_ = json.Unmarshal(f.Payload, &hello)
		tick = 15 * time.Second
		if hello.Policy.TickIntervalMs > 0 {
			tick = time.Duration(hello.Policy.TickIntervalMs) * time.Millisecond
		}
		return tick, 0, nil
	}
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// record writes a record to the traffic log.
func (c *Client) record(dir Dir, msg []byte) {
	c.rec.write(Record{T: c.now(), Dir: dir, Msg: msg})
}

// handle records and decodes one record and delivers its events. It
// reports whether the record was dropped (a DroppedInput). A new turn, or
// a new event of the gateway's (anything but a drop), starts the reconnect
// budget again.
func (c *Client) handle(rec Record) (dropped bool) {
	c.rec.write(rec)
	c.dmu.Lock()
	out := c.dec.decode(rec)
	var next *agent.Prompt
	if out.ended {
		c.running = false
		if len(c.queued) > 0 {
			p := c.queued[0]
			c.queued = c.queued[1:]
			next = &p
		}
	}
	if rec.Dir == A2C {
		if f, err := DecodeFrame(rec.Msg); err == nil && f.Type == TypeRes {
			if ch, ok := c.waiters[f.ID]; ok {
				delete(c.waiters, f.ID)
				ch <- f // buffered: never blocks
			}
		} else if err == nil && f.Type == TypeEvent && f.Event == "exec.approval.resolved" && len(c.resolved) > 0 {
			var p struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(f.Payload, &p) == nil {
				if ch, ok := c.resolved[p.ID]; ok {
					delete(c.resolved, p.ID)
					close(ch)
				}
			}
		}
	}
	c.dmu.Unlock()
	for _, e := range out.events {
		switch e.(type) {
		case *agent.DroppedInput:
			dropped = true
		case *agent.TurnStarted:
			c.lost.Store(0) // the count is per turn
		default:
			if rec.Dir == A2C {
				c.lost.Store(0)
			}
		}
		if rec.Dir == C2A && echo(e) {
			continue
		}
		c.q.Push(e)
	}
	if next != nil {
		if err := c.startTurn(context.Background(), *next); err != nil {
			c.q.Push(&agent.AgentError{EventBase: agent.EventBase{Time: c.now()}, Kind: agent.ErrorTransport, Text: err.Error()})
		}
	}
	return dropped
}

// echo reports the events the session runner records itself: the prompt
// and the decisions, read back from happy's own frames.
func echo(e agent.Event) bool {
	switch e.(type) {
	case *agent.UserPrompt, *agent.ToolResolved:
		return true
	}
	return false
}

// send writes a request and returns its id. The frame is decoded (and
// recorded) before it is written, so its response always comes after.
// wait, when not nil, receives the response.
func (c *Client) send(method string, params any, wait chan Frame) (string, error) {
	if c.closing.Load() {
		return "", ErrClosed
	}
	id := c.nextID()
	data, err := json.Marshal(map[string]any{"type": TypeReq, "id": id, "method": method, "params": params})
	if err != nil {
		return "", fmt.Errorf("openclaw: encode %s: %w", method, err)
	}
	if wait != nil {
		c.dmu.Lock()
		c.waiters[id] = wait
		c.dmu.Unlock()
	}
	c.handle(Record{T: c.now(), Dir: C2A, Msg: data})
	c.wmu.Lock()
	conn := c.conn
	err = conn.WriteMessage(websocket.TextMessage, data)
	c.wmu.Unlock()
	if err != nil {
		c.dmu.Lock()
		delete(c.waiters, id)
		c.dmu.Unlock()
		return "", fmt.Errorf("openclaw: send %s: %w", method, err)
	}
	return id, nil
}

// call sends a request and waits for its response.
func (c *Client) call(ctx context.Context, method string, params any) (Frame, error) {
	return c.callUntil(ctx, method, params, nil)
}

// callUntil is call that also stops waiting, without an error, when enough
// closes first (the response is then not awaited; it is recorded and
// decoded when it comes).
func (c *Client) callUntil(ctx context.Context, method string, params any, enough <-chan struct{}) (Frame, error) {
	ch := make(chan Frame, 1)
	id, err := c.send(method, params, ch)
	if err != nil {
		return Frame{}, err
	}
	select {
	case <-enough:
		c.dmu.Lock()
		delete(c.waiters, id)
		c.dmu.Unlock()
		return Frame{}, nil
	case f, ok := <-ch:
		if !ok {
			return Frame{}, ErrClosed
		}
		if !f.Succeeded() {
			return f, fmt.Errorf("openclaw: %s: %s", method, errorText(f.Error))
		}
		return f, nil
	case <-ctx.Done():
		c.dmu.Lock()
		delete(c.waiters, id)
		c.dmu.Unlock()
		return Frame{}, ctx.Err()
	case <-c.done:
		return Frame{}, ErrClosed
	}
}

// read is the reader goroutine: frames from the gateway until the
// connection ends, then reconnects, or reports the gateway gone.
func (c *Client) read() {
	defer c.wg.Done()
	defer close(c.done)
	for {
		c.wmu.Lock()
		conn := c.conn
		c.wmu.Unlock()
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				break
			}
			c.frames.Add(1)
			c.handle(Record{T: c.now(), Dir: A2C, Msg: msg})
		}
		if c.closing.Load() {
			c.finish()
			return
		}
		if err := c.reconnect(); err != nil {
			if c.closing.Load() {
				c.finish()
				return
			}
			c.goneMu.Lock()
			c.gone = err
			c.goneMu.Unlock()
			msg, _ := json.Marshal(note{Happy: noteGone, Error: err.Error()})
			c.handle(Record{T: c.now(), Dir: Note, Msg: msg})
			c.closing.Store(true)
			c.finish()
			return
		}
	}
}

// reconnect dials the gateway again with growing delays, and on success
// asks whether the open turn's run ended meanwhile (agent.wait with no
// wait: its answer ends the turn when it did). The attempts count since
// the last new event (ReconnectAttempts in all), so connections that open
// and then bring nothing do not go on for ever.
func (c *Client) reconnect() error {
	var last error = errors.New("the connection closed")
	if n := c.lost.Load(); n > 0 {
		last = fmt.Errorf("the connection broke again after %d reconnects with no new event", n)
	}
	for c.lost.Load() < int64(c.opts.ReconnectAttempts) {
		n := c.lost.Add(1)
		delay := c.opts.ReconnectDelay << min(n-1, 6)
		select {
		case <-c.stop:
			return ErrClosed
		case <-c.opts.After(delay):
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-c.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		conn, tick, err := c.dial(ctx)
		cancel()
		if err != nil {
			last = err
			continue
		}
		msg, _ := json.Marshal(note{Happy: noteReconnect})
		c.handle(Record{T: c.now(), Dir: Note, Msg: msg})
		c.wmu.Lock()
		old := c.conn
		c.conn = conn
		c.tick = tick
		c.wmu.Unlock()
		_ = old.Close()
		c.dmu.Lock()
		runID, open := c.dec.turnOpen()
		c.dmu.Unlock()
		if open && runID != "" {
			_, _ = c.send("agent.wait", map[string]any{"runId": runID, "timeoutMs": 0}, nil)
		}
		return nil
	}
	return last
}

// watch closes a connection that stayed silent for the silence limit, so
// that the reader reconnects (or reports the gateway gone).
func (c *Client) watch() {
	defer c.wg.Done()
	seen := c.frames.Load()
	for {
		c.wmu.Lock()
		limit := c.opts.SilenceLimit
		if limit <= 0 {
			limit = 3 * c.tick
		}
		c.wmu.Unlock()
		select {
		case <-c.done:
			return
		case <-c.opts.After(limit):
		}
		now := c.frames.Load()
		if now == seen {
			c.wmu.Lock()
			_ = c.conn.Close()
			c.wmu.Unlock()
		}
		seen = now
	}
}

// finish ends what is left once the connection is over for good.
func (c *Client) finish() {
	c.dmu.Lock()
	for id, ch := range c.waiters {
		delete(c.waiters, id)
		close(ch)
	}
	_, open := c.dec.turnOpen()
	c.dmu.Unlock()
	if open {
		c.q.Push(&agent.TurnEnded{EventBase: agent.EventBase{Time: c.now()}, Reason: agent.TurnAgentExited,
			Error: "happy closed the gateway connection"})
	}
	c.q.Close()
}

// Gone is why the gateway counts as gone once Events has closed on its own
// (every reconnect failed, or brought nothing new): nil while the
// connection lives, and when Close ended it.
func (c *Client) Gone() error {
	c.goneMu.Lock()
	defer c.goneMu.Unlock()
	return c.gone
}

// Events delivers the session's agent events in order; it is closed when
// the connection is over (Close, or the gateway gone).
func (c *Client) Events() <-chan agent.Event { return c.q.Out() }

// Prompt starts a turn with the prompt, or queues it behind the running
// one. Errors: agent.ErrUnsupportedInput for attachments, ErrClosed, or
// the write error.
func (c *Client) Prompt(ctx context.Context, p agent.Prompt) error {
	if len(p.Files) > 0 {
		return fmt.Errorf("%w: attachments (happy sends OpenClaw text prompts only)", agent.ErrUnsupportedInput)
	}
	c.dmu.Lock()
	if c.running {
		c.queued = append(c.queued, p)
		c.dmu.Unlock()
		return nil
	}
	c.dmu.Unlock()
	return c.startTurn(ctx, p)
}

// startTurn sends the agent request of a prompt.
func (c *Client) startTurn(_ context.Context, p agent.Prompt) error {
	c.dmu.Lock()
	c.running = true
	c.dmu.Unlock()
	params := map[string]any{"message": p.Text, "sessionKey": c.opts.SessionKey, "idempotencyKey": c.opts.newKey(), "deliver": false}
	if c.opts.AgentID != "" {
		params["agentId"] = c.opts.AgentID
	}
	if _, err := c.send("agent", params, nil); err != nil {
		c.dmu.Lock()
		c.running = false
		c.dmu.Unlock()
		return err
	}
	return nil
}

// Decide answers the exec approval pending for tool call callID with
// exec.approval.resolve (once → allow-once, always → allow-always, reject
// → deny) and waits for the gateway's answer: its exec.approval.resolved
// broadcast of the approval, or its response, whichever comes first. Errors: agent.ErrStale when
// no approval waits for callID, the gateway's refusal, ErrClosed.
func (c *Client) Decide(ctx context.Context, callID string, v agent.Verdict) error {
	c.dmu.Lock()
	a, ok := c.dec.pendingApproval(callID)
	var id string
	var noAlways bool
	if ok {
		id, noAlways = a.id, a.noAlways
	}
	c.dmu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %s", agent.ErrStale, callID)
	}
	wire, ok := wireDecision(v.Decision, noAlways)
	if !ok {
		return fmt.Errorf("openclaw: %w", &agent.EnumError{Kind: "decision", Value: string(v.Decision), Allowed: []string{"once", "always", "reject"}})
	}
	// The gateway answers exec.approval.resolve only when the run is over;
	// its exec.approval.resolved broadcast says the decision was taken.
	// Waiting for the response would hold an abort's chat.abort until the
	// run had gone on without it.
	seen := make(chan struct{})
	c.dmu.Lock()
	c.resolved[id] = seen
	c.dmu.Unlock()
	defer func() {
		c.dmu.Lock()
		if c.resolved[id] == seen {
			delete(c.resolved, id)
		}
		c.dmu.Unlock()
	}()
	_, err := c.callUntil(ctx, "exec.approval.resolve", map[string]any{"id": id, "decision": wire}, seen)
	return err
}

// AnswerQuestion implements agent.Agent: the gateway asks operators no
// questions through this client, so no call waits for an answer.
func (c *Client) AnswerQuestion(_ context.Context, callID string, _ [][]string) error {
	return fmt.Errorf("%w: %s: OpenClaw asks no questions here", agent.ErrStale, callID)
}

// Interrupt aborts the running turn (chat.abort of the session's run); the
// gateway ends it with an aborted lifecycle event. Errors: the write error.
func (c *Client) Interrupt(ctx context.Context) error {
	c.dmu.Lock()
	runID, open := c.dec.turnOpen()
	c.queued = nil
	c.dmu.Unlock()
	if !open {
		return nil
	}
	params := map[string]any{"sessionKey": c.opts.SessionKey}
	if runID != "" {
		params["runId"] = runID
	}
	_, err := c.call(ctx, "chat.abort", params)
	return err
}

// Close ends the connection; Events closes after the queued events (an
// open turn ends agent-exited). It waits for the client's goroutines.
func (c *Client) Close() error {
	c.closing.Store(true)
	c.stopOnce.Do(func() { close(c.stop) })
	c.wmu.Lock()
	_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	_ = c.conn.Close()
	c.wmu.Unlock()
	c.wg.Wait()
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
