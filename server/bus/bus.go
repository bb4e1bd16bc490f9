// Package bus carries messages between the relay instances that share one
// database (docs/ARCHITECTURE.md, section "Several relays"): every message
// one instance publishes reaches every other instance once, in the order
// that instance published it. What the messages mean (an update for an
// account's rooms, an ephemeral, an RPC call routed to the instance whose
// socket registered the method) is the server's business; the bus moves
// opaque bytes.
//
// Three engines implement Bus:
//   - Memory: instances in one process (tests, and the single-instance
//     default, where a relay joins no bus at all);
//   - NATS (nats://host:port): core NATS publish/subscribe on one subject,
//     at most once, ordered per publisher;
//   - Postgres (postgres://…): LISTEN/NOTIFY on the relay's own database.
//     A notification carries only the id of a row of bus_events; the
//     receiver reads the payload from that row (NOTIFY payloads stop at
//     8000 bytes, a relay message does not).
//
// None of them stores messages for an instance that is not connected: an
// instance that lost its connection misses what was published meanwhile.
// Each engine therefore tells its instance (Resumer) when its
// subscription is back after such a gap, so that the instance catches its
// clients up from the store.
package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Bus is one instance's connection to the others.
type Bus interface {
	// Publish sends msg (at most MaxMessage bytes) to every other instance.
	// Messages of one publisher arrive in the order Publish was called.
	// An error means the message may not have been sent.
	Publish(ctx context.Context, msg []byte) error
	// Start begins delivering the other instances' messages to deliver,
	// one at a time, in arrival order, on one goroutine the bus owns.
	// deliver must not block for long. Start is called once.
	Start(deliver func(msg []byte)) error
	// Ready reports whether the bus can carry messages now (nil), for the
	// relay's /ready.
	Ready(ctx context.Context) error
	// Close stops delivering and releases the connection.
	Close() error
}

// Resumer is implemented by every engine here. OnResume sets the function
// called each time the subscription is established again after it was
// lost (the messages published meanwhile are lost): on the delivery
// goroutine, after every message that arrived before the loss. With the
// PostgreSQL and in-process engines it also comes before any message that
// arrived over the new subscription; NATS calls it beside them (its
// client resubscribes before it reports the reconnection). Call OnResume
// before Start.
type Resumer interface {
	OnResume(fn func())
}

// MaxMessage bounds one message in bytes (a socket event is at most 1 MB,
// plus the envelope).
const MaxMessage = 4 << 20

// ErrTooLarge is Publish's error for a message over MaxMessage.
var ErrTooLarge = errors.New("bus: message too large")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("bus: closed")

// Open connects to the bus named by url: nats://… (NATS) or postgres://…,
// postgresql://… (LISTEN/NOTIFY on that database).
func Open(ctx context.Context, url string) (Bus, error) {
	switch {
	case strings.HasPrefix(url, "nats://"), strings.HasPrefix(url, "tls://"):
		return OpenNATS(ctx, url)
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return OpenPostgres(ctx, url)
	}
	return nil, fmt.Errorf("bus: unknown bus %q: want nats://host:port or postgres://…", redact(url))
}

// redact hides a URL's password.
func redact(u string) string {
	at := strings.LastIndex(u, "@")
	if at < 0 {
		return u
	}
	scheme := strings.Index(u, "://")
	colon := strings.Index(u[max(scheme+3, 0):at], ":")
	if scheme < 0 || colon < 0 {
		return u
	}
	return u[:scheme+3+colon+1] + "xxxxx" + u[at:]
}
