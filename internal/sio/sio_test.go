package sio

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/zishang520/socket.io/parsers/socket/v3/parser"
	"go.uber.org/goleak"

	"github.com/happy-dev/happy/server/servertest"
)

func TestFixConnectError(t *testing.T) {
	for _, c := range []struct {
		name string
		in   any
		want map[string]any
	}{
		{"node server, no data", map[string]any{"message": "Invalid authentication token"}, map[string]any{"message": "Invalid authentication token", "data": map[string]any{}}},
		{"null data", map[string]any{"message": "m", "data": nil}, map[string]any{"message": "m", "data": map[string]any{}}},
		{"data kept", map[string]any{"message": "m", "data": "d"}, map[string]any{"message": "m", "data": "d"}},
		{"no message", map[string]any{}, map[string]any{"message": "connection refused", "data": map[string]any{}}},
		{"string payload", "refused!", map[string]any{"message": "refused!", "data": map[string]any{}}},
		{"nil payload", nil, map[string]any{"message": "connection refused", "data": map[string]any{}}},
	} {
		p := &parser.Packet{Type: parser.CONNECT_ERROR, Data: c.in}
		FixConnectError(p)
		got, _ := p.Data.(map[string]any)
		if len(got) != len(c.want) || got["message"] != c.want["message"] {
			t.Fatalf("%s: %#v, want %#v", c.name, p.Data, c.want)
		}
		if _, isMap := c.want["data"].(map[string]any); isMap {
			if _, ok := got["data"].(map[string]any); !ok {
				t.Fatalf("%s: data = %#v", c.name, got["data"])
			}
		} else if got["data"] != c.want["data"] {
			t.Fatalf("%s: data = %#v", c.name, got["data"])
		}
	}
	ev := &parser.Packet{Type: parser.EVENT, Data: []any{"x"}}
	FixConnectError(ev)
	if d, _ := ev.Data.([]any); len(d) != 1 || d[0] != "x" {
		t.Fatalf("event packet changed: %#v", ev.Data)
	}
}

// TestDecoderRepairsNodeConnectError feeds the wire form a Node server sends
// ("4" + {"message":…}, no data) through the wrapped decoder.
func TestDecoderRepairsNodeConnectError(t *testing.T) {
	d := newFixDecoder()
	got := make(chan *parser.Packet, 1)
	_ = d.On("decoded", func(a ...any) { got <- a[0].(*parser.Packet) })
	if err := d.Add(`4{"message":"Invalid authentication token"}`); err != nil {
		t.Fatal(err)
	}
	p := <-got
	m, _ := p.Data.(map[string]any)
	if p.Type != parser.CONNECT_ERROR || m["message"] != "Invalid authentication token" || m["data"] == nil {
		t.Fatalf("decoded %#v", p)
	}
	d.Destroy()
}

func FuzzDecoder(f *testing.F) {
	for _, s := range []string{`4{"message":"x"}`, `4`, `2["update",{"a":1}]`, `0{"sid":"abc"}`, `3/x,1[]`, `51-["a",{"_placeholder":true,"num":0}]`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := newFixDecoder()
		defer d.Destroy()
		_ = d.On("decoded", func(a ...any) {
			for _, x := range a {
				if p, ok := x.(*parser.Packet); ok && p.Type == parser.CONNECT_ERROR {
					m, _ := p.Data.(map[string]any)
					if _, ok := m["message"].(string); !ok || m["data"] == nil {
						t.Fatalf("CONNECT_ERROR left unrepaired: %#v", p.Data)
					}
				}
			}
		})
		_ = d.Add(s)
	})
}

// A refused dial reports fast and leaves no goroutine behind (the
// library's connect timer of a failed attempt included).
func TestDialRefusedFast(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens there now
	start := time.Now()
	_, err = Dial(context.Background(), "http://"+addr, Options{ConnectTimeout: 500 * time.Millisecond})
	if err == nil {
		t.Fatal("dial succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("refused connection reported after %s", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Dial(ctx, "http://"+addr, Options{}); err == nil {
		t.Fatal("cancelled dial succeeded")
	}
}

func TestClientAgainstRelay(t *testing.T) {
	r := servertest.Start(t)
	acct := servertest.NewAccount(t, r.URL)
	c, err := Dial(context.Background(), r.URL, Options{Auth: map[string]any{"token": acct.Token}})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Connected() || c.ID() == "" {
		t.Fatalf("connected %v id %q", c.Connected(), c.ID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.Call(ctx, "ping")
	if err != nil || len(res) != 1 {
		t.Fatalf("ping: %v %v", res, err)
	}
	if m, ok := res[0].(map[string]any); !ok || len(m) != 0 {
		t.Fatalf("ping reply %#v", res[0])
	}
	_ = c.Close()
	_ = c.Close()
	if _, err := c.Call(ctx, "ping"); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
	if err := c.Emit("ping"); !errors.Is(err, ErrClosed) {
		t.Fatalf("emit after close: %v", err)
	}
	_, err = Dial(context.Background(), r.URL, Options{Auth: map[string]any{"token": "bad"}})
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Message != "Invalid authentication token" {
		t.Fatalf("bad token: %v", err)
	}
}

// TestDialRepeatedly guards the lost-handshake retry: every one of many
// sequential dials connects.
func TestDialRepeatedly(t *testing.T) {
	r := servertest.Start(t)
	acct := servertest.NewAccount(t, r.URL)
	for i := 0; i < 100; i++ {
		c, err := Dial(context.Background(), r.URL, Options{Auth: map[string]any{"token": acct.Token}, ConnectTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		_ = c.Close()
	}
}

// engineLost (the library closing the engine of a connected socket behind
// its back) disconnects the client, and its listeners hear
// "transport close" once.
func TestEngineLostReportsDisconnect(t *testing.T) {
	r := servertest.Start(t)
	acct := servertest.NewAccount(t, r.URL)
	c, err := Dial(context.Background(), r.URL, Options{Auth: map[string]any{"token": acct.Token}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reasons := make(chan string, 4)
	c.OnDisconnect(func(reason string) { reasons <- reason })
	c.engineLost(errors.New("timeout"))
	c.engineLost(errors.New("timeout"))
	select {
	case r := <-reasons:
		if r != "transport close" {
			t.Fatalf("reason %q", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no disconnect")
	}
	if c.Connected() {
		t.Fatal("still connected")
	}
	// Close disconnects synchronously: a listener it (or the second
	// engineLost) made hear anything has heard it by now.
	_ = c.Close()
	select {
	case r := <-reasons:
		t.Fatalf("second disconnect %q", r)
	default:
	}
}

// Connections outlive their connect timeout: the library's connect timer,
// when the open wins the race against its arming, is left running and
// closes the engine of a connected socket once it fires. Dial bounds each
// attempt itself and hands the library a timeout no connection reaches,
// whatever ConnectTimeout says; the attempt's own bound is ConnectTimeout.
// (The race needs a loaded machine, so it is checked on the options rather
// than by waiting for a timer.)
func TestLibraryConnectTimerOutOfReach(t *testing.T) {
	for _, c := range []struct {
		connect, attempt time.Duration
	}{
		{0, DefaultConnectTimeout},
		{time.Second, time.Second},
		{10 * time.Minute, 10 * time.Minute},
	} {
		o, attempt := managerOptions(Options{ConnectTimeout: c.connect, Auth: map[string]any{"token": "t"}})
		if got := o.ManagerOptions.Timeout(); got != libraryConnectTimeout {
			t.Errorf("ConnectTimeout %s: library timeout %s, want %s", c.connect, got, libraryConnectTimeout)
		}
		if attempt != c.attempt {
			t.Errorf("ConnectTimeout %s: attempt bound %s, want %s", c.connect, attempt, c.attempt)
		}
		if o.ManagerOptions.Reconnection() || o.ManagerOptions.AutoConnect() || !o.ManagerOptions.ForceNew() || o.ManagerOptions.Multiplex() {
			t.Errorf("ConnectTimeout %s: reconnection %v, autoConnect %v, forceNew %v, multiplex %v; want false, false, true, false",
				c.connect, o.ManagerOptions.Reconnection(), o.ManagerOptions.AutoConnect(), o.ManagerOptions.ForceNew(), o.ManagerOptions.Multiplex())
		}
		if p := o.ManagerOptions.Path(); p != DefaultPath {
			t.Errorf("path %q, want %q", p, DefaultPath)
		}
		if a := o.SocketOptions.Auth(); a["token"] != "t" {
			t.Errorf("auth %v", a)
		}
	}
	if libraryConnectTimeout < 24*time.Hour {
		t.Fatalf("library connect timeout %s: a connection can live that long", libraryConnectTimeout)
	}
}
