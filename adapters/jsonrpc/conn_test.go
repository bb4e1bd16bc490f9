package jsonrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// peer is the far end of a connection: it reads what the client writes and
// writes raw lines back.
type peer struct {
	t     *testing.T
	w     io.WriteCloser
	lines chan string
}

// duplex is the client's side of two pipes.
type duplex struct {
	io.Reader
	io.Writer
	closers []io.Closer
}

func (d *duplex) Close() error {
	for _, c := range d.closers {
		_ = c.Close()
	}
	return nil
}

func newPipes(t *testing.T) (*duplex, *peer) {
	t.Helper()
	p2cR, p2cW := io.Pipe() // peer to client
	c2pR, c2pW := io.Pipe() // client to peer
	d := &duplex{Reader: p2cR, Writer: c2pW, closers: []io.Closer{p2cR, c2pW}}
	p := &peer{t: t, w: p2cW, lines: make(chan string, 100)}
	go func() {
		r := bufio.NewReader(c2pR)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(p.lines)
				return
			}
			p.lines <- line
		}
	}()
	t.Cleanup(func() { _ = p2cW.Close(); _ = c2pR.Close() })
	return d, p
}

func (p *peer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Errorf("peer send: %v", err)
	}
}

// recv reads one line the client wrote and decodes it as an object.
func (p *peer) recv() map[string]json.RawMessage {
	p.t.Helper()
	var line string
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("peer recv: client closed its end")
		}
		line = l
	case <-time.After(5 * time.Second):
		p.t.Fatal("peer recv: nothing within 5s")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		p.t.Fatalf("peer recv %q: %v", line, err)
	}
	return m
}

// recorder collects handled messages.
type recorder struct {
	mu   sync.Mutex
	ins  []*Incoming
	seen chan *Incoming
}

func newRecorder() *recorder { return &recorder{seen: make(chan *Incoming, 1000)} }

func (r *recorder) Handle(_ context.Context, in *Incoming) {
	r.mu.Lock()
	r.ins = append(r.ins, in)
	r.mu.Unlock()
	r.seen <- in
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.ins)
}

func (r *recorder) next(t *testing.T) *Incoming {
	t.Helper()
	select {
	case in := <-r.seen:
		return in
	case <-time.After(5 * time.Second):
		t.Fatal("no message handled within 5s")
		return nil
	}
}

func TestFramesWithAndWithoutVersion(t *testing.T) {
	for _, omit := range []bool{false, true} {
		t.Run(fmt.Sprintf("omit=%v", omit), func(t *testing.T) {
			d, p := newPipes(t)
			rec := newRecorder()
			c := New(context.Background(), d, rec, Options{OmitVersion: omit})
			defer c.Close()

			p.send(`{"method":"a/b","params":{"x":1}}`)
			p.send(`{"jsonrpc":"2.0","method":"c/d","params":{"y":2}}`)
			in := rec.next(t)
			if in.Method != "a/b" || !in.Notif || string(in.Params) != `{"x":1}` {
				t.Fatalf("first = %+v", in)
			}
			in = rec.next(t)
			if in.Method != "c/d" || string(in.Params) != `{"y":2}` {
				t.Fatalf("second = %+v", in)
			}

			done := make(chan error, 1)
			var got struct{ V string }
			go func() { done <- c.Call(context.Background(), "thread/start", map[string]int{"n": 1}, &got) }()
			m := p.recv()
			_, hasVersion := m["jsonrpc"]
			if hasVersion == omit {
				t.Fatalf("jsonrpc member present=%v with OmitVersion=%v: %v", hasVersion, omit, m)
			}
			if string(m["method"]) != `"thread/start"` || string(m["params"]) != `{"n":1}` || string(m["id"]) != "1" {
				t.Fatalf("request = %s", mustJSON(m))
			}
			p.send(`{"id":1,"result":{"V":"ok"}}`)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got.V != "ok" {
				t.Fatalf("result = %+v", got)
			}

			if err := c.Notify(context.Background(), "initialized", struct{}{}); err != nil {
				t.Fatal(err)
			}
			m = p.recv()
			if _, ok := m["id"]; ok || string(m["method"]) != `"initialized"` || string(m["params"]) != "{}" {
				t.Fatalf("notification = %s", mustJSON(m))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestResponseAfterNotifications: when a call returns, every notification
// the peer sent before the response has been handled. The first
// notification is held in the handler until the whole batch (40
// notifications, then the response) sits in the connection's buffer, so a
// connection that delivered responses ahead of the handler would return
// the call with notifications still unhandled.
func TestResponseAfterNotifications(t *testing.T) {
	d, p := newPipes(t)
	var mu sync.Mutex
	handled := 0
	written := make(chan struct{})
	h := HandlerFunc(func(_ context.Context, in *Incoming) {
		if in.Method == "n" && string(in.Params) == `{"i":0}` {
			<-written
		}
		mu.Lock()
		handled++
		mu.Unlock()
	})
	c := New(context.Background(), d, h, Options{})
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "m", nil, nil) }()
	_ = p.recv()
	const n = 40
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"method":"n","params":{"i":%d}}`+"\n", i)
	}
	b.WriteString(`{"id":1,"result":null}` + "\n")
	// One write: it returns once the connection has read all of it.
	if _, err := io.WriteString(p.w, b.String()); err != nil {
		t.Fatal(err)
	}
	close(written)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got := handled
	mu.Unlock()
	if got != n {
		t.Fatalf("call returned after %d of %d notifications were handled", got, n)
	}
}

// TestAsyncServerRequests: a request left unanswered does not stop reading;
// replies may go out in any order, each exactly once.
func TestAsyncServerRequests(t *testing.T) {
	d, p := newPipes(t)
	rec := newRecorder()
	c := New(context.Background(), d, rec, Options{OmitVersion: true})
	defer c.Close()

	p.send(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"itemId":"a"}}`)
	p.send(`{"method":"serverRequest/resolved","params":{}}`)
	p.send(`{"method":"item/fileChange/requestApproval","id":"s-1","params":{"itemId":"b"}}`)
	first := rec.next(t)
	notif := rec.next(t)
	second := rec.next(t)
	if first.Notif || first.ID.String() != "0" || !notif.Notif || second.ID.String() != `"s-1"` {
		t.Fatalf("handled %+v / %+v / %+v", first, notif, second)
	}
	if err := second.Reply(context.Background(), map[string]string{"decision": "decline"}); err != nil {
		t.Fatal(err)
	}
	m := p.recv()
	if string(m["id"]) != `"s-1"` || string(m["result"]) != `{"decision":"decline"}` {
		t.Fatalf("first reply = %s", mustJSON(m))
	}
	if err := first.Reply(context.Background(), map[string]string{"decision": "accept"}); err != nil {
		t.Fatal(err)
	}
	m = p.recv()
	if string(m["id"]) != "0" || string(m["result"]) != `{"decision":"accept"}` {
		t.Fatalf("second reply = %s", mustJSON(m))
	}
	if err := first.Reply(context.Background(), nil); !errors.Is(err, ErrAlreadyReplied) {
		t.Fatalf("second Reply err = %v, want ErrAlreadyReplied", err)
	}
	if err := first.Fail(context.Background(), CodeInternalError, "x"); !errors.Is(err, ErrAlreadyReplied) {
		t.Fatalf("Fail after Reply err = %v, want ErrAlreadyReplied", err)
	}
	if err := notif.Reply(context.Background(), nil); err == nil {
		t.Fatal("reply to a notification succeeded")
	}
}

func TestNilHandlerRefusesRequests(t *testing.T) {
	d, p := newPipes(t)
	c := New(context.Background(), d, nil, Options{})
	defer c.Close()
	p.send(`{"jsonrpc":"2.0","id":5,"method":"x/y"}`)
	m := p.recv()
	var e ErrorObject
	if err := json.Unmarshal(m["error"], &e); err != nil || e.Code != CodeMethodNotFound || string(m["id"]) != "5" {
		t.Fatalf("reply = %s", mustJSON(m))
	}
}

// TestCallTimeoutAndLateResponse runs on a fake clock (synctest): a call
// times out after exactly its CallTimeout.
func TestCallTimeoutAndLateResponse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, p := newPipes(t)
		var dmu sync.Mutex
		var drops []agent.Dropped
		rec := newRecorder()
		c := New(context.Background(), d, rec, Options{CallTimeout: 30 * time.Millisecond, OnDropped: func(x agent.Dropped) {
			dmu.Lock()
			drops = append(drops, x)
			dmu.Unlock()
		}})
		defer c.Close()

		done := make(chan error, 1)
		go func() { done <- c.Call(context.Background(), "tools/call", nil, nil) }()
		_ = p.recv()
		start := time.Now()
		err := <-done
		if !errors.Is(err, ErrTimeout) || time.Since(start) != 30*time.Millisecond {
			t.Fatalf("err = %v after %s, want ErrTimeout after 30ms", err, time.Since(start))
		}
		// The late answer is discarded; an answer to an id never sent is an orphan.
		p.send(`{"id":1,"result":{"late":true}}`)
		p.send(`{"id":99,"result":{}}`)
		p.send(`{"method":"after"}`)
		if in := rec.next(t); in.Method != "after" {
			t.Fatalf("handled %q", in.Method)
		}
		dmu.Lock()
		defer dmu.Unlock()
		if len(drops) != 1 || drops[0].Reason != agent.DropOrphan || !strings.Contains(drops[0].Detail, "99") {
			t.Fatalf("drops = %+v", drops)
		}

		// An explicit context deadline wins over the default timeout.
		ctx, cancel := context.WithCancel(context.Background())
		go func() { done <- c.CallTimeout(ctx, time.Hour, "slow", nil, nil) }()
		_ = p.recv()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled call err = %v", err)
		}
	})
}

func TestRPCErrorAndClosedPeer(t *testing.T) {
	d, p := newPipes(t)
	c := New(context.Background(), d, nil, Options{})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "turn/start", nil, nil) }()
	_ = p.recv()
	p.send(`{"id":1,"error":{"code":-32600,"message":"bad turn","data":{"k":1}}}`)
	var re *RPCError
	if err := <-done; !errors.As(err, &re) || re.Code != -32600 || re.Message != "bad turn" || string(re.Data) != `{"k":1}` || re.Method != "turn/start" {
		t.Fatalf("err = %v (%+v)", err, re)
	}

	go func() { done <- c.Call(context.Background(), "never", nil, nil) }()
	_ = p.recv()
	_ = p.w.Close() // the peer goes away
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after EOF")
	}
	if err := c.Call(context.Background(), "x", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close err = %v", err)
	}
	if err := c.Err(); err != nil {
		t.Fatalf("Err after clean EOF = %v", err)
	}
}

// TestMalformedFrames: every bad line becomes a Dropped with its reason,
// and the connection keeps working.
func TestMalformedFrames(t *testing.T) {
	d, p := newPipes(t)
	var mu sync.Mutex
	var drops []agent.Dropped
	rec := newRecorder()
	c := New(context.Background(), d, rec, Options{MaxFrame: 100, Source: "codex-rpc", OnDropped: func(x agent.Dropped) {
		mu.Lock()
		drops = append(drops, x)
		mu.Unlock()
	}})
	defer c.Close()
	lines := []struct {
		line   string
		reason agent.DropReason
	}{
		{`not json at all`, agent.DropUnparseableJSON},
		{`{"method":"x","params":`, agent.DropUnparseableJSON},
		{`[{"method":"x"}]`, agent.DropNotAnObject},
		{`"str"`, agent.DropNotAnObject},
		{`{"id":1}`, agent.DropInvalidField},
		{`{"jsonrpc":"1.0","method":"x"}`, agent.DropInvalidField},
		{`{"method":"x","result":1}`, agent.DropInvalidField},
		{`{"method":7}`, agent.DropInvalidField},
		{`{"method":"x","params":"s"}`, agent.DropInvalidField},
		{`{"id":-1,"result":1}`, agent.DropInvalidField},
		{`{"id":1.5,"method":"x"}`, agent.DropInvalidField},
		{`{"id":null,"error":{"code":-32700,"message":"parse error"}}`, agent.DropMissingID},
		{`{"id":1,"result":1,"error":{"code":1,"message":"m"}}`, agent.DropInvalidField},
		{`{"id":1,"error":"boom"}`, agent.DropInvalidField},
		{`{"method":"big","params":{"s":"` + strings.Repeat("x", 200) + `"}}`, agent.DropOversize},
	}
	for _, l := range lines {
		p.send(l.line)
	}
	p.send("")
	p.send("   ")
	p.send(`{"method":"ok","params":{}}`)
	if in := rec.next(t); in.Method != "ok" {
		t.Fatalf("handled %q", in.Method)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(drops) != len(lines) {
		t.Fatalf("%d drops, want %d: %+v", len(drops), len(lines), drops)
	}
	for i, l := range lines {
		if drops[i].Reason != l.reason || drops[i].Source != "codex-rpc" || drops[i].Line != int64(i+1) {
			t.Errorf("line %d %q: dropped %+v, want reason %s", i+1, l.line, drops[i], l.reason)
		}
	}
	if drops[4].Detail == "" || drops[7].Raw != `{"method":7}` {
		t.Errorf("detail/raw not kept: %+v %+v", drops[4], drops[7])
	}
	if want := fmt.Sprintf("line of %d bytes is over the reader's limit of 100 bytes; skipped", len(lines[14].line)); drops[14].Detail != want {
		t.Errorf("oversize detail %q, want %q", drops[14].Detail, want)
	}
	if rec.count() != 1 {
		t.Fatalf("handler saw %d messages, want 1", rec.count())
	}
}

func TestTapAndTrafficRecorder(t *testing.T) {
	d, p := newPipes(t)
	var log bytes.Buffer
	var mu sync.Mutex
	var frames []Frame
	clock := time.UnixMilli(1_700_000_000_000)
	c := New(context.Background(), d, newRecorder(), Options{
		OmitVersion: true,
		Recorder:    TrafficRecorder(&log),
		Tap: func(f Frame) {
			mu.Lock()
			frames = append(frames, f)
			mu.Unlock()
		},
		Now: func() time.Time { return clock },
	})
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "initialize", map[string]string{"a": "b"}, nil) }()
	_ = p.recv()
	p.send(`garbage`)
	p.send(`{"id":1,"result":{}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(frames) != 3 || frames[0].Dir != trafficlog.C2A || frames[1].Dir != trafficlog.A2C || frames[1].JSON || frames[2].Dir != trafficlog.A2C || !frames[2].JSON {
		t.Fatalf("frames = %+v", frames)
	}
	want := `{"t":1700000000000,"dir":"c2a","msg":{"id":1,"method":"initialize","params":{"a":"b"}}}
{"t":1700000000000,"dir":"a2c","msg":"garbage"}
{"t":1700000000000,"dir":"a2c","msg":{"id":1,"result":{}}}
`
	if log.String() != want {
		t.Fatalf("traffic log:\n%s\nwant:\n%s", log.String(), want)
	}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		if _, err := trafficlog.Decode([]byte(line)); err != nil {
			t.Fatalf("traffic log line %s: %v", line, err)
		}
	}
}

// TestParsedOnce: the Tap, the Handler and the waiting call share the one
// decoding of a frame (the same bytes, never a second parse), and an
// outgoing frame is tapped as the Message it was built from.
func TestParsedOnce(t *testing.T) {
	d, p := newPipes(t)
	var mu sync.Mutex
	var tapped []Frame
	rec := newRecorder()
	c := New(context.Background(), d, rec, Options{Tap: func(f Frame) {
		mu.Lock()
		tapped = append(tapped, f)
		mu.Unlock()
	}})
	defer c.Close()
	p.send(`{"method":"n","params":{"k":"v"},"emittedAtMs":3}`)
	in := rec.next(t)
	done := make(chan error, 1)
	go func() { done <- c.Call(context.Background(), "m", map[string]int{"a": 1}, nil) }()
	_ = p.recv()
	p.send(`{"id":1,"result":{}}`)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tapped) != 3 || !tapped[0].HasMsg() || !tapped[1].HasMsg() || !tapped[2].HasMsg() {
		t.Fatalf("tapped %+v", tapped)
	}
	n := tapped[0].Msg
	if &n.Params[0] != &in.Params[0] || &n.Raw[0] != &in.Raw[0] || &n.Raw[0] != &tapped[0].Data[0] {
		t.Error("the handler got another decoding of the frame than the tap")
	}
	if string(n.EmittedAtMs()) != "3" || n.Extra != nil {
		t.Errorf("emittedAtMs %s, extra members %v", n.EmittedAtMs(), n.Extra)
	}
	out := tapped[1].Msg
	if out.Kind != KindRequest || out.Method != "m" || string(out.Params) != `{"a":1}` || &out.Raw[0] != &tapped[1].Data[0] {
		t.Errorf("outgoing frame tapped as %+v", out)
	}
}

func TestLastLineWithoutNewline(t *testing.T) {
	d, p := newPipes(t)
	rec := newRecorder()
	c := New(context.Background(), d, rec, Options{})
	defer c.Close()
	if _, err := io.WriteString(p.w, `{"method":"tail"}`); err != nil {
		t.Fatal(err)
	}
	_ = p.w.Close()
	if in := rec.next(t); in.Method != "tail" {
		t.Fatalf("handled %q", in.Method)
	}
	<-c.Done()
}

func TestNoteIsTappedInOrder(t *testing.T) {
	d, _ := newPipes(t)
	var log bytes.Buffer
	c := New(context.Background(), d, nil, Options{Recorder: TrafficRecorder(&log), Now: func() time.Time { return time.UnixMilli(5) }})
	defer c.Close()
	c.Note([]byte(`{"happy":"turn-abandoned"}`))
	c.Note([]byte("plain words"))
	want := `{"t":5,"dir":"note","msg":{"happy":"turn-abandoned"}}
{"t":5,"dir":"note","msg":"plain words"}
`
	if log.String() != want {
		t.Fatalf("log:\n%s", log.String())
	}
}

// BenchmarkConnNotifications measures reading and handling notifications
// through the whole connection (pipe, line reader, decoder, handler).
func BenchmarkConnNotifications(b *testing.B) {
	p2cR, p2cW := io.Pipe()
	_, c2pW := io.Pipe()
	done := make(chan struct{}, 1)
	n := 0
	h := HandlerFunc(func(context.Context, *Incoming) {
		n++
		if n == b.N {
			done <- struct{}{}
		}
	})
	c := New(context.Background(), &duplex{Reader: p2cR, Writer: c2pW, closers: []io.Closer{p2cR, c2pW}}, h, Options{})
	defer c.Close()
	defer p2cW.Close()
	line := []byte(`{"method":"item/agentMessage/delta","params":{"threadId":"t","turnId":"u","itemId":"m","delta":"Done: "}}` + "\n")
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			if _, err := p2cW.Write(line); err != nil {
				return
			}
		}
	}()
	<-done
}

// TestOversizeLastLine: a last line over the limit that never gets its
// newline (the agent died writing it) is dropped as oversize, with its size
// and the limit, not as a fragment that is not JSON.
func TestOversizeLastLine(t *testing.T) {
	d, p := newPipes(t)
	var mu sync.Mutex
	var drops []agent.Dropped
	c := New(context.Background(), d, newRecorder(), Options{MaxFrame: 100, Source: "acp", OnDropped: func(x agent.Dropped) {
		mu.Lock()
		drops = append(drops, x)
		mu.Unlock()
	}})
	defer c.Close()
	p.send(`{"method":"ok","params":{}}`)
	big := `{"method":"big","params":{"s":"` + strings.Repeat("x", 300)
	if _, err := io.WriteString(p.w, big); err != nil {
		t.Fatal(err)
	}
	_ = p.w.Close()
	select {
	case <-c.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after EOF")
	}
	mu.Lock()
	defer mu.Unlock()
	want := fmt.Sprintf("line of %d bytes is over the reader's limit of 100 bytes; skipped", len(big))
	if len(drops) != 1 || drops[0].Reason != agent.DropOversize || drops[0].Line != 2 || drops[0].Detail != want || drops[0].Source != "acp" {
		t.Fatalf("drops %+v, want one oversize drop of line 2 with detail %q", drops, want)
	}
}
