package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	ws "github.com/gorilla/websocket"
	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/internal/waitfor"
)

// rawHandshake sends a handshake request for path (with extra header
// lines, and after it the bytes of early) on a new connection to the
// relay at base, and returns the answer and the connection.
func rawHandshake(t *testing.T, base, path string, extra []string, early []byte) (*http.Response, *bufio.Reader, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: relay.example\r\n"
	for _, l := range extra {
		req += l + "\r\n"
	}
	if _, err := c.Write(append([]byte(req+"\r\n"), early...)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, br, c
	}
	return resp, br, c
}

// wsHeaders returns the header lines of a valid websocket handshake.
func wsHeaders() []string {
	return []string{"Connection: Upgrade", "Upgrade: websocket", "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=="}
}

// What a client sees of the relay's upgrade: the answers the library's
// upgrade gave, request by request.
func TestUpgradeAnswers(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	const path = "/v1/updates/?EIO=4&transport=websocket"

	t.Run("accepted", func(t *testing.T) {
		resp, br, _ := rawHandshake(t, base, path, append([]string{"Origin: https://app.example"}, wsHeaders()...), nil)
		if resp == nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("answer %+v", resp)
		}
		for k, v := range map[string]string{
			"Upgrade":                          "websocket",
			"Connection":                       "Upgrade",
			"Sec-Websocket-Accept":             "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
			"Access-Control-Allow-Origin":      "https://app.example",
			"Access-Control-Allow-Credentials": "true",
			"Sec-Websocket-Extensions":         "",
		} {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
		// The Engine.IO open packet follows, in one unmasked text frame.
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatal(err)
		}
		if hdr[0] != 0x81 || hdr[1]&0x80 != 0 || hdr[1]&0x7f < 2 {
			t.Fatalf("frame header % x", hdr)
		}
		p := make([]byte, hdr[1]&0x7f)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(p), `0{`) || !strings.Contains(string(p), `"sid":"`) {
			t.Fatalf("open packet %q", p)
		}
	})

	t.Run("bad key", func(t *testing.T) {
		h := wsHeaders()[:3]
		resp, _, _ := rawHandshake(t, base, path, append(h, "Sec-WebSocket-Key: short"), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer %+v", resp)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != `{"code":3,"message":"Bad request"}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("body %q, type %q", b, resp.Header.Get("Content-Type"))
		}
	})

	t.Run("unknown transport", func(t *testing.T) {
		resp, _, _ := rawHandshake(t, base, "/v1/updates/?EIO=4&transport=polling", wsHeaders(), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer %+v", resp)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "Transport unknown" {
			t.Fatalf("body %q", b)
		}
	})

	t.Run("unknown sid", func(t *testing.T) {
		resp, _, _ := rawHandshake(t, base, path+"&sid=AAAAAAAAAAAAAAAAAAAA", wsHeaders(), nil)
		if resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer %+v", resp)
		}
		if b, _ := io.ReadAll(resp.Body); string(b) != "Session ID unknown" {
			t.Fatalf("body %q", b)
		}
	})

	t.Run("Engine.IO 3", func(t *testing.T) {
		// Refused after the websocket handshake: a close frame (1000 and
		// the message), then the end of the connection.
		resp, br, _ := rawHandshake(t, base, "/v1/updates/?EIO=3&transport=websocket", wsHeaders(), nil)
		if resp == nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("answer %+v", resp)
		}
		rest, err := io.ReadAll(br)
		if err != nil {
			t.Fatal(err)
		}
		// An unmasked, final close frame (RFC 6455 §5.5.1): 1000 and the reason.
		payload := ws.FormatCloseMessage(ws.CloseNormalClosure, "Unsupported protocol version")
		want := append([]byte{0x88, byte(len(payload))}, payload...)
		if string(rest) != string(want) {
			t.Fatalf("after the answer % x, want % x", rest, want)
		}
	})

	t.Run("early data", func(t *testing.T) {
		// Bytes sent before the answer: the connection is closed unanswered.
		resp, br, _ := rawHandshake(t, base, path, wsHeaders(), clientFrame(0x81, []byte("2"), false))
		if resp != nil {
			t.Fatalf("answer %+v", resp)
		}
		if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
			var ne net.Error
			if !errors.As(err, &ne) || ne.Timeout() {
				t.Fatalf("read after refusal: %v", err)
			}
		}
	})
}

// A websocket with the sid of an open socket is refused before the
// websocket handshake. The relay's sockets all start on the websocket
// (there is no polling transport), so no client has a transport to
// upgrade; the library's upgrade would hand the socket, authenticated as
// its owner, to whoever held the sid, and the new transport would carry
// neither the relay's heartbeat nor its bound on events in flight. The
// socket goes on as before.
func TestUpgradeWithSidIsRefused(t *testing.T) {
	_, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sess := newTestSession(t, base, token, "sid-upgrade")
	url := "ws" + strings.TrimPrefix(base, "http") + "/v1/updates/?EIO=4&transport=websocket"
	first, _, err := ws.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, open, err := first.ReadMessage()
	if err != nil {
		t.Fatal(err)
	}
	var hs struct {
		Sid string `json:"sid"`
	}
	if len(open) < 2 || json.Unmarshal(open[1:], &hs) != nil || hs.Sid == "" {
		t.Fatalf("open packet %q", open)
	}
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sess})
	if err := first.WriteMessage(ws.TextMessage, append([]byte("40"), auth...)); err != nil {
		t.Fatal(err)
	}
	if _, p, err := first.ReadMessage(); err != nil || !strings.HasPrefix(string(p), "40{") {
		t.Fatalf("connect answer %q, %v", p, err)
	}

	path := "/v1/updates/?EIO=4&transport=websocket&sid=" + hs.Sid
	for _, tc := range []struct {
		name   string
		extra  []string
		status int
		body   string
	}{
		{"websocket", wsHeaders(), http.StatusBadRequest, `{"code":3,"message":"Bad request"}`},
		{"websocket with an allowed origin", append([]string{"Origin: https://app.example"}, wsHeaders()...), http.StatusBadRequest, `{"code":3,"message":"Bad request"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _, _ := rawHandshake(t, base, path, tc.extra, nil)
			if resp == nil {
				t.Fatal("no answer")
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || string(b) != tc.body {
				t.Fatalf("answer %d %q, want %d %q", resp.StatusCode, b, tc.status, tc.body)
			}
		})
	}

	// The socket is still its owner's: an event is answered on it.
	if err := first.WriteMessage(ws.TextMessage, []byte(`421["ping",{}]`)); err != nil {
		t.Fatal(err)
	}
	for {
		_, p, err := first.ReadMessage()
		if err != nil {
			t.Fatalf("the socket ended: %v", err)
		}
		if string(p) == "2" {
			continue
		}
		if string(p) != `431[{}]` {
			t.Fatalf("ack %q", p)
		}
		break
	}
}

// A socket whose client goes away while its CONNECT is being
// authenticated never connects, so the library never reports its
// disconnection either: what the relay set up for it (the socket count,
// its context) is given back all the same. A client that sends many
// CONNECTs at once has several authenticated before the library closes it
// for the second CONNECT it sees, each such socket left unconnected.
func TestUnconnectedSocketsAreReleased(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sess := newTestSession(t, base, token, "unconnected")
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sess})
	connect := append([]byte("40"), auth...)
	for _, tc := range []struct {
		name     string
		connects int
	}{
		{"one CONNECT, then gone", 1},
		{"a burst of CONNECTs", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, br, c := rawHandshake(t, base, "/v1/updates/?EIO=4&transport=websocket", wsHeaders(), nil)
			if resp == nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("answer %+v", resp)
			}
			if _, err := br.Peek(1); err != nil { // the open packet
				t.Fatal(err)
			}
			var out []byte
			for range tc.connects {
				out = append(out, clientFrame(0x81, connect, false)...)
			}
			if _, err := c.Write(out); err != nil {
				t.Fatal(err)
			}
			_ = c.Close()
			if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}).True(func() bool {
				return srv.metrics.sockets.Load() == 0 && srv.io.Engine().ClientsCount() == 0
			}) {
				t.Fatalf("%d sockets counted, %d Engine.IO clients, want 0 and 0", srv.metrics.sockets.Load(), srv.io.Engine().ClientsCount())
			}
		})
	}
}

// Clients that close right after their CONNECT leave no socket behind:
// the library may connect a socket just after its client closed, too late
// for the client's close to reach it, and such a socket stayed in its
// namespace and rooms (and in the relay's socket count) for good.
func TestSocketsOfClosedClientsAreReleased(t *testing.T) {
	srv, base := benchRelay(t, Config{Logger: zerolog.Nop()}, nil)
	token := newTestAccount(t, base)
	sess := newTestSession(t, base, token, "closed clients")
	auth, _ := json.Marshal(map[string]any{"token": token, "clientType": "session-scoped", "sessionId": sess})
	connect := clientFrame(0x81, append([]byte("40"), auth...), false)
	req := "GET /v1/updates/?EIO=4&transport=websocket HTTP/1.1\r\nHost: relay.example\r\n" + strings.Join(wsHeaders(), "\r\n") + "\r\n\r\n"
	done := make(chan error)
	const clients = 300
	for range clients {
		go func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				done <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte(req)); err != nil {
				done <- err
				return
			}
			// The answer and the open packet, then the CONNECT and the end.
			if _, err := c.Read(make([]byte, 512)); err != nil {
				done <- err
				return
			}
			_, err = c.Write(connect)
			done <- err
		}()
	}
	for range clients {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	var got []int64
	if !(waitfor.Poll{Every: 10 * time.Millisecond, Within: 10 * time.Second}).True(func() bool {
		got = []int64{srv.metrics.sockets.Load(), int64(srv.io.Sockets().Sockets().Len()), int64(srv.io.Engine().ClientsCount())}
		return slices.Equal(got, []int64{0, 0, 0})
	}) {
		t.Fatalf("sockets counted, in the namespace, Engine.IO clients: %v, want [0 0 0]", got)
	}
}
