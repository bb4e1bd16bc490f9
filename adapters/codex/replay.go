package codex

import (
	"errors"
	"fmt"
	"io"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// Protocol is the Codex protocol a session speaks.
type Protocol string

// Protocols. ProtocolAuto picks app-server when the installed Codex has it
// (see ChooseProtocol), and for a traffic log, from its content.
const (
	ProtocolAuto      Protocol = "auto"
	ProtocolAppServer Protocol = "app-server"
	ProtocolMCP       Protocol = "mcp"
)

// ParseProtocol accepts "app-server", "mcp" or "auto" ("" means auto).
// Errors: ErrUnknownProtocol.
func ParseProtocol(s string) (Protocol, error) {
	switch Protocol(s) {
	case ProtocolAppServer, ProtocolMCP, ProtocolAuto:
		return Protocol(s), nil
	case "":
		return ProtocolAuto, nil
	}
	return "", fmt.Errorf("%w: %q (want app-server, mcp or auto)", ErrUnknownProtocol, s)
}

// ErrUnknownProtocol refuses a protocol name.
var ErrUnknownProtocol = errors.New("codex: unknown protocol")

// NewDecoder returns the decoder of a protocol (app-server for auto).
func NewDecoder(p Protocol) Decoder {
	if p == ProtocolMCP {
		return NewMCPDecoder()
	}
	return NewAppServerDecoder()
}

// DetectProtocol guesses the protocol of recorded traffic: mcp when Codex
// sent codex/event notifications or happy called tools/call, else
// app-server.
func DetectProtocol(frames []jsonrpc.Frame) Protocol {
	for _, f := range frames {
		if !f.HasMsg() {
			continue
		}
		if m := f.Msg.Method; m == "codex/event" || m == "tools/call" || m == "elicitation/create" {
			return ProtocolMCP
		}
	}
	return ProtocolAppServer
}

// Replay decodes a recorded Codex traffic log (as written by --record)
// into agent events, in order; the caller reduces them to a transcript
// (`happy replay --agent codex`). p chooses the decoder (auto:
// DetectProtocol). Only a read error of r is returned as an error; bad
// lines are DroppedInput events. A turn still open at the end of the log
// ends as truncated.
func Replay(r io.Reader, p Protocol) ([]agent.Event, error) {
	tr, err := jsonrpc.ReadTraffic(r)
	if err != nil {
		return nil, fmt.Errorf("codex: %w", err)
	}
	if p == ProtocolAuto || p == "" {
		p = DetectProtocol(tr.Frames)
	}
	evs := tr.Decode(NewDecoder(p).Decode)
	return append(evs, endOpenTurns(evs, tr.LastT())...), nil
}

// endOpenTurns returns a TurnEnded with reason truncated, at time t (Unix
// ms), for each turn of evs that started and never ended: the log stops
// inside it (a crash, a copy taken while Codex ran), and ending it settles
// its open tools and closes its assistant message. Child sessions come
// first, in the order their turns started, then the root.
func endOpenTurns(evs []agent.Event, t int64) []agent.Event {
	open := map[string]string{} // session key → turn id
	var order []string
	for _, e := range evs {
		switch e := e.(type) {
		case *agent.TurnStarted:
			if _, ok := open[e.Session]; !ok {
				order = append(order, e.Session)
			}
			open[e.Session] = e.TurnID
		case *agent.TurnEnded:
			delete(open, e.Session)
		}
	}
	var out []agent.Event
	root, rootOpen := open[""]
	for _, key := range order {
		id, ok := open[key]
		if !ok || key == "" {
			continue
		}
		delete(open, key) // a key that started twice is listed once
		out = append(out, truncatedTurn(key, id, t))
	}
	if rootOpen {
		out = append(out, truncatedTurn("", root, t))
	}
	return out
}

func truncatedTurn(session, turnID string, t int64) *agent.TurnEnded {
	return &agent.TurnEnded{EventBase: agent.EventBase{Session: session, Time: t}, TurnID: turnID,
		Reason: agent.TurnTruncated, Error: "the log ends before the turn ended"}
}
