// Package openclaw drives an agent of an OpenClaw gateway: a long-lived
// local service speaking a WebSocket protocol of JSON text frames
// (docs/ARCHITECTURE.md, section "OpenClaw gateway"). happy connects as an
// operator client and maps the gateway's stream to the agent vocabulary.
//
// The wire (the openclaw package, packages/gateway-protocol; protocol 4 in
// the pinned 2026.9.6, 3 before):
//
//	frames        {type:"req", id, method, params} · {type:"res", id, ok, payload|error} ·
//	              {type:"event", event, payload, seq?} (seq counts per connection)
//	handshake     event connect.challenge {nonce, ts} (optional) · req connect {minProtocol,
//	              maxProtocol, client{id, version, platform, mode}, role, scopes, caps, auth{token}}
//	              · res hello-ok {protocol, server, features, snapshot, auth, policy{tickIntervalMs}}
//	prompt        req agent {message, sessionKey, agentId?, idempotencyKey, deliver:false}
//	              → res {runId, status:"accepted"}, later res {runId, status:"ok"|"error"}
//	run stream    event agent {runId, seq, stream, ts, data} (seq counts per run)
//	approvals     event exec.approval.requested {id, request{command, cwd, toolCallId, runId,
//	              sessionKey, unavailableDecisions?}} · req exec.approval.resolve {id, decision:
//	              allow-once|allow-always|deny} · event exec.approval.resolved {id, decision}
//	abort         req chat.abort {sessionKey, runId}
//	resume check  req agent.wait {runId, timeoutMs:0} after a reconnect
//
// What becomes what (decoder.go):
//
//	c2a agent                        TurnStarted, UserPrompt (the runner's own: not re-emitted live),
//	                                 SessionInfo for a new session key
//	stream assistant {delta|text}    TextDelta | TextFinal
//	stream thinking {delta|text}     ReasoningDelta | ReasoningFinal
//	stream tool start|result         ToolCall (canonical, tools.go) + ToolRunning | ToolCompleted, ToolFailed
//	stream usage                     Usage (the run's totals turned into the step's figures)
//	stream lifecycle model           SessionInfo + MessageStarted (one step per model call)
//	stream lifecycle end|error       StepFinished + TurnEnded completed|interrupted, or AgentError + TurnEnded failed
//	exec.approval.requested          ToolBlocked {permission bash, the command as pattern}
//	c2a exec.approval.resolve        ToolResolved (replay only) and, allowed, ToolRunning
//	exec.approval.resolved (other)   ToolResolved reason answered-in-agent
//	res ok:false                     AgentError (auth, transport, rate_limit or protocol)
//	note gone                        AgentError transport + TurnEnded failed
//	unknown event/stream/phase/type  DroppedInput with a reason; known broadcasts are ignored
//
// Each agent event is decoded once per (runId, seq), so what a gateway
// delivers again after a reconnect adds nothing. Each connection attempt
// (dial and handshake) is bounded by Options.ConnectTimeout, and the
// reconnect attempts count until the gateway brings a new event. The Client (client.go)
// implements agent.Agent; Replay reads a traffic log written with
// Options.Record; StartGateway runs `openclaw gateway` for a session.
package openclaw
