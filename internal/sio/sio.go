// Package sio is happy's small Socket.IO v4 client: a wrapper around the
// zishang520 client packages that hides their API behind a few methods and
// carries two fixes every caller needs.
//
//   - connect_error text: the library requires a `data` field in CONNECT_ERROR
//     packets, which Node servers (the reference relay included) omit, so the
//     server's message ("Invalid authentication token") would be replaced by a
//     parse error. A decoder wrapper adds an empty `data` before the manager
//     sees the packet.
//   - refused connections: without a connect timeout a refused connection is
//     only reported after 20 s. Dial always sets one (Options.ConnectTimeout).
//   - lost handshakes: the library can miss the transport's "open" or the
//     server's CONNECT reply (listeners registered after the work started),
//     and now and then drops a connection right after the handshake; Dial
//     detects both (a stall; a failed `ping` round trip) and retries.
//
// Emits are serialised per client, because the library's Timeout modifier is
// not safe for concurrent use on one socket.
//
// Payload shapes follow the library: event arguments arrive as []any, objects
// as map[string]any, numbers as float64.
package sio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	client "github.com/zishang520/socket.io/clients/socket/v3"
	"github.com/zishang520/socket.io/parsers/socket/v3/parser"
	"github.com/zishang520/socket.io/v3/pkg/types"
)

// DefaultPath is the Socket.IO path of the happy relay.
const DefaultPath = "/v1/updates"

// DefaultConnectTimeout bounds one connection attempt when Options leaves it zero.
const DefaultConnectTimeout = 5 * time.Second

// libraryConnectTimeout is the connect timeout handed to the library: far
// beyond any attempt, since Dial bounds attempts itself (see dialOnce).
const libraryConnectTimeout = 24 * time.Hour

// DefaultAckTimeout bounds Call when its context has no deadline.
const DefaultAckTimeout = 10 * time.Second

// ErrClosed is returned by Emit and Call on a client that was closed.
var ErrClosed = errors.New("sio: client closed")

// ErrNotConnected is returned by Emit and Call while the socket is not connected.
var ErrNotConnected = errors.New("sio: not connected")

// ConnectError is a connection refused by the server (a CONNECT_ERROR packet,
// e.g. from an authentication middleware). Message is the server's text.
type ConnectError struct {
	Message string
}

func (e *ConnectError) Error() string { return "sio: connect refused: " + e.Message }

// Options configure Dial. The zero value connects to DefaultPath over the
// websocket transport, without reconnection.
type Options struct {
	// Path is the Socket.IO path ("/v1/updates" when empty).
	Path string
	// Auth is the handshake auth object (e.g. {token, clientType, sessionId}).
	Auth map[string]any
	// Header holds extra HTTP headers of the websocket upgrade request.
	Header http.Header
	// ConnectTimeout bounds one connection attempt (DefaultConnectTimeout when zero).
	ConnectTimeout time.Duration
}

// Handler receives a server event's arguments. When the server asked for an
// acknowledgement, ack is non-nil and must be called once with the reply
// values; otherwise it is nil.
type Handler func(args []any, ack func(reply ...any))

// Client is one Socket.IO connection. Its methods are safe for concurrent use.
type Client struct {
	s *client.Socket

	emitMu sync.Mutex
	mu     sync.Mutex
	closed bool
	disc   []func(reason string)
	// lostReason, once set, is the reason reported for a connection whose
	// engine the library closed behind the socket's back (engineLost).
	lostReason atomic.Pointer[string]
}

// engineLost handles the library calling the open callback with err after
// the connection was established: the manager has dropped its listeners
// and closed the engine, so the socket would stay "connected" and deaf.
// The socket is disconnected instead, and the disconnect listeners hear
// "transport close".
func (c *Client) engineLost(error) {
	reason := "transport close"
	if !c.lostReason.CompareAndSwap(nil, &reason) {
		return
	}
	// Not on the library's goroutine, which may hold its own locks.
	go c.s.Disconnect()
}

// Dial connects to the Socket.IO server at baseURL (scheme://host:port) and
// waits until the connection is accepted, refused (*ConnectError), fails, or
// ctx ends.
//
// The library registers its own listeners only after it started opening
// the connection, so on a loaded machine the engine's "open" or the
// server's CONNECT reply is occasionally missed and the attempt stalls with
// the transport open. Dial notices a transport that stays open without a
// Socket.IO connect for StallTimeout, or an attempt that times out, and
// tries again (up to 5 attempts); a refusal by the server is final.
func Dial(ctx context.Context, baseURL string, opts Options) (*Client, error) {
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		c, stalled, err := dialOnce(ctx, baseURL, opts)
		if err == nil {
			return c, nil
		}
		last = err
		if !stalled || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, last
}

// StallTimeout is how long an open transport may wait for the Socket.IO
// connect before Dial gives the attempt up as lost (at most half the
// connect timeout).
const StallTimeout = 750 * time.Millisecond

// managerOptions returns the library options of one attempt and the time
// the attempt may take (opts.ConnectTimeout, DefaultConnectTimeout when
// zero).
func managerOptions(opts Options) (*client.Options, time.Duration) {
	o := client.DefaultOptions()
	path := opts.Path
	if path == "" {
		path = DefaultPath
	}
	o.SetPath(path)
	o.SetTransports(types.NewSet(client.WebSocket))
	if opts.Auth != nil {
		o.SetAuth(opts.Auth)
	}
	if opts.Header != nil {
		o.SetExtraHeaders(opts.Header)
	}
	o.SetForceNew(true)
	o.SetMultiplex(false)
	o.SetAutoConnect(false)
	o.SetReconnection(false)
	ct := opts.ConnectTimeout
	if ct <= 0 {
		ct = DefaultConnectTimeout
	}
	// The library's own connect timer is armed only after the connection
	// started opening, so an open that wins that race leaves it running;
	// when it fires it closes the engine of a connected socket without the
	// socket ever hearing of it (a silent, dead connection). Dial bounds
	// the attempt itself (deadline below), so the library's timer is set
	// out of reach.
	o.SetTimeout(libraryConnectTimeout)
	o.SetParser(fixParser{})
	return o, ct
}

func dialOnce(ctx context.Context, baseURL string, opts Options) (*Client, bool, error) {
	o, ct := managerOptions(opts)

	deadline := time.NewTimer(ct)
	defer deadline.Stop()
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()

	// Step 1: open the transport through the manager alone. Socket.Connect
	// on a manager that is still opening can send CONNECT twice (once from
	// its "open" listener, once directly), which makes the server close the
	// connection; on an open manager it sends it once.
	m := client.NewManager(baseURL, o)
	opened := make(chan error, 1)
	// cl is the client once Dial has returned it. The library may call
	// this callback again with an error after a successful open (its
	// connect timer or error listener outliving the open, see above); the
	// manager has then dropped its listeners and closed the engine, and
	// the client is told it lost the connection.
	var cl atomic.Pointer[Client]
	m.Open(func(err error) {
		if c := cl.Load(); c != nil {
			if err != nil {
				c.engineLost(err)
			}
			return
		}
		select {
		case opened <- err:
		default:
		}
	})
	stallAfter := StallTimeout
	if ct/2 < stallAfter {
		stallAfter = ct / 2
	}
	var openSince time.Time
	everOpen := false
	stalled := func() bool {
		if eng := m.Engine(); eng != nil && eng.ReadyState() == "open" {
			everOpen = true
			if openSince.IsZero() {
				openSince = time.Now()
			}
			return time.Since(openSince) >= stallAfter
		}
		openSince = time.Time{}
		return false
	}
	// closeAll ends a failed attempt. Closing the engine alone leaves the
	// manager's subscriptions in place, among them its connect timer, whose
	// goroutine would then wait for libraryConnectTimeout; the manager
	// closes itself (clearing them) when its last socket is disconnected,
	// so the namespace socket is disconnected too (created, unconnected,
	// when step 1 failed).
	closeAll := func() {
		m.Socket("/", o).Disconnect()
		if eng := m.Engine(); eng != nil {
			eng.Close()
		}
	}
wait:
	for {
		select {
		case err := <-opened:
			if err != nil {
				closeAll()
				// The library reports a refused connection as "timeout"
				// too; only a transport that did open is worth a retry.
				return nil, everOpen, fmt.Errorf("sio: connect %s: %w", baseURL, err)
			}
			break wait
		case <-poll.C:
			if stalled() {
				closeAll()
				return nil, true, fmt.Errorf("sio: connect %s: transport open but not reported after %s", baseURL, stallAfter)
			}
		case <-deadline.C:
			closeAll()
			return nil, everOpen, fmt.Errorf("sio: connect %s: timed out after %s", baseURL, ct)
		case <-ctx.Done():
			closeAll()
			return nil, false, fmt.Errorf("sio: connect %s: %w", baseURL, ctx.Err())
		}
	}

	// Step 2: join the default namespace with the auth object.
	s := m.Socket("/", o)
	c := &Client{s: s}
	result := make(chan error, 1)
	var once sync.Once
	report := func(err error) { once.Do(func() { result <- err }) }
	_ = s.On("connect", func(...any) { report(nil) })
	_ = s.On("connect_error", func(a ...any) {
		msg := "connect error"
		if len(a) > 0 {
			if e, ok := a[0].(error); ok {
				msg = e.Error()
			}
		}
		report(&ConnectError{Message: msg})
	})
	_ = s.On("disconnect", func(a ...any) {
		reason := ""
		if len(a) > 0 {
			reason, _ = a[0].(string)
		}
		if r := c.lostReason.Load(); r != nil {
			reason = *r
		}
		c.mu.Lock()
		fns := append([]func(string){}, c.disc...)
		c.mu.Unlock()
		for _, fn := range fns {
			fn(reason)
		}
	})
	s.Connect()
	openSince = time.Time{}
	established := func() (*Client, bool, error) {
		c, stalled, err := c.verify(baseURL, closeAll)
		if err != nil {
			return c, stalled, err
		}
		cl.Store(c)
		// An error the callback queued before cl was set.
		select {
		case err := <-opened:
			if err != nil {
				c.engineLost(err)
			}
		default:
		}
		return c, false, nil
	}
	for {
		select {
		case err := <-opened:
			if err != nil {
				// The engine was closed under an opening socket.
				s.Disconnect()
				closeAll()
				return nil, true, fmt.Errorf("sio: connect %s: connection lost during the handshake: %w", baseURL, err)
			}
		case err := <-result:
			if err != nil {
				s.Disconnect()
				closeAll()
				return nil, false, err
			}
			return established()
		case <-poll.C:
			if s.Connected() {
				return established()
			}
			if stalled() {
				// The server's CONNECT reply was lost by the library.
				s.Disconnect()
				closeAll()
				return nil, true, fmt.Errorf("sio: connect %s: no Socket.IO connect after %s", baseURL, stallAfter)
			}
		case <-deadline.C:
			s.Disconnect()
			closeAll()
			return nil, true, fmt.Errorf("sio: connect %s: timed out after %s", baseURL, ct)
		case <-ctx.Done():
			s.Disconnect()
			closeAll()
			return nil, false, fmt.Errorf("sio: connect %s: %w", baseURL, ctx.Err())
		}
	}
}

// verify makes one `ping` round trip (the relay contract's application
// ping, acked with {}): the library occasionally loses a connection right
// after the handshake, and a dial should only succeed on a connection that
// carries events.
func (c *Client) verify(baseURL string, closeAll func()) (*Client, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StallTimeout)
	defer cancel()
	if _, err := c.Call(ctx, "ping"); err != nil {
		c.s.Disconnect()
		closeAll()
		return nil, true, fmt.Errorf("sio: connect %s: connection lost right after the handshake: %w", baseURL, err)
	}
	return c, false, nil
}

// ID is the socket id the server assigned ("" while disconnected).
func (c *Client) ID() string { return c.s.Id() }

// Connected reports whether the socket is connected now.
func (c *Client) Connected() bool { return c.s.Connected() }

// On registers h for the server event name. Handlers of one client run one
// at a time, in the order the server sent the events.
func (c *Client) On(event string, h Handler) {
	_ = c.s.On(types.EventName(event), func(a ...any) {
		var ack func(...any)
		if n := len(a); n > 0 {
			if fn, ok := a[n-1].(func([]any, error)); ok {
				a = a[:n-1]
				ack = func(reply ...any) { fn(reply, nil) }
			}
		}
		h(a, ack)
	})
}

// OnDisconnect registers fn, called with the library's reason ("io server
// disconnect", "transport close", …) each time the connection is lost.
func (c *Client) OnDisconnect(fn func(reason string)) {
	c.mu.Lock()
	c.disc = append(c.disc, fn)
	c.mu.Unlock()
}

func (c *Client) ready() error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if !c.s.Connected() {
		return ErrNotConnected
	}
	return nil
}

// Emit sends event with args and does not wait for an acknowledgement.
func (c *Client) Emit(event string, args ...any) error {
	if err := c.ready(); err != nil {
		return fmt.Errorf("sio: emit %s: %w", event, err)
	}
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	if err := c.s.Emit(event, args...); err != nil {
		return fmt.Errorf("sio: emit %s: %w", event, err)
	}
	return nil
}

// Call sends event with args and waits for the server's acknowledgement,
// returning its values. It gives up when ctx ends, or after
// DefaultAckTimeout when ctx has no deadline.
func (c *Client) Call(ctx context.Context, event string, args ...any) ([]any, error) {
	if err := c.ready(); err != nil {
		return nil, fmt.Errorf("sio: call %s: %w", event, err)
	}
	timeout := DefaultAckTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return nil, fmt.Errorf("sio: call %s: %w", event, context.DeadlineExceeded)
		}
	}
	type reply struct {
		args []any
		err  error
	}
	done := make(chan reply, 1)
	c.emitMu.Lock()
	c.s.Timeout(timeout).EmitWithAck(event, args...)(func(a []any, err error) {
		// The library may call an ack callback twice (the acknowledgement
		// and then its timeout): the first result wins, a second must not
		// block the library's goroutine.
		select {
		case done <- reply{a, err}:
		default:
		}
	})
	c.emitMu.Unlock()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("sio: call %s: %w", event, r.err)
		}
		return r.args, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("sio: call %s: %w", event, ctx.Err())
	}
}

// Close disconnects without reconnecting. It is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.s.Disconnect()
	return nil
}

// fixParser is the default Socket.IO parser with a decoder that repairs
// CONNECT_ERROR packets lacking `data` (see the package comment).
type fixParser struct{}

func (fixParser) NewEncoder() parser.Encoder { return parser.NewEncoder() }

func (fixParser) NewDecoder() parser.Decoder { return newFixDecoder() }

type fixDecoder struct {
	types.EventEmitter
	inner parser.Decoder
}

func newFixDecoder() *fixDecoder {
	d := &fixDecoder{EventEmitter: types.NewEventEmitter(), inner: parser.NewDecoder()}
	_ = d.inner.On("decoded", func(a ...any) {
		for _, p := range a {
			if pk, ok := p.(*parser.Packet); ok {
				FixConnectError(pk)
			}
		}
		d.Emit("decoded", a...)
	})
	return d
}

// FixConnectError gives a CONNECT_ERROR packet the fields the client library
// requires: a `message` string (kept when present) and a non-nil `data`.
// Other packets are left alone.
func FixConnectError(p *parser.Packet) {
	if p == nil || p.Type != parser.CONNECT_ERROR {
		return
	}
	m, ok := p.Data.(map[string]any)
	if !ok || m == nil {
		msg := "connection refused"
		if s, ok := p.Data.(string); ok && s != "" {
			msg = s
		}
		m = map[string]any{"message": msg}
	}
	if _, ok := m["message"].(string); !ok {
		m["message"] = "connection refused"
	}
	if m["data"] == nil {
		m["data"] = map[string]any{}
	}
	p.Data = m
}

func (d *fixDecoder) Add(data any) error { return d.inner.Add(data) }

func (d *fixDecoder) Destroy() {
	d.inner.Destroy()
	d.Clear()
}
