package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// NATSSubject is the subject every relay instance publishes to and
// subscribes on.
const NATSSubject = "happy.relay.bus"

// natsBus is core NATS: at most once, ordered per connection; NoEcho keeps
// an instance's own messages from coming back to it.
type natsBus struct {
	nc   *nats.Conn
	mu   sync.Mutex
	sub  *nats.Subscription
	done chan struct{}

	// onResume is called after the client reconnected (OnResume).
	onResume func()
}

func (b *natsBus) OnResume(fn func()) { b.onResume = fn }

// OpenNATS connects to the NATS server at url (nats://host:port, several
// comma-separated for a cluster; credentials in the URL). It reconnects
// on its own, forever, with a 1 s wait between attempts, buffering up to
// 8 MiB of publishes meanwhile.
func OpenNATS(ctx context.Context, url string) (Bus, error) {
	opts := []nats.Option{
		nats.Name("happy-relay"),
		nats.NoEcho(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.ReconnectBufSize(8 << 20),
		nats.Timeout(5 * time.Second),
	}
	if dl, ok := ctx.Deadline(); ok {
		opts = append(opts, nats.Timeout(time.Until(dl)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to NATS %s: %w", redact(url), err)
	}
	return &natsBus{nc: nc}, nil
}

func (b *natsBus) Publish(_ context.Context, msg []byte) error {
	if len(msg) > MaxMessage {
		return ErrTooLarge
	}
	if err := b.nc.Publish(NATSSubject, msg); err != nil {
		if errors.Is(err, nats.ErrConnectionClosed) {
			return ErrClosed
		}
		return fmt.Errorf("bus: NATS publish: %w", err)
	}
	return nil
}

func (b *natsBus) Start(deliver func([]byte)) error {
	// A channel subscription keeps the order and lets one goroutine of
	// ours deliver; the channel is deep so that a burst does not make the
	// client drop messages as a slow consumer.
	ch := make(chan *nats.Msg, 65536)
	sub, err := b.nc.ChanSubscribe(NATSSubject, ch)
	if err != nil {
		return fmt.Errorf("bus: NATS subscribe: %w", err)
	}
	if err := b.nc.Flush(); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("bus: NATS subscribe: %w", err)
	}
	b.mu.Lock()
	b.sub, b.done = sub, make(chan struct{})
	done := b.done
	b.mu.Unlock()
	// The client reports a reconnection on its own goroutine, after it
	// subscribed again: the delivery goroutine first delivers what is
	// waiting, then calls onResume.
	resumed := make(chan struct{}, 1)
	if b.onResume != nil {
		b.nc.SetReconnectHandler(func(*nats.Conn) {
			select {
			case resumed <- struct{}{}:
			default:
			}
		})
	}
	go func() {
		for {
			select {
			case m := <-ch:
				deliver(m.Data)
			case <-resumed:
				for n := len(ch); n > 0; n-- {
					deliver((<-ch).Data)
				}
				b.onResume()
			case <-done:
				return
			}
		}
	}()
	return nil
}

func (b *natsBus) Ready(ctx context.Context) error {
	if !b.nc.IsConnected() {
		return fmt.Errorf("bus: NATS not connected (%s)", b.nc.Status())
	}
	if _, ok := ctx.Deadline(); !ok {
		return b.nc.FlushTimeout(5 * time.Second)
	}
	return b.nc.FlushWithContext(ctx)
}

func (b *natsBus) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		close(b.done)
		b.done = nil
	}
	b.nc.Close()
	return nil
}
