package rpcagent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTurns(t *testing.T) {
	var tu Turns[string]
	step := func(what string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	n, start, err := tu.Submit("a")
	step("submit a", []any{n, start, err}, []any{1, true, nil})
	n, start, _ = tu.Submit("b")
	step("submit b while a runs", []any{n, start, tu.Queued()}, []any{0, false, 1})
	step("interrupt 1", tu.Interrupt(1), true)
	step("interrupt 1 again", tu.Interrupt(1), false)
	step("interrupt a turn not running", tu.Interrupt(7), false)
	step("interrupted", tu.Interrupted(), true)
	ended, p, next, ok := tu.End(2)
	step("end a turn not running", []any{ended, p, next, ok}, []any{false, "", 0, false})
	ended, p, next, ok = tu.End(1)
	step("end 1", []any{ended, p, next, ok}, []any{true, "b", 2, true})
	step("interrupted after the next started", tu.Interrupted(), false)
	tu.Pause()
	tu.Submit("c")
	ended, p, next, ok = tu.End(2)
	step("end 2 while paused", []any{ended, p, next, ok}, []any{true, "", 0, false})
	n, running := tu.Running()
	step("running while paused", []any{n, running}, []any{2, false})
	p, next, ok = tu.Resume()
	step("resume", []any{p, next, ok}, []any{"c", 3, true})
	step("close", tu.Close(), false)
	step("close again", tu.Close(), true)
	_, _, err = tu.Submit("d")
	step("submit after close", errors.Is(err, ErrClosed), true)
	ended, _, _, _ = tu.End(3)
	step("end after close", ended, false)
}

func TestGiveUpAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tu Turns[string]
		var gaveUp []string
		var mu sync.Mutex
		fn := func(n int) {
			mu.Lock()
			gaveUp = append(gaveUp, fmt.Sprintf("%d@%s", n, time.Duration(time.Now().UnixNano()-start.UnixNano())))
			mu.Unlock()
		}
		tu.Submit("a")
		tu.GiveUpAfter(1, 10*time.Second, fn)
		tu.GiveUpAfter(1, time.Second, fn) // armed once per turn
		time.Sleep(20 * time.Second)
		synctest.Wait()
		tu.End(1)
		tu.Submit("b")
		tu.GiveUpAfter(2, 10*time.Second, fn)
		tu.End(2) // ended in time: never given up
		time.Sleep(20 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(gaveUp) != "[1@10s]" {
			t.Errorf("given up %v, want [1@10s]", gaveUp)
		}
	})
}

var start = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) // synctest's epoch

func TestPermissions(t *testing.T) {
	var ps Permissions[string]
	req := func(id uint64) *jsonrpc.Incoming { return &jsonrpc.Incoming{ID: jsonrpc.ID{Num: id}} }
	ps.Add(&Permission[string]{In: req(1), CallID: "a", Data: "approval"})
	ps.Add(&Permission[string]{In: req(2), CallID: "b", Data: "approval"})
	ps.Add(&Permission[string]{In: req(3), CallID: "a", Data: "question"})
	ps.Add(&Permission[string]{In: req(4), CallID: "a", Data: "approval"})
	ids := func(l []*Permission[string]) string {
		var s []string
		for _, p := range l {
			s = append(s, p.In.ID.String())
		}
		return strings.Join(s, ",")
	}
	isApproval := func(d string) bool { return d == "approval" }
	if _, err := ps.Take("a", isApproval, func(string) error { return io.ErrUnexpectedEOF }); !errors.Is(err, io.ErrUnexpectedEOF) || ps.Len() != 4 {
		t.Fatalf("a failed check took something: %v, %d left", err, ps.Len())
	}
	got, err := ps.Take("a", isApproval, nil)
	if err != nil || ids(got) != "1,4" || ps.Len() != 2 {
		t.Fatalf("take a = %s %v, %d left", ids(got), err, ps.Len())
	}
	if _, err := ps.Take("a", isApproval, nil); !errors.Is(err, ErrNoPendingRequest) {
		t.Fatalf("second take: %v", err)
	}
	if w := ps.Withdraw(jsonrpc.ID{Num: 3}); w == nil || w.Data != "question" || ps.Withdraw(jsonrpc.ID{Num: 3}) != nil {
		t.Fatalf("withdraw 3 = %+v", w)
	}
	ps.Add(&Permission[string]{In: req(5), CallID: "c"})
	if all := ps.Close(); ids(all) != "2,5" {
		t.Fatalf("close returned %s, want arrival order 2,5", ids(all))
	}
	if ps.Add(&Permission[string]{In: req(6), CallID: "d"}) {
		t.Fatal("added after close")
	}
	if _, err := ps.Take("d", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("take after close: %v", err)
	}
}

// frameDecoder turns every a2c frame into a TextDelta of its method, every
// c2a frame into a UserPrompt, and counts exits. Like the ACP decoder, it
// returns its own buffer, overwritten by the next frame: the Link must
// copy what it holds across frames (TestLinkKeepsHeldEventsFirst).
type frameDecoder struct {
	exits int
	buf   []agent.Event
}

func (d *frameDecoder) Decode(f jsonrpc.Frame) []agent.Event {
	clear(d.buf)
	d.buf = d.buf[:0]
	switch {
	case f.Dir == trafficlog.Exit:
		d.exits++
		d.buf = append(d.buf, &agent.TurnEnded{Reason: agent.TurnAgentExited})
	case !f.HasMsg():
		return nil
	case f.Dir == trafficlog.C2A:
		d.buf = append(d.buf, &agent.UserPrompt{Text: f.Msg.Method})
	default:
		d.buf = append(d.buf, &agent.TextDelta{Delta: f.Msg.Method})
	}
	return d.buf
}

// pipes connects a Link to an in-process peer.
func pipes(t *testing.T) (io.ReadWriteCloser, io.WriteCloser, <-chan string) {
	a2cR, a2cW := io.Pipe()
	c2aR, c2aW := io.Pipe()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		r := bufio.NewReader(c2aR)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			lines <- strings.TrimSpace(l)
		}
	}()
	t.Cleanup(func() { _ = a2cW.Close(); _ = c2aR.Close() })
	return struct {
		io.Reader
		io.WriteCloser
	}{a2cR, c2aW}, a2cW, lines
}

func texts(evs []agent.Event) string {
	var s []string
	for _, e := range evs {
		switch e := e.(type) {
		case *agent.TextDelta:
			s = append(s, e.Delta)
		case *agent.UserPrompt:
			s = append(s, "prompt:"+e.Text)
		case *agent.TurnEnded:
			s = append(s, "end:"+e.Reason)
		}
	}
	return strings.Join(s, " ")
}

// TestLinkHoldsEventsUntilHandled: the events of a frame from the agent
// are published only once the Handler returned, the echo of what the
// runner records is left out once asked, and the end of the stream
// decodes a null exit, runs OnGone once and closes Events.
func TestLinkHoldsEventsUntilHandled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, peer, lines := pipes(t)
		reached, proceed := make(chan string), make(chan struct{})
		gone := 0
		l := NewLink(Config{
			Decoder: &frameDecoder{},
			Echo:    func(e agent.Event, dir trafficlog.Dir) bool { _, ok := e.(*agent.UserPrompt); return ok },
			Handler: jsonrpc.HandlerFunc(func(_ context.Context, in *jsonrpc.Incoming) {
				reached <- in.Method
				<-proceed
			}),
			OnGone: func() { gone++ },
		})
		l.Attach(context.Background(), rwc)
		var seen []string
		// send writes a frame and notes, while its Handler runs, what was
		// published by then.
		send := func(method string) {
			fmt.Fprintf(peer, `{"method":%q}`+"\n", method)
			m := <-reached
			synctest.Wait() // the handler waits; the queue moved what it had
			var now []agent.Event
			for len(l.Events()) > 0 {
				now = append(now, <-l.Events())
			}
			seen = append(seen, m+"<"+texts(now)+">")
			proceed <- struct{}{}
		}
		send("one")
		send("two")
		if err := l.Notify(context.Background(), "mine", nil); err != nil {
			t.Fatal(err)
		}
		<-lines
		l.RunnerRecordsControl()
		if err := l.Notify(context.Background(), "echo", nil); err != nil {
			t.Fatal(err)
		}
		<-lines
		send("three")
		_ = peer.Close() // the agent goes away
		var rest []agent.Event
		for e := range l.Events() {
			rest = append(rest, e)
		}
		if got, want := strings.Join(seen, " "), "one<> two<one> three<two prompt:mine>"; got != want {
			t.Errorf("published while the handler ran: %s, want %s", got, want)
		}
		if got := texts(rest); got != "three end:agent-exited" {
			t.Errorf("after the last frame: %s", got)
		}
		if err := l.Close(); err != nil || gone != 1 {
			t.Errorf("close after gone: %v, OnGone ran %d times", err, gone)
		}
	})
}

// proto is a scripted Protocol that records what the Session asked.
type proto struct {
	mu    sync.Mutex
	calls []string
	s     *Session[string, string]
}

func (p *proto) log(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, fmt.Sprintf(format, args...))
}

func (p *proto) StartTurn(_ context.Context, n int, prompt string) error {
	p.log("start %d %s", n, prompt)
	if prompt == "refused" {
		return errors.New("refused")
	}
	return nil
}

func (p *proto) InterruptTurn(ctx context.Context, n int, first bool) error {
	p.log("interrupt %d first=%v", n, first)
	p.s.CancelPermissions(ctx, agent.ReasonCancelled)
	return nil
}

func (p *proto) Cancel(_ context.Context, pm *Permission[string], reason string) error {
	p.log("cancel %s %s", pm.CallID, reason)
	return nil
}

func (p *proto) TurnEnded(n int) { p.log("ended %d", n) }

func (p *proto) Abandon(n int, reason string) {
	p.log("abandon %d %s", n, reason)
	p.s.EndTurn(n)
}

func (p *proto) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.Join(p.calls, "; ")
	p.calls = nil
	return s
}

// TestSession follows a session through queued prompts, an interrupt the
// agent never honours (given up after Grace), a permission asked during
// the interrupt, a refused prompt and Close.
func TestSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &proto{}
		closed := 0
		s := NewSession[string, string](SessionConfig{Grace: 20 * time.Second, OnClose: func() { closed++ }}, p)
		p.s = s
		ctx := context.Background()
		check := func(what, want string) {
			t.Helper()
			synctest.Wait()
			if got := p.take(); got != want {
				t.Errorf("%s: %s\nwant %s", what, got, want)
			}
		}
		_ = s.Prompt(ctx, "a")
		_ = s.Prompt(ctx, "b")
		check("prompts", "start 1 a")
		s.Ask(ctx, "t1", &jsonrpc.Incoming{ID: jsonrpc.ID{Num: 1}}, "x")
		_ = s.Interrupt(ctx, "stop")
		_ = s.Interrupt(ctx, "stop again")
		s.Ask(ctx, "t2", &jsonrpc.Incoming{ID: jsonrpc.ID{Num: 2}}, "x")
		check("interrupt", "interrupt 1 first=true; cancel t1 cancelled; interrupt 1 first=false; cancel t2 cancelled")
		time.Sleep(20 * time.Second)
		check("grace over", "abandon 1 stop; ended 1; start 2 b")
		if s.EndTurn(1) {
			t.Error("ended turn 1 twice")
		}
		_ = s.Prompt(ctx, "refused")
		s.EndTurn(2)
		check("refused queued prompt", "ended 2; start 3 refused; ended 3")
		if err := s.Prompt(ctx, "refused"); err == nil {
			t.Error("a refused prompt gave no error")
		}
		check("refused prompt", "start 4 refused; ended 4")
		_ = s.Prompt(ctx, "c")
		s.Ask(ctx, "t3", &jsonrpc.Incoming{ID: jsonrpc.ID{Num: 3}}, "x")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		check("close", "start 5 c; cancel t3 agent-exited")
		if err := s.Prompt(ctx, "late"); !errors.Is(err, ErrClosed) || closed != 1 || s.Close() != nil {
			t.Errorf("after close: prompt %v, OnClose ran %d times", err, closed)
		}
		if err := s.Interrupt(ctx, "late"); !errors.Is(err, ErrClosed) {
			t.Errorf("interrupt after close: %v", err)
		}
	})
}

// TestSessionIdle: the idle watch of the running turn restarts with
// activity, counts silent windows, and is suspended while a permission
// waits.
func TestSessionIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &proto{}
		var s *Session[string, string]
		s = NewSession[string, string](SessionConfig{Idle: time.Minute, OnIdle: func(n, strikes int) {
			p.log("idle %d strike %d at %s", n, strikes, time.Duration(time.Now().UnixNano()-start.UnixNano()))
			if strikes < 2 {
				s.IdleAgain(n)
			}
		}}, p)
		p.s = s
		ctx := context.Background()
		_ = s.Prompt(ctx, "a")
		s.Activity()
		time.Sleep(30 * time.Second)
		s.Activity() // restarts the window: idle at 90s
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := p.take(); got != "start 1 a; idle 1 strike 1 at 1m30s; idle 1 strike 2 at 2m30s" {
			t.Errorf("silent turn: %s", got)
		}
		s.Activity()
		s.Ask(ctx, "t1", &jsonrpc.Incoming{ID: jsonrpc.ID{Num: 1}}, "x")
		time.Sleep(time.Hour) // a permission waits: no idle
		synctest.Wait()
		if _, err := s.Take("t1", nil, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := p.take(); got != "idle 1 strike 1 at 1h6m30s; idle 1 strike 2 at 1h7m30s" {
			t.Errorf("after the permission: %s", got)
		}
		s.EndTurn(1)
		time.Sleep(time.Hour) // between turns: no idle
		synctest.Wait()
		if got := p.take(); got != "ended 1" {
			t.Errorf("between turns: %s", got)
		}
		_ = s.Close()
	})
}

// TestLinkKeepsHeldEventsFirst: a frame of ours (or a line of the agent's
// stderr) tapped while the Handler still handles the agent's frame does not
// publish that frame's held events early: they go out, in traffic order,
// when the Handler returns. (A rule's answer written at once must find the
// request registered.)
func TestLinkKeepsHeldEventsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, peer, lines := pipes(t)
		reached, proceed := make(chan string), make(chan struct{})
		l := NewLink(Config{
			Decoder: &frameDecoder{},
			Handler: jsonrpc.HandlerFunc(func(_ context.Context, in *jsonrpc.Incoming) {
				reached <- in.Method
				<-proceed
			}),
		})
		l.Attach(context.Background(), rwc)
		drain := func() string {
			synctest.Wait()
			var now []agent.Event
			for len(l.Events()) > 0 {
				now = append(now, <-l.Events())
			}
			return texts(now)
		}
		fmt.Fprintf(peer, `{"method":"ask"}`+"\n")
		<-reached
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := l.Notify(context.Background(), "mine", nil); err != nil {
				t.Error(err)
			}
		}()
		<-lines
		<-done
		if got := drain(); got != "" {
			t.Fatalf("published while the handler runs: %q, want nothing", got)
		}
		proceed <- struct{}{}
		if got := drain(); got != "ask prompt:mine" {
			t.Fatalf("after the handler: %q, want the frame's events, then ours", got)
		}
		_ = peer.Close()
		for range l.Events() {
		}
		_ = l.Close()
	})
}
