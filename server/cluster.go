package server

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zishang520/socket.io/servers/socket/v3"

	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/bus"
	"github.com/happy-dev/happy/server/store"
)

// Several relays on one database (docs/ARCHITECTURE.md, section "Several
// relays"). With Config.Bus set, everything this relay sends its sockets
// because of a write (updates, ephemerals, message stream wake-ups) is also
// published on the bus, and every other instance sends it to its own
// sockets; an rpc-call whose method no local socket registered is routed to
// the instance whose socket did; presence stops and token revocations are
// told to the others. Without a bus nothing here runs.

// DefaultReorderWait is how long an instance holds an account's update
// whose predecessors have not arrived (Config.ReorderWait).
const DefaultReorderWait = 200 * time.Millisecond

// Kinds of bus messages.
const (
	busUpdate    = "u"      // an update {seq, body} for rooms of an account
	busUpdates   = "us"     // several updates for the same rooms (a message batch): Items
	busEphemeral = "e"      // an ephemeral for rooms of an account
	busStop      = "stop"   // presence: a session ended (keep-alives ignored for a while)
	busResume    = "resume" // presence: the session was asked for again
	busRevoke    = "revoke" // the account's tokens were revoked (Seq: the generation)
	busCall      = "call"   // an rpc-call looking for the method's instance
	busAccept    = "accept" // an instance holds the method's socket (To: the caller's instance)
	busGo        = "go"     // the caller chose that instance (To: it)
	busCancel    = "cancel" // the caller no longer needs the call
	busResult    = "result" // the callee's answer {ok, result|error} (To: the caller's instance)
	// RPC method claims (rpc.go): which instance's socket holds a method.
	busClaim   = "claim"   // a local socket became the holder: Claims[0]
	busRelease = "release" // the holder let go: Acct, Method, ID (its socket)
	busAlive   = "alive"   // heartbeat: Seq is the number of methods the sender's sockets hold
	busHello   = "hello"   // a new instance: send it your claims
	busSync    = "sync"    // send me (From) your claims (To: you)
	busClaims  = "claims"  // all of the sender's claims (To: the asker): Seq in all, State on the first part
	busBye     = "bye"     // the sender is leaving: forget its claims
	// busSkip: the sender allocated the account's update seqs Seq…Seq+N-1
	// for its own sockets alone (rows it caught them up with, catchup.go):
	// pass over them.
	busSkip = "skip"
)

// maxSkip bounds the seqs of one busSkip message.
const maxSkip = 1 << 16

// DefaultClusterAlive is how often an instance tells the others it is
// alive; an instance not heard from for three times as long is taken for
// gone and the methods its sockets held are free.
const DefaultClusterAlive = 5 * time.Second

// maxClaimsPerMessage bounds the claims of one busClaims message (about
// 150 bytes each, well under bus.MaxMessage).
const maxClaimsPerMessage = 10_000

// busMsg is one message between instances (JSON).
type busMsg struct {
	Kind  string   `json:"k"`
	From  string   `json:"f"`
	To    string   `json:"t,omitempty"`
	Acct  string   `json:"a,omitempty"`
	Rooms []string `json:"r,omitempty"`
	Seq   int64    `json:"s,omitempty"`
	// N is the number of seqs of a busSkip.
	N int64 `json:"n,omitempty"`
	// Wake names the session whose message streams to wake; State tells
	// them to look at the session itself (streamHub.notify).
	Wake   string          `json:"w,omitempty"`
	State  bool            `json:"st,omitempty"`
	ID     string          `json:"id,omitempty"`
	Method string          `json:"m,omitempty"`
	Body   json.RawMessage `json:"b,omitempty"`
	// Items are the updates of a busUpdates message, in seq order.
	Items []busItem `json:"i,omitempty"`
	// Claims are RPC method claims (busClaim, busClaims).
	Claims []rpcClaim `json:"c,omitempty"`
}

// busItem is one update of a busUpdates message.
type busItem struct {
	Seq  int64           `json:"s"`
	Body json.RawMessage `json:"b"`
	// Msg is the message seq of the row the update carries.
	Msg int64 `json:"m,omitempty"`
}

// cluster is a relay's part in a group of relays.
type cluster struct {
	s    *Server
	bus  bus.Bus
	self string
	seqr *sequencer

	mu      sync.Mutex
	calls   map[string]*outCall // this instance's calls routed elsewhere, by id
	serving map[string]*inCall  // calls this instance holds the method for, by From+id

	// seen is when each other instance was last heard from; syncs holds
	// the parts of a busClaims answer still arriving, by instance.
	seen  map[string]time.Time
	syncs map[string]*claimSync
	alive time.Duration

	// sent is what this instance sent its sockets of each session's rows;
	// lastRecv the time (Unix ns) of the last message from the bus;
	// caughtUp counts the rows sent after bus gaps (catchup.go).
	sent     *sentRows
	lastRecv atomic.Int64
	caughtUp atomic.Int64

	publishErrors atomic.Int64
	received      atomic.Int64
}

// claimSync is a busClaims answer being received.
type claimSync struct {
	total  int
	claims []rpcClaim
}

func newCluster(s *Server, b bus.Bus) *cluster {
	cl := &cluster{s: s, bus: b, self: store.NewID(), calls: map[string]*outCall{}, serving: map[string]*inCall{},
		seen: map[string]time.Time{}, syncs: map[string]*claimSync{}, alive: s.cfg.clusterAlive}
	if cl.alive <= 0 {
		cl.alive = DefaultClusterAlive
	}
	cl.seqr = newSequencer(s.cfg.ReorderWait, s.cfg.Now)
	cl.sent = newSentRows(s.cfg.Now())
	cl.lastRecv.Store(s.cfg.Now().UnixNano())
	return cl
}

// start receives the other instances' messages, asks them for the RPC
// methods their sockets hold, and starts the heartbeat.
func (cl *cluster) start() error {
	if r, ok := cl.bus.(bus.Resumer); ok {
		r.OnResume(cl.resumed)
	}
	if err := cl.bus.Start(cl.receive); err != nil {
		return err
	}
	cl.publish(busMsg{Kind: busHello})
	cl.s.wg.Add(1)
	go cl.aliveLoop()
	return nil
}

// aliveLoop publishes the heartbeat and forgets the claims of instances
// not heard from for three heartbeats.
func (cl *cluster) aliveLoop() {
	defer cl.s.wg.Done()
	t := time.NewTicker(cl.alive)
	defer t.Stop()
	for {
		select {
		case <-cl.s.ctx.Done():
			return
		case <-t.C:
		}
		cl.publish(busMsg{Kind: busAlive, Seq: int64(cl.s.rpc.holderCount())})
		cut := time.Now().Add(-3 * cl.alive)
		cl.mu.Lock()
		var gone []string
		for inst, at := range cl.seen {
			if at.Before(cut) {
				gone = append(gone, inst)
				delete(cl.seen, inst)
				delete(cl.syncs, inst)
			}
		}
		cl.mu.Unlock()
		for _, inst := range gone {
			cl.s.log.Warn().Str("instance", inst).Dur("silent", 3*cl.alive).Msg("bus: an instance went silent; the RPC methods its sockets held are free")
			cl.applyClaims(inst, nil)
		}
	}
}

// claimed tells the others that e's socket holds its method.
func (cl *cluster) claimed(e *rpcEntry) {
	cl.publish(busMsg{Kind: busClaim, Claims: []rpcClaim{e.claim(cl.self)}})
}

// released tells the others that e's socket no longer holds its method.
func (cl *cluster) released(e *rpcEntry) {
	cl.publish(busMsg{Kind: busRelease, Acct: e.acct, Method: e.method, ID: e.sock})
}

// sendClaims publishes every method this instance's sockets hold, to.
func (cl *cluster) sendClaims(to string) {
	all := cl.s.rpc.holders(cl.self)
	for i := 0; i == 0 || i < len(all); i += maxClaimsPerMessage {
		part := all[i:min(i+maxClaimsPerMessage, len(all))]
		cl.publish(busMsg{Kind: busClaims, To: to, Seq: int64(len(all)), State: i == 0, Claims: part})
	}
}

// applyClaims makes claims the whole set of inst's claims and settles
// what that changes here.
func (cl *cluster) applyClaims(inst string, claims []rpcClaim) {
	next, demoted, reassert := cl.s.rpc.replaceInstance(inst, claims)
	for _, e := range demoted {
		cl.s.rpcDemoted(e)
	}
	for _, e := range reassert {
		cl.claimed(e)
	}
	for _, e := range next {
		cl.s.grantRPC(e)
	}
}

// publish sends m to the other instances; a failure is logged and
// counted (the others' sockets miss it; their clients catch up over HTTP).
func (cl *cluster) publish(m busMsg) {
	m.From = cl.self
	b, err := json.Marshal(m)
	if err == nil {
		ctx, cancel := context.WithTimeout(cl.s.ctx, 5*time.Second)
		err = cl.bus.Publish(ctx, b)
		cancel()
	}
	if err != nil {
		cl.publishErrors.Add(1)
		cl.s.metrics.busPublishErrors.Inc()
		cl.s.log.Warn().Err(err).Str("kind", m.Kind).Msg("bus publish")
	}
}

func roomNames(rooms []socket.Room) []string {
	out := make([]string, len(rooms))
	for i, r := range rooms {
		out[i] = string(r)
	}
	return out
}

func socketRooms(names []string) []socket.Room {
	out := make([]socket.Room, len(names))
	for i, r := range names {
		out[i] = socket.Room(r)
	}
	return out
}

// ownRooms reports whether every room belongs to acct (room names start
// with "user:<acct>:"): a message naming another account's rooms is dropped.
func ownRooms(acct string, rooms []string) bool {
	if acct == "" {
		return false
	}
	for _, r := range rooms {
		if r != "user:"+acct && !(len(r) > len(acct)+6 && r[:len(acct)+6] == "user:"+acct+":") {
			return false
		}
	}
	return true
}

// update publishes an update and sends it to this instance's sockets in
// the account's seq order.
func (cl *cluster) update(acct string, u wire.Update, rooms []socket.Room, wake string, state bool) {
	raw, err := json.Marshal(u)
	if err != nil {
		cl.s.log.Error().Err(err).Msg("encode update")
		return
	}
	names := roomNames(rooms)
	cl.publish(busMsg{Kind: busUpdate, Acct: acct, Rooms: names, Seq: u.Seq, Wake: wake, State: state, Body: raw})
	cl.deliverUpdate(acct, u.Seq, true, names, wake, state, raw, 0)
}

// deliverUpdate sends an update to this instance's sockets in the
// account's seq order. msg is the message seq of the row of wake's session
// a new-message carries (0 for other updates): a row sent before (a
// catch-up sent it, catchup.go) is not sent again.
func (cl *cluster) deliverUpdate(acct string, seq int64, local bool, rooms []string, wake string, state bool, raw json.RawMessage, msg int64) {
	cl.seqr.deliver(acct, seq, local, func() {
		if msg > 0 && !cl.sent.mark(acct, wake, msg, cl.s.cfg.Now()) {
			return
		}
		if wake != "" {
			cl.s.streams.notify(acct, wake, state)
		}
		cl.s.out.emit(acct, "update", raw, socketRooms(rooms))
	})
}

// messages publishes the new-message updates of one stored batch as one
// bus message (one row and one notification with the PostgreSQL bus,
// however many rows the batch created) and sends them to this instance's
// sockets in seq order.
func (cl *cluster) messages(acct, sid string, us []wire.Update, rooms []socket.Room) {
	names := roomNames(rooms)
	items := make([]busItem, 0, len(us))
	for _, u := range us {
		raw, err := json.Marshal(u)
		if err != nil {
			cl.s.log.Error().Err(err).Msg("encode update")
			return
		}
		var msg int64
		if b, ok := u.Body.(wire.BodyNewMessage); ok {
			msg = b.Message.Seq
		}
		items = append(items, busItem{Seq: u.Seq, Body: raw, Msg: msg})
	}
	cl.publish(busMsg{Kind: busUpdates, Acct: acct, Rooms: names, Wake: sid, Items: items})
	for _, it := range items {
		cl.deliverUpdate(acct, it.Seq, true, names, sid, false, it.Body, it.Msg)
	}
}

// ephemeral publishes an ephemeral (this instance's sockets already got it).
func (cl *cluster) ephemeral(acct string, payload any, rooms []socket.Room) {
	raw, err := json.Marshal(payload)
	if err != nil {
		return
	}
	m := busMsg{Kind: busEphemeral, Acct: acct, Rooms: roomNames(rooms), Body: raw}
	if x, ok := payload.(wire.Activity); ok && !x.Active {
		m.Wake, m.State = x.ID, true
	}
	cl.publish(m)
}

// receive handles one message of another instance (on the bus's goroutine).
func (cl *cluster) receive(b []byte) {
	var m busMsg
	if err := json.Unmarshal(b, &m); err != nil {
		cl.s.log.Warn().Err(err).Int("bytes", len(b)).Msg("bus: dropped a message that is not JSON")
		return
	}
	if m.From == cl.self || (m.To != "" && m.To != cl.self) {
		return
	}
	cl.received.Add(1)
	cl.lastRecv.Store(cl.s.cfg.Now().UnixNano())
	s := cl.s
	if m.Kind != busBye {
		cl.mu.Lock()
		cl.seen[m.From] = time.Now()
		cl.mu.Unlock()
	}
	switch m.Kind {
	case busUpdate:
		if !ownRooms(m.Acct, m.Rooms) || m.Seq <= 0 {
			return
		}
		cl.deliverUpdate(m.Acct, m.Seq, false, m.Rooms, m.Wake, m.State, m.Body, 0)
	case busUpdates:
		if !ownRooms(m.Acct, m.Rooms) {
			return
		}
		for _, it := range m.Items {
			if it.Seq > 0 {
				cl.deliverUpdate(m.Acct, it.Seq, false, m.Rooms, m.Wake, false, it.Body, it.Msg)
			}
		}
	case busSkip:
		if m.Acct == "" || m.Seq <= 0 || m.N <= 0 || m.N > maxSkip {
			return
		}
		for seq := m.Seq; seq < m.Seq+m.N; seq++ {
			cl.seqr.deliver(m.Acct, seq, false, func() {})
		}
	case busEphemeral:
		if !ownRooms(m.Acct, m.Rooms) {
			return
		}
		if m.Wake != "" {
			s.streams.notify(m.Acct, m.Wake, m.State)
		}
		s.out.emit(m.Acct, "ephemeral", m.Body, socketRooms(m.Rooms))
	case busStop:
		s.pres.stop(m.Acct, m.ID, s.cfg.Now())
	case busResume:
		s.pres.resume(m.Acct, m.ID)
	case busRevoke:
		s.setGeneration(m.Acct, m.Seq, s.cfg.Now())
		s.tok.Forget(m.Acct)
		s.io.In(socket.Room("user:" + m.Acct)).DisconnectSockets(true)
		s.streams.revoke(m.Acct)
	case busCall:
		cl.serve(m)
	case busAccept:
		cl.accepted(m)
	case busGo, busCancel:
		cl.mu.Lock()
		in := cl.serving[m.From+"\x00"+m.ID]
		cl.mu.Unlock()
		if in != nil {
			in.decide(m.Kind == busGo)
		}
	case busResult:
		cl.mu.Lock()
		out := cl.calls[m.ID]
		cl.mu.Unlock()
		if out != nil {
			select {
			case out.result <- m.Body:
			default:
			}
		}
	case busClaim:
		for _, c := range m.Claims {
			if c.Acct == "" || c.Method == "" {
				continue
			}
			c.Inst = m.From
			demoted, reassert := s.rpc.remoteClaim(c)
			if demoted != nil {
				s.rpcDemoted(demoted)
			}
			if reassert != nil {
				cl.claimed(reassert)
			}
		}
	case busRelease:
		if e := s.rpc.remoteRelease(m.From, m.Acct, m.Method, m.ID); e != nil {
			s.grantRPC(e)
		}
	case busAlive:
		if int64(s.rpc.instanceClaims(m.From)) != m.Seq {
			// A claim or release was lost on the way: ask for the whole set.
			cl.publish(busMsg{Kind: busSync, To: m.From})
		}
	case busHello, busSync:
		cl.sendClaims(m.From)
	case busClaims:
		cl.mu.Lock()
		sy := cl.syncs[m.From]
		if m.State || sy == nil {
			sy = &claimSync{total: int(m.Seq)}
			cl.syncs[m.From] = sy
		}
		sy.claims = append(sy.claims, m.Claims...)
		done := len(sy.claims) >= sy.total
		if done {
			delete(cl.syncs, m.From)
		}
		cl.mu.Unlock()
		if done {
			cl.applyClaims(m.From, sy.claims)
		}
	case busBye:
		cl.mu.Lock()
		delete(cl.seen, m.From)
		delete(cl.syncs, m.From)
		cl.mu.Unlock()
		cl.applyClaims(m.From, nil)
	default:
		s.log.Debug().Str("kind", m.Kind).Msg("bus: unknown message kind")
	}
}

// ---- RPC across instances ----

// outCall is an rpc-call of a local socket whose method is looked for on
// the other instances too.
type outCall struct {
	mu     sync.Mutex
	chosen string // "" until the local registry or an instance wins
	accept chan string
	result chan json.RawMessage
}

// claim makes who the call's target unless one was chosen already.
func (o *outCall) claim(who string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.chosen != "" {
		return false
	}
	o.chosen = who
	return true
}

// inCall is a call of another instance that this instance holds the
// method for, waiting for the caller's go or cancel.
type inCall struct {
	once      sync.Once
	goAhead   chan struct{}
	cancelled chan struct{}
}

func (in *inCall) decide(goAhead bool) {
	in.once.Do(func() {
		if goAhead {
			close(in.goAhead)
		} else {
			close(in.cancelled)
		}
	})
}

// call routes c's rpc-call of method (registered on no local socket when
// the call came in) to whichever instance first has a socket that
// registered it within RPCGrace: this one (a registration arriving here)
// or another (which answers accept; the caller then says go to the first
// and cancel to any later one, so the method runs once).
func (cl *cluster) call(c *conn, method string, params any, ack socket.Ack) {
	s := cl.s
	rawParams, err := json.Marshal(params)
	if err != nil {
		reply(ack, map[string]any{"ok": false, "error": "Invalid parameters"})
		return
	}
	id := store.NewID()
	out := &outCall{accept: make(chan string, 1), result: make(chan json.RawMessage, 1)}
	cl.mu.Lock()
	cl.calls[id] = out
	cl.mu.Unlock()
	defer func() {
		cl.mu.Lock()
		delete(cl.calls, id)
		cl.mu.Unlock()
	}()
	cl.publish(busMsg{Kind: busCall, Acct: c.acct, ID: id, Method: method, Body: rawParams})
	gctx, cancel := context.WithTimeout(c.ctx, s.cfg.RPCGrace)
	defer cancel()
	local := make(chan *rpcEntry, 1)
	go func() { local <- s.rpc.wait(gctx, c.acct, method) }()
	select {
	case e := <-local:
		if e != nil && out.claim(cl.self) {
			cl.publish(busMsg{Kind: busCancel, ID: id})
			s.callLocal(c, e, method, params, ack)
			return
		}
		if e == nil && out.claim(cl.self) {
			cl.publish(busMsg{Kind: busCancel, ID: id})
			if c.ctx.Err() == nil {
				reply(ack, map[string]any{"ok": false, "error": errRPCNotAvailable})
			}
			return
		}
		// An instance won meanwhile: its accept is in out.accept.
		<-out.accept
	case <-out.accept:
		cancel()
		go func() { <-local }()
	}
	timer := time.NewTimer(s.cfg.RPCCallTimeout + 5*time.Second)
	defer timer.Stop()
	select {
	case body := <-out.result:
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			v = map[string]any{"ok": false, "error": "Internal error"}
		}
		reply(ack, v)
	case <-timer.C:
		// The instance holding the callee went away mid-call.
		reply(ack, map[string]any{"ok": false, "error": errRPCTimeout})
	case <-c.ctx.Done():
		if s.ctx.Err() != nil {
			reply(ack, map[string]any{"ok": false, "error": "Server shutting down"})
		}
	}
}

// accepted handles an instance's accept of one of our calls.
func (cl *cluster) accepted(m busMsg) {
	cl.mu.Lock()
	out := cl.calls[m.ID]
	cl.mu.Unlock()
	if out == nil || !out.claim(m.From) {
		cl.publish(busMsg{Kind: busCancel, To: m.From, ID: m.ID})
		return
	}
	cl.publish(busMsg{Kind: busGo, To: m.From, ID: m.ID})
	out.accept <- m.From
}

// serve looks, for RPCGrace, for a local socket that registered the
// method of another instance's call; when one is there it offers to take
// the call and, told to go, forwards it and publishes the answer.
func (cl *cluster) serve(m busMsg) {
	s := cl.s
	key := m.From + "\x00" + m.ID
	in := &inCall{goAhead: make(chan struct{}), cancelled: make(chan struct{})}
	cl.mu.Lock()
	cl.serving[key] = in
	cl.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			cl.mu.Lock()
			delete(cl.serving, key)
			cl.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.RPCGrace)
		defer cancel()
		// A cancel before the method shows up here ends the wait.
		go func() {
			select {
			case <-in.cancelled:
				cancel()
			case <-ctx.Done():
			}
		}()
		e := s.rpc.wait(ctx, m.Acct, m.Method)
		if e == nil {
			return
		}
		cl.publish(busMsg{Kind: busAccept, To: m.From, ID: m.ID})
		select {
		case <-ctx.Done():
			return
		case <-in.cancelled:
			return
		case <-in.goAhead:
		}
		var params any
		if len(m.Body) > 0 {
			params = m.Body
		}
		res := s.forward(s.ctx, e, m.Method, params)
		if res == nil {
			res = map[string]any{"ok": false, "error": "Server shutting down"}
		}
		body, _ := json.Marshal(res)
		cl.publish(busMsg{Kind: busResult, To: m.From, ID: m.ID, Body: body})
	}()
}

// ---- ordering ----

// sequencer sends each account's updates to this instance's sockets in
// seq order, whichever instance allocated them: an update whose
// predecessor has not arrived is held until it does, or for at most the
// reorder wait (the predecessor's instance died before publishing, or its
// publish failed); then the held ones go out in order. An account first
// seen through another instance's update holds it for the wait too, so
// that a lower seq still on its way is not overtaken; first seen through
// an update allocated here, it starts there at once (a lower seq of
// another instance still on its way then goes out late, counted).
type sequencer struct {
	wait time.Duration
	now  func() time.Time

	mu    sync.Mutex
	accts map[string]*acctSeq

	held, gaps, late atomic.Int64
}

type acctSeq struct {
	next  int64 // the seq expected next; 0 before the first
	held  map[int64]func()
	timer *time.Timer
	seen  time.Time
}

func newSequencer(wait time.Duration, now func() time.Time) *sequencer {
	return &sequencer{wait: wait, now: now, accts: map[string]*acctSeq{}}
}

// touch returns acct's state (made on first use) and marks it seen now;
// q.mu is held.
func (q *sequencer) touch(acct string) *acctSeq {
	a := q.accts[acct]
	if a == nil {
		a = &acctSeq{held: map[int64]func(){}}
		q.accts[acct] = a
	}
	a.seen = q.now()
	return a
}

func (q *sequencer) deliver(acct string, seq int64, local bool, emit func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.touch(acct)
	if a.next == 0 && local && len(a.held) == 0 {
		a.next = seq
	}
	switch {
	case a.next != 0 && seq == a.next:
		emit()
		a.next++
		q.drain(a)
	case a.next != 0 && seq < a.next:
		// Given up on (the wait ended) or a repeat: late beats never.
		q.late.Add(1)
		emit()
	default:
		if _, dup := a.held[seq]; dup {
			return
		}
		a.held[seq] = emit
		q.held.Add(1)
		if a.timer == nil {
			a.timer = time.AfterFunc(q.wait, func() { q.flush(acct, a) })
		}
	}
}

// drain sends the held updates that follow on.
func (q *sequencer) drain(a *acctSeq) {
	for {
		f, ok := a.held[a.next]
		if !ok {
			break
		}
		delete(a.held, a.next)
		q.held.Add(-1)
		f()
		a.next++
	}
	if len(a.held) == 0 && a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

// flush gives up waiting: the held updates go out in seq order.
func (q *sequencer) flush(acct string, a *acctSeq) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.accts[acct] != a {
		return
	}
	a.timer = nil
	if len(a.held) == 0 {
		return
	}
	seqs := make([]int64, 0, len(a.held))
	for s := range a.held {
		seqs = append(seqs, s)
	}
	slices.Sort(seqs)
	if a.next != 0 && seqs[0] != a.next {
		q.gaps.Add(1)
	}
	a.next = seqs[0]
	q.drain(a)
	if len(a.held) > 0 {
		// A gap further on: wait for it in turn.
		a.timer = time.AfterFunc(q.wait, func() { q.flush(acct, a) })
	}
}

// resync makes next the account's next seq: the held updates before it
// go out first, in seq order (their predecessors were lost in a bus gap),
// then those that follow on. An update before next arriving later goes out
// late.
func (q *sequencer) resync(acct string, next int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.touch(acct)
	var below []int64
	for s := range a.held {
		if s < next {
			below = append(below, s)
		}
	}
	slices.Sort(below)
	for _, s := range below {
		f := a.held[s]
		delete(a.held, s)
		q.held.Add(-1)
		f()
	}
	if next > a.next {
		a.next = next
	}
	q.drain(a)
}

// forget drops the state of accounts without an update for idle.
func (q *sequencer) forget(idle time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cut := q.now().Add(-idle)
	for acct, a := range q.accts {
		if len(a.held) == 0 && a.seen.Before(cut) {
			delete(q.accts, acct)
		}
	}
}

// depth is the number of updates held now.
func (q *sequencer) depth() int64 { return q.held.Load() }

// stop stops the timers (the server is closing).
func (q *sequencer) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, a := range q.accts {
		if a.timer != nil {
			a.timer.Stop()
			a.timer = nil
		}
	}
}
