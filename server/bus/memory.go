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
	b := &memberBus{hub: m, q: queue.New[memItem]()}
	m.mu.Lock()
	if m.members == nil {
		m.members = map[*memberBus]struct{}{}
	}
	m.members[b] = struct{}{}
	m.mu.Unlock()
	return b
}

// Cut simulates a lost connection of b (a Bus of m's Join): until Resume,
// what the others publish does not reach b, and b's own publishes do not
// reach them; Publish still succeeds, as a publish into a connection
// about to fail would.
func (m *Memory) Cut(b Bus) {
	if mb, ok := b.(*memberBus); ok && mb.hub == m {
		mb.cut.Store(true)
	}
}

// Resume ends b's Cut: b gets the others' messages again and its
// OnResume function is called, after what b got before the Cut and before
// anything published from now on.
func (m *Memory) Resume(b Bus) {
	mb, ok := b.(*memberBus)
	if !ok || mb.hub != m {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if mb.cut.Swap(false) {
		mb.q.Push(memItem{resume: true})
	}
}

// memItem is a message, or the mark of a Resume.
type memItem struct {
	msg    []byte
	resume bool
}

type memberBus struct {
	hub      *Memory
	q        *queue.Unbounded[memItem]
	once     sync.Once
	started  atomic.Bool
	cut      atomic.Bool
	onResume func()
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
	if b.cut.Load() {
		return nil
	}
	for o := range b.hub.members {
		if o != b && !o.cut.Load() {
			o.q.Push(memItem{msg: append([]byte(nil), msg...)})
		}
	}
	return nil
}

func (b *memberBus) OnResume(fn func()) { b.onResume = fn }

func (b *memberBus) Start(deliver func([]byte)) error {
	b.started.Store(true)
	go func() {
		for it := range b.q.Out() {
			switch {
			case !it.resume:
				deliver(it.msg)
			case b.onResume != nil:
				b.onResume()
			}
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
