package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/zishang520/socket.io/servers/engine/v3/transports"
	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"

	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/wstransport"
)

// Handshake rejection texts of the reference relay.
const (
	errSockMissingToken  = "Missing authentication token"
	errSockInvalidToken  = "Invalid authentication token"
	errSockNeedSession   = "Session ID required for session-scoped clients"
	errSockNeedMachineID = "Machine ID required for machine-scoped clients"
	// errSockStoreUnavailable is this relay's own: the store could not say
	// whether the token was revoked.
	errSockStoreUnavailable = "Storage unavailable, retry"
)

// Client types of the handshake auth.
const (
	scopeUser    = "user-scoped"
	scopeSession = "session-scoped"
	scopeMachine = "machine-scoped"
)

// Rooms. Every room name starts with the account id, so an emit for one
// account can never reach another account's sockets.
func roomUserScoped(acct string) socket.Room { return socket.Room("user:" + acct + ":user-scoped") }
func roomSession(acct, sid string) socket.Room {
	return socket.Room("user:" + acct + ":session:" + sid)
}

// The live-text rooms hold the sockets of roomSession and roomUserScoped
// that announced liveText: true in their handshake (happy's web app): only
// they get the text-delta ephemeral, which the reference app does not know.
func roomSessionLive(acct, sid string) socket.Room {
	return socket.Room("user:" + acct + ":session:" + sid + ":live-text")
}
func roomUserScopedLive(acct string) socket.Room {
	return socket.Room("user:" + acct + ":user-scoped:live-text")
}
func roomMachine(acct, mid string) socket.Room {
	return socket.Room("user:" + acct + ":machine:" + mid)
}

// conn is what the server knows about one accepted socket.
type conn struct {
	sock  *socket.Socket
	acct  string
	scope string
	sid   string
	mid   string
	// liveText: the handshake's auth held liveText: true (the client
	// reads text-delta ephemerals).
	liveText bool

	// emitMu serialises emits with modifiers (Timeout) on this socket.
	emitMu sync.Mutex

	// rpcCalls counts this socket's rpc-calls waiting for an answer (at
	// most maxRPCInFlight).
	rpcCalls atomic.Int32
	// released says what setupConn took was given back (releaseConn).
	released atomic.Bool
	// events holds a token per event of this socket waiting for or in
	// its handler (bindEvents): at most maxEventsInFlight.
	events chan struct{}
	// joined is the fan-out's tick when the socket joined its rooms: it
	// gets only what was emitted after (fanout.go).
	joined int64
	// ctx ends when the socket disconnects (or the server closes): work
	// done for this socket (an rpc-call's waits) ends with it.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	methods    map[string]bool
	skewWarned bool
}

func (s *Server) newSocketServer() *socket.Server {
	opts := socket.DefaultServerOptions()
	opts.SetPath("/v1/updates")
	opts.SetServeClient(false)
	s.out = newFanout(s)
	s.ws = wstransport.NewCtor(wstransport.Options{Backlog: int(s.cfg.MaxSocketBacklog), ReadLimit: s.cfg.SocketHardLimit, Log: s.log, AfterWrite: s.afterWrite})
	opts.SetTransports(types.NewSet[transports.TransportCtor](s.ws))
	opts.SetMaxHttpBufferSize(s.cfg.SocketHardLimit)
	opts.SetPingInterval(s.cfg.PingInterval)
	opts.SetPingTimeout(s.cfg.PingTimeout)
	// The cors middleware (cors.go) refuses other origins first; this only
	// sets the headers of the Socket.IO answers themselves.
	var origin any = "*"
	if len(s.cfg.CORSOrigins) > 0 {
		origin = s.cfg.CORSOrigins
	}
	opts.SetCors(&types.Cors{Origin: origin, Credentials: true})
	opts.SetAdapter(roomAdapterBuilder{})
	s.events = s.eventHandlers()
	io := socket.NewServer(nil, opts)
	io.Use(s.handshake)
	_ = io.On("connection", func(a ...any) {
		sock, ok := a[0].(*socket.Socket)
		if !ok {
			return
		}
		s.onConnection(sock)
	})
	return io
}

func authString(auth map[string]any, key string) string {
	v, _ := auth[key].(string)
	return v
}

// handshake authenticates a connecting socket from its auth object
// {token, clientType, sessionId | machineId, liveText?} and refuses it
// with the reference relay's messages. liveText true (a boolean) asks for
// the text-delta ephemeral.
func (s *Server) handshake(sock *socket.Socket, next func(*socket.ExtendedError)) {
	hs := sock.Handshake()
	auth := hs.Auth
	// The relay reads nothing else of the handshake, and the auth object
	// only here: the library's copies of the request's headers and query
	// and the decoded auth need not live as long as the socket
	// (docs/ARCHITECTURE.md, "Idle sockets").
	hs.Headers, hs.Query, hs.Auth = nil, nil, nil
	token := authString(auth, "token")
	if token == "" {
		next(socket.NewExtendedError(errSockMissingToken, nil))
		return
	}
	scope := authString(auth, "clientType")
	sid, mid := authString(auth, "sessionId"), authString(auth, "machineId")
	if scope == scopeSession && sid == "" {
		next(socket.NewExtendedError(errSockNeedSession, nil))
		return
	}
	if scope == scopeMachine && mid == "" {
		next(socket.NewExtendedError(errSockNeedMachineID, nil))
		return
	}
	vctx, cancel := s.opCtx()
	acct, err := s.verifyToken(vctx, token)
	cancel()
	if errors.Is(err, ErrInvalidToken) {
		next(socket.NewExtendedError(errSockInvalidToken, nil))
		return
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("socket handshake: token generation unavailable")
		next(socket.NewExtendedError(errSockStoreUnavailable, nil))
		return
	}
	live, _ := auth["liveText"].(bool)
	c := &conn{sock: sock, acct: acct, scope: scopeUser, liveText: live}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	switch scope {
	case scopeSession:
		c.scope, c.sid = scopeSession, sid
	case scopeMachine:
		c.scope, c.mid = scopeMachine, mid
	}
	sock.SetData(c)
	// Rooms and handlers are set up here, before the connect reply: the
	// library sends CONNECT to the client before it fires "connection", so
	// handlers bound there could miss the client's first events.
	s.setupConn(c)
	next(nil)
	// The library connects the socket in a task it has just queued on the
	// socket, unless the client went away meanwhile: then the socket
	// never connects, and never disconnects either. Its check races the
	// client's close: a socket connected just after the close began (the
	// connection closing or closed) may not be among the sockets the
	// close disconnects, and would stay in its namespace and rooms for
	// good. This task runs after the library's.
	sock.Enqueue(func() {
		switch {
		case !sock.Connected():
			s.releaseConn(c)
			s.log.Debug().Str("scope", c.scope).Str("socket", string(sock.Id())).Msg("socket closed before it connected")
		case sock.Conn().ReadyState() != "open":
			sock.Disconnect(false)
		}
	})
}

// releaseConn gives back, once, what setupConn took for c: its place in
// the socket count, its context (a child of the relay's until cancelled)
// and its RPC methods. It runs when the socket disconnects, or when it
// never connected (handshake). It reports whether this call released c
// (the library may report a disconnection twice when the client's close
// and the handshake's task both disconnect the socket).
func (s *Server) releaseConn(c *conn) bool {
	if !c.released.CompareAndSwap(false, true) {
		return false
	}
	s.metrics.sockets.Add(-1)
	if c.scope == scopeMachine {
		s.msocks.add(c.acct, c.mid, -1)
	}
	c.cancel()
	for _, m := range methodsOf(c) {
		s.unregisterRPC(c, m)
	}
	return true
}

// id is the socket's id ("" for a conn without one, in unit tests).
func (c *conn) id() string {
	if c.sock == nil {
		return ""
	}
	return string(c.sock.Id())
}

func connOf(sock *socket.Socket) *conn {
	c, _ := sock.Data().(*conn)
	return c
}

func (s *Server) setupConn(c *conn) {
	sock := c.sock
	if c.scope == scopeMachine {
		s.msocks.add(c.acct, c.mid, 1)
	}
	c.joined = s.out.tick.Add(1)
	sock.Join(socket.Room("user:" + c.acct))
	switch c.scope {
	case scopeSession:
		sock.Join(roomSession(c.acct, c.sid))
		if c.liveText {
			sock.Join(roomSessionLive(c.acct, c.sid))
		}
	case scopeMachine:
		sock.Join(roomMachine(c.acct, c.mid))
	default:
		sock.Join(roomUserScoped(c.acct))
		if c.liveText {
			sock.Join(roomUserScopedLive(c.acct))
		}
	}
	sock.Use(s.payloadLimit(c))
	s.bindEvents(c)
	s.metrics.sockets.Add(1)
	_ = sock.On("disconnect", func(a ...any) {
		if !s.releaseConn(c) {
			return
		}
		s.log.Debug().Str("scope", c.scope).Str("socket", string(sock.Id())).Interface("reason", a).Msg("socket disconnected")
		if c.scope == scopeMachine {
			s.emitEphemeral(c.acct, wire.MachineActivity{Type: "machine-activity", ID: c.mid, Active: false, ActiveAt: s.nowMs()}, roomUserScoped(c.acct))
		}
	})
}

func (s *Server) onConnection(sock *socket.Socket) {
	c := connOf(sock)
	if c == nil {
		sock.Disconnect(true)
		return
	}
	// The library has registered the socket with its client: its CONNECT
	// answer may go out now (package wstransport, gated).
	if wt, ok := sock.Conn().Transport().(*wstransport.Transport); ok {
		wt.OpenGate()
	}
	s.log.Debug().Str("account", c.acct).Str("scope", c.scope).Str("socket", string(sock.Id())).Msg("socket connected")
	if c.scope == scopeMachine {
		s.emitEphemeral(c.acct, wire.MachineActivity{Type: "machine-activity", ID: c.mid, Active: true, ActiveAt: s.nowMs()}, roomUserScoped(c.acct))
	}
	if s.testConn != nil {
		s.testConn(sock)
	}
}

// emitUpdate allocates the account's next update seq and sends
// {id, seq, body, createdAt} as `update` to rooms, under the account's
// lock.
func (s *Server) emitUpdate(ctx context.Context, acct string, body any, rooms ...socket.Room) {
	unlock := s.lockAccount(acct)
	defer unlock()
	s.emitUpdateLocked(ctx, acct, body, rooms...)
}

// emitUpdateLocked is emitUpdate for a caller that holds the account's lock.
func (s *Server) emitUpdateLocked(ctx context.Context, acct string, body any, rooms ...socket.Room) {
	s.streams.observe(acct, body)
	seq, err := s.st.NextUpdateSeqs(ctx, acct, 1)
	if err != nil {
		s.log.Error().Err(err).Str("account", acct).Msg("allocate update seq")
		return
	}
	s.sendUpdate(acct, seq, body, rooms...)
}

// sendUpdate sends {id, seq, body, createdAt} as `update` to rooms: at
// once on a single relay; with a bus, also to the other instances, and to
// this instance's sockets in the account's seq order (cluster.go).
func (s *Server) sendUpdate(acct string, seq int64, body any, rooms ...socket.Room) {
	u := wire.Update{ID: store.NewID()[1:13], Seq: seq, Body: body, CreatedAt: s.nowMs()}
	s.metrics.updates.Inc()
	if s.cl != nil {
		wake, state := "", false
		switch x := body.(type) {
		case wire.BodyNewMessage:
			wake = x.SID
		case wire.BodyDeleteSession:
			wake, state = x.SID, true
		}
		s.cl.update(acct, u, rooms, wake, state)
		return
	}
	s.out.emit(acct, "update", u, rooms)
}

// emitEphemeral sends payload as `ephemeral` to rooms (no seq, not stored),
// and to the other instances' sockets with a bus.
func (s *Server) emitEphemeral(acct string, payload any, rooms ...socket.Room) {
	s.streams.observe(acct, payload)
	s.out.emit(acct, "ephemeral", payload, rooms)
	if s.cl != nil {
		s.cl.ephemeral(acct, payload, rooms)
	}
}

// anyone reports whether at least one socket is in one of rooms, so that
// updates nobody would receive are not encoded at all.
func (s *Server) anyone(rooms ...socket.Room) bool {
	all := s.io.Sockets().Adapter().Rooms()
	for _, r := range rooms {
		if set, ok := all.Load(r); ok && set.Len() > 0 {
			return true
		}
	}
	return false
}

// fanoutMessages sends one new-message update per created row to the
// session's sockets (the sender's included) and the account's apps. Update
// seqs were allocated with the rows, so skipping the sends when nobody
// listens leaves no gap a later listener could notice.
func (s *Server) fanoutMessages(acct, sid string, res store.AppendResult) {
	s.streams.notify(acct, sid, false)
	rooms := []socket.Room{roomSession(acct, sid), roomUserScoped(acct)}
	// With a bus, sockets of other instances may listen: always send.
	if s.cl == nil && !s.anyone(rooms...) {
		return
	}
	if s.cl != nil {
		us := make([]wire.Update, len(res.Created))
		for i, m := range res.Created {
			us[i] = wire.Update{ID: store.NewID()[1:13], Seq: res.FirstUpdateSeq + int64(i), CreatedAt: s.nowMs(),
				Body: wire.BodyNewMessage{T: "new-message", SID: sid, Message: toWireMessage(m)}}
		}
		s.metrics.updates.Add(float64(len(us)))
		s.cl.messages(acct, sid, us, rooms)
		return
	}
	for i, m := range res.Created {
		s.sendUpdate(acct, res.FirstUpdateSeq+int64(i), wire.BodyNewMessage{T: "new-message", SID: sid, Message: toWireMessage(m)}, rooms...)
	}
}

// payloadSize estimates the JSON size of decoded event arguments in bytes.
func payloadSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 2
	case map[string]any:
		n := int64(2)
		for k, e := range x {
			n += int64(len(k)) + 4 + payloadSize(e)
		}
		return n
	case []any:
		n := int64(2)
		for _, e := range x {
			n += 1 + payloadSize(e)
		}
		return n
	case []byte:
		return int64(len(x))
	default:
		return 8
	}
}

// payloadLimit refuses events larger than MaxSocketPayload with an explicit
// answer instead of processing them (B28): the ack, when the client asked
// for one, gets the event's error shape; otherwise the socket gets
// `event-error {event, error, size, limit}`. The connection stays open.
func (s *Server) payloadLimit(c *conn) socket.SocketMiddleware {
	return func(event []any, next func(error)) {
		var size int64
		var ack socket.Ack
		for i, a := range event {
			if i == len(event)-1 {
				if fn, ok := a.(socket.Ack); ok {
					ack = fn
					continue
				}
			}
			size += payloadSize(a)
		}
		if size <= s.cfg.MaxSocketPayload {
			next(nil)
			return
		}
		name, _ := event[0].(string)
		msg := fmt.Sprintf("Payload too large: %d bytes > limit %d", size, s.cfg.MaxSocketPayload)
		s.log.Warn().Str("account", c.acct).Str("event", name).Int64("size", size).Msg("refused oversized socket event")
		if ack != nil {
			ack([]any{errorReply(name, msg)}, nil)
			return
		}
		_ = c.emit("event-error", map[string]any{"event": name, "error": msg, "size": size, "limit": s.cfg.MaxSocketPayload})
	}
}

// errorReply is the error shape of each acked event.
func errorReply(event, msg string) map[string]any {
	switch event {
	case "rpc-call":
		return map[string]any{"ok": false, "error": msg}
	case "usage-report":
		return map[string]any{"success": false, "error": msg}
	default:
		return map[string]any{"result": "error", "message": msg}
	}
}

// emit sends an event to this socket alone, serialised with the socket's
// other direct emits (the library's per-socket modifiers are not safe for
// concurrent use).
func (c *conn) emit(ev string, args ...any) error {
	c.emitMu.Lock()
	defer c.emitMu.Unlock()
	return c.sock.Emit(ev, args...)
}
