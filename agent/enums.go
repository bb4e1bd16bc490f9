package agent

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels wrapped by *EnumError, one per enumeration, so callers can
// branch with errors.Is (for instance to record DropUnknownDecision).
var (
	ErrUnknownValue        = errors.New("unknown enumeration value")
	ErrUnknownDecision     = errors.New("unknown permission decision")
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

// ParseEnum returns the value of allowed that equals s exactly (case
// included), or an *EnumError naming kind, wrapping ErrUnknownValue and
// base (when not nil), and listing what would have been accepted. It is the
// one parser behind every enumeration of the vocabulary and of the model.
func ParseEnum[T ~string](kind string, base error, s string, allowed ...T) (T, error) {
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
	return ParseEnum("decision", ErrUnknownDecision, s, DecisionOnce, DecisionAlways, DecisionReject)
}

// ParseTodoStatus maps "pending", "in_progress", "completed" or
// "cancelled" to a TodoStatus; anything else is refused with an *EnumError
// wrapping ErrUnknownTodoStatus.
func ParseTodoStatus(s string) (TodoStatus, error) {
	return ParseEnum("todo status", ErrUnknownTodoStatus, s, TodoPending, TodoInProgress, TodoCompleted, TodoCancelled)
}

// ParseTodoPriority maps "high", "medium" or "low" to a TodoPriority;
// anything else is refused with an *EnumError wrapping
// ErrUnknownTodoPriority.
func ParseTodoPriority(s string) (TodoPriority, error) {
	return ParseEnum("todo priority", ErrUnknownTodoPriority, s, PriorityHigh, PriorityMedium, PriorityLow)
}
