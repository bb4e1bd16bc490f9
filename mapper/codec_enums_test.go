package mapper

import (
	"errors"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestParseEnums(t *testing.T) {
	type parse func(string) (string, error)
	wrap := func(f func(string) (agent.Decision, error)) parse {
		return func(s string) (string, error) { v, err := f(s); return string(v), err }
	}
	parsers := map[string]struct {
		fn       parse
		sentinel error
		good     []string
		bad      []string
	}{
		"decision": {wrap(agent.ParseDecision), agent.ErrUnknownDecision,
			[]string{"once", "always", "reject"},
			[]string{"", "allow", "deny", "Once", "ALWAYS", " once", "once ", "approved", "true", "abort"}},
		"action": {func(s string) (string, error) { v, err := ParseAction(s); return string(v), err }, ErrUnknownAction,
			[]string{"allow", "deny", "ask"},
			[]string{"", "Allow", "once", "always", "reject", "prompt"}},
		"todo status": {func(s string) (string, error) { v, err := agent.ParseTodoStatus(s); return string(v), err }, agent.ErrUnknownTodoStatus,
			[]string{"pending", "in_progress", "completed", "cancelled"},
			[]string{"", "in-progress", "done", "canceled", "Pending"}},
		"todo priority": {func(s string) (string, error) { v, err := agent.ParseTodoPriority(s); return string(v), err }, agent.ErrUnknownTodoPriority,
			[]string{"high", "medium", "low"},
			[]string{"", "urgent", "High", "normal"}},
	}
	for kind, p := range parsers {
		for _, s := range p.good {
			if v, err := p.fn(s); err != nil || v != s {
				t.Errorf("%s %q = %q, %v", kind, s, v, err)
			}
		}
		for _, s := range p.bad {
			v, err := p.fn(s)
			if err == nil || v != "" {
				t.Errorf("%s %q accepted as %q", kind, s, v)
				continue
			}
			var ee *agent.EnumError
			if !errors.As(err, &ee) || ee.Kind != kind || ee.Value != s {
				t.Errorf("%s %q: error %#v", kind, s, err)
			}
			if !errors.Is(err, p.sentinel) || !errors.Is(err, agent.ErrUnknownValue) {
				t.Errorf("%s %q: error does not wrap its sentinels", kind, s)
			}
			if kind != "decision" && errors.Is(err, agent.ErrUnknownDecision) {
				t.Errorf("%s %q: wraps ErrUnknownDecision", kind, s)
			}
		}
	}
	_, err := agent.ParseDecision("allow")
	if want := `unknown decision "allow" (want once, always or reject)`; err.Error() != want {
		t.Errorf("message = %q, want %q", err, want)
	}
}

func TestParseErrorKindDegrades(t *testing.T) {
	for in, want := range map[string]agent.ErrorKind{
		"auth": agent.ErrorAuth, "rate_limit": agent.ErrorRateLimit, "empty": agent.ErrorEmpty, "transport": agent.ErrorTransport,
		"protocol": agent.ErrorProtocol, "internal": agent.ErrorInternal, "": agent.ErrorInternal, "quota": agent.ErrorInternal, "AUTH": agent.ErrorInternal,
	} {
		if got := agent.ParseErrorKind(in); got != want {
			t.Errorf("ParseErrorKind(%q) = %q, want %q", in, got, want)
		}
	}
}
