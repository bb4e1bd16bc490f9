package acp

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// sessionUpdate decodes a session/update notification.
func (d *Decoder) sessionUpdate(m jsonrpc.Message) {
	p, ok := members(m.Params)
	if !ok {
		d.drop(m.Method, agent.DropInvalidField, "params is not a SessionNotification object", m.Raw)
		return
	}
	sid, ok := str(p.get("sessionId"))
	if !ok || sid == "" {
		d.drop(m.Method, agent.DropMissingID, "session/update without sessionId", m.Raw)
		return
	}
	if !d.sessions[sid] {
		d.drop(m.Method, agent.DropOrphan, "session "+strconv.Quote(sid)+" was never opened", m.Raw)
		return
	}
	u, ok := members(p.get("update"))
	if !ok {
		d.drop(m.Method, agent.DropInvalidField, "update is not an object", m.Raw)
		return
	}
	kind, ok := str(u.get("sessionUpdate"))
	if !ok {
		d.drop(m.Method, agent.DropInvalidField, "update without a sessionUpdate string", m.Raw)
		return
	}
	k := "session/update:" + kind
	if d.skipping && historyKinds[kind] {
		// The conversation a load replays is in the transcript already.
		d.skipped++
		return
	}
	prev := d.lastKind
	d.lastKind = kind
	switch kind {
	case "user_message_chunk":
		d.userChunk(k, u, prev, m.Raw)
	case "agent_message_chunk", "agent_thought_chunk":
		d.agentChunk(k, kind == "agent_thought_chunk", u, m.Raw)
	case "tool_call", "tool_call_update":
		d.toolUpdate(k, kind == "tool_call", u, m.Raw)
	case "plan":
		d.plan(k, u, m.Raw)
	case "available_commands_update":
		// The agent's slash commands: nothing in the transcript shows them.
		if _, ok := array(u.get("availableCommands")); !ok {
			d.drop(k, agent.DropInvalidField, "availableCommands is not an array", m.Raw)
		}
	case "current_mode_update":
		id, ok := str(u.get("currentModeId"))
		if !ok {
			d.drop(k, agent.DropInvalidField, "currentModeId is not a string", m.Raw)
			return
		}
		d.emit(&agent.SessionInfo{Agent: id})
	case "config_option_update":
		info := &agent.SessionInfo{}
		if u.get("configOptions") == nil || !d.configOptions(info, u.get("configOptions")) {
			d.drop(k, agent.DropInvalidField, "configOptions is not an array", m.Raw)
			return
		}
		if info.Agent != "" || info.ModelID != "" {
			d.emit(info)
		}
	case "session_info_update":
		// A null title would clear it; the transcript keeps the last one.
		if title, ok := str(u.get("title")); ok && title != "" {
			d.emit(&agent.SessionInfo{Title: title})
		}
	case "usage_update":
		d.usage(k, u, m.Raw)
	default:
		d.drop(k, agent.DropUnknownType, "unknown session update kind", m.Raw)
	}
}

// historyKinds are the updates a session/load replays the conversation
// with; the session's state (modes, commands, config, title) is not history
// and is read during a load too.
var historyKinds = map[string]bool{"user_message_chunk": true, "agent_message_chunk": true, "agent_thought_chunk": true,
	"tool_call": true, "tool_call_update": true, "plan": true, "usage_update": true}

// SkippedHistory reports how many replayed updates were left out since it
// was last called and starts the count again. They are the history
// updates (chunks, tool calls, plans, usage) from a session/load that
// follows a history-known note until the next session/prompt: the
// conversation the transcript holds already (see docs/ARCHITECTURE.md,
// resume).
func (d *Decoder) SkippedHistory() int {
	n := d.skipped
	d.skipped = 0
	return n
}

// inTurnOrLoad reports whether turn-scoped output is expected now; when it
// is not, the update is dropped as an orphan (a late chunk after the turn
// ended must not reopen it).
func (d *Decoder) inTurnOrLoad(kind string, raw []byte) bool {
	if d.turn != nil || d.loading {
		return true
	}
	d.drop(kind, agent.DropOrphan, "output outside a prompt turn", raw)
	return false
}

func (d *Decoder) chunkBlock(kind string, u obj, raw []byte) (contentBlock, string, bool) {
	if u.get("content") == nil {
		d.drop(kind, agent.DropInvalidField, "chunk without content", raw)
		return contentBlock{}, "", false
	}
	b, err := decodeBlock(u.get("content"))
	if err != nil {
		reason := agent.DropInvalidField
		if errors.Is(err, errUnknownContent) {
			reason = agent.DropUnknownType
		}
		d.drop(kind, reason, err.Error(), raw)
		return contentBlock{}, "", false
	}
	msgID, _ := str(u.get("messageId")) // default on error: absent
	return b, msgID, true
}

// userChunk: during a prompt turn the agent echoes the prompt happy sent
// (already recorded); during session/load it replays the history, and
// consecutive user chunks make one prompt.
func (d *Decoder) userChunk(kind string, u obj, prev string, raw []byte) {
	b, _, ok := d.chunkBlock(kind, u, raw)
	if !ok {
		return
	}
	if d.turn != nil {
		return
	}
	if !d.loading {
		d.drop(kind, agent.DropOrphan, "user message outside a prompt turn or a session load", raw)
		return
	}
	if d.replay == nil {
		d.replay = &loadReplay{}
	}
	r := d.replay
	if prev != "user_message_chunk" || r.key == "" {
		r.seq++
		r.key = "load-" + strconv.Itoa(r.seq)
		r.text.Reset()
		r.files = nil
	}
	if b.Type == "text" {
		r.text.WriteString(b.Text)
	} else if f, ok := b.promptFile(); ok {
		r.files = append(r.files, f)
	}
	d.turnStep, d.stepResult = false, false
	d.emit(&agent.UserPrompt{PromptID: r.key, Text: r.text.String(), Files: slices.Clone(r.files)})
}

func (d *Decoder) agentChunk(kind string, thought bool, u obj, raw []byte) {
	b, msgID, ok := d.chunkBlock(kind, u, raw)
	if !ok || !d.inTurnOrLoad(kind, raw) {
		return
	}
	text := b.markdown()
	if text == "" {
		return // an empty chunk carries nothing (claude-code-acp opens each message with one)
	}
	d.beginOutput()
	if thought {
		d.emit(&agent.ReasoningDelta{Block: msgID, Delta: text})
	} else {
		d.emit(&agent.TextDelta{Block: msgID, Delta: text})
	}
	d.flushUsage(false)
}

// validKinds are the ToolKind values of the schema.
// Each maps to itself, the string kept (see enum).
var validKinds = selfMap("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other")

// validStatus are the ToolCallStatus values of the schema, each mapped to
// itself.
var validStatus = selfMap("pending", "in_progress", "completed", "failed")

// selfMap maps each of keys to itself.
func selfMap(keys ...string) map[string]string {
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = k
	}
	return m
}

// mergeTool applies the fields of a ToolCall or ToolCallUpdate to tl.
// Fields the schema lets a reader default on error (kind, status, content
// and location items) are defaulted or skipped; each skipped item is
// recorded as a Dropped.
func (d *Decoder) mergeTool(kind string, tl *tool, u obj) {
	if s, ok := str(u.get("title")); ok {
		tl.title = s
		if !tl.merged {
			tl.firstTitle = s
		}
	}
	tl.merged = true
	if meta, ok := members(u.get("_meta")); ok {
		if cc, ok := members(meta.get("claudeCode")); ok {
			if name, ok := str(cc.get("toolName")); ok && name != "" {
				tl.metaTool = name
			}
		}
	}
	if s, ok := enum(u.get("kind"), validKinds); ok {
		tl.kind = s
	}
	if s, ok := enum(u.get("status"), validStatus); ok {
		tl.status = s
	}
	if raw := u.get("rawInput"); !isNull(raw) {
		tl.rawInput = raw
	}
	if raw := u.get("rawOutput"); !isNull(raw) {
		tl.rawOutput = raw
	}
	if raw := u.get("content"); !isNull(raw) {
		if items, ok := array(raw); !ok {
			d.drop(kind, agent.DropInvalidField, "tool content is not an array", raw)
		} else {
			// Content that comes with (or after) the tool's start is its
			// output; before that, agents put a description there.
			st, _ := enum(u.get("status"), validStatus) // only the schema's statuses count below
			tl.outContent = tl.running || st == "in_progress" || st == "completed" || st == "failed"
			tl.content = nil
			for _, it := range items {
				c, err := decodeToolContent(it)
				if err != nil {
					reason := agent.DropInvalidField
					if errors.Is(err, errUnknownContent) {
						reason = agent.DropUnknownType
					}
					d.drop(kind+":content", reason, err.Error(), it)
					continue
				}
				tl.content = append(tl.content, c)
			}
			tl.noteHints()
		}
	}
	if raw := u.get("locations"); !isNull(raw) {
		if items, ok := array(raw); !ok {
			d.drop(kind, agent.DropInvalidField, "locations is not an array", raw)
		} else {
			tl.locations = nil
			for _, it := range items {
				m, ok := members(it)
				path, okp := str(m.get("path"))
				if !ok || !okp {
					d.drop(kind+":location", agent.DropInvalidField, "location needs a path", it)
					continue
				}
				l := location{Path: path}
				if line, ok := int64Of(m.get("line")); ok && line >= 0 {
					l.Line = &line
				}
				tl.locations = append(tl.locations, l)
			}
		}
	}
}

// toolFor returns the tool of an ACP tool call id in the current turn's
// scope, creating it. A call id the agent reuses in a later turn gets a
// new canonical call id (B18: parts are scoped per turn, so unrelated
// calls are not merged).
func (d *Decoder) toolFor(acpID string) (*tool, bool) {
	if tl := d.tools[acpID]; tl != nil {
		return tl, false
	}
	callID := acpID
	for n := 2; d.callIDs.has(callID); n++ {
		callID = acpID + "#" + strconv.Itoa(n)
	}
	d.callIDs.add(callID)
	d.toolSeq++
	tl := &tool{acpID: acpID, callID: callID, seq: d.toolSeq}
	d.tools[acpID] = tl
	return tl, true
}

func (d *Decoder) sortedTools() []*tool {
	out := make([]*tool, 0, len(d.tools))
	for _, tl := range d.tools {
		out = append(out, tl)
	}
	slices.SortFunc(out, func(a, b *tool) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

func (d *Decoder) toolUpdate(kind string, announce bool, u obj, raw []byte) {
	id, ok := str(u.get("toolCallId"))
	if !ok || id == "" {
		d.drop(kind, agent.DropMissingID, "tool call without toolCallId", raw)
		return
	}
	if !d.inTurnOrLoad(kind, raw) {
		return
	}
	tl, created := d.toolFor(id)
	if created && tl.kind == "" {
		tl.kind = "other"
	}
	d.mergeTool(kind, tl, u)
	if created && announce && tl.status == "" {
		tl.status = "pending"
	}
	if created {
		d.beginOutput()
	}
	d.announce(tl, !created && (tl.status == "completed" || tl.status == "failed"))
	d.advance(tl)
	if created {
		d.flushUsage(false)
	}
}

// partMeta is the tool's part metadata: where it works (its locations, as
// their JSON text), what it showed while pending (its description), the
// diffs it proposed and the files happy wrote for it, and the terminals
// it embeds; nil when it has none of them.
func (d *Decoder) partMeta(tl *tool) agent.Object {
	m := map[string]any{}
	if !tl.outContent {
		if desc := tl.text(); desc != "" {
			m["description"] = desc
		}
	}
	if v, ok := diffsValue(tl); ok {
		m["diffs"] = v
	}
	if ids := tl.terminalIDs(); len(ids) > 0 {
		m["terminals"] = ids
	}
	var locs json.RawMessage
	if len(tl.locations) > 0 {
		locs = metaText(tl.locations)
	}
	if len(m) == 0 {
		return withOpaque(nil, "locations", locs)
	}
	return withOpaque(toObject(m), "locations", locs)
}

// text renders the tool's content blocks (text, images as Markdown).
func (tl *tool) text() string {
	var parts []string
	for _, c := range tl.content {
		if c.Type == "content" && c.Block.Type != "image" {
			if s := c.Block.markdown(); s != "" {
				parts = append(parts, s)
			}
		}
	}
	return strings.Join(parts, "\n")
}

func (tl *tool) diffs() []agent.FileDiff {
	var out []agent.FileDiff
	for _, c := range tl.content {
		if c.Type == "diff" {
			out = append(out, fileDiff(c.Path, c.OldText, c.NewText))
		}
	}
	return append(out, tl.writes...)
}

func (tl *tool) terminalIDs() []string {
	var out []string
	for _, c := range tl.content {
		if c.Type == "terminal" {
			out = append(out, c.TerminalID)
		}
	}
	return out
}

// announce emits the tool's ToolCall when what it says changed. A settled
// tool's announcement does not change any more. For a tool that finishes
// with this update (finishing), only its name, title and input count: its
// metadata goes with the result. It returns the tool's canonical name and
// input when it computed them (ok: the tool is not settled).
func (d *Decoder) announce(tl *tool, finishing bool) (name string, input json.RawMessage, ok bool) {
	if tl.settled {
		return "", nil, false
	}
	name, input, meta := d.canonical(tl)
	maps.Copy(meta, d.partMeta(tl))
	ev := &agent.ToolCall{CallID: tl.callID, Tool: name, Title: tl.title, Input: input, Metadata: meta}
	full := announcementJSON(ev)
	if tl.ann.done && (full == tl.ann.full || finishing && headJSON(ev) == tl.ann.head) {
		return name, input, true // it repeats what the last one said
	}
	tl.ann = announcement{done: true, full: full, head: headJSON(ev)}
	d.emit(ev)
	return name, input, true
}

// advance moves the tool along its status.
func (d *Decoder) advance(tl *tool) {
	switch tl.status {
	case "in_progress":
		if !tl.running && !tl.settled && tl.asking == 0 {
			tl.running = true
			d.emit(&agent.ToolRunning{CallID: tl.callID})
		}
	case "completed", "failed":
		first := !tl.settled
		tl.settled, tl.running = true, false
		meta, files := d.resultMeta(tl)
		if tl.status == "completed" {
			d.emit(&agent.ToolCompleted{CallID: tl.callID, Output: d.output(tl), Metadata: meta, Files: files})
			if first {
				d.toolTodos(tl)
			}
		} else {
			msg := d.output(tl)
			if msg == "" {
				msg = "tool failed"
			}
			d.emit(&agent.ToolFailed{CallID: tl.callID, Error: msg, Metadata: meta})
		}
		if first {
			d.stepResult = true
		}
	}
}

// output is what a finished tool printed: its text content, the output of
// the terminals it embeds (as happy last reported it to the agent), else a
// raw output that is a string.
func (d *Decoder) output(tl *tool) string {
	var parts []string
	if s := tl.text(); s != "" && tl.outContent {
		parts = append(parts, s)
	}
	for _, id := range tl.terminalIDs() {
		if ti := d.terminals[id]; ti != nil && ti.output != "" {
			parts = append(parts, ti.output)
		}
	}
	if len(parts) == 0 && !isNull(tl.rawOutput) {
		return rawOutputText(tl.rawOutput)
	}
	return strings.Join(parts, "\n")
}

// resultMeta is the state metadata of a finished tool: its raw output,
// diffs, terminal exit statuses; images and binary (blob) resources of its
// content become attachments (text resources are in its output).
func (d *Decoder) resultMeta(tl *tool) (agent.Object, []agent.PromptFile) {
	// m is made at its first member: a result with none but its raw
	// output (most) makes the one map withOpaque makes.
	var m map[string]any
	var rawOut json.RawMessage
	if !isNull(tl.rawOutput) {
		if rv, ok := opaque(tl.rawOutput); ok {
			rawOut = rv
		} else {
			m = map[string]any{"rawOutput": tl.rawOutput}
		}
	}
	if v, ok := diffsValue(tl); ok {
		if m == nil {
			m = map[string]any{}
		}
		m["diffs"] = v
	}
	var terms []any
	for _, id := range tl.terminalIDs() {
		t := map[string]any{"terminalId": id}
		if ti := d.terminals[id]; ti != nil && ti.known {
			if ti.exitCode != nil {
				t["exitCode"] = *ti.exitCode
			}
			if ti.signal != nil {
				t["signal"] = *ti.signal
			}
			if ti.truncated {
				t["truncated"] = true
			}
		}
		terms = append(terms, t)
	}
	if len(terms) > 0 {
		if m == nil {
			m = map[string]any{}
		}
		m["terminals"] = terms
	}
	var files []agent.PromptFile
	for _, c := range tl.content {
		if c.Type == "content" && (c.Block.Type == "image" || c.Block.Type == "resource" && c.Block.Blob) {
			if f, ok := c.Block.promptFile(); ok {
				files = append(files, f)
			}
		}
	}
	if len(m) == 0 {
		return withOpaque(nil, "rawOutput", rawOut), files
	}
	return withOpaque(toObject(m), "rawOutput", rawOut), files
}

// permission decodes session/request_permission: the tool part is created
// or updated from params.toolCall and blocked on a permission whose
// options are kept for the answer.
func (d *Decoder) permission(m jsonrpc.Message, key string) {
	const kind = "session/request_permission"
	p, ok := members(m.Params)
	if !ok {
		d.drop(kind, agent.DropInvalidField, "params is not an object", m.Raw)
		return
	}
	if sid, ok := str(p.get("sessionId")); !ok || !d.sessions[sid] {
		d.drop(kind, agent.DropOrphan, "permission for a session never opened", m.Raw)
		return
	}
	tc, ok := members(p.get("toolCall"))
	if !ok {
		d.drop(kind, agent.DropInvalidField, "toolCall is not an object", m.Raw)
		return
	}
	id, ok := str(tc.get("toolCallId"))
	if !ok || id == "" {
		d.drop(kind, agent.DropMissingID, "toolCall without toolCallId", m.Raw)
		return
	}
	rawOpts, ok := array(p.get("options"))
	if !ok {
		d.drop(kind, agent.DropInvalidField, "options is not an array", m.Raw)
		return
	}
	opts := make([]PermissionOption, 0, len(rawOpts))
	for _, ro := range rawOpts {
		om, ok := members(ro)
		oid, ok1 := str(om.get("optionId"))
		name, ok2 := str(om.get("name"))
		k, ok3 := str(om.get("kind"))
		if !ok || !ok1 || !ok2 || !ok3 {
			d.drop(kind, agent.DropInvalidField, "option needs optionId, name and kind strings", m.Raw)
			return
		}
		opts = append(opts, PermissionOption{OptionID: oid, Name: name, Kind: k})
	}
	tl, created := d.toolFor(id)
	if created {
		tl.kind = "other"
		tl.status = "pending"
		d.beginOutput()
	}
	status, input, locs := tl.status, tl.rawInput, tl.locations
	d.mergeTool(kind, tl, tc)

	// The request describes the call it asks about; it neither moves the
	// tool (its status) nor takes back what the agent announced: input
	// members and locations it leaves out stay (OpenCode asks with only
	// the command of a call announced with its description and cwd). When
	// it carries an input of its own, that is also the permission's detail
	// (OpenCode sends a diff there), kept in the block's metadata.
	tl.status = status
	var permInput json.RawMessage
	if m, ok := members(input); ok && len(m) > 0 && string(tl.rawInput) != string(input) {
		permInput, tl.rawInput = tl.rawInput, input
	}
	if len(tl.locations) == 0 {
		tl.locations = locs
	}
	// What the announcement computed is what canonical gives below: the
	// tool does not change in between.
	name, input, known := d.announce(tl, false)
	tl.perms++
	permID := ""
	if tl.perms > 1 {
		permID = tl.callID + "#permission-" + strconv.Itoa(tl.perms)
	}
	patterns := tl.patterns()
	meta := map[string]any{}
	if tl.title != "" {
		meta["title"] = tl.title
	}
	if desc := tl.text(); desc != "" {
		meta["description"] = desc
	}
	var rawIn json.RawMessage
	if permInput != nil {
		if rv, ok := opaque(permInput); ok {
			rawIn = rv
		} else {
			meta["rawInput"] = permInput
		}
	}
	if !known {
		name, input, _ = d.canonical(tl)
	}
	if p, ok := agent.ToolPatterns(name, input); ok {
		patterns = p
		if name == agent.ToolRead || name == agent.ToolWrite || name == agent.ToolEdit {
			// Every file the tool touches (a move has two): a deny rule
			// must catch each of them.
			for _, l := range tl.locations {
				if !slices.Contains(patterns, l.Path) {
					patterns = append(patterns, l.Path)
				}
			}
		}
	}
	d.emit(&agent.ToolBlocked{CallID: tl.callID, Tool: name, Input: input,
		Permission: &agent.PermissionRequest{ID: permID, Permission: name,
			Patterns: patterns, Always: slices.Clone(patterns), Metadata: withOpaque(withOpaque(toObject(meta), "rawInput", rawIn), "options", metaText(opts))}})
	d.theirs[key] = agentRequest{method: kind, callID: tl.callID, options: opts}
	tl.asking++
}

// patterns is what a permission for the tool covers, for rules to match:
// the command of an execute tool, the paths of a file tool, else the title.
func (tl *tool) patterns() []string {
	in, _ := members(tl.rawInput)
	if tl.kind == "execute" {
		if c, ok := str(in.get("command")); ok && c != "" {
			return []string{c}
		}
	}
	var out []string
	for _, l := range tl.locations {
		out = append(out, l.Path)
	}
	if len(out) == 0 {
		for _, k := range []string{"path", "file_path", "filePath", "abs_path"} {
			if s, ok := str(in.get(k)); ok && s != "" {
				out = append(out, s)
				break
			}
		}
	}
	if len(out) == 0 && tl.title != "" {
		out = append(out, tl.title)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// toolTodos replaces the todo list with the one a completed todo tool
// wrote (rawInput.todos: OpenCode's todowrite, which sends no plan update,
// carries the whole list), unless the agent sends plan updates (planned):
// they are its list then. A todo tool without a list (todoread) changes
// nothing. An item with an unknown status is left out with a Dropped
// record; an absent or unknown priority is medium, as for Claude's todos.
func (d *Decoder) toolTodos(tl *tool) {
	if d.planned {
		return
	}
	if own, table := d.agentTool(tl); own == "" || agentTools[table][own] != agent.ToolTodo {
		return
	}
	in, _ := members(tl.rawInput)
	items, ok := objects(in.get("todos"))
	if !ok {
		return
	}
	todos := make([]agent.Todo, 0, len(items))
	for _, it := range items {
		ti := todoItem(it)
		st, err := agent.ParseTodoStatus(string(ti.Status))
		if err != nil {
			d.drop("session/update:tool_call_update", agent.DropInvalidField,
				"todo "+strconv.Quote(ti.Content)+" has unknown status "+strconv.Quote(string(ti.Status))+"; left out", tl.rawInput)
			continue
		}
		prio, err := agent.ParseTodoPriority(string(ti.Priority))
		if err != nil {
			prio = agent.PriorityMedium
		}
		todos = append(todos, agent.Todo{Content: ti.Content, Status: st, Priority: prio})
	}
	d.emit(&agent.TodosUpdated{Todos: todos})
}

// plan maps the agent's plan to the todo list.
func (d *Decoder) plan(kind string, u obj, raw []byte) {
	d.planned = true
	entries, ok := array(u.get("entries"))
	if !ok {
		d.drop(kind, agent.DropInvalidField, "entries is not an array", raw)
		return
	}
	todos := make([]agent.Todo, 0, len(entries))
	for _, e := range entries {
		m, ok := members(e)
		content, ok1 := str(m.get("content"))
		status, ok2 := str(m.get("status"))
		prio, ok3 := str(m.get("priority"))
		if !ok || !ok1 || !ok2 || !ok3 {
			d.drop(kind, agent.DropInvalidField, "plan entry needs content, status and priority strings", raw)
			return
		}
		t := agent.Todo{Content: content}
		switch status {
		case "pending":
			t.Status = agent.TodoPending
		case "in_progress":
			t.Status = agent.TodoInProgress
		case "completed":
			t.Status = agent.TodoCompleted
		default:
			d.drop(kind, agent.DropInvalidField, "unknown plan entry status "+strconv.Quote(status), raw)
			return
		}
		switch prio {
		case "high":
			t.Priority = agent.PriorityHigh
		case "medium":
			t.Priority = agent.PriorityMedium
		case "low":
			t.Priority = agent.PriorityLow
		default:
			d.drop(kind, agent.DropInvalidField, "unknown plan entry priority "+strconv.Quote(prio), raw)
			return
		}
		todos = append(todos, t)
	}
	d.emit(&agent.TodosUpdated{Todos: todos})
}

// usage maps usage_update: the tokens in context become the input tokens
// of the current step (what its model call read); the cost is the increase
// of the session's cumulative cost during the step (USD only: the
// transcript's cost has no currency). size has no place in the transcript.
// A report that comes before the turn has assistant output is held until
// it has.
func (d *Decoder) usage(kind string, u obj, raw []byte) {
	used, ok := int64Of(u.get("used"))
	if !ok || used < 0 || isNull(u.get("size")) {
		d.drop(kind, agent.DropInvalidField, "usage_update needs used and size token counts", raw)
		return
	}
	ev := &agent.Usage{Tokens: &agent.Tokens{Input: &used}}
	if c, ok := members(u.get("cost")); ok {
		var amount float64
		cur, _ := str(c.get("currency"))
		if json.Unmarshal(c.get("amount"), &amount) == nil && !isNull(c.get("amount")) && cur == "USD" {
			base := d.stepCost
			if amount < base {
				base = 0 // the agent restarted its count
			}
			step := amount - base
			ev.Cost = &step
			d.lastCost = &amount
		}
	}
	if d.turn == nil && d.anyStep {
		d.emit(ev)
		return
	}
	d.heldUsage = ev
	d.flushUsage(false)
}

// endLoad ends a session/load's history replay.
func (d *Decoder) endLoad() {
	d.loading, d.skipping = false, false
	if d.replay != nil {
		d.replay.key = ""
	}
}
