package session

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
)

// lockedBuf is a log writer safe for the runner goroutine and the test.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.b.String()), "\n")
}

// A sink that cannot write (the outbox's disk is full) is logged and
// reported once when it starts failing, however many changes fail after,
// and once when it works again.
func TestRunnerReportsAFailingSinkOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log lockedBuf
		var mu sync.Mutex
		var reports []error
		h := newHarness(t, Options{Log: zerolog.New(&log), OnFlushFailing: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, err)
		}})
		defer func() { close(h.agent.events); h.wait() }()
		full := fmt.Errorf("outbox: commit: %w", &fs.PathError{Op: "write", Path: "/h/outbox.db-wal", Err: syscall.ENOSPC})
		h.store.mu.Lock()
		h.store.failed = full
		h.store.mu.Unlock()
		h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"})
		for i := range 200 {
			h.agent.emit(&agent.TextDelta{Message: "m1", Block: "0", Delta: fmt.Sprintf("w%d ", i)}, &agent.StepFinished{Message: "m1", Finish: agent.FinishStop})
			synctest.Wait()
		}
		mu.Lock()
		got := append([]error(nil), reports...)
		mu.Unlock()
		if len(got) != 1 || !errors.Is(got[0], full) || !strings.HasPrefix(got[0].Error(), "session sink: write ses_") {
			t.Fatalf("reports while failing: %q, want one: %q", got, full)
		}
		if l := log.lines(); len(l) != 1 || !strings.Contains(l[0], `"message":"relay sink flush failed; will retry at each change (further failures are not logged)"`) || !strings.Contains(l[0], "no space left on device") {
			t.Fatalf("log while failing: %d lines: %q", len(l), l)
		}

		h.store.mu.Lock()
		h.store.failed = nil
		h.store.mu.Unlock()
		h.agent.emit(&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		synctest.Wait()
		mu.Lock()
		got = append([]error(nil), reports...)
		mu.Unlock()
		if len(got) != 2 || got[1] != nil {
			t.Fatalf("reports after recovery: %q, want the failure then <nil>", got)
		}
		if l := log.lines(); len(l) != 2 || !strings.Contains(l[1], `"message":"relay sink flush works again"`) {
			t.Fatalf("log after recovery: %q", l)
		}
	})
}

// A sink that works again only for the run's last flush (the disk freed
// after the agent's last event) is reported as working again too, so the
// person told that messages were kept in memory only hears that they were
// stored.
func TestRunnerReportsASinkWorkingAgainAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var reports []error
		h := newHarness(t, Options{Log: zerolog.Nop(), OnFlushFailing: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reports = append(reports, err)
		}})
		full := fmt.Errorf("outbox: commit: %w", syscall.ENOSPC)
		h.store.mu.Lock()
		h.store.failed = full
		h.store.mu.Unlock()
		h.agent.emit(&agent.TurnStarted{TurnID: "t1"}, &agent.MessageStarted{Message: "m1"},
			&agent.TextDelta{Message: "m1", Block: "0", Delta: "done"}, &agent.StepFinished{Message: "m1", Finish: agent.FinishStop},
			&agent.TurnEnded{TurnID: "t1", Reason: agent.TurnCompleted})
		synctest.Wait()
		h.store.mu.Lock()
		h.store.failed = nil
		h.store.mu.Unlock()
		close(h.agent.events)
		h.wait()
		mu.Lock()
		defer mu.Unlock()
		if len(reports) != 2 || !errors.Is(reports[0], full) || reports[1] != nil {
			t.Fatalf("reports: %q, want the failure then <nil>", reports)
		}
	})
}
