package refimport

// The permissions of a reference session: its agentState's requests and
// completedRequests, folded onto the tools they ask about.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// requestState is an agentState request, pending or completed.
type requestState struct {
	id           string
	Tool         string         `json:"tool"`
	Arguments    map[string]any `json:"arguments"`
	CreatedAt    int64          `json:"createdAt"`
	CompletedAt  int64          `json:"completedAt"`
	ToolUseID    string         `json:"toolUseId"`
	Status       string         `json:"status"`
	Decision     string         `json:"decision"`
	Reason       string         `json:"reason"`
	AllowedTools []string       `json:"allowedTools"`
	done         bool
}

// permissions folds the agentState's requests (pending) and
// completedRequests (answered) onto the tools they ask about.
func (b *builder) permissions(state json.RawMessage) {
	if len(state) == 0 || string(state) == "null" {
		return
	}
	var st struct {
		Requests          map[string]json.RawMessage `json:"requests"`
		CompletedRequests map[string]json.RawMessage `json:"completedRequests"`
	}
	if err := json.Unmarshal(state, &st); err != nil {
		b.drop(0, "agentState", agent.DropInvalidField, "agentState is not an object with requests and completedRequests maps: "+err.Error(), state)
		return
	}
	var reqs []requestState
	read := func(m map[string]json.RawMessage, done bool, key string) {
		for id, raw := range m {
			var r requestState
			if id == "" {
				b.drop(0, "agentState."+key, agent.DropMissingID, "a request with an empty id", raw)
				continue
			}
			if err := json.Unmarshal(raw, &r); err != nil || r.Tool == "" {
				b.drop(0, "agentState."+key, agent.DropInvalidField, fmt.Sprintf("request %q needs a tool name", id), raw)
				continue
			}
			r.id, r.done = id, done
			reqs = append(reqs, r)
		}
	}
	read(st.CompletedRequests, true, "completedRequests")
	read(st.Requests, false, "requests")
	sort.SliceStable(reqs, func(i, j int) bool {
		if reqs[i].CreatedAt != reqs[j].CreatedAt {
			return reqs[i].CreatedAt < reqs[j].CreatedAt
		}
		return reqs[i].id < reqs[j].id
	})
	used := map[*toolRef]bool{}
	for _, r := range reqs {
		b.permission(r, used)
	}
}

// outcome is a request's decision (none while pending) and the reason of
// one settled without anyone deciding: approved → once,
// approved_for_session → always, denied → reject, abort or canceled →
// reject (cancelled). ok is false for a status and decision it does not
// know.
func outcome(r requestState) (decision agent.Decision, reason string, ok bool) {
	if !r.done {
		return "", "", true
	}
	switch {
	case r.Decision == "approved_for_session":
		return agent.DecisionAlways, "", true
	case r.Decision == "approved" || r.Decision == "" && r.Status == "approved":
		return agent.DecisionOnce, "", true
	case r.Decision == "abort" || r.Decision == "" && r.Status == "canceled":
		return agent.DecisionReject, agent.ReasonCancelled, true
	case r.Decision == "denied" || r.Decision == "" && r.Status == "denied":
		return agent.DecisionReject, "", true
	}
	return "", "", false
}

// findTool is the tool a request asks about: the call its toolUseId or its
// own id names, else (the reference CLI's request ids are unrelated to the
// call ids) the first tool not yet matched with its native name and
// arguments, else with its name.
func (b *builder) findTool(r requestState, used map[*toolRef]bool) *toolRef {
	for _, k := range []string{r.ToolUseID, r.id} {
		if tr := b.tools[k]; k != "" && tr != nil && !used[tr] {
			return tr
		}
	}
	_, in := CanonicalTool(r.Tool, agent.Object(r.Arguments))
	for _, exact := range []bool{true, false} {
		for _, tr := range b.order {
			if used[tr] || tr.name != r.Tool {
				continue
			}
			if exact && !reflect.DeepEqual(normalize(tr.part.State.Input), normalize(in)) {
				continue
			}
			return tr
		}
	}
	return nil
}

// normalize is a value as its JSON round trip gives it (numbers as
// float64), so inputs decoded two ways compare equal.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

func (b *builder) permission(r requestState, used map[*toolRef]bool) {
	decision, reason, ok := outcome(r)
	if !ok {
		b.drop(0, "agentState.completedRequests", agent.DropUnknownDecision, fmt.Sprintf("request %q: status %q, decision %q", r.id, r.Status, r.Decision), nil)
		return
	}
	tr := b.findTool(r, used)
	tool, canonIn := CanonicalTool(r.Tool, agent.Object(r.Arguments))
	block := &mapper.Block{Type: mapper.BlockPermission, ID: r.id, Permission: tool}
	if in, err := json.Marshal(canonIn); err == nil {
		block.Patterns, _ = agent.ToolPatterns(tool, in)
	}
	if tr == nil {
		// Asked about a tool the rows never announced: the tool stands
		// on its own in the root's last turn.
		args := agent.Object(r.Arguments)
		if args == nil {
			args = agent.Object{}
		}
		call := r.ToolUseID
		if call == "" {
			call = r.id
		}
		s := b.rootS
		m := s.cur
		if m == nil {
			for i := len(s.msgs) - 1; i >= 0 && m == nil; i-- {
				if s.msgs[i].Info.MessageRole() == mapper.RoleAssistant {
					m = s.msgs[i]
				}
			}
		}
		if m != nil && s.cur == nil {
			s.cur, s.turn = m, ""
		}
		b.startTool(0, "agentState", s, s.turn, "request:"+r.id, r.CreatedAt, call, r.Tool, "", "", args, nil)
		tr = b.tools[call]
		if tr == nil {
			return
		}
	}
	used[tr] = true
	st := &tr.part.State
	if !r.done {
		if !st.Status.Open() {
			b.drop(0, "agentState.requests", agent.DropIllegalTransition, fmt.Sprintf("request %q is pending, but tool call %q already ended", r.id, tr.part.CallID), nil)
			return
		}
		st.Status, st.Block = mapper.StatusBlocked, block
		return
	}
	at := r.CompletedAt
	if at == 0 {
		at = r.CreatedAt
	}
	block.DecidedAt = &at
	block.Decision, block.Reason = decision, reason
	if decision == agent.DecisionAlways {
		block.Always = r.AllowedTools
	}
	if r.Reason != "" && block.Reason == "" && block.Decision == agent.DecisionReject {
		block.Reason = r.Reason
	}
	if block.Decision != agent.DecisionReject {
		st.Block = block
		if st.Status == mapper.StatusBlocked {
			st.Status = mapper.StatusRunning
		}
		return
	}
	if st.Status == mapper.StatusError {
		// It ended with its own error (the agent reported the refusal).
		st.Block = block
		return
	}
	// A refused tool did not run: its state is the refusal, as the
	// reference app shows it.
	end := max(at, st.Time.Start)
	msg := r.Reason
	if msg == "" {
		msg = "permission denied"
		if block.Reason == agent.ReasonCancelled {
			msg = "permission request cancelled"
		}
	}
	*st = mapper.ToolState{Status: mapper.StatusError, Input: st.Input, Error: msg, Metadata: st.Metadata,
		Time: mapper.ToolTime{Start: st.Time.Start, End: end}, Block: block}
}
