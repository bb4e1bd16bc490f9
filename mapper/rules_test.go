package mapper

import (
	"errors"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestMatchWildcard(t *testing.T) {
	cases := []struct {
		s, pattern string
		want       bool
	}{
		{"anything/at/all", "*", true},
		{"", "*", true},
		{"", "", true},
		{"x", "", false},
		{"src/api/server.ts", "*.ts", true}, // "*" crosses "/"
		{"src/api/server.tsx", "*.ts", false},
		{"src/api/server.ts", "src/**", true},
		{"src", "src/**", false},
		{"src/", "src/**", true},
		{"lib/src/a.go", "src/**", false},
		{"hello.txt", "hello.txt", true},
		{"hello.txt", "Hello.txt", false}, // case-sensitive
		{"hello.txt", "hello?txt", true},
		{"hello.txt", "hello??txt", false},
		{"a/b", "a?b", true}, // "?" also crosses "/"
		{"ümlaut", "?mlaut", true},
		{"日本語.md", "??語.md", true},
		{"git log", "git log *", true}, // a trailing " *" is optional
		{"git log --oneline", "git log *", true},
		{"git logx", "git log *", false},
		{"git", "git log *", false},
		{"rm -rf /", "rm *", true},
		{"rmdir x", "rm *", false},
		{`C:\Users\me\a.ts`, "C:/Users/**", true}, // backslashes count as "/"
		{"C:/Users/me/a.ts", `C:\Users\*`, true},
		{"echo a\nb", "echo *", true}, // "*" crosses newlines
		{"a.b", "a.b", true},
		{"axb", "a.b", false}, // "." is literal
		{"a+b(c)", "a+b(c)", true},
		{"[abc]", "[abc]", true},
		{"b", "[abc]", false}, // no character classes
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "*a*a*a*a*a*a*a*a*c", false},
		{"abcabcabd", "*abd", true},
		{"abc", "a*b*c*", true},
		{"\xff\xfe", "\xff?", true},
	}
	for _, c := range cases {
		if got := MatchWildcard(c.s, c.pattern); got != c.want {
			t.Errorf("MatchWildcard(%q, %q) = %v, want %v", c.s, c.pattern, got, c.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	rules := []PermissionRule{
		{Permission: "*", Pattern: "*", Action: ActionAsk},
		{Permission: "read", Pattern: "*", Action: ActionAllow},
		{Permission: "edit", Pattern: "*", Action: ActionDeny},
		{Permission: "edit", Pattern: "src/**", Action: ActionAllow},
		{Permission: "edit", Pattern: "src/secret/*", Action: ActionDeny},
		{Permission: "bash", Pattern: "*", Action: ActionAsk},
		{Permission: "bash", Pattern: "git status *", Action: ActionAllow},
		{Permission: "bash", Pattern: "git *", Action: ActionAllow},
		{Permission: "bash", Pattern: "git push *", Action: ActionAsk},
		{Permission: "todo*", Pattern: "*", Action: ActionAllow},
		{Permission: "webfetch", Pattern: "*", Action: "sometimes"}, // unknown action: ask, never allow
	}
	cases := []struct {
		permission string
		patterns   []string
		want       Action
	}{
		{"read", []string{"/etc/passwd"}, ActionAllow},
		{"edit", []string{"README.md"}, ActionDeny},
		{"edit", []string{"src/a.go"}, ActionAllow},
		{"edit", []string{"src/secret/key.pem"}, ActionDeny}, // later rule wins
		{"edit", []string{"src/a.go", "README.md"}, ActionDeny},
		{"edit", []string{"src/a.go", "src/b.go"}, ActionAllow},
		{"bash", []string{"git status"}, ActionAllow},
		{"bash", []string{"git diff --stat"}, ActionAllow},
		{"bash", []string{"git push origin main"}, ActionAsk}, // last match
		{"bash", []string{"git status", "rm -rf /"}, ActionAsk},
		{"bash", []string{"ls"}, ActionAsk},
		{"todowrite", nil, ActionAllow}, // no patterns: the pattern "" matches "*"
		{"task", []string{"explore"}, ActionAsk},
		{"webfetch", []string{"https://example.com"}, ActionAsk},
	}
	for _, c := range cases {
		if got := Evaluate(rules, c.permission, c.patterns); got != c.want {
			t.Errorf("Evaluate(%s %q) = %s, want %s", c.permission, c.patterns, got, c.want)
		}
	}
	if got := Evaluate(nil, "edit", []string{"a"}); got != ActionAsk {
		t.Errorf("no rules = %s, want ask", got)
	}
	// No patterns: only rules that match the empty pattern apply.
	if got := Evaluate([]PermissionRule{{Permission: "bash", Pattern: "git *", Action: ActionAllow}}, "bash", nil); got != ActionAsk {
		t.Errorf("no patterns vs a narrow allow = %s, want ask", got)
	}
	r, ok := MatchRule(rules, "edit", "src/secret/x")
	if !ok || r != rules[4] {
		t.Errorf("MatchRule = %+v %v", r, ok)
	}
}

func TestRulesetAlwaysAndCascade(t *testing.T) {
	rs := Ruleset{
		Config:  []PermissionRule{{Permission: "bash", Pattern: "rm *", Action: ActionDeny}, {Permission: "read", Pattern: "*", Action: ActionAllow}},
		Session: []PermissionRule{{Permission: "edit", Pattern: "*", Action: ActionAsk}},
	}
	blocked := []BlockedTool{
		{CallID: "c1", Permission: "edit", Patterns: []string{"src/a.go"}},
		{CallID: "c2", Permission: "edit", Patterns: []string{"src/b.go", "docs/x.md"}},
		{CallID: "c3", Permission: "bash", Patterns: []string{"ls -la"}},
		{CallID: "c4", Permission: "bash", Patterns: []string{"rm -rf build"}},
		{CallID: "c5", Permission: "edit", Patterns: []string{"src/c.go"}},
	}
	if got := rs.Unblocked(blocked); got != nil {
		t.Fatalf("before always: %v", got)
	}
	b := Block{Type: BlockPermission, ID: "per_1", Permission: "edit", Patterns: []string{"src/a.go"},
		Always: []string{"src/*", "src/*"}, Metadata: agent.Object{}}
	added, err := rs.Always(&b)
	if err != nil {
		t.Fatal(err)
	}
	want := []PermissionRule{{Permission: "edit", Pattern: "src/*", Action: ActionAllow}}
	if !reflect.DeepEqual(added, want) || !reflect.DeepEqual(rs.Runtime, want) {
		t.Fatalf("added %v, runtime %v", added, rs.Runtime)
	}
	if got := rs.Unblocked(blocked); !reflect.DeepEqual(got, []string{"c1", "c5"}) {
		t.Fatalf("unblocked = %v, want [c1 c5]", got)
	}
	// A runtime allow never overrides a configured deny.
	bashAlways := Block{Type: BlockPermission, ID: "per_2", Permission: "bash", Patterns: []string{"ls -la"},
		Always: []string{"*"}, Metadata: agent.Object{}, Decision: agent.DecisionAlways, DecidedAt: ptr[int64](5)}
	if _, err := rs.Always(&bashAlways); err != nil {
		t.Fatal(err)
	}
	if got := rs.Evaluate("bash", []string{"rm -rf build"}); got != ActionDeny {
		t.Fatalf("rm after always(*) = %s, want deny", got)
	}
	if got := Evaluate(rs.Rules(), "bash", []string{"rm -rf build"}); got != ActionAllow {
		t.Fatalf("flat last-match evaluation = %s; OpenCode's flat order lets the later allow win", got)
	}
	if got := rs.Unblocked(blocked); !reflect.DeepEqual(got, []string{"c1", "c3", "c5"}) {
		t.Fatalf("unblocked = %v, want [c1 c3 c5]", got)
	}
	// Refusals.
	for name, bad := range map[string]*Block{
		"nil":      nil,
		"question": {Type: BlockQuestion, ID: "q"},
		"once":     {Type: BlockPermission, ID: "p", Permission: "edit", Decision: agent.DecisionOnce, DecidedAt: ptr[int64](1)},
		"reject":   {Type: BlockPermission, ID: "p", Permission: "edit", Decision: agent.DecisionReject, DecidedAt: ptr[int64](1)},
	} {
		if _, err := rs.Always(bad); !errors.Is(err, ErrNotAlways) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if got := RejectCascade("c2", append(blocked, BlockedTool{CallID: "c1"})); !reflect.DeepEqual(got, []string{"c1", "c3", "c4", "c5"}) {
		t.Fatalf("cascade = %v", got)
	}
	if got := RejectCascade("c1", blocked[:1]); got != nil {
		t.Fatalf("cascade of a lone tool = %v", got)
	}
}

func TestRuntimeRulesFromTranscript(t *testing.T) {
	tool := func(id string, b *Block) Part {
		return &ToolPart{PartBase: PartBase{ID: id, SessionID: "s", MessageID: "m"}, CallID: "c" + id, Tool: "edit",
			State: ToolState{Status: StatusCompleted, Input: agent.Object{}, Metadata: agent.Object{}, Block: b}}
	}
	always := func(perm string, pats ...string) *Block {
		return &Block{Type: BlockPermission, ID: "b", Permission: perm, Always: pats, Decision: agent.DecisionAlways, DecidedAt: ptr[int64](1)}
	}
	tr := Transcript{Session: Session{ID: "s"}, Messages: []MessageWithParts{{
		Info: &AssistantMessage{ID: "m", SessionID: "s"},
		Parts: []Part{
			tool("1", always("edit", "src/*")),
			tool("2", resolvedPerm(agent.DecisionOnce, 1, "")),
			tool("3", always("bash", "git *", "src/*")),
			tool("4", always("edit", "src/*")),
		},
	}}}
	want := []PermissionRule{
		{Permission: "edit", Pattern: "src/*", Action: ActionAllow},
		{Permission: "bash", Pattern: "git *", Action: ActionAllow},
		{Permission: "bash", Pattern: "src/*", Action: ActionAllow},
	}
	if got := RuntimeRules(&tr); !reflect.DeepEqual(got, want) {
		t.Fatalf("runtime rules = %v\nwant %v", got, want)
	}
}

// EvaluateRule names the rule behind an allow or a deny.
func TestEvaluateRule(t *testing.T) {
	rules := []PermissionRule{
		{Permission: "*", Pattern: "*", Action: ActionAsk},
		{Permission: "bash", Pattern: "ls*", Action: ActionAllow},
		{Permission: "bash", Pattern: "git *", Action: ActionAllow},
		{Permission: "bash", Pattern: "rm *", Action: ActionDeny},
		{Permission: "read", Pattern: "*", Action: ActionAllow},
	}
	cases := []struct {
		perm     string
		patterns []string
		action   Action
		rule     PermissionRule
		ok       bool
	}{
		{"bash", []string{"ls -l"}, ActionAllow, rules[1], true},
		{"bash", []string{"git status", "ls"}, ActionAllow, rules[2], true},
		{"bash", []string{"ls", "rm -rf x", "rm y"}, ActionDeny, rules[3], true},
		{"bash", []string{"ls", "make"}, ActionAsk, PermissionRule{}, false},
		{"read", nil, ActionAllow, rules[4], true},
		{"edit", []string{"a.go"}, ActionAsk, PermissionRule{}, false},
	}
	for _, c := range cases {
		a, r, ok := EvaluateRule(rules, c.perm, c.patterns)
		if a != c.action || r != c.rule || ok != c.ok {
			t.Errorf("%s %q: %s %+v %v, want %s %+v %v", c.perm, c.patterns, a, r, ok, c.action, c.rule, c.ok)
		}
		if e := Evaluate(rules, c.perm, c.patterns); e != a {
			t.Errorf("%s %q: Evaluate %s, EvaluateRule %s", c.perm, c.patterns, e, a)
		}
	}
	if a, _, ok := EvaluateRule(nil, "bash", []string{"ls"}); a != ActionAsk || ok {
		t.Errorf("no rules: %s %v", a, ok)
	}
}
