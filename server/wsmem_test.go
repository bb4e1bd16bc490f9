package server

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/waitfor"
)

// The relay keeps the Engine.IO v4 heartbeat itself (package wstransport, heartbeat.go): the
// open packet announces the configured interval and timeout, a ping ("2")
// comes PingInterval after the open and after each pong, and a socket
// that stops answering is closed no sooner than PingTimeout after the
// unanswered ping.
func TestHeartbeatPingsAndTimesOut(t *testing.T) {
	const interval, timeout = 150 * time.Millisecond, 300 * time.Millisecond
	_, base := benchRelay(t, Config{Logger: zerolog.Nop(), PingInterval: interval, PingTimeout: timeout}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "heartbeat")
	// The relay arms its first ping when it sends the open packet, so the
	// first interval is measured from before the dial (from the read of the
	// open packet it may be shorter by the packet's trip).
	since := time.Now()
	c, _, err := ws.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/updates/?EIO=4&transport=websocket", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	read := func() (string, error) {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		mt, b, err := c.ReadMessage()
		if err == nil && mt != ws.TextMessage {
			t.Fatalf("frame type %d", mt)
		}
		return string(b), err
	}
	open, err := read()
	if err != nil || !strings.HasPrefix(open, "0{") || !strings.Contains(open, `"pingInterval":150,"pingTimeout":300`) {
		t.Fatalf("open packet %q, %v", open, err)
	}
	if err := c.WriteMessage(ws.TextMessage, []byte(`40{"token":"`+token+`","clientType":"session-scoped","sessionId":"`+sid+`"}`)); err != nil {
		t.Fatal(err)
	}
	if ok, err := read(); err != nil || !strings.HasPrefix(ok, "40{") {
		t.Fatalf("connect answer %q, %v", ok, err)
	}
	for i := range 3 {
		p, err := read()
		if err != nil || p != "2" {
			t.Fatalf("ping %d: %q, %v", i, p, err)
		}
		if d := time.Since(since); d < interval {
			t.Fatalf("ping %d came %v after the open or the last pong, before the interval", i, d)
		}
		since = time.Now()
		if err := c.WriteMessage(ws.TextMessage, []byte("3")); err != nil {
			t.Fatal(err)
		}
	}
	// No pong for the next ping: the relay closes the connection.
	if p, err := read(); err != nil || p != "2" {
		t.Fatalf("last ping: %q, %v", p, err)
	}
	p, err := read()
	if err == nil {
		t.Fatalf("the socket stayed open without pongs and got %q", p)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the relay did not close a socket that sent no pong: %v", err)
	}
	// The relay sent the unanswered ping at least an interval after the
	// last pong (sent after since) and may close only a timeout after that
	// ping; the client sees the ping later than the relay sent it, so the
	// bound is measured from since.
	if d := time.Since(since); d < interval+timeout {
		t.Fatalf("closed %v after the last pong, before the interval and the timeout (%v)", d, interval+timeout)
	}
}

// Events are routed by one middleware (events.go, bindEvents): an event
// whose name is not a string or that no handler knows is ignored, acked or
// not, and the socket goes on answering the ones it knows. (An event with
// no name at all is a parse error of the library's decoder, which closes
// the connection before any middleware runs.)
func TestOddEventsAreIgnored(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "odd-events")
	for _, p := range []string{`42[7]`, `4211[7,{}]`, `42["no-such-event",{}]`, `4210["no-such-event"]`} {
		r := dialRaw(t, base, token, sid, 0)
		if err := r.c.WriteMessage(ws.TextMessage, []byte(p)); err != nil {
			t.Fatal(err)
		}
		if err := r.c.WriteMessage(ws.TextMessage, []byte(`421["ping"]`)); err != nil {
			t.Fatal(err)
		}
		if got, err := r.read(); got != `431[{}]` {
			t.Errorf("after %s: answer to the ping event: %q, %v", p, got, err)
		}
	}
}

// timerGoroutines counts the goroutines waiting in the Socket.IO library's
// timers.
func timerGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "socket.io/v3/pkg/utils.SetTimeout") {
			n++
		}
	}
	return n
}

// An idle socket waits for its next ping on a runtime timer, not on a
// goroutine of the library's (package wstransport, heartbeat.go).
func TestIdleSocketsHaveNoTimerGoroutines(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "idle")
	before := timerGoroutines()
	const sockets = 20
	for range sockets {
		dialRaw(t, base, token, sid, 0)
	}
	// Timers the library clears (the connect timeout) end on their own
	// goroutines, a moment later.
	var n int
	if !(waitfor.Poll{Within: 5 * time.Second}).True(func() bool {
		n = timerGoroutines() - before
		return n <= 0
	}) {
		t.Fatalf("%d timer goroutines for %d idle sockets", n, sockets)
	}
}
