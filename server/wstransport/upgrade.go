package wstransport

import (
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	ws "github.com/gorilla/websocket"
	engine "github.com/zishang520/socket.io/servers/engine/v3"
	"github.com/zishang520/socket.io/servers/engine/v3/transports"
	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"
)

// The websocket upgrade is the relay's own (docs/ARCHITECTURE.md, "Idle
// sockets"). The Socket.IO library upgrades with gorilla/websocket, whose
// connection keeps a 1 KiB write buffer and a 1 KiB read buffer for as
// long as the socket lives, and it keeps the upgrade request (with
// net/http's parsed headers and per-connection context) in the request
// context it holds. The relay reads and writes the connection itself
// (read.go, transport.go), so none of that is used after the
// handshake: this handler answers the handshake (RFC 6455 §4.2) on the
// hijacked connection and hands the library a request context built on a
// stripped copy of the request and no websocket connection of gorilla's.
// What the client sees is what the library's upgrade sent: the same
// checks and answers, the same 101 response headers, the same close
// frame when the Engine.IO handshake is refused.

// wsAcceptGUID is the key suffix of RFC 6455 §1.3.
const wsAcceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsAcceptKey returns the Sec-WebSocket-Accept value answering the
// client's Sec-WebSocket-Key (RFC 6455 §4.2.2): base64 of the SHA-1 of the
// key followed by wsAcceptGUID.
func wsAcceptKey(key string) string {
	h := sha1.New()
	_, _ = io.WriteString(h, key)
	_, _ = io.WriteString(h, wsAcceptGUID)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// isTokenChar reports whether c is a tchar of RFC 7230 §3.2.6.
func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// skipWS returns s without its leading spaces and tabs.
func skipWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	return s
}

// headerHasToken reports whether a value of header name is a
// comma-separated list of tokens (RFC 7230 §7) holding value, compared
// without regard to ASCII case. A value that stops being such a list
// (anything but a token, optional white space and a comma) is read no
// further; an empty element ends it too. gorilla/websocket reads the
// headers the same way, which is what clients met before
// (TestCheckUpgradeMatchesGorilla).
func headerHasToken(h http.Header, name, value string) bool {
	for _, s := range h[name] {
		for {
			s = skipWS(s)
			i := 0
			for i < len(s) && isTokenChar(s[i]) {
				i++
			}
			tok := s[:i]
			if tok == "" {
				break
			}
			s = skipWS(s[i:])
			if s != "" && s[0] != ',' {
				break
			}
			if asciiEqualFold(tok, value) {
				return true
			}
			if s == "" {
				break
			}
			s = s[1:]
		}
	}
	return false
}

// asciiEqualFold reports whether a and b are equal ignoring ASCII case
// (header tokens are ASCII; no Unicode folding).
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// isWebSocketUpgrade reports whether r asks for a websocket: its
// Connection header holds the token "upgrade" and its Upgrade header the
// token "websocket". Other requests go on to the library.
func isWebSocketUpgrade(r *http.Request) bool {
	return headerHasToken(r.Header, "Connection", "upgrade") && headerHasToken(r.Header, "Upgrade", "websocket")
}

// wsBadHandshake starts the reasons of a request that is no websocket
// handshake at all.
const wsBadHandshake = "websocket: the client is not using the websocket protocol: "

// checkUpgrade checks a websocket handshake request (RFC 6455 §4.2.1)
// with the answer's headers so far (respHeader) and the origin check
// (originOK). It returns the client's Sec-WebSocket-Key when the request
// may be upgraded; otherwise the HTTP status the refusal stands for and
// its reason, the status and reason gorilla/websocket's upgrader gives for
// the same request, checked in the same order. (The library answers every
// refused upgrade with 400 and a fixed JSON body, so the status and the
// reason are for the relay's log.)
func checkUpgrade(r *http.Request, respHeader http.Header, originOK func(*http.Request) bool) (key string, status int, reason string) {
	switch {
	case !headerHasToken(r.Header, "Connection", "upgrade"):
		return "", http.StatusBadRequest, wsBadHandshake + "'upgrade' token not found in 'Connection' header"
	case !headerHasToken(r.Header, "Upgrade", "websocket"):
		return "", http.StatusBadRequest, wsBadHandshake + "'websocket' token not found in 'Upgrade' header"
	case r.Method != http.MethodGet:
		return "", http.StatusMethodNotAllowed, wsBadHandshake + "request method is not GET"
	case !headerHasToken(r.Header, "Sec-Websocket-Version", "13"):
		return "", http.StatusBadRequest, "websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header"
	}
	if _, ok := respHeader["Sec-Websocket-Extensions"]; ok {
		return "", http.StatusInternalServerError, "websocket: application specific 'Sec-WebSocket-Extensions' headers are unsupported"
	}
	if !originOK(r) {
		return "", http.StatusForbidden, "websocket: request origin not allowed by Upgrader.CheckOrigin"
	}
	key = r.Header.Get("Sec-Websocket-Key")
	if key == "" {
		return "", http.StatusBadRequest, "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header must be Base64 encoded value of 16-byte in length"
	}
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return "", http.StatusBadRequest, "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header must be Base64 encoded value of 16-byte in length"
	}
	return key, 0, ""
}

// switchingProtocols returns the 101 answer accepting a websocket whose
// client sent key, with the headers of respHeader (the library's CORS
// headers): a Sec-WebSocket-Protocol among them is named once, as the
// chosen subprotocol; bytes below 0x20 in a value become spaces, so that
// no value can split the answer. No extension is offered: the relay never
// enables per-message compression, so the library's upgrade never
// negotiated one.
func switchingProtocols(key string, respHeader http.Header) []byte {
	p := make([]byte, 0, 256)
	p = append(p, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: "...)
	p = append(p, wsAcceptKey(key)...)
	p = append(p, "\r\n"...)
	if proto := respHeader.Get("Sec-Websocket-Protocol"); proto != "" {
		p = append(p, "Sec-WebSocket-Protocol: "...)
		p = append(p, proto...)
		p = append(p, "\r\n"...)
	}
	for k, vs := range respHeader {
		if k == "Sec-Websocket-Protocol" {
			continue
		}
		for _, v := range vs {
			p = append(p, k...)
			p = append(p, ": "...)
			for i := range len(v) {
				b := v[i]
				if b < ' ' {
					b = ' '
				}
				p = append(p, b)
			}
			p = append(p, "\r\n"...)
		}
	}
	return append(p, "\r\n"...)
}

// hijackedWriter is the response writer of the request context the
// library keeps for a socket: the connection is hijacked by then, so it
// answers as net/http's writer of a hijacked connection does (Write:
// http.ErrHijacked; Header: an empty map) and holds nothing.
type hijackedWriter struct{}

// Header implements http.ResponseWriter.
func (hijackedWriter) Header() http.Header { return http.Header{} }

// Write implements http.ResponseWriter.
func (hijackedWriter) Write([]byte) (int, error) { return 0, http.ErrHijacked }

// WriteHeader implements http.ResponseWriter.
func (hijackedWriter) WriteHeader(int) {}

// strippedRequest returns what the library reads of an upgrade request
// once the socket is open (the Socket.IO handshake it builds: the query,
// the request URI, the Origin header, whether TLS carried it, the remote
// address) in a request of its own, without a context (its Context is
// then context.Background()): the original holds every header and
// net/http's per-connection context for as long as the library keeps
// it. The relay reads nothing of the request after the upgrade but the
// auth object of the Socket.IO CONNECT packet.
func strippedRequest(r *http.Request) *http.Request {
	s := &http.Request{
		Method:     r.Method,
		URL:        &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery},
		Proto:      r.Proto,
		ProtoMajor: r.ProtoMajor,
		ProtoMinor: r.ProtoMinor,
		Header:     http.Header{},
		Host:       r.Host,
		RemoteAddr: r.RemoteAddr,
		RequestURI: r.RequestURI,
		TLS:        r.TLS,
	}
	if o, ok := r.Header["Origin"]; ok {
		s.Header["Origin"] = o
	}
	return s
}

// Upgrades serves websocket upgrade requests of srv's path (what the
// library's HandleUpgrade does, with the relay's handshake; see above)
// and hands every other request to next.
func (c *Ctor) Upgrades(srv *socket.Server, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isWebSocketUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		c.upgrade(srv.Engine(), w, r)
	})
}

// upgrade runs the library's middlewares (CORS headers) and request
// checks, answers the websocket handshake and hands the connection to the
// Engine.IO handshake. A refused request is answered as the library
// answers it: 400 with the Engine.IO error's message before the
// handshake, 400 {"code":3,"message":"Bad request"} for a malformed
// websocket handshake (and, where the library upgraded, for a request
// with the sid of an open socket), a close frame (1000, the message)
// after it.
func (c *Ctor) upgrade(eng engine.BaseServer, w http.ResponseWriter, r *http.Request) {
	ctx := types.NewHttpContext(w, r)
	// The library's middlewares run their callbacks before returning
	// (CORS is the only one); the hijack must happen before this handler
	// returns.
	eng.Proto().ApplyMiddlewares(ctx, func(err error) {
		if ctx.IsDone() || ctx.Context().Err() != nil {
			return
		}
		if err != nil {
			abortBeforeUpgrade(eng, ctx, engine.BAD_REQUEST, map[string]any{"name": "MIDDLEWARE_FAILURE"})
			return
		}
		if cm, ectx := eng.Proto().Verify(ctx, true); cm != nil {
			abortBeforeUpgrade(eng, ctx, cm, ectx)
			return
		}
		if ctx.Query().Peek("sid") != "" {
			// An Engine.IO upgrade of an open socket's transport. Every
			// socket of the relay starts on the websocket (there is no
			// polling transport), so no client has one to upgrade; the
			// library's upgrade would give the socket, authenticated as
			// its owner, to whoever sent its sid, on a transport without
			// the relay's heartbeat or bound on events in flight.
			c.refuseUpgrade(eng, ctx, "websocket: upgrade of an open socket's transport (sid): every socket starts on the websocket")
			return
		}
		c.handshakeWS(eng, ctx, w, r)
	})
}

// abortBeforeUpgrade refuses a request before the websocket handshake as
// the library does: the "connection_error" event, then 400 with the
// message (errorContext's "message" when it has one).
func abortBeforeUpgrade(eng engine.BaseServer, ctx *types.HttpContext, cm *types.CodeMessage, errorContext map[string]any) {
	eng.Emit("connection_error", &types.ErrorMessage{CodeMessage: cm, Req: ctx, Context: errorContext})
	_ = ctx.SetStatusCode(http.StatusBadRequest)
	_, _ = io.WriteString(ctx, errorMessage(cm, errorContext))
}

// errorMessage is cm's message, or errorContext's "message" when it has
// a string one.
func errorMessage(cm *types.CodeMessage, errorContext map[string]any) string {
	if m, ok := errorContext["message"]; ok {
		s, _ := m.(string)
		return s
	}
	return cm.Message
}

// refuseUpgrade answers a malformed websocket handshake as the library
// does: the "connection_error" event, then 400 with a JSON body
// {"code":3,"message":"Bad request"}. reason (why, checkUpgrade's) goes
// to the relay's log.
func (c *Ctor) refuseUpgrade(eng engine.BaseServer, ctx *types.HttpContext, reason string) {
	c.log.Debug().Str("reason", reason).Msg("refusing a websocket upgrade")
	errorContext := map[string]any{"name": "UPGRADE_FAILURE"}
	eng.Emit("connection_error", &types.ErrorMessage{CodeMessage: engine.BAD_REQUEST, Req: ctx, Context: errorContext})
	ctx.ResponseHeaders().Set("Content-Type", "application/json")
	_ = ctx.SetStatusCode(http.StatusBadRequest)
	b, _ := json.Marshal(types.CodeMessage{Code: engine.BAD_REQUEST.Code, Message: engine.BAD_REQUEST.Message})
	_, _ = ctx.Write(b)
}

// originChecker is the library's origin check for its websocket
// upgrades: with a CORS origin option an Origin header must be allowed
// by it (none is fine); without one, any origin.
func originChecker(eng engine.BaseServer) func(*http.Request) bool {
	cors := eng.Opts().Cors()
	if cors == nil || cors.Origin == nil {
		// gorilla's default check is the same-origin one; the relay always
		// sets a CORS origin option (package server, newSocketServer).
		return sameOrigin
	}
	return func(r *http.Request) bool {
		origin := r.Header.Get("Origin")
		return origin == "" || cors.IsOriginAllowed(origin, cors.Origin)
	}
}

// sameOrigin accepts a request without an Origin header or one whose
// Origin's host is the request's Host (compared ignoring ASCII case).
func sameOrigin(r *http.Request) bool {
	origin := r.Header["Origin"]
	if len(origin) == 0 {
		return true
	}
	u, err := url.Parse(origin[0])
	if err != nil {
		return false
	}
	return asciiEqualFold(u.Host, r.Host)
}

// handshakeWS answers the websocket handshake of a checked request ctx
// (w, r) and runs the Engine.IO handshake on the connection.
func (c *Ctor) handshakeWS(eng engine.BaseServer, ctx *types.HttpContext, w http.ResponseWriter, r *http.Request) {
	respHeader := http.Header(ctx.ResponseHeaders().All())
	key, _, reason := checkUpgrade(r, respHeader, originChecker(eng))
	if reason != "" {
		c.refuseUpgrade(eng, ctx, reason)
		return
	}
	nc, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): refused as any failed upgrade.
		c.refuseUpgrade(eng, ctx, "websocket: "+err.Error())
		return
	}
	if brw.Reader.Buffered() > 0 {
		// A client may not send frames before it has the answer. The
		// connection is hijacked: it is closed unanswered.
		_ = nc.Close()
		c.log.Debug().Msg("refusing a websocket upgrade: client sent data before handshake is complete")
		eng.Emit("connection_error", &types.ErrorMessage{CodeMessage: engine.BAD_REQUEST, Req: ctx, Context: map[string]any{"name": "UPGRADE_FAILURE"}})
		return
	}
	// net/http's read and write deadlines are for requests, not for the
	// websocket (the transport keeps its own idle timeout).
	_ = nc.SetDeadline(time.Time{})
	if _, err := nc.Write(switchingProtocols(key, respHeader)); err != nil {
		_ = nc.Close()
		return
	}
	c.openEngine(eng, strippedRequest(r), nc)
}

// openEngine runs the Engine.IO side of an upgraded connection nc (what
// the library does once its upgrade succeeded): a new client's handshake
// (a request with a sid was refused before: upgrade), then the transport
// starts reading.
func (c *Ctor) openEngine(eng engine.BaseServer, r *http.Request, nc net.Conn) {
	ctx := types.NewHttpContext(hijackedWriter{}, r)
	name := ctx.Query().Peek("transport")
	if ctor, ok := eng.TransportsByName()[name]; ok && !ctor.HandlesUpgrades() {
		_ = nc.Close()
		return
	}
	// The connection reaches the transport the library builds
	// (Ctor.New) through the context.
	c.pending.Store(ctx, nc)
	defer c.pending.Delete(ctx)
	// A read permission makes the library leave the start of the
	// heartbeat to a callback run once the socket is set up, which
	// KeepHeartbeats replaces with the relay's. The relay's transport
	// starts reading itself (below), so the channel is never read.
	ctx.SetTransportReadPermission(make(chan bool))
	defer ctx.SetTransportReadPermission(nil)

	cm, tr := eng.Proto().Handshake(name, ctx)
	if tr == nil {
		writeCloseFrame(nc, ws.CloseNormalClosure, errorMessage(cm, nil))
		_ = nc.Close()
		return
	}
	startReading(tr)
}

// startReading starts the relay transport's reader unless it is closed.
func startReading(tr transports.Transport) {
	if t, ok := tr.(*Transport); ok {
		t.startReading()
	}
}

// writeCloseFrame writes a close frame with code and reason to nc, at
// once (nothing else is written to it yet).
func writeCloseFrame(nc net.Conn, code int, reason string) {
	_, _ = nc.Write(controlFrame(ws.CloseMessage, ws.FormatCloseMessage(code, reason)))
}
