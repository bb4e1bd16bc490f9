package claude

import (
	"encoding/json"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// PermissionAsk is a can_use_tool request of SDK mode as the wrapper's
// client parsed it (package sdk, PermissionRequest): Claude waits for its
// answer. Input is Claude's own input of the tool (a JSON object);
// Suggestions its permission_suggestions (a JSON array, nil when absent).
type PermissionAsk struct {
	RequestID      string
	ToolName       string
	Input          json.RawMessage
	ToolUseID      string
	Description    string
	BlockedPath    string
	DecisionReason string
	AgentID        string
	Suggestions    json.RawMessage
}

// Asked maps a permission request the caller took off SDK mode's control
// channel (the caller owns the control protocol: it skips control lines
// when decoding, answers the request and learns of its withdrawal). The
// call the request names is blocked on a permission (AskUserQuestion: on a
// question); a request that names no call the stream announced blocks a
// call of its own, announced first, whose id is the request id. It returns
// the id of the blocked call and the events. callID is "" when the request
// cannot be shown (it names a call the stream already closed, or one that
// waits already or was refused): the events then hold a Dropped record for
// line (the stdout line the request came on), and the caller refuses the
// request.
func (d *Decoder) Asked(line linereader.Line, ask PermissionAsk) (callID string, evs []agent.Event) {
	d.out = nil
	d.line, d.raw, d.t = line.Number, line.Data, 0
	defer func() { d.raw = nil }()
	if d.finished {
		d.drop("control_request/can_use_tool", agent.DropInvalidField, "permission request after the end of the stream; denied")
		return "", d.take()
	}
	if ask.RequestID == "" {
		d.drop("control_request/can_use_tool", agent.DropMissingID, "can_use_tool has no request_id")
		return "", d.take()
	}
	callID, blocked := d.ask(ask.RequestID, &controlRequest{
		Subtype: "can_use_tool", ToolName: ask.ToolName, Input: ask.Input, PermissionSuggestions: ask.Suggestions,
		BlockedPath: ask.BlockedPath, DecisionReason: ask.DecisionReason, Description: ask.Description,
		ToolUseID: ask.ToolUseID, AgentID: ask.AgentID,
	}, "; denied")
	if callID != "" && !blocked {
		// Nobody would be asked: the call's one block is answered once.
		d.drop("control_request/can_use_tool", agent.DropIllegalTransition, "can_use_tool for "+callID+", which waits for an answer already or was refused; denied")
		return "", d.take()
	}
	return callID, d.take()
}

// Withdrawn maps Claude withdrawing the request the call callID waited on
// (control_cancel_request, taken off the control channel by the caller as
// for Asked): a call still blocked is resolved rejected, reason cancelled.
// A call that is no longer blocked gives no events.
func (d *Decoder) Withdrawn(callID string) []agent.Event {
	d.out = nil
	d.line, d.raw, d.t = 0, nil, 0
	d.withdraw(callID)
	return d.take()
}
