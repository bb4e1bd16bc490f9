package wstransport

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"
	"github.com/zishang520/socket.io/parsers/engine/v3/packet"
	"github.com/zishang520/socket.io/servers/engine/v3/transports"
	"github.com/zishang520/socket.io/v3/pkg/types"
	"golang.org/x/sys/unix"
)

// CloseWait bounds how long closing a transport waits for queued frames
// (a server disconnect packet, say) to be written.
const CloseWait = 250 * time.Millisecond

// errBacklog closes a socket whose unwritten frames exceed the backlog.
// itemOverhead is what each queued item counts against the backlog on
// top of its bytes (its memory), so that a flood of tiny items (pongs for
// empty pings) is bounded too.
const itemOverhead = 64

var errBacklog = errors.New("too many bytes waiting to be written to a slow socket")

// Ctor builds the relay's Engine.IO websocket transport
// (transports.TransportCtor, registered through the server options'
// transport set, the library's extension point for transports).
//
// It is the library's websocket transport with a different write side.
// The library starts a new goroutine for every batch it sends (whose stack
// then grows on each send) and copies every packet through an intermediate
// buffer. This transport
//   - writes each packet straight into its websocket frame from a writer
//     goroutine that runs only while something is queued (an idle socket
//     has none: its stack was a sixth of an idle socket's memory);
//   - takes broadcast frames (built once for all recipients by the
//     relay's room adapter with TextFrame, handed over with SendFrames)
//     without the per-socket Engine.IO bookkeeping, and when nothing
//     else is queued writes them at once from the broadcasting
//     goroutine with one non-blocking write: a fan-out to 100 sockets is
//     100 write system calls, no goroutine wake-ups. What the kernel does
//     not take at once is queued for the writer, so a slow socket never
//     holds the broadcast up.
//
// The read side is the relay's too (read.go, docs/ARCHITECTURE.md "Idle
// sockets"): the library's reader goroutine parked deep inside gorilla's
// reader with an 8 KiB stack and gorilla's read buffer; this transport's
// reader waits for the connection to be readable with a shallow stack
// and takes a read buffer from a pool only while a frame arrives. The
// packets it reads reach the library as its own transport hands them on
// (OnData). Closing stays the library's (heartbeats: heartbeat.go, KeepHeartbeats). All
// writes to the connection go through this type (pongs and close replies
// included), so the direct writes never interleave with a frame written
// elsewhere.
type Ctor struct {
	// backlog is how many bytes of frames may wait for one slow socket
	// before the relay closes it (Config.MaxSocketBacklog).
	backlog int
	// readLimit is the longest message a client may send, in bytes
	// (Config.SocketHardLimit; 0: no limit); a longer one closes the
	// connection with 1009.
	readLimit int64
	log       zerolog.Logger
	// afterWrite, when set, runs after each frame is handed to the kernel
	// (the fan-out benchmark's clock).
	afterWrite func()

	// live holds the transports whose writer runs (for drain).
	live sync.Map // *Transport -> struct{}
	// pending holds the connections the relay upgraded until the library
	// builds their transport (New): *types.HttpContext -> net.Conn.
	pending sync.Map

	// Counters over all connections: broadcast frames written whole by
	// the broadcasting goroutine, broadcast frames (or their tails) left
	// to a connection's writer, sockets closed for their backlog.
	Direct, Queued, SlowClosed atomic.Int64
}

// Options configure a Ctor.
type Options struct {
	// Backlog is how many bytes of frames may wait for one slow socket
	// before the relay closes it.
	Backlog int
	// ReadLimit is the longest message a client may send, in bytes (0: no
	// limit); a longer one closes the connection with 1009.
	ReadLimit int64
	// Log gets the refused upgrades (debug) and the write errors.
	Log zerolog.Logger
	// AfterWrite, when set, runs after each frame is handed to the kernel.
	AfterWrite func()
}

// NewCtor returns the transport constructor to register in the Socket.IO
// server's options (SetTransports) and to serve its upgrades (Upgrades).
func NewCtor(o Options) *Ctor {
	return &Ctor{backlog: o.Backlog, readLimit: o.ReadLimit, log: o.Log, afterWrite: o.AfterWrite}
}

// Backlog is the sum of the bytes queued on every live transport.
func (c *Ctor) Backlog() int64 {
	var n int64
	c.live.Range(func(k, _ any) bool {
		t := k.(*Transport)
		t.mu.Lock()
		n += int64(t.pending)
		t.mu.Unlock()
		return true
	})
	return n
}

// New implements transports.TransportCtor. The connection is the one
// the relay upgraded for ctx (upgrade.go); the transport reads once
// the Engine.IO handshake is done (startReading).
func (c *Ctor) New(ctx *types.HttpContext) transports.Transport {
	nc, ok := c.pending.Load(ctx)
	conn, _ := nc.(net.Conn)
	if !ok || conn == nil {
		// Not a connection the relay upgraded (never so: every upgrade
		// is the relay's): a transport on a closed pipe, which closes on
		// its first write or read.
		a, b := net.Pipe()
		_ = a.Close()
		_ = b.Close()
		conn = a
	}
	t := &Transport{Transport: transports.MakeTransport(), conn: conn, ctor: c, idle: ctx.IdleTimeout}
	t.done = make(chan struct{})
	t.src.conn = conn
	if sc, ok := conn.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			t.raw = raw
		}
	}
	t.src.raw = t.raw
	t.fr = wsFrameReader{src: &t.src, limit: c.readLimit}
	// Calls the library makes through the transport's prototype (DoClose,
	// OnClose) must reach this type.
	t.Prototype(t)
	// What the library's websocket transport sets up (its Construct),
	// with this type's reader.
	t.Transport.Construct(ctx)
	t.SetWritable(true)
	t.SetPerMessageDeflate(nil)
	c.live.Store(t, struct{}{})
	return t
}

// startReading starts the reader, unless the transport is closing or
// closed (then it closes the connection).
func (t *Transport) startReading() {
	if st := t.ReadyState(); st == "closing" || st == "closed" {
		_ = t.closeNet()
		return
	}
	go t.readLoop()
}

// Drain waits, at most d, until no live transport has anything queued or
// being written.
func (c *Ctor) Drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		idle := true
		c.live.Range(func(k, _ any) bool {
			t := k.(*Transport)
			t.mu.Lock()
			idle = len(t.queue) == 0 && !t.busy
			t.mu.Unlock()
			return idle
		})
		if idle || time.Now().After(deadline) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Name implements transports.TransportCtor.
func (*Ctor) Name() string { return transports.WEBSOCKET }

// HandlesUpgrades implements transports.TransportCtor.
func (*Ctor) HandlesUpgrades() bool { return true }

// UpgradesTo implements transports.TransportCtor.
func (*Ctor) UpgradesTo() []string { return nil }

// wsItem is one queued write, exactly one of: the Engine.IO packets of
// one Send (answered with a "drain" event once written); a complete
// websocket frame, or the unwritten tail of one (data).
type wsItem struct {
	packets []*packet.Packet
	data    []byte
	// size is what the item counts against the backlog (bytes).
	size int
	// written, when set, is closed once the item is written.
	written chan struct{}
	// pong says data is a pong (queuePong).
	pong bool
}

// Transport is the websocket transport of one socket, built by Ctor (the
// library's Conn().Transport() of a socket is one). The relay uses
// SendFrames, OpenGate and SetReads; the rest is the library's interface.
type Transport struct {
	transports.Transport

	conn net.Conn
	raw  syscall.RawConn // nil when the connection has no file descriptor
	ctor *Ctor
	// closed says the connection's end was handled (connClosed).
	closed atomic.Bool
	// hb is the relay's heartbeat of the socket (KeepHeartbeats), told of
	// each pong the reader hands on and stopped when the connection ends;
	// reads (a Reads, SetReads) is told of each message the reader hands
	// on. Each is one word or two where a listener on the engine socket
	// cost every socket a map entry, a slice and a closure in the
	// library's emitter.
	hb    atomic.Pointer[heartbeat]
	reads atomic.Value

	// The read side, used by the reader goroutine only (readLoop). idle
	// is the library's idle timeout: a connection that sends nothing for
	// that long is closed (0: never).
	idle time.Duration
	src  connSource
	fr   wsFrameReader

	mu      sync.Mutex
	queue   []wsItem
	pending int // bytes of queued items (wsItem.size)
	// pongAt is 1 + the index in queue of a pong the writer has not taken
	// yet (0: none); the next ping's pong replaces it (queuePong).
	pongAt  int
	busy    bool // a goroutine is writing to the connection
	running bool // a writer goroutine (writeLoop) exists
	stopped bool
	// gated holds every write from the Socket.IO CONNECT answer on until
	// OpenGate: the library sends that answer before it registers the
	// socket with its client, so a client that emits at once (as every
	// Socket.IO client does with what it buffered) could otherwise have its
	// first events dropped as meant for an unknown namespace. gateUsed says
	// the answer was seen (only the first one is held).
	gated, gateUsed bool

	done     chan struct{} // closed once stopped with nothing left to write
	doneOnce sync.Once
}

// controlFrame returns an unmasked control frame (RFC 6455 §5.5) with
// payload cut to the 125 bytes a control frame may carry.
func controlFrame(op int, payload []byte) []byte {
	if len(payload) > 125 {
		payload = payload[:125]
	}
	return append([]byte{0x80 | byte(op), byte(len(payload))}, payload...)
}

// TextFrame returns the websocket frame of one Engine.IO message holding
// the Socket.IO packet text: an unmasked, final text frame (RFC 6455
// §5.2), the same bytes for every server-to-client connection.
func TextFrame(text []byte) []byte {
	f := appendFrameHeader(make([]byte, 0, 10+1+len(text)), opText, 1+len(text))
	f = append(f, '4')
	return append(f, text...)
}

// dataFrame returns an unmasked, final frame of opcode op (opText or
// opBinary) carrying payload: a whole message in one frame.
func dataFrame(op byte, payload []byte) []byte {
	f := appendFrameHeader(make([]byte, 0, 10+len(payload)), op, len(payload))
	return append(f, payload...)
}

// appendFrameHeader appends the header of an unmasked, final frame of
// opcode op with an n-byte payload (RFC 6455 §5.2: the length in 7 bits,
// or 126 and 16 bits, or 127 and 64 bits).
func appendFrameHeader(b []byte, op byte, n int) []byte {
	switch {
	case n < 126:
		return append(b, 0x80|op, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, 0x80|op, 126), uint16(n))
	default:
		return binary.BigEndian.AppendUint64(append(b, 0x80|op, 127), uint64(n))
	}
}

// Send queues packets for the writer (transports.Transport). The transport
// stays writable, so the Engine.IO socket never holds packets back and
// broadcast frames keep their order with everything else.
func (t *Transport) Send(packets []*packet.Packet) {
	size := 0
	connect := false
	for _, p := range packets {
		size += packetSize(p)
		connect = connect || isConnectAnswer(p)
	}
	if connect {
		t.mu.Lock()
		if !t.gateUsed && !t.stopped {
			t.gated, t.gateUsed = true, true
			// The relay opens the gate on "connection"; should that never
			// come, the answer still goes out.
			time.AfterFunc(gateMax, t.OpenGate)
		}
		t.mu.Unlock()
	}
	t.push(wsItem{packets: packets, size: size})
}

// gateMax bounds how long the CONNECT answer waits for OpenGate.
const gateMax = 2 * time.Second

// isConnectAnswer reports whether p is the Socket.IO CONNECT packet of the
// main namespace (an Engine.IO message whose Socket.IO text starts "0").
func isConnectAnswer(p *packet.Packet) bool {
	if p == nil || p.Type != packet.MESSAGE || p.Data == nil {
		return false
	}
	d, ok := p.Data.(interface{ Bytes() []byte })
	if !ok {
		return false
	}
	b := d.Bytes()
	return len(b) > 0 && b[0] == '0'
}

// OpenGate lets the held CONNECT answer and what followed it be written:
// the relay calls it once the library has registered the socket (its
// "connection" event).
func (t *Transport) OpenGate() {
	t.mu.Lock()
	if !t.gated {
		t.mu.Unlock()
		return
	}
	t.gated = false
	end := t.settleLocked()
	t.mu.Unlock()
	if end {
		t.ended()
	}
}

// packetSize is the number of bytes p will take on the wire, as far as
// its data tells (Engine.IO packet data are the library's buffers).
func packetSize(p *packet.Packet) int {
	if p.Options != nil && p.Options.WsPreEncodedFrame != nil {
		return p.Options.WsPreEncodedFrame.Len()
	}
	if l, ok := p.Data.(interface{ Len() int }); ok {
		return 1 + l.Len()
	}
	return 1
}

// SendFrames writes frames (from TextFrame; shared, never modified) to
// this socket, in order: at once with one non-blocking writev when nothing
// else is queued or being written, otherwise, or for what the kernel did
// not take, through the writer. It reports false when the transport is
// closed or its queue is over the backlog (then the connection is closed).
func (t *Transport) SendFrames(frames [][]byte) bool {
	if len(frames) == 0 {
		return true
	}
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	if t.raw == nil || t.busy || len(t.queue) > 0 {
		t.mu.Unlock()
		t.ctor.Queued.Add(int64(len(frames)))
		for _, f := range frames {
			if !t.push(wsItem{data: f, size: len(f)}) {
				return false
			}
		}
		return true
	}
	t.busy = true
	t.mu.Unlock()

	n, err := t.tryWritev(frames)

	// Frames written whole, then what is left: the tail of a frame the
	// kernel took in part, and the frames after it.
	whole, left := 0, frames
	for len(left) > 0 && n >= len(left[0]) {
		n -= len(left[0])
		left = left[1:]
		whole++
	}
	t.mu.Lock()
	t.busy = false
	if err != nil {
		t.mu.Unlock()
		t.fail(err)
		return false
	}
	if len(left) > 0 {
		// What is left goes first: nothing else can have been written
		// since.
		t.ctor.Queued.Add(int64(len(left)))
		rest := make([]wsItem, 0, len(left)+len(t.queue))
		for i, f := range left {
			if i == 0 {
				f = f[n:]
			}
			rest = append(rest, wsItem{data: f, size: len(f)})
			t.pending += len(f) + itemOverhead
		}
		t.queue = append(rest, t.queue...)
		if t.pongAt > 0 {
			t.pongAt += len(rest)
		}
	}
	ok := true
	if t.pending > t.ctor.backlog {
		t.overBacklogLocked()
		ok = false
	} else {
		end := t.settleLocked()
		t.mu.Unlock()
		if end {
			t.ended()
		}
	}
	t.ctor.Direct.Add(int64(whole))
	for range whole {
		t.wrote()
	}
	return ok
}

// tryWritev writes as much of frames as the socket takes without
// blocking, in one writev when it takes them all, and returns how many
// bytes that was; a full socket buffer is not an error.
func (t *Transport) tryWritev(frames [][]byte) (int, error) {
	w := rawWriters.Get().(*rawWriter)
	w.frames = frames
	err := t.raw.Write(w.fn)
	n, werr := w.n, w.err
	clear(w.iov)
	*w = rawWriter{fn: w.fn, iov: w.iov[:0]}
	rawWriters.Put(w)
	if werr == nil {
		werr = err
	}
	return n, werr
}

// rawWriter is one non-blocking write of frames to a file descriptor
// (syscall.RawConn.Write's callback, fn, bound once): pooled, so that a
// write allocates no closure (one per socket and round, the fan-out's
// commonest garbage before).
type rawWriter struct {
	frames [][]byte
	n      int   // bytes written
	err    error // the write's error (a full buffer is none)
	fn     func(fd uintptr) bool
	iov    [][]byte // scratch for a frame written in part
}

var rawWriters = sync.Pool{New: func() any {
	w := &rawWriter{}
	w.fn = w.write
	return w
}}

// write writes w.frames to fd until done or the kernel takes no more.
func (w *rawWriter) write(fd uintptr) bool {
	if len(w.frames) == 1 {
		b := w.frames[0]
		for w.n < len(b) {
			m, e := syscall.Write(int(fd), b[w.n:])
			if e == syscall.EINTR {
				continue
			}
			if e == syscall.EAGAIN {
				return true
			}
			if e != nil {
				w.err = e
				return true
			}
			w.n += m
		}
		return true
	}
	total := 0
	for _, f := range w.frames {
		total += len(f)
	}
	iov := w.frames
	skip := 0 // bytes of iov[0] already written
	for w.n < total {
		bufs := iov
		if skip > 0 {
			w.iov = append(append(w.iov[:0], iov[0][skip:]), iov[1:]...)
			bufs = w.iov
		}
		m, e := unix.Writev(int(fd), bufs)
		if e == unix.EINTR {
			continue
		}
		if e == unix.EAGAIN {
			return true
		}
		if e != nil {
			w.err = e
			return true
		}
		w.n += m
		m += skip
		for len(iov) > 0 && m >= len(iov[0]) {
			m -= len(iov[0])
			iov = iov[1:]
		}
		skip = m
	}
	return true
}

func (t *Transport) push(it wsItem) bool {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	t.pending += it.size + itemOverhead
	if t.pending > t.ctor.backlog {
		t.overBacklogLocked()
		return false
	}
	t.queue = append(t.queue, it)
	if it.pong {
		t.pongAt = len(t.queue)
	}
	t.settleLocked()
	t.mu.Unlock()
	return true
}

// queuePong queues the pong answering a ping with payload p. A pong
// still waiting in the queue is replaced instead (RFC 6455 §5.5.3: an
// endpoint may answer only the most recent of the pings it has not yet
// answered), so a client that floods pings without reading holds one
// pong in the relay, not one per ping (docs/ARCHITECTURE.md "Idle
// sockets").
func (t *Transport) queuePong(p []byte) {
	f := controlFrame(ws.PongMessage, p)
	t.mu.Lock()
	if i := t.pongAt - 1; i >= 0 && !t.stopped {
		t.pending += len(f) - t.queue[i].size
		t.queue[i].data, t.queue[i].size = f, len(f)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.push(wsItem{data: f, size: len(f), pong: true})
}

// overBacklogLocked (t.mu held, released on return) closes a socket
// whose queue went over the backlog.
func (t *Transport) overBacklogLocked() {
	pending := t.pending
	t.stopped = true
	end := t.settleLocked()
	t.mu.Unlock()
	if end {
		t.ended()
	}
	t.ctor.SlowClosed.Add(1)
	t.ctor.log.Warn().Err(errBacklog).Int("pending", pending).Int("limit", t.ctor.backlog).Str("transport", t.Sid()).Msg("closing a socket that does not read its updates")
	// Closing the connection first ends a write stuck on it, so the
	// transport's close (which waits for the writer) does not wait.
	_ = t.closeNet()
}

// settleLocked (t.mu held) starts a writer when something is queued and
// nobody is writing, and reports whether the transport is finished:
// stopped, nothing queued, nobody writing (the caller then calls ended).
func (t *Transport) settleLocked() bool {
	if t.running || t.busy || t.gated {
		return false
	}
	if len(t.queue) > 0 {
		t.running = true
		go t.writeLoop()
		return false
	}
	return t.stopped
}

// stop refuses further writes; the transport ends once what is queued
// has been written.
func (t *Transport) stop() {
	t.mu.Lock()
	t.stopped = true
	t.gated = false
	end := t.settleLocked()
	t.mu.Unlock()
	if end {
		t.ended()
	}
}

// DoClose lets the writer finish what is queued, for at most CloseWait,
// then closes the connection and calls fn (transports.Transport). When
// the writer has more to do, the wait happens on its own goroutine, so
// closing many sockets (at shutdown) never adds up their waits.
func (t *Transport) DoClose(fn types.Callable) {
	t.stop()
	select {
	case <-t.done:
		t.closeConn(fn)
	default:
		go func() {
			select {
			case <-t.done:
			case <-time.After(CloseWait):
			}
			t.closeConn(fn)
		}()
	}
}

// closeConn calls fn, then closes the connection (as the library's
// websocket transport closes).
func (t *Transport) closeConn(fn types.Callable) {
	defer func() { _ = t.closeNet() }()
	if fn != nil {
		fn()
	}
}

// OnClose marks the transport closed and closes the connection, on every
// path that closes it (transports.Transport).
func (t *Transport) OnClose() {
	t.Transport.OnClose()
	_ = t.closeNet()
}

// On implements types.EventEmitter. The library listens on every new
// transport for two events this one never emits, so those listeners are
// not kept (each cost every socket a map entry and a slice in the
// library's emitter): "headers", which only its polling transport emits
// (with the headers of each polling answer), and "ready", which its own
// transports emit when they are writable again after a send (this one
// stays writable: Send only queues). Any other listener is the library's
// transport's.
func (t *Transport) On(ev types.EventName, listeners ...types.EventListener) error {
	if ev == "headers" || ev == "ready" {
		return nil
	}
	return t.Transport.On(ev, listeners...)
}

// Reads is told of each message the transport's reader hands to the
// library: the relay bounds the events in flight per socket with it.
// MessageIn runs on the reader goroutine and may block it (the reader
// then reads nothing more until it returns).
type Reads interface{ MessageIn() }

// SetReads makes the reader tell r of each message it hands on from now
// (one r per transport: later calls must pass the same dynamic type).
func (t *Transport) SetReads(r Reads) { t.reads.Store(r) }

// messageIn tells the transport's Reads, if any, of a message handed to
// the library.
func (t *Transport) messageIn() {
	if r, _ := t.reads.Load().(Reads); r != nil {
		r.MessageIn()
	}
}

// closeNet closes the connection and handles its end (connClosed).
func (t *Transport) closeNet() error {
	err := t.conn.Close()
	t.connClosed()
	return err
}

// connClosed handles the end of the connection, once: the transport
// closes (OnClose) and takes no more writes (stop).
func (t *Transport) connClosed() {
	if t.closed.CompareAndSwap(false, true) {
		t.OnClose()
		t.stop()
		if h := t.hb.Load(); h != nil {
			h.stop()
		}
	}
}

// connError reports an error of the connection to the library, which
// closes the socket.
func (t *Transport) connError(err error) {
	t.OnError("websocket error", err)
}

// Name implements transports.Transport.
func (*Transport) Name() string { return transports.WEBSOCKET }

// HandlesUpgrades implements transports.Transport.
func (*Transport) HandlesUpgrades() bool { return true }

func (t *Transport) ended() {
	t.doneOnce.Do(func() {
		t.ctor.live.Delete(t)
		close(t.done)
	})
}

// writeLoop writes what is queued until the queue is empty (or a direct
// sender holds the connection), then ends; the next queued item starts
// another (settleLocked).
func (t *Transport) writeLoop() {
	var batch []wsItem
	for {
		t.mu.Lock()
		if len(t.queue) == 0 || t.busy {
			t.running = false
			end := t.settleLocked()
			t.mu.Unlock()
			if end {
				t.ended()
			}
			return
		}
		t.busy = true
		batch, t.queue = t.queue, batch[:0]
		t.pongAt = 0
		t.mu.Unlock()

		var err error
		written := 0
		for i, it := range batch {
			if err == nil {
				err = t.write(it)
			}
			written += it.size + itemOverhead
			if it.written != nil && err == nil {
				close(it.written)
			}
			batch[i] = wsItem{}
		}

		t.mu.Lock()
		t.pending -= written
		t.busy = false
		if err != nil {
			t.running = false
		}
		t.mu.Unlock()
		if err != nil {
			t.fail(err)
			return
		}
	}
}

// write writes one queued item.
func (t *Transport) write(it wsItem) error {
	switch {
	case it.packets != nil:
		if err := t.writePackets(it.packets); err != nil {
			return err
		}
		t.Emit("drain")
		return nil
	default:
		_, err := t.conn.Write(it.data)
		if err == nil {
			t.wrote()
		}
		return err
	}
}

// fail reports a write error the way the library's transport does and
// stops writing.
func (t *Transport) fail(err error) {
	t.ctor.log.Debug().Err(err).Str("transport", t.Sid()).Msg("websocket write failed")
	// What is still queued can no longer be written.
	t.mu.Lock()
	t.stopped = true
	clear(t.queue)
	t.queue = t.queue[:0]
	t.pongAt = 0
	t.pending = 0
	t.mu.Unlock()
	// Closing the transport from the listeners below must not wait for
	// the writer.
	t.ended()
	if errors.Is(err, net.ErrClosed) {
		t.connClosed()
	} else {
		t.connError(err)
	}
}

// writePackets writes each Engine.IO packet as one frame, text or binary
// as the library's encoder makes it. (gorilla's writer, which the library
// used, cut a message longer than its 1 KiB buffer into continuation
// frames; one frame carries the same message.)
func (t *Transport) writePackets(packets []*packet.Packet) error {
	for _, p := range packets {
		data := types.BufferInterface(nil)
		if p.Options != nil && p.Options.WsPreEncodedFrame != nil {
			data = p.Options.WsPreEncodedFrame
		} else {
			var err error
			if data, err = t.Parser().EncodePacket(p, t.SupportsBinary()); err != nil {
				return err
			}
		}
		op := byte(opBinary)
		if _, ok := data.(*types.StringBuffer); ok {
			op = opText
		}
		if _, err := t.conn.Write(dataFrame(op, data.Bytes())); err != nil {
			return err
		}
		t.wrote()
	}
	return nil
}

// wrote runs the afterWrite hook, if any.
func (t *Transport) wrote() {
	if t.ctor.afterWrite != nil {
		t.ctor.afterWrite()
	}
}
