package claude

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// assistant maps an assistant record: one content block per line (Claude
// writes a line per block, and may write a message twice), merged into one
// message per message.id.
func (d *Decoder) assistant(r *record, typeErr *json.UnmarshalTypeError) {
	m := r.Message
	if m == nil || badField(typeErr, "message") {
		d.drop("assistant", agent.DropInvalidField, fieldError(typeErr, "assistant record has no message object"))
		return
	}
	sess := d.sessionOf(r)
	if r.IsAPIErrorMessage || m.Model == "<synthetic>" {
		d.syntheticError(r, sess)
		return
	}
	id := m.ID
	if id == "" {
		d.drop("assistant", agent.DropMissingID, "assistant message has no id")
		return
	}
	d.noteModel(r, m.Model)
	s := d.session(sess)
	msg, ok := d.openMessage(s, id, m.Model)
	if !ok {
		return // the message was closed: this is a copy written again
	}
	if m.StopReason != nil && *m.StopReason != "" && *m.StopReason != msg.stop {
		if !knownStop(*m.StopReason) {
			d.drop("assistant", agent.DropInvalidField, "unknown stop_reason "+strconv.Quote(*m.StopReason)+"; the step keeps no finish reason")
		}
		msg.stop = *m.StopReason
	}
	blocks, err := m.blocks()
	if err != nil {
		d.drop("assistant", agent.DropInvalidField, "assistant content: "+err.Error())
	}
	for i := range blocks {
		d.assistantBlock(s, msg, &blocks[i])
	}
	if m.Usage != nil {
		d.usage(s, msg, m.Usage)
	}
}

// contentBlocks decodes message content: a string is one text block. A
// block of the wrong shape is returned as far as it decoded, with the
// error.
func contentBlocks(raw json.RawMessage) ([]contentBlock, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []contentBlock{{Type: "text", Text: &s}}, nil
	case '[':
		var bs []contentBlock
		err := json.Unmarshal(raw, &bs)
		var te *json.UnmarshalTypeError
		if err != nil && !errors.As(err, &te) {
			return nil, err
		}
		return bs, err
	}
	return nil, errors.New("content is neither a string nor an array")
}

// fingerprint identifies a block's content within its message.
func fingerprint(kind byte, parts ...string) uint64 {
	h := fnv.New64a()
	h.Write([]byte{kind})
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// blockKey returns the key of a block: its position among the distinct
// blocks of the message (the API content index when Claude writes every
// block), and whether the block was seen already.
func (m *message) blockKey(fp uint64) (string, bool) {
	if k, ok := m.blocks[fp]; ok {
		return k, true
	}
	k := strconv.Itoa(m.ordinal)
	m.ordinal++
	m.blocks[fp] = k
	return k, false
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// assistantBlock maps one content block of an assistant message.
func (d *Decoder) assistantBlock(s *session, msg *message, b *contentBlock) {
	switch b.Type {
	case "text":
		text := deref(b.Text)
		key, seen := msg.blockKey(fingerprint('t', text))
		delete(msg.partial, key)
		if seen || text == "" {
			return
		}
		d.emit(&agent.TextFinal{EventBase: d.base(s.key), Message: msg.id, Block: key, Text: text})
	case "thinking":
		text := deref(b.Thinking)
		key, seen := msg.blockKey(fingerprint('r', text, b.Signature))
		delete(msg.partial, key)
		if seen {
			return
		}
		var meta agent.Object
		if b.Signature != "" {
			meta = agent.Object{"signature": b.Signature}
		}
		d.emit(&agent.ReasoningFinal{EventBase: d.base(s.key), Message: msg.id, Block: key, Text: text, Metadata: meta})
	case "redacted_thinking":
		key, seen := msg.blockKey(fingerprint('x', b.Data))
		delete(msg.partial, key)
		if seen {
			return
		}
		d.emit(&agent.ReasoningFinal{EventBase: d.base(s.key), Message: msg.id, Block: key, Metadata: agent.Object{"redacted": true}})
	case "tool_use", "server_tool_use", "mcp_tool_use":
		if b.ID == "" {
			d.drop("assistant/"+b.Type, agent.DropMissingID, "tool_use block has no id")
			return
		}
		msg.blockKey(fingerprint('u', b.ID))
		d.toolUse(s, msg, b, true)
	default:
		if strings.HasSuffix(b.Type, "_tool_result") && b.ToolUseID != "" {
			if _, seen := msg.blockKey(fingerprint('s', b.ToolUseID)); !seen {
				d.serverToolResult(s, b)
			}
			return
		}
		if _, seen := msg.blockKey(fingerprint('?', b.Type, b.ID, deref(b.Text))); !seen {
			d.drop("assistant/"+b.Type, agent.DropUnknownType, "content block type not known to this version")
		}
	}
}

// toolUse maps a tool_use block: the call is announced (pending) and, once
// its input is complete, running. final is false for the start of a
// streamed block whose input is still to come.
func (d *Decoder) toolUse(s *session, msg *message, b *contentBlock, final bool) {
	msg.hasTools = true
	callID := b.ID
	if d.recent.has("t:" + callID) {
		return // the call is closed: a copy of its message
	}
	input := b.Input
	if final && !isObject(input) {
		d.drop("assistant/tool_use", agent.DropInvalidField, "tool_use input of "+callID+" is not a JSON object; recorded as {}")
		input = json.RawMessage(`{}`)
	}
	t := d.tools[callID]
	switch {
	case t == nil:
		t = d.addTool(callID, s.key, msg.id, b.Name, nil)
		if final {
			t.input = input
		}
		d.emit(d.toolCall(t))
	case final && (t.input == nil || t.msg == "" || t.name == ""):
		// The input of a streamed call is complete, or the call was known
		// from a permission request before its message.
		if t.input == nil {
			t.input = input
		}
		if t.name == "" {
			t.name = b.Name
		}
		if t.msg == "" {
			t.msg = msg.id
		}
		d.emit(d.toolCall(t))
	case t.session != s.key:
		// The id of another session's call (a subagent reusing it): the
		// call stays its first session's.
		if final {
			d.drop("assistant/tool_use", agent.DropIllegalTransition, "tool_use "+callID+" is a call of another session already; ignored")
		}
		return
	default:
		return
	}
	if !final {
		return
	}
	d.running(t)
	if isAgentTool(t.name) {
		d.startChild(t, parseInput(t.input))
	}
	if t.name == "AskUserQuestion" && !d.opts.ControlChannel && t.status == toolRunning {
		d.block(t, nil, questionRequest("question-"+callID, t.input))
	}
}

// toolCall builds the announcement of t.
func (d *Decoder) toolCall(t *tool) *agent.ToolCall {
	in := canonicalInput(t.name, t.input) // toolMeta's, decoded once
	ev := &agent.ToolCall{EventBase: d.base(t.session), Message: t.msg, CallID: t.callID, Tool: canonicalTool(t.name),
		Input: in, Metadata: agent.ToolMetadata(t.name, t.input, in)}
	if t.input != nil {
		ev.Title = toolTitle(t.name, parseInput(t.input))
	}
	return ev
}

// serverToolResult maps the result of a server-side tool (web search run
// by the API), which arrives inside the assistant message.
func (d *Decoder) serverToolResult(s *session, b *contentBlock) {
	out := string(b.Content)
	var str string
	if json.Unmarshal(b.Content, &str) == nil {
		out = str
	}
	ev := &agent.ToolCompleted{CallID: b.ToolUseID, Output: out}
	if t := d.tools[b.ToolUseID]; t != nil {
		ev.Title = toolTitle(t.name, parseInput(t.input))
		d.completeTool(t, ev)
		return
	}
	ev.EventBase = d.base(s.key)
	d.emit(ev)
}

// usage merges a usage block into the message's and reports it when it
// changed. Absent counts stay absent.
func (d *Decoder) usage(s *session, msg *message, u *usage) {
	if u.InputTokens != nil {
		msg.usage.InputTokens = u.InputTokens
	}
	if u.OutputTokens != nil {
		msg.usage.OutputTokens = u.OutputTokens
	}
	if u.CacheRead != nil {
		msg.usage.CacheRead = u.CacheRead
	}
	if u.CacheCreation != nil {
		msg.usage.CacheCreation = u.CacheCreation
	}
	val := func(p *int64) int64 {
		if p == nil {
			return -1
		}
		return *p
	}
	fp := [4]int64{val(msg.usage.InputTokens), val(msg.usage.OutputTokens), val(msg.usage.CacheRead), val(msg.usage.CacheCreation)}
	if fp == msg.usageFP || fp == [4]int64{-1, -1, -1, -1} {
		return
	}
	msg.usageFP = fp
	cp := func(p *int64) *int64 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	tok := &agent.Tokens{Input: cp(msg.usage.InputTokens), Output: cp(msg.usage.OutputTokens),
		Cache: agent.CacheTokens{Read: cp(msg.usage.CacheRead), Write: cp(msg.usage.CacheCreation)}}
	d.emit(&agent.Usage{EventBase: d.base(s.key), Message: msg.id, Tokens: tok})
}

var apiErrorStatusRE = regexp.MustCompile(`API Error: (\d{3})\b`)

// syntheticError maps the assistant message Claude writes itself when the
// API call failed (model "<synthetic>", isApiErrorMessage): an AgentError
// with a kind, never model text.
func (d *Decoder) syntheticError(r *record, sess string) {
	s := d.session(sess)
	id := r.Message.ID
	if id == "" {
		id = r.UUID
	}
	if id == "" {
		d.drop("assistant", agent.DropMissingID, "API error message has no id")
		return
	}
	if !d.recent.add("m:" + msgKey(sess, id)) {
		return
	}
	d.ensureTurn(s)
	blocks, _ := r.Message.blocks()
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && deref(b.Text) != "" {
			texts = append(texts, deref(b.Text))
		}
	}
	text := strings.Join(texts, "\n")
	status := r.APIErrorStatus
	if status == nil {
		if m := apiErrorStatusRE.FindStringSubmatch(text); m != nil {
			n, _ := strconv.Atoi(m[1])
			status = &n
		}
	}
	var code string
	_ = json.Unmarshal(r.Error, &code)
	s.turnErr, s.errEmitted = text, true
	d.emit(&agent.AgentError{EventBase: d.base(sess), Message: id, Kind: errorKind(status, code, text), Text: text, StatusCode: status})
}

// errorKind classifies an API failure (seed 002 "Error Kinds") from the
// HTTP status, Claude's error code or, failing both, the message.
func errorKind(status *int, code, text string) agent.ErrorKind {
	if status != nil {
		switch st := *status; {
		case st == 401 || st == 403:
			return agent.ErrorAuth
		case st == 429 || st == 529:
			return agent.ErrorRateLimit
		case st == 408 || (st >= 500 && st <= 599):
			return agent.ErrorTransport
		case st >= 400 && st <= 499:
			return agent.ErrorProtocol
		}
	}
	switch code {
	case "authentication_failed", "authentication_error", "permission_error", "oauth_org_not_allowed":
		return agent.ErrorAuth
	case "rate_limit", "rate_limit_error", "overloaded", "overloaded_error":
		return agent.ErrorRateLimit
	case "server_error", "api_error", "timeout":
		return agent.ErrorTransport
	case "invalid_request", "invalid_request_error", "not_found_error", "request_too_large":
		return agent.ErrorProtocol
	}
	low := strings.ToLower(text)
	switch {
	case strings.Contains(low, "invalid api key"), strings.Contains(low, "/login"), strings.Contains(low, "oauth token"),
		strings.Contains(low, "authentication"):
		return agent.ErrorAuth
	case strings.Contains(low, "hit your limit"), strings.Contains(low, "usage limit"), strings.Contains(low, "rate limit"),
		strings.Contains(low, "overloaded"):
		return agent.ErrorRateLimit
	case strings.Contains(low, "connection"), strings.Contains(low, "econnreset"), strings.Contains(low, "timed out"),
		strings.Contains(low, "etimedout"), strings.Contains(low, "unable to connect"):
		return agent.ErrorTransport
	}
	return agent.ErrorInternal
}
