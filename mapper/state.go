package mapper

// The tool state machine (seed 001, with docs/ARCHITECTURE.md "Tool state
// transitions"):
//
//	pending ──→ running ──→ completed
//	               │
//	               ├──→ blocked ──→ running ──→ completed
//	               │        │
//	               │        └──→ error (rejected)
//	               └──→ error
//
// plus settle: pending, running or blocked → error with a reason (a blocked
// tool's block is resolved as decision "reject" with that reason). Updates
// within an open status (pending input growing, a running tool's title or
// metadata) are allowed; a terminal state is never left, and what it says is
// never changed: a repeat of it may only add what it did not say yet (an
// agent confirming the state it is in, with more detail; see confirms).
//
// Times are passed in (Unix ms); nothing here reads the clock.

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/happy-dev/happy/agent"
)

// ErrIllegalTransition is wrapped by every *TransitionError.
var ErrIllegalTransition = errors.New("illegal tool state transition")

// TransitionError refuses a tool state change: From and To are the
// statuses (To is the status asked for; "" for the zero state), Reason says
// why, Err is an underlying error when there is one (a *FieldError for a new
// state that is itself invalid, an *EnumError for an unknown decision).
// errors.Is(err, ErrIllegalTransition) holds for every TransitionError.
type TransitionError struct {
	From   ToolStatus
	To     ToolStatus
	Reason string
	Err    error
}

// Error renders "tool state blocked → running: blocked → running needs a decision".
func (e *TransitionError) Error() string {
	from, to := e.From, e.To
	if from == "" {
		from = "(none)"
	}
	if to == "" {
		to = "(none)"
	}
	return fmt.Sprintf("tool state %s → %s: %s", from, to, e.Reason)
}

// Unwrap returns ErrIllegalTransition and the underlying error, if any.
func (e *TransitionError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrIllegalTransition, e.Err}
	}
	return []error{ErrIllegalTransition}
}

func illegal(cur, next ToolStatus, format string, args ...any) *TransitionError {
	return &TransitionError{From: cur, To: next, Reason: fmt.Sprintf(format, args...)}
}

// Terminal reports whether the status is completed or error.
func (s ToolStatus) Terminal() bool { return s == StatusCompleted || s == StatusError }

// Transition reports whether a tool may go from cur to next; nil means
// legal. cur with an empty Status is "no state yet" and may only become
// pending. next must itself be valid (ToolState.Validate). Legal moves:
//
//   - (none) → pending
//   - pending → pending (input grows), running (no block) or error (settle)
//   - running → running (title, metadata; a kept block unchanged), blocked
//     (a new unresolved block), completed or error (a kept resolved block
//     stays as it was)
//   - blocked → blocked (same request, still unresolved), running (the same
//     block resolved with decision once or always, or a question answered),
//     error (the same block resolved with decision reject)
//   - completed → completed, error → error when the new state only adds to
//     the old one (confirms): an identical state is a no-op
//
// Anything else is refused with a *TransitionError.
func Transition(cur, next ToolState) error {
	from, to := cur.Status, next.Status
	if err := next.Validate(); err != nil {
		return &TransitionError{From: from, To: to, Reason: "the new state is invalid: " + err.Error(), Err: err}
	}
	switch from {
	case "":
		if to != StatusPending {
			return illegal(from, to, "a tool starts pending")
		}
		return nil
	case StatusPending:
		switch to {
		case StatusPending, StatusRunning, StatusError:
			if next.Block != nil {
				return illegal(from, to, "a pending tool was never blocked, so it has no block to keep")
			}
			return nil
		}
		return illegal(from, to, "a pending tool goes to running (or is settled to error) first")
	case StatusRunning:
		switch to {
		case StatusRunning, StatusCompleted, StatusError:
			return keptBlock(from, to, cur.Block, next.Block)
		case StatusBlocked:
			if cur.Block != nil && sameRequest(cur.Block, next.Block) {
				return illegal(from, to, "block %q was already resolved", cur.Block.ID)
			}
			return nil
		}
		return illegal(from, to, "a running tool cannot become pending again")
	case StatusBlocked:
		if !sameRequest(cur.Block, next.Block) {
			if next.Block == nil {
				if to == StatusRunning {
					return illegal(from, to, "blocked → running needs a decision")
				}
				return illegal(from, to, "the block must be resolved and kept")
			}
			return illegal(from, to, "block %q is not the pending request %q", next.Block.ID, cur.Block.ID)
		}
		switch to {
		case StatusBlocked:
			return nil
		case StatusRunning:
			if !next.Block.Resolved() {
				return illegal(from, to, "blocked → running needs a decision")
			}
			return nil // Validate refused a rejected block on a running state
		case StatusError:
			if next.Block.Decision != agent.DecisionReject {
				return illegal(from, to, "a blocked tool fails only when its block is rejected (decision reject), not %q", next.Block.Decision)
			}
			return nil
		}
		return illegal(from, to, "a blocked tool goes to running with a decision, or to error when rejected")
	case StatusCompleted, StatusError:
		if reflect.DeepEqual(cur, next) || confirms(cur, next) {
			return nil
		}
		return illegal(from, to, "%s is terminal: leaving it or changing it is not allowed", from)
	}
	return illegal(from, to, "unknown status %q", from)
}

// terminalChange refuses a change of what the terminal state st says.
func terminalChange(st ToolStatus) *TransitionError {
	return illegal(st, st, "%s is terminal: leaving it or changing it is not allowed", st)
}

// confirms reports whether next repeats the terminal state cur and only adds
// to it: the same status, error, raw input, times and block; an input and a
// metadata object holding every member of cur's with an equal value (and
// maybe more); the same title, output and attachments, or some where cur
// had none. A value cur had that next drops or changes is a contradiction.
func confirms(cur, next ToolState) bool {
	return cur.Status == next.Status && cur.Error == next.Error && cur.Raw == next.Raw &&
		reflect.DeepEqual(cur.Time, next.Time) && reflect.DeepEqual(cur.Block, next.Block) &&
		holds(next.Input, cur.Input) && holds(next.Metadata, cur.Metadata) &&
		(cur.Title == "" || cur.Title == next.Title) && (cur.Output == "" || cur.Output == next.Output) &&
		(len(cur.Attachments) == 0 || reflect.DeepEqual(cur.Attachments, next.Attachments))
}

// holds reports whether every member of sub is in super with an equal value.
func holds(super, sub agent.Object) bool {
	for k, v := range sub {
		w, ok := super[k]
		if !ok || !reflect.DeepEqual(v, w) {
			return false
		}
	}
	return true
}

// sameRequest reports whether two blocks are the same request (type, id,
// permission), whatever their resolution.
func sameRequest(a, b *Block) bool {
	return a != nil && b != nil && a.Type == b.Type && a.ID == b.ID && a.Permission == b.Permission
}

// keptBlock checks that a resolved block carried by a running state is
// kept, unchanged, by the next state.
func keptBlock(from, to ToolStatus, cur, next *Block) error {
	if cur == nil {
		if next != nil {
			return illegal(from, to, "block %q appears without the tool being blocked", next.ID)
		}
		return nil
	}
	if next == nil {
		return illegal(from, to, "the resolved block %q must be kept", cur.ID)
	}
	if !sameRequest(cur, next) || next.Decision != cur.Decision || !reflect.DeepEqual(next.DecidedAt, cur.DecidedAt) ||
		!reflect.DeepEqual(next.Answers, cur.Answers) || next.Reason != cur.Reason {
		return illegal(from, to, "the resolved block %q must be kept unchanged", cur.ID)
	}
	return nil
}

// PendingState is the first state of a tool call: input as known so far
// (nil is written as {}) and the raw input text streamed so far.
func PendingState(input agent.Object, raw string) ToolState {
	return ToolState{Status: StatusPending, Input: input, Raw: raw}
}

// apply checks cur → next and returns next, or cur and the refusal.
func apply(cur, next ToolState) (ToolState, error) {
	if err := Transition(cur, next); err != nil {
		return cur, err
	}
	return next, nil
}

// Run starts a pending tool: running since start (Unix ms), same input.
func (s ToolState) Run(start int64) (ToolState, error) {
	if s.Status != StatusPending {
		return s, illegal(s.Status, StatusRunning, "only a pending tool starts running")
	}
	return apply(s, ToolState{Status: StatusRunning, Input: s.Input, Time: ToolTime{Start: start}})
}

// Ask blocks a running tool on b, which must be an unresolved permission or
// question block (a running tool's earlier resolved block is replaced).
func (s ToolState) Ask(b Block) (ToolState, error) {
	if s.Status != StatusRunning {
		return s, illegal(s.Status, StatusBlocked, "only a running tool can be blocked")
	}
	next := s
	next.Status = StatusBlocked
	next.Block = &b
	return apply(s, next)
}

// rejectedText is the error of a tool whose block was rejected.
func rejectedText(reason string) string {
	if reason == "" {
		return "rejected"
	}
	return "rejected: " + reason
}

// Decide answers a blocked tool's permission block (or dismisses a
// question block with reject) at time at (Unix ms). once and always resume
// it (running, the block resolved and kept); reject fails it (error
// "rejected" or "rejected: <reason>", ending at at, the block kept with the
// decision). reason is recorded on the block; leave it "" when a person
// decided. Any other decision is refused (it wraps ErrUnknownDecision).
func (s ToolState) Decide(d agent.Decision, at int64, reason string) (ToolState, error) {
	if _, err := agent.ParseDecision(string(d)); err != nil {
		return s, &TransitionError{From: s.Status, To: StatusRunning, Reason: err.Error(), Err: err}
	}
	to := StatusRunning
	if d == agent.DecisionReject {
		to = StatusError
	}
	if s.Status != StatusBlocked || s.Block == nil {
		return s, illegal(s.Status, to, "only a blocked tool takes a decision")
	}
	if s.Block.Type == BlockQuestion && d != agent.DecisionReject {
		return s, illegal(s.Status, to, "a question is answered (Answer), not decided %q", d)
	}
	b := *s.Block
	b.Decision, b.DecidedAt, b.Reason = d, &at, reason
	if b.Type == BlockQuestion {
		b.Answers = [][]string{}
	}
	next := ToolState{Status: to, Input: s.Input, Metadata: s.Metadata, Time: ToolTime{Start: s.Time.Start}, Block: &b}
	if to == StatusRunning {
		next.Title = s.Title
	} else {
		next.Error = rejectedText(reason)
		next.Time.End = at
	}
	return apply(s, next)
}

// DecideByRule answers a blocked tool's permission block with decision d
// as permission rule rule did, at time at (Unix ms): like Decide with reason
// "rule", the rule kept on the block. A rejected tool's error names the rule
// ("rejected: denied by rule bash:rm *"). A rule whose action does not give
// d (allow: once or always, deny: reject) is refused.
func (s ToolState) DecideByRule(d agent.Decision, at int64, rule PermissionRule) (ToolState, error) {
	next, err := s.Decide(d, at, agent.ReasonRule)
	if err != nil {
		return s, err
	}
	b := *next.Block
	b.Rule = &rule
	next.Block = &b
	if next.Status == StatusError {
		next.Error = "rejected: denied by rule " + rule.String()
	}
	return apply(s, next)
}

// Answer resumes a tool blocked on a question with one list of selected
// labels per question, at time at (Unix ms).
func (s ToolState) Answer(answers [][]string, at int64) (ToolState, error) {
	if s.Status != StatusBlocked || s.Block == nil || s.Block.Type != BlockQuestion {
		return s, illegal(s.Status, StatusRunning, "only a tool blocked on a question takes answers")
	}
	b := *s.Block
	b.Answers, b.DecidedAt = answers, &at
	if b.Answers == nil {
		b.Answers = [][]string{}
	}
	next := s
	next.Status = StatusRunning
	next.Block = &b
	return apply(s, next)
}

// Complete finishes a running tool successfully at end (Unix ms). A nil
// metadata is written as {}; set Attachments on the result if the tool
// returned files.
func (s ToolState) Complete(output, title string, metadata agent.Object, end int64) (ToolState, error) {
	if metadata == nil {
		metadata = agent.Object{}
	}
	return apply(s, ToolState{Status: StatusCompleted, Input: s.Input, Output: output, Title: title,
		Metadata: metadata, Time: ToolTime{Start: s.Time.Start, End: end}, Block: s.Block})
}

// Fail finishes a running tool with an error message at end (Unix ms).
func (s ToolState) Fail(message string, metadata agent.Object, end int64) (ToolState, error) {
	if metadata == nil {
		metadata = s.Metadata
	}
	return apply(s, ToolState{Status: StatusError, Input: s.Input, Error: message, Metadata: metadata,
		Time: ToolTime{Start: s.Time.Start, End: end}, Block: s.Block})
}

// Settle closes an open tool (pending, running or blocked) with error text
// reason at time at (Unix ms), for a turn that ended with the tool still
// open (reasons such as ReasonCancelled, ReasonAgentExited, ReasonTimeout).
// A pending tool gets start = end = at; a blocked tool's block is resolved
// with decision reject and the reason. reason must not be empty.
func (s ToolState) Settle(reason string, at int64) (ToolState, error) {
	if !s.Status.Open() {
		return s, illegal(s.Status, StatusError, "only an open tool (pending, running, blocked) is settled")
	}
	if reason == "" {
		return s, illegal(s.Status, StatusError, "settling needs a reason")
	}
	next := ToolState{Status: StatusError, Input: s.Input, Error: reason, Metadata: s.Metadata,
		Time: ToolTime{Start: s.Time.Start, End: at}, Block: s.Block}
	switch s.Status {
	case StatusPending:
		next.Time.Start = at
	case StatusBlocked:
		b := *s.Block
		b.Decision, b.DecidedAt, b.Reason = agent.DecisionReject, &at, reason
		if b.Type == BlockQuestion {
			b.Answers = [][]string{}
		}
		next.Block = &b
	}
	return apply(s, next)
}

// unresolved returns the request a resolved block answered.
func unresolved(b *Block) *Block {
	u := *b
	u.Decision, u.Answers, u.DecidedAt, u.Reason, u.Rule = "", nil, nil, "", nil
	if u.Type == BlockPermission && u.Always == nil {
		u.Always = []string{}
	}
	return &u
}

// TransitionPath returns the legal sequence of states that leads from cur to
// next, next included, synthesising the intermediate states a provider
// skipped (docs/ARCHITECTURE.md: a tool whose result arrives right after its call goes
// pending → running → completed). The synthesised states take next's input,
// cur's start time when cur had one (else next's), cur's title, and the
// request and resolution of next's block:
//
//	(none)  → X          starts with pending
//	pending → completed  via running
//	pending → blocked    via running
//	pending → completed with a resolved block   via running, blocked, running
//	blocked → completed  via running with next's resolved block
//
// If no legal sequence exists (leaving a terminal state, blocked → running
// without a decision) the error is the *TransitionError of the direct move.
func TransitionPath(cur, next ToolState) ([]ToolState, error) {
	direct := Transition(cur, next)
	if direct == nil {
		return []ToolState{next}, nil
	}
	if cur.Status.Terminal() {
		return nil, direct
	}
	start := next.Time.Start
	title := ""
	if cur.Status == StatusRunning || cur.Status == StatusBlocked {
		start, title = cur.Time.Start, cur.Title
	}
	nodes := []ToolState{cur}
	if cur.Status == "" {
		nodes = append(nodes, PendingState(next.Input, ""))
	}
	nodes = append(nodes, ToolState{Status: StatusRunning, Input: next.Input, Title: title, Time: ToolTime{Start: start}})
	if next.Block != nil {
		req := unresolved(next.Block)
		nodes = append(nodes, ToolState{Status: StatusBlocked, Input: next.Input, Title: title, Time: ToolTime{Start: start}, Block: req})
		if next.Block.Resolved() && next.Block.Decision != agent.DecisionReject {
			nodes = append(nodes, ToolState{Status: StatusRunning, Input: next.Input, Title: title, Time: ToolTime{Start: start}, Block: next.Block})
		}
	}
	nodes = append(nodes, next)
	// Shortest path by breadth-first search over the few candidate states.
	goal := len(nodes) - 1
	prev := make([]int, len(nodes))
	for i := range prev {
		prev[i] = -1
	}
	prev[0] = 0
	queue := []int{0}
	for len(queue) > 0 && prev[goal] < 0 {
		a := queue[0]
		queue = queue[1:]
		for b := 1; b < len(nodes); b++ {
			if prev[b] >= 0 || b == a {
				continue
			}
			if Transition(nodes[a], nodes[b]) == nil {
				prev[b] = a
				queue = append(queue, b)
			}
		}
	}
	if prev[goal] < 0 {
		return nil, direct
	}
	var path []ToolState
	for i := goal; i != 0; i = prev[i] {
		path = append(path, nodes[i])
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path, nil
}
