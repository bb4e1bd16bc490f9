package mapper

import (
	"strconv"

	"github.com/happy-dev/happy/agent"
)

// ---- messages ----

func (r *Reducer) addMessage(s *redSession, um *UserMessage, am *AssistantMessage) *redMessage {
	m := &redMessage{sess: s, user: um, asst: am, blocks: map[redBlockKey]*redBlock{}}
	if um != nil {
		m.pos, _ = IDPosition(um.ID, PrefixMessage)
		r.msgs[um.ID] = m
	} else {
		m.pos, _ = IDPosition(am.ID, PrefixMessage)
		r.msgs[am.ID] = m
	}
	s.messages = append(s.messages, m)
	return m
}

func (r *Reducer) partBase(m *redMessage, identity string) PartBase {
	return PartBase{ID: r.ids.Next(PrefixPart, identity), SessionID: m.sess.info.ID, MessageID: m.id()}
}

func (m *redMessage) id() string {
	if m.user != nil {
		return m.user.ID
	}
	return m.asst.ID
}

// Modes of finding the assistant message of an event.
const (
	redFindOnly   = iota // existing message only (Message "" = the current one, even closed)
	redFindAttach        // the current open message, else a new one
	redFindOutput        // like attach, but output after tool results opens the next step
)

// assistant returns the assistant message an event with message key key
// refers to, or nil (redFindOnly) when there is none.
func (r *Reducer) assistant(s *redSession, key string, mode int, t int64) *redMessage {
	if key != "" {
		if m := s.asstByKey[key]; m != nil {
			return m
		}
		if mode == redFindOnly {
			return nil
		}
		return r.openAssistant(s, key, t)
	}
	c := s.current
	switch {
	case mode == redFindOnly:
		return c
	case c != nil && !c.closed && (mode == redFindAttach || !c.resultSeen):
		return c
	}
	return r.openAssistant(s, "", t)
}

// openAssistant opens the next model step of s, closing the previous one.
func (r *Reducer) openAssistant(s *redSession, key string, t int64) *redMessage {
	if c := s.current; c != nil && !c.closed {
		r.closeMessage(c, c.derivedFinish(), nil, t)
	}
	parent := ""
	if s.user != nil {
		parent = s.user.user.ID
	}
	root := r.cfg.Root
	if root == "" {
		root = r.cfg.Directory
	}
	if s.cwd != "" && root == "" {
		root = s.cwd
	}
	am := &AssistantMessage{
		ID:         r.ids.Next(PrefixMessage, "assistant\x00"+key),
		SessionID:  s.info.ID,
		Role:       RoleAssistant,
		Time:       AssistantTime{Created: t},
		ParentID:   parent,
		ModelID:    s.model,
		ProviderID: s.provider,
		Agent:      s.agent,
		Path:       MessagePath{Cwd: s.cwd, Root: root},
	}
	m := r.addMessage(s, nil, am)
	if key != "" {
		s.asstByKey[key] = m
	}
	s.current = m
	s.openMsgs[m] = struct{}{}
	r.emit(&MessageUpdated{Info: m.infoSnapshot()})
	sp := &StepStartPart{PartBase: r.partBase(m, "step-start")}
	m.parts = append(m.parts, sp)
	r.emitPart(sp)
	return m
}

func (r *Reducer) messageStarted(s *redSession, e *agent.MessageStarted, t int64) {
	m := r.assistant(s, e.Message, redFindOutput, t)
	changed := false
	if e.ProviderID != "" && m.asst.ProviderID != e.ProviderID {
		m.asst.ProviderID = e.ProviderID
		changed = true
	}
	if e.ModelID != "" && m.asst.ModelID != e.ModelID {
		m.asst.ModelID = e.ModelID
		changed = true
	}
	if changed {
		r.emit(&MessageUpdated{Info: m.infoSnapshot()})
	}
}

// derivedFinish is the finish of a step that ended without saying why:
// error when it carries one, tool-calls when it called a tool (text after
// a call in the same step was written before the results came back), else
// stop.
func (m *redMessage) derivedFinish() string {
	if m.asst != nil && m.asst.Error != nil {
		return agent.FinishError
	}
	if m.tools > 0 {
		return agent.FinishToolCalls
	}
	return agent.FinishStop
}

// closeMessage finishes an assistant message: open text and reasoning
// blocks end, a step-finish part is added, time.completed and finish are
// set. An already closed message only has its finish (and error) updated.
func (r *Reducer) closeMessage(m *redMessage, finish string, merr *agent.MessageError, t int64) {
	a := m.asst
	if a == nil {
		return
	}
	if m.closed {
		changed := false
		if finish != "" && a.Finish != finish {
			a.Finish = finish
			changed = true
		}
		if merr != nil && a.Error == nil {
			a.Error = merr
			changed = true
		}
		if changed {
			f := *m.finish
			f.Reason = a.Finish
			m.finish = &f
			r.emitPart(m.finish)
			r.emit(&MessageUpdated{Info: m.infoSnapshot()})
		}
		return
	}
	m.closed = true
	delete(m.sess.openMsgs, m)
	for _, p := range m.parts {
		switch x := p.(type) {
		case *TextPart:
			if x.Time != nil && x.Time.End == nil {
				x.Time = &PartTime{Start: x.Time.Start, End: redPtr(t)}
				r.emitPart(x)
			}
		case *ReasoningPart:
			if x.Time.End == nil {
				x.Time = PartTime{Start: x.Time.Start, End: redPtr(t)}
				r.emitPart(x)
			}
		}
	}
	if merr != nil && a.Error == nil {
		a.Error = merr
	}
	if a.Error != nil && finish != agent.FinishAborted {
		finish = agent.FinishError
	}
	a.Finish = finish
	a.Time.Completed = redPtr(t)
	m.finish = &StepFinishPart{
		PartBase: r.partBase(m, "step-finish"),
		Reason:   finish,
		Cost:     a.Cost,
		Tokens:   a.Tokens,
	}
	r.emitPart(m.finish)
	r.emit(&MessageUpdated{Info: m.infoSnapshot()})
}

func (r *Reducer) stepFinished(s *redSession, e *agent.StepFinished, t int64) {
	m := r.assistant(s, e.Message, redFindOnly, t)
	if m == nil {
		r.drop(s, agent.DropOrphan, "no assistant message "+redQuoteKey(e.Message))
		return
	}
	r.closeMessage(m, e.Finish, nil, t)
}

func (r *Reducer) usage(s *redSession, e *agent.Usage, t int64) {
	m := r.assistant(s, e.Message, redFindOnly, 0)
	if m == nil && e.Message == "" {
		// A model call with no visible output yet (Codex's report on a
		// resumed thread, a refusal, a question it asks instead of
		// answering): its usage is the turn's, so the turn's step exists
		// without content; output that follows joins it.
		m = r.assistant(s, "", redFindAttach, t)
	}
	if m == nil {
		r.drop(s, agent.DropOrphan, "no assistant message "+redQuoteKey(e.Message))
		return
	}
	a := m.asst
	changed := false
	if e.Tokens != nil {
		var tk agent.Tokens
		if a.Tokens != nil {
			tk = *a.Tokens
		}
		merged := redMergeTokens(tk, *e.Tokens)
		if a.Tokens == nil || !redTokensEqual(*a.Tokens, merged) {
			a.Tokens = &merged
			changed = true
		}
	}
	if e.Cost != nil && (a.Cost == nil || *a.Cost != *e.Cost) {
		a.Cost = redPtr(*e.Cost)
		changed = true
	}
	if !changed {
		return
	}
	if m.finish != nil {
		f := *m.finish
		f.Cost, f.Tokens = a.Cost, a.Tokens
		m.finish = &f
		r.emitPart(m.finish)
	}
	r.emit(&MessageUpdated{Info: m.infoSnapshot()})
}

func redMergeTokens(old, upd agent.Tokens) agent.Tokens {
	pick := func(o, n *int64) *int64 {
		if n != nil {
			return redPtr(*n)
		}
		return o
	}
	return agent.Tokens{
		Input:     pick(old.Input, upd.Input),
		Output:    pick(old.Output, upd.Output),
		Reasoning: pick(old.Reasoning, upd.Reasoning),
		Cache:     agent.CacheTokens{Read: pick(old.Cache.Read, upd.Cache.Read), Write: pick(old.Cache.Write, upd.Cache.Write)},
	}
}

func redTokensEqual(a, b agent.Tokens) bool {
	eq := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.Input, b.Input) && eq(a.Output, b.Output) && eq(a.Reasoning, b.Reasoning) &&
		eq(a.Cache.Read, b.Cache.Read) && eq(a.Cache.Write, b.Cache.Write)
}

func (r *Reducer) agentError(s *redSession, e *agent.AgentError, t int64) {
	m := r.assistant(s, e.Message, redFindAttach, t)
	kind := agent.ParseErrorKind(string(e.Kind))
	name := agent.ErrNameAPI
	switch kind {
	case agent.ErrorAuth:
		name = agent.ErrNameProviderAuth
	case agent.ErrorInternal:
		name = agent.ErrNameUnknown
	}
	merr := &agent.MessageError{Name: name, Data: agent.ErrorData{Message: e.Text, Kind: kind, ProviderID: m.asst.ProviderID}}
	if e.StatusCode != nil {
		merr.Data.StatusCode = redPtr(*e.StatusCode)
	}
	if a := m.asst; a.Error != nil && redErrorEqual(*a.Error, *merr) {
		return
	}
	m.asst.Error = merr
	if m.closed {
		// The step already ended: its finish becomes error too.
		r.closeMessage(m, agent.FinishError, nil, t)
	} else {
		r.emit(&MessageUpdated{Info: m.infoSnapshot()})
	}
	r.emit(&SessionError{SessionID: s.info.ID, Error: *merr})
}

func redErrorEqual(a, b agent.MessageError) bool {
	eqi := func(x, y *int) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eqb := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.Name == b.Name && a.Data.Message == b.Data.Message && a.Data.Kind == b.Data.Kind &&
		a.Data.ProviderID == b.Data.ProviderID && a.Data.ResponseBody == b.Data.ResponseBody &&
		eqi(a.Data.StatusCode, b.Data.StatusCode) && eqb(a.Data.IsRetryable, b.Data.IsRetryable)
}

func (r *Reducer) compaction(s *redSession, e *agent.Compaction, t int64) {
	m := r.assistant(s, e.Message, redFindAttach, t)
	key := redBlockKey{"compaction", e.ID}
	if b := m.blocks[key]; b != nil {
		return
	}
	cp := &CompactionPart{PartBase: r.partBase(m, "compaction\x00"+e.ID), Auto: e.Auto}
	if e.Overflow != nil {
		cp.Overflow = redPtr(*e.Overflow)
	}
	m.blocks[key] = &redBlock{final: true}
	m.parts = append(m.parts, cp)
	r.emitPart(cp)
	r.emit(&SessionCompacted{SessionID: s.info.ID})
}

func (r *Reducer) retry(s *redSession, e *agent.Retry, t int64) {
	m := r.assistant(s, e.Message, redFindAttach, t)
	key := redBlockKey{"retry", strconv.Itoa(e.Attempt)}
	if b := m.blocks[key]; b != nil {
		return
	}
	apiErr := e.Error
	apiErr.Data.Kind = agent.ParseErrorKind(string(apiErr.Data.Kind))
	if apiErr.Name == "" {
		apiErr.Name = agent.ErrNameAPI
	}
	rp := &RetryPart{PartBase: r.partBase(m, "retry\x00"+key.key), Attempt: e.Attempt, Error: apiErr, Time: RetryTime{Created: t}}
	m.blocks[key] = &redBlock{final: true}
	m.parts = append(m.parts, rp)
	r.emitPart(rp)
	s.status = SessionRetry
	r.emit(&SessionStatus{SessionID: s.info.ID, Status: SessionStatusInfo{Type: SessionRetry, Attempt: e.Attempt, Message: apiErr.Data.Message}})
}
