// Package refimport reads sessions the reference CLI wrote: their legacy
// rows and agentState projected onto the canonical model, the inverse of
// package session/compat (docs/ARCHITECTURE.md, section "The reference
// app").
package refimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/mapper"
)

// DroppedSource is the Dropped.Source of the legacy rows and agentState
// entries an Importer could not map.
const DroppedSource = "reference"

// maxRaw is the most of a refused input a Dropped record carries.
const maxRaw = 512

// Importer reads a session the reference CLI wrote (docs/ARCHITECTURE.md,
// section "The reference app"): its legacy rows — the app's
// prompts {role:"user"}, the session-protocol envelopes {role:"session"}
// (seed 000's flat event stream, which compat.Writer writes) and the older
// {role:"agent"} families (acp, codex, output, event, session) — and the
// permissions of its agentState, projected onto the canonical model
// (seed 001): the exact inverse of compat.Writer where it has a form. What
// cannot be mapped becomes a Dropped record (Source DroppedSource, Line
// the relay seq) with its reason.
//
// The projection is rebuilt from the rows on every Transcript, so rows and
// agentState may come in any number of steps (happy log --follow). Rows
// must be added in seq order. The zero value is ready to use; not safe for
// concurrent use.
type Importer struct {
	rows  []importRow
	state json.RawMessage
}

type importRow struct {
	seq   int64
	plain []byte
}

// Add takes one decrypted legacy row at relay seq seq (a copy is kept).
func (im *Importer) Add(seq int64, plaintext []byte) {
	im.rows = append(im.rows, importRow{seq: seq, plain: bytes.Clone(plaintext)})
}

// Reset forgets the rows added (not the agentState): a reader that learns
// the session has canonical records keeps no legacy rows.
func (im *Importer) Reset() { im.rows = nil }

// Len is the number of rows added (since Reset).
func (im *Importer) Len() int { return len(im.rows) }

// SetAgentState sets the session's agentState (decrypted JSON, nil when
// none) whose requests and completedRequests become permission blocks.
func (im *Importer) SetAgentState(raw json.RawMessage) { im.state = bytes.Clone(raw) }

// Transcript projects the rows onto a transcript whose root session is
// root (its id must not be empty): prompts become user messages, each turn
// one assistant message with its text, reasoning, tools and files, each
// subagent a child session. An untitled root takes the first line of its
// first prompt as title. Dropped records come last, in row order, then
// those of the agentState.
func (im *Importer) Transcript(root mapper.Session) mapper.Transcript {
	b := &builder{root: root.ID, tools: map[string]*toolRef{}, seen: map[string]bool{}, subs: map[string]*isession{}}
	b.rootS = b.newSession("", root)
	for _, r := range im.rows {
		b.row(r.seq, r.plain)
	}
	b.permissions(im.state)
	if strings.TrimSpace(b.rootS.s.Title) == "" {
		b.rootS.s.Title = b.firstPrompt
	}
	t := b.transcript(b.rootS, 0)
	t.Dropped = append(t.Dropped, b.dropped...)
	return t
}

// isession is one session being built: the root or a subagent's.
type isession struct {
	s    mapper.Session
	msgs []*mapper.MessageWithParts
	kids []*isession
	user string                   // the last user message's id
	cur  *mapper.MessageWithParts // the open assistant message
	turn string                   // its turn id
}

// toolRef is where a tool part lives.
type toolRef struct {
	part *mapper.ToolPart
	sess *isession
	msg  *mapper.MessageWithParts
	name string // the native name it was announced with
}

type builder struct {
	root        string
	rootS       *isession
	pos         uint64
	tools       map[string]*toolRef // by call id
	order       []*toolRef          // tools in order of announcement
	seen        map[string]bool     // envelope ids (the first one counts)
	subs        map[string]*isession
	dropped     []agent.Dropped
	firstPrompt string
}

func (b *builder) id(prefix, identity string) string {
	b.pos++
	return mapper.MakeID(prefix, b.root, b.pos, identity)
}

func (b *builder) drop(seq int64, kind string, reason agent.DropReason, detail string, raw []byte) {
	if len(raw) > maxRaw {
		raw = raw[:maxRaw]
	}
	b.dropped = append(b.dropped, agent.Dropped{Source: DroppedSource, Line: seq, Kind: kind, Reason: reason, Detail: detail, Raw: string(raw)})
}

func (b *builder) newSession(key string, s mapper.Session) *isession {
	is := &isession{s: s}
	if key != "" {
		b.subs[key] = is
	}
	return is
}

// sub is the session of subagent key ("" the root); a new one is a child
// of the session holding the tool call of that id (the root when none).
func (b *builder) sub(key string) *isession {
	if key == "" {
		return b.rootS
	}
	if s, ok := b.subs[key]; ok {
		return s
	}
	parent := b.rootS
	tr := b.tools[key]
	if tr != nil {
		parent = tr.sess
	}
	s := b.newSession(key, mapper.Session{ID: b.id(mapper.PrefixSession, "subagent:"+key), ParentID: parent.s.ID,
		Directory: b.rootS.s.Directory, ProjectID: b.rootS.s.ProjectID})
	parent.kids = append(parent.kids, s)
	if tr != nil {
		b.link(tr, s.s.ID)
	}
	return s
}

// link names the child session of a subagent on the tool call that
// started it (state metadata sessionId, as the reducer links a task).
func (b *builder) link(tr *toolRef, child string) {
	st := &tr.part.State
	if st.Status == mapper.StatusPending {
		return
	}
	st.Metadata = mergeObj(st.Metadata, agent.Object{"sessionId": child})
}

func mergeObj(a, b agent.Object) agent.Object {
	out := agent.Object{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func (b *builder) transcript(s *isession, depth int) mapper.Transcript {
	t := mapper.Transcript{Session: s.s, Messages: make([]mapper.MessageWithParts, 0, len(s.msgs)), Children: []mapper.Transcript{},
		Todos: []agent.Todo{}, Dropped: []agent.Dropped{}}
	for _, m := range s.msgs {
		if len(m.Parts) == 0 {
			m.Parts = []mapper.Part{}
		}
		t.Messages = append(t.Messages, *m)
	}
	if depth < mapper.MaxNesting {
		for _, k := range s.kids {
			t.Children = append(t.Children, b.transcript(k, depth+1))
		}
	}
	return t
}

// row dispatches one legacy row on its role.
func (b *builder) row(seq int64, plain []byte) {
	var env struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(plain, &env); err != nil {
		b.drop(seq, "", agent.DropInvalidField, "not a legacy record: "+err.Error(), plain)
		return
	}
	var c struct {
		Type string          `json:"type"`
		Text *string         `json:"text"`
		Data json.RawMessage `json:"data"`
	}
	if len(env.Content) == 0 || env.Content[0] != '{' || json.Unmarshal(env.Content, &c) != nil {
		b.drop(seq, env.Role, agent.DropInvalidField, "content must be an object", plain)
		return
	}
	switch env.Role {
	case "user":
		if c.Type != "text" || c.Text == nil {
			b.drop(seq, "user", agent.DropInvalidField, "a prompt needs content {type:\"text\", text}", plain)
			return
		}
		b.userText(b.rootS, fmt.Sprintf("prompt:%d", seq), 0, *c.Text)
	case "session":
		data := env.Content
		if c.Type == "session" && len(c.Data) > 0 {
			data = c.Data
		}
		b.envelope(seq, data, plain)
	case "agent":
		switch c.Type {
		case "session":
			b.envelope(seq, c.Data, plain)
		case "acp", "codex":
			b.provider(seq, "agent/"+c.Type, c.Data, plain)
		case "output":
			b.output(seq, c.Data, plain)
		case "event":
			b.event(seq, c.Data, plain)
		default:
			b.drop(seq, "agent/"+c.Type, agent.DropUnknownType, "an agent record of a type this version does not know", plain)
		}
	default:
		b.drop(seq, env.Role, agent.DropUnknownType, "a legacy record of a role this version does not know", plain)
	}
}

// sessionEnvelope is seed 000's envelope: {id, time, role, turn?,
// subagent?, ev:{t, …}} ("invoke" is the draft name of subagent).
type sessionEnvelope struct {
	ID       string          `json:"id"`
	Time     int64           `json:"time"`
	Role     string          `json:"role"`
	Turn     string          `json:"turn"`
	Subagent string          `json:"subagent"`
	Invoke   string          `json:"invoke"`
	Ev       json.RawMessage `json:"ev"`
}

type sessionEvent struct {
	T           string          `json:"t"`
	Text        *string         `json:"text"`
	Thinking    bool            `json:"thinking"`
	Call        string          `json:"call"`
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Args        json.RawMessage `json:"args"`
	Status      string          `json:"status"`
	Ref         string          `json:"ref"`
	Size        int64           `json:"size"`
	Image       json.RawMessage `json:"image"`
	Width       int             `json:"width"`
	Height      int             `json:"height"`
	Thumbhash   string          `json:"thumbhash"`
	Mime        string          `json:"mimeType"`
}

func (b *builder) envelope(seq int64, raw, plain []byte) {
	var e sessionEnvelope
	var ev sessionEvent
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &e) != nil {
		b.drop(seq, "session", agent.DropInvalidField, "a session envelope must be an object {id, time, role, ev}", plain)
		return
	}
	if len(e.Ev) == 0 || e.Ev[0] != '{' || json.Unmarshal(e.Ev, &ev) != nil || ev.T == "" {
		b.drop(seq, "session", agent.DropInvalidField, "the envelope's ev must be an object with a type t", plain)
		return
	}
	kind := "session/" + ev.T
	if e.ID == "" {
		b.drop(seq, kind, agent.DropMissingID, "a session envelope needs an id", plain)
		return
	}
	if b.seen[e.ID] {
		b.drop(seq, kind, agent.DropInvalidField, fmt.Sprintf("envelope id %q seen before (the first one counts)", e.ID), plain)
		return
	}
	b.seen[e.ID] = true
	sub := e.Subagent
	if sub == "" {
		sub = e.Invoke
	}
	s := b.sub(sub)
	switch e.Role {
	case "user":
		switch ev.T {
		case "text":
			if ev.Text == nil {
				b.drop(seq, kind, agent.DropInvalidField, "a text event needs text", plain)
				return
			}
			b.userText(s, e.ID, e.Time, *ev.Text)
		case "file", "photo":
			m := b.userMessage(s, e.ID, e.Time)
			m.Parts = append(m.Parts, b.file(m, e, ev))
		default:
			b.drop(seq, kind, agent.DropUnknownType, "a user event of a type this version does not know", plain)
		}
		return
	case "agent":
	default:
		b.drop(seq, kind, agent.DropInvalidField, fmt.Sprintf("envelope role %q is neither user nor agent", e.Role), plain)
		return
	}
	switch ev.T {
	case "turn-start":
		b.closeTurn(s, e.Time, "")
		m := b.assistant(s, e.Turn, e.Time)
		m.Parts = append(m.Parts, &mapper.StepStartPart{PartBase: b.base(m, e.ID)})
	case "turn-end":
		finish := map[string]string{"completed": agent.FinishStop, "failed": agent.FinishError, "cancelled": agent.FinishAborted}[ev.Status]
		if finish == "" {
			b.drop(seq, kind, agent.DropInvalidField, fmt.Sprintf("turn-end status %q is not completed, failed or cancelled", ev.Status), plain)
			return
		}
		if s.cur == nil || (e.Turn != "" && s.turn != e.Turn) {
			b.drop(seq, kind, agent.DropOrphan, fmt.Sprintf("turn-end of turn %q, which is not open", e.Turn), plain)
			return
		}
		b.closeTurn(s, e.Time, finish)
	case "text", "service":
		if ev.Text == nil {
			b.drop(seq, kind, agent.DropInvalidField, "a text event needs text", plain)
			return
		}
		m := b.assistant(s, e.Turn, e.Time)
		end := e.Time
		switch {
		case ev.T == "text" && ev.Thinking:
			m.Parts = append(m.Parts, &mapper.ReasoningPart{PartBase: b.base(m, e.ID), Text: *ev.Text, Time: mapper.PartTime{Start: e.Time, End: &end}})
		default:
			m.Parts = append(m.Parts, &mapper.TextPart{PartBase: b.base(m, e.ID), Text: *ev.Text, Synthetic: ev.T == "service",
				Time: &mapper.PartTime{Start: e.Time, End: &end}})
		}
	case "tool-call-start":
		if ev.Call == "" || ev.Name == "" {
			b.drop(seq, kind, agent.DropMissingID, "a tool-call-start needs call and name", plain)
			return
		}
		args, ok := object(ev.Args)
		if !ok {
			b.drop(seq, kind, agent.DropInvalidField, "tool-call-start args must be an object", plain)
			return
		}
		b.startTool(seq, kind, s, e.Turn, e.ID, e.Time, ev.Call, ev.Name, ev.Title, ev.Description, args, plain)
	case "tool-call-end":
		b.endTool(seq, kind, ev.Call, e.Time, nil, false, plain)
	case "file", "photo":
		m := b.assistant(s, e.Turn, e.Time)
		m.Parts = append(m.Parts, b.file(m, e, ev))
	case "start":
		if ev.Title != "" && s != b.rootS {
			s.s.Title = ev.Title
		}
	case "stop":
		if s != b.rootS {
			b.closeTurn(s, e.Time, agent.FinishStop)
		}
	default:
		b.drop(seq, kind, agent.DropUnknownType, "a session event of a type this version does not know", plain)
	}
}

// file is an attachment event as a file part: the upload reference as its
// URL ("ref:<id>"), its name, and an image's size and thumbhash kept in
// metadata-free source form.
func (b *builder) file(m *mapper.MessageWithParts, e sessionEnvelope, ev sessionEvent) *mapper.FilePart {
	mime := ev.Mime
	if mime == "" {
		mime = "application/octet-stream"
		if ev.T == "photo" || len(ev.Image) > 0 && string(ev.Image) != "null" {
			mime = "image/*"
		}
	}
	return &mapper.FilePart{PartBase: b.base(m, e.ID), Mime: mime, Filename: ev.Name, URL: "ref:" + ev.Ref}
}

func (b *builder) base(m *mapper.MessageWithParts, identity string) mapper.PartBase {
	return mapper.PartBase{ID: b.id(mapper.PrefixPart, identity), SessionID: sessionOfMsg(m.Info), MessageID: m.Info.MessageID()}
}

func sessionOfMsg(m mapper.Message) string {
	switch v := m.(type) {
	case *mapper.UserMessage:
		return v.SessionID
	case *mapper.AssistantMessage:
		return v.SessionID
	}
	return ""
}

// userMessage opens a user message in s (a prompt ends the turn before).
func (b *builder) userMessage(s *isession, identity string, at int64) *mapper.MessageWithParts {
	b.closeTurn(s, at, "")
	m := &mapper.MessageWithParts{Info: &mapper.UserMessage{ID: b.id(mapper.PrefixMessage, identity), SessionID: s.s.ID, Role: mapper.RoleUser,
		Time: mapper.UserTime{Created: at}}}
	s.msgs = append(s.msgs, m)
	s.user = m.Info.MessageID()
	return m
}

func (b *builder) userText(s *isession, identity string, at int64, text string) {
	m := b.userMessage(s, identity, at)
	m.Parts = append(m.Parts, &mapper.TextPart{PartBase: b.base(m, identity), Text: text})
	if s == b.rootS && b.firstPrompt == "" {
		line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
		b.firstPrompt = strings.TrimSpace(line)
	}
}

// assistant is the assistant message of turn in s: the open one when it is
// that turn's (or turn is empty: an event without a turn belongs to the
// turn open), else a new one.
func (b *builder) assistant(s *isession, turn string, at int64) *mapper.MessageWithParts {
	if s.cur != nil && (turn == "" || turn == s.turn) {
		return s.cur
	}
	b.closeTurn(s, at, "")
	identity := "turn:" + turn
	if turn == "" {
		identity = fmt.Sprintf("turn@%d", b.pos)
	}
	m := &mapper.MessageWithParts{Info: &mapper.AssistantMessage{ID: b.id(mapper.PrefixMessage, identity), SessionID: s.s.ID, Role: mapper.RoleAssistant,
		Time: mapper.AssistantTime{Created: at}, ParentID: s.user}}
	s.msgs = append(s.msgs, m)
	s.cur, s.turn = m, turn
	return m
}

// closeTurn closes s's open assistant message: with finish (and a
// step-finish part) when the turn ended, left open (no completion time)
// when something else came first.
func (b *builder) closeTurn(s *isession, at int64, finish string) {
	m := s.cur
	if m == nil {
		return
	}
	s.cur, s.turn = nil, ""
	if finish == "" {
		return
	}
	am := m.Info.(*mapper.AssistantMessage)
	done := at
	am.Time.Completed, am.Finish = &done, finish
	m.Parts = append(m.Parts, &mapper.StepFinishPart{PartBase: b.base(m, fmt.Sprintf("finish@%d", b.pos)), Reason: finish})
}

// startTool announces a tool call in s's turn: the canonical tool of the
// native name (Claude's names, as Writer writes them) with its input, the
// native name and arguments kept in metadata when they differ.
func (b *builder) startTool(seq int64, kind string, s *isession, turn, identity string, at int64, call, name, title, desc string, args agent.Object, plain []byte) {
	if _, dup := b.tools[call]; dup {
		b.drop(seq, kind, agent.DropInvalidField, fmt.Sprintf("tool call %q announced before", call), plain)
		return
	}
	m := b.assistant(s, turn, at)
	tool, input := CanonicalTool(name, args)
	st := mapper.ToolState{Status: mapper.StatusRunning, Input: input, Time: mapper.ToolTime{Start: at}}
	if title != "" && title != name {
		st.Title = title
	}
	if desc != "" {
		if _, ok := input["description"]; !ok {
			st.Metadata = agent.Object{"description": desc}
		}
	}
	tp := &mapper.ToolPart{PartBase: b.base(m, identity), CallID: call, Tool: tool, State: st}
	if tool != name {
		tp.Metadata = agent.Object{agent.MetaProviderTool: name}
		if !reflect.DeepEqual(map[string]any(input), map[string]any(args)) {
			tp.Metadata[agent.MetaProviderInput] = args
		}
	}
	m.Parts = append(m.Parts, tp)
	ref := &toolRef{part: tp, sess: s, msg: m, name: name}
	b.tools[call] = ref
	b.order = append(b.order, ref)
	if sub, ok := b.subs[call]; ok {
		// Its subagent spoke before the call was announced.
		b.link(ref, sub.s.ID)
	}
}

// endTool ends tool call: completed with output, or error (isErr); a
// tool-call-end without a result is completed without output. Only the
// first end counts.
func (b *builder) endTool(seq int64, kind, call string, at int64, output *string, isErr bool, plain []byte) {
	tr := b.tools[call]
	if tr == nil {
		b.drop(seq, kind, agent.DropOrphan, fmt.Sprintf("the end of tool call %q, which was never announced", call), plain)
		return
	}
	st := &tr.part.State
	if !st.Status.Open() {
		// A tool-call-end after its result (Writer writes both), or a
		// second result: the first one counts.
		if output == nil {
			return
		}
		b.drop(seq, kind, agent.DropIllegalTransition, fmt.Sprintf("a second result of tool call %q (the first one counts)", call), plain)
		return
	}
	end := at
	if end < st.Time.Start {
		end = st.Time.Start
	}
	st.Time.End = end
	if isErr {
		st.Status, st.Title, st.Error = mapper.StatusError, "", "error"
		if output != nil && *output != "" {
			st.Error = *output
		}
		return
	}
	st.Status = mapper.StatusCompleted
	if output != nil {
		st.Output = *output
	}
}

// provider maps an acp or codex record's data.
func (b *builder) provider(seq int64, kind string, data, plain []byte) {
	var d struct {
		Type     string          `json:"type"`
		Message  *string         `json:"message"`
		Text     *string         `json:"text"`
		CallID   string          `json:"callId"`
		Name     string          `json:"name"`
		Input    json.RawMessage `json:"input"`
		ID       string          `json:"id"`
		Output   json.RawMessage `json:"output"`
		IsError  bool            `json:"isError"`
		ToolName string          `json:"toolName"`
	}
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &d) != nil || d.Type == "" {
		b.drop(seq, kind, agent.DropInvalidField, "data must be an object with a type", plain)
		return
	}
	kind += "/" + d.Type
	s := b.rootS
	text := d.Message
	if text == nil {
		text = d.Text
	}
	switch d.Type {
	case "message":
		if text == nil {
			b.drop(seq, kind, agent.DropInvalidField, "a message needs message", plain)
			return
		}
		m := b.assistant(s, s.turn, 0)
		m.Parts = append(m.Parts, &mapper.TextPart{PartBase: b.base(m, fmt.Sprintf("row:%d", seq)), Text: *text})
	case "reasoning", "thinking":
		if text == nil {
			b.drop(seq, kind, agent.DropInvalidField, "reasoning needs text", plain)
			return
		}
		m := b.assistant(s, s.turn, 0)
		m.Parts = append(m.Parts, &mapper.ReasoningPart{PartBase: b.base(m, fmt.Sprintf("row:%d", seq)), Text: *text})
	case "tool-call":
		args, ok := object(d.Input)
		if d.CallID == "" || d.Name == "" || !ok {
			b.drop(seq, kind, agent.DropInvalidField, "a tool-call needs callId, name and an input object", plain)
			return
		}
		b.startTool(seq, kind, s, s.turn, fmt.Sprintf("row:%d", seq), 0, d.CallID, d.Name, "", "", args, plain)
	case "tool-result", "tool-call-result":
		out := outputText(d.Output)
		b.endTool(seq, kind, d.CallID, 0, &out, d.IsError, plain)
	case "task_started":
		b.closeTurn(s, 0, "")
		b.assistant(s, fmt.Sprintf("task@%d", seq), 0)
	case "task_complete":
		b.closeTurn(s, 0, agent.FinishStop)
	case "turn_aborted":
		b.closeTurn(s, 0, agent.FinishAborted)
	case "permission-request":
		b.drop(seq, kind, agent.DropUnknownType, "a permission is read from the session's agentState, not from this record", plain)
	default:
		b.drop(seq, kind, agent.DropUnknownType, "not transcript content this version maps (token counts, file edits, terminal output, …)", plain)
	}
}

// outputText is a tool output as text: a JSON string as it is, anything
// else as its JSON text (null as "").
func outputText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// output maps a Claude SDK line ({role:"agent", content:{type:"output",
// data}}): assistant text, thinking and tool_use blocks; user prompts and
// tool_result blocks; a result ends the turn.
func (b *builder) output(seq int64, data, plain []byte) {
	var d struct {
		Type    string `json:"type"`
		UUID    string `json:"uuid"`
		IsError bool   `json:"is_error"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &d) != nil {
		b.drop(seq, "agent/output", agent.DropInvalidField, "data must be an object", plain)
		return
	}
	kind := "agent/output/" + d.Type
	s := b.rootS
	type block struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Thinking  string          `json:"thinking"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
	var blocks []block
	var str string
	isString := json.Unmarshal(d.Message.Content, &str) == nil
	if !isString && json.Unmarshal(d.Message.Content, &blocks) != nil && (d.Type == "assistant" || d.Type == "user") {
		b.drop(seq, kind, agent.DropInvalidField, "message.content must be a string or an array of blocks", plain)
		return
	}
	switch d.Type {
	case "assistant":
		for i, bl := range blocks {
			identity := fmt.Sprintf("row:%d:%d", seq, i)
			switch bl.Type {
			case "text":
				m := b.assistant(s, s.turn, 0)
				m.Parts = append(m.Parts, &mapper.TextPart{PartBase: b.base(m, identity), Text: bl.Text})
			case "thinking":
				m := b.assistant(s, s.turn, 0)
				m.Parts = append(m.Parts, &mapper.ReasoningPart{PartBase: b.base(m, identity), Text: bl.Thinking})
			case "tool_use", "tool-call":
				args, ok := object(bl.Input)
				if bl.ID == "" || bl.Name == "" || !ok {
					b.drop(seq, kind, agent.DropInvalidField, fmt.Sprintf("content[%d]: a tool_use needs id, name and an input object", i), plain)
					continue
				}
				b.startTool(seq, kind, s, s.turn, identity, 0, bl.ID, bl.Name, "", "", args, plain)
			default:
				b.drop(seq, kind, agent.DropUnknownType, fmt.Sprintf("content[%d]: a block of type %q", i, bl.Type), plain)
			}
		}
	case "user":
		if isString {
			b.userText(s, fmt.Sprintf("row:%d", seq), 0, str)
			return
		}
		for i, bl := range blocks {
			switch bl.Type {
			case "text":
				b.userText(s, fmt.Sprintf("row:%d:%d", seq, i), 0, bl.Text)
			case "tool_result":
				out := claudeResultText(bl.Content)
				b.endTool(seq, kind, bl.ToolUseID, 0, &out, bl.IsError, plain)
			default:
				b.drop(seq, kind, agent.DropUnknownType, fmt.Sprintf("content[%d]: a block of type %q", i, bl.Type), plain)
			}
		}
	case "result":
		finish := agent.FinishStop
		if d.IsError {
			finish = agent.FinishError
		}
		b.closeTurn(s, 0, finish)
	default:
		b.drop(seq, kind, agent.DropUnknownType, "a Claude line that is not transcript content (system, summary, …)", plain)
	}
}

// claudeResultText is a tool_result's content as text: a string, or the
// text blocks joined by newlines.
func claudeResultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, bl := range blocks {
			if bl.Type == "text" {
				parts = append(parts, bl.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return outputText(raw)
}

// event maps {role:"agent", content:{type:"event", data}}: ready ends the
// turn, a message is a synthetic text; mode switches and limits are not
// transcript content.
func (b *builder) event(seq int64, data, plain []byte) {
	var d struct {
		Type    string  `json:"type"`
		Message *string `json:"message"`
	}
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &d) != nil {
		b.drop(seq, "agent/event", agent.DropInvalidField, "data must be an object", plain)
		return
	}
	kind := "agent/event/" + d.Type
	s := b.rootS
	switch d.Type {
	case "ready":
		if s.cur != nil {
			b.closeTurn(s, 0, agent.FinishStop)
		}
	case "message":
		if d.Message == nil {
			b.drop(seq, kind, agent.DropInvalidField, "an event message needs message", plain)
			return
		}
		m := b.assistant(s, s.turn, 0)
		m.Parts = append(m.Parts, &mapper.TextPart{PartBase: b.base(m, fmt.Sprintf("row:%d", seq)), Text: *d.Message, Synthetic: true})
	default:
		b.drop(seq, kind, agent.DropUnknownType, "an event that is not transcript content (mode switch, usage limit)", plain)
	}
}

// object decodes a JSON object (absent or null: an empty one).
func object(raw json.RawMessage) (agent.Object, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return agent.Object{}, true
	}
	o, err := jsonlex.DecodeObject(raw)
	if err != nil || o == nil {
		return nil, false
	}
	return o, true
}

// CanonicalTool is the canonical tool of a native tool name and its
// arguments, the inverse of compat.NativeTool: a Claude tool (Bash, Read, Edit, …)
// as the canonical tool with its input keys spelled canonically,
// mcp__<server>__<tool> as "mcp:<server>/<tool>", anything else under its
// own name with its arguments.
func CanonicalTool(name string, args agent.Object) (string, agent.Object) {
	if alias, ok := claudeAliases[name]; ok {
		name = alias
	}
	for tool, ct := range ClaudeTools {
		if ct.Name != name {
			continue
		}
		in := agent.Object{}
		for k, v := range args {
			for ck, nk := range ct.Keys {
				if nk == k {
					k = ck
					break
				}
			}
			in[k] = v
		}
		return tool, in
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if server, tool, ok := strings.Cut(rest, "__"); ok && server != "" && tool != "" {
			return "mcp:" + server + "/" + tool, args
		}
	}
	return name, args
}

// claudeAliases are Claude's other names of the tools of ClaudeTools
// (Claude 2.1 offers Task to the model as Agent).
var claudeAliases = map[string]string{"Agent": "Task"}

// ClaudeTool is the Claude name of a canonical tool and its input keys
// spelled as Claude spells them (canonical key → Claude key).
type ClaudeTool struct {
	Name string
	Keys map[string]string
}

// ClaudeTools are the Claude tools of the canonical tools the reference
// app's renderers know (Bash, Read, Edit, …), by canonical name. Read only.
var ClaudeTools = map[string]ClaudeTool{
	agent.ToolBash:  {"Bash", nil},
	agent.ToolRead:  {"Read", map[string]string{"path": "file_path"}},
	agent.ToolWrite: {"Write", map[string]string{"path": "file_path"}},
	agent.ToolEdit: {"Edit", map[string]string{"path": "file_path", "oldString": "old_string", "newString": "new_string",
		"replaceAll": "replace_all"}},
	agent.ToolGlob:     {"Glob", nil},
	agent.ToolGrep:     {"Grep", nil},
	agent.ToolFetch:    {"WebFetch", nil},
	agent.ToolSearch:   {"WebSearch", nil},
	agent.ToolTask:     {"Task", map[string]string{"agent": "subagent_type"}},
	agent.ToolTodo:     {"TodoWrite", nil},
	agent.ToolQuestion: {"AskUserQuestion", nil},
	agent.ToolPlan:     {"ExitPlanMode", nil},
}
