package main

import (
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// The progress lines: a tool waiting for a person (and only that: a block
// a rule decided is never announced), a question, and a model retry.
func TestProgressLines(t *testing.T) {
	var b strings.Builder
	p := newProgress(&b, false, time.Now).withTimeout(10 * time.Minute)
	perm := &mapper.ToolPart{CallID: "c1", Tool: "bash", State: mapper.ToolState{Status: mapper.StatusBlocked,
		Input: agent.Object{"command": "rm -rf build"},
		Block: &mapper.Block{Type: mapper.BlockPermission, Permission: "bash", Patterns: []string{"rm -rf build"}}}}
	ruled := &mapper.ToolPart{CallID: "c2", Tool: "bash", State: mapper.ToolState{Status: mapper.StatusBlocked,
		Block: &mapper.Block{Type: mapper.BlockPermission, Permission: "bash", Patterns: []string{"ls"}}}}
	question := &mapper.ToolPart{CallID: "q1", Tool: "question", State: mapper.ToolState{Status: mapper.StatusBlocked,
		Block: &mapper.Block{Type: mapper.BlockQuestion, Questions: []agent.QuestionInfo{{Question: "Which branch?"}}}}}
	p.onBus([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: perm}, &mapper.MessagePartUpdated{Part: ruled}})
	p.waiting("c1") // before the relay named the session
	p.created("S1", "happy: session S1")
	p.waiting("c1") // told once
	p.onBus([]mapper.BusEvent{&mapper.MessagePartUpdated{Part: question},
		&mapper.SessionStatus{SessionID: "s", Status: mapper.SessionStatusInfo{Type: mapper.SessionRetry, Attempt: 2, Message: "overloaded"}}})
	p.waiting("q1")
	p.waiting("unknown")
	p.close()
	want := `happy: bash rm -rf build waits for permission, but the relay has not answered yet, so no other device can answer it: it is rejected after 10m0s unless the relay answers before (happy log names it once the relay is back)
happy: session S1
happy: bash rm -rf build waits for permission — answer with: happy approve S1 c1  (or: happy deny S1 c1)
happy: the model call is retried (attempt 2): overloaded
happy: question asks: Which branch? — answer with: happy answer S1 q1 LABEL…
`
	if b.String() != want {
		t.Fatalf("progress wrote:\n%s\nwant:\n%s", b.String(), want)
	}
}
