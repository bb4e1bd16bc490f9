package server

import (
	"strings"

	"github.com/zishang520/socket.io/parsers/engine/v3/packet"
	"github.com/zishang520/socket.io/parsers/socket/v3/parser"
	"github.com/zishang520/socket.io/servers/socket/v3"
	"github.com/zishang520/socket.io/v3/pkg/types"

	"github.com/happy-dev/happy/server/wstransport"
)

// roomAdapter is the Socket.IO library's in-memory room adapter with a
// cheaper Broadcast for the relay's fan-out.
//
// The library's own Broadcast hands every socket a "pre-encoded websocket
// frame", which its websocket transport turns into a fresh
// gorilla/websocket PreparedMessage per socket: a 4 KiB scratch connection
// buffer, a map and several frame buffers for every recipient of every
// update. That garbage was a fifth of the relay's CPU under fan-out and
// the GC pauses it caused were most of the p99. Here the packet is encoded
// once and each transport writes it through its own reusable buffer.
type roomAdapter struct {
	socket.Adapter
}

// roomAdapterBuilder builds a roomAdapter per namespace (socket.AdapterConstructor).
type roomAdapterBuilder struct{}

// New implements socket.AdapterConstructor.
func (roomAdapterBuilder) New(nsp socket.Namespace) socket.Adapter {
	a := &roomAdapter{Adapter: socket.MakeAdapter()}
	// The library dispatches its adapter's internal calls through the
	// prototype, so the override must be registered as the prototype.
	a.Prototype(a)
	a.Construct(nsp)
	return a
}

// Broadcast sends packet to every connected socket in opts' rooms, minus
// opts' exceptions (socket.Adapter). The Socket.IO packet is encoded once;
// each socket's engine gets a reader over the same string, which its
// transport copies once behind the Engine.IO message type byte. Binary
// packets (more than one encoded part) and acked broadcasts keep the
// library's implementation.
func (a *roomAdapter) Broadcast(pkt *parser.Packet, opts *socket.BroadcastOptions) {
	pkt.Nsp = a.Nsp().Name()
	encoded := a.Nsp().Server().Encoder().Encode(pkt)
	if len(encoded) != 1 {
		a.Adapter.Broadcast(pkt, opts)
		return
	}
	text, ok := encoded[0].(*types.StringBuffer)
	if !ok {
		a.Adapter.Broadcast(pkt, opts)
		return
	}
	frame := text.String()
	var wsFrame []byte // built on first use: only our transport takes it
	volatile := false
	var compress *bool
	if opts != nil && opts.Flags != nil {
		volatile = opts.Flags.Volatile
		compress = opts.Flags.Compress
	}
	a.FetchSockets(opts)(func(sockets []socket.SocketDetails, _ error) {
		for _, sd := range sockets {
			s, ok := sd.(*socket.Socket)
			if !ok {
				continue
			}
			if notify := s.NotifyOutgoingListeners(); notify != nil {
				notify(pkt)
			}
			conn := s.Conn()
			if t, ok := conn.Transport().(*wstransport.Transport); ok {
				if wsFrame == nil {
					wsFrame = wstransport.TextFrame(text.Bytes())
				}
				t.SendFrames([][]byte{wsFrame})
				continue
			}
			if volatile && !conn.Transport().Writable() {
				continue
			}
			conn.Write(strings.NewReader(frame), &packet.Options{Compress: compress}, nil)
		}
	})
}

// each calls fn for every connected socket in one of rooms (fanout.go);
// no rooms is nobody (the library's "no rooms" is everyone). A socket in
// several of rooms is passed once per room: the caller drops repeats (the
// round writer does, per transport). Unlike the library's FetchSockets it
// builds no set of the sockets seen nor a slice of them, only the ids of
// each room (one slice per room): that garbage was a quarter of what the
// fan-out of a message allocated.
func (a *roomAdapter) each(rooms []socket.Room, fn func(*socket.Socket)) {
	all := a.Rooms()
	sockets := a.Nsp().Sockets()
	for _, r := range rooms {
		ids, ok := all.Load(r)
		if !ok {
			continue
		}
		for _, id := range ids.Keys() {
			if s, ok := sockets.Load(id); ok && s.Connected() {
				fn(s)
			}
		}
	}
}
