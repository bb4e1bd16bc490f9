package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// conn keeps one Socket connected: it dials, installs the handlers, runs
// onConnect after every (re)connection, sends the presence heartbeat, and
// after a loss dials again with back-off. A relay that is down is retried
// forever (until ctx ends); a refused token is retried at the longest delay.
type conn struct {
	dial     Dialer
	baseURL  string
	auth     func(ctx context.Context) (map[string]any, error) // may wait (e.g. for the session id)
	handlers map[string]func(args []any, ack func(reply ...any))
	// onConnect runs after every successful connection, before the
	// heartbeat starts (re-register RPC methods, re-fetch messages).
	onConnect  func(ctx context.Context, s Socket)
	alive      func() (event string, payload any) // heartbeat; nil for none
	aliveEvery time.Duration
	backoff    Backoff
	log        zerolog.Logger

	mu      sync.Mutex
	sock    Socket
	ready   chan struct{} // closed while connected
	lastErr error

	connects atomic.Int64
}

func (c *conn) init() {
	c.ready = make(chan struct{})
}

// current returns the connected socket and a channel closed once connected.
func (c *conn) current() (Socket, chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sock, c.ready
}

// wait returns the connected socket, waiting at most until ctx ends. The
// error wraps ErrUnavailable (with the last dial error) when ctx ends first.
func (c *conn) wait(ctx context.Context) (Socket, error) {
	for {
		s, ready := c.current()
		if s != nil && s.Connected() {
			return s, nil
		}
		select {
		case <-ready:
			if s2, _ := c.current(); s2 != nil {
				return s2, nil
			}
		case <-ctx.Done():
			c.mu.Lock()
			last := c.lastErr
			c.mu.Unlock()
			if last != nil {
				return nil, fmt.Errorf("relay: not connected (last error: %v): %w", last, ErrUnavailable)
			}
			return nil, fmt.Errorf("relay: not connected: %w", ErrUnavailable)
		}
	}
}

func (c *conn) setErr(err error) {
	c.mu.Lock()
	c.lastErr = err
	c.mu.Unlock()
}

// run connects and reconnects until ctx ends.
func (c *conn) run(ctx context.Context) {
	for ctx.Err() == nil {
		auth, err := c.auth(ctx)
		if err != nil {
			return // only when ctx ended
		}
		s, err := c.dial(ctx, c.baseURL, auth)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.setErr(err)
			d := c.backoff.Next()
			if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrRejected) {
				_, hi := c.backoff.bounds()
				d = hi
			}
			c.log.Debug().Err(err).Dur("retry_in", d).Msg("socket connect failed")
			if !sleep(ctx, d) {
				return
			}
			continue
		}
		lost := make(chan string, 1)
		s.OnDisconnect(func(reason string) {
			select {
			case lost <- reason:
			default:
			}
		})
		for ev, h := range c.handlers {
			s.On(ev, h)
		}
		c.mu.Lock()
		c.sock = s
		c.lastErr = nil
		close(c.ready)
		c.mu.Unlock()
		c.connects.Add(1)
		c.backoff.Reset()
		c.log.Debug().Msg("socket connected")
		if c.onConnect != nil {
			c.onConnect(ctx, s)
		}
		reason := c.hold(ctx, s, lost)
		c.mu.Lock()
		c.sock = nil
		c.ready = make(chan struct{})
		c.mu.Unlock()
		_ = s.Close()
		if ctx.Err() != nil {
			return
		}
		c.setErr(fmt.Errorf("connection lost: %s", reason))
		d := c.backoff.Next()
		c.log.Debug().Str("reason", reason).Dur("retry_in", d).Msg("socket disconnected")
		if !sleep(ctx, d) {
			return
		}
	}
}

// hold runs the heartbeat until the connection is lost or ctx ends, and
// returns the reason.
func (c *conn) hold(ctx context.Context, s Socket, lost chan string) string {
	var tick <-chan time.Time
	if c.alive != nil && c.aliveEvery > 0 {
		t := time.NewTicker(c.aliveEvery)
		defer t.Stop()
		tick = t.C
		c.sendAlive(s)
	}
	// A connection can drop before OnDisconnect was registered; poll the
	// state as a fallback so such a loss is noticed too.
	check := time.NewTicker(time.Second)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return "closed"
		case r := <-lost:
			return r
		case <-tick:
			c.sendAlive(s)
		case <-check.C:
			if !s.Connected() {
				return "not connected"
			}
		}
	}
}

func (c *conn) sendAlive(s Socket) {
	ev, payload := c.alive()
	if err := s.Emit(ev, payload); err != nil {
		c.log.Debug().Err(err).Str("event", ev).Msg("heartbeat not sent")
	}
}

// Connects is the number of successful connections so far (1 + reconnects).
func (c *conn) Connects() int64 { return c.connects.Load() }
