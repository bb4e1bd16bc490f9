package app

import (
	"context"
	"fmt"
	"time"

	"github.com/happy-dev/happy/mapper"
)

// Receipt is how far a prompt sent from another device has got, as the
// running session wrote it on its version of the prompt's row
// (mapper.UserTime): Unix ms, 0 for a step not reached yet. Stored (the
// relay's seq) is the sender's to know and is not here.
type Receipt struct {
	Received int64 // the session received the prompt from the relay
	Handed   int64 // the session handed it to the agent
	Started  int64 // the agent's first event of the turn it started came
}

// ReceiptOf reads the receipts of user message msgID in tr; found is false
// when tr has no such user message.
func ReceiptOf(tr mapper.Transcript, msgID string) (r Receipt, found bool) {
	for _, m := range tr.Messages {
		um, ok := m.Info.(*mapper.UserMessage)
		if !ok || um.ID != msgID {
			continue
		}
		return ReceiptFromTime(um.Time), true
	}
	return Receipt{}, false
}

// ReceiptFromTime is the receipt a user message's time block holds.
func ReceiptFromTime(t mapper.UserTime) Receipt {
	val := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	return Receipt{Received: val(t.Received), Handed: val(t.Handed), Started: val(t.Started)}
}

// WatchReceipts reads session o every 300 ms and calls seen with the
// prompt msgID's receipt each time it has moved on, until the agent
// started (a nil error), the session is no longer running
// (ErrSessionOver), or ctx ends (ctx's error). It returns the last receipt
// seen and the session's state (running, ended, archived, stale) at the
// last read; now is the clock for that state.
func WatchReceipts(ctx context.Context, conn *Conn, o Opened, msgID string, now func() time.Time, seen func(Receipt)) (Receipt, string, error) {
	var last Receipt
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		cur, err := FindSession(ctx, conn, o.Info.ID)
		if err != nil {
			return last, "", err
		}
		rb, _, err := ReadTranscript(ctx, conn, cur, ReadOptions{})
		if err != nil {
			return last, "", err
		}
		if r, ok := ReceiptOf(rb.Transcript(), msgID); ok && r != last {
			last = r
			seen(r)
		}
		state := cur.State(now())
		if last.Started != 0 {
			return last, state, nil
		}
		if state != LifecycleRunning {
			return last, state, fmt.Errorf("%s is %s: %w", o.Info.ID, state, ErrSessionOver)
		}
		select {
		case <-ctx.Done():
			return last, state, ctx.Err()
		case <-t.C:
		}
	}
}
