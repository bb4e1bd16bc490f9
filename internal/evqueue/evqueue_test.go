package evqueue

import (
	"fmt"
	"testing"

	"github.com/happy-dev/happy/mapper"
)

func TestOrderAndDeliveryAfterClose(t *testing.T) {
	q := New()
	for i := 0; i < 1000; i++ { // nobody reads yet: pushing never blocks
		q.Push(&mapper.TurnStarted{TurnID: fmt.Sprint(i)})
	}
	q.Close()
	q.Push(&mapper.TurnStarted{TurnID: "late"}) // ignored after Close
	i := 0
	for ev := range q.Out() {
		if got := ev.(*mapper.TurnStarted).TurnID; got != fmt.Sprint(i) {
			t.Fatalf("event %d is %q", i, got)
		}
		i++
	}
	if i != 1000 {
		t.Fatalf("delivered %d events, want 1000", i)
	}
	q.Wait()
}
