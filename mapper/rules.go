package mapper

// Permission rules (seed 001 "Permission rules"), evaluated the way
// OpenCode evaluates its rulesets, which the seed's rule shape comes from:
//
//   - A rule {permission, pattern, action} matches a request when its
//     permission wildcard matches the request's permission ("*" matches
//     every permission) and its pattern wildcard matches the pattern.
//   - Rules are checked in order and the LAST matching rule wins, so a
//     specific rule is written after the catch-all it refines. No matching
//     rule means "ask".
//   - A request with several patterns is denied if any pattern is denied,
//     allowed only if every pattern is allowed, and asked otherwise.
//
// Wildcards follow OpenCode's permission matcher, not shell globs: "*"
// matches any run of characters including "/" (so "*.ts" matches
// "src/a.ts", and "src/**" is the same as "src/*": everything under src/),
// "?" matches exactly one character, everything else matches itself
// (case-sensitive), backslashes count as "/" on both sides, and a pattern
// that ends in " *" also matches without that tail ("git log *" matches
// "git log"). The broad "*" errs towards matching: a deny rule catches more,
// and so does an allow rule, so write allow patterns narrowly.
//
// Two decisions of ours: a request with no patterns is evaluated as the
// single pattern "" (only rules whose pattern matches everything apply),
// where OpenCode would allow it without asking; and in a Ruleset the
// runtime "always" rules only turn an ask into an allow, they never
// override a deny (or allow) from the configuration or the session, because
// "always" patterns are proposed by the tool, not written by a person.

import (
	"errors"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/happy-dev/happy/agent"
)

// MatchWildcard reports whether s matches pattern with the wildcard rules
// above ("*" any run of characters including "/", "?" one character, a
// trailing " *" optional, backslashes as "/"). It runs in time
// O(len(s)·len(pattern)) at worst, without recursion.
func MatchWildcard(s, pattern string) bool {
	s = strings.ReplaceAll(s, `\`, "/")
	pattern = strings.ReplaceAll(pattern, `\`, "/")
	if head, ok := strings.CutSuffix(pattern, " *"); ok && globMatch(s, head) {
		return true
	}
	return globMatch(s, pattern)
}

// globMatch is the classic linear-backtracking star matcher over runes.
func globMatch(s, p string) bool {
	si, pi := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starS = pi, si
				pi++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[si:])
				si += n
				pi++
				continue
			default:
				rs, ns := utf8.DecodeRuneInString(s[si:])
				rp, np := utf8.DecodeRuneInString(p[pi:])
				if rs == rp && ns == np && s[si:si+ns] == p[pi:pi+np] {
					si += ns
					pi += np
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star swallow one more character and retry.
		_, n := utf8.DecodeRuneInString(s[starS:])
		starS += n
		si, pi = starS, starP+1
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// MatchRule returns the last rule that matches permission and pattern, and
// whether there was one.
func MatchRule(rules []PermissionRule, permission, pattern string) (PermissionRule, bool) {
	for i := len(rules) - 1; i >= 0; i-- {
		r := rules[i]
		if MatchWildcard(permission, r.Permission) && MatchWildcard(pattern, r.Pattern) {
			return r, true
		}
	}
	return PermissionRule{}, false
}

// ruleAction is a matched rule's action; an action that is not allow, deny
// or ask counts as ask (never as allow).
func ruleAction(r PermissionRule, ok bool) Action {
	if !ok {
		return ActionAsk
	}
	a, err := ParseAction(string(r.Action))
	if err != nil {
		return ActionAsk
	}
	return a
}

// Evaluate decides a request for permission on patterns (file paths, a
// command) against rules in order, last match winning: ActionDeny if any
// pattern is denied, ActionAllow if every pattern is allowed, ActionAsk
// otherwise (including when no rule matches). No patterns is evaluated as
// the one pattern "".
func Evaluate(rules []PermissionRule, permission string, patterns []string) Action {
	return combine(patterns, func(p string) Action {
		r, ok := MatchRule(rules, permission, p)
		return ruleAction(r, ok)
	})
}

// EvaluateRule decides like Evaluate and also returns the rule behind an
// allow or a deny, for the record (a resolved block's rule): for deny the
// rule that denied the first denied pattern, for allow the rule that allowed
// the first pattern (every pattern has one). ok is false when the answer is
// ActionAsk.
func EvaluateRule(rules []PermissionRule, permission string, patterns []string) (action Action, rule PermissionRule, ok bool) {
	if len(patterns) == 0 {
		patterns = []string{""}
	}
	var first, denied *PermissionRule
	action = combine(patterns, func(p string) Action {
		r, matched := MatchRule(rules, permission, p)
		a := ruleAction(r, matched)
		if first == nil && a == ActionAllow {
			first = &r
		}
		if denied == nil && a == ActionDeny {
			denied = &r
		}
		return a
	})
	switch action {
	case ActionDeny:
		return action, *denied, true
	case ActionAllow:
		return action, *first, true
	}
	return action, PermissionRule{}, false
}

func combine(patterns []string, each func(string) Action) Action {
	if len(patterns) == 0 {
		patterns = []string{""}
	}
	out := ActionAllow
	for _, p := range patterns {
		switch each(p) {
		case ActionDeny:
			return ActionDeny
		case ActionAllow:
		default:
			out = ActionAsk
		}
	}
	return out
}

// Ruleset holds a session's rules by source, in the order docs/ARCHITECTURE.md gives ("Permission policy"):
// Config (user config, then project config, then flags), Session (the
// session's own rules, Session.Permission; a child session's restrictions),
// Runtime (added by "always" answers during the session). The zero value
// is an empty ruleset, which asks for everything.
type Ruleset struct {
	Config  []PermissionRule
	Session []PermissionRule
	Runtime []PermissionRule
}

// Rules returns Config, Session and Runtime concatenated (a new slice).
func (r *Ruleset) Rules() []PermissionRule {
	return slices.Concat(r.Config, r.Session, r.Runtime)
}

// Evaluate decides a request like Evaluate over Config then Session, except
// that where those say ask (or nothing matches) the last matching Runtime
// rule decides: an "always" answer upgrades ask to allow but never
// overrides a configured deny or allow.
func (r *Ruleset) Evaluate(permission string, patterns []string) Action {
	static := slices.Concat(r.Config, r.Session)
	return combine(patterns, func(p string) Action {
		sr, ok := MatchRule(static, permission, p)
		if a := ruleAction(sr, ok); a != ActionAsk {
			return a
		}
		rr, ok := MatchRule(r.Runtime, permission, p)
		return ruleAction(rr, ok)
	})
}

// ErrNotAlways is returned by Ruleset.Always for a block it cannot take
// "always" rules from.
var ErrNotAlways = errors.New("block cannot grant always rules")

// Always records an "always" answer to permission block b: one runtime
// allow rule {b.Permission, pattern, allow} per pattern of b.Always, in
// order, skipping rules already present. It returns the rules added. b must
// be a permission block with a permission; a block already resolved with a
// decision other than always is refused. Both errors wrap ErrNotAlways.
func (r *Ruleset) Always(b *Block) ([]PermissionRule, error) {
	switch {
	case b == nil:
		return nil, &FieldError{Reason: agent.DropInvalidField, Msg: "no block", Err: ErrNotAlways}
	case b.Type != BlockPermission || b.Permission == "":
		return nil, &FieldError{Path: "type", Reason: agent.DropInvalidField, Msg: "only a permission block grants always rules", Err: ErrNotAlways}
	case b.Resolved() && b.Decision != agent.DecisionAlways:
		return nil, &FieldError{Path: "decision", Reason: agent.DropInvalidField, Msg: "block was decided " + string(b.Decision) + ", not always", Err: ErrNotAlways}
	}
	var added []PermissionRule
	for _, p := range b.Always {
		rule := PermissionRule{Permission: b.Permission, Pattern: p, Action: ActionAllow}
		if slices.Contains(r.Runtime, rule) {
			continue
		}
		r.Runtime = append(r.Runtime, rule)
		added = append(added, rule)
	}
	return added, nil
}

// BlockedTool is a tool waiting on a permission: its call id, and the
// permission and patterns of its block.
type BlockedTool struct {
	CallID     string
	Permission string
	Patterns   []string
}

// Unblocked returns, in order, the call ids of the blocked tools that the
// ruleset now allows outright (every pattern evaluates to allow), typically
// right after Always added rules: seed 001 "any other currently-blocked
// tools matching those patterns auto-unblock".
func (r *Ruleset) Unblocked(blocked []BlockedTool) []string {
	var out []string
	for _, b := range blocked {
		if r.Evaluate(b.Permission, b.Patterns) == ActionAllow {
			out = append(out, b.CallID)
		}
	}
	return out
}

// RejectCascade returns, in order and without repeats, the call ids of every
// blocked tool of the session other than the rejected one: seed 001 "if the
// user says reject, the tool errors AND all other pending blocked tools in
// the same session also error".
func RejectCascade(rejected string, blocked []BlockedTool) []string {
	var out []string
	for _, b := range blocked {
		if b.CallID != rejected && !slices.Contains(out, b.CallID) {
			out = append(out, b.CallID)
		}
	}
	return out
}

// RuntimeRules rebuilds the runtime rules of a session from its transcript:
// the always patterns of every permission block resolved "always" in t's own
// messages (children keep their own), in transcript order, without repeats.
func RuntimeRules(t *Transcript) []PermissionRule {
	var rs Ruleset
	for _, m := range t.Messages {
		for _, p := range m.Parts {
			tp, ok := p.(*ToolPart)
			if !ok || tp.State.Block == nil || tp.State.Block.Decision != agent.DecisionAlways {
				continue
			}
			_, _ = rs.Always(tp.State.Block) // decided always: cannot fail
		}
	}
	return rs.Runtime
}
