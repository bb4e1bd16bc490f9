// Package wstransport is the relay's websocket transport under the
// Socket.IO library (github.com/zishang520/socket.io): its own RFC 6455
// upgrade (upgrade.go), frame reader (read.go), writer (transport.go) and
// the Engine.IO v4 heartbeat (heartbeat.go), plugged in through the
// library's transport extension point (Ctor, registered with
// SetTransports; Ctor.Upgrades serves the upgrades).
//
// Why our own and not gorilla/websocket (the library's) or
// coder/websocket: what an idle socket costs (docs/ARCHITECTURE.md,
// "Idle sockets"). A relay holds many sockets that mostly wait; the
// library's transport kept per socket a reader goroutine parked deep in
// gorilla's reader (an 8 KiB stack), gorilla's 1 KiB read and write
// buffers, the upgrade request, a goroutine per armed heartbeat timer and
// one per batch sent. Here an idle socket holds a shallow reader stack,
// no buffer (a read buffer comes from a pool only while a frame arrives),
// no writer goroutine (one runs only while something is queued) and one
// runtime timer. A library is worth going back to only if a socket on it
// stays within the same memory (24 KiB; the relay's BenchmarkGenIdleSockets
// measures it). The writer also takes the relay's broadcast frames, built
// once for all recipients, with one non-blocking write each.
//
// What the rest of the relay uses is small: a Ctor (NewCtor, Upgrades,
// Drain, Backlog and the counters), the Transport of a socket
// (SendFrames, OpenGate, SetReads with a Reads told of each message read)
// and TextFrame. It imports nothing of happy's.
package wstransport
