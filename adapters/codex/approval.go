package codex

import (
	"encoding/json"

	"github.com/happy-dev/happy/agent"
)

// Request is what an answer to one of Codex's requests (an approval or a
// question) is worded from: the request's method, the decisions it lists
// (availableDecisions; nil when it lists none), the exec-policy amendment
// it proposes, and for item/tool/requestUserInput the question ids in
// order.
type Request struct {
	Method    string
	Thread    string // app-server: the thread that asked ("" when it names none)
	Available []json.RawMessage
	Amendment json.RawMessage
	Questions []string
}

// IsQuestion reports whether r asks questions (item/tool/requestUserInput)
// rather than an approval.
func (r Request) IsQuestion() bool { return r.Method == "item/tool/requestUserInput" }

// ApprovalAnswer is the response to an approval request for decision d
// (once, always or reject), in the request's own vocabulary: app-server v2
// once → accept,
// always → acceptForSession (the proposed exec-policy amendment when Codex
// lists its decisions without acceptForSession, else accept rather than a
// decision it did not offer), reject → decline; the legacy and MCP forms
// approved, approved_for_session, denied.
func ApprovalAnswer(r Request, d agent.Decision) any {
	switch r.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		switch d {
		case agent.DecisionOnce:
			return map[string]any{"decision": "accept"}
		case agent.DecisionReject:
			return map[string]any{"decision": "decline"}
		}
		if r.Available == nil || offers(r.Available, "acceptForSession") {
			return map[string]any{"decision": "acceptForSession"}
		}
		if len(r.Amendment) > 0 && string(r.Amendment) != "null" && offers(r.Available, "acceptWithExecpolicyAmendment") {
			return map[string]any{"decision": map[string]any{"acceptWithExecpolicyAmendment": map[string]json.RawMessage{"execpolicy_amendment": r.Amendment}}}
		}
		// Codex listed its decisions and "for the session" is not among
		// them: accept this once rather than send one it did not offer.
		return map[string]any{"decision": "accept"}
	default: // execCommandApproval, applyPatchApproval, elicitation/create
		switch d {
		case agent.DecisionOnce:
			return map[string]any{"decision": "approved"}
		case agent.DecisionReject:
			return map[string]any{"decision": "denied"}
		}
		return map[string]any{"decision": "approved_for_session"}
	}
}

// CancelAnswer is the response to a request nobody will decide (the turn
// is interrupted, the session closes): Codex's cancel (v2), abort (legacy
// and MCP), or no answers to a question.
func CancelAnswer(r Request) any {
	switch r.Method {
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		return map[string]string{"decision": "cancel"}
	case "item/tool/requestUserInput":
		return map[string]any{"answers": map[string]any{}}
	}
	return map[string]string{"decision": "abort"}
}

// QuestionAnswer is the response to item/tool/requestUserInput:
// answers[i] are the labels chosen for question i (none when missing).
func QuestionAnswer(r Request, answers [][]string) any {
	res := map[string]any{}
	for i, q := range r.Questions {
		var a []string
		if i < len(answers) {
			a = answers[i]
		}
		if a == nil {
			a = []string{}
		}
		res[q] = map[string]any{"answers": a}
	}
	return map[string]any{"answers": res}
}

// offers reports whether a decision (a string, or the key of an object
// decision) is among the available ones.
func offers(available []json.RawMessage, name string) bool {
	for _, a := range available {
		var s string
		if json.Unmarshal(a, &s) == nil && s == name {
			return true
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(a, &obj) == nil {
			if _, ok := obj[name]; ok {
				return true
			}
		}
	}
	return false
}
