// Package relay is happy's client of the relay (the reference happy-server
// contract, implemented by `happy server` too): the HTTP API, the Socket.IO
// connection for RPC, presence and state updates, and the durable outbox that
// delivers every encrypted message version exactly once.
package relay
