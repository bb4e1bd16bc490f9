package app

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/home"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
	"github.com/happy-dev/happy/session"
)

// scriptedAgent is a agent.Agent that, for every prompt, runs one turn:
// a shell tool that needs permission, then a final text saying what
// happened. Its events go through the real runner, sink and relay.
type scriptedAgent struct {
	events chan agent.Event
	mu     sync.Mutex
	turn   int
	calls  []string
	closed bool
	// deltas, when set, streams each final text in two deltas first.
	deltas bool
}

func newScriptedAgent() *scriptedAgent { return &scriptedAgent{events: make(chan agent.Event, 64)} }

func (a *scriptedAgent) log(s string) { a.mu.Lock(); a.calls = append(a.calls, s); a.mu.Unlock() }

func (a *scriptedAgent) Events() <-chan agent.Event { return a.events }

func (a *scriptedAgent) Prompt(_ context.Context, p agent.Prompt) error {
	a.mu.Lock()
	a.turn++
	n := a.turn
	a.mu.Unlock()
	a.log("prompt:" + p.Text)
	id := fmt.Sprintf("call-%d", n)
	msg := fmt.Sprintf("m%d", n)
	in, _ := json.Marshal(map[string]string{"command": "touch f" + fmt.Sprint(n)})
	go func() {
		a.events <- &agent.TurnStarted{TurnID: fmt.Sprint(n)}
		a.events <- &agent.MessageStarted{Message: msg}
		a.events <- &agent.ToolCall{Message: msg, CallID: id, Tool: "bash", Input: in}
		a.events <- &agent.ToolRunning{CallID: id}
		a.events <- &agent.ToolBlocked{CallID: id, Permission: &agent.PermissionRequest{ID: "req-" + id, Permission: "bash", Patterns: []string{"touch f" + fmt.Sprint(n)}}}
	}()
	return nil
}

func (a *scriptedAgent) Decide(_ context.Context, callID string, d agent.Verdict) error {
	a.log("decide:" + callID + ":" + string(d.Decision))
	n := strings.TrimPrefix(callID, "call-")
	go func() {
		if d.Decision == agent.DecisionReject {
			a.events <- &agent.ToolFailed{CallID: callID, Error: "denied"}
		} else {
			a.events <- &agent.ToolCompleted{CallID: callID, Output: "", Title: "touch"}
		}
		a.events <- &agent.StepFinished{Message: "m" + n, Finish: agent.FinishToolCalls}
		if a.deltas {
			a.events <- &agent.TextDelta{Message: "final" + n, Block: "0", Delta: "Turn " + n}
			a.events <- &agent.TextDelta{Message: "final" + n, Block: "0", Delta: ": "}
		}
		a.events <- &agent.TextFinal{Message: "final" + n, Block: "0", Text: "Turn " + n + ": " + string(d.Decision)}
		a.events <- &agent.StepFinished{Message: "final" + n, Finish: agent.FinishStop}
		a.events <- &agent.TurnEnded{TurnID: n, Reason: agent.TurnCompleted}
	}()
	return nil
}

func (a *scriptedAgent) AnswerQuestion(context.Context, string, [][]string) error { return nil }
func (a *scriptedAgent) Interrupt(context.Context) error                          { a.log("interrupt"); return nil }
func (a *scriptedAgent) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		a.closed = true
		close(a.events)
	}
	return nil
}

// twoDevices starts a relay and returns two connections (different happy
// homes) to one account: device A runs sessions, device B controls them.
func twoDevices(t testing.TB) (envA Env, connA *Conn, connB *Conn) {
	t.Helper()
	return twoDevicesOn(t, servertest.Start(t))
}

// twoDevicesOn is twoDevices on the relay r.
func twoDevicesOn(t testing.TB, r *servertest.Relay) (envA Env, connA *Conn, connB *Conn) {
	t.Helper()
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := relay.CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	var conns []*Conn
	var envs []Env
	for i := 0; i < 2; i++ {
		h, _ := home.New(t.TempDir())
		if err := creds.Save(h.AccessKey()); err != nil {
			t.Fatal(err)
		}
		env := Env{Home: h, Getenv: func(k string) string {
			if k == "HAPPY_SERVER_URL" {
				return r.URL
			}
			return ""
		}, Log: zerolog.Nop()}
		c, err := Connect(context.Background(), env, ConnectOptions{NoResume: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns, envs = append(conns, c), append(envs, env)
	}
	return envs[0], conns[0], conns[1]
}

// blocked waits until device B sees a blocked tool in the session and
// returns the session and the call id.
func blocked(t *testing.T, conn *Conn, sid func() string) (Opened, string) {
	t.Helper()
	var o Opened
	var callID string
	waitfor.Until(t, "a blocked tool seen from the other device", func() bool {
		id := sid()
		if id == "" {
			return false
		}
		var err error
		if o, err = FindSession(context.Background(), conn, id); err != nil {
			return false
		}
		rb, _, err := ReadTranscript(context.Background(), conn, o, ReadOptions{})
		if err != nil {
			return false
		}
		for _, m := range rb.Transcript().Messages {
			for _, p := range m.Parts {
				if tp, ok := p.(*mapper.ToolPart); ok && tp.State.Status == mapper.StatusBlocked {
					callID = tp.CallID
					return true
				}
			}
		}
		return false
	})
	return o, callID
}

func TestRunSessionControlledFromAnotherDevice(t *testing.T) {
	envA, connA, connB := twoDevices(t)
	ag := newScriptedAgent()
	var mu sync.Mutex
	var sid string
	type out struct {
		res SessionResult
		err error
	}
	done := make(chan out, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		res, err := RunSession(ctx, envA, connA, ag, SessionOptions{
			Flavor: "fake", Dir: "/work", Prompt: "first task", ProviderID: "test",
			OnCreated: func(id string) { mu.Lock(); sid = id; mu.Unlock() },
		})
		done <- out{res, err}
	}()
	getSID := func() string { mu.Lock(); defer mu.Unlock(); return sid }

	// Turn 1: approved from device B; a second answer is stale.
	o, call := blocked(t, connB, getSID)
	if call != "call-1" {
		t.Fatalf("blocked call %q", call)
	}
	if err := Approve(ctx, connB, o, call, agent.DecisionOnce, ""); err != nil {
		t.Fatal(err)
	}
	if err := Approve(ctx, connB, o, call, agent.DecisionReject, ""); !errors.Is(err, ErrRPC) || !strings.Contains(err.Error(), `no tool call "call-1" waits for permission`) {
		t.Fatalf("second answer: %v", err)
	}
	// Turn 2: a prompt sent from device B, then denied.
	waitTurns(t, connB, o, 1)
	if _, err := Send(ctx, connB, o, "second task", time.Now()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, c2 := blocked(t, connB, getSID)
		if c2 == "call-2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("turn 2 never blocked")
		}
	}
	if err := Approve(ctx, connB, o, "call-2", agent.DecisionReject, "no"); err != nil {
		t.Fatal(err)
	}
	waitTurns(t, connB, o, 2)
	// Unknown decisions never reach the agent.
	if _, err := CallRPC(ctx, connB, o, session.MethodPermission, map[string]any{"callID": "call-2", "decision": "allow"}, 0); !errors.Is(err, ErrRPC) {
		t.Fatalf("bad decision: %v", err)
	}
	cancel()
	r := <-done
	if r.err != nil && !errors.Is(r.err, context.Canceled) {
		t.Fatalf("RunSession: %v", r.err)
	}

	// What device B reads equals what device A built.
	rb, _, err := ReadTranscript(context.Background(), connB, o, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := rb.Transcript()
	var users, texts []string
	for _, m := range tr.Messages {
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				if _, isUser := m.Info.(*mapper.UserMessage); isUser {
					users = append(users, tp.Text)
				} else {
					texts = append(texts, tp.Text)
				}
			}
		}
	}
	if strings.Join(users, "|") != "first task|second task" {
		t.Fatalf("user messages %q (each prompt once); dropped %+v", users, tr.Dropped)
	}
	if strings.Join(texts, "|") != "Turn 1: once|Turn 2: reject" {
		t.Fatalf("assistant texts %q", texts)
	}
	if tr.Session.Title != "first task" || len(tr.Dropped) != 0 {
		t.Fatalf("session %+v dropped %+v", tr.Session, tr.Dropped)
	}
	// The prompt device B wrote is recorded by the session under B's
	// record id, after B's version: no localId conflict.
	if cs, err := connA.Client.Outbox().Conflicts(context.Background(), ""); err != nil || len(cs) != 0 {
		t.Fatalf("localId conflicts on the session's side: %+v %v", cs, err)
	}
	ag.mu.Lock()
	calls := strings.Join(ag.calls, ",")
	ag.mu.Unlock()
	if calls != "prompt:first task,decide:call-1:once,prompt:second task,decide:call-2:reject" {
		t.Fatalf("agent calls %s", calls)
	}
	sessions, err := ListSessions(context.Background(), connB, time.Now())
	if err != nil || len(sessions) != 1 || sessions[0].Agent != "fake" || sessions[0].Path != "/work" ||
		sessions[0].State != LifecycleEnded || sessions[0].Title != "first task" || sessions[0].ID != o.Info.ID {
		t.Fatalf("sessions %+v %v", sessions, err)
	}
}

// waitTurns waits until device B sees n completed turns (final texts).
func waitTurns(t *testing.T, conn *Conn, o Opened, n int) {
	t.Helper()
	waitfor.Until(t, fmt.Sprintf("%d completed turns", n), func() bool {
		rb, _, err := ReadTranscript(context.Background(), conn, o, ReadOptions{})
		if err != nil {
			return false
		}
		count := 0
		for _, m := range rb.Transcript().Messages {
			if am, ok := m.Info.(*mapper.AssistantMessage); ok && am.Finish == agent.FinishStop {
				count++
			}
		}
		return count >= n
	})
}
