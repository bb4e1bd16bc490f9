package app

import (
	"sync"

	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/session"
)

// liveSender emits the live text deltas of a session (docs/ARCHITECTURE.md,
// section "Live text"): observe runs on the runner's goroutine, turns the
// reducer's changes into deltas and queues them without blocking; one
// goroutine seals and emits them. A full queue drops deltas (readers then
// wait for the stored version), so the runner never waits for the network.
type liveSender struct {
	em *session.LiveEmitter
	ch chan []byte
	wg sync.WaitGroup

	mu     sync.Mutex
	closed bool
}

// liveQueue is how many deltas may wait for the socket.
const liveQueue = 256

func startLive(sess *relay.Session) *liveSender {
	l := &liveSender{em: session.NewLiveEmitter(), ch: make(chan []byte, liveQueue)}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for b := range l.ch {
			sess.SendTextDelta(b)
		}
	}()
	return l
}

// observe queues the deltas of evs.
func (l *liveSender) observe(evs []mapper.BusEvent) {
	for _, d := range l.em.Observe(evs) {
		b, err := session.EncodeLiveDelta(d)
		if err != nil {
			continue
		}
		l.mu.Lock()
		if !l.closed {
			select {
			case l.ch <- b:
			default:
			}
		}
		l.mu.Unlock()
	}
}

// stop ends the sender after what is queued.
func (l *liveSender) stop() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.ch)
	}
	l.mu.Unlock()
	l.wg.Wait()
}
