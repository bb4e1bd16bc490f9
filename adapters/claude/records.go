package claude

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// skippedKinds are record kinds known to carry nothing for the transcript
// (see the coverage table in doc.go). They are skipped, not dropped.
var skippedKinds = map[string]bool{
	// session JSONL bookkeeping
	"file-history-snapshot": true, "queue-operation": true, "last-prompt": true, "mode": true,
	"permission-mode": true, "progress": true, "pr-link": true, "worktree-state": true,
	"agent-name": true, "cost-state": true, "bridge-session": true,
	// stream-json notices
	"keep_alive": true, "rate_limit_event": true, "tool_progress": true, "auth_status": true,
}

// skippedSystem are system subtypes known to carry nothing for the
// transcript.
var skippedSystem = map[string]bool{
	"status": true, "thinking_tokens": true, "task_progress": true, "task_updated": true,
	"hook_started": true, "hook_progress": true, "hook_response": true, "files_persisted": true,
	"stop_hook_summary": true, "informational": true, "local_command": true, "away_summary": true,
}

// dispatch maps a parsed record by kind.
func (d *Decoder) dispatch(r *record, dir string, typeErr *json.UnmarshalTypeError) {
	if dir == string(trafficlog.C2A) {
		// What the wrapper writes to the agent: prompts and control only.
		switch r.Type {
		case "user", "control_request", "control_response", "keep_alive":
		default:
			d.drop("c2a/"+r.Type, agent.DropUnknownType, "message kind the wrapper does not send")
			return
		}
	}
	switch r.Type {
	case "assistant":
		d.assistant(r, typeErr)
	case "user":
		if dir == string(trafficlog.C2A) {
			d.c2aPrompt(r)
		} else {
			d.user(r, dir, typeErr)
		}
	case "system":
		d.system(r)
	case "result":
		d.result(r)
	case "stream_event":
		d.streamEvent(r, typeErr)
	case "control_request":
		d.controlRequest(r, dir)
	case "control_response":
		d.controlResponse(r, dir)
	case "control_cancel_request":
		d.controlCancel(r)
	case "attachment":
		d.attachment(r)
	case "summary", "custom-title", "ai-title":
		d.title(r)
	default:
		if !skippedKinds[r.Type] {
			d.drop(r.Type, agent.DropUnknownType, "record kind not known to this version")
		}
	}
}

// sessionOf returns the session key a record belongs to: a child session
// for subagent records (parent_tool_use_id in stream-json, sidechain /
// agentId in session JSONL), else the root.
func (d *Decoder) sessionOf(r *record) string {
	if r.ParentToolUseID != nil && *r.ParentToolUseID != "" {
		return d.childFor(*r.ParentToolUseID)
	}
	if !r.IsSidechain && r.AgentID == "" {
		d.noteSession(r)
		return ""
	}
	return d.sidechain(r)
}

// sidechain finds the child session of a subagent's JSONL record: by its
// agentId (linked by AttachSubagent, a task_started event or the Agent
// call's result), else by matching the subagent's first prompt to an open
// Agent call's prompt, else following parentUuid (older Claude versions
// wrote sidechains into the main file). A record that matches nothing opens
// a child session of its own, so its content is kept.
func (d *Decoder) sidechain(r *record) string {
	if r.AgentID != "" {
		if k := d.agents[r.AgentID]; k != "" {
			return d.ensureChild(k, callIDOf(k))
		}
		k := d.matchPrompt(r)
		if k == "" {
			k = "agent-" + r.AgentID
		}
		d.agents[r.AgentID] = k
		return d.ensureChild(k, callIDOf(k))
	}
	if r.ParentUUID != nil {
		if k := d.sideUUID[*r.ParentUUID]; k != "" {
			if r.UUID != "" {
				d.sideUUID[r.UUID] = k
			}
			return k
		}
	}
	k := d.matchPrompt(r)
	if k == "" {
		k = "sidechain"
	}
	if r.UUID != "" {
		d.sideUUID[r.UUID] = k
	}
	return d.ensureChild(k, callIDOf(k))
}

// callIDOf returns the call id behind a child key ("" for keys the decoder
// made up for unlinked subagents).
func callIDOf(key string) string {
	if key == "sidechain" || strings.HasPrefix(key, "agent-") {
		return ""
	}
	return key
}

// matchPrompt returns the open Agent/Task call whose prompt equals the
// prompt of user record r, or "".
func (d *Decoder) matchPrompt(r *record) string {
	if r.Type != "user" || r.Message == nil {
		return ""
	}
	blocks, _ := r.Message.blocks()
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" {
			texts = append(texts, deref(b.Text))
		}
	}
	text := strings.Join(texts, "\n")
	if text == "" {
		return ""
	}
	for _, key := range d.sessionKeys() {
		for _, id := range d.sessions[key].openTools {
			t := d.tools[id]
			if t != nil && isAgentTool(t.name) && parseInput(t.input).Prompt == text {
				if cs := d.sessions[id]; cs != nil && cs.ended {
					continue
				}
				return id
			}
		}
	}
	return ""
}

// noteSession reports the provider session id and working folder of a
// root record.
func (d *Decoder) noteSession(r *record) {
	if d.form == FormSessionJSONL && (r.SessionID != "" || r.Cwd != "") {
		d.emitInfo(agent.SessionInfo{ProviderSessionID: r.SessionID, ProviderID: ProviderID, Cwd: r.Cwd})
	}
}

// noteModel reports the model of a root session's JSONL (which has no
// init record).
func (d *Decoder) noteModel(r *record, model string) {
	if d.form == FormSessionJSONL && model != "" && !r.IsSidechain && r.AgentID == "" {
		d.emitInfo(agent.SessionInfo{ModelID: model})
	}
}

// emitInfo merges what a record says about the session and reports it when
// something changed.
func (d *Decoder) emitInfo(in agent.SessionInfo) {
	next := d.info
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&next.ProviderSessionID, in.ProviderSessionID)
	set(&next.ProviderID, in.ProviderID)
	set(&next.ModelID, in.ModelID)
	set(&next.Cwd, in.Cwd)
	set(&next.Title, in.Title)
	set(&next.Agent, in.Agent)
	if next == d.info {
		return
	}
	d.info = next
	ev := next
	ev.EventBase = d.base("")
	d.emit(&ev)
}

// system maps a system record.
func (d *Decoder) system(r *record) {
	switch r.Subtype {
	case "init":
		d.emitInfo(agent.SessionInfo{ProviderSessionID: r.session(), ProviderID: ProviderID, ModelID: r.Model, Cwd: r.Cwd})
		if d.form != FormSessionJSONL {
			d.ensureTurn(d.session(""))
		}
	case "compact_boundary", "microcompact_boundary":
		s := d.session(d.sessionOf(r))
		if d.form != FormSessionJSONL {
			d.ensureTurn(s) // in a transcript, /compact runs between turns
		}
		meta := r.CompactMeta
		if meta == nil {
			meta = r.CompactMetaSn
		}
		auto := r.Subtype == "microcompact_boundary" || (meta != nil && meta.Trigger == "auto")
		id := r.UUID
		if id == "" {
			id = "line-" + strconv.FormatInt(d.line, 10)
		} else {
			// Claude may write a later boundary with the uuid of an earlier
			// one (a resumed or forked session copies records): each
			// boundary is a compaction of its own, numbered in order.
			d.compactions[id]++
			if n := d.compactions[id]; n > 1 {
				id += "#" + strconv.Itoa(n)
			}
		}
		d.emit(&agent.Compaction{EventBase: d.base(s.key), ID: id, Auto: auto})
	case "api_retry", "api_error":
		d.retry(r)
	case "model_refusal_no_fallback":
		d.refusal(r)
	case "task_started":
		if r.TaskID != "" && r.ToolUseID != "" && d.agentTask(r) {
			d.agents[r.TaskID] = r.ToolUseID
			d.childFor(r.ToolUseID)
		}
	case "task_notification":
		key := r.ToolUseID
		if key == "" {
			key = d.agents[r.TaskID]
		}
		switch r.Status {
		case "completed":
			d.endChild(key, agent.TurnCompleted, "")
		case "failed":
			d.endChild(key, agent.TurnFailed, "subagent failed")
		case "killed", "stopped":
			d.endChild(key, agent.TurnInterrupted, "subagent stopped")
		}
	case "turn_duration":
		// The interactive UI writes this when a turn is over.
		if s := d.session(d.sessionOf(r)); s.turnOpen {
			reason, text := d.quietEnd(s, agent.TurnInterrupted, "")
			d.closeTurn(s, reason, text)
		}
	default:
		if !skippedSystem[r.Subtype] {
			d.drop("system/"+r.Subtype, agent.DropUnknownType, "system subtype not known to this version")
		}
	}
}

// agentTask reports whether a task_started is a subagent's. Claude also
// reports a long shell command it moved to the background as a task
// (task_type local_bash): that is no subagent, and a child session for it
// would stay empty under its Bash call.
func (d *Decoder) agentTask(r *record) bool {
	if r.TaskType != "" {
		return r.TaskType == "local_agent"
	}
	t := d.tools[r.ToolUseID]
	return t == nil || t.name == "" || isAgentTool(t.name)
}

// retry maps a failed API call Claude retries: stream-json api_retry
// {attempt, error_status, error} or JSONL api_error {retryAttempt, error:{…}}.
func (d *Decoder) retry(r *record) {
	s := d.session(d.sessionOf(r))
	d.ensureTurn(s)
	attempt := r.Attempt
	if attempt == nil {
		attempt = r.RetryAttempt
	}
	status := r.ErrorStatus
	var code, text string
	if json.Unmarshal(r.Error, &code) != nil {
		st, msg := apiErrorInfo(r.Error)
		if status == nil {
			status = st
		}
		text = msg
	}
	if text == "" {
		text = code
	}
	if text == "" && status != nil {
		text = "API error " + strconv.Itoa(*status)
	}
	retryable := true
	ev := &agent.Retry{EventBase: d.base(s.key), Error: agent.MessageError{Name: agent.ErrNameAPI, Data: agent.ErrorData{
		Message: text, Kind: errorKind(status, code, text), ProviderID: ProviderID, StatusCode: status, IsRetryable: &retryable}}}
	if attempt != nil {
		ev.Attempt = *attempt
	}
	if s.streamMsg != "" {
		// The call that was streaming broke off: the retry replaces it.
		if msg := d.msgs[msgKey(s.key, s.streamMsg)]; msg != nil {
			d.brokenAttempt(s, msg)
			ev.Message = msg.id
		}
		s.streamMsg = ""
	}
	d.emit(ev)
}

// refusal maps model_refusal_no_fallback: the model refused and no
// fallback model is configured, so the turn ends as an error. The error
// is the step's, with Claude's own words for it (content, else the API's
// explanation, else the model and the refusal's category).
func (d *Decoder) refusal(r *record) {
	s := d.session(d.sessionOf(r))
	d.ensureTurn(s)
	var text string
	_ = json.Unmarshal(r.Content, &text)
	if text == "" {
		text = r.RefusalExplanation
	}
	if text == "" {
		model := r.OriginalModel
		if model == "" {
			model = "the model"
		}
		text = model + " refused the request"
		if r.RefusalCategory != "" {
			text += " (" + r.RefusalCategory + ")"
		}
		text += " and no fallback model is configured"
	}
	s.turnErr, s.errEmitted = text, true
	d.emit(&agent.AgentError{EventBase: d.base(s.key), Message: s.curMsg, Kind: agent.ErrorInternal, Text: text})
}

// apiErrorInfo digs the HTTP status and message out of an API error object
// of any nesting ({status, error:{error:{type, message}}}).
func apiErrorInfo(raw json.RawMessage) (*int, string) {
	v, err := decodeValue(raw)
	if err != nil {
		return nil, ""
	}
	var status *int
	var msg string
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 4 {
			return
		}
		if n, ok := m["status"].(json.Number); ok && status == nil {
			if i, err := n.Int64(); err == nil {
				x := int(i)
				status = &x
			}
		}
		if s, ok := m["message"].(string); ok && msg == "" {
			msg = s
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			walk(m[k], depth+1)
		}
	}
	walk(v, 0)
	return status, msg
}

// result maps the result record that ends a turn in stream-json.
func (d *Decoder) result(r *record) {
	s := d.session("")
	if !s.turnOpen {
		d.drop("result", agent.DropOrphan, "result ("+r.Subtype+") after the turn had ended; ignored")
		return
	}
	if m := d.msgs[msgKey("", s.lastMsg)]; m != nil && !m.finished && m.stop == "" && r.StopReason != nil {
		m.stop = *r.StopReason // stream-json leaves stop_reason null on assistant lines
	}
	isErr := r.IsError != nil && *r.IsError
	text := deref(r.Result)
	if len(r.Errors) > 0 {
		text = strings.Join(r.Errors, "; ")
	}
	reason := agent.TurnFailed
	switch {
	case r.Subtype == "success" && !isErr:
		reason, text = agent.TurnCompleted, ""
	case s.stopped || d.interrupt:
		reason, text = agent.TurnInterrupted, ""
	case r.Subtype == "error_max_turns" && text == "":
		text = "maximum number of turns reached"
	case r.Subtype == "error_max_budget_usd" && text == "":
		text = "maximum budget reached"
	case text == "" && s.turnErr != "":
		text = s.turnErr // a refusal or stream error said why
	case text == "":
		text = "turn failed (" + r.Subtype + ")"
	}
	if reason == agent.TurnInterrupted {
		d.abortStep(s)
	} else {
		d.finishStep(s, s.curMsg)
	}
	if r.TotalCostUSD != nil && s.lastMsg != "" {
		// total_cost_usd adds up over the agent process: the turn's cost is
		// the growth since the last result, put on the turn's last step.
		cost := *r.TotalCostUSD
		if d.costBase != nil && cost >= *d.costBase {
			cost -= *d.costBase
		}
		d.emit(&agent.Usage{EventBase: d.base(""), Message: s.lastMsg, Cost: &cost})
	}
	if r.TotalCostUSD != nil {
		total := *r.TotalCostUSD
		d.costBase = &total
	}
	if reason == agent.TurnFailed && !s.errEmitted {
		s.errEmitted = true
		d.emit(&agent.AgentError{EventBase: d.base(""), Message: s.lastMsg, Kind: errorKind(r.ResultStatus, "", text),
			Text: text, StatusCode: r.ResultStatus})
	}
	d.closeTurn(s, reason, text)
}

// controlRequest maps an SDK control request: can_use_tool blocks a tool;
// an interrupt sent by the wrapper marks the turn as interrupted.
func (d *Decoder) controlRequest(r *record, dir string) {
	req := r.Request
	if req == nil {
		d.drop("control_request", agent.DropInvalidField, "control_request has no request")
		return
	}
	if dir == string(trafficlog.C2A) {
		switch req.Subtype {
		case "interrupt":
			d.interrupt = true
		case "initialize", "set_permission_mode", "set_model", "set_max_thinking_tokens", "mcp_status", "mcp_message",
			"mcp_set_servers", "mcp_reconnect", "mcp_toggle", "rewind_files", "get_context_usage":
		default:
			d.drop("control_request/"+req.Subtype, agent.DropUnknownType, "control request subtype not known to this version")
		}
		return
	}
	switch req.Subtype {
	case "can_use_tool":
		d.canUseTool(r.RequestID, req)
	case "hook_callback", "mcp_message", "elicitation":
		if r.RequestID != "" {
			d.recent.add("r:" + r.RequestID)
		}
	default:
		d.drop("control_request/"+req.Subtype, agent.DropUnknownType, "control request subtype not known to this version")
	}
}

// canUseTool maps a permission request of a traffic log: the tool is
// blocked on a permission (or, for AskUserQuestion, on a question), and
// the wrapper's answer in a later c2a record resolves it.
func (d *Decoder) canUseTool(rid string, req *controlRequest) {
	if rid == "" {
		d.drop("control_request/can_use_tool", agent.DropMissingID, "can_use_tool has no request_id")
		return
	}
	if callID, _ := d.ask(rid, req, ""); callID != "" {
		d.requests[rid] = callID
	}
}

// ask blocks the call a permission request names and returns its id: the
// call of tool_use_id, else the first open call of the tool with the same
// input, else a call of the request's own (announced first, its id the
// request id), so that every request Claude waits on reaches a person.
// blocked is false when the call was waiting already (no ToolBlocked is
// emitted then). A request for a call that already ended is dropped (late
// ends the detail) and "" returned.
func (d *Decoder) ask(rid string, req *controlRequest, late string) (callID string, blocked bool) {
	callID = req.ToolUseID
	if callID == "" {
		callID = d.matchPending(req.ToolName, req.Input)
	}
	if callID == "" {
		callID = rid
	}
	t := d.tools[callID]
	if t == nil {
		if d.recent.has("t:" + callID) {
			d.drop("control_request/can_use_tool", agent.DropIllegalTransition, "can_use_tool for "+callID+" after the call was settled"+late)
			return "", false
		}
		sess := ""
		if k := d.agents[req.AgentID]; k != "" {
			sess = k
		}
		d.ensureTurn(d.session(sess))
		t = d.addTool(callID, sess, "", req.ToolName, objectOrEmpty(req.Input))
		d.emit(d.toolCall(t)) // the part, with Claude's name of the tool, before it blocks
		t.status = toolRunning
	}
	if t.status == toolBlocked || t.status == toolRejected {
		return callID, false // already waiting: the question was blocked when the call was seen
	}
	input := t.input
	if isObject(req.Input) {
		input = req.Input
	}
	if req.ToolName == "AskUserQuestion" {
		d.block(t, nil, questionRequest(rid, input))
		return callID, true
	}
	d.block(t, permissionRequest(rid, req.ToolName, input, req), nil)
	return callID, true
}

// matchPending finds the first open call of tool name with the same input
// (a request without tool_use_id; identical parallel calls: first in, first
// out).
func (d *Decoder) matchPending(name string, input json.RawMessage) string {
	want, _ := decodeValue(objectOrEmpty(input))
	for _, key := range d.sessionKeys() {
		for _, id := range d.sessions[key].openTools {
			t := d.tools[id]
			if t == nil || t.name != name || (t.status != toolRunning && t.status != toolPending) {
				continue
			}
			if got, err := decodeValue(objectOrEmpty(t.input)); err == nil && jsonEqual(got, want) {
				return id
			}
		}
	}
	return ""
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// controlResponse maps the wrapper's answer to a can_use_tool request
// (c2a): allow → once (always when it adds permissions), deny → reject.
// Anything else is refused, never mapped to allow.
func (d *Decoder) controlResponse(r *record, dir string) {
	resp := r.Response
	if resp == nil {
		d.drop("control_response", agent.DropInvalidField, "control_response has no response")
		return
	}
	if dir != string(trafficlog.C2A) {
		return // the agent's answers to the wrapper's own requests (initialize, …)
	}
	callID, ok := d.requests[resp.RequestID]
	if !ok {
		if !d.recent.has("r:" + resp.RequestID) {
			d.drop("control_response", agent.DropOrphan, "answer to request "+strconv.Quote(resp.RequestID)+" that is not open")
		}
		return
	}
	t := d.tools[callID]
	if t == nil {
		delete(d.requests, resp.RequestID)
		return
	}
	if resp.Subtype == "error" {
		delete(d.requests, resp.RequestID)
		d.resolve(t, &agent.ToolResolved{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
		return
	}
	reply := resp.Response
	if reply == nil {
		d.drop("control_response", agent.DropInvalidField, "permission answer has no response")
		return
	}
	switch reply.Behavior {
	case "allow", "deny":
		delete(d.requests, resp.RequestID)
	}
	switch reply.Behavior {
	case "allow":
		if t.question {
			if answers, ok := questionAnswers(t.input, reply.UpdatedInput); ok {
				d.resolve(t, &agent.ToolResolved{Answers: answers})
				return
			}
		}
		dec := agent.DecisionOnce
		if hasEntries(reply.UpdatedPermissions) {
			dec = agent.DecisionAlways
		}
		d.resolve(t, &agent.ToolResolved{Decision: dec})
	case "deny":
		d.resolve(t, &agent.ToolResolved{Decision: agent.DecisionReject})
	default:
		d.drop("control_response", agent.DropUnknownDecision, "permission behavior "+strconv.Quote(reply.Behavior)+" is neither allow nor deny; the tool stays blocked")
	}
}

// hasEntries reports whether raw is a non-empty JSON array.
func hasEntries(raw json.RawMessage) bool {
	var a []json.RawMessage
	return json.Unmarshal(raw, &a) == nil && len(a) > 0
}

// controlCancel maps Claude withdrawing a permission request.
func (d *Decoder) controlCancel(r *record) {
	callID, ok := d.requests[r.RequestID]
	if !ok {
		return
	}
	delete(d.requests, r.RequestID)
	d.withdraw(callID)
}

// withdraw resolves a call still blocked on a request Claude withdrew:
// rejected, reason cancelled.
func (d *Decoder) withdraw(callID string) {
	if t := d.tools[callID]; t != nil {
		d.resolve(t, &agent.ToolResolved{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
	}
}

// attachment maps the one attachment kind that matters for the transcript:
// a permission decision a PermissionRequest hook made. Other attachments
// are context for the model.
func (d *Decoder) attachment(r *record) {
	a := r.Attachment
	if a == nil {
		d.drop("attachment", agent.DropInvalidField, "attachment record has no attachment")
		return
	}
	if a.Type != "hook_permission_decision" {
		return
	}
	if d.hookAnswered[a.ToolUseID] {
		// The echo of happy's own answer (Observe), which Claude may write
		// after the call's result: recorded already, with its reason.
		delete(d.hookAnswered, a.ToolUseID)
		return
	}
	t := d.tools[a.ToolUseID]
	if t == nil {
		d.drop("attachment/hook_permission_decision", agent.DropOrphan, "permission decision for "+strconv.Quote(a.ToolUseID)+", a call that is not open")
		return
	}
	var dec agent.Decision
	switch a.Decision {
	case "allow":
		dec = agent.DecisionOnce
	case "deny":
		dec = agent.DecisionReject
	default:
		d.drop("attachment/hook_permission_decision", agent.DropUnknownDecision, "hook decision "+strconv.Quote(a.Decision)+" is neither allow nor deny")
		return
	}
	if t.status != toolBlocked {
		if t.status == toolRejected {
			return
		}
		d.block(t, permissionRequest("hook-"+t.callID, t.name, t.input, nil), nil)
	}
	d.resolve(t, &agent.ToolResolved{Decision: dec})
}

// title maps the session title records.
func (d *Decoder) title(r *record) {
	switch r.Type {
	case "custom-title":
		if r.CustomTitle != "" {
			d.customTitle = true
			d.emitInfo(agent.SessionInfo{Title: r.CustomTitle})
		}
	case "ai-title":
		if !d.customTitle && r.AITitle != "" {
			d.emitInfo(agent.SessionInfo{Title: r.AITitle})
		}
	case "summary":
		if !d.customTitle && r.Summary != "" {
			d.emitInfo(agent.SessionInfo{Title: r.Summary})
		}
	}
}

// decodeTraffic maps one traffic log line.
func (d *Decoder) decodeTraffic(line []byte) {
	rec, err := trafficlog.Decode(line)
	if err != nil {
		d.drop(sniffKind(line), trafficlog.DropReason(err), err.Error())
		return
	}
	d.t = rec.T
	switch rec.Dir {
	case trafficlog.A2C, trafficlog.C2A:
		msg := rec.Msg
		if len(msg) == 0 || msg[0] != '{' {
			d.drop(string(rec.Dir), agent.DropNotAnObject, "message is not a JSON object")
			return
		}
		d.decodeRecord(msg, string(rec.Dir))
	case trafficlog.Exit:
		st, err := trafficlog.DecodeExit(rec.Msg)
		if err != nil {
			d.drop("exit", agent.DropInvalidField, err.Error())
			return
		}
		end := EndOfStream{Exited: true, Code: st.Code}
		if st.Sig != nil {
			end.Signal = *st.Sig
		}
		d.exited(end)
	case trafficlog.Stderr, trafficlog.Note:
		// Diagnostics of the agent or the recorder; not transcript content.
	}
}

// c2aPrompt maps a prompt the wrapper wrote to the agent.
func (d *Decoder) c2aPrompt(r *record) {
	if r.Message == nil {
		d.drop("user", agent.DropInvalidField, "prompt has no message")
		return
	}
	blocks, err := r.Message.blocks()
	if err != nil {
		d.drop("user", agent.DropInvalidField, "prompt content: "+err.Error())
	}
	var texts []string
	var files []agent.PromptFile
	for i := range blocks {
		b := &blocks[i]
		switch b.Type {
		case "text":
			texts = append(texts, deref(b.Text))
		case "image", "document":
			if f, ok := mediaFile(b); ok {
				files = append(files, f)
			}
		default:
			d.drop("user/"+b.Type, agent.DropUnknownType, "prompt content block not known to this version")
		}
	}
	id := r.UUID
	if id == "" {
		id = "c2a-" + strconv.FormatInt(d.line, 10)
	}
	d.prompt(d.session(""), id, "", strings.Join(texts, "\n"), files, false)
}

// exited handles the end of the agent process: an open turn ends as
// agent-exited, and cost accounting restarts with the next process.
func (d *Decoder) exited(end EndOfStream) {
	if root := d.session(""); root.turnOpen {
		d.closeTurn(root, agent.TurnAgentExited, exitText(end))
	}
	for _, key := range d.sessionKeys() {
		if s := d.sessions[key]; key != "" {
			d.endChild(key, agent.TurnAgentExited, exitText(end))
			d.closeTurn(s, agent.TurnAgentExited, exitText(end))
		}
	}
	d.costBase = nil
	d.interrupt = false
}
