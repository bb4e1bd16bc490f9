package mapper

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func permRequest() Block {
	return Block{Type: BlockPermission, ID: "per_1", Permission: "edit", Patterns: []string{"hello.txt"},
		Always: []string{"*"}, Metadata: agent.Object{"filepath": "hello.txt"}}
}

func questionRequest() Block {
	return Block{Type: BlockQuestion, ID: "q_1", Questions: []agent.QuestionInfo{{Question: "Which database?", Header: "DB choice",
		Options: []agent.QuestionOption{{Label: "PostgreSQL", Description: "server"}, {Label: "SQLite", Description: "file"}}}}}
}

func resolvedPerm(d agent.Decision, at int64, reason string) *Block {
	b := permRequest()
	b.Decision, b.DecidedAt, b.Reason = d, &at, reason
	return &b
}

// states used by the transition table.
func stateFixtures() map[string]ToolState {
	in := agent.Object{"path": "hello.txt"}
	req := permRequest()
	q := questionRequest()
	answered := questionRequest()
	answered.Answers, answered.DecidedAt = [][]string{{"PostgreSQL"}}, ptr[int64](30)
	return map[string]ToolState{
		"none":             {},
		"pending":          {Status: StatusPending, Input: in, Raw: `{"path":`},
		"running":          {Status: StatusRunning, Input: in, Time: ToolTime{Start: 10}},
		"running titled":   {Status: StatusRunning, Input: in, Title: "write", Time: ToolTime{Start: 10}},
		"blocked":          {Status: StatusBlocked, Input: in, Time: ToolTime{Start: 10}, Block: &req},
		"blocked other":    {Status: StatusBlocked, Input: in, Time: ToolTime{Start: 10}, Block: &Block{Type: BlockPermission, ID: "per_2", Permission: "edit", Patterns: []string{}, Always: []string{}, Metadata: agent.Object{}}},
		"blocked question": {Status: StatusBlocked, Input: in, Time: ToolTime{Start: 10}, Block: &q},
		"running once":     {Status: StatusRunning, Input: in, Time: ToolTime{Start: 10}, Block: resolvedPerm(agent.DecisionOnce, 20, "")},
		"running always":   {Status: StatusRunning, Input: in, Time: ToolTime{Start: 10}, Block: resolvedPerm(agent.DecisionAlways, 20, "")},
		"running answered": {Status: StatusRunning, Input: in, Time: ToolTime{Start: 10}, Block: &answered},
		"completed":        {Status: StatusCompleted, Input: in, Output: "ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}},
		"completed once":   {Status: StatusCompleted, Input: in, Output: "ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}, Block: resolvedPerm(agent.DecisionOnce, 20, "")},
		"completed other":  {Status: StatusCompleted, Input: in, Output: "ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}, Block: resolvedPerm(agent.DecisionOnce, 21, "")},
		"error":            {Status: StatusError, Input: in, Error: "boom", Time: ToolTime{Start: 10, End: 40}},
		"error rejected":   {Status: StatusError, Input: in, Error: "rejected", Time: ToolTime{Start: 10, End: 20}, Block: resolvedPerm(agent.DecisionReject, 20, "")},
		"error once":       {Status: StatusError, Input: in, Error: "boom", Time: ToolTime{Start: 10, End: 40}, Block: resolvedPerm(agent.DecisionOnce, 20, "")},
		"error cancelled":  {Status: StatusError, Input: in, Error: "cancelled", Time: ToolTime{Start: 10, End: 20}, Block: resolvedPerm(agent.DecisionReject, 20, agent.ReasonCancelled)},
		// Repeats of a terminal state: more input and metadata members, an
		// output or title where there was none; or a change of what it said.
		"completed more":      {Status: StatusCompleted, Input: agent.Object{"path": "hello.txt", "cwd": "/w"}, Output: "ok", Title: "t", Metadata: agent.Object{"exit": 0.0}, Time: ToolTime{Start: 10, End: 40}},
		"completed untitled":  {Status: StatusCompleted, Input: in, Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}},
		"completed other out": {Status: StatusCompleted, Input: in, Output: "not ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}},
		"completed path":      {Status: StatusCompleted, Input: agent.Object{"path": "other.txt"}, Output: "ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}},
		"completed later":     {Status: StatusCompleted, Input: in, Output: "ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 50}},
		"completed no input":  {Status: StatusCompleted, Input: agent.Object{}, Output: "ok", Title: "t", Metadata: agent.Object{}, Time: ToolTime{Start: 10, End: 40}},
		"error rejected more": {Status: StatusError, Input: agent.Object{"path": "hello.txt", "description": "d"}, Error: "rejected", Metadata: agent.Object{"rawOutput": "no"}, Time: ToolTime{Start: 10, End: 20}, Block: resolvedPerm(agent.DecisionReject, 20, "")},
		"error other":         {Status: StatusError, Input: in, Error: "bang", Time: ToolTime{Start: 10, End: 40}},
		"blocked no block":    {Status: StatusBlocked, Input: in, Time: ToolTime{Start: 10}},
		"pending with time":   {Status: StatusPending, Input: in, Time: ToolTime{Start: 1}},
	}
}

func TestTransitionTable(t *testing.T) {
	s := stateFixtures()
	cases := []struct {
		from, to string
		reason   string // "" = legal
	}{
		{"none", "pending", ""},
		{"none", "running", "a tool starts pending"},
		{"pending", "pending", ""},
		{"pending", "running", ""},
		{"pending", "error", ""}, // settle
		{"pending", "completed", "a pending tool goes to running (or is settled to error) first"},
		{"pending", "blocked", "a pending tool goes to running (or is settled to error) first"},
		{"pending", "error rejected", "a pending tool was never blocked, so it has no block to keep"},
		{"running", "running titled", ""},
		{"running", "blocked", ""},
		{"running", "completed", ""},
		{"running", "error", ""},
		{"running", "pending", "a running tool cannot become pending again"},
		{"running", "completed once", `block "per_1" appears without the tool being blocked`},
		{"blocked", "running once", ""},
		{"blocked", "running always", ""},
		{"blocked", "error rejected", ""},
		{"blocked", "error cancelled", ""}, // settle
		{"blocked", "blocked", ""},
		{"blocked", "running", "blocked → running needs a decision"},
		{"blocked", "completed once", "a blocked tool goes to running with a decision, or to error when rejected"},
		{"blocked", "error once", `a blocked tool fails only when its block is rejected (decision reject), not "once"`},
		{"blocked", "error", "the block must be resolved and kept"},
		{"blocked", "blocked other", `block "per_2" is not the pending request "per_1"`},
		{"blocked", "pending", "the block must be resolved and kept"},
		{"blocked question", "running answered", ""},
		{"blocked question", "running once", `block "per_1" is not the pending request "q_1"`},
		{"running once", "completed once", ""},
		{"running once", "error once", ""},
		{"running once", "completed", `the resolved block "per_1" must be kept`},
		{"running once", "completed other", `the resolved block "per_1" must be kept unchanged`},
		{"running once", "blocked", `block "per_1" was already resolved`},
		{"running once", "blocked other", ""}, // a second request replaces the first
		{"completed", "completed", ""},        // identical: no-op
		{"completed", "running", "completed is terminal: leaving it or changing it is not allowed"},
		{"completed", "error", "completed is terminal: leaving it or changing it is not allowed"},
		{"completed once", "completed other", "completed is terminal: leaving it or changing it is not allowed"},
		{"error", "running", "error is terminal: leaving it or changing it is not allowed"},
		{"error", "error", ""},
		{"error rejected", "running once", "error is terminal: leaving it or changing it is not allowed"},
		{"completed", "completed more", ""},     // the agent confirms with more detail
		{"completed untitled", "completed", ""}, // a title and an output where there were none
		{"error rejected", "error rejected more", ""},
		{"completed more", "completed", "completed is terminal: leaving it or changing it is not allowed"}, // drops members
		{"completed", "completed other out", "completed is terminal: leaving it or changing it is not allowed"},
		{"completed", "completed path", "completed is terminal: leaving it or changing it is not allowed"},
		{"completed", "completed later", "completed is terminal: leaving it or changing it is not allowed"},
		{"completed", "completed no input", "completed is terminal: leaving it or changing it is not allowed"},
		{"error", "error other", "error is terminal: leaving it or changing it is not allowed"},
		{"error rejected", "completed once", "error is terminal: leaving it or changing it is not allowed"},
		{"error rejected more", "error rejected", "error is terminal: leaving it or changing it is not allowed"},
		{"running", "blocked no block", "the new state is invalid: block: blocked tool needs an unresolved block"},
		{"none", "pending with time", "the new state is invalid: time: a pending tool state has no time"},
	}
	for _, c := range cases {
		t.Run(c.from+" → "+c.to, func(t *testing.T) {
			err := Transition(s[c.from], s[c.to])
			if c.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var te *TransitionError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v, want a *TransitionError", err)
			}
			if te.Reason != c.reason || te.From != s[c.from].Status || te.To != s[c.to].Status {
				t.Fatalf("got %s → %s %q\nwant %q", te.From, te.To, te.Reason, c.reason)
			}
			if !errors.Is(err, ErrIllegalTransition) {
				t.Fatal("does not wrap ErrIllegalTransition")
			}
		})
	}
}

func TestToolLifecycleMethods(t *testing.T) {
	p := PendingState(agent.Object{"path": "hello.txt"}, `{"path":"hello.txt"}`)
	r, err := p.Run(100)
	if err != nil || r.Status != StatusRunning || r.Time.Start != 100 || r.Raw != "" {
		t.Fatalf("run: %+v %v", r, err)
	}
	r.Title = "writeFile hello.txt"
	b, err := r.Ask(permRequest())
	if err != nil || b.Status != StatusBlocked || b.Block.Resolved() || b.Title != "writeFile hello.txt" {
		t.Fatalf("ask: %+v %v", b, err)
	}
	// Unknown decisions are refused and change nothing.
	for _, d := range []agent.Decision{"allow", "", "Once"} {
		same, err := b.Decide(d, 200, "")
		if err == nil || !errors.Is(err, agent.ErrUnknownDecision) || !errors.Is(err, ErrIllegalTransition) || !reflect.DeepEqual(same, b) {
			t.Fatalf("decide %q: %+v %v", d, same, err)
		}
	}
	r2, err := b.Decide(agent.DecisionOnce, 200, "")
	if err != nil || r2.Status != StatusRunning || r2.Block.Decision != agent.DecisionOnce || *r2.Block.DecidedAt != 200 || r2.Title != "writeFile hello.txt" {
		t.Fatalf("decide once: %+v %v", r2, err)
	}
	c, err := r2.Complete("Created hello.txt (12 bytes)", "writeFile hello.txt", nil, 300)
	if err != nil {
		t.Fatal(err)
	}
	want := ToolState{Status: StatusCompleted, Input: agent.Object{"path": "hello.txt"}, Output: "Created hello.txt (12 bytes)",
		Title: "writeFile hello.txt", Metadata: agent.Object{}, Time: ToolTime{Start: 100, End: 300}, Block: resolvedPerm(agent.DecisionOnce, 200, "")}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("completed = %+v\nwant %+v", c, want)
	}
	// Nothing leaves a terminal state.
	if _, err := c.Fail("x", nil, 400); err == nil {
		t.Fatal("completed → error accepted")
	}
	if _, err := c.Settle(agent.ReasonCancelled, 400); err == nil {
		t.Fatal("settle of a completed tool accepted")
	}
	if _, err := c.Run(1); err == nil {
		t.Fatal("completed → running accepted")
	}

	// Reject: the tool errors, the block is kept with the decision.
	e, err := b.Decide(agent.DecisionReject, 250, "")
	if err != nil || e.Status != StatusError || e.Error != "rejected" || e.Time.End != 250 || e.Block.Decision != agent.DecisionReject {
		t.Fatalf("reject: %+v %v", e, err)
	}

	// Settle each open state.
	sp, err := p.Settle(agent.ReasonAgentExited, 500)
	if err != nil || sp.Status != StatusError || sp.Error != agent.ReasonAgentExited || sp.Time != (ToolTime{Start: 500, End: 500}) || sp.Block != nil {
		t.Fatalf("settle pending: %+v %v", sp, err)
	}
	sr, err := r2.Settle(agent.ReasonCancelled, 500)
	if err != nil || sr.Block == nil || sr.Block.Decision != agent.DecisionOnce || sr.Time != (ToolTime{Start: 100, End: 500}) {
		t.Fatalf("settle running keeps its resolved block: %+v %v", sr, err)
	}
	sb, err := b.Settle(agent.ReasonTimeout, 500)
	if err != nil || sb.Error != agent.ReasonTimeout || sb.Block.Decision != agent.DecisionReject || sb.Block.Reason != agent.ReasonTimeout || *sb.Block.DecidedAt != 500 {
		t.Fatalf("settle blocked: %+v %v", sb, err)
	}
	if b.Block.Resolved() {
		t.Fatal("settling mutated the blocked state it started from")
	}
	if _, err := b.Settle("", 500); err == nil {
		t.Fatal("settle without a reason accepted")
	}

	// Questions are answered, or dismissed with reject.
	qb, err := r.Ask(questionRequest())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qb.Decide(agent.DecisionOnce, 1, ""); err == nil {
		t.Fatal("question decided once")
	}
	if _, err := qb.Answer([][]string{}, 1); err == nil || !strings.Contains(err.Error(), "0 answers for 1 questions") {
		t.Fatalf("short answers: %v", err)
	}
	qa, err := qb.Answer([][]string{{"PostgreSQL"}}, 210)
	if err != nil || qa.Status != StatusRunning || !reflect.DeepEqual(qa.Block.Answers, [][]string{{"PostgreSQL"}}) {
		t.Fatalf("answer: %+v %v", qa, err)
	}
	qd, err := qb.Decide(agent.DecisionReject, 220, agent.ReasonAnsweredInAgent)
	if err != nil || qd.Status != StatusError || qd.Block.Answers == nil || len(qd.Block.Answers) != 0 || qd.Error != "rejected: answered-in-agent" {
		t.Fatalf("dismiss question: %+v %v", qd, err)
	}
	if _, err := r.Answer([][]string{{"x"}}, 1); err == nil {
		t.Fatal("answer on a running tool accepted")
	}
	if _, err := p.Ask(permRequest()); err == nil {
		t.Fatal("pending → blocked accepted")
	}
	if _, err := r.Ask(*resolvedPerm(agent.DecisionOnce, 1, "")); err == nil {
		t.Fatal("blocked on a resolved block")
	}
}

func TestTransitionPath(t *testing.T) {
	s := stateFixtures()
	statuses := func(p []ToolState) string {
		var out []string
		for _, st := range p {
			str := string(st.Status)
			if st.Block != nil {
				if st.Block.Resolved() {
					str += "+" + string(st.Block.Decision)
					if st.Block.Decision == "" {
						str += "answered"
					}
				} else {
					str += "+ask"
				}
			}
			out = append(out, str)
		}
		return strings.Join(out, " → ")
	}
	cases := []struct {
		from, to string
		want     string // "" = refused
	}{
		{"pending", "completed", "running → completed"},
		{"pending", "running", "running"},
		{"none", "completed", "pending → running → completed"},
		{"pending", "blocked", "running → blocked+ask"},
		{"pending", "completed once", "running → blocked+ask → running+once → completed+once"},
		{"pending", "error rejected", "running → blocked+ask → error+reject"},
		{"blocked", "completed once", "running+once → completed+once"},
		{"blocked question", "running answered", "running+answered"},
		{"running", "completed once", "blocked+ask → running+once → completed+once"},
		{"pending", "error", "error"},
		{"blocked", "running", ""},
		{"blocked", "completed", ""},
		{"completed", "running", ""},
		{"error rejected", "completed once", ""},
	}
	for _, c := range cases {
		t.Run(c.from+" → "+c.to, func(t *testing.T) {
			path, err := TransitionPath(s[c.from], s[c.to])
			if c.want == "" {
				if err == nil || !errors.Is(err, ErrIllegalTransition) {
					t.Fatalf("path %s, err %v; want refusal", statuses(path), err)
				}
				if !errors.Is(Transition(s[c.from], s[c.to]), ErrIllegalTransition) {
					t.Fatal("direct move legal but path refused")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := statuses(path); got != c.want {
				t.Fatalf("path = %s\nwant   %s", got, c.want)
			}
			prev := s[c.from]
			for i, st := range path {
				if err := Transition(prev, st); err != nil {
					t.Fatalf("step %d illegal: %v", i, err)
				}
				prev = st
			}
			if !reflect.DeepEqual(path[len(path)-1], s[c.to]) {
				t.Fatal("path does not end at the target")
			}
			// Synthesised states take the target's input and the first start time.
			for _, st := range path[:len(path)-1] {
				if !reflect.DeepEqual(st.Input, s[c.to].Input) {
					t.Errorf("synthesised input %v", st.Input)
				}
			}
		})
	}
}

// A rule's answer keeps the rule on the block; its action must give the
// decision.
func TestDecideByRule(t *testing.T) {
	r, _ := PendingState(agent.Object{"command": "ls"}, "").Run(100)
	b, err := r.Ask(permRequest())
	if err != nil {
		t.Fatal(err)
	}
	allow := PermissionRule{Permission: "edit", Pattern: "hello*", Action: ActionAllow}
	deny := PermissionRule{Permission: "edit", Pattern: "*.txt", Action: ActionDeny}
	ok, err := b.DecideByRule(agent.DecisionOnce, 200, allow)
	if err != nil || ok.Status != StatusRunning || ok.Block.Decision != agent.DecisionOnce || ok.Block.Reason != agent.ReasonRule ||
		!reflect.DeepEqual(ok.Block.Rule, &allow) || *ok.Block.DecidedAt != 200 {
		t.Fatalf("allow: %+v %+v %v", ok, ok.Block, err)
	}
	c, err := ok.Complete("done", "edit", nil, 300)
	if err != nil || !reflect.DeepEqual(c.Block.Rule, &allow) {
		t.Fatalf("complete keeps the rule: %+v %v", c, err)
	}
	no, err := b.DecideByRule(agent.DecisionReject, 210, deny)
	if err != nil || no.Status != StatusError || no.Error != "rejected: denied by rule edit:*.txt" || !reflect.DeepEqual(no.Block.Rule, &deny) {
		t.Fatalf("deny: %+v %v", no, err)
	}
	for _, c := range []struct {
		d    agent.Decision
		rule PermissionRule
	}{
		{agent.DecisionReject, allow},
		{agent.DecisionOnce, deny},
		{agent.DecisionOnce, PermissionRule{Permission: "edit", Pattern: "*", Action: ActionAsk}},
		{agent.DecisionOnce, PermissionRule{Pattern: "*", Action: ActionAllow}},
	} {
		if same, err := b.DecideByRule(c.d, 220, c.rule); err == nil || !errors.Is(err, ErrIllegalTransition) || !reflect.DeepEqual(same, b) {
			t.Errorf("%s by %+v: %+v %v", c.d, c.rule, same, err)
		}
	}
	if b.Block.Rule != nil {
		t.Fatal("deciding mutated the blocked state it started from")
	}
	// Only a resolved permission block carries a rule.
	unresolved := *b.Block
	unresolved.Rule = &allow
	q := questionRequest()
	resolvedQ := q
	resolvedQ.DecidedAt, resolvedQ.Answers, resolvedQ.Reason, resolvedQ.Rule = ptr[int64](1), [][]string{{"PostgreSQL"}}, agent.ReasonRule, &allow
	for _, bad := range []Block{unresolved, resolvedQ} {
		if err := bad.Validate(); err == nil {
			t.Errorf("block %+v with a rule validated", bad)
		}
	}
	// The request a synthesised path passes through has no rule.
	path, err := TransitionPath(PendingState(agent.Object{"command": "ls"}, ""), c)
	if err != nil || len(path) != 4 || path[1].Block == nil || path[1].Block.Rule != nil || path[1].Block.Resolved() {
		t.Fatalf("path %+v %v", path, err)
	}
}
