package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// user maps a user record: a prompt, tool results, or an interruption
// marker. dir is the traffic direction ("" outside traffic logs).
func (d *Decoder) user(r *record, dir string, typeErr *json.UnmarshalTypeError) {
	m := r.Message
	if m == nil || badField(typeErr, "message") {
		d.drop("user", agent.DropInvalidField, fieldError(typeErr, "user record has no message object"))
		return
	}
	if r.IsMeta {
		return // context Claude injects for the model (skill bodies, caveats); never shown
	}
	sess := d.sessionOf(r)
	s := d.session(sess)
	blocks, err := m.blocks()
	if err != nil {
		d.drop("user", agent.DropInvalidField, "user content: "+err.Error())
	}
	var results []*contentBlock
	var texts []string
	var files []agent.PromptFile
	for i := range blocks {
		b := &blocks[i]
		switch b.Type {
		case "tool_result":
			results = append(results, b)
		case "text":
			if t := deref(b.Text); t != "" {
				texts = append(texts, t)
			}
		case "image", "document":
			if f, ok := mediaFile(b); ok {
				files = append(files, f)
			}
		default:
			d.drop("user/"+b.Type, agent.DropUnknownType, "content block type not known to this version")
		}
	}
	if len(results) > 0 {
		for _, b := range results {
			if !d.recent.has("t:" + b.ToolUseID) {
				d.ensureTurn(s) // the agent is working, whether or not its prompt was seen
				break
			}
		}
		var structured json.RawMessage
		if len(results) == 1 {
			structured = r.toolResult()
		}
		for _, b := range results {
			d.toolResult(s, b, structured)
		}
		// Text beside tool results: an interruption marker, or words the
		// user added to a rejection.
		for _, t := range texts {
			if isInterruptMarker(t) {
				d.interrupted(s)
			} else {
				d.emit(&agent.UserPrompt{EventBase: d.base(s.key), PromptID: d.promptID(r), Text: t})
			}
		}
		return
	}
	text := strings.Join(texts, "\n")
	if text == "" && len(files) == 0 {
		d.drop("user", agent.DropInvalidField, "user record carries no text, file or tool result")
		return
	}
	if len(files) == 0 && isInterruptMarker(text) {
		d.interrupted(s)
		return
	}
	if r.IsCompactSummary || r.IsVisibleInTranscriptOnly || isCompactSummaryText(text) {
		d.emit(&agent.UserPrompt{EventBase: d.base(s.key), PromptID: d.promptID(r), Text: text, Files: files, Synthetic: true})
		return
	}
	if d.form == FormTrafficLog && r.IsReplay {
		return // Claude's echo of a prompt the c2a side of the log already holds
	}
	if local, output := localCommand(text); local {
		// A command of the terminal UI (/clear, ! ls): shown, but no model
		// step follows unless the command expands into a prompt, and then
		// the assistant records open the turn.
		if s.turnOpen && d.form == FormSessionJSONL {
			reason, errText := d.quietEnd(s, agent.TurnInterrupted, "")
			d.closeTurn(s, reason, errText)
		}
		// /compact's own wrapper is Claude's, like its output: the person
		// asked for a compaction, not a model turn.
		d.emit(&agent.UserPrompt{EventBase: d.base(s.key), PromptID: d.promptID(r), Text: text, Files: files, Synthetic: output || isCompactCommand(text)})
		return
	}
	turnID := r.PromptID
	if turnID == "" {
		turnID = r.UUID
	}
	d.prompt(s, d.promptID(r), turnID, text, files, r.IsSynthetic)
}

// promptID is the identity of a prompt: its record uuid, else its position.
func (d *Decoder) promptID(r *record) string {
	if r.UUID != "" {
		return r.UUID
	}
	return "line-" + strconv.FormatInt(d.line, 10)
}

// prompt reports a user prompt and opens its turn. In a session JSONL a new
// prompt also closes the previous turn of its session (Claude only takes a
// prompt there once the previous turn stopped). In stream-json and SDK
// traffic a prompt sent during a turn is queued by Claude: the turn goes on.
func (d *Decoder) prompt(s *session, id, turnID, text string, files []agent.PromptFile, synthetic bool) {
	if s.turnOpen && d.form == FormSessionJSONL {
		reason, errText := d.quietEnd(s, agent.TurnInterrupted, "")
		d.closeTurn(s, reason, errText)
	}
	if s.key != "" && s.prompt != "" && text == s.prompt && len(files) == 0 {
		// The subagent's task: SubagentStarted already carried it.
		s.prompt = ""
	} else {
		d.emit(&agent.UserPrompt{EventBase: d.base(s.key), PromptID: id, Text: text, Files: files, Synthetic: synthetic})
	}
	if !s.turnOpen {
		if turnID == "" {
			d.turnSeq++
			turnID = "turn-" + strconv.Itoa(d.turnSeq)
		}
		d.openTurn(s, turnID)
	}
}

// localCommand recognises what Claude's terminal UI records for its own
// commands: a slash command or a shell command typed after "!" (local), and
// their output (output, written by Claude rather than typed).
func localCommand(text string) (local, output bool) {
	t := strings.TrimSpace(text)
	for _, p := range []string{"<command-name>", "<command-message>", "<bash-input>"} {
		if strings.HasPrefix(t, p) {
			return true, false
		}
	}
	for _, p := range []string{"<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>", "<bash-stderr>"} {
		if strings.HasPrefix(t, p) {
			return true, true
		}
	}
	return false, false
}

// compactSummaryPrefix starts the summary Claude writes as a user message
// after a compaction (JSONL marks it isCompactSummary; stream-json does not).
const compactSummaryPrefix = "This session is being continued from a previous conversation"

// isCompactSummaryText recognises the summary of a compaction by its text.
func isCompactSummaryText(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), compactSummaryPrefix)
}

// isCompactCommand recognises the record of a /compact command typed in
// Claude's terminal UI ("<command-name>/compact</command-name>…").
func isCompactCommand(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "<command-name>/compact</command-name>")
}

// isInterruptMarker recognises the line Claude writes when the person
// stops a turn ("[Request interrupted by user]", "[Request interrupted by
// user for tool use]", and variants of other wrappers).
func isInterruptMarker(text string) bool {
	t := strings.TrimSpace(text)
	return len(t) > 2 && t[0] == '[' && t[len(t)-1] == ']' && strings.Contains(strings.ToLower(t), "interrupted by user")
}

// interrupted handles an interruption marker: the person stopped the turn
// in Claude's own UI. Every open tool is settled (a blocked one as rejected,
// answered in the agent). In a session JSONL the turn ends here; in
// stream-json the result record that follows ends it.
func (d *Decoder) interrupted(s *session) {
	s.stopped = true
	if d.form == FormSessionJSONL {
		d.closeTurnWith(s, agent.TurnInterrupted, "interrupted by user", agent.ReasonAnsweredInAgent)
		return
	}
	resolve := agent.ReasonAnsweredInAgent
	if s.key == "" && d.interrupt {
		resolve = agent.ReasonCancelled
	}
	d.abortStep(s)
	for len(s.openTools) > 0 {
		d.settleTool(d.tools[s.openTools[0]], agent.TurnInterrupted, "interrupted by user", resolve)
	}
}

// toolResult maps one tool_result block. structured is the record's
// toolUseResult when the record holds this single result.
func (d *Decoder) toolResult(s *session, b *contentBlock, structured json.RawMessage) {
	callID := b.ToolUseID
	if callID == "" {
		d.drop("user/tool_result", agent.DropMissingID, "tool_result has no tool_use_id")
		return
	}
	t := d.tools[callID]
	if t == nil && d.recent.has("t:"+callID) {
		d.drop("user/tool_result", agent.DropIllegalTransition, "tool_result for "+callID+" after the call was settled; ignored")
		return
	}
	if t != nil && t.session != s.key {
		// Another session's call (a subagent reusing an id): its result
		// would settle, or approve, a tool it does not own.
		d.drop("user/tool_result", agent.DropIllegalTransition, "tool_result for "+callID+", a call of another session; ignored")
		return
	}
	output, files := resultContent(b)
	meta := agent.Object{}
	if len(structured) > 0 && string(structured) != "null" {
		// Kept as raw JSON (the transcript encoder writes it canonically):
		// decoding every result into maps would cost more than the rest of
		// the decoding. Only a persisted-output preview needs its fields.
		// structured may alias the line being decoded: what is kept is
		// copied.
		if strings.HasPrefix(output, "<persisted-output>") {
			output = preferFullOutput(output, structured, meta)
		}
		if _, trimmed := meta["toolUseResult"]; !trimmed {
			meta["toolUseResult"] = json.RawMessage(bytes.Clone(structured))
		}
	}
	if len(meta) == 0 {
		meta = nil
	}
	isErr := b.IsError != nil && *b.IsError
	if t == nil {
		// A call announced before this decoder started (a tail resumed
		// mid-turn): report the result; the reducer knows the call.
		if isErr {
			d.emit(&agent.ToolFailed{EventBase: d.base(s.key), CallID: callID, Error: output, Metadata: meta})
		} else {
			d.emit(&agent.ToolCompleted{EventBase: d.base(s.key), CallID: callID, Output: output, Metadata: meta, Files: files})
		}
		return
	}
	// The step that made the call is over once a result comes back.
	if ts := d.sessions[t.session]; ts != nil {
		d.finishStep(ts, t.msg)
	}
	if !isErr {
		d.todos(t, structured, output)
		if t.status == toolBlocked && t.question {
			if answers, ok := questionAnswers(t.input, structured); ok {
				d.resolve(t, &agent.ToolResolved{Answers: answers})
			}
		}
	}
	if t.child != "" {
		if id := resultAgentID(structured); id != "" {
			d.agents[id] = t.child // later records of this agent (a resumed or background agent)
		}
	}
	if t.child != "" && !asyncLaunch(structured) {
		reason := agent.TurnCompleted
		if isErr {
			reason = agent.TurnFailed
		}
		d.endChild(t.child, reason, output)
	}
	if isErr {
		d.failTool(t, &agent.ToolFailed{CallID: callID, Error: output, Metadata: meta})
		return
	}
	d.completeTool(t, &agent.ToolCompleted{CallID: callID, Output: output, Title: toolTitle(t.name, parseInput(t.input)),
		Metadata: meta, Files: files})
}

// resultAgentID returns the agentId an Agent result names.
func resultAgentID(structured json.RawMessage) string {
	var r struct {
		AgentID string `json:"agentId"`
	}
	if isObject(structured) && json.Unmarshal(structured, &r) == nil {
		return r.AgentID
	}
	return ""
}

// asyncLaunch reports whether an Agent result only says the subagent was
// launched in the background (it keeps running; a task notification ends it).
func asyncLaunch(structured json.RawMessage) bool {
	var r struct {
		Status string `json:"status"`
	}
	return isObject(structured) && json.Unmarshal(structured, &r) == nil && r.Status == "async_launched"
}

// resultContent flattens tool_result content: a string, or blocks whose
// texts are joined with newlines; images become files. Blocks of other
// types are kept as their JSON text so nothing is lost.
func resultContent(res *contentBlock) (string, []agent.PromptFile) {
	if res.resultText != nil {
		return *res.resultText, nil
	}
	raw := res.Content
	blocks, err := contentBlocks(raw)
	if err != nil && len(blocks) == 0 {
		return string(raw), nil
	}
	var parts []string
	var files []agent.PromptFile
	for i := range blocks {
		b := &blocks[i]
		switch b.Type {
		case "text":
			parts = append(parts, deref(b.Text))
		case "image", "document":
			if f, ok := mediaFile(b); ok {
				files = append(files, f)
			}
		default:
			if j, err := json.Marshal(b); err == nil {
				parts = append(parts, string(j))
			}
		}
	}
	return strings.Join(parts, "\n"), files
}

// mediaFile turns an image or document block into a prompt file (an inline
// data: URL, or the block's URL).
func mediaFile(b *contentBlock) (agent.PromptFile, bool) {
	if b.Source == nil {
		return agent.PromptFile{}, false
	}
	f := agent.PromptFile{Mime: b.Source.MediaType, Filename: b.Title}
	switch b.Source.Type {
	case "base64":
		f.URL = "data:" + b.Source.MediaType + ";base64," + b.Source.Data
	case "url":
		f.URL = b.Source.URL
	case "text":
		if f.Mime == "" {
			f.Mime = "text/plain"
		}
		f.URL = "data:" + f.Mime + "," + urlEscapeData(b.Source.Data)
	default:
		return agent.PromptFile{}, false
	}
	return f, true
}

// urlEscapeData percent-encodes the bytes a data: URL cannot carry raw.
func urlEscapeData(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || c == '#' || c < 0x20 || c >= 0x7f || c == ' ' {
			fmt.Fprintf(&sb, "%%%02X", c)
		} else {
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

// preferFullOutput replaces a "<persisted-output>" preview (Claude stores
// long output in a file and shows the model a ~2 KB preview) by the stdout
// Claude kept in the structured result, and notes where it came from.
func preferFullOutput(output string, structured json.RawMessage, meta agent.Object) string {
	// structured is a member of a record json.Unmarshal accepted: split it
	// by structure rather than decoding it (and its long stdout) again.
	if !isObject(structured) {
		return output
	}
	members, err := jsonlex.ObjectMap(bytes.TrimSpace(structured))
	if err != nil {
		return output
	}
	var path string
	var size json.Number
	var ok bool
	stdout, _ := jsonlex.StringOf(members["stdout"])
	if stdout == "" {
		return output
	}
	stderr, _ := jsonlex.StringOf(members["stderr"])
	full := stdout
	if stderr != "" {
		full += "\n" + stderr
	}
	meta["outputSource"] = "toolUseResult.stdout"
	if path, _ = jsonlex.StringOf(members["persistedOutputPath"]); path != "" {
		meta["persistedOutputPath"] = path
	}
	if size, ok = numberOf(members["persistedOutputSize"]); ok {
		meta["persistedOutputSize"] = size
		if n, err := size.Int64(); err == nil && n > int64(len(stdout)) {
			meta["truncated"] = true
		}
	}
	// The structured copy would repeat the output; keep the rest of it.
	trimmed := make(agent.Object, len(members))
	for k, v := range members {
		if k != "stdout" {
			trimmed[k] = json.RawMessage(bytes.Clone(v)) // v aliases the line
		}
	}
	meta["toolUseResult"] = trimmed
	return full
}

// numberOf decodes the raw member value v (of a valid object) into a
// json.Number as encoding/json does: a number keeps its text, a string
// holding a valid number its content, null gives "" (and ok); anything
// else, an absent member included, is not ok.
func numberOf(v []byte) (json.Number, bool) {
	switch jsonlex.KindOf(v) {
	case jsonlex.KindNumber:
		return json.Number(v), true
	case jsonlex.KindNull:
		return "", true
	case jsonlex.KindString:
		if s, err := jsonlex.Unquote(v); err == nil && jsonlex.IsNumber(s) {
			return json.Number(s), true
		}
	}
	return "", false
}

// todos maps the todo tools: TodoWrite replaces the list; TaskCreate and
// TaskUpdate (Claude 2.1's task tools) edit the decoder's copy of it.
func (d *Decoder) todos(t *tool, structured json.RawMessage, output string) {
	s := d.session(t.session)
	in := parseInput(t.input)
	switch t.name {
	case "TodoWrite":
		items := in.Todos
		var r struct {
			NewTodos []todoItem `json:"newTodos"`
		}
		if isObject(structured) && json.Unmarshal(structured, &r) == nil && r.NewTodos != nil {
			items = r.NewTodos
		}
		todos := make([]agent.Todo, 0, len(items))
		for _, it := range items {
			st, ok := todoStatus(it.Status)
			if !ok {
				d.drop("user/tool_result", agent.DropInvalidField, fmt.Sprintf("todo %q has unknown status %q; left out", it.Content, it.Status))
				continue
			}
			todos = append(todos, agent.Todo{Content: it.Content, Status: st, Priority: todoPriority(it.Priority)})
		}
		d.emit(&agent.TodosUpdated{EventBase: d.base(s.key), Todos: todos})
	case "TaskCreate":
		id := createdTaskID(structured, output)
		if id == "" {
			id = t.callID
		}
		s.tasks = append(s.tasks, task{id: id, content: in.Subject, status: agent.TodoPending})
		d.emitTasks(s)
	case "TaskUpdate":
		i := slices.IndexFunc(s.tasks, func(x task) bool { return x.id == in.TaskID })
		if i < 0 {
			d.drop("user/tool_result", agent.DropOrphan, "TaskUpdate of task "+strconv.Quote(in.TaskID)+" this stream never created")
			return
		}
		if in.Status == "deleted" {
			s.tasks = slices.Delete(s.tasks, i, i+1)
		} else {
			if in.Status != "" {
				st, ok := todoStatus(in.Status)
				if !ok {
					d.drop("user/tool_result", agent.DropInvalidField, "TaskUpdate status "+strconv.Quote(in.Status)+" unknown")
					return
				}
				s.tasks[i].status = st
			}
			if in.Subject != "" {
				s.tasks[i].content = in.Subject
			}
		}
		d.emitTasks(s)
	}
}

func (d *Decoder) emitTasks(s *session) {
	todos := make([]agent.Todo, 0, len(s.tasks))
	for _, x := range s.tasks {
		todos = append(todos, agent.Todo{Content: x.content, Status: x.status, Priority: agent.PriorityMedium})
	}
	d.emit(&agent.TodosUpdated{EventBase: d.base(s.key), Todos: todos})
}
