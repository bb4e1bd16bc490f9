// Package jsonrpc speaks line-delimited JSON-RPC 2.0 with a child process
// over its stdin and stdout (Codex app-server and mcp-server, ACP agents),
// and reads the traffic logs such a connection records.
//
// One frame is one line of JSON. Incoming frames may carry the "jsonrpc"
// member or not (Codex omits it); outgoing frames carry it unless
// Options.OmitVersion is set.
//
// Guarantees:
//
//   - Every incoming frame is parsed once (DecodeFrame): the Tap, the
//     Handler and the call waiting for a response all get that one
//     decoding; an outgoing frame is described by the Message it was built
//     from, never parsed back.
//   - Notifications and incoming requests are handed to the Handler one at a
//     time, in arrival order, on the reading goroutine.
//   - The response to one of our calls is delivered only after every frame
//     received before it has been handled, so "the turn ended" seen in a
//     notification is never overtaken by the response that follows it.
//   - An incoming request is answered asynchronously (Incoming.Reply, from
//     any goroutine, at any time): a pending approval never blocks reading.
//   - Every outgoing call has a timeout (Options.CallTimeout unless the
//     caller's context ends sooner). A response that arrives after its call
//     gave up is discarded; one for an id never sent is counted as Dropped.
//   - A malformed frame (not JSON, not an object, bad members, oversize) is
//     never passed on and never panics: it becomes an agent.Dropped with a
//     reason, given to Options.OnDropped, and reading goes on.
//   - Options.Tap sees every frame in both directions (and, for a child
//     process, stderr lines and the exit status) in one total order; a
//     Recorder writes them as a traffic log.
package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// Defaults of Options.
const (
	DefaultCallTimeout = 60 * time.Second
	DefaultMaxFrame    = 64 << 20 // bytes
	DefaultSource      = "jsonrpc"
)

// Errors callers branch on.
var (
	// ErrClosed: the connection is closed (peer gone or Close called).
	ErrClosed = errors.New("jsonrpc: connection closed")
	// ErrTimeout: a call got no response within its timeout.
	ErrTimeout = errors.New("jsonrpc: call timed out")
	// ErrAlreadyReplied: Incoming.Reply or Fail called a second time.
	ErrAlreadyReplied = errors.New("jsonrpc: request already answered")
)

// Standard JSON-RPC error codes.
const (
	CodeParseError     int64 = -32700
	CodeInvalidRequest int64 = -32600
	CodeMethodNotFound int64 = -32601
	CodeInvalidParams  int64 = -32602
	CodeInternalError  int64 = -32603
)

// RPCError is the error a peer answered a call with.
type RPCError struct {
	Method  string
	Code    int64
	Message string
	Data    json.RawMessage
}

// Error renders "json-rpc <method>: error <code>: <message>".
func (e *RPCError) Error() string {
	return fmt.Sprintf("json-rpc %s: error %d: %s", e.Method, e.Code, e.Message)
}

// Incoming is a notification or a request from the peer, handed to the
// Handler. For a request, exactly one of Reply and Fail must be called,
// from any goroutine, now or later.
type Incoming struct {
	Method string
	ID     ID // requests only
	Notif  bool
	Params json.RawMessage // nil when absent
	Raw    json.RawMessage // the whole frame as read

	conn    *Conn
	replied atomic.Bool
}

// Reply answers the request with result (marshalled to JSON).
// Errors: ErrAlreadyReplied, ErrClosed, or a marshalling/write error.
func (in *Incoming) Reply(_ context.Context, result any) error {
	if in.Notif {
		return fmt.Errorf("jsonrpc: reply to notification %s", in.Method)
	}
	if !in.replied.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s %s", ErrAlreadyReplied, in.Method, in.ID)
	}
	raw, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("jsonrpc: reply to %s %s: encode result: %w", in.Method, in.ID, err)
	}
	if err := in.conn.write(&Message{Kind: KindResponse, ID: in.ID, Result: raw}); err != nil {
		return in.conn.wrapErr(fmt.Sprintf("reply to %s %s", in.Method, in.ID), err)
	}
	return nil
}

// Fail answers the request with a JSON-RPC error.
// Errors: ErrAlreadyReplied, ErrClosed, or a write error.
func (in *Incoming) Fail(_ context.Context, code int64, message string) error {
	if in.Notif {
		return fmt.Errorf("jsonrpc: fail notification %s", in.Method)
	}
	if !in.replied.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s %s", ErrAlreadyReplied, in.Method, in.ID)
	}
	m := &Message{Kind: KindResponse, ID: in.ID, Error: &ErrorObject{Code: code, Message: message}}
	if err := in.conn.write(m); err != nil {
		return in.conn.wrapErr(fmt.Sprintf("fail %s %s", in.Method, in.ID), err)
	}
	return nil
}

// Replied reports whether Reply or Fail was called.
func (in *Incoming) Replied() bool { return in.replied.Load() }

// Handler receives the peer's notifications and requests, one at a time,
// in arrival order, on the reading goroutine. Handle must return promptly
// and must not wait for the response of a call on the same connection
// (start a goroutine for that): reading stops while it runs. A request is
// answered with in.Reply / in.Fail, possibly after Handle returned.
type Handler interface {
	Handle(ctx context.Context, in *Incoming)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, in *Incoming)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, in *Incoming) { f(ctx, in) }

// Options configure a connection. The zero value works.
type Options struct {
	// OmitVersion writes frames without the "jsonrpc":"2.0" member.
	OmitVersion bool
	// CallTimeout bounds every call whose context has no earlier deadline;
	// 0 means DefaultCallTimeout.
	CallTimeout time.Duration
	// MaxFrame is the largest incoming frame in bytes; longer lines are
	// dropped as oversize. 0 means DefaultMaxFrame.
	MaxFrame int
	// Source names the stream in Dropped records; "" means DefaultSource.
	Source string
	// OnDropped receives every refused incoming frame (and every response
	// to an unknown id). It runs on the reading goroutine.
	OnDropped func(agent.Dropped)
	// Tap sees every frame (see Frame), serialised: calls never overlap and
	// their order is the order frames crossed the pipe.
	Tap func(Frame)
	// Recorder, when set, writes every frame as a traffic log record.
	Recorder Recorder
	// Logger receives protocol diagnostics; the zero value discards them.
	Logger zerolog.Logger
	// Now is the clock stamping frames; nil means time.Now.
	Now func() time.Time
}

// reply is what a response gives the call waiting for it.
type reply struct {
	result json.RawMessage
	err    *ErrorObject
}

// Conn is a JSON-RPC connection over a byte stream. It is safe for
// concurrent use.
type Conn struct {
	opts   Options
	rwc    io.ReadWriteCloser
	lr     *linereader.Reader
	h      Handler
	ctx    context.Context // handed to the Handler; cancelled when the connection stops
	cancel context.CancelFunc
	nextID atomic.Uint64
	done   chan struct{}
	tapMu  sync.Mutex
	wmu    sync.Mutex // one frame written at a time, tapped in write order

	eof bool // the reading goroutine saw the end of the stream

	mu     sync.Mutex
	calls  map[uint64]chan reply // calls waiting for their response, by id
	late   map[uint64]bool       // calls that gave up: their response is discarded
	closed bool
	cause  error
}

// New starts a connection over rwc (the child's stdout for reading, its
// stdin for writing) and begins reading at once. It stops when ctx ends,
// when Close is called or when the stream reaches EOF; Done then closes.
func New(ctx context.Context, rwc io.ReadWriteCloser, h Handler, opts Options) *Conn {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxFrame <= 0 {
		opts.MaxFrame = DefaultMaxFrame
	}
	if opts.Source == "" {
		opts.Source = DefaultSource
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// MaxFrame > 0 always, so linereader.New cannot fail.
	lr, _ := linereader.New(rwc, linereader.Options{MaxLine: opts.MaxFrame})
	c := &Conn{opts: opts, rwc: rwc, lr: lr, h: h, done: make(chan struct{}),
		calls: map[uint64]chan reply{}, late: map[uint64]bool{}}
	c.ctx, c.cancel = context.WithCancel(ctx)
	context.AfterFunc(c.ctx, func() { _ = c.shut(nil) })
	go c.read()
	return c
}

// Done is closed when the connection has stopped.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection stopped: nil while it runs and after a clean
// EOF or Close, else the read error.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// Close stops the connection and closes the underlying stream. Pending
// calls fail with ErrClosed. Closing twice is harmless.
func (c *Conn) Close() error { return c.shut(nil) }

// shut stops the connection once: calls still waiting fail, the Handler's
// context is cancelled and the stream closed. cause is a read error (nil
// for EOF and Close).
func (c *Conn) shut(cause error) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.cause = cause
	for id, ch := range c.calls {
		close(ch)
		delete(c.calls, id)
	}
	c.mu.Unlock()
	close(c.done)
	c.cancel()
	return c.rwc.Close()
}

// Call sends a request and waits for its response, decoding the result
// into result (unless nil). It gives up after Options.CallTimeout or when
// ctx ends. Errors: *RPCError when the peer answered with an error,
// ErrTimeout, ErrClosed, ctx.Err(), or a marshalling error.
func (c *Conn) Call(ctx context.Context, method string, params, result any) error {
	return c.CallTimeout(ctx, c.opts.CallTimeout, method, params, result)
}

// CallTimeout is Call with an explicit timeout d (> 0).
func (c *Conn) CallTimeout(ctx context.Context, d time.Duration, method string, params, result any) error {
	w, err := c.Dispatch(ctx, method, params)
	if err != nil {
		return err
	}
	return w.Wait(ctx, d, result)
}

// Pending is a call that was sent and awaits its response.
type Pending struct {
	c      *Conn
	method string
	id     ID
	ch     chan reply
}

// ID is the request id the call was sent with.
func (p *Pending) ID() ID { return p.id }

// Wait waits up to d (> 0; Options.CallTimeout otherwise) for the response
// and decodes its result into result (unless nil). Errors as Call. A
// response that comes after Wait gave up is discarded.
func (p *Pending) Wait(ctx context.Context, d time.Duration, result any) error {
	if d <= 0 {
		d = p.c.opts.CallTimeout
	}
	t := time.NewTimer(d)
	defer t.Stop()
	var r reply
	var ok bool
	select {
	case r, ok = <-p.ch:
	case <-ctx.Done():
	case <-t.C:
	}
	if !ok {
		// A response that came at the same moment still wins.
		select {
		case r, ok = <-p.ch:
		default:
		}
	}
	switch {
	case ok:
	case p.c.giveUp(p.id.Num):
		if ctx.Err() != nil {
			return p.c.wrapErr("call "+p.method, ctx.Err())
		}
		return fmt.Errorf("%w: %s (id %s) after %s", ErrTimeout, p.method, p.id, d)
	default: // the channel was closed: the connection stopped
		return p.c.wrapErr("call "+p.method, ErrClosed)
	}
	if r.err != nil {
		return &RPCError{Method: p.method, Code: r.err.Code, Message: r.err.Message, Data: r.err.Data}
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.result, result); err != nil {
		return fmt.Errorf("jsonrpc: decode result of %s: %w", p.method, err)
	}
	return nil
}

// giveUp forgets the call id (its response, if it ever comes, is
// discarded) and reports whether it was still waiting; false means the
// connection stopped.
func (c *Conn) giveUp(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, waiting := c.calls[id]; !waiting {
		return false
	}
	delete(c.calls, id)
	c.late[id] = true
	return true
}

// Dispatch sends a request without waiting; Wait on the result later.
// Errors: ErrClosed, or a marshalling/write error.
func (c *Conn) Dispatch(_ context.Context, method string, params any) (*Pending, error) {
	m := &Message{Kind: KindRequest, Method: method, ID: ID{Num: c.nextID.Add(1)}}
	if err := m.setParams(params); err != nil {
		return nil, fmt.Errorf("jsonrpc: send %s: %w", method, err)
	}
	ch := make(chan reply, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.wrapErr("send "+method, ErrClosed)
	}
	c.calls[m.ID.Num] = ch
	c.mu.Unlock()
	if err := c.write(m); err != nil {
		c.mu.Lock()
		delete(c.calls, m.ID.Num)
		c.mu.Unlock()
		return nil, c.wrapErr("send "+method, err)
	}
	return &Pending{c: c, method: method, id: m.ID, ch: ch}, nil
}

// Notify sends a notification. Errors: ErrClosed, or a marshalling/write
// error.
func (c *Conn) Notify(_ context.Context, method string, params any) error {
	m := &Message{Kind: KindNotification, Method: method}
	if err := m.setParams(params); err != nil {
		return fmt.Errorf("jsonrpc: notify %s: %w", method, err)
	}
	if err := c.write(m); err != nil {
		return c.wrapErr("notify "+method, err)
	}
	return nil
}

// Note records a remark of ours in the traffic (a note frame, tapped and
// recorded in order with the rest): msg is a JSON value, or any text when
// it is not valid JSON.
func (c *Conn) Note(msg []byte) {
	c.tap(Frame{Dir: trafficlog.Note, Data: msg, JSON: json.Valid(msg)})
}

// write encodes m (see encode), taps it and writes it with its newline.
func (c *Conn) write(m *Message) error {
	m.Version = !c.opts.OmitVersion
	m.Raw = encode(m)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	c.tap(Frame{Dir: trafficlog.C2A, Data: m.Raw, JSON: true, Msg: *m})
	buf := make([]byte, 0, len(m.Raw)+1)
	if _, err := c.rwc.Write(append(append(buf, m.Raw...), '\n')); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

// tap stamps a frame and hands it to the Recorder and the Tap, serialised.
func (c *Conn) tap(f Frame) {
	if c.opts.Tap == nil && c.opts.Recorder == nil {
		return
	}
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	f.T = c.opts.Now().UnixMilli()
	if c.opts.Recorder != nil {
		if err := c.opts.Recorder.Record(f); err != nil {
			c.opts.Logger.Warn().Err(err).Str("dir", string(f.Dir)).Msg("traffic log write failed")
		}
	}
	if c.opts.Tap != nil {
		c.opts.Tap(f)
	}
}

// read is the reading goroutine: one frame at a time until the stream
// ends.
func (c *Conn) read() {
	for {
		data, n, err := c.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			_ = c.shut(err)
			return
		}
		c.receive(data, n)
	}
}

// next returns the next non-blank line (a copy, trimmed) and its number;
// an oversize line is tapped and dropped on the way. A last line without
// its newline counts. Errors: io.EOF at the end, or the read error.
func (c *Conn) next() ([]byte, int64, error) {
	for {
		if c.eof {
			return nil, 0, io.EOF
		}
		line, err := c.lr.Next()
		data := line.Data
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			// The peer closed its end; a last line without newline is a
			// frame too (an oversize one is dropped as such below).
			c.eof = true
			rest, ok := c.lr.Rest()
			if !ok || !rest.Oversize && len(bytes.TrimSpace(rest.Data)) == 0 {
				return nil, 0, io.EOF
			}
			line, data = rest, rest.Data
		default:
			return nil, 0, err
		}
		if line.Oversize {
			detail := line.OversizeDetail()
			c.tap(Frame{Dir: trafficlog.A2C, Data: append([]byte(nil), line.Data...),
				Err: frameErr(agent.DropOversize, "", "%s", detail)})
			c.drop(agent.Dropped{Source: c.opts.Source, Line: line.Number, Reason: agent.DropOversize,
				Detail: detail, Raw: string(line.Data)})
			if c.eof {
				return nil, 0, io.EOF
			}
			continue
		}
		if data = bytes.TrimSpace(data); len(data) > 0 {
			return append([]byte(nil), data...), line.Number, nil
		}
	}
}

// receive decodes one frame (the only time it is parsed), taps it and
// routes it: a response to the call waiting for it, anything else to the
// Handler.
func (c *Conn) receive(data []byte, n int64) {
	f := NewFrame(0, trafficlog.A2C, data)
	c.tap(f)
	if !f.HasMsg() {
		kind, reason, detail := DropOf(f.Err)
		c.drop(agent.Dropped{Source: c.opts.Source, Line: n, Kind: kind, Reason: reason,
			Detail: detail, Raw: agent.CutUTF8(string(data), agent.DroppedRawMax)})
		return
	}
	m := f.Msg
	if m.Kind == KindResponse {
		c.deliver(m, n)
		return
	}
	in := &Incoming{Method: m.Method, ID: m.ID, Notif: m.Kind == KindNotification, Params: m.Params, Raw: m.Raw, conn: c}
	if c.h == nil {
		if !in.Notif {
			_ = in.Fail(c.ctx, CodeMethodNotFound, "method not found: "+in.Method)
		}
		return
	}
	c.h.Handle(c.ctx, in)
}

// deliver hands a response to its call; a late one is discarded, one for
// an id never sent is dropped as an orphan.
func (c *Conn) deliver(m Message, n int64) {
	c.mu.Lock()
	var ch chan reply
	late := false
	if !m.ID.IsString {
		ch = c.calls[m.ID.Num]
		delete(c.calls, m.ID.Num)
		late = c.late[m.ID.Num]
		delete(c.late, m.ID.Num)
	}
	c.mu.Unlock()
	switch {
	case ch != nil:
		ch <- reply{result: m.Result, err: m.Error}
	case late:
		c.opts.Logger.Debug().Str("id", m.ID.String()).Msg("discarded a response that came after its call gave up")
	default:
		c.drop(agent.Dropped{Source: c.opts.Source, Line: n, Kind: "response", Reason: agent.DropOrphan,
			Detail: "response to unknown request id " + m.ID.String(),
			Raw:    agent.CutUTF8(string(m.Raw), agent.DroppedRawMax)})
	}
}

func (c *Conn) drop(d agent.Dropped) {
	c.opts.Logger.Warn().Str("source", d.Source).Str("reason", string(d.Reason)).Str("kind", d.Kind).
		Str("detail", d.Detail).Msg("dropped json-rpc frame")
	if c.opts.OnDropped != nil {
		c.opts.OnDropped(d)
	}
}

func (c *Conn) wrapErr(what string, err error) error {
	if errors.Is(err, ErrClosed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("jsonrpc: %s: %w", what, ErrClosed)
	}
	return fmt.Errorf("jsonrpc: %s: %w", what, err)
}
