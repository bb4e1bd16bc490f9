package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/happy-dev/happy/export"
	"github.com/happy-dev/happy/mapper"
)

// TurnOutcome is how a waited-for turn went: its status as the flat event
// stream's turn-end says it ("completed", "failed" or "cancelled"; "" when
// the turn did not end) and its final answer (the turn's last agent text,
// not thinking).
type TurnOutcome struct {
	Status    string
	FinalText string
	// State is the session's state when the wait returned (running,
	// ended, archived, stale).
	State string
}

// ErrSessionOver is returned by WaitTurn and WaitIdle when the session
// ended, or went stale, before what they wait for happened; the outcome's
// State says which.
var ErrSessionOver = errors.New("the session is over")

// waitPoll is how often a wait reads the session again.
const waitPoll = 300 * time.Millisecond

// WaitTurn waits until the turn that the user message msgID started has
// ended (its turn-end in export.FlatSettled: the turn id is the id of the
// user message that started it) and returns how it went. It reads the
// session every 300 ms until ctx ends (ctx's error), the turn ends, or the
// session is ended, archived or stale first (ErrSessionOver, with the
// outcome's State set). now is the clock for the session's state.
func WaitTurn(ctx context.Context, conn *Conn, o Opened, msgID string, now func() time.Time) (TurnOutcome, error) {
	return poll(ctx, conn, o, now, func(tr mapper.Transcript) (TurnOutcome, bool) {
		return turnOutcome(export.FlatSettled(tr), msgID)
	})
}

// WaitIdle waits until the session is idle: no turn runs (the last prompt's
// turn has ended, or there is none), or the session ended or was archived
// (then State says so and the error is nil). A stale session returns
// ErrSessionOver. The outcome is the last turn's, when there is one.
func WaitIdle(ctx context.Context, conn *Conn, o Opened, now func() time.Time) (TurnOutcome, error) {
	out, err := poll(ctx, conn, o, now, func(tr mapper.Transcript) (TurnOutcome, bool) {
		last := ""
		for _, m := range tr.Messages {
			if um, ok := m.Info.(*mapper.UserMessage); ok {
				last = um.ID
			}
		}
		if last == "" {
			return TurnOutcome{}, true
		}
		return turnOutcome(export.FlatSettled(tr), last)
	})
	if errors.Is(err, ErrSessionOver) && out.State != StateStale {
		return out, nil
	}
	return out, err
}

// turnOutcome reads a turn's end and final text from the settled flat
// events.
func turnOutcome(evs []export.FlatEvent, turn string) (TurnOutcome, bool) {
	var out TurnOutcome
	var texts []string
	for _, ev := range evs {
		if ev.Turn != turn || ev.AgentID != "" {
			continue
		}
		switch ev.Type {
		case export.TypeText:
			if ev.Role == "agent" && !ev.Thinking && strings.TrimSpace(ev.Text) != "" {
				texts = append(texts, ev.Text)
			}
		case export.TypeToolCallStart:
			texts = texts[:0] // the answer is what comes after the last tool
		case export.TypeTurnEnd:
			out.Status = ev.Status
		}
	}
	out.FinalText = strings.Join(texts, "\n")
	return out, out.Status != ""
}

// poll reads the session until done says so, the session is over, or ctx
// ends.
func poll(ctx context.Context, conn *Conn, o Opened, now func() time.Time, done func(mapper.Transcript) (TurnOutcome, bool)) (TurnOutcome, error) {
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		cur, err := FindSession(ctx, conn, o.Info.ID)
		if err != nil {
			return TurnOutcome{}, err
		}
		rb, _, err := ReadTranscript(ctx, conn, cur, ReadOptions{})
		if err != nil {
			return TurnOutcome{}, err
		}
		out, ok := done(rb.Transcript())
		out.State = cur.State(now())
		if ok {
			return out, nil
		}
		if out.State != LifecycleRunning {
			return out, fmt.Errorf("%s is %s: %w", o.Info.ID, out.State, ErrSessionOver)
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-t.C:
		}
	}
}
