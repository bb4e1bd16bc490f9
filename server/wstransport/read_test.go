package wstransport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	ws "github.com/gorilla/websocket"
)

// byteSource is a wsSource over fixed bytes, handing out at most chunk
// bytes per read (0: all that fit), to cut frames anywhere.
type byteSource struct {
	r     *bytes.Reader
	chunk int
	waits int
}

func (s *byteSource) wait() error { s.waits++; return nil }

func (s *byteSource) read(p []byte) (int, error) {
	if s.chunk > 0 && len(p) > s.chunk {
		p = p[:s.chunk]
	}
	return s.r.Read(p)
}

// clientFrame builds a client-to-server frame: b0 is FIN|RSV|opcode,
// the payload is masked with key unless unmasked.
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
		unmask(key, p)
	}
	return append(f, p...)
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

type readMsg struct {
	Op      byte
	Payload string
}

// readFrames reads messages until an error and returns them with it.
func readFrames(data []byte, limit int64, chunk int) ([]readMsg, error) {
	fr := wsFrameReader{src: &byteSource{r: bytes.NewReader(data), chunk: chunk}, limit: limit}
	var got []readMsg
	for {
		op, p, err := fr.next()
		if err != nil {
			return got, err
		}
		got = append(got, readMsg{op, string(p)})
		if len(got) > len(data)+1 {
			panic("more messages than bytes")
		}
	}
}

func TestFrameReader(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 5000) // 80,000 bytes: 64-bit length, past a read buffer
	mid := bytes.Repeat([]byte("x"), 300)                 // 16-bit length
	closeP := func(code int, reason string) []byte {
		return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
	}
	tests := []struct {
		name  string
		data  []byte
		limit int64
		want  []readMsg
		code  int   // a wsCloseError's code, or 0
		err   error // otherwise the error (io.EOF: the stream ended cleanly)
	}{
		{name: "text", data: clientFrame(0x81, []byte("40{}"), false), want: []readMsg{{opText, "40{}"}}, err: io.EOF},
		{name: "empty text", data: clientFrame(0x81, nil, false), want: []readMsg{{opText, ""}}, err: io.EOF},
		{name: "binary", data: clientFrame(0x82, []byte{0, 1, 0xff}, false), want: []readMsg{{opBinary, "\x00\x01\xff"}}, err: io.EOF},
		{name: "16-bit length", data: clientFrame(0x81, mid, false), want: []readMsg{{opText, string(mid)}}, err: io.EOF},
		{name: "64-bit length", data: clientFrame(0x82, big, false), want: []readMsg{{opBinary, string(big)}}, err: io.EOF},
		{name: "two messages", data: cat(clientFrame(0x81, []byte("2"), false), clientFrame(0x81, []byte("3"), false)),
			want: []readMsg{{opText, "2"}, {opText, "3"}}, err: io.EOF},
		{name: "fragmented with a ping between",
			data: cat(clientFrame(0x01, []byte("42[\"a"), false), clientFrame(0x89, []byte("hi"), false),
				clientFrame(0x00, []byte("b\","), false), clientFrame(0x80, []byte("1]"), false)),
			want: []readMsg{{opPing, "hi"}, {opText, `42["ab",1]`}}, err: io.EOF},
		{name: "fragmented large binary", data: cat(clientFrame(0x02, big[:40000], false), clientFrame(0x80, big[40000:], false)),
			want: []readMsg{{opBinary, string(big)}}, err: io.EOF},
		{name: "pong", data: clientFrame(0x8a, []byte("p"), false), want: []readMsg{{opPong, "p"}}, err: io.EOF},
		{name: "close without payload", data: clientFrame(0x88, nil, false), want: []readMsg{{opClose, ""}}, err: io.EOF},
		{name: "close with code and reason", data: clientFrame(0x88, closeP(1001, "bye"), false), want: []readMsg{{opClose, "\x03\xe9bye"}}, err: io.EOF},
		{name: "close with an application code", data: clientFrame(0x88, closeP(4000, ""), false), want: []readMsg{{opClose, "\x0f\xa0"}}, err: io.EOF},
		{name: "at the limit", data: clientFrame(0x81, mid, false), limit: 300, want: []readMsg{{opText, string(mid)}}, err: io.EOF},

		{name: "over the limit", data: clientFrame(0x81, mid, false), limit: 299, code: closeMessageTooBig},
		{name: "fragments over the limit", data: cat(clientFrame(0x01, mid[:200], false), clientFrame(0x80, mid[200:], false)), limit: 250, code: closeMessageTooBig},
		{name: "unmasked", data: clientFrame(0x81, []byte("40"), true), code: closeProtocolError},
		{name: "reserved bit", data: clientFrame(0xc1, []byte("40"), false), code: closeProtocolError},
		{name: "opcode 3", data: clientFrame(0x83, nil, false), code: closeProtocolError},
		{name: "opcode 11", data: clientFrame(0x8b, nil, false), code: closeProtocolError},
		{name: "continuation first", data: clientFrame(0x80, []byte("x"), false), code: closeProtocolError},
		{name: "new message inside a fragmented one", data: cat(clientFrame(0x01, []byte("a"), false), clientFrame(0x81, []byte("b"), false)), code: closeProtocolError},
		{name: "fragmented ping", data: clientFrame(0x09, nil, false), code: closeProtocolError},
		{name: "long ping", data: clientFrame(0x89, mid[:126], false), code: closeProtocolError},
		{name: "close with one byte", data: clientFrame(0x88, []byte{3}, false), code: closeProtocolError},
		{name: "close with code 1005", data: clientFrame(0x88, closeP(1005, ""), false), code: closeProtocolError},
		{name: "close with code 999", data: clientFrame(0x88, closeP(999, ""), false), code: closeProtocolError},
		{name: "close reason not UTF-8", data: clientFrame(0x88, closeP(1000, "\xff"), false), code: closeInvalidPayload},
		{name: "text not UTF-8", data: clientFrame(0x81, []byte("4\xc3"), false), code: closeInvalidPayload},
		{name: "binary need not be UTF-8", data: clientFrame(0x82, []byte("4\xc3"), false), want: []readMsg{{opBinary, "4\xc3"}}, err: io.EOF},
		{name: "64-bit length with the top bit", data: []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4}, code: closeProtocolError},
		{name: "huge length against the limit", data: []byte{0x82, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}, limit: 1 << 20, code: closeMessageTooBig},
		// The continuation's length plus what the message holds overflows
		// an int64: it must still be refused, not let through unbounded.
		{name: "huge continuation after a fragment", data: cat(clientFrame(0x02, []byte("a"), false),
			[]byte{0x80, 0xff, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}, bytes.Repeat([]byte("y"), 1000)),
			limit: 1 << 20, code: closeMessageTooBig},

		{name: "nothing", data: nil, err: io.EOF},
		{name: "truncated header", data: clientFrame(0x81, []byte("40"), false)[:1], err: io.ErrUnexpectedEOF},
		{name: "truncated mask key", data: clientFrame(0x81, []byte("40"), false)[:4], err: io.ErrUnexpectedEOF},
		{name: "truncated payload", data: clientFrame(0x81, mid, false)[:100], err: io.ErrUnexpectedEOF},
		{name: "truncated large payload", data: clientFrame(0x82, big, false)[:50000], err: io.ErrUnexpectedEOF},
		{name: "truncated ping", data: clientFrame(0x89, []byte("ping"), false)[:8], err: io.ErrUnexpectedEOF},
		{name: "ends inside a fragmented message", data: clientFrame(0x01, []byte("a"), false), err: io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		compareGorilla(t, tc.data, tc.limit)
		for _, chunk := range []int{0, 1, 7} {
			got, err := readFrames(tc.data, tc.limit, chunk)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s (reads of %d): messages %q, want %q", tc.name, chunk, got, tc.want)
			}
			var ce *wsCloseError
			switch {
			case tc.code != 0:
				if !errors.As(err, &ce) || ce.Code != tc.code {
					t.Errorf("%s (reads of %d): error %v, want close code %d", tc.name, chunk, err, tc.code)
				}
			case !errors.Is(err, tc.err) || errors.As(err, &ce):
				t.Errorf("%s (reads of %d): error %v, want %v", tc.name, chunk, err, tc.err)
			}
		}
	}
}

// Between messages the reader holds no buffer, and it waits on the
// source before taking one.
func TestFrameReaderHoldsNoBufferBetweenMessages(t *testing.T) {
	src := &byteSource{r: bytes.NewReader(cat(clientFrame(0x81, []byte("2"), false), clientFrame(0x81, []byte("3"), false)))}
	fr := wsFrameReader{src: src}
	for i, want := range []string{"2", "3"} {
		op, p, err := fr.next()
		if err != nil || op != opText || string(p) != want {
			t.Fatalf("message %d: %d %q %v", i, op, p, err)
		}
	}
	// Both frames came in one read: one wait, and the buffer went back
	// after the second.
	if src.waits != 1 || fr.buffered() {
		t.Fatalf("waits %d, buffered %v", src.waits, fr.buffered())
	}
	if _, _, err := fr.next(); !errors.Is(err, io.EOF) || src.waits != 2 {
		t.Fatalf("end: %v after %d waits", err, src.waits)
	}
}

func TestUnmask(t *testing.T) {
	key := [4]byte{1, 2, 3, 4}
	for n := range 20 {
		p := bytes.Repeat([]byte{0xaa}, n)
		unmask(key, p)
		for i, b := range p {
			if b != 0xaa^key[i%4] {
				t.Fatalf("length %d, byte %d: %#x", n, i, b)
			}
		}
	}
}

// FuzzFrameReader: any bytes, read in any chunks, give messages no longer
// than the limit and end in an error (never a panic); a refused frame's
// close code is one the relay sends; gorilla's reader (the reference)
// reads the same messages (compareGorilla).
func FuzzFrameReader(f *testing.F) {
	f.Add(clientFrame(0x81, []byte("40{}"), false), uint8(0), uint16(0))
	f.Add(cat(clientFrame(0x01, []byte("a"), false), clientFrame(0x89, nil, false), clientFrame(0x80, []byte("b"), false)), uint8(3), uint16(10))
	f.Add(clientFrame(0x88, []byte{3, 0xe8, 'o', 'k'}, false), uint8(1), uint16(0))
	f.Add(clientFrame(0x82, bytes.Repeat([]byte{7}, 70000), false), uint8(0), uint16(100))
	f.Add([]byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1}, uint8(0), uint16(0))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8, limit uint16) {
		got, err := readFrames(data, int64(limit), int(chunk))
		if err == nil {
			t.Fatal("no error at the end of the input")
		}
		total := 0
		for _, m := range got {
			total += len(m.Payload) + 2
			switch m.Op {
			case opText, opBinary:
				if limit > 0 && len(m.Payload) > int(limit) {
					t.Fatalf("message of %d bytes over the limit %d", len(m.Payload), limit)
				}
			case opClose, opPing, opPong:
				if len(m.Payload) > 125 {
					t.Fatalf("control frame of %d bytes", len(m.Payload))
				}
			default:
				t.Fatalf("opcode %d returned", m.Op)
			}
		}
		if total > len(data) {
			t.Fatalf("%d bytes of messages from %d bytes", total, len(data))
		}
		var ce *wsCloseError
		if errors.As(err, &ce) && ce.Code != closeProtocolError && ce.Code != closeInvalidPayload && ce.Code != closeMessageTooBig {
			t.Fatalf("close code %d", ce.Code)
		}
		compareGorilla(t, data, int64(limit))
		// The same bytes in other chunks read the same.
		again, err2 := readFrames(data, int64(limit), 0)
		if !reflect.DeepEqual(again, got) || (err2 == nil) != (err == nil) || err2.Error() != err.Error() {
			t.Fatalf("reads of %d: %q %v; whole: %q %v", chunk, got, err, again, err2)
		}
	})
}

// memConn is a net.Conn reading fixed bytes and discarding writes.
type memConn struct{ r *bytes.Reader }

func (c memConn) Read(p []byte) (int, error)     { return c.r.Read(p) }
func (memConn) Write(p []byte) (int, error)      { return len(p), nil }
func (memConn) Close() error                     { return nil }
func (memConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (memConn) SetDeadline(time.Time) error      { return nil }
func (memConn) SetReadDeadline(time.Time) error  { return nil }
func (memConn) SetWriteDeadline(time.Time) error { return nil }

// hijackWriter hands gorilla's Upgrader a memConn.
type hijackWriter struct {
	httptest.ResponseRecorder
	conn net.Conn
}

func (w *hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.conn, bufio.NewReadWriter(bufio.NewReader(w.conn), bufio.NewWriter(w.conn)), nil
}

// gorillaFrames reads data with gorilla's server reader (the reader the
// relay used before its own, the reference): the messages and control
// frames in order, up to the first close frame, and whether it ended in
// an error before that.
func gorillaFrames(t testing.TB, data []byte, limit int64) []readMsg {
	u := ws.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 1024}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Connection", "Upgrade")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("Sec-Websocket-Version", "13")
	r.Header.Set("Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	c, err := u.Upgrade(&hijackWriter{conn: memConn{bytes.NewReader(data)}}, r, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadLimit(limit)
	var got []readMsg
	c.SetPingHandler(func(s string) error { got = append(got, readMsg{opPing, s}); return nil })
	c.SetPongHandler(func(s string) error { got = append(got, readMsg{opPong, s}); return nil })
	c.SetCloseHandler(func(code int, text string) error {
		p := ""
		if code != ws.CloseNoStatusReceived {
			p = string(binary.BigEndian.AppendUint16(nil, uint16(code))) + text
		}
		got = append(got, readMsg{opClose, p})
		return nil
	})
	for {
		mt, rd, err := c.NextReader()
		if err != nil {
			return got
		}
		b, err := io.ReadAll(rd)
		if err != nil {
			return got
		}
		got = append(got, readMsg{byte(mt), string(b)})
	}
}

// compareGorilla checks the relay's reader against gorilla's on data:
// the same messages and control frames, in order, up to the first close
// frame; where the relay's stops sooner, it is for a rule gorilla does
// not check (a text message that is not UTF-8, a close payload of one
// byte).
func compareGorilla(t *testing.T, data []byte, limit int64) {
	t.Helper()
	ours, err := readFrames(data, limit, 0)
	for i, m := range ours {
		if m.Op == opClose {
			ours, err = ours[:i+1], nil
			break
		}
	}
	ref := gorillaFrames(t, data, limit)
	if len(ours) > len(ref) || !slices.Equal(ours, ref[:len(ours)]) {
		t.Fatalf("relay's reader %q (%v), gorilla's %q", ours, err, ref)
	}
	if len(ours) == len(ref) {
		return
	}
	var ce *wsCloseError
	next := ref[len(ours)]
	switch {
	case errors.As(err, &ce) && ce.Code == closeInvalidPayload && next.Op == opText && !utf8.ValidString(next.Payload):
	case errors.As(err, &ce) && ce.Code == closeProtocolError && next.Op == opClose && next.Payload == "":
	default:
		t.Fatalf("relay's reader stopped with %v after %q; gorilla read on: %q", err, ours, ref)
	}
}
