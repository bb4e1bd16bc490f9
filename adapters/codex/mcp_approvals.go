package codex

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Elicitation is what happy reads of a `codex mcp-server` approval request
// (elicitation/create params, Codex's own codex_* members beside the MCP
// message and requestedSchema): the kind (exec-approval, patch-approval),
// the tool call it is about when Codex names it, the id of the codex/event
// that announced the call (exec_approval_request /
// apply_patch_approval_request), and the detail of the command or patch.
type Elicitation struct {
	Kind      string                     `json:"codex_elicitation"`
	CallID    string                     `json:"codex_call_id"`
	EventID   string                     `json:"codex_event_id"`
	Command   json.RawMessage            `json:"codex_command"`
	Cwd       string                     `json:"codex_cwd"`
	Reason    string                     `json:"codex_reason"`
	Changes   map[string]json.RawMessage `json:"codex_changes"`
	GrantRoot *string                    `json:"codex_grant_root"`
}

// ParseElicitation reads elicitation/create params. Errors: params that
// are not a JSON object of that shape.
func ParseElicitation(params json.RawMessage) (Elicitation, error) {
	var e Elicitation
	if len(params) == 0 || params[0] != '{' {
		return Elicitation{}, fmt.Errorf("codex: elicitation params are not an object")
	}
	if err := json.Unmarshal(params, &e); err != nil {
		return Elicitation{}, fmt.Errorf("codex: elicitation params: %w", err)
	}
	return e, nil
}

// mcpApprovalBacklog bounds the approval events remembered for an
// elicitation that has not come (the oldest is forgotten first).
const mcpApprovalBacklog = 64

// MCPApprovals names the tool call of each approval elicitation of `codex
// mcp-server`. Codex names it in codex_call_id; an elicitation that names
// only codex_event_id is about the oldest call announced by an approval
// event with that id (exec_approval_request for exec-approval,
// apply_patch_approval_request for patch-approval) that no elicitation
// claimed yet; one that names neither, or an event never seen, gets a
// synthesised call id ("elicitation-1", "elicitation-2", … in order), so
// the person is still asked. The live client and the decoder each feed one
// every codex/event (Event) and every elicitation (Call) in traffic order,
// so both name the same call. The zero value is ready; not safe for
// concurrent use.
type MCPApprovals struct {
	waiting []announcedApproval // oldest first
	synth   int
}

type announcedApproval struct {
	eventID string
	kind    string // exec-approval | patch-approval
	callID  string
}

// Event records the call an approval event announces (params of a
// codex/event notification; any other event is ignored).
func (a *MCPApprovals) Event(params json.RawMessage) {
	var ev struct {
		ID  string `json:"id"`
		Msg struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		} `json:"msg"`
	}
	if json.Unmarshal(params, &ev) != nil || ev.ID == "" || ev.Msg.CallID == "" {
		return
	}
	kind := ""
	switch ev.Msg.Type {
	case "exec_approval_request":
		kind = "exec-approval"
	case "apply_patch_approval_request":
		kind = "patch-approval"
	default:
		return
	}
	if len(a.waiting) == mcpApprovalBacklog {
		a.waiting = slices.Delete(a.waiting, 0, 1)
	}
	a.waiting = append(a.waiting, announcedApproval{eventID: ev.ID, kind: kind, callID: ev.Msg.CallID})
}

// Call names the tool call of elicitation e: its codex_call_id; else the
// call its codex_event_id announced; else a synthesised id (synthesized
// true). It is "" for an elicitation kind that is not an approval
// happy shows (anything but exec-approval and patch-approval).
func (a *MCPApprovals) Call(e Elicitation) (callID string, synthesized bool) {
	if e.Kind != "exec-approval" && e.Kind != "patch-approval" {
		return "", false
	}
	if e.CallID != "" {
		if i := slices.IndexFunc(a.waiting, func(w announcedApproval) bool { return w.callID == e.CallID }); i >= 0 {
			a.waiting = slices.Delete(a.waiting, i, i+1)
		}
		return e.CallID, false
	}
	if e.EventID != "" {
		if i := slices.IndexFunc(a.waiting, func(w announcedApproval) bool { return w.eventID == e.EventID && w.kind == e.Kind }); i >= 0 {
			id := a.waiting[i].callID
			a.waiting = slices.Delete(a.waiting, i, i+1)
			return id, false
		}
	}
	a.synth++
	return fmt.Sprintf("elicitation-%d", a.synth), true
}
