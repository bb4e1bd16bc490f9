package mapper

import (
	"bytes"
	"cmp"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// redTool is a tool part and what the reducer knows beyond its wire state.
type redTool struct {
	part *ToolPart
	msg  *redMessage
	pos  uint64
	raw  *strings.Builder // pending: input text as it streams
	// inputKnown is set once a ToolCall or ToolBlocked gave the whole
	// input: later input deltas are stale.
	inputKnown bool
	// title and meta are the state's title and metadata. A pending state
	// has neither on the wire, so they wait here until the tool runs.
	title string
	meta  agent.Object
	// seen holds the identities of the blocks already applied, so a
	// re-delivered ToolBlocked does not block the tool again.
	seen map[string]struct{}
	// settled is set when the reducer itself ended the tool (a rejection,
	// a cascade, a turn that ended): the agent's own failure report that
	// follows is then no news.
	settled bool
}

// redSortedTools returns the tools of set in order of creation.
func redSortedTools(set map[*redTool]struct{}) []*redTool {
	out := make([]*redTool, 0, len(set))
	for tl := range set {
		out = append(out, tl)
	}
	slices.SortFunc(out, func(a, b *redTool) int { return cmp.Compare(a.pos, b.pos) })
	return out
}

// redObjectsEqual compares two objects, nil and empty being equal.
func redObjectsEqual(a, b agent.Object) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	if reflect.DeepEqual(a, b) {
		return true
	}
	if !redHasText(a) && !redHasText(b) {
		return false
	}
	ea, erra := EncodeObject(a)
	eb, errb := EncodeObject(b)
	return erra == nil && errb == nil && bytes.Equal(ea, eb)
}

// redValuesEqual compares two free-form values as redObjectsEqual does.
func redValuesEqual(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	_, ra := a.(json.RawMessage)
	_, rb := b.(json.RawMessage)
	if !ra && !rb {
		return false
	}
	return redObjectsEqual(agent.Object{"v": a}, agent.Object{"v": b})
}

// redHasText reports whether a member of o is a value kept as its JSON
// text (json.RawMessage: adapters keep opaque values so, the ACP decoder
// a tool's raw output and the agent's input). Such a value is the same as
// another when their canonical encodings are (the encoder writes a text
// as the value it holds), not only when the bytes are: the same value
// may come as a text and, read back from a transcript, as a tree.
func redHasText(o agent.Object) bool {
	for _, v := range o {
		if _, ok := v.(json.RawMessage); ok {
			return true
		}
	}
	return false
}

// redMerge returns a new object with the members of base, then of over.
func redMerge(base, over agent.Object) agent.Object {
	if len(over) == 0 {
		return base
	}
	out := make(agent.Object, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// redAdd returns base with the members of over it lacks (base itself when
// over adds nothing). ok is false, and base is returned, when over gives a
// member of base another value: a contradiction, not an addition.
func redAdd(base, over agent.Object) (agent.Object, bool) {
	var out agent.Object
	for k, v := range over {
		if w, had := base[k]; had {
			if !redValuesEqual(v, w) {
				return base, false
			}
			continue
		}
		if out == nil {
			out = make(agent.Object, len(base)+len(over))
			for bk, bv := range base {
				out[bk] = bv
			}
		}
		out[k] = v
	}
	if out == nil {
		return base, true
	}
	return out, true
}

// input parses a tool input, recording a refusal when it is not a JSON
// object. ok is false when raw is empty or refused.
func (r *Reducer) input(s *redSession, raw []byte) (agent.Object, bool) {
	if len(strings.TrimSpace(string(raw))) == 0 {
		return nil, false
	}
	o, err := DecodeObject(raw)
	if err != nil {
		r.drop(s, agent.DropInvalidField, "tool input: "+err.Error())
		return nil, false
	}
	return o, true
}

func (r *Reducer) emitTool(tl *redTool) { r.emitPart(tl.part) }

// newTool creates a pending tool part in the message the event refers to.
func (r *Reducer) newTool(s *redSession, msgKey, callID, tool, title string, input agent.Object, meta agent.Object, t int64) *redTool {
	m := r.assistant(s, msgKey, redFindOutput, t)
	if tool == "" {
		tool = agent.ToolOther // a part created without a name (a block or result for an unannounced call)
	}
	if input == nil {
		input = agent.Object{}
	}
	tl := &redTool{
		msg:   m,
		pos:   r.ids.Position(),
		raw:   &strings.Builder{},
		title: title,
		seen:  map[string]struct{}{},
	}
	tl.part = &ToolPart{
		PartBase: r.partBase(m, "tool\x00"+callID),
		CallID:   callID,
		Tool:     tool,
		State:    ToolState{Status: StatusPending, Input: input},
		Metadata: meta,
	}
	if child, ok := s.links[callID]; ok {
		tl.meta = agent.Object{"sessionId": child}
		delete(s.links, callID)
	}
	m.parts = append(m.parts, tl.part)
	m.tools++
	s.tools[callID] = tl
	s.open[tl] = struct{}{}
	r.emitTool(tl)
	return tl
}

func (r *Reducer) toolCall(s *redSession, e *agent.ToolCall, t int64) {
	input, hasInput := r.input(s, e.Input)
	tl := s.tools[e.CallID]
	if tl == nil {
		tl = r.newTool(s, e.Message, e.CallID, e.Tool, e.Title, input, e.Metadata, t)
		tl.inputKnown = hasInput
		return
	}
	p, cur := tl.part, tl.part.State
	if !cur.Status.Open() {
		r.reannounced(s, tl, e, input, hasInput)
		return
	}
	changed := false
	if e.Tool != "" && e.Tool != p.Tool {
		p.Tool = e.Tool
		changed = true
	}
	if len(e.Metadata) > 0 {
		if merged := redMerge(p.Metadata, e.Metadata); !redObjectsEqual(merged, p.Metadata) {
			p.Metadata = merged
			changed = true
		}
	}
	next := cur
	if e.Title != "" && e.Title != tl.title {
		tl.title = e.Title
		if cur.Status != StatusPending {
			next.Title = e.Title
		}
	}
	if hasInput {
		tl.inputKnown = true
		next.Input = input
	}
	if next.Title != cur.Title || !redObjectsEqual(next.Input, cur.Input) {
		r.move(s, tl, next) // publishes the part
		return
	}
	if changed {
		r.emitTool(tl)
	}
}

// reannounced applies a ToolCall for a settled tool: the agent confirming
// the call, e.g. with its final update. What the announcement says never
// changes (the tool, the input members and metadata it has), but members it
// did not have yet are added. A repeat that contradicts it is refused.
func (r *Reducer) reannounced(s *redSession, tl *redTool, e *agent.ToolCall, input agent.Object, hasInput bool) {
	p, cur := tl.part, tl.part.State
	next := cur
	okIn, okMeta := true, true
	if hasInput {
		next.Input, okIn = redAdd(cur.Input, input)
	}
	meta := p.Metadata
	if len(e.Metadata) > 0 {
		meta, okMeta = redAdd(p.Metadata, e.Metadata)
	}
	if (e.Tool != "" && e.Tool != p.Tool) || !okIn || !okMeta {
		r.refuse(s, tl, &TransitionError{From: cur.Status, To: cur.Status, Reason: "a settled tool's announcement does not change"})
		return
	}
	metaChanged := !redObjectsEqual(meta, p.Metadata)
	if redObjectsEqual(next.Input, cur.Input) {
		if metaChanged {
			p.Metadata = meta
			r.emitTool(tl)
		}
		return
	}
	old := p.Metadata
	p.Metadata = meta
	if !r.move(s, tl, next) { // publishes the part
		p.Metadata = old
	}
}

func (r *Reducer) toolInputDelta(s *redSession, e *agent.ToolInputDelta) {
	tl := s.tools[e.CallID]
	if tl == nil {
		r.drop(s, agent.DropOrphan, "tool "+e.CallID+" was never announced")
		return
	}
	if tl.part.State.Status != StatusPending || tl.inputKnown || e.Delta == "" {
		return // stale: the whole input is known
	}
	tl.raw.WriteString(e.Delta)
	tl.part.State.Raw = tl.raw.String()
	p := tl.part
	r.emit(&MessagePartDelta{SessionID: p.SessionID, MessageID: p.MessageID, PartID: p.ID, Field: "state.raw", Delta: e.Delta})
}

// move takes a tool to the state next, synthesising the states a provider
// skipped (TransitionPath), and publishes every state it passes through. A
// move the state machine refuses changes nothing and is recorded as a
// Dropped with reason illegal_transition.
func (r *Reducer) move(s *redSession, tl *redTool, next ToolState) bool {
	path, err := TransitionPath(tl.part.State, next)
	if err != nil {
		r.drop(s, agent.DropIllegalTransition, "tool "+tl.part.CallID+": "+err.Error())
		return false
	}
	for _, st := range path {
		tl.part.State = st
		r.emitTool(tl)
	}
	st := tl.part.State.Status
	if st.Open() {
		s.open[tl] = struct{}{}
	} else {
		delete(s.open, tl)
		if m := tl.msg; m == s.current {
			m.resultSeen = true // output for Message "" now opens the next step
		}
	}
	if st == StatusBlocked {
		s.blocked[tl] = struct{}{}
	} else {
		delete(s.blocked, tl)
	}
	return true
}

// refuse records a move the state machine refused before it was tried.
func (r *Reducer) refuse(s *redSession, tl *redTool, err error) {
	r.drop(s, agent.DropIllegalTransition, "tool "+tl.part.CallID+": "+err.Error())
}

// runningState is the state a pending tool runs in from t.
func (tl *redTool) runningState(t int64) ToolState {
	return ToolState{Status: StatusRunning, Input: tl.part.State.Input, Title: tl.title, Metadata: tl.meta, Time: ToolTime{Start: t}}
}

func (r *Reducer) toolRunning(s *redSession, e *agent.ToolRunning, t int64) {
	tl := s.tools[e.CallID]
	if tl == nil {
		r.drop(s, agent.DropOrphan, "tool "+e.CallID+" was never announced")
		return
	}
	if tl.part.State.Status == StatusRunning {
		return
	}
	r.move(s, tl, tl.runningState(t))
}

// blockIdentity is what makes two ToolBlocked events the same request: the
// provider's id, else the request's content.
func blockIdentity(e *agent.ToolBlocked) string {
	if p := e.Permission; p != nil {
		if p.ID != "" {
			return "id\x00" + p.ID
		}
		return "permission\x00" + p.Permission + "\x00" + strings.Join(p.Patterns, "\x00")
	}
	if q := e.Question; q != nil {
		if q.ID != "" {
			return "id\x00" + q.ID
		}
		var b strings.Builder
		b.WriteString("question")
		for _, qi := range q.Questions {
			b.WriteString("\x00" + qi.Question)
		}
		return b.String()
	}
	return ""
}

func (r *Reducer) toolBlocked(s *redSession, e *agent.ToolBlocked, t int64) {
	input, hasInput := r.input(s, e.Input)
	tl := s.tools[e.CallID]
	// Build and check the block before anything changes.
	var blk *Block
	if p := e.Permission; p != nil {
		perm := p.Permission
		if perm == "" {
			// The tool's own name is the kind of permission it needs.
			perm = e.Tool
			if perm == "" && tl != nil {
				perm = tl.part.Tool
			}
		}
		blk = &Block{Type: BlockPermission, ID: p.ID, Permission: perm,
			Patterns: slices.Clone(p.Patterns), Always: slices.Clone(p.Always), Metadata: p.Metadata}
		if blk.Patterns == nil {
			blk.Patterns = []string{}
		}
		if blk.Always == nil {
			blk.Always = []string{}
		}
		if blk.Metadata == nil {
			blk.Metadata = agent.Object{}
		}
	} else {
		blk = &Block{Type: BlockQuestion, ID: e.Question.ID, Questions: slices.Clone(e.Question.Questions)}
	}
	check := *blk
	if check.ID == "" {
		check.ID = "unassigned"
	}
	if err := check.Validate(); err != nil {
		r.drop(s, agent.DropInvalidField, "block: "+err.Error())
		return
	}
	if tl == nil {
		tl = r.newTool(s, e.Message, e.CallID, e.Tool, "", input, nil, t)
		tl.inputKnown = hasInput
	} else if hasInput && tl.part.State.Status.Open() && !tl.inputKnown {
		tl.inputKnown = true
		next := tl.part.State
		next.Input = input
		r.move(s, tl, next)
	}
	ident := blockIdentity(e)
	if _, dup := tl.seen[ident]; dup {
		return // the same request again
	}
	if blk.ID == "" {
		prefix := PrefixPermission
		if blk.Type == BlockQuestion {
			prefix = PrefixQuestion
		}
		blk.ID = r.ids.Next(prefix, e.CallID)
	}
	cur := tl.part.State
	var next ToolState
	if cur.Status == StatusPending {
		next = tl.runningState(t)
	} else {
		next = cur
	}
	next.Status = StatusBlocked
	next.Block = blk
	if r.move(s, tl, next) {
		tl.seen[ident] = struct{}{}
	}
}

func (r *Reducer) toolResolved(s *redSession, e *agent.ToolResolved, t int64) {
	tl := s.tools[e.CallID]
	if tl == nil {
		r.drop(s, agent.DropOrphan, "tool "+e.CallID+" was never announced")
		return
	}
	cur := tl.part.State
	if cur.Status != StatusBlocked {
		if b := cur.Block; b.Resolved() && b.Decision == e.Decision && redAnswersEqual(b.Answers, e.Answers) {
			// The same answer again, possibly seen by another observer with
			// its own reason (the runner's answer, then the agent's echo of
			// it): the first one stands.
			return
		}
		to := StatusRunning
		if e.Decision == agent.DecisionReject {
			to = StatusError
		}
		r.refuse(s, tl, &TransitionError{From: cur.Status, To: to, Reason: "only a blocked tool takes an answer"})
		return
	}
	blk := cur.Block
	var next ToolState
	var err error
	switch blk.Type {
	case BlockPermission:
		if e.Decision == "" || e.Answers != nil {
			r.drop(s, agent.DropInvalidField, "a permission is answered with a decision (once, always, reject), not answers")
			return
		}
		if m := e.Rule; m != nil {
			next, err = cur.DecideByRule(e.Decision, t, PermissionRule{Permission: m.Permission, Pattern: m.Pattern, Action: Action(m.Action)})
		} else {
			next, err = cur.Decide(e.Decision, t, e.Reason)
		}
	case BlockQuestion:
		switch {
		case e.Rule != nil:
			r.drop(s, agent.DropInvalidField, "a question is not answered by a permission rule")
			return
		case e.Decision == agent.DecisionReject:
			if len(e.Answers) != 0 {
				r.drop(s, agent.DropInvalidField, "a rejected question has no answers")
				return
			}
			next, err = cur.Decide(agent.DecisionReject, t, e.Reason)
		case e.Decision != "":
			r.drop(s, agent.DropInvalidField, "a question is answered (answers) or rejected, not "+string(e.Decision))
			return
		case len(e.Answers) != len(blk.Questions):
			r.drop(s, agent.DropInvalidField, "answers do not match the questions one to one")
			return
		default:
			next, err = cur.Answer(redCloneAnswers(e.Answers), t)
		}
	}
	if err != nil {
		r.refuse(s, tl, err)
		return
	}
	if !r.move(s, tl, next) {
		return
	}
	tl.settled = next.Status == StatusError
	switch {
	case e.Decision == agent.DecisionReject && e.Reason == "":
		// A person said no: every other request of the session goes too.
		r.cascadeReject(s, tl, t)
	case e.Decision == agent.DecisionAlways:
		r.always(s, tl, next.Block, t)
	}
}

func redCloneAnswers(answers [][]string) [][]string {
	out := make([][]string, len(answers))
	for i, a := range answers {
		out[i] = slices.Clone(a)
		if out[i] == nil {
			out[i] = []string{}
		}
	}
	return out
}

func redAnswersEqual(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !slices.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// settleTool settles an open tool to error with reason (a blocked one is
// resolved as reject with that reason).
func (r *Reducer) settleTool(s *redSession, tl *redTool, reason string, t int64) {
	next, err := tl.part.State.Settle(reason, t)
	if err != nil {
		r.refuse(s, tl, err)
		return
	}
	if tl.part.State.Status == StatusPending {
		next.Metadata = tl.meta
	}
	tl.settled = r.move(s, tl, next)
}

// cascadeReject rejects every other blocked tool of s after a person
// rejected one (seed 001: reject cascades within the session); they are
// resolved with reason cancelled. Tools blocked on a question go too: the
// agent stops after a rejection, so nobody would read the answer.
func (r *Reducer) cascadeReject(s *redSession, rejected *redTool, t int64) {
	var blocked []BlockedTool
	for _, tl := range redSortedTools(s.blocked) {
		blocked = append(blocked, BlockedTool{CallID: tl.part.CallID})
	}
	for _, callID := range RejectCascade(rejected.part.CallID, blocked) {
		tl := s.tools[callID]
		next, err := tl.part.State.Decide(agent.DecisionReject, t, agent.ReasonCancelled)
		if err != nil {
			r.refuse(s, tl, err)
			continue
		}
		tl.settled = r.move(s, tl, next)
	}
}

// always adds the runtime rules of an "always" answer to the session's
// ruleset and unblocks, with decision always, every other blocked permission
// of the session that the ruleset now allows.
func (r *Reducer) always(s *redSession, tl *redTool, res *Block, t int64) {
	if _, err := s.rules.Always(res); err != nil {
		r.drop(s, agent.DropInvalidField, "always: "+err.Error())
		return
	}
	for _, callID := range s.rules.Unblocked(s.blockedTools(tl)) {
		other := s.tools[callID]
		next, err := other.part.State.Decide(agent.DecisionAlways, t, "")
		if err != nil {
			r.refuse(s, other, err)
			continue
		}
		r.move(s, other, next)
	}
}

// blockedTools lists the session's tools blocked on a permission, in order
// of creation, except one.
func (s *redSession) blockedTools(except *redTool) []BlockedTool {
	var out []BlockedTool
	for _, tl := range redSortedTools(s.blocked) {
		if b := tl.part.State.Block; tl != except && b.Type == BlockPermission {
			out = append(out, BlockedTool{CallID: tl.part.CallID, Permission: b.Permission, Patterns: b.Patterns})
		}
	}
	return out
}

func (r *Reducer) toolCompleted(s *redSession, e *agent.ToolCompleted, t int64) {
	tl := s.tools[e.CallID]
	if tl == nil {
		r.drop(s, agent.DropOrphan, "tool "+e.CallID+" was never announced")
		return
	}
	cur := tl.part.State
	title := e.Title
	if title == "" {
		title = tl.title
	}
	if title == "" {
		title = tl.part.Tool
	}
	if cur.Status == StatusCompleted {
		r.completedAgain(s, tl, e)
		return
	}
	meta := redMerge(tl.meta, e.Metadata)
	if meta == nil {
		meta = agent.Object{}
	}
	start := cur.Time.Start
	if cur.Status == StatusPending {
		start = t
	}
	next := ToolState{Status: StatusCompleted, Input: cur.Input, Output: e.Output, Title: title, Metadata: meta,
		Time: ToolTime{Start: start, End: t}, Block: cur.Block, Attachments: r.attachments(tl, e)}
	if r.move(s, tl, next) {
		tl.title, tl.meta = title, meta
	}
}

// attachments are the file parts of the files a tool result returned.
func (r *Reducer) attachments(tl *redTool, e *agent.ToolCompleted) []FilePart {
	var out []FilePart
	for _, f := range e.Files {
		mime := f.Mime
		if mime == "" {
			mime = "application/octet-stream"
		}
		out = append(out, FilePart{
			PartBase: PartBase{ID: r.ids.Next(PrefixPart, "attachment\x00"+e.CallID), SessionID: tl.part.SessionID, MessageID: tl.part.MessageID},
			Mime:     mime, Filename: f.Filename, URL: f.URL, Source: f.Source,
		})
	}
	return out
}

// completedAgain applies a ToolCompleted for a completed tool: the same
// result again changes nothing; one that adds what the state did not say
// (metadata members, an output, a title or files where there were none) is
// merged into it, keeping its times; one that changes what it said is
// refused (Transition).
func (r *Reducer) completedAgain(s *redSession, tl *redTool, e *agent.ToolCompleted) {
	cur := tl.part.State
	next := cur
	if next.Output == "" {
		next.Output = e.Output
	}
	if next.Title == "" {
		next.Title = e.Title
	}
	meta, ok := redAdd(cur.Metadata, e.Metadata)
	if ok {
		next.Metadata = meta
	}
	contradicts := !ok || (e.Output != "" && e.Output != next.Output) || (e.Title != "" && e.Title != next.Title)
	if !contradicts && redObjectsEqual(next.Metadata, cur.Metadata) && next.Output == cur.Output && next.Title == cur.Title &&
		(len(e.Files) == 0 || len(cur.Attachments) > 0) {
		return // the same result again
	}
	if contradicts {
		r.refuse(s, tl, terminalChange(cur.Status))
		return
	}
	if len(cur.Attachments) == 0 {
		next.Attachments = r.attachments(tl, e)
	}
	if r.move(s, tl, next) {
		tl.title, tl.meta = next.Title, next.Metadata
	}
}

func (r *Reducer) toolFailed(s *redSession, e *agent.ToolFailed, t int64) {
	tl := s.tools[e.CallID]
	if tl == nil {
		r.drop(s, agent.DropOrphan, "tool "+e.CallID+" was never announced")
		return
	}
	msg := e.Error
	if msg == "" {
		msg = "tool failed"
	}
	cur := tl.part.State
	if cur.Status == StatusError && (cur.Error == msg || tl.settled) {
		// The same failure again, or the agent confirming the rejection
		// or settlement the reducer wrote: its error stays, what the
		// agent adds (metadata members it lacked) is merged; a member
		// it changes is refused.
		meta, ok := redAdd(cur.Metadata, e.Metadata)
		if !ok {
			r.refuse(s, tl, terminalChange(cur.Status))
			return
		}
		if !redObjectsEqual(meta, cur.Metadata) {
			next := cur
			next.Metadata = meta
			if r.move(s, tl, next) {
				tl.meta = meta
			}
		}
		return
	}
	meta := redMerge(tl.meta, e.Metadata)
	var next ToolState
	switch cur.Status {
	case StatusBlocked:
		// The agent settled the request itself (a "No" typed in its own UI).
		var err error
		if next, err = cur.Decide(agent.DecisionReject, t, agent.ReasonAnsweredInAgent); err != nil {
			r.refuse(s, tl, err)
			return
		}
	case StatusPending:
		next = ToolState{Status: StatusError, Input: cur.Input, Time: ToolTime{Start: t}}
	default:
		next = cur
		next.Status = StatusError
		next.Title = ""
	}
	next.Error = msg
	next.Metadata = meta
	next.Time.End = t
	if r.move(s, tl, next) {
		tl.meta = meta
	}
}

// linkChild records the child session a task tool started on the tool's
// state metadata (sessionId), as seed 001's task tool part shows. A pending
// tool gets it when it runs; a settled tool keeps its state.
func (r *Reducer) linkChild(s *redSession, tl *redTool, childID string) {
	if tl.meta["sessionId"] == childID {
		return
	}
	tl.meta = redMerge(tl.meta, agent.Object{"sessionId": childID})
	if cur := tl.part.State; cur.Status == StatusRunning || cur.Status == StatusBlocked {
		next := cur
		next.Metadata = redMerge(cur.Metadata, agent.Object{"sessionId": childID})
		r.move(s, tl, next)
	}
}
