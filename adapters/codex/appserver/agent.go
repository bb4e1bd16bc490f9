package appserver

import "github.com/happy-dev/happy/adapters/codex/internal/live"

// Agent is a Client as the session runner drives it (agent.Agent): its
// events leave out the echo of what the runner records itself (see
// live.Agent).
type Agent = live.Agent

// NewAgent wraps a started Client (call it before the first prompt).
func NewAgent(c *Client) *Agent { return c.Core.Agent() }
