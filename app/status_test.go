package app

import (
	"testing"
	"time"

	"github.com/happy-dev/happy/localapi"
	"github.com/happy-dev/happy/session"
)

// DescribeStatus's one line, for the states a running session can be in.
func TestDescribeStatus(t *testing.T) {
	now := time.UnixMilli(10_000_000)
	at := func(ago time.Duration) time.Time { return now.Add(-ago) }
	for _, tc := range []struct {
		name string
		st   session.Status
		want string
	}{
		{"silent, watch running",
			session.Status{AgentRunning: true, TurnSince: at(5 * time.Minute), LastAgentEvent: at(3 * time.Minute), IdleTimeout: 10 * time.Minute, IdleDeadline: now.Add(7 * time.Minute)},
			"session cm1 (codex): agent running; turn running for 5m0s; last agent event 3m0s ago; no tool running; nobody asked; idle watch interrupts in 7m0s"},
		{"tool running",
			session.Status{AgentRunning: true, TurnSince: at(5 * time.Minute), LastAgentEvent: at(2 * time.Minute), IdleTimeout: 10 * time.Minute,
				Tools: []session.ToolActivity{{CallID: "c1", Tool: "bash", Since: at(2 * time.Minute)}}},
			"session cm1 (codex): agent running; turn running for 5m0s; last agent event 2m0s ago; tool bash running for 2m0s (call c1); nobody asked; idle watch paused"},
		{"a permission and a question wait",
			session.Status{AgentRunning: true, TurnSince: at(time.Hour), LastAgentEvent: at(30 * time.Minute), IdleTimeout: 10 * time.Minute,
				Waiting: []session.ToolActivity{{CallID: "c2", Tool: "edit", Since: at(30 * time.Minute)}, {CallID: "c3", Tool: "question", Since: at(1500 * time.Millisecond), Question: true}}},
			"session cm1 (codex): agent running; turn running for 1h0m0s; last agent event 30m0s ago; no tool running; permission edit waiting for a person for 30m0s (call c2); question waiting for a person for 2s (call c3); idle watch paused"},
		{"between turns, interrupted before",
			session.Status{AgentRunning: true, LastAgentEvent: at(time.Hour), IdleTimeout: time.Minute, IdleInterrupts: 2},
			"session cm1 (codex): agent running; no turn running; last agent event 1h0m0s ago; no tool running; nobody asked; idle watch waits for a turn; 2 turn(s) interrupted for silence"},
		{"watch off, agent exited, silent from the start",
			session.Status{},
			"session cm1 (codex): agent exited; no turn running; no agent event yet; no tool running; nobody asked; idle watch off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DescribeStatus(agentStatus(tc.st, "ses_1", "cm1", "codex", now)); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	if got := DescribeStatus(localapi.AgentStatus{SessionID: "ses_1", IdleTimeoutMs: 1, Now: 1}); got != "session ses_1: agent exited; no turn running; no agent event yet; no tool running; nobody asked; idle watch waits for a turn" {
		t.Errorf("before the relay answered: %s", got)
	}
}
