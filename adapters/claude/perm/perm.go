// Package perm holds the canonical answer to a Claude Code permission
// prompt and its validation, shared by the two ways Claude asks: the SDK's
// can_use_tool control request (remote mode) and the PermissionRequest hook
// (local mode). Each of those translates a Verdict into its own wire shape,
// following the decision table of docs/ARCHITECTURE.md:
//
//	canonical   SDK can_use_tool                          hook PermissionRequest
//	once        allow                                     {behavior: allow}
//	always      allow + updatedPermissions (suggestions)  allow + updatedPermissions (suggestions)
//	reject      deny                                      {behavior: deny}
//	(abort)     deny + interrupt, then interrupt          deny + interrupt
package perm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/happy-dev/happy/agent"
)

// Default messages shown to the model on a deny.
const (
	DefaultRejectMessage = "The user rejected this tool use."
	DefaultAbortMessage  = "The user aborted the turn."
)

// ErrDecisionAndAbort: an Answer gave both a decision and Abort.
var ErrDecisionAndAbort = errors.New("answer has both a decision and abort")

// Answer is the canonical answer to a permission request: exactly one of a
// Decision (once, always, reject) and Abort. Any other Decision is refused
// with agent.ErrUnknownDecision, never mapped to allow.
type Answer struct {
	Decision agent.Decision
	// Abort ends the turn instead of deciding.
	Abort bool
	// UpdatedInput replaces the tool input on allow (an AskUserQuestion
	// answer carries its answers here); nil leaves the input unchanged.
	UpdatedInput json.RawMessage
	// Message is the reason shown to the model on reject or abort; a
	// default is used when empty.
	Message string
}

// Verdict is a validated Answer, ready for translation to a wire shape.
type Verdict struct {
	Allow        bool            // allow; false is deny
	Always       bool            // allow and remember (send the suggestions back as updatedPermissions)
	Interrupt    bool            // deny and end the turn
	Message      string          // deny message (never empty on deny)
	UpdatedInput json.RawMessage // allow with this input; nil: unchanged
}

// Verdict validates the answer. Errors: agent.ErrUnknownDecision (wrapped
// in a *agent.EnumError), ErrDecisionAndAbort.
func (a Answer) Verdict() (Verdict, error) {
	if a.Abort {
		if a.Decision != "" {
			return Verdict{}, fmt.Errorf("%w (%q)", ErrDecisionAndAbort, a.Decision)
		}
		return Verdict{Interrupt: true, Message: orDefault(a.Message, DefaultAbortMessage)}, nil
	}
	d, err := agent.ParseDecision(string(a.Decision))
	if err != nil {
		return Verdict{}, err
	}
	switch d {
	case agent.DecisionOnce:
		return Verdict{Allow: true, UpdatedInput: a.UpdatedInput}, nil
	case agent.DecisionAlways:
		return Verdict{Allow: true, Always: true, UpdatedInput: a.UpdatedInput}, nil
	default:
		return Verdict{Message: orDefault(a.Message, DefaultRejectMessage)}, nil
	}
}

// HasSuggestions reports whether raw (a permission_suggestions value) holds
// at least one suggestion to send back on "always".
func HasSuggestions(raw json.RawMessage) bool {
	var list []json.RawMessage
	return json.Unmarshal(raw, &list) == nil && len(list) > 0
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
