package relay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/happy-dev/happy/internal/sio"
)

// Socket is the Socket.IO connection the relay client needs, kept small so
// the library under it can change (internal/sio today). Payloads follow the
// JSON model of the library: objects arrive as map[string]any, numbers as
// float64. Implementations are safe for concurrent use.
type Socket interface {
	// On registers h for a server event. Handlers of one socket run one at a
	// time in arrival order and must not block; ack is nil unless the server
	// asked for an acknowledgement.
	On(event string, h func(args []any, ack func(reply ...any)))
	// OnDisconnect registers fn, called with a reason when the connection is lost.
	OnDisconnect(fn func(reason string))
	// Emit sends an event without waiting for an acknowledgement.
	Emit(event string, args ...any) error
	// Call sends an event and waits for its acknowledgement until ctx ends.
	Call(ctx context.Context, event string, args ...any) ([]any, error)
	// Connected reports whether the connection is up.
	Connected() bool
	// Close disconnects for good.
	Close() error
}

// Dialer opens a Socket to the relay at baseURL with the handshake auth
// object, waiting until the relay accepted or refused it. A refusal about
// the token must wrap ErrUnauthorized, another refusal ErrRejected, and a
// connection failure ErrUnavailable.
type Dialer func(ctx context.Context, baseURL string, auth map[string]any) (Socket, error)

// SIODialer is the default Dialer (Socket.IO v4 over websocket at
// /v1/updates, no library reconnection: the client reconnects itself).
func SIODialer(connectTimeout time.Duration) Dialer {
	return func(ctx context.Context, baseURL string, auth map[string]any) (Socket, error) {
		c, err := sio.Dial(ctx, baseURL, sio.Options{Path: sio.DefaultPath, Auth: auth, ConnectTimeout: connectTimeout})
		if err != nil {
			var ce *sio.ConnectError
			if errors.As(err, &ce) {
				low := strings.ToLower(ce.Message)
				if strings.Contains(low, "token") || strings.Contains(low, "auth") {
					return nil, fmt.Errorf("relay: socket: %s: %w", ce.Message, ErrUnauthorized)
				}
				if strings.Contains(low, "required") {
					return nil, fmt.Errorf("relay: socket: %s: %w", ce.Message, ErrRejected)
				}
			}
			if ctx.Err() != nil {
				return nil, fmt.Errorf("relay: socket: %w", ctx.Err())
			}
			return nil, fmt.Errorf("relay: socket: %w: %v", ErrUnavailable, err)
		}
		return sioSocket{c}, nil
	}
}

type sioSocket struct{ c *sio.Client }

func (s sioSocket) On(event string, h func(args []any, ack func(reply ...any))) {
	s.c.On(event, sio.Handler(h))
}
func (s sioSocket) OnDisconnect(fn func(reason string)) { s.c.OnDisconnect(fn) }
func (s sioSocket) Emit(event string, args ...any) error {
	if err := s.c.Emit(event, args...); err != nil {
		return fmt.Errorf("relay: %w: %v", ErrUnavailable, err)
	}
	return nil
}
func (s sioSocket) Call(ctx context.Context, event string, args ...any) ([]any, error) {
	r, err := s.c.Call(ctx, event, args...)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("relay: %s: no acknowledgement: %w: %v", event, ErrUnavailable, err)
	}
	return r, nil
}
func (s sioSocket) Connected() bool { return s.c.Connected() }

// closeWait bounds Close: the library can invoke an acknowledgement
// callback a second time while disconnecting (a timeout or a late ack racing
// with the disconnect), and internal/sio's Call callback then blocks on its
// full result channel, so Disconnect never returns. The connection loop must
// go on regardless; the stuck goroutine belongs to a socket already dropped.
const closeWait = 2 * time.Second

func (s sioSocket) Close() error {
	done := make(chan struct{})
	go func() {
		_ = s.c.Close()
		close(done)
	}()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("relay: socket close did not finish within %s", closeWait)
	}
}
