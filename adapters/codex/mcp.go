package codex

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// MCPDecoder maps `codex mcp-server` traffic (Codex up to 0.153: MCP over
// stdio, a tools/call of "codex" or "codex-reply" per prompt, progress as
// codex/event notifications, approvals as elicitation/create requests) to
// agent events. Like AppServerDecoder it is fed both directions and is
// deterministic. Not safe for concurrent use.
type MCPDecoder struct {
	n int64

	turns    map[string]*mcpTurn // by request key (the tools/call id)
	cur      *mcpTurn            // the turn that started last
	next     *mcpTurn            // the turn whose start is awaited (its tools/call went out, or keyless events came)
	nturns   int
	calls    map[string]*call
	sent     map[string]string // our tools/call ids → tool name
	received map[string]*srvReq
	prompts  map[string]bool // prompt ids emitted

	approvals map[string]mcpMsg // approval events by call id, until their elicitation
	correl    MCPApprovals      // names the call of each elicitation, as the live client does
}

type mcpTurn struct {
	key      string
	id       string // turn id given by Codex, else the key
	open     bool
	ended    bool
	text     string // current agent text block ("" = none open)
	nText    int
	reason   string
	nReason  int
	retries  int
	prompted bool // a user prompt was shown for this turn
}

// NewMCPDecoder returns a decoder with no state.
func NewMCPDecoder() *MCPDecoder {
	return &MCPDecoder{
		turns: map[string]*mcpTurn{}, calls: map[string]*call{}, sent: map[string]string{},
		received: map[string]*srvReq{}, prompts: map[string]bool{}, approvals: map[string]mcpMsg{},
	}
}

func (d *MCPDecoder) drop(o *out, kind string, reason agent.DropReason, detail string, raw []byte) {
	o.add(dropped(SourceMCP, d.n, o.t, kind, reason, detail, raw))
}

// Decode implements Decoder.
func (d *MCPDecoder) Decode(f jsonrpc.Frame) []agent.Event {
	d.n++
	o := &out{t: f.T}
	switch f.Dir {
	case trafficlog.A2C:
		if s, ok := f.Text(); ok {
			d.drop(o, "", agent.DropUnparseableJSON, "agent wrote a line that is not JSON", []byte(s))
			break
		}
		if !f.HasMsg() {
			kind, reason, detail := jsonrpc.DropOf(f.Err)
			d.drop(o, kind, reason, detail, f.Data)
			break
		}
		m := f.Msg
		switch m.Kind {
		case jsonrpc.KindNotification:
			d.notification(o, m)
		case jsonrpc.KindRequest:
			d.request(o, m)
		case jsonrpc.KindResponse:
			d.response(o, m)
		}
	case trafficlog.C2A:
		d.c2a(o, f)
	case trafficlog.Exit:
		keys := make([]string, 0, len(d.turns))
		for k := range d.turns {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			d.endTurn(o, d.turns[k], agent.TurnAgentExited, "codex exited")
		}
	case trafficlog.Note:
		var n happyNote
		if json.Unmarshal(f.Data, &n) == nil && n.Happy == noteAbandoned {
			for _, t := range d.turns {
				if t.id == n.TurnID || t.key == n.TurnID {
					d.endTurn(o, t, agent.TurnInterrupted, "codex never ended the turn: "+n.Reason)
				}
			}
		}
	case trafficlog.Stderr:
	default:
		d.drop(o, string(f.Dir), agent.DropUnknownType, "unknown traffic direction", f.Data)
	}
	return o.ev
}

// turnFor finds the turn of a request key, creating it. An event without
// a request id (Codex before _meta.requestId) belongs to the turn that is
// open, else to the turn about to start (the last tools/call sent, or the
// turn earlier keyless events began), else to a new one that the next
// keyless events join too.
func (d *MCPDecoder) turnFor(key string) *mcpTurn {
	if key == "" {
		switch {
		case d.cur != nil && d.cur.open:
			return d.cur
		case d.next != nil && !d.next.open && !d.next.ended:
			return d.next
		}
		d.nturns++
		key = fmt.Sprintf("turn#%d", d.nturns)
	}
	t := d.turns[key]
	if t == nil {
		t = &mcpTurn{key: key, id: key}
		d.turns[key] = t
	}
	if !t.open && !t.ended {
		d.next = t
	}
	return t
}

func (d *MCPDecoder) startTurn(o *out, t *mcpTurn, id string) {
	if t.open || t.ended {
		return
	}
	if id != "" {
		t.id = id
	}
	if d.cur != nil && d.cur != t && d.cur.open {
		d.endTurn(o, d.cur, agent.TurnTruncated, "a new turn started before this one ended")
	}
	t.open = true
	d.cur = t
	if d.next == t {
		d.next = nil
	}
	o.add(&agent.TurnStarted{TurnID: t.id})
}

func (d *MCPDecoder) endTurn(o *out, t *mcpTurn, reason, msg string) {
	if t == nil || !t.open {
		return
	}
	t.open, t.ended = false, true
	for k, c := range d.calls {
		if !c.done {
			delete(d.calls, k)
		}
	}
	o.add(&agent.TurnEnded{TurnID: t.id, Reason: reason, Error: msg})
}

// ignoredEvent says why a codex/event kind is deliberately not shown.
func ignoredEvent(kind string) (string, bool) {
	switch kind {
	case "mcp_startup_update":
		return "MCP server startup progress", true
	case "mcp_startup_complete":
		return "MCP server startup progress", true
	case "mcp_list_tools_response":
		return "answer to a request happy does not send", true
	case "list_custom_prompts_response":
		return "answer to a request happy does not send", true
	case "get_history_entry_response":
		return "answer to a request happy does not send", true
	case "raw_response_item":
		return "model-facing copy of items shown by their own events", true
	case "raw_response_completed":
		return "model response boundary; token_count carries usage", true
	case "turn_diff":
		return "aggregate diff; patch events carry each change", true
	case "background_event":
		return "diagnostic", true
	case "warning":
		return "diagnostic", true
	case "deprecation_notice":
		return "diagnostic", true
	case "shutdown_complete":
		return "process lifecycle; the exit record ends open turns", true
	case "conversation_path":
		return "rollout file location", true
	case "terminal_interaction":
		return "stdin written to a running command; its output follows", true
	case "reasoning_content_delta":
		return "duplicate of agent_reasoning_delta", true
	case "reasoning_raw_content_delta":
		return "duplicate of agent_reasoning_raw_content_delta", true
	case "entered_review_mode":
		return "mode marker", true
	case "undo_started":
		return "undo progress", true
	case "undo_completed":
		return "undo progress", true
	case "item_updated":
		return "items duplicate the legacy events shown", true
	}
	return "", false
}

type mcpEvent struct {
	Meta struct {
		RequestID json.RawMessage `json:"requestId"`
		ThreadID  string          `json:"threadId"`
	} `json:"_meta"`
	ID  string          `json:"id"`
	Msg json.RawMessage `json:"msg"`
}

type mcpMsg struct {
	Type string `json:"type"`
	// session_configured
	SessionID string `json:"session_id"`
	ThreadID  string `json:"thread_id"`
	Model     string `json:"model"`
	Provider  string `json:"model_provider_id"`
	Cwd       string `json:"cwd"`
	// task_started / task_complete / turn_aborted
	TurnID string `json:"turn_id"`
	Reason string `json:"reason"`
	// user_message, agent_message, error
	Message string `json:"message"`
	Images  []string
	// deltas
	Delta  string `json:"delta"`
	ItemID string `json:"item_id"`
	Text   string `json:"text"`
	// items
	Item json.RawMessage `json:"item"`
	// exec
	CallID    string          `json:"call_id"`
	Command   json.RawMessage `json:"command"`
	Stream    string          `json:"stream"`
	Chunk     json.RawMessage `json:"chunk"`
	Stdout    string          `json:"stdout"`
	Stderr    string          `json:"stderr"`
	Aggregate *string         `json:"aggregated_output"`
	ExitCode  *int64          `json:"exit_code"`
	Duration  json.RawMessage `json:"duration"`
	Parsed    json.RawMessage `json:"parsed_cmd"`
	// patches
	Changes   map[string]json.RawMessage `json:"changes"`
	Success   *bool                      `json:"success"`
	GrantRoot *string                    `json:"grant_root"`
	// mcp tools
	Invocation struct {
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"invocation"`
	Result json.RawMessage `json:"result"`
	// web search, image view
	Query string `json:"query"`
	Path  string `json:"path"`
	// usage
	Info *struct {
		Last *tokenBreakdown `json:"last_token_usage"`
	} `json:"info"`
	// plan
	Plan []struct {
		Step   string `json:"step"`
		Status string `json:"status"`
	} `json:"plan"`
	// errors
	ErrorInfo json.RawMessage `json:"codex_error_info"`
	// review
	ReviewOutput json.RawMessage `json:"review_output"`
}

func (d *MCPDecoder) notification(o *out, m jsonrpc.Message) {
	switch m.Method {
	case "codex/event":
		d.correl.Event(m.Params)
	case "notifications/message", "notifications/progress", "notifications/tools/list_changed",
		"notifications/resources/list_changed", "notifications/prompts/list_changed", "notifications/cancelled":
		return // MCP housekeeping
	default:
		d.drop(o, m.Method, agent.DropUnknownType, "notification unknown to this version", m.Raw)
		return
	}
	var ev mcpEvent
	if json.Unmarshal(m.Params, &ev) != nil || len(ev.Msg) == 0 || ev.Msg[0] != '{' {
		d.drop(o, m.Method, agent.DropInvalidField, "codex/event without msg object", m.Raw)
		return
	}
	var msg mcpMsg
	if err := json.Unmarshal(ev.Msg, &msg); err != nil || msg.Type == "" {
		d.drop(o, "codex/event", agent.DropInvalidField, "msg without type", m.Raw)
		return
	}
	kind := "codex/event:" + msg.Type
	if _, ok := ignoredEvent(msg.Type); ok {
		return
	}
	handle := mcpEvents[msg.Type]
	if handle == nil {
		d.drop(o, kind, agent.DropUnknownType, "codex/event type unknown to this version", m.Raw)
		return
	}
	handle(d, event{o: o, t: d.turnFor(requestKey(ev.Meta.RequestID)), msg: msg, kind: kind, raw: m.Raw})
}

// item maps item_started/item_completed: only user and agent messages;
// every other item type duplicates a legacy event mapped above.
func (d *MCPDecoder) item(o *out, t *mcpTurn, msg mcpMsg, raw []byte) {
	var it struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(msg.Item, &it) != nil {
		d.drop(o, "codex/event:"+msg.Type, agent.DropInvalidField, "item is not an object", raw)
		return
	}
	var texts []string
	for _, c := range it.Content {
		if strings.EqualFold(c.Type, "text") {
			texts = append(texts, c.Text)
		}
	}
	switch it.Type {
	case "UserMessage":
		if t.prompted || it.ID == "" {
			return
		}
		t.prompted = true
		o.add(&agent.UserPrompt{PromptID: it.ID, Text: strings.Join(texts, "\n\n")})
	case "AgentMessage":
		if it.ID == "" {
			return
		}
		t.text = it.ID
		if msg.Type == "item_completed" && len(texts) > 0 && strings.Join(texts, "") != "" {
			o.add(&agent.TextFinal{Block: it.ID, Text: strings.Join(texts, "")})
		}
	}
}

// approval maps an approval request (codex/event or elicitation): the
// tool part becomes blocked, once.
func (d *MCPDecoder) approval(o *out, msg mcpMsg, kind string, raw []byte, reqKey string) {
	edit := strings.Contains(msg.Type, "patch")
	tool := agent.ToolBash
	if edit {
		tool = agent.ToolEdit
	}
	c := d.call(msg.CallID, tool)
	if c == nil {
		d.drop(o, kind, agent.DropMissingID, "approval without call id", raw)
		return
	}
	if reqKey != "" {
		d.received[reqKey] = &srvReq{method: "elicitation/create", callID: c.id}
	}
	if c.blocked || c.done {
		return
	}
	meta := agent.Object{}
	if msg.Reason != "" {
		meta["reason"] = msg.Reason
	}
	var perm *agent.PermissionRequest
	if edit {
		_, pmeta, paths := patchDetail(msg.Changes)
		if len(paths) == 0 {
			paths = c.paths
		}
		for k, v := range pmeta {
			meta[k] = v
		}
		if msg.GrantRoot != nil {
			meta["grantRoot"] = *msg.GrantRoot
		}
		if !c.shown {
			ups := patchUpdates(msg.Changes)
			tool, input := patchTool(ups)
			if len(ups) == 0 && len(paths) > 0 {
				input = agent.EncodeInput(agent.EditInput{Path: paths[0]})
			}
			c.tool = tool
			d.announce(o, c, strings.Join(paths, ", "), input,
				agent.ToolMetadata("patch_apply", mustObject(map[string]any{"changes": msg.Changes}), input))
		}
		perm = &agent.PermissionRequest{Permission: c.tool, Patterns: paths, Always: paths, Metadata: meta}
	} else {
		cmd, wrapped := UserCommand(msg.Command)
		if msg.Cwd != "" {
			meta["cwd"] = strings.TrimPrefix(msg.Cwd, "file://")
		}
		if wrapped != "" {
			meta["rawCommand"] = wrapped
		}
		var patterns []string
		if cmd != "" {
			patterns = []string{cmd}
		}
		perm = &agent.PermissionRequest{Permission: agent.ToolBash, Patterns: patterns, Always: patterns, Metadata: meta}
		if !c.shown {
			in, tmeta := shellCall("exec_command", cmd, wrapped, strings.TrimPrefix(msg.Cwd, "file://"))
			d.announce(o, c, cmd, in, tmeta)
		}
	}
	if c.synth {
		perm.Metadata["uncorrelatedApproval"] = true
	}
	c.blocked = true
	o.add(&agent.ToolBlocked{CallID: c.id, Tool: c.tool, Permission: perm})
}

// approvalInput is the input (and title) of a call known only from its
// approval: {"command", "cwd"?} for a command, {"paths"} for a patch
// (paths when the approval lists no changes).
func approvalInput(msg mcpMsg, paths []string) (json.RawMessage, string) {
	if strings.Contains(msg.Type, "patch") {
		if _, _, p := patchDetail(msg.Changes); len(p) > 0 {
			paths = p
		}
		return mustObject(map[string]any{"paths": paths}), strings.Join(paths, ", ")
	}
	cmd, _ := UserCommand(msg.Command)
	in := map[string]any{"command": cmd}
	if msg.Cwd != "" {
		in["cwd"] = strings.TrimPrefix(msg.Cwd, "file://")
	}
	return mustObject(in), cmd
}

func (d *MCPDecoder) request(o *out, m jsonrpc.Message) {
	key := idString(mustObject(m.ID))
	if m.Method != "elicitation/create" {
		d.drop(o, m.Method, agent.DropUnknownType, "server request unknown to this version", m.Raw)
		return
	}
	p, err := ParseElicitation(m.Params)
	if err != nil {
		d.drop(o, m.Method, agent.DropInvalidField, err.Error(), m.Raw)
		return
	}
	// Named the way the live client names it (the same MCPApprovals fed
	// the same frames), before anything else can refuse the request.
	callID, synthesized := d.correl.Call(p)
	if r := d.received[key]; r != nil && !r.answered {
		// A second request under the id of one still waiting: keep the
		// first (its answer is matched by id), refuse this one.
		d.drop(o, m.Method, agent.DropInvalidField, "request id "+key+" is already pending", m.Raw)
		return
	}
	typ := "exec_approval_request"
	switch p.Kind {
	case "exec-approval":
	case "patch-approval":
		typ = "apply_patch_approval_request"
	default:
		d.drop(o, m.Method, agent.DropUnknownType, "elicitation kind "+p.Kind+" unknown to this version", m.Raw)
		d.received[key] = &srvReq{method: m.Method}
		return
	}
	msg := mcpMsg{Type: typ, CallID: callID, Command: p.Command, Cwd: p.Cwd, Reason: p.Reason, Changes: p.Changes, GrantRoot: p.GrantRoot}
	if ev, ok := d.approvals[callID]; ok {
		delete(d.approvals, callID)
		if len(msg.Command) == 0 {
			msg.Command = ev.Command
		}
		if msg.Cwd == "" {
			msg.Cwd = ev.Cwd
		}
		if msg.Reason == "" {
			msg.Reason = ev.Reason
		}
		if len(msg.Changes) == 0 {
			msg.Changes = ev.Changes
		}
		if msg.GrantRoot == nil {
			msg.GrantRoot = ev.GrantRoot
		}
	}
	if synthesized {
		// No call happy knows is named: the approval still goes to a
		// person, on a tool part of its own, which completes once approved.
		c := d.call(callID, "bash")
		if typ == "apply_patch_approval_request" {
			c.tool = "edit"
		}
		c.synth = true
		meta := agent.Object{"uncorrelatedApproval": true}
		if p.EventID != "" {
			meta["codexEventId"] = p.EventID
		}
		input, title := approvalInput(msg, nil)
		d.announce(o, c, title, input, meta)
	}
	d.approval(o, msg, m.Method, m.Raw, key)
}

func (d *MCPDecoder) response(o *out, m jsonrpc.Message) {
	key := requestKey(mustObject(m.ID))
	if _, ok := d.sent[key]; !ok {
		return
	}
	delete(d.sent, key)
	t := d.turns[key]
	if t == nil || t.ended {
		// B13: a late reply to a turn already closed is discarded.
		return
	}
	if m.Error != nil {
		if !t.open {
			o.add(&agent.AgentError{Kind: agent.ErrorProtocol, Text: "codex tools/call failed: " + m.Error.Message})
			return
		}
		d.endTurn(o, t, agent.TurnFailed, m.Error.Message)
		return
	}
	var r struct {
		Content []json.RawMessage `json:"content"`
		IsError *bool             `json:"isError"`
	}
	_ = json.Unmarshal(m.Result, &r)
	if !t.open {
		d.startTurn(o, t, "")
	}
	if r.IsError != nil && *r.IsError {
		d.endTurn(o, t, agent.TurnFailed, contentText(r.Content))
		return
	}
	d.endTurn(o, t, agent.TurnCompleted, "")
}

func (d *MCPDecoder) c2a(o *out, f jsonrpc.Frame) {
	if !f.HasMsg() {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(o, kind, reason, "own frame: "+detail, f.Data)
		return
	}
	m := f.Msg
	key := idString(mustObject(m.ID))
	switch m.Kind {
	case jsonrpc.KindRequest:
		if m.Method != "tools/call" {
			return
		}
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(m.Params, &p)
		key := requestKey(mustObject(m.ID))
		d.sent[key] = p.Name
		t := d.turnFor(key)
		var args struct {
			Arguments struct {
				Prompt string `json:"prompt"`
			} `json:"arguments"`
		}
		_ = json.Unmarshal(m.Params, &args)
		if !t.prompted && args.Arguments.Prompt != "" {
			t.prompted = true
			o.add(&agent.UserPrompt{PromptID: "user:" + key, Text: args.Arguments.Prompt})
		}
	case jsonrpc.KindResponse:
		r := d.received[key]
		if r == nil || r.answered {
			return
		}
		r.answered = true
		if r.callID == "" {
			return
		}
		c := d.calls[r.callID]
		if m.Error != nil {
			if c != nil {
				c.blocked = false
			}
			o.add(&agent.ToolResolved{CallID: r.callID, Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
			return
		}
		var res struct {
			Decision json.RawMessage `json:"decision"`
		}
		_ = json.Unmarshal(m.Result, &res)
		dec, reason, ok := decision(res.Decision)
		if !ok {
			r.answered = false
			d.drop(o, "decision", agent.DropUnknownDecision, "answer "+string(res.Decision)+" is not a known decision", f.Data)
			return
		}
		if c != nil {
			c.blocked = false
			c.running = dec != agent.DecisionReject
		}
		o.add(&agent.ToolResolved{CallID: r.callID, Decision: dec, Reason: reason})
		if c != nil && c.synth && dec != agent.DecisionReject {
			// The part stood for the approval alone: it is done.
			d.complete(o, c, "", nil)
		}
	}
}

func (d *MCPDecoder) call(id, tool string) *call {
	if id == "" {
		return nil
	}
	c := d.calls[id]
	if c == nil {
		c = &call{id: id, tool: tool}
		d.calls[id] = c
	}
	if c.tool == "" {
		c.tool = tool
	}
	return c
}

func (d *MCPDecoder) announce(o *out, c *call, title string, input json.RawMessage, meta agent.Object) {
	if c.shown && (input == nil || string(input) == string(c.input)) && !newMembers(c.meta, meta) {
		return
	}
	c.shown = true
	if input != nil {
		c.input = input
	}
	c.meta = mergeMeta(c.meta, meta)
	if len(meta) == 0 {
		meta = nil
	}
	o.add(&agent.ToolCall{CallID: c.id, Tool: c.tool, Title: title, Input: input, Metadata: meta})
}

func (d *MCPDecoder) run(o *out, c *call) {
	if c.running || c.blocked || c.done {
		return
	}
	c.running = true
	o.add(&agent.ToolRunning{CallID: c.id})
}

func (d *MCPDecoder) complete(o *out, c *call, output string, meta agent.Object) {
	if c.done {
		return
	}
	d.run(o, c)
	c.done = true
	if len(meta) == 0 {
		meta = nil
	}
	o.add(&agent.ToolCompleted{CallID: c.id, Output: output, Metadata: meta})
	delete(d.calls, c.id)
}

func (d *MCPDecoder) fail(o *out, c *call, msg string, meta agent.Object) {
	if c.done {
		return
	}
	c.done = true
	if len(meta) == 0 {
		meta = nil
	}
	o.add(&agent.ToolFailed{CallID: c.id, Error: msg, Metadata: meta})
	delete(d.calls, c.id)
}

// durationMs reads a Rust Duration ({"secs","nanos"}) or a Go-style
// duration string ("5ms").
func durationMs(raw json.RawMessage) (int64, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, false
	}
	var d struct {
		Secs  *int64 `json:"secs"`
		Nanos int64  `json:"nanos"`
	}
	if json.Unmarshal(raw, &d) == nil && d.Secs != nil {
		return *d.Secs*1000 + d.Nanos/1_000_000, true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if v, err := time.ParseDuration(s); err == nil {
			return v.Milliseconds(), true
		}
	}
	return 0, false
}

// patchDetail renders the legacy changes map {path: {add:{content}} |
// {delete:{…}} | {update:{unified_diff, move_path}}} like fileChangeDetail.
func patchDetail(changes map[string]json.RawMessage) (json.RawMessage, agent.Object, []string) {
	return fileChangeDetail(patchUpdates(changes))
}

// patchUpdates reads a patch's changes ({path: {add: {content}} |
// {delete: {content}} | {update: {unified_diff, move_path}}}) as file
// updates, in path order; an added file's content becomes added lines.
func patchUpdates(changes map[string]json.RawMessage) []fileUpdate {
	paths := make([]string, 0, len(changes))
	for p := range changes {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	ups := make([]fileUpdate, 0, len(paths))
	for _, p := range paths {
		var ch map[string]struct {
			Content  string  `json:"content"`
			Diff     string  `json:"unified_diff"`
			MovePath *string `json:"move_path"`
		}
		_ = json.Unmarshal(changes[p], &ch)
		u := fileUpdate{Path: p}
		for k, v := range ch {
			kind := map[string]any{"type": k}
			if v.MovePath != nil {
				kind["move_path"] = *v.MovePath
			}
			u.Kind = mustObject(kind)
			u.Diff = v.Diff
			if k == "add" && v.Content != "" {
				u.Diff = addDiff(v.Content)
			}
		}
		ups = append(ups, u)
	}
	return ups
}

// addDiff renders a new file's content as added lines.
func addDiff(content string) string {
	lines := strings.SplitAfter(content, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		b.WriteString("+" + l)
	}
	return b.String()
}

// requestKey names the turn of a tools/call by its request id
// ("tools/call#9"); "" when there is no id.
func requestKey(raw json.RawMessage) string {
	if id := idString(raw); id != "" {
		return "tools/call#" + id
	}
	return ""
}
