package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/sio"
)

type event struct {
	name string
	args []any
	ack  func(...any)
}

// inbox collects the server events a test client listens to.
type inbox struct {
	t  testing.TB
	c  *sio.Client
	ch chan event
}

func dial(t testing.TB, url string, auth map[string]any) *sio.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sio.Dial(ctx, url, sio.Options{Auth: auth, ConnectTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("dial %v: %v", auth["clientType"], err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func userSocket(t testing.TB, url, token string) *sio.Client {
	return dial(t, url, map[string]any{"token": token, "clientType": "user-scoped"})
}

func sessionSocket(t testing.TB, url, token, sid string) *sio.Client {
	return dial(t, url, map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid})
}

func machineSocket(t testing.TB, url, token, mid string) *sio.Client {
	return dial(t, url, map[string]any{"token": token, "clientType": "machine-scoped", "machineId": mid})
}

func listen(t testing.TB, c *sio.Client, names ...string) *inbox {
	in := &inbox{t: t, c: c, ch: make(chan event, 1024)}
	for _, n := range names {
		n := n
		c.On(n, func(args []any, ack func(...any)) { in.ch <- event{name: n, args: args, ack: ack} })
	}
	return in
}

// next returns the next event, failing after 5 s.
func (in *inbox) next() event {
	in.t.Helper()
	select {
	case e := <-in.ch:
		return e
	case <-time.After(5 * time.Second):
		in.t.Fatal("no event within 5s")
		return event{}
	}
}

// nextObj returns the next event's first argument, checking its name.
func (in *inbox) nextObj(name string) map[string]any {
	in.t.Helper()
	e := in.next()
	if e.name != name {
		in.t.Fatalf("event %q %v, want %q", e.name, e.args, name)
	}
	if len(e.args) == 0 {
		in.t.Fatalf("event %q without arguments", name)
	}
	return obj(in.t, e.args[0])
}

// holds waits until the socket holds the method it registered: every event
// sent before now has arrived (a ping), and the last registration event is
// a grant; a refusal (a grant stepped down) waits for the grant again.
func (in *inbox) holds() {
	in.t.Helper()
	for {
		call(in.t, in.c, "ping", nil)
		var last *event
	drain:
		for {
			select {
			case e := <-in.ch:
				last = &e
			default:
				break drain
			}
		}
		if last == nil || last.name == "rpc-registered" {
			return
		}
		if last.name != "rpc-error" {
			in.t.Fatalf("unexpected event %q %v", last.name, last.args)
		}
		if e := in.next(); e.name != "rpc-registered" {
			in.t.Fatalf("after a step-down: event %q %v, want rpc-registered", e.name, e.args)
		}
	}
}

// none asserts that no event is waiting for the client: every event the
// server sent it before now has arrived. It proves that point was reached
// with a ping: the server answers it after everything it sent the socket
// earlier, and the client runs its event handlers in order, before it
// hands over the answer.
func (in *inbox) none() {
	in.t.Helper()
	call(in.t, in.c, "ping", nil)
	select {
	case e := <-in.ch:
		in.t.Fatalf("unexpected event %q %v", e.name, e.args)
	default:
	}
}

// call emits with ack and returns the first reply value as an object.
func call(t testing.TB, c *sio.Client, ev string, arg any) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Call(ctx, ev, arg)
	if err != nil {
		t.Fatalf("%s: %v", ev, err)
	}
	if len(res) == 0 {
		t.Fatalf("%s: empty ack", ev)
	}
	return obj(t, res[0])
}
