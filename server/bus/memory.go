package bus

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/happy-dev/happy/internal/queue"
)

// Memory is an in-process bus: the instances of one process that joined
// the same Memory reach each other. The zero value is ready.
type Memory struct {
	mu      sync.Mutex
	members map[*memberBus]struct{}
}

// Join returns a new instance's Bus on m.
func (m *Memory) Join() Bus {
	b := &memberBus{hub: m, q: queue.New[[]byte]()}
	m.mu.Lock()
	if m.members == nil {
		m.members = map[*memberBus]struct{}{}
	}
	m.members[b] = struct{}{}
	m.mu.Unlock()
	return b
}

type memberBus struct {
	hub     *Memory
	q       *queue.Unbounded[[]byte]
	once    sync.Once
	started atomic.Bool
}

func (b *memberBus) Publish(_ context.Context, msg []byte) error {
	if len(msg) > MaxMessage {
		return ErrTooLarge
	}
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	if _, ok := b.hub.members[b]; !ok {
		return ErrClosed
	}
	for o := range b.hub.members {
		if o != b {
			o.q.Push(append([]byte(nil), msg...))
		}
	}
	return nil
}

func (b *memberBus) Start(deliver func([]byte)) error {
	b.started.Store(true)
	go func() {
		for msg := range b.q.Out() {
			deliver(msg)
		}
	}()
	return nil
}

func (b *memberBus) Ready(context.Context) error {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	if _, ok := b.hub.members[b]; !ok {
		return ErrClosed
	}
	return nil
}

func (b *memberBus) Close() error {
	b.once.Do(func() {
		b.hub.mu.Lock()
		delete(b.hub.members, b)
		b.hub.mu.Unlock()
		b.q.Close()
		if !b.started.Load() {
			go func() {
				for range b.q.Out() {
				}
			}()
		}
		b.q.Wait()
	})
	return nil
}
