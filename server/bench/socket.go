package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	ws "github.com/gorilla/websocket"
)

// socketPath is the relay's Socket.IO path (docs/ARCHITECTURE.md; the
// reference relay's too).
const socketPath = "/v1/updates/"

// sock is a minimal Socket.IO v4 client over Engine.IO v4 websocket
// frames, just what the load generator needs: the handshake with an auth
// object, answering the server's pings, events with and without acks.
// It decodes nothing it does not need, so that thousands of them cost the
// generator little. Frames are Engine.IO type byte + Socket.IO packet
// text: "2"/"3" ping/pong, "40{auth}" connect, "44{…}" connect error,
// "42[…]" event, "42<id>[…]" event with ack, "43<id>[…]" ack.
type sock struct {
	c   *ws.Conn
	wmu sync.Mutex

	amu  sync.Mutex
	next int
	acks map[int]chan []byte

	// onEvent sees every event frame's Socket.IO text ("2[...]" with an
	// optional ack id after the 2), on the reading goroutine; the bytes
	// are valid only during the call (the read buffer is reused).
	onEvent func(text []byte)
	done    chan struct{}
	err     error
}

// dialer is the websocket dialer of every socket (small buffers: the
// generator holds thousands of idle sockets).
var dialer = &ws.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 2048, WriteBufferSize: 2048}

// verifyTimeout bounds the ping round trip that checks a new connection.
const verifyTimeout = 3 * time.Second

// dialSocket connects to base (http[s]://host[:port]) with the handshake
// auth object and returns once the server accepted the Socket.IO connect
// and answered a `ping` with an ack. onEvent (may be nil) is set before
// the first frame is read. A refused handshake is an error carrying the
// server's message. A connection that does not answer the ping (the
// Socket.IO server library now and then loses a connection's first
// events) is closed and dialled again, up to three times.
func dialSocket(ctx context.Context, base string, auth map[string]any, onEvent func([]byte)) (*sock, error) {
	var last error
	for range 3 {
		s, err := dialOnce(ctx, base, auth, onEvent)
		if err != nil {
			return nil, err
		}
		vctx, cancel := context.WithTimeout(ctx, verifyTimeout)
		_, err = s.call(vctx, "ping")
		cancel()
		if err == nil {
			return s, nil
		}
		s.close()
		last = fmt.Errorf("bench: socket connected but did not answer ping: %w", err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// dialOnce is one connection attempt of dialSocket.
func dialOnce(ctx context.Context, base string, auth map[string]any, onEvent func([]byte)) (*sock, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("bench: relay url: %w", err)
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	default:
		u.Scheme = "ws"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + socketPath
	u.RawQuery = "EIO=4&transport=websocket"
	c, resp, err := dialer.DialContext(ctx, u.String(), http.Header{})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("bench: dial socket: %w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, fmt.Errorf("bench: dial socket: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
	} else {
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	}
	s := &sock{c: c, acks: map[int]chan []byte{}, onEvent: onEvent, done: make(chan struct{})}
	fail := func(err error) (*sock, error) {
		_ = c.Close()
		return nil, err
	}
	// Engine.IO open packet.
	_, open, err := c.ReadMessage()
	if err != nil || len(open) == 0 || open[0] != '0' {
		return fail(fmt.Errorf("bench: socket open: %q %v", open, err))
	}
	a, _ := json.Marshal(auth)
	if err := c.WriteMessage(ws.TextMessage, append([]byte("40"), a...)); err != nil {
		return fail(fmt.Errorf("bench: socket connect: %w", err))
	}
	for {
		_, m, err := c.ReadMessage()
		if err != nil {
			return fail(fmt.Errorf("bench: socket connect: %w", err))
		}
		switch {
		case bytes.Equal(m, []byte("2")):
			_ = c.WriteMessage(ws.TextMessage, []byte("3"))
			continue
		case bytes.HasPrefix(m, []byte("40")):
		case bytes.HasPrefix(m, []byte("44")):
			var e struct{ Message string }
			_ = json.Unmarshal(m[2:], &e)
			return fail(fmt.Errorf("bench: socket refused: %s", e.Message))
		default:
			continue // an event before the connect reply cannot happen; skip it
		}
		break
	}
	_ = c.SetReadDeadline(time.Time{})
	go s.readLoop()
	return s, nil
}

func (s *sock) readLoop() {
	defer close(s.done)
	var buf bytes.Buffer
	for {
		m, err := s.readFrame(&buf)
		if err != nil {
			s.err = err
			s.amu.Lock()
			for id, ch := range s.acks {
				close(ch)
				delete(s.acks, id)
			}
			s.amu.Unlock()
			return
		}
		if len(m) == 0 {
			continue
		}
		switch m[0] {
		case '2': // ping
			_ = s.write([]byte("3"))
		case '4':
			if len(m) < 2 {
				continue
			}
			switch m[1] {
			case '2':
				if s.onEvent != nil {
					s.onEvent(m[1:])
				}
			case '3':
				id, rest := ackID(m[2:])
				s.amu.Lock()
				ch := s.acks[id]
				delete(s.acks, id)
				s.amu.Unlock()
				if ch != nil {
					ch <- bytes.Clone(rest)
				}
			}
		}
	}
}

// readFrame reads the next message into buf (reused: thousands of sockets
// each reading thousands of frames would otherwise be the generator's
// main cost) and returns its bytes.
func (s *sock) readFrame(buf *bytes.Buffer) ([]byte, error) {
	_, r, err := s.c.NextReader()
	if err != nil {
		return nil, err
	}
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ackID splits "<digits>rest" into the number and rest (-1 without digits).
func ackID(b []byte) (int, []byte) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1, b
	}
	n, _ := strconv.Atoi(string(b[:i]))
	return n, b[i:]
}

func (s *sock) write(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.c.WriteMessage(ws.TextMessage, b)
}

// emit sends event with args, without an ack.
func (s *sock) emit(event string, args ...any) error {
	p, err := json.Marshal(append([]any{event}, args...))
	if err != nil {
		return err
	}
	return s.write(append([]byte("42"), p...))
}

// call sends event with args and waits for the ack's JSON array.
func (s *sock) call(ctx context.Context, event string, args ...any) ([]byte, error) {
	p, err := json.Marshal(append([]any{event}, args...))
	if err != nil {
		return nil, err
	}
	ch := make(chan []byte, 1)
	s.amu.Lock()
	s.next++
	id := s.next
	s.acks[id] = ch
	s.amu.Unlock()
	frame := append([]byte("42"+strconv.Itoa(id)), p...)
	if err := s.write(frame); err != nil {
		return nil, err
	}
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, errors.New("bench: socket closed before the ack")
		}
		return r, nil
	case <-ctx.Done():
		s.amu.Lock()
		delete(s.acks, id)
		s.amu.Unlock()
		return nil, ctx.Err()
	}
}

// ack answers the server's event id with args.
func (s *sock) ack(id int, args ...any) error {
	p, err := json.Marshal(args)
	if err != nil {
		return err
	}
	return s.write(append([]byte("43"+strconv.Itoa(id)), p...))
}

func (s *sock) close() {
	_ = s.c.Close()
	<-s.done
}
