package rpcagent

import (
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/queue"
)

// Config describes an adapter to its Link.
type Config struct {
	Settings
	// Source is the Dropped.Source of the connection's refused frames.
	Source string
	// OmitVersion writes frames without the "jsonrpc" member (Codex).
	OmitVersion bool
	// Decoder turns every frame, both directions, into events (the same
	// decoder a replay of the recorded traffic uses).
	Decoder jsonrpc.Decoder
	// Echo reports the events that only echo what a session runner
	// records itself (happy's prompts, its permission answers); once
	// RunnerRecordsControl was called they are left out. nil: none.
	Echo func(ev agent.Event, dir trafficlog.Dir) bool
	// Handler does the adapter's bookkeeping of the agent's requests and
	// notifications (see jsonrpc.Handler); nil refuses every request.
	Handler jsonrpc.Handler
	// OnGone runs once when the agent is gone (it exited and was not being
	// replaced, its stream ended, or Close), after its last frame was
	// decoded and before Events is closed.
	OnGone func()
}

// Link is the connection of an adapter to its agent: it starts the agent
// (Launch, Relaunch) or speaks over a stream (Attach), decodes every frame
// into events, in traffic order, and publishes them on Events. Safe for
// concurrent use.
type Link struct {
	cfg           Config
	q             *queue.Unbounded[agent.Event]
	runnerRecords atomic.Bool

	decMu sync.Mutex // decoding and publishing, frame by frame
	// held are the events of the agent's frame the Handler is still
	// doing its bookkeeping for (nil: none held). They are copied out of
	// the slice Decode returned, which is only valid until the decoder's
	// next frame, into heldBuf, reused once they are published (Push
	// copies them into the queue).
	held    []agent.Event
	heldBuf []agent.Event

	mu        sync.Mutex
	conn      *jsonrpc.Conn
	proc      *jsonrpc.Process
	gen       int  // the launch the current process belongs to
	replacing bool // Relaunch is stopping the current process
	goneOnce  sync.Once
	gone      chan struct{}
}

// NewLink returns a link that is not connected yet (Settings defaults
// applied).
func NewLink(cfg Config) *Link {
	cfg.Settings.Defaults()
	return &Link{cfg: cfg, q: queue.New[agent.Event](), gone: make(chan struct{})}
}

// Settings are the link's settings, defaults applied.
func (l *Link) Settings() Settings { return l.cfg.Settings }

// Logger is Settings.Logger.
func (l *Link) Logger() *zerolog.Logger { return &l.cfg.Logger }

func (l *Link) connOptions() jsonrpc.Options {
	o := jsonrpc.Options{
		OmitVersion: l.cfg.OmitVersion,
		CallTimeout: l.cfg.CallTimeout,
		Source:      l.cfg.Source,
		Tap:         l.tap,
		Logger:      l.cfg.Logger,
		Now:         l.cfg.Now,
	}
	if l.cfg.Record != nil {
		o.Recorder = jsonrpc.TrafficRecorder(l.cfg.Record)
	}
	return o
}

// Launch starts the agent process (cmd in its own process group; see
// jsonrpc.Start) and connects to it. When it exits the link is gone,
// unless Relaunch is replacing it. Cancelling ctx stops it. Errors: the
// start error.
func (l *Link) Launch(ctx context.Context, cmd *exec.Cmd) error {
	ready := make(chan struct{})
	p, err := jsonrpc.Start(ctx, cmd, l.handler(ready), l.connOptions())
	if err != nil {
		close(ready)
		return err
	}
	l.mu.Lock()
	l.conn, l.proc = p.Conn, p
	l.gen++
	gen := l.gen
	l.mu.Unlock()
	close(ready)
	go func() {
		<-p.Exited()
		l.mu.Lock()
		current := gen == l.gen && !l.replacing
		l.mu.Unlock()
		if current {
			l.shutdown()
		}
	}()
	return nil
}

// Relaunch stops the current process (stdin closed, StopGrace, then its
// group ended) without the link going away, and launches cmd in its place.
// Errors: the start error (the caller then closes the link).
func (l *Link) Relaunch(ctx context.Context, cmd *exec.Cmd) error {
	l.mu.Lock()
	old := l.proc
	l.replacing = true
	l.mu.Unlock()
	if old != nil {
		if err := old.Stop(l.cfg.StopGrace); err != nil {
			l.cfg.Logger.Warn().Err(err).Msg("stop the agent being replaced")
		}
	}
	err := l.Launch(ctx, cmd)
	l.mu.Lock()
	l.replacing = false
	l.mu.Unlock()
	return err
}

// Attach speaks to an agent over an already connected stream (a fake agent
// in tests): rwc carries the agent's output to read and its input to
// write. When the stream ends the link is gone.
func (l *Link) Attach(ctx context.Context, rwc io.ReadWriteCloser) {
	ready := make(chan struct{})
	conn := jsonrpc.New(ctx, rwc, l.handler(ready), l.connOptions())
	l.mu.Lock()
	l.conn = conn
	l.mu.Unlock()
	close(ready)
	go func() {
		<-conn.Done()
		l.shutdown()
	}()
}

// handler hands the agent's requests and notifications to the adapter's
// Handler once the link knows its connection (the connection starts
// reading before Launch or Attach has stored it), then publishes the events
// held for the frame.
func (l *Link) handler(ready <-chan struct{}) jsonrpc.Handler {
	return jsonrpc.HandlerFunc(func(ctx context.Context, in *jsonrpc.Incoming) {
		<-ready
		defer l.publishHeld()
		switch {
		case l.cfg.Handler != nil:
			l.cfg.Handler.Handle(ctx, in)
		case !in.Notif:
			_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "happy does not support "+in.Method)
		}
	})
}

// tap decodes every frame, in traffic order. The events of a request or
// notification from the agent are held until the Handler has done its
// bookkeeping for it; everything else is published at once (with what a
// frame that never reached the Handler left held).
func (l *Link) tap(f jsonrpc.Frame) {
	l.decMu.Lock()
	defer l.decMu.Unlock()
	evs := l.cfg.Decoder.Decode(f)
	if l.runnerRecords.Load() && l.cfg.Echo != nil {
		kept := evs[:0:0]
		for _, e := range evs {
			if !l.cfg.Echo(e, f.Dir) {
				kept = append(kept, e)
			}
		}
		evs = kept
	}
	if f.Dir != trafficlog.A2C {
		// Our own frames and the agent's stderr are tapped on other
		// goroutines, maybe while the Handler still does its bookkeeping
		// for the agent's last frame: their events queue behind that
		// frame's, which stay held until it is handled.
		if l.held != nil {
			l.held = append(l.held, evs...)
			return
		}
		l.q.Push(evs...)
		return
	}
	// The agent's frames come one at a time from the reading goroutine,
	// each after the Handler returned for the one before: what is still
	// held belongs to a frame that never reached the Handler.
	l.pushHeld()
	if f.HasMsg() && f.Msg.Kind != jsonrpc.KindResponse {
		// Held, even with no events of its own (non-nil).
		l.held = append(l.heldBuf[:0], evs...)
		if l.held == nil {
			l.held = []agent.Event{}
		}
		return
	}
	l.q.Push(evs...)
}

// pushHeld publishes the held events, if any, and keeps their buffer,
// cleared, for the next frame's. Called with decMu held.
func (l *Link) pushHeld() {
	if l.held == nil {
		return
	}
	l.q.Push(l.held...)
	clear(l.held)
	l.heldBuf, l.held = l.held[:0], nil
	if cap(l.heldBuf) > keptHeld {
		l.heldBuf = nil // a large frame's: let go, as the decoders do
	}
}

// keptHeld is the most events heldBuf keeps room for once published.
const keptHeld = 64

// publishHeld publishes the events held for the frame just handled.
func (l *Link) publishHeld() {
	l.decMu.Lock()
	defer l.decMu.Unlock()
	l.pushHeld()
}

// WithDecoder runs fn while no frame is being decoded, for a Handler that
// reads what the decoder learnt of the frame it handles.
func (l *Link) WithDecoder(fn func()) {
	l.decMu.Lock()
	defer l.decMu.Unlock()
	fn()
}

// RunnerRecordsControl says a session runner records happy's prompts and
// answers in the transcript itself: from now on Events leaves out their
// echo (Config.Echo). A recorded traffic log still replays with them.
func (l *Link) RunnerRecordsControl() { l.runnerRecords.Store(true) }

// Events delivers the agent's events in order. It is closed once the
// agent is gone and every event was delivered.
func (l *Link) Events() <-chan agent.Event { return l.q.Out() }

// Gone is closed once the agent is gone (its events may still be in
// flight on Events).
func (l *Link) Gone() <-chan struct{} { return l.gone }

// Conn is the current connection, nil before Launch or Attach.
func (l *Link) Conn() *jsonrpc.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn
}

// Call sends a request and waits for its response (see jsonrpc.Conn.Call).
// Errors: ErrClosed before the link is connected, else Call's.
func (l *Link) Call(ctx context.Context, method string, params, result any) error {
	conn := l.Conn()
	if conn == nil {
		return ErrClosed
	}
	return conn.Call(ctx, method, params, result)
}

// Dispatch sends a request without waiting (see jsonrpc.Conn.Dispatch).
// Errors: ErrClosed before the link is connected, else Dispatch's.
func (l *Link) Dispatch(ctx context.Context, method string, params any) (*jsonrpc.Pending, error) {
	conn := l.Conn()
	if conn == nil {
		return nil, ErrClosed
	}
	return conn.Dispatch(ctx, method, params)
}

// Notify sends a notification. Errors: ErrClosed before the link is
// connected, else Notify's.
func (l *Link) Notify(ctx context.Context, method string, params any) error {
	conn := l.Conn()
	if conn == nil {
		return ErrClosed
	}
	return conn.Notify(ctx, method, params)
}

// Note records a note of happy's in the traffic (a value marshalled to
// JSON; decoded like any frame, so a replay knows what only the client
// knew). Without a connection it is lost.
func (l *Link) Note(v any) {
	b, err := json.Marshal(v)
	if conn := l.Conn(); err == nil && conn != nil {
		conn.Note(b)
	}
}

// Close stops the agent: its stdin is closed and, after StopGrace, its
// process group ended (an attached stream is closed). It waits until every
// event was delivered (the consumer must keep reading Events). Closing
// twice is harmless. Errors: stopping the process.
func (l *Link) Close() error {
	l.mu.Lock()
	p, conn := l.proc, l.conn
	l.mu.Unlock()
	var err error
	switch {
	case p != nil:
		err = p.Stop(l.cfg.StopGrace)
	case conn != nil:
		err = conn.Close()
	}
	l.shutdown()
	l.q.Wait()
	return err
}

// shutdown runs once the agent is gone: after the exit frame (a process's,
// or a null one for a stream, which has no exit status; it is decoded, not
// recorded) was decoded, the adapter's OnGone runs and Events closes.
func (l *Link) shutdown() {
	l.goneOnce.Do(func() {
		l.mu.Lock()
		p, conn := l.proc, l.conn
		l.mu.Unlock()
		switch {
		case p != nil:
			<-p.Exited() // the exit frame was tapped
		case conn != nil:
			l.tap(jsonrpc.Frame{T: l.cfg.Now().UnixMilli(), Dir: trafficlog.Exit, Data: []byte(`{"code":null,"sig":null}`), JSON: true})
		}
		if l.cfg.OnGone != nil {
			l.cfg.OnGone()
		}
		l.publishHeld()
		l.q.Close()
		close(l.gone)
	})
}
