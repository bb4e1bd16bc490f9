package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"
)

// rawSocket is a bare Engine.IO v4 / Socket.IO v5 websocket client, so
// that a test can stop reading and look at every frame the relay writes.
type rawSocket struct {
	t testing.TB
	c *ws.Conn
}

// dialRaw connects a session-scoped socket; rcvbuf > 0 shrinks the
// client's TCP receive buffer (bytes) so the relay's writes stall sooner.
func dialRaw(t testing.TB, base, token, sid string, rcvbuf int) *rawSocket {
	t.Helper()
	d := ws.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil && rcvbuf > 0 {
			_ = c.(*net.TCPConn).SetReadBuffer(rcvbuf)
		}
		return c, err
	}}
	c, _, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/updates/?EIO=4&transport=websocket", nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r := &rawSocket{t: t, c: c}
	if open := r.next(); !strings.HasPrefix(open, "0{") {
		t.Fatalf("open packet %q", open)
	}
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sid})
	if err := c.WriteMessage(ws.TextMessage, append([]byte("40"), auth...)); err != nil {
		t.Fatal(err)
	}
	if ok := r.next(); !strings.HasPrefix(ok, "40{") {
		t.Fatalf("connect answer %q", ok)
	}
	return r
}

// next returns the next Engine.IO packet other than a ping (answered).
func (r *rawSocket) next() string {
	r.t.Helper()
	p, err := r.read()
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *rawSocket) read() (string, error) {
	for {
		_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		mt, b, err := r.c.ReadMessage()
		if err != nil {
			return "", fmt.Errorf("read: %w", err)
		}
		if mt != ws.TextMessage {
			return "", fmt.Errorf("frame type %d", mt)
		}
		if string(b) == "2" {
			_ = r.c.WriteMessage(ws.TextMessage, []byte("3"))
			continue
		}
		return string(b), nil
	}
}

// update reads a `42["update",{...}]` packet and returns the new
// message's seq and content text (content.c).
func (r *rawSocket) update() (int64, string, error) {
	p, err := r.read()
	if err != nil {
		return 0, "", err
	}
	var ev []json.RawMessage
	if !strings.HasPrefix(p, "42") || json.Unmarshal([]byte(p[2:]), &ev) != nil || len(ev) != 2 || string(ev[0]) != `"update"` {
		return 0, "", fmt.Errorf("not an update: %.80q", p)
	}
	var u struct {
		Body struct {
			Message struct {
				Seq     int64
				Content struct{ C string }
			}
		}
	}
	if err := json.Unmarshal(ev[1], &u); err != nil {
		return 0, "", err
	}
	return u.Body.Message.Seq, u.Body.Message.Content.C, nil
}

// expect checks the update for message number i (seq i+1) of postBatch.
func expect(seq int64, content string, err error, i, size int) error {
	if err != nil {
		return err
	}
	if seq != int64(i+1) || content != fmt.Sprintf("%08d", i)+strings.Repeat("x", size) {
		return fmt.Errorf("seq %d (%d bytes), want %d", seq, len(content), i+1)
	}
	return nil
}

func postBatch(t testing.TB, base, token, sid string, from, n, size int) {
	t.Helper()
	msgs := make([]sentMessage, n)
	for i := range msgs {
		msgs[i] = sentMessage{LocalID: fmt.Sprint("m", from+i), Content: fmt.Sprintf("%08d", from+i) + strings.Repeat("x", size)}
	}
	st, err := httpJSON(context.Background(), http.DefaultClient, "POST", base+"/v3/sessions/"+sid+"/messages", token, map[string]any{"messages": msgs}, nil)
	if err != nil || st != 200 {
		t.Fatalf("post: %d %v", st, err)
	}
}

// A socket that stops reading makes the relay's direct writes come up
// short; the rest waits in the socket's queue and arrives intact and in
// order once the client reads again, while a reading socket on the same
// session is not held up.
func TestSlowSocketGetsEveryFrameInOrder(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "slow")
	slow := dialRaw(t, base, token, sid, 32<<10)
	fast := dialRaw(t, base, token, sid, 0)

	const batches, per, size = 8, 50, 16 << 10 // 6.4 MiB in all
	got := make(chan error, 1)
	go func() {
		// The reading socket gets everything while the slow one is stalled.
		for i := 0; i < batches*per; i++ {
			seq, content, err := fast.update()
			if err := expect(seq, content, err, i, size); err != nil {
				got <- fmt.Errorf("reading socket: %w", err)
				return
			}
		}
		got <- nil
	}()
	for b := 0; b < batches; b++ {
		postBatch(t, base, token, sid, b*per, per, size)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the reading socket was held up by the stalled one")
	}
	if srv.ws.Queued.Load() == 0 {
		t.Fatalf("no frame was queued (direct %d): the stall did not happen", srv.ws.Direct.Load())
	}
	for i := 0; i < batches*per; i++ {
		seq, content, err := slow.update()
		if err := expect(seq, content, err, i, size); err != nil {
			t.Fatalf("stalled socket: %v", err)
		}
	}
	if n := srv.ws.SlowClosed.Load(); n != 0 {
		t.Fatalf("%d sockets closed for their backlog", n)
	}
}

// A socket whose unread updates pass MaxSocketBacklog is closed; the
// relay and its other sockets go on.
func TestSocketOverBacklogIsClosed(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop(), MaxSocketBacklog: 256 << 10}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "backlog")
	stalled := dialRaw(t, base, token, sid, 32<<10)
	fast := dialRaw(t, base, token, sid, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 600; i++ {
			seq, content, err := fast.update()
			if err := expect(seq, content, err, i, 16<<10); err != nil {
				t.Errorf("reading socket: %v", err)
				return
			}
		}
	}()
	for b := 0; b < 12; b++ { // 9.6 MiB: more than the kernel buffers hold
		postBatch(t, base, token, sid, b*50, 50, 16<<10)
	}
	<-done
	if n := srv.ws.SlowClosed.Load(); n != 1 {
		t.Fatalf("%d sockets closed for their backlog, want 1", n)
	}
	// The stalled socket reads what was written, then the end.
	_ = stalled.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := stalled.c.ReadMessage(); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the stalled socket was not closed")
			}
			break
		}
	}
}

// A websocket-level ping from the client is answered with a pong carrying
// its data, written by the transport like every other frame (the
// websocket library's own pong writer would set a write deadline on the
// connection that later writes then run into), and the socket goes on
// receiving updates afterwards.
func TestClientPingGetsPong(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "ping")
	r := dialRaw(t, base, token, sid, 0)
	// The connection is quiet now: the next frame the transport writes is
	// the pong.
	written := make(chan struct{}, 16)
	onWrite := func() { written <- struct{}{} }
	srv.testWrite.Store(&onWrite)
	pong := make(chan string, 1)
	r.c.SetPongHandler(func(data string) error { pong <- data; return nil })
	if err := r.c.WriteControl(ws.PingMessage, []byte("hello"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	type upd struct {
		seq int64
		err error
	}
	updates := make(chan upd, 1)
	go func() {
		seq, _, err := r.update()
		updates <- upd{seq, err}
	}()
	select {
	case d := <-pong:
		if d != "hello" {
			t.Fatalf("pong %q", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no pong")
	}
	select {
	case <-written:
	case <-time.After(5 * time.Second):
		t.Fatal("the pong was not written by the transport")
	}
	postBatch(t, base, token, sid, 0, 1, 10)
	select {
	case u := <-updates:
		if u.err != nil || u.seq != 1 {
			t.Fatalf("update after the pong: seq %d, %v", u.seq, u.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no update after the pong")
	}
}

// A close frame from the client is echoed (RFC 6455 §5.5.1) before the
// connection ends.
func TestClientCloseIsEchoed(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "close")
	r := dialRaw(t, base, token, sid, 0)
	if err := r.c.WriteControl(ws.CloseMessage, ws.FormatCloseMessage(ws.CloseNormalClosure, "bye"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := r.c.ReadMessage()
		if err == nil {
			continue
		}
		var ce *ws.CloseError
		if !errors.As(err, &ce) || ce.Code != ws.CloseNormalClosure {
			t.Fatalf("read after close: %v, want the close echo (1000)", err)
		}
		return
	}
}

// Every queued reply counts against the backlog, not only broadcasts: a
// socket that asks for large acks and never reads them is closed.
func TestAckRepliesCountAgainstBacklog(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop(), MaxSocketBacklog: 1 << 20}, nil)
	token := newTestAccount(t, base)
	big := strings.Repeat("m", 300<<10)
	var out struct{ Session struct{ ID string } }
	if st, err := httpJSON(context.Background(), http.DefaultClient, "POST", base+"/v1/sessions", token, map[string]any{"tag": "acks", "metadata": big}, &out); err != nil || st != 200 {
		t.Fatalf("create session: %d %v", st, err)
	}
	r := dialRaw(t, base, token, out.Session.ID, 32<<10)
	// Stale compare-and-sets: each ack carries the 300 KiB metadata back.
	for i := 0; i < 40; i++ {
		ev, _ := json.Marshal([]any{"update-metadata", map[string]any{"sid": out.Session.ID, "metadata": "x", "expectedVersion": 7}})
		if err := r.c.WriteMessage(ws.TextMessage, append([]byte(fmt.Sprint("42", i)), ev...)); err != nil {
			break // closed already
		}
	}
	waitUntil(t, 10*time.Second, "the socket that does not read its acks is closed", func() bool { return srv.ws.SlowClosed.Load() > 0 })
}

// Closing the relay ends every socket's connection; what arrives before
// the end is at most the Socket.IO DISCONNECT packet ("41"). (It is sent
// first and usually arrives; on a loaded machine the engine can close the
// connection before the packet is written, so the test does not insist.)
func TestCloseEndsEverySocket(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "close")
	socks := []*rawSocket{dialRaw(t, base, token, sid, 0), dialRaw(t, base, token, sid, 0)}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	for i, r := range socks {
		_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, b, err := r.c.ReadMessage()
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("socket %d: still open 5 s after the relay closed", i)
				}
				break
			}
			if string(b) != "41" {
				t.Fatalf("socket %d: %q while closing, want only the DISCONNECT packet 41", i, b)
			}
		}
	}
}

// Concurrent posts to an account's sessions reach every socket in order:
// update seqs strictly increasing on the user-scoped socket, message seqs
// strictly increasing per session.
func TestConcurrentPostsArriveInOrder(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sids := []string{newTestSession(t, base, token, "order-a"), newTestSession(t, base, token, "order-b")}
	const writers, posts = 8, 40
	total := writers * posts
	type seen struct {
		upd, msg int64
		sid      string
	}
	read := func(r *rawSocket, n int, out chan<- []seen) {
		var got []seen
		for len(got) < n {
			p, err := r.read()
			if err != nil {
				break
			}
			var ev []json.RawMessage
			if !strings.HasPrefix(p, "42") || json.Unmarshal([]byte(p[2:]), &ev) != nil || len(ev) != 2 || string(ev[0]) != `"update"` {
				continue
			}
			var u struct {
				Seq  int64
				Body struct {
					T       string
					SID     string `json:"sid"`
					Message struct{ Seq int64 }
				}
			}
			if json.Unmarshal(ev[1], &u) == nil && u.Body.T == "new-message" {
				got = append(got, seen{u.Seq, u.Body.Message.Seq, u.Body.SID})
			}
		}
		out <- got
	}
	userSock := func() *rawSocket {
		// A user-scoped raw socket: like dialRaw, with another auth.
		d := ws.Dialer{}
		c, _, err := d.Dial("ws"+strings.TrimPrefix(base, "http")+"/v1/updates/?EIO=4&transport=websocket", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		r := &rawSocket{t: t, c: c}
		r.next()
		auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "user-scoped"})
		_ = c.WriteMessage(ws.TextMessage, append([]byte("40"), auth...))
		if ok := r.next(); !strings.HasPrefix(ok, "40{") {
			t.Fatalf("connect answer %q", ok)
		}
		return r
	}
	user := userSock()
	sess := dialRaw(t, base, token, sids[0], 0)
	userGot, sessGot := make(chan []seen, 1), make(chan []seen, 1)
	go read(user, total, userGot)
	go read(sess, total/2, sessGot)

	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		go func() {
			for i := 0; i < posts; i++ {
				sid := sids[(w+i)%2]
				msg := []sentMessage{{LocalID: fmt.Sprint(w, "-", i), Content: "x"}}
				if st, err := httpJSON(context.Background(), http.DefaultClient, "POST", base+"/v3/sessions/"+sid+"/messages", token, map[string]any{"messages": msg}, nil); err != nil || st != 200 {
					errs <- fmt.Errorf("post: %d %v", st, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < writers; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	u, s := <-userGot, <-sessGot
	if len(u) != total || len(s) != total/2 {
		t.Fatalf("user socket got %d updates (want %d), session socket %d (want %d)", len(u), total, len(s), total/2)
	}
	last := map[string]int64{}
	for i, x := range u {
		if i > 0 && x.upd <= u[i-1].upd {
			t.Fatalf("user socket: update seq %d after %d", x.upd, u[i-1].upd)
		}
		if x.msg != last[x.sid]+1 {
			t.Fatalf("user socket: session %s message seq %d after %d", x.sid, x.msg, last[x.sid])
		}
		last[x.sid] = x.msg
	}
	for i, x := range s {
		if x.sid != sids[0] || x.msg != int64(i+1) {
			t.Fatalf("session socket: update %d is %+v", i, x)
		}
	}
}

// An rpc-call's waits end with its caller's socket: a client that sends
// calls for methods nobody registers and disconnects leaves nothing
// waiting (reconnecting must not multiply the per-socket limit).
func TestRPCWaitsEndWithTheCaller(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop(), RPCGrace: 30 * time.Second}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "rpc")
	r := dialRaw(t, base, token, sid, 0)
	for i := 0; i < 64; i++ {
		ev, _ := json.Marshal([]any{"rpc-call", map[string]any{"method": fmt.Sprint(sid, ":nobody", i), "params": i}})
		if err := r.c.WriteMessage(ws.TextMessage, append([]byte(fmt.Sprint("42", i)), ev...)); err != nil {
			t.Fatal(err)
		}
	}
	// Methods with calls waiting for them (each entry goes with its last waiter).
	waiting := func() int {
		srv.rpc.mu.Lock()
		defer srv.rpc.mu.Unlock()
		return len(srv.rpc.notify)
	}
	// Generous bounds: on a loaded machine the relay may take a while to
	// read 64 frames; the test is about where the count ends, not speed.
	n := 0
	waitUntil(t, 30*time.Second, "64 calls waiting", func() bool { n = waiting(); return n == 64 })
	t.Logf("%d calls waiting", n)
	_ = r.c.Close()
	waitUntil(t, 30*time.Second, "no call waiting after their caller left", func() bool { n = waiting(); return n == 0 })
	_ = n
}

// TestFirstEventAfterConnectIsNotLost: a client emits the moment it reads
// the CONNECT answer (as Socket.IO clients send what they buffered). The
// library writes that answer before it registers the socket with its
// client, so without the transport's gate an event arriving in between was
// dropped as meant for an unknown namespace; every ping must be answered.
func TestFirstEventAfterConnectIsNotLost(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "first-event")
	for i := 0; i < 100; i++ {
		r := dialRaw(t, base, token, sid, 0)
		if err := r.c.WriteMessage(ws.TextMessage, []byte(`421["ping"]`)); err != nil {
			t.Fatal(err)
		}
		p, err := r.read()
		if err != nil || p != `431[{}]` {
			t.Fatalf("socket %d: the first event's answer = %q, %v; want 431[{}]", i, p, err)
		}
		_ = r.c.Close()
	}
}

// A frame the client should not send closes its socket with the close
// code for it (the relay's reader, package wstransport), whatever it is.
func TestBadFramesCloseTheSocket(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop(), MaxSocketPayload: 1000, SocketHardLimit: 70000}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "bad frames")
	tests := []struct {
		name  string
		frame []byte
		code  int
	}{
		{"unmasked", clientFrame(0x81, []byte("42[\"x\"]"), true), ws.CloseProtocolError},
		{"unknown opcode", clientFrame(0x83, nil, false), ws.CloseProtocolError},
		{"fragmented ping", clientFrame(0x09, nil, false), ws.CloseProtocolError},
		{"text not UTF-8", clientFrame(0x81, []byte("4\xff"), false), ws.CloseInvalidFramePayloadData},
		{"over SocketHardLimit", clientFrame(0x82, make([]byte, 70001), false), ws.CloseMessageTooBig},
	}
	for _, tc := range tests {
		r := dialRaw(t, base, token, sid, 0)
		if _, err := r.c.UnderlyingConn().Write(tc.frame); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, _, err := r.c.ReadMessage()
			if err == nil {
				continue
			}
			var ce *ws.CloseError
			if !errors.As(err, &ce) || ce.Code != tc.code {
				t.Errorf("%s: read after the frame: %v, want close %d", tc.name, err, tc.code)
			}
			break
		}
	}
}

// A client message in fragments (continuation frames, a ping between
// them) reaches its handler whole: an acked ping event.
func TestFragmentedEventIsHandled(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "fragments")
	r := dialRaw(t, base, token, sid, 0)
	frames := cat(clientFrame(0x01, []byte(`421["pi`), false), clientFrame(0x89, []byte("x"), false), clientFrame(0x80, []byte(`ng"]`), false))
	if _, err := r.c.UnderlyingConn().Write(frames); err != nil {
		t.Fatal(err)
	}
	if got := r.next(); got != "431[{}]" {
		t.Fatalf("ack %q, want 431[{}]", got)
	}
}

// A client that floods pings and reads nothing costs the relay one queued
// pong, not one per ping: a pong not yet taken by the writer is replaced
// by the next one (RFC 6455 §5.5.3 lets an endpoint answer only the most
// recent ping), so the flood never grows the queue to the backlog (it
// used to close the socket for a backlog of pongs, after holding up to
// MaxSocketBacklog of them), and the socket goes on working.
func TestPingFloodHoldsOnePong(t *testing.T) {
	const backlog = 256 << 10
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop(), MaxSocketBacklog: backlog}, nil)
	token := newTestAccount(t, base)
	sid := newTestSession(t, base, token, "pings")
	r := dialRaw(t, base, token, sid, 0)
	ping := []byte(strings.Repeat("p", 125))
	// 100,000 pongs of 127 bytes: 12 MiB, far more than the kernel's
	// socket buffers and the backlog hold.
	var werr error
	for i := 0; i < 100_000 && werr == nil; i++ {
		werr = r.c.WriteControl(ws.PingMessage, ping, time.Now().Add(10*time.Second))
	}
	if n := srv.ws.SlowClosed.Load(); n != 0 || werr != nil {
		t.Fatalf("%d sockets closed for their backlog (write: %v), want 0", n, werr)
	}
	pongs := make(chan int, 1)
	n := 0
	// The last ping's pong comes after every pong queued before it: a
	// ping with its own payload marks the end.
	r.c.SetPongHandler(func(d string) error {
		n++
		if d == "end" {
			pongs <- n
		}
		return nil
	})
	if err := r.c.WriteControl(ws.PingMessage, []byte("end"), time.Now().Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	postBatch(t, base, token, sid, 0, 1, 10)
	seq, _, err := r.update()
	if err != nil || seq != 1 {
		t.Fatalf("update after the flood: seq %d, %v", seq, err)
	}
	if len(pongs) == 0 {
		// The end pong may come after the update: read on until it has
		// (the read then times out, which ends the connection).
		_ = r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _, _ = r.c.ReadMessage()
	}
	select {
	case got := <-pongs:
		if got < 1 || got > 100_001 {
			t.Fatalf("%d pongs", got)
		}
	default:
		t.Fatal("no pong for the last ping")
	}
	if n := srv.ws.SlowClosed.Load(); n != 0 {
		t.Fatalf("%d sockets closed for their backlog, want 0", n)
	}
}

// clientFrame builds a client-to-server frame: b0 is FIN|RSV|opcode,
// the payload is masked with key unless unmasked (RFC 6455 §5.2, §5.3).
func clientFrame(b0 byte, payload []byte, unmasked bool) []byte {
	key := [4]byte{0x37, 0xfa, 0x21, 0x3d}
	f := []byte{b0}
	mask := byte(0x80)
	if unmasked {
		mask = 0
	}
	n := len(payload)
	switch {
	case n < 126:
		f = append(f, mask|byte(n))
	case n <= 0xffff:
		f = append(f, mask|126, byte(n>>8), byte(n))
	default:
		f = append(f, mask|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	p := bytes.Clone(payload)
	if !unmasked {
		f = append(f, key[:]...)
		for i := range p {
			p[i] ^= key[i%4]
		}
	}
	return append(f, p...)
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }
