package compat

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Request is a pending permission in agentState.requests, keyed by the
// tool's call id: {tool, arguments, createdAt (Unix ms), toolUseId}. Tool
// and arguments are the app's names (NativeTool, the same as the legacy
// tool-call-start's); toolUseId is the call id, which the tool-call-start
// carries as "call".
type Request struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	CreatedAt int64          `json:"createdAt"`
	ToolUseID string         `json:"toolUseId,omitempty"`
}

// CompletedRequest is an answered permission in agentState.completedRequests:
// the request plus completedAt (Unix ms), status (approved, denied,
// canceled), decision (approved, approved_for_session, denied, abort), the
// reason happy recorded, and the patterns an "always" answer allowed.
type CompletedRequest struct {
	Request
	CompletedAt  int64    `json:"completedAt"`
	Status       string   `json:"status"`
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason,omitempty"`
	AllowedTools []string `json:"allowedTools,omitempty"`
}

// Communication is a question waiting in agentState.communications, keyed
// by call id: {kind: "form", toolUseId, title?, createdAt, form: {questions}}.
// A question's id is its position ("0", "1", …), which the communication
// RPC's answers name (session.DecodeCommunication).
type Communication struct {
	Kind      string `json:"kind"`
	ToolUseID string `json:"toolUseId"`
	Title     string `json:"title,omitempty"`
	CreatedAt int64  `json:"createdAt"`
	Form      Form   `json:"form"`
}

// Form is a communication's questions.
type Form struct {
	Questions []FormQuestion `json:"questions"`
}

// FormQuestion is one question of a form: {id, header, question, options
// [{label, description?}], multiSelect, allowCustom}.
type FormQuestion struct {
	ID          string       `json:"id"`
	Header      string       `json:"header"`
	Question    string       `json:"question"`
	Options     []FormOption `json:"options"`
	MultiSelect bool         `json:"multiSelect"`
	AllowCustom bool         `json:"allowCustom"`
}

// FormOption is one choice of a question.
type FormOption struct {
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// CompletedCommunication is a settled question in
// agentState.completedCommunications: the communication's own fields, the
// same again under "communication" (the reference CLI's nesting), status
// (answered, cancelled), answers per question id ({options, custom?}) and
// completedAt (Unix ms).
type CompletedCommunication struct {
	Communication
	Nested      Communication         `json:"communication"`
	Status      string                `json:"status"`
	Answers     map[string]FormAnswer `json:"answers,omitempty"`
	CompletedAt int64                 `json:"completedAt"`
}

// FormAnswer is the answer to one question: the option labels chosen and
// the free text, when one was typed.
type FormAnswer struct {
	Options []string `json:"options"`
	Custom  string   `json:"custom,omitempty"`
}

// State is the part of agentState this package owns.
type State struct {
	Requests                map[string]Request
	CompletedRequests       map[string]CompletedRequest
	Communications          map[string]Communication
	CompletedCommunications map[string]CompletedCommunication
}

func newState() State {
	return State{Requests: map[string]Request{}, CompletedRequests: map[string]CompletedRequest{},
		Communications: map[string]Communication{}, CompletedCommunications: map[string]CompletedCommunication{}}
}

func (s State) clone() State {
	return State{Requests: maps.Clone(s.Requests), CompletedRequests: maps.Clone(s.CompletedRequests),
		Communications: maps.Clone(s.Communications), CompletedCommunications: maps.Clone(s.CompletedCommunications)}
}

// Apply folds one tool part's state into s at now (Unix ms): a blocked tool
// adds a request or a communication; a resolved block (or a tool that left
// blocked without one) moves it to the completed ones. It reports whether s
// changed.
func (s State) Apply(tp *mapper.ToolPart, flavor string, now int64) bool {
	st := tp.State
	b := st.Block
	id := tp.CallID
	if st.Status == mapper.StatusBlocked && b != nil && !b.Resolved() {
		switch b.Type {
		case mapper.BlockPermission:
			if _, ok := s.Requests[id]; ok {
				return false
			}
			if _, done := s.CompletedRequests[id]; done {
				return false
			}
			name, args := NativeTool(tp, flavor)
			s.Requests[id] = Request{Tool: name, Arguments: args, CreatedAt: now, ToolUseID: id}
			return true
		case mapper.BlockQuestion:
			if _, ok := s.Communications[id]; ok {
				return false
			}
			if _, done := s.CompletedCommunications[id]; done {
				return false
			}
			s.Communications[id] = communication(tp, b, now)
			return true
		}
		return false
	}
	if req, ok := s.Requests[id]; ok {
		delete(s.Requests, id)
		c := CompletedRequest{Request: req, CompletedAt: now, Status: "canceled", Decision: "abort", Reason: "settled"}
		if b.Resolved() && b.Type == mapper.BlockPermission {
			c.CompletedAt = *b.DecidedAt
			c.Status, c.Decision = permissionOutcome(b, st.Status)
			c.Reason = b.Reason
			if b.Decision == agent.DecisionAlways {
				c.AllowedTools = slices.Clone(b.Always)
			}
		}
		s.CompletedRequests[id] = c
		return true
	}
	if comm, ok := s.Communications[id]; ok {
		delete(s.Communications, id)
		c := CompletedCommunication{Communication: comm, Nested: comm, Status: "cancelled", CompletedAt: now}
		if b.Resolved() && b.Type == mapper.BlockQuestion {
			c.CompletedAt = *b.DecidedAt
			if b.Decision != agent.DecisionReject && len(b.Answers) > 0 {
				c.Status, c.Answers = "answered", formAnswers(b)
			}
		}
		s.CompletedCommunications[id] = c
		return true
	}
	return false
}

// permissionOutcome maps a resolved permission block to the app's status
// and decision: once → approved/approved, always →
// approved/approved_for_session; a reject nobody decided (the turn was
// cancelled, the agent or happy exited) → canceled/abort; answered in the
// agent's own terminal → approved unless the tool failed; any other reject
// (a person, a rule, the timeout) → denied/denied.
func permissionOutcome(b *mapper.Block, status mapper.ToolStatus) (string, string) {
	switch b.Decision {
	case agent.DecisionOnce:
		return "approved", "approved"
	case agent.DecisionAlways:
		return "approved", "approved_for_session"
	}
	switch b.Reason {
	case agent.ReasonCancelled, agent.ReasonAgentExited, agent.ReasonWrapperExited:
		return "canceled", "abort"
	case agent.ReasonAnsweredInAgent:
		if status != mapper.StatusError {
			return "approved", "approved"
		}
	}
	return "denied", "denied"
}

func communication(tp *mapper.ToolPart, b *mapper.Block, now int64) Communication {
	c := Communication{Kind: "form", ToolUseID: tp.CallID, Title: tp.State.Title, CreatedAt: now, Form: Form{Questions: []FormQuestion{}}}
	for i, q := range b.Questions {
		fq := FormQuestion{ID: strconv.Itoa(i), Header: q.Header, Question: q.Question, Options: []FormOption{},
			MultiSelect: q.Multiple != nil && *q.Multiple, AllowCustom: q.Custom == nil || *q.Custom}
		for _, o := range q.Options {
			fq.Options = append(fq.Options, FormOption{Label: o.Label, Description: o.Description})
		}
		c.Form.Questions = append(c.Form.Questions, fq)
	}
	return c
}

// formAnswers gives each question's labels by position: those that are
// options of the question, and the rest joined as the free text.
func formAnswers(b *mapper.Block) map[string]FormAnswer {
	out := map[string]FormAnswer{}
	for i, labels := range b.Answers {
		a := FormAnswer{Options: []string{}}
		var opts []agent.QuestionOption
		if i < len(b.Questions) {
			opts = b.Questions[i].Options
		}
		for _, l := range labels {
			if slices.ContainsFunc(opts, func(o agent.QuestionOption) bool { return o.Label == l }) {
				a.Options = append(a.Options, l)
			} else if a.Custom == "" {
				a.Custom = l
			} else {
				a.Custom += "\n" + l
			}
		}
		out[strconv.Itoa(i)] = a
	}
	return out
}

// Merge is the agentState happy writes over cur (the relay's value: any
// JSON, nil for null): requests and communications are replaced by s's (a
// request of an earlier run of the session no longer waits), the completed
// ones are s's added to cur's, and every other key of cur is kept. A cur
// that is not a JSON object is replaced.
func Merge(cur json.RawMessage, s State) (json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(cur) > 0 {
		if err := json.Unmarshal(cur, &m); err != nil || m == nil {
			m = map[string]json.RawMessage{}
		}
	}
	set := func(key string, v any) error {
		b, err := json.Marshal(v)
		if err == nil {
			m[key] = b
		}
		return err
	}
	overlay := func(key string, ours map[string]json.RawMessage) error {
		old := map[string]json.RawMessage{}
		if raw, ok := m[key]; ok {
			if err := json.Unmarshal(raw, &old); err != nil || old == nil {
				old = map[string]json.RawMessage{}
			}
		}
		maps.Copy(old, ours)
		return set(key, old)
	}
	if err := set("requests", s.Requests); err != nil {
		return nil, err
	}
	if err := set("communications", s.Communications); err != nil {
		return nil, err
	}
	cr, err := rawMap(s.CompletedRequests)
	if err != nil {
		return nil, err
	}
	if err := overlay("completedRequests", cr); err != nil {
		return nil, err
	}
	cc, err := rawMap(s.CompletedCommunications)
	if err != nil {
		return nil, err
	}
	if err := overlay("completedCommunications", cc); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

func rawMap[T any](in map[string]T) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(in))
	for k, v := range in {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}

// stateWriter keeps the State and writes it in the background: every change
// bumps a generation; the goroutine writes the newest one (a burst of
// changes is one write), retries a failed write after RetryAfter, and Close
// writes the last one.
type stateWriter struct {
	opts Options

	mu      sync.Mutex
	state   State
	gen     int64
	written int64

	kick   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
}

func startStateWriter(opts Options) *stateWriter {
	s := &stateWriter{opts: opts, state: newState(), kick: make(chan struct{}, 1), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.run(ctx)
	return s
}

// observe folds the tool parts of bus events into the state (runner
// goroutine; never waits for the relay).
func (s *stateWriter) observe(events []mapper.BusEvent, now time.Time) {
	changed := false
	s.mu.Lock()
	for _, ev := range events {
		if pu, ok := ev.(*mapper.MessagePartUpdated); ok {
			if tp, ok := pu.Part.(*mapper.ToolPart); ok && s.state.Apply(tp, s.opts.Flavor, now.UnixMilli()) {
				changed = true
			}
		}
	}
	if changed {
		s.gen++
	}
	s.mu.Unlock()
	if changed {
		s.poke()
	}
}

func (s *stateWriter) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *stateWriter) run(ctx context.Context) {
	defer close(s.done)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-retry:
		}
		retry = nil
		if err := s.write(ctx); err != nil && ctx.Err() == nil {
			s.opts.Log.Warn().Err(err).Msg("agentState not written yet; retried")
			retry = time.After(s.opts.RetryAfter)
		}
	}
}

// write writes the newest state unless it is written already.
func (s *stateWriter) write(ctx context.Context) error {
	s.mu.Lock()
	gen, st := s.gen, s.state.clone()
	done := s.written >= gen
	s.mu.Unlock()
	if done {
		return nil
	}
	if err := s.opts.UpdateState(ctx, func(cur json.RawMessage) (json.RawMessage, error) { return Merge(cur, st) }); err != nil {
		return err
	}
	s.mu.Lock()
	s.written = max(s.written, gen)
	s.mu.Unlock()
	return nil
}

func (s *stateWriter) close(ctx context.Context) error {
	s.cancel()
	<-s.done
	return s.write(ctx)
}

// Snapshot returns a copy of the agentState fields the writer owns (for
// tests and diagnostics); the zero State when it writes none.
func (w *Writer) Snapshot() State {
	if w.state == nil {
		return State{}
	}
	w.state.mu.Lock()
	defer w.state.mu.Unlock()
	return w.state.state.clone()
}

// Settle is the agentState of a session whose happy died, as the happy that
// settles it writes it (docs/ARCHITECTURE.md, "A session's life"): every
// request still in requests moves to completedRequests as canceled/abort
// with reason and completedAt (Unix ms), every communication to
// completedCommunications as cancelled; all else of cur is kept. changed is
// false when nothing waited (cur is then returned as it is). A cur that is
// not a JSON object, or whose waiting maps are not objects, waits for
// nothing.
func Settle(cur json.RawMessage, reason string, now int64) (out json.RawMessage, changed bool, err error) {
	var m map[string]json.RawMessage
	if len(cur) == 0 || json.Unmarshal(cur, &m) != nil || m == nil {
		return cur, false, nil
	}
	move := func(from, to string, fields map[string]any) error {
		var waiting map[string]map[string]json.RawMessage
		if json.Unmarshal(m[from], &waiting) != nil || len(waiting) == 0 {
			return nil
		}
		var done map[string]json.RawMessage
		if json.Unmarshal(m[to], &done) != nil || done == nil {
			done = map[string]json.RawMessage{}
		}
		for id, entry := range waiting {
			if entry == nil {
				entry = map[string]json.RawMessage{}
			}
			for k, v := range fields {
				b, err := json.Marshal(v)
				if err != nil {
					return err
				}
				entry[k] = b
			}
			b, err := json.Marshal(entry)
			if err != nil {
				return err
			}
			done[id] = b
		}
		var err1, err2 error
		m[to], err1 = json.Marshal(done)
		m[from], err2 = json.Marshal(map[string]any{})
		changed = true
		return errors.Join(err1, err2)
	}
	if err := move("requests", "completedRequests", map[string]any{"status": "canceled", "decision": "abort", "reason": reason, "completedAt": now}); err != nil {
		return nil, false, err
	}
	if err := move("communications", "completedCommunications", map[string]any{"status": "cancelled", "completedAt": now}); err != nil {
		return nil, false, err
	}
	if !changed {
		return cur, false, nil
	}
	out, err = json.Marshal(m)
	return out, true, err
}
