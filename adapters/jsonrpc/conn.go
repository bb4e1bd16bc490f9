// Package jsonrpc speaks line-delimited JSON-RPC 2.0 with a child process
// over its stdin and stdout (Codex app-server and mcp-server, ACP agents).
//
// One frame is one line of JSON. Incoming frames may carry the "jsonrpc"
// member or not (Codex omits it); outgoing frames carry it unless
// Options.OmitVersion is set. The wire library (sourcegraph/jsonrpc2) stays
// behind this package's small API.
//
// Guarantees:
//
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
//     never passed on and never panics: it becomes a agent.Dropped with a
//     reason, given to Options.OnDropped, and reading goes on.
//   - Options.Tap sees every frame in both directions (and, for a child
//     process, stderr lines and the exit status) in one total order; a
//     Recorder writes them as a traffic log.
package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

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

// Frame is one unit of traffic seen by a Tap, in the traffic log's terms:
// Dir is c2a (we wrote it), a2c (the peer wrote it), stderr (a line of the
// child's stderr), exit (the child ended; Data is {"code":…,"sig":…}).
// For c2a and a2c, Data is the frame as written on the pipe (without the
// newline); JSON is false when it is not valid JSON (Data is then the raw
// line, or its first 512 bytes when oversize). Time is when it was seen.
type Frame struct {
	Time time.Time
	Dir  trafficlog.Dir
	Data []byte
	JSON bool
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
func (in *Incoming) Reply(ctx context.Context, result any) error {
	if in.Notif {
		return fmt.Errorf("jsonrpc: reply to notification %s", in.Method)
	}
	if !in.replied.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s %s", ErrAlreadyReplied, in.Method, in.ID)
	}
	if err := in.conn.rpc.Reply(ctx, toWireID(in.ID), result); err != nil {
		return in.conn.wrapErr(fmt.Sprintf("reply to %s %s", in.Method, in.ID), err)
	}
	return nil
}

// Fail answers the request with a JSON-RPC error.
// Errors: ErrAlreadyReplied, ErrClosed, or a write error.
func (in *Incoming) Fail(ctx context.Context, code int64, message string) error {
	if in.Notif {
		return fmt.Errorf("jsonrpc: fail notification %s", in.Method)
	}
	if !in.replied.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: %s %s", ErrAlreadyReplied, in.Method, in.ID)
	}
	if err := in.conn.rpc.ReplyWithError(ctx, toWireID(in.ID), &jsonrpc2.Error{Code: code, Message: message}); err != nil {
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

// Conn is a JSON-RPC connection over a byte stream. It is safe for
// concurrent use.
type Conn struct {
	rpc     *jsonrpc2.Conn
	opts    Options
	nextID  atomic.Uint64
	tapMu   sync.Mutex
	closeMu sync.Mutex
	cause   error
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
	c := &Conn{opts: opts}
	// MaxFrame > 0 always, so New cannot fail.
	lr, _ := linereader.New(rwc, linereader.Options{MaxLine: opts.MaxFrame})
	s := &stream{conn: c, rwc: rwc, lr: lr, ready: make(chan struct{})}
	ad := &handlerAdapter{conn: c, h: h, s: s}
	c.rpc = jsonrpc2.NewConn(ctx, s, ad,
		jsonrpc2.SetLogger(zlogAdapter{opts.Logger}),
		jsonrpc2.OnRecv(func(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
			if req == nil && resp != nil {
				c.drop(agent.Dropped{
					Source: c.opts.Source, Kind: "response", Reason: agent.DropOrphan,
					Detail: "response to unknown request id " + resp.ID.String(),
					Raw:    string(mapperPrefix(s.last, 512)),
				})
			}
		}))
	close(s.ready)
	return c
}

// Done is closed when the connection has stopped.
func (c *Conn) Done() <-chan struct{} { return c.rpc.DisconnectNotify() }

// Err says why the connection stopped: nil while it runs and after a clean
// EOF or Close, else the read error.
func (c *Conn) Err() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	return c.cause
}

// Close stops the connection and closes the underlying stream. Pending
// calls fail with ErrClosed.
func (c *Conn) Close() error {
	err := c.rpc.Close()
	if errors.Is(err, jsonrpc2.ErrClosed) {
		return nil
	}
	return err
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
	if d <= 0 {
		d = c.opts.CallTimeout
	}
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
	w      jsonrpc2.Waiter
}

// ID is the request id the call was sent with.
func (p *Pending) ID() ID { return p.id }

// Wait waits up to d (> 0; Options.CallTimeout otherwise) for the response
// and decodes its result into result (unless nil). Errors as Call.
func (p *Pending) Wait(ctx context.Context, d time.Duration, result any) error {
	if d <= 0 {
		d = p.c.opts.CallTimeout
	}
	tctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var raw json.RawMessage
	err := p.w.Wait(tctx, &raw)
	switch {
	case err == nil:
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return fmt.Errorf("%w: %s (id %s) after %s", ErrTimeout, p.method, p.id, d)
	default:
		var re *jsonrpc2.Error
		if errors.As(err, &re) {
			return &RPCError{Method: p.method, Code: re.Code, Message: re.Message, Data: rawData(re.Data)}
		}
		return p.c.wrapErr("call "+p.method, err)
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("jsonrpc: decode result of %s: %w", p.method, err)
	}
	return nil
}

// Dispatch sends a request without waiting; Wait on the result later.
// Errors: ErrClosed, or a marshalling/write error.
func (c *Conn) Dispatch(ctx context.Context, method string, params any) (*Pending, error) {
	id := ID{Num: c.nextID.Add(1)}
	w, err := c.rpc.DispatchCall(ctx, method, params, jsonrpc2.PickID(toWireID(id)))
	if err != nil {
		return nil, c.wrapErr("send "+method, err)
	}
	return &Pending{c: c, method: method, id: id, w: w}, nil
}

// Notify sends a notification. Errors: ErrClosed, or a marshalling/write
// error.
func (c *Conn) Notify(ctx context.Context, method string, params any) error {
	if err := c.rpc.Notify(ctx, method, params); err != nil {
		return c.wrapErr("notify "+method, err)
	}
	return nil
}

// tap hands a frame to the Tap and the Recorder, serialised.
func (c *Conn) tap(dir trafficlog.Dir, data []byte, isJSON bool) {
	if c.opts.Tap == nil && c.opts.Recorder == nil {
		return
	}
	c.tapMu.Lock()
	defer c.tapMu.Unlock()
	f := Frame{Time: c.opts.Now(), Dir: dir, Data: data, JSON: isJSON}
	if c.opts.Recorder != nil {
		if err := c.opts.Recorder.Record(f); err != nil {
			c.opts.Logger.Warn().Err(err).Str("dir", string(dir)).Msg("traffic log write failed")
		}
	}
	if c.opts.Tap != nil {
		c.opts.Tap(f)
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
	if errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(err, io.ErrClosedPipe) {
		return fmt.Errorf("jsonrpc: %s: %w", what, ErrClosed)
	}
	return fmt.Errorf("jsonrpc: %s: %w", what, err)
}

func toWireID(id ID) jsonrpc2.ID { return jsonrpc2.ID{Num: id.Num, Str: id.Str, IsString: id.IsString} }

func rawData(d *json.RawMessage) json.RawMessage {
	if d == nil {
		return nil
	}
	return *d
}

// handlerAdapter turns the wire library's requests into Incoming values.
type handlerAdapter struct {
	conn *Conn
	h    Handler
	s    *stream
}

func (a *handlerAdapter) Handle(ctx context.Context, _ *jsonrpc2.Conn, req *jsonrpc2.Request) {
	// The stream decoded this very frame just before (same goroutine).
	m := a.s.lastMsg
	in := &Incoming{Method: m.Method, ID: m.ID, Notif: m.Kind == KindNotification, Params: m.Params, Raw: m.Raw, conn: a.conn}
	if req.Method != m.Method { // cannot happen; keep the library's view if it does
		in.Method = req.Method
	}
	if a.h == nil {
		if !in.Notif {
			_ = in.Fail(ctx, CodeMethodNotFound, "method not found: "+in.Method)
		}
		return
	}
	a.h.Handle(ctx, in)
}

// stream implements the wire library's ObjectStream over lines.
type stream struct {
	conn *Conn
	rwc  io.ReadWriteCloser
	lr   *linereader.Reader

	wmu sync.Mutex

	// ready is closed once the Conn is fully built: the library starts
	// reading inside its constructor, and a handler that answers at once
	// must find the Conn's fields set.
	ready chan struct{}

	// Read side, touched only by the reading goroutine.
	last    []byte  // raw bytes of the last frame returned
	lastMsg Message // its decoding
	eof     bool
}

// ReadObject returns the next well-formed frame, dropping malformed ones.
func (s *stream) ReadObject(v any) error {
	<-s.ready
	c := s.conn
	for {
		if s.eof {
			return io.EOF
		}
		line, err := s.lr.Next()
		var data []byte
		switch {
		case err == nil:
			data = line.Data
		case errors.Is(err, io.EOF):
			// The peer closed its end; a last line without newline is a frame too.
			s.eof = true
			data = s.lr.Pending()
			if len(data) == 0 {
				return io.EOF
			}
			line = linereader.Line{Number: s.lr.LineNumber() + 1, Size: int64(len(data))}
		default:
			c.setCause(err)
			return err
		}
		if line.Oversize {
			c.tap(trafficlog.A2C, append([]byte(nil), line.Data...), false)
			c.drop(agent.Dropped{Source: c.opts.Source, Line: line.Number, Reason: agent.DropOversize,
				Detail: fmt.Sprintf("frame of %d bytes exceeds %d", line.Size, c.opts.MaxFrame),
				Raw:    string(line.Data)})
			continue
		}
		if len(trimSpace(data)) == 0 {
			continue
		}
		data = append([]byte(nil), trimSpace(data)...)
		m, derr := DecodeFrame(data)
		c.tap(trafficlog.A2C, data, derr == nil || json.Valid(data))
		if derr != nil {
			kind, reason, detail := DropOf(derr)
			c.drop(agent.Dropped{Source: c.opts.Source, Line: line.Number, Kind: kind, Reason: reason,
				Detail: detail, Raw: string(mapperPrefix(data, 512))})
			continue
		}
		// Decode into a fresh value so a failed attempt never leaves state
		// behind in v.
		nv := reflect.New(reflect.TypeOf(v).Elem())
		if err := json.Unmarshal(data, nv.Interface()); err != nil {
			c.drop(agent.Dropped{Source: c.opts.Source, Line: line.Number, Kind: m.Method, Reason: agent.DropInvalidField,
				Detail: err.Error(), Raw: string(mapperPrefix(data, 512))})
			continue
		}
		reflect.ValueOf(v).Elem().Set(nv.Elem())
		s.last, s.lastMsg = data, m
		return nil
	}
}

// WriteObject writes one frame and its newline.
func (s *stream) WriteObject(obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode frame: %w", err)
	}
	if s.conn.opts.OmitVersion {
		if data, err = stripVersion(data); err != nil {
			return err
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.conn.tap(trafficlog.C2A, data, true)
	buf := make([]byte, 0, len(data)+1)
	buf = append(append(buf, data...), '\n')
	if _, err := s.rwc.Write(buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	return nil
}

func (s *stream) Close() error { return s.rwc.Close() }

func (c *Conn) setCause(err error) {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.cause == nil {
		c.cause = err
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// zlogAdapter routes the wire library's log lines to zerolog.
type zlogAdapter struct{ l zerolog.Logger }

func (z zlogAdapter) Printf(format string, v ...any) {
	z.l.Debug().Msgf(format, v...)
}

// Note records a remark of ours in the traffic (a note frame, tapped and
// recorded in order with the rest): msg is a JSON value, or any text when
// it is not valid JSON.
func (c *Conn) Note(msg []byte) {
	c.tap(trafficlog.Note, msg, json.Valid(msg))
}
