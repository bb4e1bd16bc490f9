package mapper

import (
	"errors"
	"fmt"
	"strings"
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
	Reason DropReason
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
	return &FieldError{Path: p, Reason: DropInvalidField, Msg: err.Error(), Err: err}
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
	return &FieldError{Path: path, Reason: DropInvalidField, Msg: fmt.Sprintf(format, args...)}
}

// Sentinels wrapped by *EnumError, one per enumeration, so callers can
// branch with errors.Is (for instance to record DropUnknownDecision).
var (
	ErrUnknownValue        = errors.New("unknown enumeration value")
	ErrUnknownDecision     = errors.New("unknown permission decision")
	ErrUnknownAction       = errors.New("unknown rule action")
	ErrUnknownTodoStatus   = errors.New("unknown todo status")
	ErrUnknownTodoPriority = errors.New("unknown todo priority")
)

// EnumError refuses a string that is not one of an enumeration's values.
// Kind names the enumeration ("decision", "action", "todo status", "todo
// priority", "role", "tool status", "block type", "finish reason"); Value is
// the refused string (as given, case included); Allowed lists what would
// have been accepted.
type EnumError struct {
	Kind    string
	Value   string
	Allowed []string
	base    error
}

// Error renders `unknown decision "allow" (want once, always or reject)`.
func (e *EnumError) Error() string {
	want := strings.Join(e.Allowed, ", ")
	if n := len(e.Allowed); n > 1 {
		want = strings.Join(e.Allowed[:n-1], ", ") + " or " + e.Allowed[n-1]
	}
	return fmt.Sprintf("unknown %s %q (want %s)", e.Kind, e.Value, want)
}

// Unwrap returns ErrUnknownValue and the enumeration's own sentinel.
func (e *EnumError) Unwrap() []error {
	if e.base != nil {
		return []error{ErrUnknownValue, e.base}
	}
	return []error{ErrUnknownValue}
}

func parseEnum[T ~string](kind string, base error, s string, allowed ...T) (T, error) {
	for _, a := range allowed {
		if string(a) == s {
			return a, nil
		}
	}
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	return "", &EnumError{Kind: kind, Value: s, Allowed: names, base: base}
}

// ParseDecision maps "once", "always" or "reject" to a Decision. Matching is
// exact and case-sensitive; anything else (including "", "allow", "ALWAYS")
// is refused with an *EnumError wrapping ErrUnknownDecision, never mapped to
// a default: guessing here would authorise something nobody chose.
func ParseDecision(s string) (Decision, error) {
	return parseEnum("decision", ErrUnknownDecision, s, DecisionOnce, DecisionAlways, DecisionReject)
}

// ParseAction maps "allow", "deny" or "ask" to an Action; anything else is
// refused with an *EnumError wrapping ErrUnknownAction.
func ParseAction(s string) (Action, error) {
	return parseEnum("action", ErrUnknownAction, s, ActionAllow, ActionDeny, ActionAsk)
}

// ParseTodoStatus maps "pending", "in_progress", "completed" or
// "cancelled" to a TodoStatus; anything else is refused with an *EnumError
// wrapping ErrUnknownTodoStatus.
func ParseTodoStatus(s string) (TodoStatus, error) {
	return parseEnum("todo status", ErrUnknownTodoStatus, s, TodoPending, TodoInProgress, TodoCompleted, TodoCancelled)
}

// ParseTodoPriority maps "high", "medium" or "low" to a TodoPriority;
// anything else is refused with an *EnumError wrapping
// ErrUnknownTodoPriority.
func ParseTodoPriority(s string) (TodoPriority, error) {
	return parseEnum("todo priority", ErrUnknownTodoPriority, s, PriorityHigh, PriorityMedium, PriorityLow)
}

func parseRole(s string) (Role, error) {
	return parseEnum("role", nil, s, RoleUser, RoleAssistant)
}

func parseToolStatus(s string) (ToolStatus, error) {
	return parseEnum("tool status", nil, s, StatusPending, StatusRunning, StatusBlocked, StatusCompleted, StatusError)
}

func parseBlockType(s string) (BlockType, error) {
	return parseEnum("block type", nil, s, BlockPermission, BlockQuestion)
}

func parseFinish(s string) (string, error) {
	return parseEnum("finish reason", nil, s, FinishStop, FinishToolCalls, FinishLength, FinishAborted, FinishError)
}
