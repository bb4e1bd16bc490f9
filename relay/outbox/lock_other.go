//go:build !unix

package outbox

import (
	"fmt"
	"sync"
)

// lockState records the sessions locked in this process.
type lockState struct {
	mu   sync.Mutex
	held map[string]bool
}

// Lock takes the exclusive ownership lock of session. Without flock(2) it
// only excludes other owners in this process; two processes may then both
// send a session's rows, which stays correct (localIds make resends
// idempotent) but wastes requests.
func (s *Store) Lock(session string) (unlock func(), err error) {
	l := &s.locks
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]bool{}
	}
	if l.held[session] {
		return nil, fmt.Errorf("%w: %q", ErrLocked, session)
	}
	l.held[session] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.held, session)
			l.mu.Unlock()
		})
	}, nil
}

// PruneLocks has nothing to remove where locks live in this process only.
func (s *Store) PruneLocks() (int, error) { return 0, nil }
