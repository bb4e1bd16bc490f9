package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// Permission option kinds (schema PermissionOptionKind). An answer is
// always chosen by kind, never guessed from an option's id or name.
const (
	KindAllowOnce    = "allow_once"
	KindAllowAlways  = "allow_always"
	KindRejectOnce   = "reject_once"
	KindRejectAlways = "reject_always"
)

// Errors of choosing an answer.
var (
	// ErrUnknownDecision: a decision other than once, always, reject.
	ErrUnknownDecision = errors.New("acp: unknown decision")
	// ErrNoOption: the agent offered no option of the kind the decision
	// needs (e.g. "once" without an allow_once option).
	ErrNoOption = errors.New("acp: the agent offered no option for this decision")
)

// PermissionOption is one choice of a session/request_permission request.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"`
}

// Answer is happy's answer to a permission request: a canonical decision,
// why (for rejections nobody typed: cancelled, timeout, agent-exited), and
// whether a rejection should be remembered by the agent (reject_always is
// chosen only then).
type Answer struct {
	Decision     agent.Decision
	Reason       string
	RejectAlways bool
}

// Outcome is the RequestPermissionOutcome sent back: cancelled, or the
// selected option (whose kind is recorded for the caller).
type Outcome struct {
	Cancelled bool
	OptionID  string
	Kind      string
}

// JSON returns the response to the request in the nested shape the schema
// requires: {"outcome":{"outcome":"selected","optionId":…}} or
// {"outcome":{"outcome":"cancelled"}}.
func (o Outcome) JSON() map[string]any {
	if o.Cancelled {
		return map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}
	}
	return map[string]any{"outcome": map[string]any{"outcome": "selected", "optionId": o.OptionID}}
}

// Choose picks the outcome for an answer among the offered options, by
// kind (the vocabulary of a permission outcome):
//
//	once    allow_once
//	always  allow_always, else allow_once (happy remembers "always" itself)
//	reject  reject_once (reject_always when RejectAlways is set and offered);
//	        with neither, the request is cancelled rather than answered
//	        with an option that grants or remembers more than asked. This
//	        holds for a rejection nobody typed too (reason timeout,
//	        agent-exited, a rule): the tool is refused, the turn goes on
//	reject with reason cancelled (the turn itself is aborted): cancelled
//
// Errors: ErrUnknownDecision, ErrNoOption (once or always without any
// allow option).
func Choose(opts []PermissionOption, a Answer) (Outcome, error) {
	find := func(kind string) (Outcome, bool) {
		for _, o := range opts {
			if o.Kind == kind {
				return Outcome{OptionID: o.OptionID, Kind: kind}, true
			}
		}
		return Outcome{}, false
	}
	switch a.Decision {
	case agent.DecisionOnce:
		if o, ok := find(KindAllowOnce); ok {
			return o, nil
		}
		return Outcome{}, fmt.Errorf("%w: once needs an %s option", ErrNoOption, KindAllowOnce)
	case agent.DecisionAlways:
		if o, ok := find(KindAllowAlways); ok {
			return o, nil
		}
		if o, ok := find(KindAllowOnce); ok {
			return o, nil
		}
		return Outcome{}, fmt.Errorf("%w: always needs an %s or %s option", ErrNoOption, KindAllowAlways, KindAllowOnce)
	case agent.DecisionReject:
		if a.Reason == agent.ReasonCancelled {
			return Outcome{Cancelled: true}, nil
		}
		if a.RejectAlways {
			if o, ok := find(KindRejectAlways); ok {
				return o, nil
			}
		}
		if o, ok := find(KindRejectOnce); ok {
			return o, nil
		}
		return Outcome{Cancelled: true}, nil
	}
	return Outcome{}, fmt.Errorf("%w: %q", ErrUnknownDecision, a.Decision)
}

// decisionOf reads happy's response to a permission request back into a
// canonical decision: the selected option's kind (allow_once → once,
// allow_always → always, reject_* → reject), or reject with reason
// cancelled for the cancelled outcome. ok is false for anything else: an
// unknown option id or kind, or a response not in the schema's shape.
func decisionOf(result json.RawMessage, opts []PermissionOption) (agent.Decision, string, bool) {
	o, ok := outcomeOf(result)
	if !ok {
		return "", "", false
	}
	if o.Cancelled {
		return agent.DecisionReject, agent.ReasonCancelled, true
	}
	for _, op := range opts {
		if op.OptionID != o.OptionID {
			continue
		}
		switch op.Kind {
		case KindAllowOnce:
			return agent.DecisionOnce, "", true
		case KindAllowAlways:
			return agent.DecisionAlways, "", true
		case KindRejectOnce, KindRejectAlways:
			return agent.DecisionReject, "", true
		}
		return "", "", false
	}
	return "", "", false
}

// outcomeOf reads the RequestPermissionOutcome of a response
// ({"outcome":{"outcome":"selected","optionId":…}} or
// {"outcome":{"outcome":"cancelled"}}); Kind is left empty. ok is false
// for a response not in that shape.
func outcomeOf(result json.RawMessage) (Outcome, bool) {
	result = bytes.TrimSpace(result)
	if len(result) == 0 || result[0] != '{' {
		return Outcome{}, false
	}
	var r struct {
		Outcome *struct {
			Outcome  string  `json:"outcome"`
			OptionID *string `json:"optionId"`
		} `json:"outcome"`
	}
	if json.Unmarshal(result, &r) != nil || r.Outcome == nil {
		return Outcome{}, false
	}
	switch r.Outcome.Outcome {
	case "cancelled":
		return Outcome{Cancelled: true}, true
	case "selected":
		if r.Outcome.OptionID != nil {
			return Outcome{OptionID: *r.Outcome.OptionID}, true
		}
	}
	return Outcome{}, false
}

// noteAgrees reports whether happy's decision note (decision nd, reason
// reason) is consistent with the wire answer result, read as decision
// wire: the same canonical decision, or the note's decision is answered
// with exactly the option (or cancellation) the wire carries (e.g.
// "always" sent as allow_once when no allow_always was offered).
func noteAgrees(nd agent.Decision, reason string, wire agent.Decision, result json.RawMessage, opts []PermissionOption) bool {
	if nd == wire {
		return true
	}
	want, err := Choose(opts, Answer{Decision: nd, Reason: reason})
	if err != nil {
		return false
	}
	got, ok := outcomeOf(result)
	return ok && got.Cancelled == want.Cancelled && got.OptionID == want.OptionID
}
