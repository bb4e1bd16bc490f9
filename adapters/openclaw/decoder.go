package openclaw

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// Decoder turns the traffic of one gateway session (both directions, in
// order, notes included) into agent events. It is deterministic, so a
// recorded traffic log replays to the events the live client produced; it
// is not safe for concurrent use. Build one with NewDecoder.
type Decoder struct {
	sessionKey string
	reqs       map[string]request // our requests by frame id
	turn       *turn
	turns      int
	runSeq     map[string]*seqSet      // agent-event seqs seen per run
	usage      map[string]agent.Tokens // usage totals per run so far
	ourRuns    map[string]bool
	tools      map[string]*tool
	approvals  map[string]*approval // by approval id
	byCall     map[string]string    // call id → pending approval id
	frameSeq   *seqSet              // event-frame seqs seen on the current connection
}

// seqRecent is how many seqs a seqSet remembers (per run, per connection):
// a reconnect delivers again at most the recent part of a stream.
const seqRecent = 4096

// seqSet holds the seqs seen of one stream: the most recent seqRecent, by
// order of arrival. A seq counts as seen only when it arrived itself, so one
// frame with an out-of-range seq does not hide the frames after it.
type seqSet struct {
	seen  map[int64]struct{}
	order []int64 // ring of the remembered seqs, oldest at next
	next  int
}

func newSeqSet() *seqSet { return &seqSet{seen: map[int64]struct{}{}} }

// add records seq and reports whether it was new.
func (s *seqSet) add(seq int64) bool {
	if _, dup := s.seen[seq]; dup {
		return false
	}
	if len(s.order) < seqRecent {
		s.order = append(s.order, seq)
	} else {
		delete(s.seen, s.order[s.next])
		s.order[s.next] = seq
		s.next = (s.next + 1) % seqRecent
	}
	s.seen[seq] = struct{}{}
	return true
}

type request struct {
	method string
	turn   string // idempotency key of an agent request
	appr   string // approval id of a resolve
}

type turn struct {
	key   string // the agent request's idempotency key
	runID string
}

type tool struct {
	running bool
	done    bool
}

type approval struct {
	id       string
	callID   string
	noAlways bool
	resolved bool
}

// NewDecoder returns a decoder with no session yet.
func NewDecoder() *Decoder {
	return &Decoder{
		reqs: map[string]request{}, runSeq: map[string]*seqSet{}, frameSeq: newSeqSet(), usage: map[string]agent.Tokens{}, ourRuns: map[string]bool{},
		tools: map[string]*tool{}, approvals: map[string]*approval{}, byCall: map[string]string{},
	}
}

// Decoded is the outcome of one record for the live client: the events,
// and whether the record closed the running turn.
type decoded struct {
	events []agent.Event
	ended  bool
}

// Decode returns the events one record yields (possibly none).
func (d *Decoder) Decode(rec Record) []agent.Event { return d.decode(rec).events }

func (d *Decoder) decode(rec Record) decoded {
	var out decoded
	emit := func(evs ...agent.Event) {
		for _, e := range evs {
			if e.Base().Time == 0 {
				e.Base().Time = rec.T
			}
			if te, ok := e.(*agent.TurnEnded); ok && te != nil {
				out.ended = true
			}
		}
		out.events = append(out.events, evs...)
	}
	drop := func(kind string, reason agent.DropReason, detail string) {
		emit(&agent.DroppedInput{Dropped: agent.Dropped{Source: DecoderSource, Line: rec.Line, Kind: kind, Reason: reason,
			Detail: detail, Raw: agent.CutUTF8(string(rec.Msg), agent.DroppedRawMax)}})
	}
	switch rec.Dir {
	case Note:
		d.note(rec, emit)
		return out
	case C2A, A2C:
	default:
		return out // a child-process record: nothing of a gateway
	}
	f, err := DecodeFrame(rec.Msg)
	if err != nil {
		var fe *FrameError
		if !errors.As(err, &fe) {
			drop("", agent.DropInvalidField, err.Error())
			return out
		}
		drop("", fe.Reason, fe.Detail)
		return out
	}
	if rec.Dir == C2A {
		d.sent(f, emit, drop)
		return out
	}
	switch f.Type {
	case TypeRes:
		d.response(f, emit, drop)
	case TypeEvent:
		if f.Seq != nil && !d.frameSeq.add(*f.Seq) {
			return out // the same frame delivered twice on one connection
		}
		d.event(f, emit, drop)
	default:
		drop(f.Type+" "+f.Method, agent.DropUnknownType, "the gateway sent a request to an operator client")
	}
	return out
}

// Finish ends a turn still open at the end of a replayed log (truncated).
func (d *Decoder) Finish() []agent.Event {
	if d.turn == nil {
		return nil
	}
	t := d.turn
	d.turn = nil
	return []agent.Event{&agent.TurnEnded{TurnID: t.key, Reason: agent.TurnTruncated, Error: "the traffic log ends inside the turn"}}
}

// pendingApproval returns the approval waiting for callID (for Decide).
func (d *Decoder) pendingApproval(callID string) (*approval, bool) {
	id, ok := d.byCall[callID]
	if !ok {
		return nil, false
	}
	a := d.approvals[id]
	return a, a != nil && !a.resolved
}

// turnOpen reports whether a turn runs, and its run id.
func (d *Decoder) turnOpen() (string, bool) {
	if d.turn == nil {
		return "", false
	}
	return d.turn.runID, true
}

type emitFn func(...agent.Event)
type dropFn func(kind string, reason agent.DropReason, detail string)

// sent decodes one of our frames: the prompts and decisions it carries.
func (d *Decoder) sent(f Frame, emit emitFn, drop dropFn) {
	if f.Type != TypeReq {
		drop(f.Type, agent.DropUnknownType, "happy sends only requests")
		return
	}
	r := request{method: f.Method}
	switch f.Method {
	case "agent", "chat.send":
		var p struct {
			Message        string `json:"message"`
			SessionKey     string `json:"sessionKey"`
			IdempotencyKey string `json:"idempotencyKey"`
		}
		if json.Unmarshal(f.Params, &p) != nil || p.IdempotencyKey == "" {
			drop("req "+f.Method, agent.DropInvalidField, "a prompt without idempotencyKey")
			return
		}
		r.turn = p.IdempotencyKey
		if p.SessionKey != "" && p.SessionKey != d.sessionKey {
			d.sessionKey = p.SessionKey
			emit(&agent.SessionInfo{ProviderSessionID: p.SessionKey})
		}
		if d.turn != nil {
			// A prompt while a turn runs: the earlier one ends here, so the
			// transcript never holds two open turns.
			emit(&agent.TurnEnded{TurnID: d.turn.key, Reason: agent.TurnCompleted})
			d.closeTurn()
		}
		d.turns++
		d.turn = &turn{key: p.IdempotencyKey}
		emit(&agent.TurnStarted{TurnID: p.IdempotencyKey},
			&agent.UserPrompt{PromptID: p.IdempotencyKey, Text: p.Message})
	case "exec.approval.resolve":
		var p struct {
			ID       string `json:"id"`
			Decision string `json:"decision"`
		}
		if json.Unmarshal(f.Params, &p) != nil || p.ID == "" {
			drop("req "+f.Method, agent.DropInvalidField, "a decision without approval id")
			return
		}
		r.appr = p.ID
		a := d.approvals[p.ID]
		dec, ok := decisionOf(p.Decision)
		if a == nil || a.resolved {
			break // answered already (by another client) or never seen: the gateway says so
		}
		if !ok {
			drop("req "+f.Method, agent.DropUnknownDecision, fmt.Sprintf("decision %q", p.Decision))
			break
		}
		d.resolve(a, dec, "", emit)
	}
	d.reqs[f.ID] = r
}

// resolve records the decision of an approval and, for an allow, that the
// tool runs again.
func (d *Decoder) resolve(a *approval, dec agent.Decision, reason string, emit emitFn) {
	a.resolved = true
	delete(d.byCall, a.callID)
	emit(&agent.ToolResolved{CallID: a.callID, Decision: dec, Reason: reason})
	if dec != agent.DecisionReject {
		if t := d.tools[a.callID]; t != nil {
			t.running = true
		}
		emit(&agent.ToolRunning{CallID: a.callID})
	}
}

// decisionOf maps the gateway's decision to the canonical one.
func decisionOf(s string) (agent.Decision, bool) {
	switch s {
	case "allow-once":
		return agent.DecisionOnce, true
	case "allow-always":
		return agent.DecisionAlways, true
	case "deny":
		return agent.DecisionReject, true
	}
	return "", false
}

// wireDecision maps a canonical decision to the gateway's; noAlways
// (the request said allow-always is unavailable) turns always into once.
func wireDecision(dec agent.Decision, noAlways bool) (string, bool) {
	switch dec {
	case agent.DecisionOnce:
		return "allow-once", true
	case agent.DecisionAlways:
		if noAlways {
			return "allow-once", true
		}
		return "allow-always", true
	case agent.DecisionReject:
		return "deny", true
	}
	return "", false
}

// response decodes the gateway's answer to one of our requests.
func (d *Decoder) response(f Frame, emit emitFn, drop dropFn) {
	r, ok := d.reqs[f.ID]
	if !ok {
		drop("res", agent.DropOrphan, "a response to no request of ours: "+f.ID)
		return
	}
	switch r.method {
	case "agent", "chat.send":
		if !f.Succeeded() {
			delete(d.reqs, f.ID)
			if d.turn != nil && d.turn.key == r.turn {
				emit(errorEvent(f.Error, agent.ErrorProtocol))
				emit(&agent.TurnEnded{TurnID: r.turn, Reason: agent.TurnFailed, Error: errorText(f.Error)})
				d.closeTurn()
			}
			return
		}
		var p struct {
			RunID  string `json:"runId"`
			Status string `json:"status"`
			Error  string `json:"error"`
		}
		_ = json.Unmarshal(f.Payload, &p)
		if p.RunID != "" {
			d.ourRuns[p.RunID] = true
			if d.turn != nil && d.turn.key == r.turn && d.turn.runID == "" {
				d.turn.runID = p.RunID
			}
		}
		switch p.Status {
		case "accepted", "started", "in_flight", "":
			return // the final response follows
		}
		// The final response: the run is over. The lifecycle end event has
		// normally ended the turn already.
		delete(d.reqs, f.ID)
		if d.turn == nil || d.turn.key != r.turn {
			return
		}
		if p.Status == "error" || p.Status == "failed" {
			text := p.Error
			if text == "" {
				text = "the run failed"
			}
			emit(&agent.AgentError{Kind: agent.ErrorInternal, Text: text})
			emit(&agent.TurnEnded{TurnID: r.turn, Reason: agent.TurnFailed, Error: text})
		} else {
			emit(&agent.TurnEnded{TurnID: r.turn, Reason: agent.TurnCompleted})
		}
		d.closeTurn()
	case "exec.approval.resolve":
		delete(d.reqs, f.ID)
		if !f.Succeeded() {
			emit(errorEvent(f.Error, agent.ErrorProtocol))
		}
	default:
		delete(d.reqs, f.ID)
	}
}

func errorText(e *ErrorShape) string {
	if e == nil {
		return "the gateway refused the request"
	}
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// errorEvent is the AgentError of a failed response; an auth code is kind
// auth, UNAVAILABLE transport, else kind def.
func errorEvent(e *ErrorShape, def agent.ErrorKind) *agent.AgentError {
	kind := def
	if e != nil {
		switch c := strings.ToUpper(e.Code); {
		case strings.Contains(c, "AUTH") || strings.Contains(c, "UNAUTHORIZED") || strings.Contains(c, "PAIR") || strings.Contains(c, "FORBIDDEN"):
			kind = agent.ErrorAuth
		case c == "UNAVAILABLE":
			kind = agent.ErrorTransport
		case strings.Contains(c, "RATE"):
			kind = agent.ErrorRateLimit
		}
	}
	return &agent.AgentError{Kind: kind, Text: errorText(e)}
}

// ignoredEvents are the gateway's broadcast events (GATEWAY_EVENTS of the
// openclaw package) that carry nothing for the transcript: transport
// health, presence, other surfaces. The "chat" event repeats, for chat
// surfaces, what the agent event stream gives in full.
var ignoredEvents = map[string]bool{
	"connect.challenge": true, "chat": true, "chat.metadata.changed": true, "models.snapshot": true, "ui.command": true,
	"session.approval": true, "session.message": true, "session.observer": true, "session.operation": true,
	"session.sharing": true, "session.sharing.evidence": true, "session.suggestion": true, "session.typing": true,
	"session.tool": true, "sessions.changed": true, "controlUi.sessionPullRequests.changed": true,
	"plugins.controlUi.changed": true, "presence": true, "tick": true, "talk.mode": true, "talk.event": true,
	"talk.voice.change": true, "shutdown": true, "gateway.suspension": true, "health": true, "heartbeat": true,
	"cron": true, "task": true, "task.suggestion": true, "node.pair.requested": true, "node.pair.resolved": true,
	"node.presence": true, "node.hostStats": true, "node.runner.inventory.changed": true, "node.invoke.cancel": true,
	"node.invoke.input": true, "node.invoke.request": true, "device.pair.changed": true, "device.pair.requested": true,
	"device.pair.resolved": true, "device.pair.setup.completed": true, "device.pair.setup.deliveryUncertain": true,
	"users.prefs.changed": true, "skills.changed": true, "plugins.changed": true, "plugins.install.progress": true,
	"voicewake.changed": true, "voicewake.routing.changed": true, "plugin.approval.requested": true,
	"plugin.approval.resolved": true, "openclaw.approval.requested": true, "openclaw.approval.resolved": true,
	"question.requested": true, "question.resolved": true, "terminal.data": true, "terminal.exit": true,
	"update.available": true, "update.run.changed": true, "portal.changed": true, "progressCard.changed": true,
	"mentions.changed": true,
}

// event decodes one broadcast event of the gateway.
func (d *Decoder) event(f Frame, emit emitFn, drop dropFn) {
	switch f.Event {
	case "agent":
		d.agentEvent(f, emit, drop)
	case "exec.approval.requested":
		d.approvalRequested(f, emit, drop)
	case "exec.approval.resolved":
		var p struct {
			ID       string `json:"id"`
			Decision string `json:"decision"`
		}
		if json.Unmarshal(f.Payload, &p) != nil || p.ID == "" {
			drop("event "+f.Event, agent.DropInvalidField, "a resolution without approval id")
			return
		}
		a := d.approvals[p.ID]
		if a == nil || a.resolved {
			return // ours (recorded from our request) or another session's
		}
		dec, ok := decisionOf(p.Decision)
		if !ok {
			dec = agent.DecisionReject // expired or cancelled: nobody allowed it
		}
		d.resolve(a, dec, agent.ReasonAnsweredInAgent, emit)
	default:
		if !ignoredEvents[f.Event] {
			drop("event "+f.Event, agent.DropUnknownType, "an event this version does not know")
		}
	}
}

// approvalRequested decodes exec.approval.requested {id, request: {command,
// cwd, toolCallId, runId, sessionKey, unavailableDecisions, …},
// createdAtMs, expiresAtMs}: the exec tool waits for an operator.
func (d *Decoder) approvalRequested(f Frame, emit emitFn, drop dropFn) {
	var p struct {
		ID      string `json:"id"`
		Request struct {
			Command     string   `json:"command"`
			CommandArgv []string `json:"commandArgv"`
			Cwd         *string  `json:"cwd"`
			ToolCallID  *string  `json:"toolCallId"`
			RunID       *string  `json:"runId"`
			SessionKey  *string  `json:"sessionKey"`
			Unavailable []string `json:"unavailableDecisions"`
		} `json:"request"`
	}
	if err := json.Unmarshal(f.Payload, &p); err != nil {
		drop("event "+f.Event, agent.DropInvalidField, err.Error())
		return
	}
	if p.ID == "" {
		drop("event "+f.Event, agent.DropMissingID, "an approval request without id")
		return
	}
	rq := p.Request
	if rq.SessionKey != nil && *rq.SessionKey != "" && d.sessionKey != "" && *rq.SessionKey != d.sessionKey {
		return // another session's command: not ours to decide
	}
	if rq.RunID != nil && *rq.RunID != "" && len(d.ourRuns) > 0 && !d.ourRuns[*rq.RunID] && (rq.SessionKey == nil || *rq.SessionKey == "") {
		return
	}
	if _, seen := d.approvals[p.ID]; seen {
		return
	}
	callID := "approval-" + p.ID
	if rq.ToolCallID != nil && *rq.ToolCallID != "" {
		callID = *rq.ToolCallID
	}
	command := rq.Command
	if command == "" {
		command = strings.Join(rq.CommandArgv, " ")
	}
	in := agent.BashInput{Command: command}
	if rq.Cwd != nil {
		in.Cwd = *rq.Cwd
	}
	a := &approval{id: p.ID, callID: callID}
	for _, u := range rq.Unavailable {
		if u == "allow-always" {
			a.noAlways = true
		}
	}
	d.approvals[p.ID] = a
	d.byCall[callID] = p.ID
	perm := &agent.PermissionRequest{ID: p.ID, Permission: agent.ToolBash, Metadata: agent.Object{"approvalId": p.ID}}
	if command != "" {
		perm.Patterns = []string{command}
		if !a.noAlways {
			perm.Always = []string{command}
		}
	}
	emit(&agent.ToolBlocked{CallID: callID, Tool: agent.ToolBash, Input: agent.EncodeInput(in), Permission: perm})
	if t := d.tools[callID]; t != nil {
		t.running = false
	}
}

// agentEventPayload is the payload of an "agent" event (AgentEventSchema):
// a run's stream event with its per-run sequence number.
type agentEventPayload struct {
	RunID      string                     `json:"runId"`
	Seq        *int64                     `json:"seq"`
	Stream     string                     `json:"stream"`
	TS         int64                      `json:"ts"`
	SessionKey string                     `json:"sessionKey"`
	Data       map[string]json.RawMessage `json:"data"`
}

// agentStreamsIgnored are agent streams that repeat what other streams
// give (item, approval, run_status, plan progress) or carry a process's raw
// output that the tool result holds.
var agentStreamsIgnored = map[string]bool{
	"item": true, "approval": true, "run_status": true, "plan": true, "command_output": true,
	"stdout": true, "stderr": true, "patch": true, "execution": true, "acp": true,
}

func (d *Decoder) agentEvent(f Frame, emit emitFn, drop dropFn) {
	var p agentEventPayload
	if err := json.Unmarshal(f.Payload, &p); err != nil {
		drop("event agent", agent.DropInvalidField, err.Error())
		return
	}
	if p.RunID == "" {
		drop("event agent", agent.DropMissingID, "an agent event without runId")
		return
	}
	if p.Seq == nil || p.Stream == "" {
		drop("event agent", agent.DropInvalidField, "an agent event without seq or stream")
		return
	}
	if !d.ourRuns[p.RunID] {
		switch {
		case p.SessionKey != "" && d.sessionKey != "" && p.SessionKey != d.sessionKey:
			return // another session's run
		case d.turn != nil && d.turn.runID == "":
			d.turn.runID = p.RunID // the stream came before the accepted response
			d.ourRuns[p.RunID] = true
		case d.turn != nil && p.SessionKey == d.sessionKey && d.sessionKey != "":
			d.ourRuns[p.RunID] = true // a follow-up run of our session
		default:
			return // a run of another client
		}
	}
	seqs := d.runSeq[p.RunID]
	if seqs == nil {
		seqs = newSeqSet()
		d.runSeq[p.RunID] = seqs
	}
	if !seqs.add(*p.Seq) {
		return // delivered again after a reconnect: already decoded
	}
	base := agent.EventBase{Time: p.TS}
	str := func(k string) (string, bool) {
		var s string
		if raw, ok := p.Data[k]; ok && json.Unmarshal(raw, &s) == nil {
			return s, true
		}
		return "", false
	}
	switch p.Stream {
	case "assistant":
		if delta, ok := str("delta"); ok {
			if delta != "" {
				emit(&agent.TextDelta{EventBase: base, Delta: delta})
			}
		} else if text, ok := str("text"); ok && text != "" {
			emit(&agent.TextFinal{EventBase: base, Text: text})
		}
	case "thinking":
		if delta, ok := str("delta"); ok {
			if delta != "" {
				emit(&agent.ReasoningDelta{EventBase: base, Delta: delta})
			}
		} else if text, ok := str("text"); ok && text != "" {
			emit(&agent.ReasoningFinal{EventBase: base, Text: text})
		}
	case "tool":
		d.toolEvent(p, base, emit, drop)
	case "lifecycle":
		d.lifecycle(p, base, emit, drop)
	case "usage":
		if u := usageOf(p.Data); u != nil {
			u.EventBase = base
			d.stepUsage(p.RunID, u)
			emit(u)
		}
	case "error":
		text, _ := str("error")
		if text == "" {
			text, _ = str("message")
		}
		emit(&agent.AgentError{EventBase: base, Kind: agent.ErrorInternal, Text: text})
	case "compaction":
		if phase, _ := str("phase"); phase == "start" || phase == "" {
			emit(&agent.Compaction{EventBase: base, ID: p.RunID + "/" + strconv.FormatInt(*p.Seq, 10), Auto: true})
		}
	default:
		if !agentStreamsIgnored[p.Stream] {
			drop("event agent/"+p.Stream, agent.DropUnknownType, "an agent stream this version does not know")
		}
	}
}

// toolEvent decodes the tool stream: {phase: start|update|result|review,
// name, toolCallId, args (start), result/partialResult, isError, meta}.
func (d *Decoder) toolEvent(p agentEventPayload, base agent.EventBase, emit emitFn, drop dropFn) {
	var t struct {
		Phase      string          `json:"phase"`
		Name       string          `json:"name"`
		ToolCallID string          `json:"toolCallId"`
		Args       json.RawMessage `json:"args"`
		Result     json.RawMessage `json:"result"`
		IsError    bool            `json:"isError"`
		Meta       json.RawMessage `json:"meta"`
	}
	raw, _ := json.Marshal(p.Data)
	if err := json.Unmarshal(raw, &t); err != nil {
		drop("event agent/tool", agent.DropInvalidField, err.Error())
		return
	}
	if t.ToolCallID == "" {
		drop("event agent/tool", agent.DropMissingID, "a tool event without toolCallId")
		return
	}
	st := d.tools[t.ToolCallID]
	switch t.Phase {
	case "start":
		canon, input := canonicalTool(t.Name, t.Args)
		emit(&agent.ToolCall{EventBase: base, CallID: t.ToolCallID, Tool: canon, Title: t.Name, Input: input,
			Metadata: agent.ToolMetadata(t.Name, t.Args, input)})
		if st == nil {
			st = &tool{}
			d.tools[t.ToolCallID] = st
		}
		if !st.running && !st.done {
			if _, blocked := d.byCall[t.ToolCallID]; !blocked {
				st.running = true
				emit(&agent.ToolRunning{EventBase: base, CallID: t.ToolCallID})
			}
		}
	case "update", "review":
		// Progress (partial output) of a running tool, or the exec tool
		// reviewing its command: the state does not change.
	case "result":
		if st == nil {
			// A result of a call never announced: it cannot stand alone.
			drop("event agent/tool", agent.DropOrphan, "a tool result for unknown call "+t.ToolCallID)
			return
		}
		if st.done {
			return
		}
		st.done = true
		text := resultText(t.Result)
		if t.IsError {
			if text == "" {
				text = "the tool failed"
			}
			emit(&agent.ToolFailed{EventBase: base, CallID: t.ToolCallID, Error: text})
			return
		}
		if !st.running {
			st.running = true
			emit(&agent.ToolRunning{EventBase: base, CallID: t.ToolCallID})
		}
		emit(&agent.ToolCompleted{EventBase: base, CallID: t.ToolCallID, Output: text})
	default:
		drop("event agent/tool", agent.DropInvalidField, fmt.Sprintf("tool phase %q", t.Phase))
	}
}

// lifecycle decodes the lifecycle stream: {phase: start | model
// {provider, model} | waiting-approval | approval-resolved | fallback |
// finishing | end {aborted?, stopReason?} | error {error}}.
func (d *Decoder) lifecycle(p agentEventPayload, base agent.EventBase, emit emitFn, drop dropFn) {
	var l struct {
		Phase      string  `json:"phase"`
		Aborted    bool    `json:"aborted"`
		StopReason string  `json:"stopReason"`
		Error      string  `json:"error"`
		Provider   *string `json:"provider"`
		Model      *string `json:"model"`
	}
	raw, _ := json.Marshal(p.Data)
	if err := json.Unmarshal(raw, &l); err != nil {
		drop("event agent/lifecycle", agent.DropInvalidField, err.Error())
		return
	}
	if d.turn == nil || d.turn.runID != p.RunID {
		return // a run whose turn ended already
	}
	switch l.Phase {
	case "start", "waiting-approval", "approval-resolved", "finishing", "fallback":
		// Progress of the run: the approval itself comes as its own event,
		// and the turn ends with "end" or "error".
	case "model":
		// The model the run uses (null until the gateway resolved it).
		// A model call starts: one assistant message (step) each.
		if l.Model != nil && *l.Model != "" {
			info := &agent.SessionInfo{EventBase: base, ModelID: *l.Model}
			step := &agent.MessageStarted{EventBase: base, ModelID: *l.Model}
			if l.Provider != nil {
				info.ProviderID, step.ProviderID = *l.Provider, *l.Provider
			}
			emit(info, step)
		}
	case "end":
		key := d.turn.key
		if l.Aborted {
			emit(&agent.StepFinished{EventBase: base, Finish: agent.FinishAborted})
			emit(&agent.TurnEnded{EventBase: base, TurnID: key, Reason: agent.TurnInterrupted})
		} else {
			emit(&agent.StepFinished{EventBase: base, Finish: finishOf(l.StopReason)})
			emit(&agent.TurnEnded{EventBase: base, TurnID: key, Reason: agent.TurnCompleted})
		}
		d.closeTurn()
	case "error":
		text := l.Error
		if text == "" {
			text = "the run failed"
		}
		emit(&agent.AgentError{EventBase: base, Kind: kindOf(text), Text: text})
		emit(&agent.TurnEnded{EventBase: base, TurnID: d.turn.key, Reason: agent.TurnFailed, Error: text})
		d.closeTurn()
	default:
		drop("event agent/lifecycle", agent.DropInvalidField, fmt.Sprintf("lifecycle phase %q", l.Phase))
	}
}

// finishOf maps a model stop reason to a finish reason.
func finishOf(stop string) string {
	switch strings.ToLower(stop) {
	case "length", "max_tokens", "maxtokens":
		return agent.FinishLength
	case "tooluse", "tool_use", "tool_calls", "tool-calls":
		return agent.FinishToolCalls
	case "aborted":
		return agent.FinishAborted
	case "error":
		return agent.FinishError
	}
	return agent.FinishStop
}

// kindOf guesses the error kind of a run's error text.
func kindOf(text string) agent.ErrorKind {
	t := strings.ToLower(text)
	switch {
	case strings.Contains(t, "401") || strings.Contains(t, "403") || strings.Contains(t, "api key") || strings.Contains(t, "unauthorized"):
		return agent.ErrorAuth
	case strings.Contains(t, "429") || strings.Contains(t, "rate limit"):
		return agent.ErrorRateLimit
	case strings.Contains(t, "econnrefused") || strings.Contains(t, "fetch failed") || strings.Contains(t, "network"):
		return agent.ErrorTransport
	}
	return agent.ErrorInternal
}

// usageOf reads the usage stream's figures: {input, output, cacheRead,
// cacheWrite, reasoning?} (the agent runtime's names), or the same under
// "usage"; nil when it has none.
func usageOf(data map[string]json.RawMessage) *agent.Usage {
	if inner, ok := data["usage"]; ok {
		var m map[string]json.RawMessage
		if json.Unmarshal(inner, &m) == nil {
			data = m
		}
	}
	n := func(keys ...string) *int64 {
		for _, k := range keys {
			var f float64
			if raw, ok := data[k]; ok && json.Unmarshal(raw, &f) == nil {
				v := int64(f)
				return &v
			}
		}
		return nil
	}
	tok := agent.Tokens{Input: n("input", "inputTokens", "input_tokens"), Output: n("output", "outputTokens", "output_tokens"),
		Reasoning: n("reasoning", "reasoningTokens"),
		Cache:     agent.CacheTokens{Read: n("cacheRead", "cache_read_input_tokens"), Write: n("cacheWrite", "cache_creation_input_tokens")}}
	if tok.Input == nil && tok.Output == nil && tok.Reasoning == nil && tok.Cache.Read == nil && tok.Cache.Write == nil {
		return nil
	}
	u := &agent.Usage{Tokens: &tok}
	var cost struct {
		Total *float64 `json:"total"`
	}
	if raw, ok := data["cost"]; ok {
		var c float64
		if json.Unmarshal(raw, &c) == nil {
			u.Cost = &c
		} else if json.Unmarshal(raw, &cost) == nil && cost.Total != nil {
			u.Cost = cost.Total
		}
	}
	return u
}

// stepUsage turns the run's running totals (the usage stream counts from
// the start of the run: 20, 40, 60 output tokens after three model calls)
// into the current step's figures, which is what a Usage event holds.
func (d *Decoder) stepUsage(runID string, u *agent.Usage) {
	total := *u.Tokens
	prev, seen := d.usage[runID]
	d.usage[runID] = total
	if !seen {
		return
	}
	sub := func(cur, before *int64) *int64 {
		if cur == nil || before == nil || *cur < *before {
			return cur
		}
		v := *cur - *before
		return &v
	}
	u.Tokens = &agent.Tokens{Input: sub(total.Input, prev.Input), Output: sub(total.Output, prev.Output),
		Reasoning: sub(total.Reasoning, prev.Reasoning),
		Cache:     agent.CacheTokens{Read: sub(total.Cache.Read, prev.Cache.Read), Write: sub(total.Cache.Write, prev.Cache.Write)}}
}

// note decodes a note of happy's client.
func (d *Decoder) note(rec Record, emit emitFn) {
	var n note
	if json.Unmarshal(rec.Msg, &n) != nil {
		return // a remark of whoever recorded the traffic
	}
	switch n.Happy {
	case noteReconnect:
		d.frameSeq = newSeqSet() // a new connection numbers its events from the start
	case noteGone:
		if d.turn == nil {
			return
		}
		text := "the gateway went away"
		if n.Error != "" {
			text += ": " + n.Error
		}
		emit(&agent.AgentError{Kind: agent.ErrorTransport, Text: text})
		emit(&agent.TurnEnded{TurnID: d.turn.key, Reason: agent.TurnFailed, Error: text})
		d.closeTurn()
	}
}

func (d *Decoder) closeTurn() {
	d.turn = nil
	for id, a := range d.approvals {
		if !a.resolved {
			a.resolved = true
			delete(d.byCall, a.callID)
			_ = id
		}
	}
}
