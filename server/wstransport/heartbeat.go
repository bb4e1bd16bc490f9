package wstransport

import (
	"sync"
	"time"

	engine "github.com/zishang520/socket.io/servers/engine/v3"
	"github.com/zishang520/socket.io/servers/socket/v3"
)

// pingFrame is the Engine.IO v4 ping packet ("2") as an unmasked, final
// websocket text frame, the bytes the library writes for it.
var pingFrame = []byte{0x81, 0x01, '2'}

// heartbeat keeps the Engine.IO v4 heartbeat of one websocket: PingInterval
// after the connection opens, and after each pong, the relay writes a ping;
// a socket that sends no pong within PingTimeout of a ping is closed with
// the reason "ping timeout". This is what the library does, on one runtime
// timer instead of a goroutine per armed timer (the library's timers each
// wait on their own goroutine: a sixth of an idle socket's memory).
type heartbeat struct {
	sock              engine.Socket
	tr                *Transport
	interval, timeout time.Duration

	mu      sync.Mutex
	timer   *time.Timer // nil until started
	waiting bool        // a ping is out, its pong not in
	done    bool
}

// KeepHeartbeats makes the relay keep the heartbeat of every Engine.IO v4
// websocket of io instead of the library: a ping interval after the
// connection opens and after each pong, a close ("ping timeout") timeout
// after an unanswered ping. The library registers its heartbeat
// as the callback it runs once the connection's setup succeeds; that
// callback is replaced here, at the engine's "connection" event, which
// the library emits during the setup.
func KeepHeartbeats(io *socket.Server, interval, timeout time.Duration) {
	_ = io.Engine().On("connection", func(a ...any) {
		if len(a) == 0 {
			return
		}
		es, ok := a[0].(engine.Socket)
		if !ok || es.Protocol() != 4 {
			return
		}
		tr, ok := es.Transport().(*Transport)
		if !ok {
			return
		}
		ctx := es.Request()
		if ctx.TakeTransportReady() == nil {
			// The library started its heartbeat already (a connection
			// without a setup step): leave it be.
			return
		}
		// The transport tells the heartbeat of each pong and of the end of
		// the connection (one pointer; listeners on the engine socket's
		// "heartbeat" and "close" cost every socket two map entries).
		h := &heartbeat{sock: es, tr: tr, interval: interval, timeout: timeout}
		tr.hb.Store(h)
		ctx.SetTransportReady(h.start)
	})
}

// start arms the first ping.
func (h *heartbeat) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || h.timer != nil || h.sock.ReadyState() == "closed" {
		return
	}
	h.timer = time.AfterFunc(h.interval, h.fire)
}

// fire writes a ping, or closes the socket when the last one got no pong.
func (h *heartbeat) fire() {
	h.mu.Lock()
	if h.done || h.sock.ReadyState() == "closed" {
		h.done = true
		h.mu.Unlock()
		return
	}
	if h.waiting {
		h.done = true
		h.mu.Unlock()
		if c, ok := h.sock.(interface{ OnClose(string, ...error) }); ok {
			c.OnClose("ping timeout")
		}
		return
	}
	h.waiting = true
	h.timer.Reset(h.timeout)
	h.mu.Unlock()
	h.tr.push(wsItem{data: pingFrame, size: len(pingFrame)})
}

// pong (a pong packet the transport handed to the library) arms the
// next ping PingInterval from now, as the library does for any pong an
// open socket receives.
func (h *heartbeat) pong() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || h.timer == nil || h.sock.ReadyState() != "open" {
		return
	}
	h.waiting = false
	h.timer.Reset(h.interval)
}

// stop (the end of the transport's connection, which the socket's close
// brings) ends the heartbeat.
func (h *heartbeat) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = true
	if h.timer != nil {
		h.timer.Stop()
	}
}
