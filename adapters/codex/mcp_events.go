package codex

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// event is one codex/event notification, for its handler: its turn, its
// msg, its kind ("codex/event:<type>") and the raw frame.
type event struct {
	o    *out
	t    *mcpTurn
	msg  mcpMsg
	kind string
	raw  json.RawMessage
}

// mcpEvents maps every codex/event type the decoder maps (see the coverage
// of the package doc) to its handler; a type neither here nor in
// ignoredEvent's list is dropped as unknown.
var mcpEvents = map[string]func(*MCPDecoder, event){
	"session_configured":                (*MCPDecoder).onSessionConfigured,
	"task_started":                      (*MCPDecoder).onTaskStarted,
	"turn_started":                      (*MCPDecoder).onTaskStarted,
	"task_complete":                     (*MCPDecoder).onTaskComplete,
	"turn_complete":                     (*MCPDecoder).onTaskComplete,
	"turn_aborted":                      (*MCPDecoder).onTurnAborted,
	"user_message":                      (*MCPDecoder).onUserMessage,
	"item_started":                      (*MCPDecoder).onItemStarted,
	"item_completed":                    (*MCPDecoder).onItemStarted,
	"agent_message_content_delta":       (*MCPDecoder).onAgentMessageContentDelta,
	"agent_message_delta":               (*MCPDecoder).onAgentMessageDelta,
	"agent_message":                     (*MCPDecoder).onAgentMessage,
	"agent_reasoning_delta":             (*MCPDecoder).onAgentReasoningDelta,
	"agent_reasoning_raw_content_delta": (*MCPDecoder).onAgentReasoningDelta,
	"agent_reasoning":                   (*MCPDecoder).onAgentReasoning,
	"agent_reasoning_raw_content":       (*MCPDecoder).onAgentReasoning,
	"agent_reasoning_section_break":     (*MCPDecoder).onAgentReasoningSectionBreak,
	"exec_command_begin":                (*MCPDecoder).onExecCommandBegin,
	"exec_command_output_delta":         (*MCPDecoder).onExecCommandOutputDelta,
	"exec_command_end":                  (*MCPDecoder).onExecCommandEnd,
	"exec_approval_request":             (*MCPDecoder).onExecApprovalRequest,
	"apply_patch_approval_request":      (*MCPDecoder).onExecApprovalRequest,
	"patch_apply_begin":                 (*MCPDecoder).onPatchApplyBegin,
	"patch_apply_end":                   (*MCPDecoder).onPatchApplyEnd,
	"mcp_tool_call_begin":               (*MCPDecoder).onMcpToolCallBegin,
	"mcp_tool_call_end":                 (*MCPDecoder).onMcpToolCallBegin,
	"web_search_begin":                  (*MCPDecoder).onWebSearchBegin,
	"web_search_end":                    (*MCPDecoder).onWebSearchBegin,
	"view_image_tool_call":              (*MCPDecoder).onViewImageToolCall,
	"token_count":                       (*MCPDecoder).onTokenCount,
	"plan_update":                       (*MCPDecoder).onPlanUpdate,
	"error":                             (*MCPDecoder).onError,
	"stream_error":                      (*MCPDecoder).onStreamError,
	"context_compacted":                 (*MCPDecoder).onContextCompacted,
	"exited_review_mode":                (*MCPDecoder).onExitedReviewMode,
}

func (d *MCPDecoder) onSessionConfigured(e event) {
	id := e.msg.ThreadID
	if id == "" {
		id = e.msg.SessionID
	}
	e.o.add(&agent.SessionInfo{ProviderSessionID: id, ProviderID: e.msg.Provider, ModelID: e.msg.Model, Cwd: strings.TrimPrefix(e.msg.Cwd, "file://")})
}

func (d *MCPDecoder) onTaskStarted(e event) {
	d.startTurn(e.o, e.t, e.msg.TurnID)
}

func (d *MCPDecoder) onTaskComplete(e event) {
	d.startTurn(e.o, e.t, e.msg.TurnID)
	d.endTurn(e.o, e.t, agent.TurnCompleted, "")
}

func (d *MCPDecoder) onTurnAborted(e event) {
	d.startTurn(e.o, e.t, e.msg.TurnID)
	d.endTurn(e.o, e.t, agent.TurnInterrupted, e.msg.Reason)
}

func (d *MCPDecoder) onUserMessage(e event) {
	if e.t.prompted {
		return
	}
	e.t.prompted = true
	var files []agent.PromptFile
	for _, u := range e.msg.Images {
		files = append(files, agent.PromptFile{Mime: dataURLMime(u), URL: u})
	}
	e.o.add(&agent.UserPrompt{PromptID: "user:" + e.t.key, Text: e.msg.Message, Files: files})
}

func (d *MCPDecoder) onItemStarted(e event) {
	d.item(e.o, e.t, e.msg, e.raw)
}

func (d *MCPDecoder) onAgentMessageContentDelta(e event) {
	if e.msg.ItemID == "" {
		d.drop(e.o, e.kind, agent.DropMissingID, "delta without item_id", e.raw)
		return
	}
	e.t.text = e.msg.ItemID
	if e.msg.Delta != "" {
		e.o.add(&agent.TextDelta{Block: e.msg.ItemID, Delta: e.msg.Delta})
	}
}

func (d *MCPDecoder) onAgentMessageDelta(e event) {
	if e.t.text == "" {
		e.t.nText++
		e.t.text = fmt.Sprintf("agent:%s#%d", e.t.key, e.t.nText)
	}
	if e.msg.Delta != "" {
		e.o.add(&agent.TextDelta{Block: e.t.text, Delta: e.msg.Delta})
	}
}

func (d *MCPDecoder) onAgentMessage(e event) {
	if e.t.text == "" {
		e.t.nText++
		e.t.text = fmt.Sprintf("agent:%s#%d", e.t.key, e.t.nText)
	}
	if e.msg.Message != "" {
		e.o.add(&agent.TextFinal{Block: e.t.text, Text: e.msg.Message})
	}
	e.t.text = ""
}

func (d *MCPDecoder) onAgentReasoningDelta(e event) {
	if e.t.reason == "" {
		e.t.nReason++
		e.t.reason = fmt.Sprintf("reasoning:%s#%d", e.t.key, e.t.nReason)
	}
	blk := e.t.reason
	if e.msg.Type == "agent_reasoning_raw_content_delta" {
		blk += "/raw"
	}
	if e.msg.Delta != "" {
		e.o.add(&agent.ReasoningDelta{Block: blk, Delta: e.msg.Delta})
	}
}

func (d *MCPDecoder) onAgentReasoning(e event) {
	if e.t.reason == "" {
		e.t.nReason++
		e.t.reason = fmt.Sprintf("reasoning:%s#%d", e.t.key, e.t.nReason)
	}
	blk := e.t.reason
	if e.msg.Type == "agent_reasoning_raw_content" {
		blk += "/raw"
	}
	if e.msg.Text != "" {
		e.o.add(&agent.ReasoningFinal{Block: blk, Text: e.msg.Text})
	}
}

func (d *MCPDecoder) onAgentReasoningSectionBreak(e event) {
	e.t.reason = ""
}

func (d *MCPDecoder) onExecCommandBegin(e event) {
	c := d.call(e.msg.CallID, "bash")
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "exec event without call_id", e.raw)
		return
	}
	cmd, wrapped := UserCommand(e.msg.Command)
	in, meta := shellCall("exec_command", cmd, wrapped, strings.TrimPrefix(e.msg.Cwd, "file://"))
	if len(e.msg.Parsed) > 0 && string(e.msg.Parsed) != "null" {
		meta["parsedCmd"] = e.msg.Parsed
	}
	d.announce(e.o, c, cmd, in, meta)
	d.run(e.o, c)
}

func (d *MCPDecoder) onExecCommandOutputDelta(e event) {
	c := d.call(e.msg.CallID, "bash")
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "exec event without call_id", e.raw)
		return
	}
	b, err := decodeChunk(e.msg.Chunk, true)
	if err != nil {
		d.drop(e.o, e.kind, agent.DropInvalidField, err.Error(), e.raw)
		return
	}
	// Interleaved streams decode separately (a sequence never spans them).
	if e.msg.Stream == "stderr" {
		d.call(e.msg.CallID+"\x00stderr", "").out.write(b)
	} else {
		c.out.write(b)
	}
}

func (d *MCPDecoder) onExecCommandEnd(e event) {
	c := d.call(e.msg.CallID, "bash")
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "exec event without call_id", e.raw)
		return
	}
	output := c.out.String()
	if se := d.calls[e.msg.CallID+"\x00stderr"]; se != nil {
		if s := se.out.String(); s != "" {
			output += s
		}
		delete(d.calls, e.msg.CallID+"\x00stderr")
	}
	switch {
	case e.msg.Aggregate != nil:
		output = *e.msg.Aggregate
	case e.msg.Stdout != "" || e.msg.Stderr != "":
		output = e.msg.Stdout + e.msg.Stderr
	}
	meta := agent.Object{}
	if e.msg.ExitCode != nil {
		meta["exitCode"] = *e.msg.ExitCode
	}
	if ms, ok := durationMs(e.msg.Duration); ok {
		meta["durationMs"] = ms
	}
	if !c.shown {
		cmd, wrapped := UserCommand(e.msg.Command)
		in, tmeta := shellCall("exec_command", cmd, wrapped, "")
		d.announce(e.o, c, cmd, in, tmeta)
	}
	if e.msg.ExitCode != nil && *e.msg.ExitCode != 0 {
		text := output
		if strings.TrimSpace(text) == "" {
			text = fmt.Sprintf("command failed with exit code %d", *e.msg.ExitCode)
		}
		d.fail(e.o, c, text, meta)
	} else {
		d.complete(e.o, c, output, meta)
	}
}

func (d *MCPDecoder) onExecApprovalRequest(e event) {
	// The elicitation/create request that follows is what happy
	// answers; the tool blocks then, with this event's detail.
	if e.msg.CallID == "" {
		d.drop(e.o, e.kind, agent.DropMissingID, "approval without call_id", e.raw)
		return
	}
	d.approvals[e.msg.CallID] = e.msg
}

func (d *MCPDecoder) onPatchApplyBegin(e event) {
	c := d.call(e.msg.CallID, "edit")
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "patch event without call_id", e.raw)
		return
	}
	ups := patchUpdates(e.msg.Changes)
	_, meta, paths := fileChangeDetail(ups)
	tool, input := patchTool(ups)
	c.tool, c.paths = tool, paths
	meta = mergeMeta(meta, agent.ToolMetadata("patch_apply", mustObject(map[string]any{"changes": e.msg.Changes}), input))
	d.announce(e.o, c, strings.Join(paths, ", "), input, meta)
	d.run(e.o, c)
}

func (d *MCPDecoder) onPatchApplyEnd(e event) {
	c := d.call(e.msg.CallID, "edit")
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "patch event without call_id", e.raw)
		return
	}
	text := e.msg.Stdout + e.msg.Stderr
	if e.msg.Success != nil && !*e.msg.Success {
		if text == "" {
			text = "patch failed to apply"
		}
		d.fail(e.o, c, text, nil)
	} else {
		d.complete(e.o, c, text, nil)
	}
}

func (d *MCPDecoder) onMcpToolCallBegin(e event) {
	c := d.call(e.msg.CallID, mcpToolName(e.msg.Invocation.Server, e.msg.Invocation.Tool))
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "mcp tool event without call_id", e.raw)
		return
	}
	input := objectOrEmpty(e.msg.Invocation.Arguments)
	d.announce(e.o, c, e.msg.Invocation.Tool, input, agent.ToolMetadata("mcp_tool_call", e.msg.Invocation.Arguments, input))
	if e.msg.Type == "mcp_tool_call_begin" {
		d.run(e.o, c)
		return
	}
	var res struct {
		Ok *struct {
			Content []json.RawMessage `json:"content"`
			IsError *bool             `json:"isError"`
		} `json:"Ok"`
		Err *string `json:"Err"`
	}
	_ = json.Unmarshal(e.msg.Result, &res)
	meta := agent.Object{}
	if ms, ok := durationMs(e.msg.Duration); ok {
		meta["durationMs"] = ms
	}
	switch {
	case res.Err != nil:
		d.fail(e.o, c, *res.Err, meta)
	case res.Ok != nil && res.Ok.IsError != nil && *res.Ok.IsError:
		d.fail(e.o, c, contentText(res.Ok.Content), meta)
	case res.Ok != nil:
		d.complete(e.o, c, contentText(res.Ok.Content), meta)
	default:
		d.fail(e.o, c, "mcp tool call ended without a result", meta)
	}
}

func (d *MCPDecoder) onWebSearchBegin(e event) {
	c := d.call(e.msg.CallID, agent.ToolSearch)
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "web search event without call_id", e.raw)
		return
	}
	var in json.RawMessage
	if e.msg.Query != "" {
		in = agent.EncodeInput(agent.SearchInput{Query: e.msg.Query})
	}
	d.announce(e.o, c, e.msg.Query, in, agent.ToolMetadata("web_search", nil, nil))
	d.run(e.o, c)
	if e.msg.Type == "web_search_end" {
		d.complete(e.o, c, "", nil)
	}
}

func (d *MCPDecoder) onViewImageToolCall(e event) {
	c := d.call(e.msg.CallID, agent.ToolRead)
	if c == nil {
		d.drop(e.o, e.kind, agent.DropMissingID, "image view without call_id", e.raw)
		return
	}
	d.announce(e.o, c, e.msg.Path, agent.EncodeInput(agent.ReadInput{Path: e.msg.Path}), agent.ToolMetadata("view_image", nil, nil))
	d.complete(e.o, c, "", nil)
}

func (d *MCPDecoder) onTokenCount(e event) {
	if e.msg.Info != nil && e.msg.Info.Last != nil {
		if tk := e.msg.Info.Last.tokens(); tk != nil {
			e.o.add(&agent.Usage{Tokens: tk})
		}
	}
}

func (d *MCPDecoder) onPlanUpdate(e event) {
	todos := make([]agent.Todo, 0, len(e.msg.Plan))
	for _, s := range e.msg.Plan {
		todos = append(todos, agent.Todo{Content: s.Step, Status: todoStatus(s.Status), Priority: agent.PriorityMedium})
	}
	e.o.add(&agent.TodosUpdated{Todos: todos})
}

func (d *MCPDecoder) onError(e event) {
	k, st := errorKind(e.msg.ErrorInfo)
	e.o.add(&agent.AgentError{Kind: k, Text: e.msg.Message, StatusCode: st})
}

func (d *MCPDecoder) onStreamError(e event) {
	k, st := errorKind(e.msg.ErrorInfo)
	e.t.retries++
	retryable := true
	e.o.add(&agent.Retry{Attempt: e.t.retries, Error: agent.MessageError{Name: agent.ErrNameAPI,
		Data: agent.ErrorData{Message: e.msg.Message, Kind: k, StatusCode: st, IsRetryable: &retryable}}})
}

func (d *MCPDecoder) onContextCompacted(e event) {
	e.o.add(&agent.Compaction{ID: "compacted:" + e.t.key, Auto: true})
}

func (d *MCPDecoder) onExitedReviewMode(e event) {
	var r struct {
		Explanation string `json:"overall_explanation"`
	}
	if json.Unmarshal(e.msg.ReviewOutput, &r) == nil && r.Explanation != "" {
		e.o.add(&agent.TextFinal{Block: "review:" + e.t.key, Text: r.Explanation})
	}
}
