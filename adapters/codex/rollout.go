package codex

// Codex rollout files.
//
// Codex persists every thread as a rollout: CODEX_HOME/sessions/YYYY/MM/DD/
// rollout-<time>-<thread id>.jsonl, one JSON object per line,
//
//	{"timestamp":"2026-11-29T15:11:40.109Z","type":<line type>,"payload":{…}}
//
// with line types session_meta (thread id, cwd, model provider, CLI
// version), turn_context (the settings of a turn: model, cwd, policies),
// response_item (the model conversation: messages, reasoning, tool calls and
// their outputs, as sent to and received from the Responses API), event_msg
// (a subset of the protocol events: task_started, user_message,
// token_count, task_complete, turn_aborted, item_completed, …), compacted,
// and in Codex 0.171 also world_state and token_usage_record. The format is
// Codex's own (its rollout and protocol crates) and has no schema; this
// reader relies only on the fields named below and tolerates the rest.
//
// What a rollout does not carry: approvals. Codex does not persist
// approval requests or decisions, so a command the user declined appears
// as a tool call whose output says it was rejected (it becomes a failed
// tool without a permission record), and an approved one as a plain tool
// call. Streaming deltas are not persisted either: texts arrive whole.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/linereader"
)

// rolloutSource is the Dropped.Source of a rollout line.
const rolloutSource = "codex-rollout"

// rolloutLine is one line of a rollout.
type rolloutLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

// IsRollout reports whether line (the first non-empty line of a file) is a
// Codex rollout line: a JSON object with a string "type" and an object
// "payload". A traffic log line ({"t","dir","msg"}) is not.
func IsRollout(line []byte) bool {
	var l struct {
		Type    *string         `json:"type"`
		Payload json.RawMessage `json:"payload"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &l) != nil || l.Type == nil || *l.Type == "" {
		return false
	}
	p := bytes.TrimSpace(l.Payload)
	return len(p) > 0 && p[0] == '{'
}

// rolloutSkipped reports whether a line type (top level,
// "event_msg:<type>" or "response_item:<type>") is known and carries
// nothing the transcript needs, or repeats what another line already gives.
func rolloutSkipped(kind string) bool {
	switch kind {
	case "world_state", // model context snapshot
		"token_usage_record", // repeats token_count per response
		// event_msg: duplicates of response items, settings, progress
		"event_msg:agent_message",   // repeats response_item message/assistant
		"event_msg:agent_reasoning", // repeats response_item reasoning
		"event_msg:agent_reasoning_raw_content", "event_msg:agent_reasoning_section_break",
		"event_msg:thread_settings_applied", "event_msg:thread_name_updated", "event_msg:item_started",
		"event_msg:exec_command_begin", "event_msg:patch_apply_begin", "event_msg:patch_apply_end",
		"event_msg:mcp_tool_call_begin", "event_msg:mcp_tool_call_end", "event_msg:web_search_begin",
		"event_msg:web_search_end", "event_msg:turn_diff", "event_msg:plan_update",
		"event_msg:context_compacted", // the compacted line carries it
		"event_msg:entered_review_mode", "event_msg:exited_review_mode", "event_msg:background_event",
		"event_msg:stream_error", "event_msg:warning",
		// response_item
		"response_item:ghost_snapshot", "response_item:web_search_call", "response_item:image_generation_call",
		"response_item:compaction", "response_item:compaction_summary", "response_item:other":
		return true
	}
	return false
}

// isShellTool reports whether a function name is one of Codex's shell tools.
func isShellTool(name string) bool {
	switch name {
	case "shell", "container.exec", "exec_command", "shell_command", "local_shell":
		return true
	}
	return false
}

// isPreamble reports whether a user-role message is one Codex writes itself
// (environment context, AGENTS.md and other instructions): not a prompt.
func isPreamble(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range [...]string{
		"<environment_context>", "<user_instructions>", "# AGENTS.md instructions", "<permissions instructions>",
		"<skills_instructions>", "<user_shell_command>", "<turn_aborted>", "<subagent_notification>",
	} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// rolloutCall is a tool call seen in the rollout.
type rolloutCall struct {
	shell bool
	done  bool
}

// execResult is what Codex reported about a command's end
// (event_msg exec_command_end, or item_completed of a CommandExecution).
type execResult struct {
	exitCode *int
	status   string
	output   *string
}

// rolloutDecoder holds the state of one rollout read.
type rolloutDecoder struct {
	evs      []agent.Event
	turnOpen bool
	turnID   string
	turns    int
	prompt   string // text of the last prompt of the open turn (duplicates are skipped)
	prompts  int
	calls    map[string]*rolloutCall
	results  map[string]execResult
	lastT    int64
}

// ReplayRollout decodes a Codex rollout into agent events, in order; the
// caller reduces them to a transcript (`happy replay --agent codex` for a
// rollout file). Lines that are not JSON objects, and line types this
// reader does not know, become DroppedInput events (source codex-rollout,
// Kind the raw type); a turn still open at the end ends as truncated. A
// rollout carries no approvals (Codex does not persist requests or
// decisions): tools have no permission record, and a declined command is a
// failed tool whose error is what the model was told. Only a read error of
// r is returned as an error.
func ReplayRollout(r io.Reader) ([]agent.Event, error) {
	lr, _ := linereader.New(r, linereader.Options{})
	d := &rolloutDecoder{calls: map[string]*rolloutCall{}, results: map[string]execResult{}}
	for {
		line, err := lr.Next()
		var data []byte
		switch {
		case err == nil:
			data = line.Data
		case errors.Is(err, io.EOF):
			data = lr.Pending()
			line.Number = lr.LineNumber() + 1
		default:
			return d.evs, fmt.Errorf("codex: read rollout: %w", err)
		}
		if len(bytes.TrimSpace(data)) > 0 {
			d.line(line.Number, data)
		}
		if err != nil {
			break
		}
	}
	if d.turnOpen {
		d.add(truncatedTurn("", d.turnID, d.lastT))
	}
	return d.evs, nil
}

func (d *rolloutDecoder) add(e agent.Event) { d.evs = append(d.evs, e) }

func (d *rolloutDecoder) drop(n int64, kind string, reason agent.DropReason, detail string, raw []byte) {
	d.add(dropped(rolloutSource, n, d.lastT, kind, reason, detail, raw))
}

func (d *rolloutDecoder) line(n int64, data []byte) {
	trimmed := bytes.TrimSpace(data)
	if !json.Valid(trimmed) {
		d.drop(n, "", agent.DropUnparseableJSON, "not JSON", data)
		return
	}
	if trimmed[0] != '{' {
		d.drop(n, "", agent.DropNotAnObject, "a rollout line is a JSON object", data)
		return
	}
	var l rolloutLine
	if err := json.Unmarshal(trimmed, &l); err != nil {
		d.drop(n, "", agent.DropInvalidField, err.Error(), data)
		return
	}
	if ts, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
		d.lastT = ts.UnixMilli()
	}
	if p := bytes.TrimSpace(l.Payload); len(p) == 0 || p[0] != '{' {
		d.drop(n, l.Type, agent.DropInvalidField, "payload is not an object", data)
		return
	}
	base := agent.EventBase{Time: d.lastT}
	switch l.Type {
	case "session_meta":
		var m struct {
			ID            string `json:"id"`
			Cwd           string `json:"cwd"`
			ModelProvider string `json:"model_provider"`
		}
		if err := json.Unmarshal(l.Payload, &m); err != nil {
			d.drop(n, l.Type, agent.DropInvalidField, err.Error(), data)
			return
		}
		d.add(&agent.SessionInfo{EventBase: base, ProviderSessionID: m.ID, ProviderID: m.ModelProvider, Cwd: m.Cwd})
	case "turn_context":
		var m struct {
			Model string `json:"model"`
			Cwd   string `json:"cwd"`
		}
		if err := json.Unmarshal(l.Payload, &m); err != nil {
			d.drop(n, l.Type, agent.DropInvalidField, err.Error(), data)
			return
		}
		if m.Model != "" || m.Cwd != "" {
			d.add(&agent.SessionInfo{EventBase: base, ModelID: m.Model, Cwd: m.Cwd})
		}
	case "compacted":
		d.add(&agent.Compaction{EventBase: base, Auto: true})
	case "event_msg":
		d.event(n, base, l.Payload, data)
	case "response_item":
		d.item(n, base, l.Payload, data)
	default:
		if rolloutSkipped(l.Type) {
			return
		}
		d.drop(n, l.Type, agent.DropUnknownType, "unknown rollout line type", data)
	}
}

// openTurn starts a turn unless one is open.
func (d *rolloutDecoder) openTurn(base agent.EventBase, id string) {
	if d.turnOpen {
		return
	}
	d.turns++
	if id == "" {
		id = "turn-" + strconv.Itoa(d.turns)
	}
	d.turnOpen, d.turnID, d.prompt = true, id, ""
	d.add(&agent.TurnStarted{EventBase: base, TurnID: id})
}

// userPrompt adds a prompt (opening a turn if none is open); the same text
// again in the same turn is the same prompt (Codex writes it both as a
// response item and as an event).
func (d *rolloutDecoder) userPrompt(base agent.EventBase, text string) {
	if d.turnOpen && d.prompt == text && text != "" {
		return
	}
	d.openTurn(base, "")
	d.prompt = text
	d.prompts++
	d.add(&agent.UserPrompt{EventBase: base, PromptID: "prompt-" + strconv.Itoa(d.prompts), Text: text})
}

func (d *rolloutDecoder) endTurn(base agent.EventBase, id, reason string) {
	if !d.turnOpen {
		return
	}
	if id == "" {
		id = d.turnID
	}
	d.turnOpen = false
	d.add(&agent.TurnEnded{EventBase: base, TurnID: id, Reason: reason})
}

func (d *rolloutDecoder) event(n int64, base agent.EventBase, payload json.RawMessage, data []byte) {
	var m struct {
		Type       string          `json:"type"`
		TurnID     string          `json:"turn_id"`
		Message    string          `json:"message"`
		Info       json.RawMessage `json:"info"`
		Item       json.RawMessage `json:"item"`
		CallID     string          `json:"call_id"`
		ExitCode   *int            `json:"exit_code"`
		Status     string          `json:"status"`
		Aggregated *string         `json:"aggregated_output"`
		Reason     string          `json:"reason"`
	}
	if err := json.Unmarshal(payload, &m); err != nil {
		d.drop(n, "event_msg", agent.DropInvalidField, err.Error(), data)
		return
	}
	kind := "event_msg:" + m.Type
	switch m.Type {
	case "task_started", "turn_started":
		d.openTurn(base, m.TurnID)
	case "user_message":
		d.userPrompt(base, m.Message)
	case "token_count":
		var info struct {
			Last *tokenBreakdown `json:"last_token_usage"`
		}
		if len(m.Info) == 0 || string(m.Info) == "null" {
			return
		}
		if err := json.Unmarshal(m.Info, &info); err != nil {
			d.drop(n, kind, agent.DropInvalidField, err.Error(), data)
			return
		}
		if info.Last != nil {
			if tk := info.Last.tokens(); tk != nil {
				d.add(&agent.Usage{EventBase: base, Tokens: tk})
			}
		}
	case "task_complete", "turn_complete":
		d.endTurn(base, m.TurnID, agent.TurnCompleted)
	case "turn_aborted":
		d.endTurn(base, m.TurnID, agent.TurnInterrupted)
	case "error":
		if m.Message != "" {
			d.add(&agent.AgentError{EventBase: base, Kind: agent.ErrorInternal, Text: m.Message})
		}
	case "exec_command_end":
		if m.CallID == "" {
			d.drop(n, kind, agent.DropMissingID, "exec_command_end without call_id", data)
			return
		}
		d.results[m.CallID] = execResult{exitCode: m.ExitCode, status: m.Status, output: m.Aggregated}
	case "item_completed":
		d.itemCompleted(n, base, m.Item, data)
	default:
		if rolloutSkipped(kind) {
			return
		}
		d.drop(n, kind, agent.DropUnknownType, "unknown rollout event", data)
	}
}

// itemCompleted reads the item_completed events of Codex 0.171: the user
// message (a duplicate of the response item, unless that was missing) and
// the end of a command (its exit code and output).
func (d *rolloutDecoder) itemCompleted(n int64, base agent.EventBase, raw json.RawMessage, data []byte) {
	var it struct {
		Type     string  `json:"type"`
		ID       string  `json:"id"`
		Status   string  `json:"status"`
		ExitCode *int    `json:"exit_code"`
		Output   *string `json:"aggregated_output"`
		Content  []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &it) != nil {
		d.drop(n, "event_msg:item_completed", agent.DropInvalidField, "item is not an item object", data)
		return
	}
	switch it.Type {
	case "UserMessage":
		var parts []string
		for _, c := range it.Content {
			if c.Type == "text" {
				parts = append(parts, c.Text)
			}
		}
		d.userPrompt(base, strings.Join(parts, "\n"))
	case "CommandExecution":
		if it.ID == "" {
			d.drop(n, "event_msg:item_completed", agent.DropMissingID, "command item without id", data)
			return
		}
		d.results[it.ID] = execResult{exitCode: it.ExitCode, status: it.Status, output: it.Output}
	default: // agent messages, reasoning, …: the response items carry them
	}
}

// responseText joins the text parts of a response item message.
func responseText(content []struct {
	Type string `json:"type"`
	Text string `json:"text"`
}) string {
	var parts []string
	for _, c := range content {
		switch c.Type {
		case "input_text", "output_text", "text":
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (d *rolloutDecoder) item(n int64, base agent.EventBase, payload json.RawMessage, data []byte) {
	var m struct {
		Type    string `json:"type"`
		ID      string `json:"id"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Summary []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"summary"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
		Action    *struct {
			Command []string `json:"command"`
			Workdir string   `json:"working_directory"`
		} `json:"action"`
	}
	if err := json.Unmarshal(payload, &m); err != nil {
		d.drop(n, "response_item", agent.DropInvalidField, err.Error(), data)
		return
	}
	kind := "response_item:" + m.Type
	switch m.Type {
	case "message":
		text := responseText(m.Content)
		switch m.Role {
		case "user":
			if isPreamble(text) {
				return
			}
			d.userPrompt(base, text)
		case "assistant":
			if text != "" {
				d.add(&agent.TextFinal{EventBase: base, Block: m.ID, Text: text})
			}
		default: // developer and system instructions are not conversation
		}
	case "reasoning":
		var parts []string
		for _, s := range m.Summary {
			if s.Text != "" {
				parts = append(parts, s.Text)
			}
		}
		if len(parts) > 0 {
			d.add(&agent.ReasoningFinal{EventBase: base, Block: m.ID, Text: strings.Join(parts, "\n\n")})
		}
		var raw []string
		for _, c := range m.Content {
			if c.Text != "" {
				raw = append(raw, c.Text)
			}
		}
		if len(raw) > 0 {
			blk := ""
			if m.ID != "" {
				blk = m.ID + "/raw"
			}
			d.add(&agent.ReasoningFinal{EventBase: base, Block: blk, Text: strings.Join(raw, "\n\n")})
		}
	case "function_call", "custom_tool_call", "local_shell_call":
		id := m.CallID
		if id == "" {
			id = m.ID
		}
		if id == "" {
			d.drop(n, kind, agent.DropMissingID, "tool call without call_id", data)
			return
		}
		tool, title, input, meta, shell := toolOf(m.Type, m.Name, m.Arguments, m.Input, m.Action)
		d.calls[id] = &rolloutCall{shell: shell}
		d.add(&agent.ToolCall{EventBase: base, CallID: id, Tool: tool, Title: title, Input: input, Metadata: meta})
		d.add(&agent.ToolRunning{EventBase: base, CallID: id})
	case "function_call_output", "custom_tool_call_output":
		if m.CallID == "" {
			d.drop(n, kind, agent.DropMissingID, "tool output without call_id", data)
			return
		}
		c, ok := d.calls[m.CallID]
		if !ok {
			d.drop(n, kind, agent.DropOrphan, "output of a tool call never seen", data)
			return
		}
		if c.done {
			return
		}
		c.done = true
		d.toolEnd(base, m.CallID, c, outputText(m.Output))
	default:
		if rolloutSkipped(kind) {
			return
		}
		d.drop(n, kind, agent.DropUnknownType, "unknown response item", data)
	}
}

// toolOf renders a tool call in the canonical vocabulary (tools.go):
// shell tools become bash {command, cwd?} with the shell wrapper taken
// off, apply_patch becomes write or edit, the other functions rolloutTool
// knows their canonical tool, anything else is other with its JSON
// arguments (or {"input": text} for a custom tool's free text). meta is
// the part metadata: Codex's name of the function and, when it differs,
// its input.
func toolOf(typ, name, args, text string, action *struct {
	Command []string `json:"command"`
	Workdir string   `json:"working_directory"`
}) (tool, title string, input json.RawMessage, meta agent.Object, shell bool) {
	if typ == "local_shell_call" {
		cmd, wrapped, cwd := "", "", ""
		if action != nil {
			cmd, wrapped = UserCommand(mustObject(action.Command))
			cwd = action.Workdir
		}
		input, meta := shellCall(typ, cmd, wrapped, cwd)
		return agent.ToolBash, cmd, input, meta, true
	}
	if typ == "custom_tool_call" {
		raw := mustObject(map[string]string{"input": text})
		if name == "apply_patch" {
			tool, input := patchTool(applyPatchUpdates(text))
			return tool, name, input, agent.ToolMetadata(name, raw, input), false
		}
		return agent.ToolOther, name, raw, agent.ToolMetadata(name, raw, raw), false
	}
	if isShellTool(name) {
		var a struct {
			Cmd     *string         `json:"cmd"`
			Command json.RawMessage `json:"command"`
			Workdir string          `json:"workdir"`
		}
		if json.Unmarshal([]byte(args), &a) == nil {
			cmd := ""
			if a.Cmd != nil {
				cmd = *a.Cmd
			} else if len(a.Command) > 0 {
				cmd, _ = UserCommand(a.Command)
			}
			cmd = unwrapShell(cmd)
			input := agent.EncodeInput(agent.BashInput{Command: cmd, Cwd: a.Workdir})
			return agent.ToolBash, cmd, input, agent.ToolMetadata(name, json.RawMessage(args), input), true
		}
	}
	tool, input = rolloutTool(name, json.RawMessage(args))
	return tool, name, input, agent.ToolMetadata(name, objectOr(json.RawMessage(args)), input), false
}

// outputText reads a tool output: a string, {"content": …} or a list of
// content items ({"type":"input_text","text":…}).
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &obj) == nil && len(obj.Content) > 0 {
		return outputText(obj.Content)
	}
	var items []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &items) == nil {
		parts := make([]string, 0, len(items))
		for _, it := range items {
			parts = append(parts, it.Text)
		}
		return strings.Join(parts, "\n")
	}
	return string(raw)
}

// unifiedOutput splits a unified exec output ("Chunk ID: …\nWall time: …\n
// Process exited with code N\n…\nOutput:\n<output>") into its exit code and
// output; ok is false for any other text.
func unifiedOutput(s string) (code int, out string, ok bool) {
	const marker = "Process exited with code "
	found := false
	for _, l := range strings.Split(s, "\n") {
		if rest, ok := strings.CutPrefix(l, marker); ok {
			n, err := strconv.Atoi(rest)
			if err != nil {
				return 0, s, false
			}
			code, found = n, true
			break
		}
	}
	if !found {
		return 0, s, false
	}
	if i := strings.Index(s, "\nOutput:\n"); i >= 0 {
		return code, s[i+len("\nOutput:\n"):], true
	}
	return code, s, true
}

// toolEnd settles a call from its output: a shell command failed when
// Codex reported a failed or declined status or a non-zero exit code (from
// the command's end event, else the output's header), or when its output
// says the command could not start ("… failed: …").
func (d *rolloutDecoder) toolEnd(base agent.EventBase, id string, c *rolloutCall, output string) {
	if !c.shell {
		d.add(&agent.ToolCompleted{EventBase: base, CallID: id, Output: output})
		return
	}
	meta := agent.Object{}
	res, known := d.results[id]
	failed := false
	if known {
		if res.output != nil {
			output = *res.output
		}
		if res.exitCode != nil {
			meta["exitCode"] = *res.exitCode
			failed = *res.exitCode != 0
		}
		if res.status == "failed" || res.status == "declined" {
			failed = true
		}
	} else if code, out, ok := unifiedOutput(output); ok {
		output = out
		meta["exitCode"] = code
		failed = code != 0
	} else if strings.Contains(firstLine(output, 200), " failed: ") {
		failed = true
	}
	if len(meta) == 0 {
		meta = nil
	}
	if failed {
		msg := output
		if strings.TrimSpace(msg) == "" {
			msg = "command failed"
			if code, ok := meta["exitCode"].(int); ok {
				msg = fmt.Sprintf("command failed with exit code %d", code)
			}
		}
		d.add(&agent.ToolFailed{EventBase: base, CallID: id, Error: msg, Metadata: meta})
		return
	}
	d.add(&agent.ToolCompleted{EventBase: base, CallID: id, Output: output, Metadata: meta})
}
