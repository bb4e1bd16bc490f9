// Package session runs one happy session: it drives an agent adapter,
// reduces its events into the canonical transcript (package mapper), sends
// every changed record to the relay through the durable outbox, and carries
// control back from the relay (prompts, permission answers, question answers,
// abort) to the agent.
//
// The control plane (docs/ARCHITECTURE.md): prompts are user messages written to the
// relay by the controlling device; decisions, answers, abort and mode switches
// are session RPCs named "<relaySessionID>:permission", ":answer", ":abort",
// ":switch", whose params are encrypted with the session key. Every input is
// decoded exhaustively: an unknown decision is refused, never taken as allow.
package session
