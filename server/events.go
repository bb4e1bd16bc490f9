package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/zishang520/socket.io/servers/socket/v3"

	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/store"
	"github.com/happy-dev/happy/server/store/backend"
	"github.com/happy-dev/happy/server/wstransport"
)

// splitArgs returns the first argument as an object (nil when it is not
// one) and the ack callback when the client asked for one.
func splitArgs(a []any) (map[string]any, socket.Ack) {
	var ack socket.Ack
	if n := len(a); n > 0 {
		if fn, ok := a[n-1].(socket.Ack); ok {
			ack = fn
			a = a[:n-1]
		}
	}
	var m map[string]any
	if len(a) > 0 {
		m, _ = a[0].(map[string]any)
	}
	return m, ack
}

func reply(ack socket.Ack, v any) {
	if ack != nil {
		ack([]any{v}, nil)
	}
}

func getStr(m map[string]any, k string) (string, bool) {
	v, ok := m[k].(string)
	return v, ok
}

func getNum(m map[string]any, k string) (float64, bool) {
	v, ok := m[k].(float64)
	return v, ok
}

// countsValid reports whether every value of a usage report's tokens or
// cost object is a number >= 0 (counts and amounts cannot be negative).
func countsValid(m map[string]any) bool {
	for _, v := range m {
		if f, ok := v.(float64); !ok || f < 0 {
			return false
		}
	}
	return true
}

// getVersion reads expectedVersion: a whole number >= 0.
func getVersion(m map[string]any) (int64, bool) {
	v, ok := getNum(m, "expectedVersion")
	if !ok || v < 0 || v != float64(int64(v)) {
		return 0, false
	}
	return int64(v), true
}

// eventHandler handles one client event; a holds its arguments, the ack
// callback last when the client asked for one.
type eventHandler func(c *conn, a []any)

// eventHandlers is the table of the client events the relay handles, one
// for all sockets (built once by newSocketServer).
func (s *Server) eventHandlers() map[string]eventHandler {
	hs := map[string]eventHandler{}
	on := func(ev string, h func(c *conn, m map[string]any, ack socket.Ack)) {
		hs[ev] = func(c *conn, a []any) {
			m, ack := splitArgs(a)
			h(c, m, ack)
		}
	}
	for _, e := range casEvents {
		on(e.name, func(c *conn, m map[string]any, ack socket.Ack) { s.onCAS(c, e, m, ack) })
	}
	on("session-alive", s.onSessionAlive)
	on("session-end", s.onSessionEnd)
	on("text-delta", s.onTextDelta)
	on("message", s.onLegacyMessage)
	on("machine-alive", s.onMachineAlive)
	on("usage-report", s.onUsageReport)
	on("rpc-register", func(c *conn, m map[string]any, _ socket.Ack) { s.onRPCRegister(c, m) })
	on("rpc-unregister", func(c *conn, m map[string]any, _ socket.Ack) { s.onRPCUnregister(c, m) })
	// rpc-call waits for another socket: it runs on its own goroutine so the
	// caller's other events are not held up.
	on("rpc-call", func(c *conn, m map[string]any, ack socket.Ack) {
		if c.rpcCalls.Add(1) > maxRPCInFlight {
			c.rpcCalls.Add(-1)
			reply(ack, map[string]any{"ok": false, "error": errRPCTooMany})
			return
		}
		go func() {
			defer c.rpcCalls.Add(-1)
			s.onRPCCall(c, m, ack)
		}()
	})
	on("ping", func(_ *conn, _ map[string]any, ack socket.Ack) { reply(ack, map[string]any{}) })
	return hs
}

// maxEventsInFlight bounds a socket's messages queued for or in their
// handling; past it the socket's reader waits, so a client sending faster
// than the relay handles its events is slowed by TCP instead of growing
// the relay's memory.
const maxEventsInFlight = 64

// boundReads makes c's reader wait while maxEventsInFlight of its
// messages are queued: the Socket.IO library decodes each message on the
// reader and queues its handling on the socket's task queue, which
// otherwise grows without bound. A token is taken on the reader (by the
// relay's transport once it has handed a message to the library, which
// queued the packet's handling by then: MessageIn) and given back by a
// task queued after the packet's.
func boundReads(c *conn) {
	c.events = make(chan struct{}, maxEventsInFlight)
	if t, ok := c.sock.Conn().Transport().(*wstransport.Transport); ok {
		t.SetReads(c)
	}
}

// MessageIn (wstransport.Reads) takes a token for a message the reader
// handed to the library (boundReads), waiting while none is left, and
// queues its return.
func (c *conn) MessageIn() {
	select {
	case c.events <- struct{}{}:
	case <-c.ctx.Done():
		return
	}
	c.sock.Enqueue(func() { <-c.events })
}

// bindEvents routes c's events to s.events. It is one middleware rather
// than a listener per event (each of which costs every socket a map entry
// and a closure in the library's emitter): a known event runs on the
// socket's task queue, as the library runs listeners, and only while the
// socket is connected; any other event goes on to the library, which has
// no listener for it. The middleware itself runs on that queue, so the
// handler runs in it directly; it ends only once its account's fan-out
// queue has room (fanout.go), and with boundReads a socket flooding its
// account's other sockets with ephemerals or updates is held to the pace
// they are written at.
func (s *Server) bindEvents(c *conn) {
	sock := c.sock
	boundReads(c)
	sock.Use(func(event []any, next func(error)) {
		var h eventHandler
		if len(event) > 0 {
			name, _ := event[0].(string)
			h = s.events[name]
		}
		if h == nil {
			next(nil)
			return
		}
		if sock.Connected() {
			h(c, event[1:])
			s.out.waitRoom(c.ctx, c.acct)
		}
	})
}

// opCtx bounds one event's store work.
func (s *Server) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, 30*time.Second)
}

func casReply(key string, r store.CAS) map[string]any {
	res := "success"
	if !r.OK {
		res = "version-mismatch"
	}
	var v any
	if r.Value != nil {
		v = *r.Value
	}
	return map[string]any{"result": res, "version": r.Version, key: v}
}

// storeErrReply acks a failed store call {result: "error", message}:
// notFound for store.ErrNotFound, errDiskFull with cause "disk_full" for a
// write the storage had no room for, "Internal error" otherwise.
func (s *Server) storeErrReply(ack socket.Ack, ev string, err error, notFound string) {
	if errors.Is(err, store.ErrNotFound) {
		reply(ack, map[string]any{"result": "error", "message": notFound})
		return
	}
	if backend.DiskFull(err) {
		s.metrics.storeErrors.WithLabelValues("full").Inc()
		s.log.Error().Err(err).Str("event", ev).Msg("store full: write refused")
		reply(ack, map[string]any{"result": "error", "message": errDiskFull, "cause": causeDiskFull})
		return
	}
	s.log.Error().Err(err).Str("event", ev).Msg("socket event failed")
	reply(ack, map[string]any{"result": "error", "message": "Internal error"})
}

// casEvent is one of the four compare-and-set events: update-metadata,
// update-state (sessions), machine-update-metadata and machine-update-state
// (machines). Each reads {<idKey>, <valueKey>, expectedVersion}, writes
// through the store under the account's lock, on success sends an update
// to the object's room and the account's apps, and acks
// {result: success|version-mismatch, version, <valueKey>: current value}
// or {result: error, message} (bad input, or an unknown id, where the
// reference sends no ack at all).
type casEvent struct {
	name     string // event name, in logs
	idKey    string // "sid" or "machineId"
	valueKey string // "metadata", "agentState" or "daemonState"; also the ack's key
	// nullable accepts null as the value (agentState); otherwise it must
	// be a string.
	nullable bool
	notFound string // the error message for an unknown id
	// write is the store's compare-and-set; value is nil only when
	// nullable.
	write func(ctx context.Context, st store.Store, acct, id string, value *string, expected, now int64) (store.CAS, error)
	// body is the update sent on success.
	body func(id string, v *wire.Versioned) any
	// room is the object's own room (the account's apps get it too).
	room func(acct, id string) socket.Room
	// machineActive: the store's write also marked the machine active at
	// now (machine-update-state), so a success records that activity write
	// in the presence cache, as a keep-alive's write would.
	machineActive bool
}

// casEvents are the four compare-and-set events.
var casEvents = []*casEvent{
	{
		name: "update-metadata", idKey: "sid", valueKey: "metadata", notFound: "Session not found",
		write: func(ctx context.Context, st store.Store, acct, id string, v *string, ev, now int64) (store.CAS, error) {
			return st.UpdateSessionMetadata(ctx, acct, id, *v, ev, now)
		},
		body: func(id string, v *wire.Versioned) any {
			return wire.BodyUpdateSession{T: "update-session", ID: id, Metadata: v}
		},
		room: roomSession,
	},
	{
		name: "update-state", idKey: "sid", valueKey: "agentState", nullable: true, notFound: "Session not found",
		write: func(ctx context.Context, st store.Store, acct, id string, v *string, ev, now int64) (store.CAS, error) {
			return st.UpdateSessionAgentState(ctx, acct, id, v, ev, now)
		},
		body: func(id string, v *wire.Versioned) any {
			return wire.BodyUpdateSession{T: "update-session", ID: id, AgentState: v}
		},
		room: roomSession,
	},
	{
		name: "machine-update-metadata", idKey: "machineId", valueKey: "metadata", notFound: "Machine not found",
		write: func(ctx context.Context, st store.Store, acct, id string, v *string, ev, now int64) (store.CAS, error) {
			return st.UpdateMachineMetadata(ctx, acct, id, *v, ev, now)
		},
		body: func(id string, v *wire.Versioned) any {
			return wire.BodyUpdateMachine{T: "update-machine", MachineID: id, Metadata: v}
		},
		room: roomMachine,
	},
	{
		name: "machine-update-state", idKey: "machineId", valueKey: "daemonState", notFound: "Machine not found",
		write: func(ctx context.Context, st store.Store, acct, id string, v *string, ev, now int64) (store.CAS, error) {
			return st.UpdateMachineDaemonState(ctx, acct, id, *v, ev, now)
		},
		body: func(id string, v *wire.Versioned) any {
			return wire.BodyUpdateMachine{T: "update-machine", MachineID: id, DaemonState: v}
		},
		room:          roomMachine,
		machineActive: true,
	},
}

// params reads a compare-and-set event's fields: a non-empty id, the
// value (a string, or null when e.nullable; a missing value is invalid),
// and expectedVersion as a whole, non-negative number (a fractional or
// negative version is invalid, never truncated).
func (e *casEvent) params(m map[string]any) (id string, value *string, expected int64, ok bool) {
	id, okID := getStr(m, e.idKey)
	raw, present := m[e.valueKey]
	str, isStr := raw.(string)
	expected, okVersion := getVersion(m)
	okValue := isStr || (e.nullable && present && raw == nil)
	if !okID || id == "" || !okValue || !okVersion {
		return "", nil, 0, false
	}
	if isStr {
		value = &str
	}
	return id, value, expected, true
}

// onCAS handles one compare-and-set event e (see casEvent).
func (s *Server) onCAS(c *conn, e *casEvent, m map[string]any, ack socket.Ack) {
	id, value, expected, ok := e.params(m)
	if !ok {
		reply(ack, map[string]any{"result": "error", "message": "Invalid parameters"})
		return
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	// The compare-and-set and its update are one step for the account, so
	// update seqs follow versions.
	unlock := s.lockAccount(c.acct)
	defer unlock()
	now := s.nowMs()
	r, err := e.write(ctx, s.st, c.acct, id, value, expected, now)
	if err != nil {
		s.storeErrReply(ack, e.name, err, e.notFound)
		return
	}
	if r.OK {
		if e.machineActive {
			s.pres.shouldWrite(presKey("m", c.acct, id), now, 0)
		}
		s.emitUpdateLocked(ctx, c.acct, e.body(id, &wire.Versioned{Value: r.Value, Version: r.Version}),
			e.room(c.acct, id), roomUserScoped(c.acct))
	}
	reply(ack, casReply(e.valueKey, r))
}

// clientTime turns a client's `time` (ms) into the activity time to record.
// A time ahead of the server is clamped to now (as the reference). A time
// more than ClockTolerance behind — which the reference drops silently — is
// replaced by the server's time, because the event arriving now proves
// activity now (B29); the socket is told once per connection with
// `clock-skew {event, clientTime, serverTime, skewMs}`.
func (s *Server) clientTime(c *conn, event string, t float64) int64 {
	now := s.nowMs()
	// Compared as floats: a time far outside the int64 range must not
	// overflow into a plausible (or negative) value.
	if !(t < float64(now)) { // also NaN
		return now
	}
	if float64(now)-t <= float64(s.cfg.ClockTolerance.Milliseconds()) {
		return int64(t)
	}
	c.mu.Lock()
	first := !c.skewWarned
	c.skewWarned = true
	c.mu.Unlock()
	if first {
		s.log.Warn().Str("account", c.acct).Str("event", event).Float64("skewMs", float64(now)-t).Msg("client clock behind server beyond tolerance; using server time")
		_ = c.emit("clock-skew", map[string]any{"event": event, "clientTime": t, "serverTime": now, "skewMs": float64(now) - t})
	}
	return now
}

// onSessionAlive: session-alive {sid, time, thinking?, mode?} (volatile, no
// ack in the reference CLI; an ack, when asked for, gets success or error).
// Fans out ephemeral activity to the account's apps.
func (s *Server) onSessionAlive(c *conn, m map[string]any, ack socket.Ack) {
	sid, ok1 := getStr(m, "sid")
	t, ok2 := getNum(m, "time")
	if !ok1 || sid == "" || !ok2 {
		reply(ack, map[string]any{"result": "error", "message": "Invalid parameters"})
		return
	}
	thinking, _ := m["thinking"].(bool)
	if s.pres.isStopped(c.acct, sid, s.cfg.Now()) {
		reply(ack, map[string]any{"result": "error", "message": "Session was ended"})
		return
	}
	at := s.clientTime(c, "session-alive", t)
	key := presKey("s", c.acct, sid)
	ctx, cancel := s.opCtx()
	defer cancel()
	if s.pres.shouldWrite(key, at, s.writeThreshold()) {
		if err := s.st.SetSessionActive(ctx, c.acct, sid, true, at); err != nil {
			s.pres.forget(key)
			s.storeErrReply(ack, "session-alive", err, "Session not found")
			return
		}
	}
	s.emitEphemeral(c.acct, wire.Activity{Type: "activity", ID: sid, Active: true, ActiveAt: at, Thinking: thinking}, roomUserScoped(c.acct))
	reply(ack, map[string]any{"result": "success", "activeAt": at})
}

// MaxTextDelta bounds the ciphertext (base64) of one text-delta.
const MaxTextDelta = 64 << 10

// onTextDelta: text-delta {sid, message} (volatile, never stored): the
// encrypted live text of a streaming part (docs/ARCHITECTURE.md, section
// "Live text"), forwarded as ephemeral {type: "text-delta", id: sid,
// message} to the session's sockets and the account's apps that announced
// liveText (roomSessionLive, roomUserScopedLive), and the session's
// message streams. The relay neither reads nor checks the ciphertext; an
// ack, when asked for, gets success or error.
func (s *Server) onTextDelta(c *conn, m map[string]any, ack socket.Ack) {
	sid, ok1 := getStr(m, "sid")
	msg, ok2 := getStr(m, "message")
	if !ok1 || sid == "" || !ok2 || msg == "" || len(msg) > MaxTextDelta {
		reply(ack, map[string]any{"result": "error", "message": "Invalid parameters"})
		return
	}
	s.emitEphemeral(c.acct, wire.TextDelta{Type: "text-delta", ID: sid, Message: msg}, roomSessionLive(c.acct, sid), roomUserScopedLive(c.acct))
	reply(ack, map[string]any{"result": "success"})
}

// onLegacyMessage: message {sid, message, localId?}, the socket event
// happy-coder 0.13 sends agent output with (the reference relay still
// stores it). It is stored exactly as POST /v3/sessions/:id/messages of
// that one message: for the socket's account only (another account's
// session is not found), idempotent by localId, fanned out as
// new-message. A message without localId gets a random one (a new row,
// as the reference relay stores it with none). An ack, when asked for,
// gets {result: "success", seq, localId} or an error.
func (s *Server) onLegacyMessage(c *conn, m map[string]any, ack socket.Ack) {
	sid, ok1 := getStr(m, "sid")
	msg, ok2 := getStr(m, "message")
	localID, hasLocal := getStr(m, "localId")
	if !ok1 || sid == "" || !ok2 || (m["localId"] != nil && (!hasLocal || localID == "")) {
		reply(ack, map[string]any{"result": "error", "message": "Invalid parameters"})
		return
	}
	if localID == "" {
		localID = "legacy-" + rand.Text()
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	res, err := s.appendOrdered(ctx, c.acct, sid, []store.NewMessage{{LocalID: localID, Content: msg}})
	if err != nil {
		s.storeErrReply(ack, "message", err, errSessionNotFound)
		return
	}
	if len(res.Rows) != 1 {
		s.log.Error().Int("rows", len(res.Rows)).Msg("message: the store answered one message with another count of rows")
		reply(ack, map[string]any{"result": "error", "message": "Internal error"})
		return
	}
	reply(ack, map[string]any{"result": "success", "seq": res.Rows[0].Seq, "localId": res.Rows[0].LocalID})
}

// onSessionEnd: session-end {sid, time}. Marks the session inactive, ignores
// its keep-alives for StoppedTTL and tells the apps. A skewed time is
// replaced by the server's (never dropped); an ack gets success or error.
func (s *Server) onSessionEnd(c *conn, m map[string]any, ack socket.Ack) {
	sid, ok1 := getStr(m, "sid")
	t, ok2 := getNum(m, "time")
	if !ok1 || sid == "" || !ok2 {
		reply(ack, map[string]any{"result": "error", "message": "Invalid parameters"})
		return
	}
	at := s.clientTime(c, "session-end", t)
	ctx, cancel := s.opCtx()
	defer cancel()
	if err := s.st.SetSessionActive(ctx, c.acct, sid, false, at); err != nil {
		s.storeErrReply(ack, "session-end", err, "Session not found")
		return
	}
	s.stopPresence(c.acct, sid)
	s.emitEphemeral(c.acct, wire.Activity{Type: "activity", ID: sid, Active: false, ActiveAt: at}, roomUserScoped(c.acct))
	reply(ack, map[string]any{"result": "success", "activeAt": at})
}

// onMachineAlive: machine-alive {machineId, time}.
func (s *Server) onMachineAlive(c *conn, m map[string]any, ack socket.Ack) {
	mid, ok1 := getStr(m, "machineId")
	t, ok2 := getNum(m, "time")
	if !ok1 || mid == "" || !ok2 {
		reply(ack, map[string]any{"result": "error", "message": "Invalid parameters"})
		return
	}
	at := s.clientTime(c, "machine-alive", t)
	key := presKey("m", c.acct, mid)
	ctx, cancel := s.opCtx()
	defer cancel()
	if s.pres.shouldWrite(key, at, s.writeThreshold()) {
		if err := s.st.SetMachineActive(ctx, c.acct, mid, true, at); err != nil {
			s.pres.forget(key)
			s.storeErrReply(ack, "machine-alive", err, "Machine not found")
			return
		}
	}
	s.emitEphemeral(c.acct, wire.MachineActivity{Type: "machine-activity", ID: mid, Active: true, ActiveAt: at}, roomUserScoped(c.acct))
	reply(ack, map[string]any{"result": "success", "activeAt": at})
}

// onUsageReport: usage-report {key, sessionId?, tokens:{total,…}, cost:{total,…}}
// → {success:true, reportId, createdAt, updatedAt} or {success:false, error}.
func (s *Server) onUsageReport(c *conn, m map[string]any, ack socket.Ack) {
	fail := func(msg string) { reply(ack, map[string]any{"success": false, "error": msg}) }
	key, ok := getStr(m, "key")
	if !ok || key == "" {
		fail("Invalid key")
		return
	}
	tokens, _ := m["tokens"].(map[string]any)
	if _, ok := getNum(tokens, "total"); !ok {
		fail("Invalid tokens object - must include total")
		return
	}
	if !countsValid(tokens) {
		fail("Invalid tokens object - every count must be a number >= 0")
		return
	}
	cost, _ := m["cost"].(map[string]any)
	if _, ok := getNum(cost, "total"); !ok {
		fail("Invalid cost object - must include total")
		return
	}
	if !countsValid(cost) {
		fail("Invalid cost object - every amount must be a number >= 0")
		return
	}
	sid := ""
	if v, present := m["sessionId"]; present && v != nil {
		str, ok := v.(string)
		if !ok {
			fail("Invalid sessionId")
			return
		}
		sid = str
	}
	ctx, cancel := s.opCtx()
	defer cancel()
	if sid != "" {
		if _, err := s.st.Session(ctx, c.acct, sid); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				fail("Session not found")
				return
			}
			s.log.Error().Err(err).Msg("usage-report")
			fail("Internal error")
			return
		}
	}
	data, _ := json.Marshal(map[string]any{"tokens": tokens, "cost": cost}) // decoded JSON always re-encodes
	u, err := s.st.UpsertUsageReport(ctx, c.acct, sid, key, string(data), s.nowMs())
	if backend.DiskFull(err) {
		s.metrics.storeErrors.WithLabelValues("full").Inc()
		s.log.Error().Err(err).Msg("usage-report: store full")
		reply(ack, map[string]any{"success": false, "error": errDiskFull, "cause": causeDiskFull})
		return
	}
	if err != nil {
		s.log.Error().Err(err).Msg("usage-report")
		fail("Failed to save usage report")
		return
	}
	if sid != "" {
		s.emitEphemeral(c.acct, wire.Usage{Type: "usage", ID: sid, Key: key, Tokens: tokens, Cost: cost, Timestamp: s.nowMs()}, roomUserScoped(c.acct))
	}
	reply(ack, map[string]any{"success": true, "reportId": u.ID, "createdAt": u.CreatedAt, "updatedAt": u.UpdatedAt})
}

// RPC registration refusals (this relay's own texts; the reference relay
// lets any socket of the account register any method, the latest
// registration taking the calls).
const (
	errRPCUserScoped = "RPC methods are registered by the socket of their session (clientType session-scoped) or machine (machine-scoped); a user-scoped socket can only call them"
	errRPCOtherScope = "A %s socket registers only methods of its own %s: %q does not start with %q"
	errRPCHeld       = "Method already registered by another connected socket; this socket takes it over (and gets rpc-registered) when that one disconnects"
	errRPCTooManyReg = "Too many RPC methods registered on this socket (limit 128)"
)

// registerError emits rpc-error {type:"register", error, method}.
func registerError(c *conn, method, msg string) {
	_ = c.emit("rpc-error", map[string]any{"type": "register", "error": msg, "method": method})
}

// onRPCRegister: rpc-register {method} → rpc-registered {method}, or
// rpc-error {type:"register", error, method} when the socket may not
// register it: a missing or over-long name, a user-scoped socket, a
// session-scoped socket and a method not "<its sessionId>:…", a
// machine-scoped socket and a method not "<its machineId>:…", a session
// or machine the account does not have, too many methods on one socket,
// or a method another connected socket holds (this socket then waits as
// a standby: it gets rpc-registered when it becomes the holder).
func (s *Server) onRPCRegister(c *conn, m map[string]any) {
	method, ok := getStr(m, "method")
	if !ok || method == "" || len(method) > maxMethodLen {
		_ = c.emit("rpc-error", map[string]any{"type": "register", "error": "Invalid method name"})
		return
	}
	prefix, _, _ := strings.Cut(method, ":")
	ctx, cancel := s.opCtx()
	defer cancel()
	var err error
	switch c.scope {
	case scopeSession:
		if prefix != c.sid || !strings.Contains(method, ":") {
			s.metrics.refused("rpc_scope")
			registerError(c, method, fmt.Sprintf(errRPCOtherScope, scopeSession, "session", method, c.sid+":"))
			return
		}
		_, err = s.st.Session(ctx, c.acct, c.sid)
	case scopeMachine:
		if prefix != c.mid || !strings.Contains(method, ":") {
			s.metrics.refused("rpc_scope")
			registerError(c, method, fmt.Sprintf(errRPCOtherScope, scopeMachine, "machine", method, c.mid+":"))
			return
		}
		_, err = s.st.Machine(ctx, c.acct, c.mid)
	default:
		s.metrics.refused("rpc_scope")
		registerError(c, method, errRPCUserScoped)
		return
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		registerError(c, method, "Method must be <sessionId>:<name> or <machineId>:<name> for a session or machine of this account")
		return
	case err != nil:
		s.log.Error().Err(err).Msg("rpc-register")
		registerError(c, method, "Internal error")
		return
	}
	e, res := s.rpc.add(c, method, s.cfg.Now())
	switch res {
	case addHolder:
		_ = c.emit("rpc-registered", map[string]any{"method": method})
	case addCandidate:
		s.grantRPC(e)
	case addStandby:
		s.metrics.refused("rpc_held")
		registerError(c, method, errRPCHeld)
	case addTooMany:
		registerError(c, method, errRPCTooManyReg)
	}
}

// grantRPC makes e, first in line for its method, the holder: rpc-registered
// first (a call waiting for the method is forwarded as soon as it is
// held, and the callee should see rpc-registered before the first
// rpc-request), then the calls come to its socket, and the other
// instances are told. When another instance claimed the method meanwhile,
// the socket is told it was not registered after all.
func (s *Server) grantRPC(e *rpcEntry) {
	_ = e.c.emit("rpc-registered", map[string]any{"method": e.method})
	if !s.rpc.activate(e) {
		registerError(e.c, e.method, errRPCHeld)
		return
	}
	if s.cl != nil {
		s.cl.claimed(e)
	}
}

// rpcDemoted tells e's socket that an earlier registration on another
// instance holds its method, and the others that e let it go.
func (s *Server) rpcDemoted(e *rpcEntry) {
	registerError(e.c, e.method, errRPCHeld)
	if s.cl != nil {
		s.cl.released(e)
	}
}

// unregisterRPC drops c's registration of method: the others learn that
// the method is free, and the next local standby takes it.
func (s *Server) unregisterRPC(c *conn, method string) {
	released, next := s.rpc.remove(c, method)
	if released != nil && s.cl != nil {
		s.cl.released(released)
	}
	if next != nil {
		s.grantRPC(next)
	}
}

// onRPCUnregister: rpc-unregister {method} → rpc-unregistered {method}.
func (s *Server) onRPCUnregister(c *conn, m map[string]any) {
	method, ok := getStr(m, "method")
	if !ok || method == "" {
		_ = c.emit("rpc-error", map[string]any{"type": "unregister", "error": "Invalid method name"})
		return
	}
	s.unregisterRPC(c, method)
	_ = c.emit("rpc-unregistered", map[string]any{"method": method})
}

// maxMethodLen bounds an RPC method name ("<id>:<name>") in bytes: a waiting
// call keeps its name in memory until the grace window ends.
const maxMethodLen = 256

// maxRPCInFlight bounds the rpc-calls one socket may have waiting (for a
// method to be registered or for its answer); each holds a goroutine and
// its parameters. Beyond it a call is refused at once with errRPCTooMany.
const maxRPCInFlight = 64

// errRPCTooMany answers an rpc-call over maxRPCInFlight (our own text: the
// reference relay sets no limit).
const errRPCTooMany = "Too many RPC calls in flight on this socket (limit 64)"

// RPC error texts of the reference relay.
const (
	errRPCNotAvailable = "RPC method not available"
	errRPCSameSocket   = "Cannot call RPC on the same socket"
	errRPCDisconnected = "RPC target disconnected"
	errRPCTimeout      = "operation has timed out"
)

// onRPCCall: rpc-call {method, params} → forwards rpc-request {method, params}
// with ack to the first socket of the account that registered method
// (waiting up to RPCGrace for one; at once errRPCNotAvailable for a method
// of a machine with no socket connected, see machineAway) and replies
// {ok:true, result} with the callee's ack value, or {ok:false, error} with
// the reference's texts.
func (s *Server) onRPCCall(c *conn, m map[string]any, ack socket.Ack) {
	method, ok := getStr(m, "method")
	if !ok || method == "" {
		reply(ack, map[string]any{"ok": false, "error": "Invalid parameters: method is required"})
		return
	}
	if len(method) > maxMethodLen {
		reply(ack, map[string]any{"ok": false, "error": "Invalid parameters: method name too long"})
		return
	}
	params := m["params"]
	if s.cl != nil {
		// Elsewhere too: a socket of another instance may hold the method.
		if e := s.rpc.peek(c.acct, method); e != nil {
			s.callLocal(c, e, method, params, ack)
			return
		}
		s.cl.call(c, method, params, ack)
		return
	}
	if s.rpc.peek(c.acct, method) == nil {
		ctx, cancel := s.opCtx()
		away := s.machineAway(ctx, c.acct, method)
		cancel()
		if away {
			reply(ack, map[string]any{"ok": false, "error": errRPCNotAvailable})
			return
		}
	}
	// The waits end with the caller's socket: nobody is left to answer.
	gctx, cancel := context.WithTimeout(c.ctx, s.cfg.RPCGrace)
	target := s.rpc.wait(gctx, c.acct, method)
	cancel()
	if target == nil {
		reply(ack, map[string]any{"ok": false, "error": errRPCNotAvailable})
		return
	}
	s.callLocal(c, target, method, params, ack)
}

// callLocal forwards c's call to target, a socket of this instance, and
// acks the answer.
func (s *Server) callLocal(c *conn, target *rpcEntry, method string, params any, ack socket.Ack) {
	if target.c == c {
		reply(ack, map[string]any{"ok": false, "error": errRPCSameSocket})
		return
	}
	if res := s.forward(c.ctx, target, method, params); res != nil {
		reply(ack, res)
	}
}

// forward sends rpc-request {method, params} with ack to target and
// returns the caller's answer: {ok:true, result} with the callee's ack
// value, or {ok:false, error} with the reference's texts; nil when ctx
// ended while the server runs (the caller is gone: no one to answer).
func (s *Server) forward(ctx context.Context, target *rpcEntry, method string, params any) map[string]any {
	type result struct {
		args []any
		err  error
	}
	done := make(chan result, 1)
	target.c.emitMu.Lock()
	target.c.sock.Timeout(s.cfg.RPCCallTimeout).EmitWithAck("rpc-request", map[string]any{"method": method, "params": params})(func(a []any, err error) {
		done <- result{a, err}
	})
	target.c.emitMu.Unlock()
	select {
	case r := <-done:
		if r.err != nil {
			return map[string]any{"ok": false, "error": errRPCTimeout}
		}
		var v any
		if len(r.args) > 0 {
			v = r.args[0]
		}
		return map[string]any{"ok": true, "result": v}
	case <-target.gone:
		return map[string]any{"ok": false, "error": errRPCDisconnected}
	case <-ctx.Done():
		if s.ctx.Err() != nil {
			return map[string]any{"ok": false, "error": "Server shutting down"}
		}
		return nil
	}
}
