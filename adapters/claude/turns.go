package claude

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/happy-dev/happy/agent"
)

// This file keeps the open state: turns, steps (assistant messages), tool
// calls and child sessions, and closes each of them exactly once.

func msgKey(session, id string) string { return session + "\x00" + id }

func sortStrings(s []string) { slices.Sort(s) }

// ensureTurn opens a turn in s when none is open: output arrived without a
// prompt the decoder saw (a -p run, a tail resumed mid-turn).
func (d *Decoder) ensureTurn(s *session) {
	if s.turnOpen {
		return
	}
	d.turnSeq++
	d.openTurn(s, "turn-"+strconv.Itoa(d.turnSeq))
}

// openTurn starts a turn with the given id in s.
func (d *Decoder) openTurn(s *session, id string) {
	s.turnOpen = true
	s.turnID = id
	s.lastStop, s.turnErr, s.errEmitted, s.stopped = "", "", false, false
	s.curMsg, s.lastMsg = "", ""
	if s.key == "" {
		d.interrupt = false
	}
	d.emit(&agent.TurnStarted{EventBase: d.base(s.key), TurnID: id})
}

// quietEnd decides how a turn that stopped producing records ended: failed
// when it carried an API error, completed when its last step finished
// without tool calls and no tool is open, otherwise the fallback.
func (d *Decoder) quietEnd(s *session, fallback, fallbackText string) (string, string) {
	if s.turnErr != "" {
		return agent.TurnFailed, s.turnErr
	}
	lastStop := s.lastStop
	if m := d.msgs[msgKey(s.key, s.curMsg)]; s.curMsg != "" && m != nil && !m.finished {
		lastStop = m.stop
		if lastStop == "" && m.hasTools {
			lastStop = "tool_use"
		}
	}
	if s.lastMsg != "" && len(s.openTools) == 0 && lastStop != "tool_use" {
		return agent.TurnCompleted, ""
	}
	return fallback, fallbackText
}

// closeTurn ends the open turn of s: the current step is finished, every
// open tool settled, then TurnEnded is emitted. A blocked tool is resolved
// as rejected with a reason that follows from the turn's end.
func (d *Decoder) closeTurn(s *session, reason, errText string) {
	resolve := agent.ReasonCancelled
	if reason == agent.TurnAgentExited {
		resolve = agent.ReasonAgentExited
	}
	d.closeTurnWith(s, reason, errText, resolve)
}

func (d *Decoder) closeTurnWith(s *session, reason, errText, resolve string) {
	if !s.turnOpen {
		return
	}
	if reason == agent.TurnInterrupted {
		d.abortStep(s)
	} else {
		d.finishStep(s, s.curMsg)
	}
	settle := errText
	if settle == "" {
		settle = settleText(reason)
	}
	for len(s.openTools) > 0 {
		t := d.tools[s.openTools[0]]
		if t == nil { // defensive: keep the loop finite
			s.openTools = s.openTools[1:]
			continue
		}
		d.settleTool(t, reason, settle, resolve)
	}
	te := &agent.TurnEnded{EventBase: d.base(s.key), TurnID: s.turnID, Reason: reason}
	if reason != agent.TurnCompleted && reason != agent.TurnInterrupted {
		te.Error = errText
	}
	d.emit(te)
	for _, id := range s.turnMsgs {
		k := msgKey(s.key, id)
		delete(d.msgs, k)
		d.recent.add("m:" + k)
	}
	s.turnMsgs = nil
	s.turnOpen = false
	s.curMsg, s.lastMsg = "", ""
}

// settleText is the error of a tool still open when a turn ends.
func settleText(reason string) string {
	switch reason {
	case agent.TurnInterrupted:
		return "interrupted"
	case agent.TurnCompleted:
		return "the turn ended before the tool finished"
	case agent.TurnAgentExited:
		return "agent exited"
	case agent.TurnTruncated:
		return "the stream ended before the tool finished"
	}
	return "the turn failed"
}

// settleTool closes an open tool as failed (a blocked one first gets a
// rejected resolution with reason resolve); a subagent it started is ended
// with the turn's reason.
func (d *Decoder) settleTool(t *tool, turnReason, text, resolve string) {
	d.endChild(t.child, turnReason, text)
	if t.status == toolBlocked {
		d.emit(&agent.ToolResolved{EventBase: d.base(t.session), CallID: t.callID, Decision: agent.DecisionReject, Reason: resolve})
	}
	d.emit(&agent.ToolFailed{EventBase: d.base(t.session), CallID: t.callID, Error: text})
	d.closeTool(t)
}

// finishStep closes the assistant message id of session s with its finish
// reason. A message whose stop_reason was not recorded but that made tool
// calls ended with tool-calls (the API stops a step at its tool calls); one
// with neither gets no StepFinished here and is finished by the reducer
// when the turn ends.
func (d *Decoder) finishStep(s *session, id string) {
	if id == "" {
		return
	}
	m := d.msgs[msgKey(s.key, id)]
	if m == nil || m.finished {
		return
	}
	m.finished = true
	stop := m.stop
	if stop == "" && m.hasTools {
		stop = "tool_use"
	}
	s.lastStop = stop
	if s.curMsg == id {
		s.curMsg = ""
	}
	if f := finishReason(stop); f != "" {
		d.emit(&agent.StepFinished{EventBase: d.base(s.key), Message: id, Finish: f})
	}
}

// abortStep finishes the last step of the turn of s as aborted: a person
// stopped the turn. The other adapters' steps are still open when their
// turn is cancelled and so end aborted; Claude's may have finished with
// its tool calls already (stop_reason tool_use, the tool then stopped), and
// is marked aborted all the same, once.
func (d *Decoder) abortStep(s *session) {
	if s.lastMsg == "" {
		return
	}
	m := d.msgs[msgKey(s.key, s.lastMsg)]
	if m == nil || m.aborted {
		return
	}
	if s.curMsg != "" && s.curMsg != s.lastMsg {
		d.finishStep(s, s.curMsg)
	}
	m.finished, m.aborted = true, true
	if s.curMsg == s.lastMsg {
		s.curMsg = ""
	}
	d.emit(&agent.StepFinished{EventBase: d.base(s.key), Message: s.lastMsg, Finish: agent.FinishAborted})
}

// finishReason maps a Messages API stop_reason to a finish reason; "" for
// none or an unknown value.
func finishReason(stop string) string {
	switch stop {
	case "end_turn", "stop_sequence", "pause_turn", "refusal":
		return agent.FinishStop
	case "tool_use":
		return agent.FinishToolCalls
	case "max_tokens", "model_context_window_exceeded":
		return agent.FinishLength
	}
	return ""
}

// knownStop reports whether stop is a stop_reason this version knows.
func knownStop(stop string) bool { return finishReason(stop) != "" }

// openMessage returns the open message id of session s, announcing it (and
// finishing the previous step of s) on first sight. ok is false when the
// message was already closed: its records are duplicates.
func (d *Decoder) openMessage(s *session, id, model string) (*message, bool) {
	k := msgKey(s.key, id)
	if m := d.msgs[k]; m != nil {
		if s.curMsg != id && !m.finished {
			d.finishStep(s, s.curMsg)
			s.curMsg = id
		}
		return m, true
	}
	if d.recent.has("m:" + k) {
		return nil, false
	}
	d.ensureTurn(s)
	if s.curMsg != "" {
		d.finishStep(s, s.curMsg)
	}
	m := &message{session: s.key, id: id, blocks: map[uint64]string{}}
	d.msgs[k] = m
	s.turnMsgs = append(s.turnMsgs, id)
	s.curMsg, s.lastMsg = id, id
	d.emit(&agent.MessageStarted{EventBase: d.base(s.key), Message: id, ProviderID: ProviderID, ModelID: model})
	return m, true
}

// addTool records a new open tool call.
func (d *Decoder) addTool(callID, sess, msg, name string, input json.RawMessage) *tool {
	t := &tool{callID: callID, session: sess, msg: msg, name: name, input: input}
	d.tools[callID] = t
	s := d.session(sess)
	s.openTools = append(s.openTools, callID)
	return t
}

// closeTool forgets an open tool call (it reached a terminal state).
func (d *Decoder) closeTool(t *tool) {
	delete(d.tools, t.callID)
	if s := d.sessions[t.session]; s != nil {
		if i := slices.Index(s.openTools, t.callID); i >= 0 {
			s.openTools = slices.Delete(s.openTools, i, i+1)
		}
	}
	for rid, id := range d.requests {
		if id == t.callID {
			delete(d.requests, rid)
		}
	}
	d.recent.add("t:" + t.callID)
}

// forgetTool closes the tool callID if it is open, and remembers it as
// closed either way.
func (d *Decoder) forgetTool(callID string) {
	if t := d.tools[callID]; t != nil {
		d.closeTool(t)
		return
	}
	d.recent.add("t:" + callID)
}

// running moves a pending tool to running.
func (d *Decoder) running(t *tool) {
	if t.status == toolPending {
		t.status = toolRunning
		d.emit(&agent.ToolRunning{EventBase: d.base(t.session), CallID: t.callID})
	}
}

// completeTool reports a tool's success. A tool still blocked was allowed
// in Claude's own UI.
func (d *Decoder) completeTool(t *tool, ev *agent.ToolCompleted) {
	d.running(t)
	if t.status == toolBlocked && !t.question {
		d.emit(&agent.ToolResolved{EventBase: d.base(t.session), CallID: t.callID, Decision: agent.DecisionOnce, Reason: agent.ReasonAnsweredInAgent})
	}
	ev.EventBase = d.base(t.session)
	d.emit(ev)
	d.closeTool(t)
}

// failTool reports a tool's failure. A tool still blocked was refused (or
// its question dismissed) in Claude's own UI.
func (d *Decoder) failTool(t *tool, ev *agent.ToolFailed) {
	if t.status == toolBlocked {
		d.emit(&agent.ToolResolved{EventBase: d.base(t.session), CallID: t.callID, Decision: agent.DecisionReject, Reason: agent.ReasonAnsweredInAgent})
	} else {
		d.running(t)
	}
	ev.EventBase = d.base(t.session)
	d.emit(ev)
	d.closeTool(t)
}

// block reports that a tool waits for a person.
func (d *Decoder) block(t *tool, perm *agent.PermissionRequest, q *agent.QuestionRequest) {
	d.running(t)
	t.status = toolBlocked
	t.question = q != nil
	d.emit(&agent.ToolBlocked{EventBase: d.base(t.session), Message: t.msg, CallID: t.callID, Tool: canonicalTool(t.name),
		Input: canonicalInput(t.name, objectOrEmpty(t.input)), Permission: perm, Question: q})
}

// resolve records the answer to a blocked tool.
func (d *Decoder) resolve(t *tool, ev *agent.ToolResolved) {
	if t.status != toolBlocked {
		return
	}
	if ev.Decision == agent.DecisionReject {
		t.status = toolRejected
	} else {
		t.status = toolRunning
	}
	ev.EventBase = d.base(t.session)
	ev.CallID = t.callID
	d.emit(ev)
}

// startChild announces the child session of an Agent/Task call.
func (d *Decoder) startChild(t *tool, in toolInput) {
	if t.child != "" {
		return
	}
	t.child = t.callID
	cs := d.session(t.child)
	if cs.started {
		return
	}
	cs.started, cs.owner = true, t.session
	cs.prompt = in.Prompt
	title := in.Description
	if title == "" {
		title = firstLine(in.Prompt, 80)
	}
	d.emit(&agent.SubagentStarted{EventBase: d.base(t.session), CallID: t.callID, Child: t.child, Title: title,
		Agent: in.SubagentType, Prompt: in.Prompt, Description: in.Description})
}

// childFor returns the child session key for records whose
// parent_tool_use_id is callID, announcing the child when the call was not
// seen (a stream joined late).
func (d *Decoder) childFor(callID string) string {
	if t := d.tools[callID]; t != nil && t.child != "" {
		return t.child
	}
	return d.ensureChild(callID, callID)
}

// ensureChild returns key after making sure its child session was
// announced; callID is the call that started it ("" when unknown).
func (d *Decoder) ensureChild(key, callID string) string {
	cs := d.session(key)
	if cs.started {
		return key
	}
	cs.started = true
	if t := d.tools[key]; t != nil {
		cs.owner = t.session
		t.child = key
	}
	d.emit(&agent.SubagentStarted{EventBase: d.base(cs.owner), CallID: callID, Child: key})
	return key
}

// endChild ends child session key (its open turn closed with reason) and
// reports SubagentEnded, once. A background subagent outlives the call that
// started it, so this is keyed by the child, not the call.
func (d *Decoder) endChild(key, reason, text string) {
	cs := d.sessions[key]
	if key == "" || cs == nil || !cs.started || cs.ended {
		return
	}
	cs.ended = true
	d.closeTurn(cs, reason, text)
	for uuid, k := range d.sideUUID {
		if k == key {
			delete(d.sideUUID, uuid)
		}
	}
	d.emit(&agent.SubagentEnded{EventBase: d.base(cs.owner), Child: key})
}

// firstLine returns the first line of s, at most n runes.
func firstLine(s string, n int) string {
	for i, r := range s {
		if r == '\n' {
			s = s[:i]
			break
		}
	}
	rs := []rune(s)
	if len(rs) > n {
		return string(rs[:n]) + "…"
	}
	return s
}
