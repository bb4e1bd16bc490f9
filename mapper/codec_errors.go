package mapper

import (
	"errors"
	"fmt"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// ErrInvalid is wrapped by every error that refuses a model value, on the
// way in (decoding) or out (encoding, which validates first): a missing
// id, a wrong JSON type, an impossible tool state. errors.As the error to a
// *FieldError for the path and the drop reason.
var ErrInvalid = errors.New("invalid transcript value")

// FieldError refuses one value of the model. Path locates it from the root
// of what was being decoded or encoded, e.g.
// "messages[2].parts[3].state.block"; Reason is the drop reason a reader
// counts it under; Msg says what is wrong; Err, when set, is the underlying
// error (an *EnumError for an unknown decision, for instance).
type FieldError struct {
	Path   string
	Reason agent.DropReason
	Msg    string
	Err    error
}

// Error renders "path: message".
func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// Unwrap returns ErrInvalid and the underlying error, if any.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// at prefixes the path of a *FieldError with p (or wraps another error in
// a FieldError at p).
func at(p string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		out := *fe
		out.Path = joinPath(p, fe.Path)
		return &out
	}
	return &FieldError{Path: p, Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
}

func joinPath(parent, child string) string {
	switch {
	case parent == "":
		return child
	case child == "":
		return parent
	case strings.HasPrefix(child, "["):
		return parent + child
	}
	return parent + "." + child
}

func invalid(path, format string, args ...any) error {
	return &FieldError{Path: path, Reason: agent.DropInvalidField, Msg: fmt.Sprintf(format, args...)}
}

// Sentinels wrapped by *EnumError, one per enumeration, so callers can
// branch with errors.Is (for instance to record DropUnknownDecision).
var (
	ErrUnknownAction = errors.New("unknown rule action")
)

// ParseAction maps "allow", "deny" or "ask" to an Action; anything else is
// refused with an *EnumError wrapping ErrUnknownAction.
func ParseAction(s string) (Action, error) {
	return agent.ParseEnum("action", ErrUnknownAction, s, ActionAllow, ActionDeny, ActionAsk)
}

func parseRole(s string) (Role, error) {
	return agent.ParseEnum("role", nil, s, RoleUser, RoleAssistant)
}

func parseToolStatus(s string) (ToolStatus, error) {
	return agent.ParseEnum("tool status", nil, s, StatusPending, StatusRunning, StatusBlocked, StatusCompleted, StatusError)
}

func parseBlockType(s string) (BlockType, error) {
	return agent.ParseEnum("block type", nil, s, BlockPermission, BlockQuestion)
}

func parseFinish(s string) (string, error) {
	return agent.ParseEnum("finish reason", nil, s, agent.FinishStop, agent.FinishToolCalls, agent.FinishLength, agent.FinishAborted, agent.FinishError)
}
