//go:build unix

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
)

// progress tells the person at a -p run what the session waits for, on
// stderr: one line when a tool blocks (the tool, what it wants to do, and
// the command that answers it), one per model retry with its reason, and,
// when stderr is a terminal, a status line (spinner, elapsed time) that
// the other lines clear and redraw.
type progress struct {
	w     io.Writer
	tty   bool
	now   func() time.Time
	start time.Time

	// timeout is the run's --permission-timeout (0: none), said when
	// nobody can answer yet.
	timeout time.Duration

	mu     sync.Mutex
	sid    string
	told   map[string]bool             // call ids already announced
	early  map[string]bool             // announced before the relay named the session: told again then
	tools  map[string]*mapper.ToolPart // the last state seen of each tool call
	status bool                        // a status line is on screen
	frame  int
	stop   chan struct{}
	done   chan struct{}
}

// newProgress starts the status line when tty (stop it with close).
func newProgress(w io.Writer, tty bool, now func() time.Time) *progress {
	p := &progress{w: w, tty: tty, now: now, start: now(), told: map[string]bool{}, tools: map[string]*mapper.ToolPart{}}
	if tty {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.spin()
	}
	return p
}

// spinFrames are the status line's spinner.
var spinFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

func (p *progress) spin() {
	defer close(p.done)
	t := time.NewTicker(150 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			fmt.Fprintf(p.w, "\r\x1b[K%s working %s", spinFrames[p.frame%len(spinFrames)], p.now().Sub(p.start).Round(time.Second))
			p.status = true
			p.mu.Unlock()
		}
	}
}

// close stops the status line and clears it.
func (p *progress) close() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.status = false
	}
}

// created records the relay session id the answer commands name, and
// prints line (the session line) if it is not empty.
func (p *progress) created(sid, line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sid = sid
	if line != "" {
		p.println(line)
	}
	// What waited before the relay named the session can be answered now.
	for _, id := range slices.Sorted(maps.Keys(p.early)) {
		if tp := p.tools[id]; tp != nil && tp.State.Status == mapper.StatusBlocked && tp.State.Block != nil && !tp.State.Block.Resolved() {
			p.println(p.blockedLine(tp))
		}
	}
	p.early = nil
}

// println prints one line, clearing the status line first.
func (p *progress) println(line string) {
	if p.status {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.status = false
	}
	fmt.Fprintln(p.w, line)
}

// onBus is the SessionOptions.OnBus of the run.
func (p *progress) onBus(evs []mapper.BusEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range evs {
		switch e := ev.(type) {
		case *mapper.MessagePartUpdated:
			if tp, ok := e.Part.(*mapper.ToolPart); ok {
				p.tools[tp.CallID] = tp
			}
		case *mapper.SessionStatus:
			if e.Status.Type == mapper.SessionRetry {
				msg := e.Status.Message
				if msg == "" {
					msg = "no reason given"
				}
				p.println(fmt.Sprintf("happy: the model call is retried (attempt %d): %s", e.Status.Attempt, msg))
			}
		}
	}
}

// withTimeout sets the permission timeout the blocked-tool lines name.
func (p *progress) withTimeout(d time.Duration) *progress {
	p.timeout = d
	return p
}

// waiting is the SessionOptions.OnWaiting of the run: callID waits for a
// person (no rule decided it), so say what it wants and how to answer.
func (p *progress) waiting(callID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	tp := p.tools[callID]
	if tp == nil || tp.State.Block == nil || p.told[callID] {
		return
	}
	p.told[callID] = true
	if p.sid == "" {
		if p.early == nil {
			p.early = map[string]bool{}
		}
		p.early[callID] = true
	}
	p.println(p.blockedLine(tp))
}

// blockedLine says what a blocked tool waits for and how to answer it.
func (p *progress) blockedLine(tp *mapper.ToolPart) string {
	b := tp.State.Block
	if p.sid == "" {
		// The relay has not answered yet: no other device can see the
		// session, so no command would reach it; say what happens instead.
		wait := "it waits until the relay answers"
		if p.timeout > 0 {
			wait = fmt.Sprintf("it is rejected after %s unless the relay answers before", p.timeout)
		}
		what := "permission"
		if b.Type == mapper.BlockQuestion {
			what = "an answer"
		}
		return fmt.Sprintf("happy: %s waits for %s, but the relay has not answered yet, so no other device can answer it: %s (happy log names it once the relay is back)", export.ToolHead(tp), what, wait)
	}
	sid := p.sid
	if b.Type == mapper.BlockQuestion {
		qs := make([]string, 0, len(b.Questions))
		for _, q := range b.Questions {
			qs = append(qs, q.Question)
		}
		return fmt.Sprintf("happy: %s asks: %s — answer with: happy answer %s %s LABEL…", tp.Tool, strings.Join(qs, " / "), sid, tp.CallID)
	}
	head, what := export.ToolHead(tp), strings.Join(b.Patterns, " ")
	if b.Permission != tp.Tool || !strings.Contains(head, what) {
		head += " (" + strings.TrimSpace(b.Permission+" "+what) + ")"
	}
	return fmt.Sprintf("happy: %s waits for permission — answer with: happy approve %s %s  (or: happy deny %s %s)",
		head, sid, tp.CallID, sid, tp.CallID)
}
