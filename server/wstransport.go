package server

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/zishang520/socket.io/parsers/engine/v3/packet"
	"github.com/zishang520/socket.io/servers/engine/v3/transports"
	"github.com/zishang520/socket.io/v3/pkg/types"
)

// maxPendingWrite is how many bytes of frames may wait for one slow
// socket before the relay closes it. The client reconnects and reads what
// it missed over HTTP (messages are stored), which is cheaper for everyone
// than buffering without bound.
const maxPendingWrite = 16 << 20

// wsTransportCtor builds the relay's Engine.IO websocket transport
// (transports.TransportCtor, registered through the server options'
// transport set, the library's extension point for transports).
//
// It is the library's websocket transport with a different write side:
// the library starts a new goroutine for every batch it sends (whose stack
// then grows on each send) and copies every packet through an intermediate
// buffer. This transport keeps one writer goroutine per connection for its
// whole life, writes each text packet straight into the websocket frame,
// and accepts pre-encoded broadcast frames from roomAdapter without the
// per-socket Engine.IO bookkeeping. Reading, heartbeats and closing stay
// the library's.
type wsTransportCtor struct {
	// afterWrite, when set, runs after each frame is handed to the kernel
	// (the fan-out benchmark's clock).
	afterWrite func()
}

// New implements transports.TransportCtor.
func (c *wsTransportCtor) New(ctx *types.HttpContext) transports.Transport {
	t := &wsTransport{Websocket: transports.MakeWebSocket(), conn: ctx.Websocket, afterWrite: c.afterWrite}
	t.wake = sync.NewCond(&t.mu)
	t.done = make(chan struct{})
	// Calls the library makes through the transport's prototype (DoClose)
	// must reach this type.
	t.Prototype(t)
	t.Construct(ctx)
	_ = t.conn.Once("close", func(...any) { t.stop() })
	go t.writeLoop()
	return t
}

// Name implements transports.TransportCtor.
func (*wsTransportCtor) Name() string { return transports.WEBSOCKET }

// HandlesUpgrades implements transports.TransportCtor.
func (*wsTransportCtor) HandlesUpgrades() bool { return true }

// UpgradesTo implements transports.TransportCtor.
func (*wsTransportCtor) UpgradesTo() []string { return nil }

// wsItem is one queued write: the Engine.IO packets of one Send (answered
// with a "drain" event once written), or one pre-encoded Socket.IO packet
// text from a broadcast (written as an Engine.IO message).
type wsItem struct {
	packets []*packet.Packet
	text    string
}

// wsTransport is the websocket transport built by wsTransportCtor.
type wsTransport struct {
	transports.Websocket

	conn       *types.WebSocketConn
	afterWrite func()

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []wsItem
	pending int // bytes of queued broadcast text
	stopped bool
	idle    bool // the writer waits for work (queue empty, nothing in flight)

	done     chan struct{} // closed when the writer has ended
	doneOnce sync.Once
}

// Send queues packets for the writer (transports.Transport). The transport
// stays writable, so the Engine.IO socket never holds packets back and
// broadcast frames queued directly keep their order with everything else.
func (t *wsTransport) Send(packets []*packet.Packet) {
	t.push(wsItem{packets: packets})
}

// sendText queues one Socket.IO packet text for this socket and reports
// false when the transport is closed or the socket's queue is over
// maxPendingWrite (then the connection is closed).
func (t *wsTransport) sendText(text string) bool {
	return t.push(wsItem{text: text})
}

func (t *wsTransport) push(it wsItem) bool {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return false
	}
	t.pending += len(it.text)
	if t.pending > maxPendingWrite {
		t.mu.Unlock()
		t.OnError("websocket write backlog", errBacklog)
		_ = t.conn.Close()
		return false
	}
	t.queue = append(t.queue, it)
	if t.idle {
		t.wake.Signal()
	}
	t.mu.Unlock()
	return true
}

var errBacklog = errors.New("more than 16 MiB waiting to be written to a slow socket")

// stop ends the writer once the queue is empty.
func (t *wsTransport) stop() {
	t.mu.Lock()
	t.stopped = true
	t.wake.Signal()
	t.mu.Unlock()
}

// closeWait bounds how long closing waits for queued frames (a server
// disconnect packet, say) to be written.
const closeWait = 250 * time.Millisecond

// DoClose lets the writer finish what is queued, for at most closeWait,
// then closes the connection (transports.Transport).
func (t *wsTransport) DoClose(fn types.Callable) {
	t.stop()
	select {
	case <-t.done:
	case <-time.After(closeWait):
	}
	t.Websocket.DoClose(fn)
}

func (t *wsTransport) ended() { t.doneOnce.Do(func() { close(t.done) }) }

func (t *wsTransport) writeLoop() {
	defer t.ended()
	var batch []wsItem
	for {
		t.mu.Lock()
		for len(t.queue) == 0 && !t.stopped {
			t.idle = true
			t.wake.Wait()
			t.idle = false
		}
		if len(t.queue) == 0 {
			t.mu.Unlock()
			return
		}
		batch, t.queue = t.queue, batch[:0]
		t.mu.Unlock()

		for i, it := range batch {
			var err error
			if it.packets != nil {
				err = t.writePackets(it.packets)
			} else {
				err = t.writeText(it.text)
				t.mu.Lock()
				t.pending -= len(it.text)
				t.mu.Unlock()
			}
			batch[i] = wsItem{}
			if err != nil {
				t.fail(err)
				return
			}
			if it.packets != nil {
				t.Emit("drain")
			}
		}
	}
}

// fail reports a write error the way the library's transport does and
// stops writing.
func (t *wsTransport) fail(err error) {
	t.stop()
	// Closing the transport from the listeners below must not wait for
	// this goroutine.
	t.ended()
	if ws.IsUnexpectedCloseError(err) || errors.Is(err, net.ErrClosed) {
		t.conn.Emit("close")
	} else {
		t.conn.Emit("error", err)
	}
}

// writeText writes "4" + text as one text frame (an Engine.IO message).
func (t *wsTransport) writeText(text string) error {
	w, err := t.conn.NextWriter(ws.TextMessage)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte{'4'}); err != nil {
		return err
	}
	if _, err := io.WriteString(w, text); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if t.afterWrite != nil {
		t.afterWrite()
	}
	return nil
}

// writePackets writes each Engine.IO packet as one frame, text or binary
// as the library's encoder makes it.
func (t *wsTransport) writePackets(packets []*packet.Packet) error {
	for _, p := range packets {
		if p.Options != nil && p.Options.WsPreEncodedFrame != nil {
			if err := t.writeFrame(p.Options.WsPreEncodedFrame); err != nil {
				return err
			}
			continue
		}
		data, err := t.Parser().EncodePacket(p, t.SupportsBinary())
		if err != nil {
			return err
		}
		if err := t.writeFrame(data); err != nil {
			return err
		}
	}
	return nil
}

func (t *wsTransport) writeFrame(data types.BufferInterface) error {
	mt := ws.BinaryMessage
	if _, ok := data.(*types.StringBuffer); ok {
		mt = ws.TextMessage
	}
	w, err := t.conn.NextWriter(mt)
	if err != nil {
		return err
	}
	if _, err := w.Write(data.Bytes()); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if t.afterWrite != nil {
		t.afterWrite()
	}
	return nil
}
