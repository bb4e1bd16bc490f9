package mapper

// Strict decoding of the model. Every refusal is a *FieldError naming the
// path from the root of the input and the reason; nothing panics, nothing
// is guessed.
//
// Rules, in addition to each type's own shape:
//
//   - The input must be valid JSON; the value decoded must be an object
//     (reasons unparseable_json and not_an_object).
//   - A member of a model object must have its JSON type: null is never
//     accepted in place of a value (omit an optional member instead), an
//     integer field refuses 1.5 and 1e3, a tool input refuses an array.
//   - Ids (id, sessionID, messageID, callID, block id) must be non-empty
//     strings (reason missing_id).
//   - Enumerations are exact: an unknown role, status, block type, finish
//     reason, decision, action, todo status or priority is refused. The one
//     exception is an error kind, which degrades to "internal" (seed 002).
//   - A member repeated in a model object is refused (in free-form objects
//     such as tool input and metadata the last one wins, as in JavaScript).
//   - A member this version does not know is ignored and counted in
//     DecodeReport (forward compatibility: a newer writer's extra field does
//     not make an older reader refuse the record; it is not written back).
//     A member known to the model but not to this object's variant (output
//     on a running tool, questions on a permission block) is refused.
//   - A part whose type this version does not know is kept whole as an
//     UnknownPart and counted.
//
// Granularity: DecodeTranscript and DecodeMessageWithParts refuse one bad
// part (or, in a transcript, one bad message) as a Dropped record with the
// reason and the path, and keep the rest; everything else (the session,
// todos, dropped list, children's sessions, a message's envelope in
// DecodeMessageWithParts) is refused with the whole call's error.

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// DroppedSourceTranscript is the Dropped.Source of records refused while
// decoding the canonical transcript JSON itself.
const DroppedSourceTranscript = "transcript"

// maxIgnoredPaths bounds DecodeReport.IgnoredPaths.
const maxIgnoredPaths = 16

// DecodeReport says what a decode call kept, refused and ignored.
type DecodeReport struct {
	// UnknownParts counts parts of a type this version does not know, kept
	// as UnknownPart and written back unchanged.
	UnknownParts int
	// Refused lists the parts and messages refused (DecodeTranscript also
	// appends each to the Dropped list of the transcript that held it).
	Refused []agent.Dropped
	// IgnoredFields counts object members this version does not know.
	IgnoredFields int
	// IgnoredPaths holds the paths of the first 16 ignored members.
	IgnoredPaths []string
}

type decoder struct {
	report DecodeReport
}

// decodeRoot checks that data is one valid JSON object and reads it with
// read; the value is the zero T when anything was refused.
func decodeRoot[T any](d *decoder, data []byte, read func(*obj) T) (T, error) {
	var zero T
	raw, err := jsonlex.Root(data)
	if err != nil {
		return zero, rootError(err)
	}
	o := d.open(raw, "")
	v := read(o)
	if err := *o.err; err != nil {
		return zero, err
	}
	return v, nil
}

// DecodeTranscript decodes a transcript document (see Transcript and
// EncodeTranscript). A message whose envelope is invalid, or that belongs to
// another session or repeats an id, is refused with its parts; a part that
// is invalid, belongs to another message or repeats an id is refused alone.
// Each refusal is appended to the Dropped list of the transcript (root or
// child) that held it, with Source "transcript", and listed in the report.
// Anything else invalid fails the call with a *FieldError wrapping
// ErrInvalid, e.g. `children[0].session.parentID: missing`.
func DecodeTranscript(data []byte) (Transcript, DecodeReport, error) {
	var d decoder
	t, err := decodeRoot(&d, data, func(o *obj) Transcript { return d.transcript(o, nil, 0) })
	return t, d.report, err
}

// DecodeMessageWithParts decodes {"info":…,"parts":[…]}. An invalid
// envelope fails the call; an invalid part (or one filed under another
// message, or a repeated part id) is refused alone and listed in
// DecodeReport.Refused with its reason, e.g. detail
// `parts[3].state: blocked tool needs an unresolved block`; the other parts
// are kept in order.
func DecodeMessageWithParts(data []byte) (MessageWithParts, DecodeReport, error) {
	var d decoder
	m, err := decodeRoot(&d, data, func(o *obj) MessageWithParts { return d.messageWithParts(o, true) })
	return m, d.report, err
}

// DecodeMessage decodes a message envelope: a *UserMessage or an
// *AssistantMessage, chosen by "role".
func DecodeMessage(data []byte) (Message, error) {
	var d decoder
	return decodeRoot(&d, data, d.message)
}

// DecodePart decodes one part, chosen by "type". A type this version does
// not know decodes as an *UnknownPart holding the part's JSON (compacted).
func DecodePart(data []byte) (Part, error) {
	var d decoder
	return decodeRoot(&d, data, d.part)
}

// DecodeToolState decodes a tool state (see ToolState for the members of
// each status).
func DecodeToolState(data []byte) (ToolState, error) {
	var d decoder
	return decodeRoot(&d, data, d.toolState)
}

// DecodeBlock decodes a permission or question block, unresolved or
// resolved (see Block).
func DecodeBlock(data []byte) (Block, error) {
	var d decoder
	b, err := decodeRoot(&d, data, d.block)
	if err != nil {
		return Block{}, err
	}
	return *b, nil
}

// UnmarshalJSON implements json.Unmarshaler with DecodeTranscript: refused
// messages and parts end up in the Dropped lists.
func (t *Transcript) UnmarshalJSON(data []byte) error {
	v, _, err := DecodeTranscript(data)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// UnmarshalJSON implements json.Unmarshaler strictly: unlike
// DecodeMessageWithParts, one invalid part fails the whole call.
func (m *MessageWithParts) UnmarshalJSON(data []byte) error {
	var d decoder
	v, err := decodeRoot(&d, data, func(o *obj) MessageWithParts { return d.messageWithParts(o, false) })
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// UnmarshalJSON implements json.Unmarshaler with DecodeToolState.
func (s *ToolState) UnmarshalJSON(data []byte) error {
	v, err := DecodeToolState(data)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// UnmarshalJSON implements json.Unmarshaler with DecodeBlock.
func (b *Block) UnmarshalJSON(data []byte) error {
	v, err := DecodeBlock(data)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// UnmarshalJSON implements json.Unmarshaler with DecodeMessage; the role
// must be "user".
func (m *UserMessage) UnmarshalJSON(data []byte) error {
	v, err := DecodeMessage(data)
	if err != nil {
		return err
	}
	u, ok := v.(*UserMessage)
	if !ok {
		return invalid("role", "want a user message, got role %q", v.MessageRole())
	}
	*m = *u
	return nil
}

// UnmarshalJSON implements json.Unmarshaler with DecodeMessage; the role
// must be "assistant".
func (m *AssistantMessage) UnmarshalJSON(data []byte) error {
	v, err := DecodeMessage(data)
	if err != nil {
		return err
	}
	a, ok := v.(*AssistantMessage)
	if !ok {
		return invalid("role", "want an assistant message, got role %q", v.MessageRole())
	}
	*m = *a
	return nil
}

func decodeAs[T any](data []byte, want PartType) (*T, error) {
	p, err := DecodePart(data)
	if err != nil {
		return nil, err
	}
	v, ok := any(p).(*T)
	if !ok {
		return nil, invalid("type", "want a %q part, got %q", want, p.PartType())
	}
	return v, nil
}

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "text".
func (p *TextPart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartText, p) }

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "reasoning".
func (p *ReasoningPart) UnmarshalJSON(data []byte) error {
	return unmarshalPart(data, PartReasoning, p)
}

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "tool".
func (p *ToolPart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartTool, p) }

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "file".
func (p *FilePart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartFile, p) }

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "step-start".
func (p *StepStartPart) UnmarshalJSON(data []byte) error {
	return unmarshalPart(data, PartStepStart, p)
}

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "step-finish".
func (p *StepFinishPart) UnmarshalJSON(data []byte) error {
	return unmarshalPart(data, PartStepFinish, p)
}

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "subtask".
func (p *SubtaskPart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartSubtask, p) }

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "agent".
func (p *AgentPart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartAgent, p) }

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "snapshot".
func (p *SnapshotPart) UnmarshalJSON(data []byte) error {
	return unmarshalPart(data, PartSnapshot, p)
}

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "patch".
func (p *PatchPart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartPatch, p) }

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "compaction".
func (p *CompactionPart) UnmarshalJSON(data []byte) error {
	return unmarshalPart(data, PartCompaction, p)
}

// UnmarshalJSON implements json.Unmarshaler with DecodePart; the type must be "retry".
func (p *RetryPart) UnmarshalJSON(data []byte) error { return unmarshalPart(data, PartRetry, p) }

// UnmarshalJSON implements json.Unmarshaler: any part whose type this
// version does not know (a known type is refused: decode it as its own
// type).
func (p *UnknownPart) UnmarshalJSON(data []byte) error {
	v, err := DecodePart(data)
	if err != nil {
		return err
	}
	u, ok := v.(*UnknownPart)
	if !ok {
		return invalid("type", "part type %q is known; decode it with DecodePart", v.PartType())
	}
	*p = *u
	return nil
}

func unmarshalPart[T any](data []byte, want PartType, dst *T) error {
	v, err := decodeAs[T](data, want)
	if err != nil {
		return err
	}
	*dst = *v
	return nil
}

// refuse records a refused record for the report and returns it.
func (d *decoder) refuse(kind string, raw []byte, err error) agent.Dropped {
	reason := agent.DropInvalidField
	var fe *FieldError
	if errors.As(err, &fe) {
		reason = fe.Reason
	}
	dr := agent.Dropped{
		Source: DroppedSourceTranscript,
		Kind:   kind,
		Reason: reason,
		Detail: err.Error(),
		Raw:    strings.ToValidUTF8(agent.CutUTF8(string(raw), 512), "\uFFFD"),
	}
	d.report.Refused = append(d.report.Refused, dr)
	return dr
}

// ---- transcript ----

// transcript reads a transcript document; parentID is the id of the
// session whose child it is (nil at the root), depth its nesting.
func (d *decoder) transcript(o *obj, parentID *string, depth int) Transcript {
	var t Transcript
	so := o.sub("session")
	t.Session = d.session(so)
	if parentID != nil && t.Session.ParentID != *parentID {
		o.fail(invalid(so.at("parentID"), "child session's parentID %q is not the parent session id %q", t.Session.ParentID, *parentID))
	}
	refused := d.messages(o, &t)
	t.Children = []Transcript{}
	o.each("children", func(el []byte, path string) {
		if depth+1 > MaxNesting {
			o.fail(invalid(path, "children nested deeper than %d", MaxNesting))
			return
		}
		t.Children = append(t.Children, d.transcript(o.elem(el, path), &t.Session.ID, depth+1))
	})
	t.Todos = []agent.Todo{}
	o.each("todos", func(el []byte, path string) {
		t.Todos = append(t.Todos, d.todo(o.elem(el, path)))
	})
	t.Dropped = []agent.Dropped{}
	o.each("dropped", func(el []byte, path string) {
		t.Dropped = append(t.Dropped, d.droppedRecord(o.elem(el, path)))
	})
	t.Dropped = append(t.Dropped, refused...)
	_ = o.close()
	return t
}

// messages reads a transcript's messages into t.Messages. A message that
// is invalid, belongs to another session or repeats an id is refused with
// its parts; the refusals (of whole messages and of single parts) are
// returned, for the transcript's dropped list.
func (d *decoder) messages(o *obj, t *Transcript) []agent.Dropped {
	var refused []agent.Dropped
	t.Messages = []MessageWithParts{}
	seen := map[string]struct{}{}
	o.each("messages", func(el []byte, path string) {
		before := len(d.report.Refused)
		mo := d.open(el, path)
		m := d.messageWithParts(mo, true)
		if !mo.failed() {
			if sid := messageSessionID(m.Info); sid != t.Session.ID {
				mo.fail(invalid(path+".info.sessionID", "message belongs to session %q, not %q", sid, t.Session.ID))
			} else if _, dup := seen[m.Info.MessageID()]; dup {
				mo.fail(invalid(path+".info.id", "duplicate message id %q", m.Info.MessageID()))
			}
		}
		if mo.failed() {
			// The whole message goes: forget its parts' refusals.
			d.report.Refused = d.report.Refused[:before]
			refused = append(refused, d.refuse("message", el, *mo.err))
			return
		}
		refused = append(refused, d.report.Refused[before:]...)
		seen[m.Info.MessageID()] = struct{}{}
		t.Messages = append(t.Messages, m)
	})
	return refused
}

func (d *decoder) session(o *obj) Session {
	s := Session{
		ID:        o.id("id"),
		ProjectID: o.str("projectID"),
		Directory: o.str("directory"),
		ParentID:  o.optStr("parentID"),
		Title:     o.str("title"),
	}
	to := o.sub("time")
	s.Time = SessionTime{Created: to.int("created"), Updated: to.int("updated"), Compacting: to.optInt("compacting")}
	_ = to.close()
	if o.eachOpt("permission", func(el []byte, path string) {
		ro := o.elem(el, path)
		r := PermissionRule{Permission: ro.str("permission"), Pattern: ro.str("pattern"), Action: Action(ro.str("action"))}
		_ = ro.close()
		s.Permission = append(s.Permission, r)
	}) && s.Permission == nil {
		s.Permission = []PermissionRule{}
	}
	if so := o.optSub("summary"); so != nil {
		sum := SessionSummary{Additions: so.count("additions"), Deletions: so.count("deletions"), Files: so.count("files")}
		if so.eachOpt("diffs", func(el []byte, path string) { sum.Diffs = append(sum.Diffs, fileDiff(so.elem(el, path))) }) && sum.Diffs == nil {
			sum.Diffs = []agent.FileDiff{}
		}
		_ = so.close()
		s.Summary = &sum
	}
	_ = o.check(func() error { return validateSession(&s) })
	return s
}

func fileDiff(o *obj) agent.FileDiff {
	f := agent.FileDiff{
		File:      o.str("file"),
		Before:    o.str("before"),
		After:     o.str("after"),
		Additions: o.count("additions"),
		Deletions: o.count("deletions"),
		Status:    o.optStr("status"),
	}
	_ = o.close()
	return f
}

func (d *decoder) todo(o *obj) agent.Todo {
	t := agent.Todo{Content: o.str("content"), Status: agent.TodoStatus(o.str("status")), Priority: agent.TodoPriority(o.str("priority"))}
	_ = o.check(func() error { return validateTodo(t) })
	return t
}

func (d *decoder) droppedRecord(o *obj) agent.Dropped {
	r := agent.Dropped{Source: o.str("source")}
	if line := o.optInt("line"); line != nil {
		r.Line = *line
	}
	r.Kind = o.optStr("kind")
	r.Reason = agent.DropReason(o.str("reason"))
	r.Detail = o.optStr("detail")
	r.Raw = o.optStr("raw")
	_ = o.check(func() error { return validateDropped(r) })
	return r
}

// ---- messages ----

// messageWithParts reads {"info":…,"parts":[…]}. With lenient, a part
// that is invalid, filed under another message or repeats an id is
// refused alone (recorded in the report); without, it refuses the whole.
func (d *decoder) messageWithParts(o *obj, lenient bool) MessageWithParts {
	var m MessageWithParts
	m.Info = d.message(o.sub("info"))
	parts := o.reqArray("parts")
	if o.failed() {
		return m
	}
	id, sid := m.Info.MessageID(), messageSessionID(m.Info)
	m.Parts = make([]Part, 0, len(parts))
	seen := make(map[string]struct{}, len(parts))
	o.eachOf(o.at("parts"), parts, func(el []byte, path string) {
		po := d.open(el, path)
		p := d.part(po)
		if !po.failed() {
			if err := at(path, checkPartOwner(p.Base(), id, sid)); err != nil {
				po.fail(err)
			} else if _, dup := seen[p.Base().ID]; dup {
				po.fail(invalid(path+".id", "duplicate part id %q", p.Base().ID))
			}
		}
		if po.failed() {
			if !lenient {
				o.fail(*po.err)
				return
			}
			d.refuse(partKind(el), el, *po.err)
			return
		}
		seen[p.Base().ID] = struct{}{}
		m.Parts = append(m.Parts, p)
	})
	_ = o.close()
	return m
}

// partKind reads a part's "type" for a Dropped record, if it has one.
func partKind(raw []byte) string {
	ms, err := jsonlex.SplitObject(raw)
	if err != nil {
		return "part"
	}
	for _, m := range ms {
		if m.Key == "type" && jsonlex.KindOf(m.Val) == jsonlex.KindString {
			if s, err := jsonlex.Unquote(m.Val); err == nil && s != "" {
				return "part:" + agent.CutUTF8(s, 64)
			}
		}
	}
	return "part"
}

// message reads a message envelope, a *UserMessage or an
// *AssistantMessage chosen by "role"; nil when refused.
func (d *decoder) message(o *obj) Message {
	rs := o.str("role")
	if o.failed() {
		return nil
	}
	role, err := parseRole(rs)
	if err != nil {
		o.fail(&FieldError{Path: o.at("role"), Reason: agent.DropUnknownType, Msg: err.Error(), Err: err})
		return nil
	}
	id, sid := o.id("id"), o.id("sessionID")
	var m Message
	switch role {
	case RoleUser:
		m = d.userMessage(o, id, sid)
	case RoleAssistant:
		m = d.assistantMessage(o, id, sid)
	}
	if o.check(func() error { return ValidateMessage(m) }) != nil {
		return nil
	}
	return m
}

func (d *decoder) userMessage(o *obj, id, sid string) *UserMessage {
	u := &UserMessage{ID: id, SessionID: sid, Role: RoleUser}
	to := o.sub("time")
	u.Time.Created = to.int("created")
	u.Time.Received, u.Time.Handed, u.Time.Started = to.optInt("received"), to.optInt("handed"), to.optInt("started")
	_ = to.close()
	u.Agent = o.str("agent")
	u.Model = modelRef(o.sub("model"))
	u.Format = o.opaque("format")
	u.System = o.optStr("system")
	u.Tools = o.boolMap("tools")
	u.Variant = o.optStr("variant")
	if so := o.optSub("summary"); so != nil {
		s := UserSummary{Title: so.optStr("title"), Body: so.optStr("body"), Diffs: []agent.FileDiff{}}
		so.each("diffs", func(el []byte, path string) { s.Diffs = append(s.Diffs, fileDiff(so.elem(el, path))) })
		_ = so.close()
		u.Summary = &s
	}
	return u
}

func modelRef(o *obj) ModelRef {
	m := ModelRef{ProviderID: o.str("providerID"), ModelID: o.str("modelID")}
	_ = o.close()
	return m
}

func (d *decoder) assistantMessage(o *obj, id, sid string) *AssistantMessage {
	a := &AssistantMessage{ID: id, SessionID: sid, Role: RoleAssistant}
	to := o.sub("time")
	a.Time.Created, a.Time.Completed = to.int("created"), to.optInt("completed")
	_ = to.close()
	a.ParentID, a.ModelID, a.ProviderID, a.Agent = o.str("parentID"), o.str("modelID"), o.str("providerID"), o.str("agent")
	po := o.sub("path")
	a.Path.Cwd, a.Path.Root = po.str("cwd"), po.str("root")
	_ = po.close()
	a.Cost, a.Tokens = costTokens(o)
	a.Finish = o.optStr("finish")
	if eo := o.optSub("error"); eo != nil {
		me := messageError(eo)
		a.Error = &me
	}
	a.Summary = o.optBool("summary")
	a.Variant = o.optStr("variant")
	return a
}

// costTokens reads the optional cost and tokens of an assistant message
// or a step-finish part.
func costTokens(o *obj) (*float64, *agent.Tokens) {
	cost := o.optFloat("cost")
	to := o.optSub("tokens")
	if to == nil {
		return cost, nil
	}
	t := agent.Tokens{Input: to.optInt("input"), Output: to.optInt("output"), Reasoning: to.optInt("reasoning")}
	if co := to.optSub("cache"); co != nil {
		t.Cache.Read, t.Cache.Write = co.optInt("read"), co.optInt("write")
		_ = co.close()
	}
	_ = to.close()
	return cost, &t
}

func messageError(o *obj) agent.MessageError {
	m := agent.MessageError{Name: o.str("name")}
	do := o.sub("data")
	m.Data.Message = do.str("message")
	m.Data.Kind = agent.ParseErrorKind(do.optStr("kind"))
	m.Data.ProviderID = do.optStr("providerID")
	if sc := do.optInt("statusCode"); sc != nil {
		if *sc < 0 || *sc > 999 {
			do.fail(invalid(do.at("statusCode"), "status code %d is out of range", *sc))
		}
		v := int(*sc)
		m.Data.StatusCode = &v
	}
	m.Data.IsRetryable = do.optBool("isRetryable")
	m.Data.ResponseBody = do.optStr("responseBody")
	_ = do.close()
	_ = o.close()
	return m
}

// ---- parts ----

// part reads one part, chosen by "type"; a type this version does not
// know is kept whole as an *UnknownPart. nil when refused.
func (d *decoder) part(o *obj) Part {
	typ := o.str("type")
	if typ == "" {
		o.fail(invalid(o.at("type"), "empty"))
	}
	b := PartBase{ID: o.id("id"), SessionID: o.id("sessionID"), MessageID: o.id("messageID")}
	if o.failed() {
		return nil
	}
	p := d.partBody(o, PartType(typ), b)
	if p == nil {
		return d.unknownPart(o, typ, b)
	}
	if o.check(func() error { return validatePart(p) }) != nil {
		return nil
	}
	return p
}

// partBody reads the members of a part of a known type after its base;
// nil for a type this version does not know.
func (d *decoder) partBody(o *obj, typ PartType, b PartBase) Part {
	switch typ {
	case PartText:
		x := &TextPart{PartBase: b, Text: o.str("text"), Synthetic: o.flag("synthetic"), Ignored: o.flag("ignored")}
		if to := o.optSub("time"); to != nil {
			pt := partTime(to)
			x.Time = &pt
		}
		x.Metadata = o.free("metadata")
		return x
	case PartReasoning:
		x := &ReasoningPart{PartBase: b, Text: o.str("text")}
		x.Time = partTime(o.sub("time"))
		x.Metadata = o.free("metadata")
		return x
	case PartTool:
		x := &ToolPart{PartBase: b, CallID: o.id("callID"), Tool: o.str("tool")}
		x.State = d.toolState(o.sub("state"))
		x.Metadata = o.free("metadata")
		return x
	case PartFile:
		return filePart(o, b)
	case PartStepStart:
		return &StepStartPart{PartBase: b, Snapshot: o.optStr("snapshot")}
	case PartStepFinish:
		x := &StepFinishPart{PartBase: b, Reason: o.str("reason"), Snapshot: o.optStr("snapshot")}
		x.Cost, x.Tokens = costTokens(o)
		return x
	case PartSubtask:
		x := &SubtaskPart{PartBase: b, Prompt: o.str("prompt"), Description: o.str("description"), Agent: o.str("agent")}
		if mo := o.optSub("model"); mo != nil {
			m := modelRef(mo)
			x.Model = &m
		}
		x.Command = o.optStr("command")
		return x
	case PartAgent:
		return &AgentPart{PartBase: b, Name: o.str("name")}
	case PartSnapshot:
		return &SnapshotPart{PartBase: b, Snapshot: o.str("snapshot")}
	case PartPatch:
		return &PatchPart{PartBase: b, Hash: o.str("hash"), Files: o.reqStrList("files")}
	case PartCompaction:
		return &CompactionPart{PartBase: b, Auto: o.bool("auto"), Overflow: o.optBool("overflow")}
	case PartRetry:
		x := &RetryPart{PartBase: b, Attempt: o.count("attempt")}
		x.Error = messageError(o.sub("error"))
		to := o.sub("time")
		x.Time.Created = to.int("created")
		_ = to.close()
		return x
	}
	return nil
}

// unknownPart keeps a part of a type this version does not know as its
// compacted JSON (its members are not counted as ignored).
func (d *decoder) unknownPart(o *obj, typ string, b PartBase) Part {
	var buf bytes.Buffer
	if err := json.Compact(&buf, o.raw); err != nil {
		o.fail(invalid(o.path, "%s", err))
		return nil
	}
	d.report.UnknownParts++
	return &UnknownPart{PartBase: b, Type: typ, Raw: buf.Bytes()}
}

func partTime(o *obj) PartTime {
	t := PartTime{Start: o.int("start"), End: o.optInt("end")}
	_ = o.close()
	return t
}

func filePart(o *obj, b PartBase) *FilePart {
	return &FilePart{PartBase: b, Mime: o.str("mime"), Filename: o.optStr("filename"), URL: o.str("url"), Source: o.opaque("source")}
}

// toolStateKeys lists every member a tool state of some status may carry.
var toolStateKeys = []string{"input", "raw", "title", "output", "error", "metadata", "time", "attachments", "block"}

// stateMembers lists the members a tool state of status s may carry.
func stateMembers(s ToolStatus) []string {
	switch s {
	case StatusPending:
		return []string{"input", "raw"}
	case StatusRunning, StatusBlocked:
		return []string{"input", "title", "metadata", "time", "block"}
	case StatusCompleted:
		return []string{"input", "output", "title", "metadata", "time", "attachments", "block"}
	case StatusError:
		return []string{"input", "error", "metadata", "time", "block"}
	}
	return nil
}

// toolState reads a tool state: the members of its status (see
// ToolState), then the whole is validated.
func (d *decoder) toolState(o *obj) ToolState {
	var s ToolState
	ss := o.str("status")
	if o.failed() {
		return s
	}
	st, err := parseToolStatus(ss)
	if err != nil {
		o.fail(&FieldError{Path: o.at("status"), Reason: agent.DropInvalidField, Msg: err.Error(), Err: err})
		return s
	}
	s.Status = st
	o.onlyKeys("a "+string(st)+" tool state", toolStateKeys, stateMembers(st))
	if in, ok := o.take("input"); !ok {
		o.missing("input")
	} else if k := jsonlex.KindOf(in); k != jsonlex.KindObject {
		o.fail(invalid(o.at("input"), "tool input must be an object, got %s", k))
	} else {
		s.Input = o.freeOf("input", in, true)
	}
	switch st {
	case StatusPending:
		s.Raw = o.str("raw")
	case StatusRunning, StatusBlocked:
		s.Title, s.Metadata = o.optStr("title"), o.free("metadata")
		to := o.sub("time")
		to.refuseKeys("a "+string(st)+" tool's time", "end", "compacted")
		s.Time.Start = to.int("start")
		_ = to.close()
	case StatusCompleted:
		s.Output, s.Title, s.Metadata = o.str("output"), o.str("title"), o.reqFree("metadata")
		s.Time = toolTime(o, true)
		s.Attachments = d.attachments(o)
	case StatusError:
		s.Error, s.Metadata = o.str("error"), o.free("metadata")
		s.Time = toolTime(o, false)
	}
	if bo, ok := o.value("block", jsonlex.KindObject); ok {
		s.Block = d.block(o.elem(bo, o.at("block")))
	}
	if o.close() != nil {
		return s
	}
	if err := s.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Path == "block" && s.Status == StatusBlocked {
			// Say it at the state: it is the state that is impossible.
			o.fail(invalid(o.path, "%s", fe.Msg))
		} else {
			o.fail(at(o.path, err))
		}
	}
	return s
}

// attachments reads a completed tool's optional file parts.
func (d *decoder) attachments(o *obj) []FilePart {
	var out []FilePart
	if !o.eachOpt("attachments", func(el []byte, path string) {
		p := d.part(o.elem(el, path))
		if o.failed() {
			return
		}
		f, isFile := p.(*FilePart)
		if !isFile {
			o.fail(invalid(path+".type", "an attachment is a file part, not %q", p.PartType()))
			return
		}
		out = append(out, *f)
	}) {
		return nil
	}
	if out == nil {
		out = []FilePart{}
	}
	return out
}

func toolTime(o *obj, completed bool) ToolTime {
	to := o.sub("time")
	t := ToolTime{Start: to.int("start"), End: to.int("end")}
	if completed {
		t.Compacted = to.optInt("compacted")
	} else {
		to.refuseKeys("an error tool's time", "compacted")
	}
	_ = to.close()
	return t
}

// block reads a permission or question block, unresolved or resolved;
// nil when refused.
func (d *decoder) block(o *obj) *Block {
	b := &Block{}
	ts := o.str("type")
	if o.failed() {
		return nil
	}
	bt, err := parseBlockType(ts)
	if err != nil {
		o.fail(&FieldError{Path: o.at("type"), Reason: agent.DropInvalidField, Msg: err.Error(), Err: err})
		return nil
	}
	b.Type, b.ID, b.DecidedAt = bt, o.id("id"), o.optInt("decidedAt")
	resolved := b.DecidedAt != nil
	if !resolved {
		o.refuseKeys("an unresolved block (no decidedAt)", "decision", "answers", "reason", "rule")
	}
	switch b.Type {
	case BlockPermission:
		o.refuseKeys("a permission block", "questions", "answers")
		if ro := o.optSub("rule"); ro != nil {
			b.Rule = &PermissionRule{Permission: ro.str("permission"), Pattern: ro.str("pattern"), Action: Action(ro.str("action"))}
			_ = ro.close()
		}
		b.Permission, b.Patterns = o.str("permission"), o.reqStrList("patterns")
		var ok bool
		if b.Always, ok = o.strList("always"); !ok && !resolved {
			o.missing("always")
		}
		b.Metadata = o.reqFree("metadata")
		if resolved {
			if !o.has("decision") {
				o.missing("decision")
			}
			b.Decision = decision(o)
		}
	case BlockQuestion:
		o.refuseKeys("a question block", "permission", "patterns", "always", "metadata", "rule")
		b.Questions = []agent.QuestionInfo{}
		o.each("questions", func(el []byte, path string) { b.Questions = append(b.Questions, question(o.elem(el, path))) })
		if resolved {
			b.Answers = [][]string{}
			o.each("answers", func(el []byte, path string) {
				if k := jsonlex.KindOf(el); k != jsonlex.KindArray {
					o.fail(invalid(path, "want an array of labels, got %s", k))
					return
				}
				if els, ok := o.elements(path, el); ok {
					b.Answers = append(b.Answers, o.strings(path, els))
				}
			})
			b.Decision = decision(o)
		}
	}
	if resolved {
		b.Reason = o.optStr("reason")
	}
	if o.check(b.Validate) != nil {
		return nil
	}
	return b
}

// decision reads a resolved block's optional decision.
func decision(o *obj) agent.Decision {
	raw, ok := o.value("decision", jsonlex.KindString)
	if !ok {
		return ""
	}
	ds := o.strOf("decision", raw)
	if o.failed() {
		return ""
	}
	dv, err := agent.ParseDecision(ds)
	if err != nil {
		o.fail(&FieldError{Path: o.at("decision"), Reason: agent.DropUnknownDecision, Msg: err.Error(), Err: err})
	}
	return dv
}

func question(o *obj) agent.QuestionInfo {
	q := agent.QuestionInfo{Question: o.str("question"), Header: o.str("header"), Options: []agent.QuestionOption{}}
	o.each("options", func(el []byte, path string) {
		oo := o.elem(el, path)
		q.Options = append(q.Options, agent.QuestionOption{Label: oo.str("label"), Description: oo.str("description")})
		_ = oo.close()
	})
	q.Multiple, q.Custom = o.optBool("multiple"), o.optBool("custom")
	_ = o.close()
	return q
}
