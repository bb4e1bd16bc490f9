package wstransport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	ws "github.com/gorilla/websocket"
	"github.com/zishang520/socket.io/v3/pkg/types"
	"golang.org/x/sys/unix"
)

// The relay's websocket reader (docs/ARCHITECTURE.md, "Idle sockets"):
// client-to-server frames (RFC 6455 §5) read with a buffer taken from a
// pool only once the connection has something to read, so that an idle
// socket holds no read buffer and its reader goroutine parks with a
// shallow stack.

// Websocket opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// Websocket close codes the reader sends (RFC 6455 §7.4.1).
const (
	closeNormal          = 1000
	closeProtocolError   = 1002
	closeInvalidPayload  = 1007
	closeMessageTooBig   = 1009
	closeNoStatusPresent = 1005
)

// wsReadBufSize is the size of the pooled read buffers: one holds frame
// headers and small frames; a larger payload is read straight into its
// message.
const wsReadBufSize = 4 << 10

// wsMsgChunk bounds how much a message grows ahead of the bytes that
// arrived: a frame that announces a large payload does not reserve it
// before it comes.
const wsMsgChunk = 64 << 10

var wsReadBufs = sync.Pool{New: func() any { b := make([]byte, wsReadBufSize); return &b }}

// wsCloseError is a frame the reader refuses: the connection is to be
// closed with Code (RFC 6455 §7.4.1: 1002 protocol error, 1007 invalid
// payload, 1009 message too big) and Reason.
type wsCloseError struct {
	Code   int
	Reason string
}

func (e *wsCloseError) Error() string {
	return fmt.Sprintf("websocket: %s (close %d)", e.Reason, e.Code)
}

func protocolError(format string, a ...any) error {
	return &wsCloseError{Code: closeProtocolError, Reason: fmt.Sprintf(format, a...)}
}

// wsSource is where a wsFrameReader reads from. wait blocks until the
// connection has something to read (or a read would fail at once: end
// of stream, an error); read reads at least one byte into p, blocking as
// long as it needs (io.EOF at the end of the stream).
type wsSource interface {
	wait() error
	read(p []byte) (int, error)
}

// wsFrameReader reads the messages of one client-to-server websocket
// connection (RFC 6455 §5): frames must be masked; text and binary
// messages may be fragmented (continuation frames), with control frames
// (close, ping, pong: final, at most 125 bytes) between the fragments;
// no extension is negotiated, so the reserved bits must be clear. A
// message longer than limit bytes (0: no limit) is refused with 1009, a
// text message or close reason that is not UTF-8 with 1007, any other
// violation with 1002 (wsCloseError). Between messages it holds no
// buffer.
type wsFrameReader struct {
	src   wsSource
	limit int64

	buf  *[]byte // pooled; nil when nothing is buffered
	r, w int     // unread bytes: (*buf)[r:w]
	// ready says the source has something to read (await returned).
	ready bool

	// The data message being assembled from its frames.
	inMsg bool
	msgOp byte
	msg   []byte
}

// next returns the next data message (opText or opBinary, its whole
// payload) or control frame (opClose, opPing, opPong, its payload; a
// close payload is checked: empty, or a valid code and a UTF-8 reason).
// Errors: *wsCloseError for a frame the peer should not have sent,
// io.EOF at the end of the stream between frames, io.ErrUnexpectedEOF
// inside one, or the source's error.
func (fr *wsFrameReader) next() (byte, []byte, error) {
	for {
		if err := fr.need(2); err != nil {
			return 0, nil, err
		}
		b := (*fr.buf)[fr.r:fr.w]
		final, rsv, op := b[0]&0x80 != 0, b[0]&0x70, b[0]&0x0f
		masked, n := b[1]&0x80 != 0, int64(b[1]&0x7f)
		// What the first two bytes tell is checked before waiting for
		// more of the frame.
		if rsv != 0 {
			return 0, nil, protocolError("reserved bits 0x%x set", rsv)
		}
		if !masked {
			return 0, nil, protocolError("frame from the client not masked")
		}
		switch op {
		case opText, opBinary:
			if fr.inMsg {
				return 0, nil, protocolError("new message before the last one's final frame")
			}
		case opContinuation:
			if !fr.inMsg {
				return 0, nil, protocolError("continuation frame without a message to continue")
			}
		case opClose, opPing, opPong:
			if !final {
				return 0, nil, protocolError("fragmented control frame")
			}
			if n > 125 {
				return 0, nil, protocolError("control frame longer than 125 bytes")
			}
		default:
			return 0, nil, protocolError("unknown opcode %d", op)
		}
		hdr := 2
		switch n {
		case 126:
			hdr += 2
		case 127:
			hdr += 8
		}
		hdr += 4 // the mask key
		if err := fr.need(hdr); err != nil {
			return 0, nil, err
		}
		b = (*fr.buf)[fr.r:fr.w]
		switch n {
		case 126:
			n = int64(binary.BigEndian.Uint16(b[2:]))
		case 127:
			u := binary.BigEndian.Uint64(b[2:])
			if u>>63 != 0 {
				return 0, nil, protocolError("payload length with its most significant bit set")
			}
			n = int64(u)
		}
		var key [4]byte
		copy(key[:], b[hdr-4:hdr])
		fr.r += hdr

		if op >= opClose {
			p := make([]byte, n)
			if err := fr.readFull(p); err != nil {
				return 0, nil, err
			}
			unmask(key, p)
			fr.release()
			if op == opClose {
				if err := checkClose(p); err != nil {
					return 0, nil, err
				}
			}
			return op, p, nil
		}

		// n may be close to 2^63: compared against what is left of the
		// limit so that the sum cannot overflow.
		if fr.limit > 0 && n > fr.limit-int64(len(fr.msg)) {
			return 0, nil, &wsCloseError{Code: closeMessageTooBig, Reason: "message too big"}
		}
		if !fr.inMsg {
			fr.inMsg, fr.msgOp, fr.msg = true, op, nil
		}
		start := len(fr.msg)
		if err := fr.readMsg(n); err != nil {
			return 0, nil, err
		}
		unmask(key, fr.msg[start:])
		if !final {
			continue
		}
		op, msg := fr.msgOp, fr.msg
		if msg == nil {
			msg = []byte{}
		}
		fr.inMsg, fr.msgOp, fr.msg = false, 0, nil
		fr.release()
		if op == opText && !utf8.Valid(msg) {
			return 0, nil, &wsCloseError{Code: closeInvalidPayload, Reason: "text message not UTF-8"}
		}
		return op, msg, nil
	}
}

// await waits until the source has something to read, unless bytes are
// buffered or it was already waited for.
func (fr *wsFrameReader) await() error {
	if fr.buf != nil || fr.ready {
		return nil
	}
	if err := fr.src.wait(); err != nil {
		return err
	}
	fr.ready = true
	return nil
}

// need makes at least k (at most wsReadBufSize) unread bytes buffered,
// taking a buffer from the pool once the source has something to read.
func (fr *wsFrameReader) need(k int) error {
	if fr.buf == nil {
		if err := fr.await(); err != nil {
			return err
		}
		fr.ready = false
		fr.buf = wsReadBufs.Get().(*[]byte)
		fr.r, fr.w = 0, 0
	}
	buf := *fr.buf
	if fr.w-fr.r >= k {
		return nil
	}
	if len(buf)-fr.r < k {
		fr.w = copy(buf, buf[fr.r:fr.w])
		fr.r = 0
	}
	for fr.w-fr.r < k {
		m, err := fr.src.read(buf[fr.w:])
		fr.w += m
		if fr.w-fr.r >= k {
			return nil
		}
		if err != nil {
			return fr.eof(err)
		}
	}
	return nil
}

// eof turns the end of the stream inside a frame or message into
// io.ErrUnexpectedEOF.
func (fr *wsFrameReader) eof(err error) error {
	if errors.Is(err, io.EOF) && (fr.w > fr.r || fr.inMsg) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readFull fills p from the buffer, then from the source.
func (fr *wsFrameReader) readFull(p []byte) error {
	c := copy(p, (*fr.buf)[fr.r:fr.w])
	fr.r += c
	for c < len(p) {
		m, err := fr.src.read(p[c:])
		c += m
		if c < len(p) && err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// readMsg appends n payload bytes to the message, growing it at most
// wsMsgChunk (or its own size) ahead of what arrived.
func (fr *wsFrameReader) readMsg(n int64) error {
	for n > 0 {
		if fr.r < fr.w {
			c := int(min(n, int64(fr.w-fr.r)))
			fr.msg = append(fr.msg, (*fr.buf)[fr.r:fr.r+c]...)
			fr.r += c
			n -= int64(c)
			continue
		}
		if cap(fr.msg) == len(fr.msg) {
			fr.msg = slices.Grow(fr.msg, int(min(n, int64(max(len(fr.msg), wsMsgChunk)))))
		}
		room := fr.msg[len(fr.msg):cap(fr.msg)]
		room = room[:min(int64(len(room)), n)]
		m, err := fr.src.read(room)
		fr.msg = fr.msg[:len(fr.msg)+m]
		n -= int64(m)
		if n > 0 && err != nil {
			if errors.Is(err, io.EOF) {
				return io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// buffered reports whether a read buffer is held (bytes of the next
// frame have arrived); when not, the next call waits for the connection.
func (fr *wsFrameReader) buffered() bool { return fr.buf != nil }

// release gives the read buffer back to the pool when nothing in it is
// unread.
func (fr *wsFrameReader) release() {
	if fr.buf != nil && fr.r == fr.w {
		wsReadBufs.Put(fr.buf)
		fr.buf = nil
	}
}

// unmask applies the client's mask key to p (RFC 6455 §5.3).
func unmask(key [4]byte, p []byte) {
	i := 0
	if len(p) >= 8 {
		k := binary.LittleEndian.Uint32(key[:])
		k8 := uint64(k) | uint64(k)<<32
		for ; i+8 <= len(p); i += 8 {
			binary.LittleEndian.PutUint64(p[i:], binary.LittleEndian.Uint64(p[i:])^k8)
		}
	}
	for ; i < len(p); i++ {
		p[i] ^= key[i&3]
	}
}

// checkClose checks a close frame's payload (RFC 6455 §5.5.1, §7.4): empty,
// or a code a peer may send and a UTF-8 reason.
func checkClose(p []byte) error {
	switch {
	case len(p) == 0:
		return nil
	case len(p) == 1:
		return protocolError("close frame payload of one byte")
	}
	if code := int(binary.BigEndian.Uint16(p)); !validCloseCode(code) {
		return protocolError("bad close code %d", code)
	}
	if !utf8.Valid(p[2:]) {
		return &wsCloseError{Code: closeInvalidPayload, Reason: "close reason not UTF-8"}
	}
	return nil
}

// closeCode returns the code of a checked close payload (1005 when it
// has none).
func closeCode(p []byte) int {
	if len(p) < 2 {
		return closeNoStatusPresent
	}
	return int(binary.BigEndian.Uint16(p))
}

// validCloseCode reports whether a peer may send code in a close frame
// (RFC 6455 §7.4.1 and the IANA registry as gorilla/websocket accepts
// them: 1000-1003, 1007-1013, and 3000-4999 for libraries and
// applications).
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1013:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

// readLoop reads the client's messages until the connection ends (the
// library's websocket reader, with wsFrameReader): a text or binary
// message goes to the library (OnData, which parses it into an Engine.IO
// packet), a ping is answered with a pong, a close frame is echoed; a
// frame the client should not have sent is answered with a close frame
// of its code. The connection's "close" event ends it.
//
// Handing a message on runs deep into the library and grows the
// goroutine's stack (to 8 KiB), which the runtime gives back only one
// halving per GC, and only when little of it is used. So the waiting
// happens at the top of a goroutine of its own (readLoop, a few frames
// deep), and once nothing is left buffered after a message, a new one
// takes over and the one that handled it ends: an idle socket's reader
// parks on the smallest stack.
func (t *Transport) readLoop() {
	t.readDeadline()
	if err := t.fr.await(); err != nil {
		t.readEnd(err)
		return
	}
	t.readMessages()
}

// readMessages handles messages while their bytes are buffered (see
// readLoop).
func (t *Transport) readMessages() {
	for {
		op, p, err := t.fr.next()
		if err != nil {
			t.readEnd(err)
			return
		}
		switch op {
		case opText:
			t.OnData(types.NewStringBuffer(p))
			// An Engine.IO text packet starts with its type: '3' a pong,
			// '4' a message.
			if len(p) > 0 && p[0] == '3' {
				if h := t.hb.Load(); h != nil {
					h.pong()
				}
			}
			if len(p) > 0 && p[0] == '4' {
				t.messageIn()
			}
		case opBinary:
			// A binary frame is always a message (Engine.IO v4).
			t.OnData(types.NewBytesBuffer(p))
			t.messageIn()
		case opPing:
			t.queuePong(p)
		case opClose:
			code := closeCode(p)
			if code == closeNoStatusPresent {
				code = closeNormal
			}
			t.sendClose(code, "")
			t.connClosed()
			return
		}
		if !t.fr.buffered() {
			go t.readLoop()
			return
		}
		t.readDeadline()
	}
}

// readDeadline gives the client the library's idle timeout for its next
// message, as the library's reader does before each one.
func (t *Transport) readDeadline() {
	if t.idle > 0 {
		_ = t.conn.SetReadDeadline(time.Now().Add(t.idle))
	}
}

// readEnd ends reading after err (readFailed) and closes.
func (t *Transport) readEnd(err error) {
	t.readFailed(err)
	t.connClosed()
}

// readFailed ends reading after err: a refused frame is answered with
// its close code; the end of the stream or a closed connection only
// closes; any other error (an idle timeout) is reported as the library's
// reader reports it.
func (t *Transport) readFailed(err error) {
	var ce *wsCloseError
	switch {
	case errors.As(err, &ce):
		t.ctor.log.Debug().Err(err).Str("transport", t.Sid()).Msg("closing a websocket that sent a bad frame")
		t.sendClose(ce.Code, ce.Reason)
		t.connError(err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
	default:
		t.connError(err)
	}
}

// sendClose writes a close frame with code and reason through the queue
// and waits, at most CloseWait, for it to be written (the connection is
// closed next).
func (t *Transport) sendClose(code int, reason string) {
	written := make(chan struct{})
	f := controlFrame(ws.CloseMessage, ws.FormatCloseMessage(code, reason))
	if t.push(wsItem{data: f, size: len(f), written: written}) {
		select {
		case <-written:
		case <-t.done:
		case <-time.After(CloseWait):
		}
	}
}

// connSource is the wsSource of a connection: wait parks on the
// runtime's poller until the socket is readable (no buffer, a shallow
// stack), read is the connection's own (and its deadline). A connection
// without a descriptor of its own (TLS: its records are decrypted by the
// tls.Conn) is waited for by reading one byte, kept for the next read.
type connSource struct {
	conn    net.Conn
	raw     syscall.RawConn // nil: wait reads one byte
	first   [1]byte
	pending bool // first holds a byte read by wait
}

func (s *connSource) wait() error {
	if s.raw == nil {
		if s.pending {
			return nil
		}
		n, err := s.conn.Read(s.first[:])
		if n == 1 {
			s.pending = true
			return nil
		}
		if err == nil {
			err = io.ErrNoProgress
		}
		return err
	}
	return s.raw.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			// A byte peeked, the end of the stream or an error: the
			// next read will tell.
			_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if err == unix.EINTR {
				continue
			}
			return err != unix.EAGAIN
		}
	})
}

func (s *connSource) read(p []byte) (int, error) {
	if s.pending && len(p) > 0 {
		p[0], s.pending = s.first[0], false
		return 1, nil
	}
	return s.conn.Read(p)
}
