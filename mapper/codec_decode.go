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

// parseRoot checks that data is one valid JSON object.
func parseRoot(data []byte) ([]byte, error) {
	raw := bytes.TrimSpace(data)
	if !json.Valid(raw) {
		return nil, &FieldError{Reason: agent.DropUnparseableJSON, Msg: "not valid JSON"}
	}
	if k := kindOf(raw); k != kindObject {
		return nil, &FieldError{Reason: agent.DropNotAnObject, Msg: "want an object, got " + k.String()}
	}
	return raw, nil
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
	raw, err := parseRoot(data)
	if err != nil {
		return Transcript{}, DecodeReport{}, err
	}
	var d decoder
	t, err := d.transcript(raw, "", nil, 0)
	if err != nil {
		return Transcript{}, d.report, err
	}
	return t, d.report, nil
}

// DecodeMessageWithParts decodes {"info":…,"parts":[…]}. An invalid
// envelope fails the call; an invalid part (or one filed under another
// message, or a repeated part id) is refused alone and listed in
// DecodeReport.Refused with its reason, e.g. detail
// `parts[3].state: blocked tool needs an unresolved block`; the other parts
// are kept in order.
func DecodeMessageWithParts(data []byte) (MessageWithParts, DecodeReport, error) {
	raw, err := parseRoot(data)
	if err != nil {
		return MessageWithParts{}, DecodeReport{}, err
	}
	var d decoder
	m, err := d.messageWithParts(raw, "", true)
	if err != nil {
		return MessageWithParts{}, d.report, err
	}
	return m, d.report, nil
}

// DecodeMessage decodes a message envelope: a *UserMessage or an
// *AssistantMessage, chosen by "role".
func DecodeMessage(data []byte) (Message, error) {
	raw, err := parseRoot(data)
	if err != nil {
		return nil, err
	}
	var d decoder
	return d.message(raw, "")
}

// DecodePart decodes one part, chosen by "type". A type this version does
// not know decodes as an *UnknownPart holding the part's JSON (compacted).
func DecodePart(data []byte) (Part, error) {
	raw, err := parseRoot(data)
	if err != nil {
		return nil, err
	}
	var d decoder
	return d.part(raw, "")
}

// DecodeToolState decodes a tool state (see ToolState for the members of
// each status).
func DecodeToolState(data []byte) (ToolState, error) {
	raw, err := parseRoot(data)
	if err != nil {
		return ToolState{}, err
	}
	var d decoder
	return d.toolState(raw, "")
}

// DecodeBlock decodes a permission or question block, unresolved or
// resolved (see Block).
func DecodeBlock(data []byte) (Block, error) {
	raw, err := parseRoot(data)
	if err != nil {
		return Block{}, err
	}
	var d decoder
	b, err := d.block(raw, "")
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
	raw, err := parseRoot(data)
	if err != nil {
		return err
	}
	var d decoder
	v, err := d.messageWithParts(raw, "", false)
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
		Raw:    strings.ToValidUTF8(truncate(string(raw), 512), "\uFFFD"),
	}
	d.report.Refused = append(d.report.Refused, dr)
	return dr
}

// obj is one model object being decoded.
type obj struct {
	d    *decoder
	path string
	ms   []member
	used []bool
}

func (d *decoder) object(raw []byte, path string) (*obj, error) {
	if k := kindOf(raw); k != kindObject {
		return nil, &FieldError{Path: path, Reason: agent.DropNotAnObject, Msg: "want an object, got " + k.String()}
	}
	ms, err := splitObject(raw)
	if err != nil {
		return nil, &FieldError{Path: path, Reason: agent.DropInvalidField, Msg: err.Error()}
	}
	if len(ms) <= 16 {
		for i := 1; i < len(ms); i++ {
			for j := 0; j < i; j++ {
				if ms[i].key == ms[j].key {
					return nil, invalid(joinPath(path, ms[i].key), "member repeated")
				}
			}
		}
	} else {
		seen := make(map[string]struct{}, len(ms))
		for _, m := range ms {
			if _, dup := seen[m.key]; dup {
				return nil, invalid(joinPath(path, m.key), "member repeated")
			}
			seen[m.key] = struct{}{}
		}
	}
	return &obj{d: d, path: path, ms: ms, used: make([]bool, len(ms))}, nil
}

func (o *obj) at(key string) string { return joinPath(o.path, key) }

func (o *obj) has(key string) bool {
	for _, m := range o.ms {
		if m.key == key {
			return true
		}
	}
	return false
}

func (o *obj) take(key string) ([]byte, bool) {
	for i, m := range o.ms {
		if m.key == key {
			o.used[i] = true
			return m.val, true
		}
	}
	return nil, false
}

// done counts the members nobody took.
func (o *obj) done() {
	for i, u := range o.used {
		if !u {
			o.d.report.IgnoredFields++
			if len(o.d.report.IgnoredPaths) < maxIgnoredPaths {
				o.d.report.IgnoredPaths = append(o.d.report.IgnoredPaths, o.at(o.ms[i].key))
			}
		}
	}
}

func (o *obj) missing(key string) error {
	return &FieldError{Path: o.at(key), Reason: agent.DropInvalidField, Msg: "missing"}
}

func (o *obj) wrongType(key string, want jsonKind, raw []byte) error {
	return &FieldError{Path: o.at(key), Reason: agent.DropInvalidField, Msg: "want " + want.String() + ", got " + kindOf(raw).String()}
}

// value returns a member that must have the given JSON kind; ok is false
// when it is absent.
func (o *obj) value(key string, want jsonKind) ([]byte, bool, error) {
	raw, ok := o.take(key)
	if !ok {
		return nil, false, nil
	}
	if kindOf(raw) != want {
		return nil, true, o.wrongType(key, want, raw)
	}
	return raw, true, nil
}

func (o *obj) optStr(key string) (string, bool, error) {
	raw, ok, err := o.value(key, kindString)
	if !ok || err != nil {
		return "", ok, err
	}
	s, err := unquote(raw)
	if err != nil {
		return "", true, &FieldError{Path: o.at(key), Reason: agent.DropInvalidField, Msg: err.Error()}
	}
	return s, true, nil
}

func (o *obj) str(key string) (string, error) {
	s, ok, err := o.optStr(key)
	if err == nil && !ok {
		err = o.missing(key)
	}
	return s, err
}

func (o *obj) id(key string) (string, error) {
	s, ok, err := o.optStr(key)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", &FieldError{Path: o.at(key), Reason: agent.DropMissingID, Msg: "missing"}
	case s == "":
		return "", &FieldError{Path: o.at(key), Reason: agent.DropMissingID, Msg: "empty"}
	}
	return s, nil
}

func (o *obj) optInt(key string) (*int64, error) {
	raw, ok, err := o.value(key, kindNumber)
	if !ok || err != nil {
		return nil, err
	}
	v, perr := parseInt(raw)
	if perr != nil {
		return nil, invalid(o.at(key), "%s", perr)
	}
	return &v, nil
}

func (o *obj) int(key string) (int64, error) {
	v, err := o.optInt(key)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, o.missing(key)
	}
	return *v, nil
}

// count is a non-negative integer that fits an int.
func (o *obj) count(key string) (int, error) {
	v, err := o.int(key)
	if err != nil {
		return 0, err
	}
	if v < 0 || v > 1<<31-1 {
		return 0, invalid(o.at(key), "%d is out of range", v)
	}
	return int(v), nil
}

func (o *obj) optFloat(key string) (*float64, error) {
	raw, ok, err := o.value(key, kindNumber)
	if !ok || err != nil {
		return nil, err
	}
	v, perr := parseFloat(raw)
	if perr != nil {
		return nil, invalid(o.at(key), "%s", perr)
	}
	return &v, nil
}

func (o *obj) optBool(key string) (*bool, error) {
	raw, ok, err := o.value(key, kindBool)
	if !ok || err != nil {
		return nil, err
	}
	v := raw[0] == 't'
	return &v, nil
}

func (o *obj) bool(key string) (bool, error) {
	v, err := o.optBool(key)
	if err != nil {
		return false, err
	}
	if v == nil {
		return false, o.missing(key)
	}
	return *v, nil
}

// sub returns a member that must be a model object.
func (o *obj) sub(key string) (*obj, error) {
	s, err := o.optSub(key)
	if err == nil && s == nil {
		err = o.missing(key)
	}
	return s, err
}

func (o *obj) optSub(key string) (*obj, error) {
	raw, ok, err := o.value(key, kindObject)
	if !ok || err != nil {
		return nil, err
	}
	return o.d.object(raw, o.at(key))
}

// free returns a member that must be a free-form object (tool input,
// metadata); ok is false when it is absent.
func (o *obj) free(key string) (agent.Object, bool, error) {
	raw, ok, err := o.value(key, kindObject)
	if !ok || err != nil {
		return nil, ok, err
	}
	v, perr := parseAny(raw)
	if perr != nil {
		return nil, true, invalid(o.at(key), "%s", perr)
	}
	return v.(map[string]any), true, nil
}

func (o *obj) reqFree(key string) (agent.Object, error) {
	v, ok, err := o.free(key)
	if err == nil && !ok {
		err = o.missing(key)
	}
	return v, err
}

// opaque returns a member kept as canonical raw JSON (any type but null).
func (o *obj) opaque(key string) (json.RawMessage, error) {
	raw, ok := o.take(key)
	if !ok {
		return nil, nil
	}
	if kindOf(raw) == kindNull {
		return nil, invalid(o.at(key), "null is not a value here; omit the member")
	}
	var e encoder
	if err := e.raw(raw); err != nil {
		return nil, invalid(o.at(key), "%s", err)
	}
	return json.RawMessage(e.buf), nil
}

func (o *obj) array(key string) ([][]byte, bool, error) {
	raw, ok, err := o.value(key, kindArray)
	if !ok || err != nil {
		return nil, ok, err
	}
	return splitArray(raw), true, nil
}

func (o *obj) reqArray(key string) ([][]byte, error) {
	v, ok, err := o.array(key)
	if err == nil && !ok {
		err = o.missing(key)
	}
	return v, err
}

// strList decodes an array of strings; the result is non-nil.
func (o *obj) strList(key string) ([]string, bool, error) {
	els, ok, err := o.array(key)
	if !ok || err != nil {
		return nil, ok, err
	}
	return strListOf(els, o.at(key))
}

func strListOf(els [][]byte, path string) ([]string, bool, error) {
	out := make([]string, len(els))
	for i, el := range els {
		if kindOf(el) != kindString {
			return nil, true, invalid(joinPath(path, indexPath(i)), "want a string, got %s", kindOf(el))
		}
		s, err := unquote(el)
		if err != nil {
			return nil, true, invalid(joinPath(path, indexPath(i)), "%s", err)
		}
		out[i] = s
	}
	return out, true, nil
}

func (o *obj) reqStrList(key string) ([]string, error) {
	v, ok, err := o.strList(key)
	if err == nil && !ok {
		err = o.missing(key)
	}
	return v, err
}

// refuseKeys refuses members that belong to the model but not to this
// variant.
func (o *obj) refuseKeys(what string, keys ...string) error {
	for _, k := range keys {
		if o.has(k) {
			return invalid(o.at(k), "%s has no %s", what, k)
		}
	}
	return nil
}

// ---- transcript ----

func (d *decoder) transcript(raw []byte, path string, parentID *string, depth int) (Transcript, error) {
	var t Transcript
	if depth > maxNesting {
		return t, invalid(path, "children nested deeper than %d", maxNesting)
	}
	o, err := d.object(raw, path)
	if err != nil {
		return t, err
	}
	so, err := o.sub("session")
	if err != nil {
		return t, err
	}
	if t.Session, err = d.session(so); err != nil {
		return t, err
	}
	if parentID != nil && t.Session.ParentID != *parentID {
		return t, invalid(so.at("parentID"), "child session's parentID %q is not the parent session id %q", t.Session.ParentID, *parentID)
	}
	msgs, err := o.reqArray("messages")
	if err != nil {
		return t, err
	}
	var refused []agent.Dropped
	t.Messages = make([]MessageWithParts, 0, len(msgs))
	seen := make(map[string]struct{}, len(msgs))
	for i, el := range msgs {
		mp := joinPath(o.at("messages"), indexPath(i))
		before := len(d.report.Refused)
		m, err := d.messageWithParts(el, mp, true)
		if err == nil {
			if sid := messageSessionID(m.Info); sid != t.Session.ID {
				err = invalid(mp+".info.sessionID", "message belongs to session %q, not %q", sid, t.Session.ID)
			} else if _, dup := seen[m.Info.MessageID()]; dup {
				err = invalid(mp+".info.id", "duplicate message id %q", m.Info.MessageID())
			}
		}
		if err != nil {
			// The whole message goes: forget its parts' refusals.
			d.report.Refused = d.report.Refused[:before]
			refused = append(refused, d.refuse("message", el, err))
			continue
		}
		refused = append(refused, d.report.Refused[before:]...)
		seen[m.Info.MessageID()] = struct{}{}
		t.Messages = append(t.Messages, m)
	}
	children, err := o.reqArray("children")
	if err != nil {
		return t, err
	}
	t.Children = make([]Transcript, 0, len(children))
	for i, el := range children {
		c, err := d.transcript(el, joinPath(o.at("children"), indexPath(i)), &t.Session.ID, depth+1)
		if err != nil {
			return t, err
		}
		t.Children = append(t.Children, c)
	}
	todos, err := o.reqArray("todos")
	if err != nil {
		return t, err
	}
	t.Todos = make([]agent.Todo, 0, len(todos))
	for i, el := range todos {
		td, err := d.todo(el, joinPath(o.at("todos"), indexPath(i)))
		if err != nil {
			return t, err
		}
		t.Todos = append(t.Todos, td)
	}
	dropped, err := o.reqArray("dropped")
	if err != nil {
		return t, err
	}
	t.Dropped = make([]agent.Dropped, 0, len(dropped)+len(refused))
	for i, el := range dropped {
		dr, err := d.droppedRecord(el, joinPath(o.at("dropped"), indexPath(i)))
		if err != nil {
			return t, err
		}
		t.Dropped = append(t.Dropped, dr)
	}
	t.Dropped = append(t.Dropped, refused...)
	o.done()
	return t, nil
}

func (d *decoder) session(o *obj) (Session, error) {
	var s Session
	var err error
	if s.ID, err = o.id("id"); err != nil {
		return s, err
	}
	if s.ProjectID, err = o.str("projectID"); err != nil {
		return s, err
	}
	if s.Directory, err = o.str("directory"); err != nil {
		return s, err
	}
	if s.ParentID, _, err = o.optStr("parentID"); err != nil {
		return s, err
	}
	if s.Title, err = o.str("title"); err != nil {
		return s, err
	}
	to, err := o.sub("time")
	if err != nil {
		return s, err
	}
	if s.Time.Created, err = to.int("created"); err != nil {
		return s, err
	}
	if s.Time.Updated, err = to.int("updated"); err != nil {
		return s, err
	}
	if s.Time.Compacting, err = to.optInt("compacting"); err != nil {
		return s, err
	}
	to.done()
	rules, ok, err := o.array("permission")
	if err != nil {
		return s, err
	}
	if ok {
		s.Permission = make([]PermissionRule, 0, len(rules))
		for i, el := range rules {
			ro, err := d.object(el, joinPath(o.at("permission"), indexPath(i)))
			if err != nil {
				return s, err
			}
			var r PermissionRule
			if r.Permission, err = ro.str("permission"); err != nil {
				return s, err
			}
			if r.Pattern, err = ro.str("pattern"); err != nil {
				return s, err
			}
			a, err := ro.str("action")
			if err != nil {
				return s, err
			}
			r.Action = Action(a)
			ro.done()
			s.Permission = append(s.Permission, r)
		}
	}
	so, err := o.optSub("summary")
	if err != nil {
		return s, err
	}
	if so != nil {
		var sum SessionSummary
		if sum.Additions, err = so.count("additions"); err != nil {
			return s, err
		}
		if sum.Deletions, err = so.count("deletions"); err != nil {
			return s, err
		}
		if sum.Files, err = so.count("files"); err != nil {
			return s, err
		}
		if els, ok, err := so.array("diffs"); err != nil {
			return s, err
		} else if ok {
			if sum.Diffs, err = d.diffs(els, so.at("diffs")); err != nil {
				return s, err
			}
		}
		so.done()
		s.Summary = &sum
	}
	o.done()
	return s, at(o.path, validateSession(&s))
}

func (d *decoder) diffs(els [][]byte, path string) ([]agent.FileDiff, error) {
	out := make([]agent.FileDiff, 0, len(els))
	for i, el := range els {
		o, err := d.object(el, joinPath(path, indexPath(i)))
		if err != nil {
			return nil, err
		}
		var f agent.FileDiff
		if f.File, err = o.str("file"); err != nil {
			return nil, err
		}
		if f.Before, err = o.str("before"); err != nil {
			return nil, err
		}
		if f.After, err = o.str("after"); err != nil {
			return nil, err
		}
		if f.Additions, err = o.count("additions"); err != nil {
			return nil, err
		}
		if f.Deletions, err = o.count("deletions"); err != nil {
			return nil, err
		}
		if f.Status, _, err = o.optStr("status"); err != nil {
			return nil, err
		}
		o.done()
		out = append(out, f)
	}
	return out, nil
}

func (d *decoder) todo(raw []byte, path string) (agent.Todo, error) {
	var t agent.Todo
	o, err := d.object(raw, path)
	if err != nil {
		return t, err
	}
	if t.Content, err = o.str("content"); err != nil {
		return t, err
	}
	st, err := o.str("status")
	if err != nil {
		return t, err
	}
	pr, err := o.str("priority")
	if err != nil {
		return t, err
	}
	t.Status, t.Priority = agent.TodoStatus(st), agent.TodoPriority(pr)
	o.done()
	return t, at(path, validateTodo(t))
}

func (d *decoder) droppedRecord(raw []byte, path string) (agent.Dropped, error) {
	var r agent.Dropped
	o, err := d.object(raw, path)
	if err != nil {
		return r, err
	}
	if r.Source, err = o.str("source"); err != nil {
		return r, err
	}
	if line, err := o.optInt("line"); err != nil {
		return r, err
	} else if line != nil {
		r.Line = *line
	}
	if r.Kind, _, err = o.optStr("kind"); err != nil {
		return r, err
	}
	reason, err := o.str("reason")
	if err != nil {
		return r, err
	}
	r.Reason = agent.DropReason(reason)
	if r.Detail, _, err = o.optStr("detail"); err != nil {
		return r, err
	}
	if r.Raw, _, err = o.optStr("raw"); err != nil {
		return r, err
	}
	o.done()
	return r, at(path, validateDropped(r))
}

// ---- messages ----

func (d *decoder) messageWithParts(raw []byte, path string, lenient bool) (MessageWithParts, error) {
	var m MessageWithParts
	o, err := d.object(raw, path)
	if err != nil {
		return m, err
	}
	info, ok, err := o.value("info", kindObject)
	if err != nil {
		return m, err
	}
	if !ok {
		return m, o.missing("info")
	}
	if m.Info, err = d.message(info, o.at("info")); err != nil {
		return m, err
	}
	parts, err := o.reqArray("parts")
	if err != nil {
		return m, err
	}
	id, sid := m.Info.MessageID(), messageSessionID(m.Info)
	m.Parts = make([]Part, 0, len(parts))
	seen := make(map[string]struct{}, len(parts))
	for i, el := range parts {
		pp := joinPath(o.at("parts"), indexPath(i))
		p, err := d.part(el, pp)
		if err == nil {
			if err = at(pp, checkPartOwner(p.Base(), id, sid)); err == nil {
				if _, dup := seen[p.Base().ID]; dup {
					err = invalid(pp+".id", "duplicate part id %q", p.Base().ID)
				}
			}
		}
		if err != nil {
			if !lenient {
				return m, err
			}
			d.refuse(partKind(el), el, err)
			continue
		}
		seen[p.Base().ID] = struct{}{}
		m.Parts = append(m.Parts, p)
	}
	o.done()
	return m, nil
}

// partKind reads a part's "type" for a Dropped record, if it has one.
func partKind(raw []byte) string {
	ms, err := splitObject(raw)
	if err != nil {
		return "part"
	}
	for _, m := range ms {
		if m.key == "type" && kindOf(m.val) == kindString {
			if s, err := unquote(m.val); err == nil && s != "" {
				return "part:" + truncate(s, 64)
			}
		}
	}
	return "part"
}

func (d *decoder) message(raw []byte, path string) (Message, error) {
	o, err := d.object(raw, path)
	if err != nil {
		return nil, err
	}
	rs, err := o.str("role")
	if err != nil {
		return nil, err
	}
	role, err := parseRole(rs)
	if err != nil {
		return nil, &FieldError{Path: o.at("role"), Reason: agent.DropUnknownType, Msg: err.Error(), Err: err}
	}
	id, err := o.id("id")
	if err != nil {
		return nil, err
	}
	sid, err := o.id("sessionID")
	if err != nil {
		return nil, err
	}
	var m Message
	switch role {
	case RoleUser:
		m, err = d.userMessage(o, id, sid)
	case RoleAssistant:
		m, err = d.assistantMessage(o, id, sid)
	}
	if err != nil {
		return nil, err
	}
	o.done()
	return m, at(path, ValidateMessage(m))
}

func (d *decoder) userMessage(o *obj, id, sid string) (*UserMessage, error) {
	u := &UserMessage{ID: id, SessionID: sid, Role: RoleUser}
	to, err := o.sub("time")
	if err != nil {
		return nil, err
	}
	if u.Time.Created, err = to.int("created"); err != nil {
		return nil, err
	}
	to.done()
	if u.Agent, err = o.str("agent"); err != nil {
		return nil, err
	}
	mo, err := o.sub("model")
	if err != nil {
		return nil, err
	}
	if u.Model, err = modelRef(mo); err != nil {
		return nil, err
	}
	if u.Format, err = o.opaque("format"); err != nil {
		return nil, err
	}
	if u.System, _, err = o.optStr("system"); err != nil {
		return nil, err
	}
	if tools, ok, err := o.free("tools"); err != nil {
		return nil, err
	} else if ok {
		u.Tools = make(map[string]bool, len(tools))
		for k, v := range tools {
			b, isBool := v.(bool)
			if !isBool {
				return nil, invalid(joinPath(o.at("tools"), k), "want a boolean")
			}
			u.Tools[k] = b
		}
	}
	if u.Variant, _, err = o.optStr("variant"); err != nil {
		return nil, err
	}
	so, err := o.optSub("summary")
	if err != nil {
		return nil, err
	}
	if so != nil {
		var s UserSummary
		if s.Title, _, err = so.optStr("title"); err != nil {
			return nil, err
		}
		if s.Body, _, err = so.optStr("body"); err != nil {
			return nil, err
		}
		els, err := so.reqArray("diffs")
		if err != nil {
			return nil, err
		}
		if s.Diffs, err = d.diffs(els, so.at("diffs")); err != nil {
			return nil, err
		}
		so.done()
		u.Summary = &s
	}
	return u, nil
}

func modelRef(o *obj) (ModelRef, error) {
	var m ModelRef
	var err error
	if m.ProviderID, err = o.str("providerID"); err != nil {
		return m, err
	}
	if m.ModelID, err = o.str("modelID"); err != nil {
		return m, err
	}
	o.done()
	return m, nil
}

func (d *decoder) assistantMessage(o *obj, id, sid string) (*AssistantMessage, error) {
	a := &AssistantMessage{ID: id, SessionID: sid, Role: RoleAssistant}
	to, err := o.sub("time")
	if err != nil {
		return nil, err
	}
	if a.Time.Created, err = to.int("created"); err != nil {
		return nil, err
	}
	if a.Time.Completed, err = to.optInt("completed"); err != nil {
		return nil, err
	}
	to.done()
	if a.ParentID, err = o.str("parentID"); err != nil {
		return nil, err
	}
	if a.ModelID, err = o.str("modelID"); err != nil {
		return nil, err
	}
	if a.ProviderID, err = o.str("providerID"); err != nil {
		return nil, err
	}
	if a.Agent, err = o.str("agent"); err != nil {
		return nil, err
	}
	po, err := o.sub("path")
	if err != nil {
		return nil, err
	}
	if a.Path.Cwd, err = po.str("cwd"); err != nil {
		return nil, err
	}
	if a.Path.Root, err = po.str("root"); err != nil {
		return nil, err
	}
	po.done()
	if a.Cost, a.Tokens, err = costTokens(o); err != nil {
		return nil, err
	}
	if a.Finish, _, err = o.optStr("finish"); err != nil {
		return nil, err
	}
	if eo, err := o.optSub("error"); err != nil {
		return nil, err
	} else if eo != nil {
		me, err := messageError(eo)
		if err != nil {
			return nil, err
		}
		a.Error = &me
	}
	if a.Summary, err = o.optBool("summary"); err != nil {
		return nil, err
	}
	if a.Variant, _, err = o.optStr("variant"); err != nil {
		return nil, err
	}
	return a, nil
}

func costTokens(o *obj) (*float64, *agent.Tokens, error) {
	cost, err := o.optFloat("cost")
	if err != nil {
		return nil, nil, err
	}
	to, err := o.optSub("tokens")
	if err != nil || to == nil {
		return cost, nil, err
	}
	var t agent.Tokens
	if t.Input, err = to.optInt("input"); err != nil {
		return nil, nil, err
	}
	if t.Output, err = to.optInt("output"); err != nil {
		return nil, nil, err
	}
	if t.Reasoning, err = to.optInt("reasoning"); err != nil {
		return nil, nil, err
	}
	co, err := to.optSub("cache")
	if err != nil {
		return nil, nil, err
	}
	if co != nil {
		if t.Cache.Read, err = co.optInt("read"); err != nil {
			return nil, nil, err
		}
		if t.Cache.Write, err = co.optInt("write"); err != nil {
			return nil, nil, err
		}
		co.done()
	}
	to.done()
	return cost, &t, nil
}

func messageError(o *obj) (agent.MessageError, error) {
	var m agent.MessageError
	var err error
	if m.Name, err = o.str("name"); err != nil {
		return m, err
	}
	do, err := o.sub("data")
	if err != nil {
		return m, err
	}
	if m.Data.Message, err = do.str("message"); err != nil {
		return m, err
	}
	kind, _, err := do.optStr("kind")
	if err != nil {
		return m, err
	}
	m.Data.Kind = agent.ParseErrorKind(kind)
	if m.Data.ProviderID, _, err = do.optStr("providerID"); err != nil {
		return m, err
	}
	if sc, err := do.optInt("statusCode"); err != nil {
		return m, err
	} else if sc != nil {
		if *sc < 0 || *sc > 999 {
			return m, invalid(do.at("statusCode"), "status code %d is out of range", *sc)
		}
		v := int(*sc)
		m.Data.StatusCode = &v
	}
	if m.Data.IsRetryable, err = do.optBool("isRetryable"); err != nil {
		return m, err
	}
	if m.Data.ResponseBody, _, err = do.optStr("responseBody"); err != nil {
		return m, err
	}
	do.done()
	o.done()
	return m, nil
}

// ---- parts ----

func (d *decoder) part(raw []byte, path string) (Part, error) {
	o, err := d.object(raw, path)
	if err != nil {
		return nil, err
	}
	typ, err := o.str("type")
	if err != nil {
		return nil, err
	}
	if typ == "" {
		return nil, invalid(o.at("type"), "empty")
	}
	var b PartBase
	if b.ID, err = o.id("id"); err != nil {
		return nil, err
	}
	if b.SessionID, err = o.id("sessionID"); err != nil {
		return nil, err
	}
	if b.MessageID, err = o.id("messageID"); err != nil {
		return nil, err
	}
	var p Part
	switch PartType(typ) {
	case PartText:
		x := &TextPart{PartBase: b}
		if x.Text, err = o.str("text"); err != nil {
			return nil, err
		}
		var v *bool
		if v, err = o.optBool("synthetic"); err != nil {
			return nil, err
		}
		x.Synthetic = v != nil && *v
		if v, err = o.optBool("ignored"); err != nil {
			return nil, err
		}
		x.Ignored = v != nil && *v
		if to, err := o.optSub("time"); err != nil {
			return nil, err
		} else if to != nil {
			pt, err := partTime(to)
			if err != nil {
				return nil, err
			}
			x.Time = &pt
		}
		if x.Metadata, _, err = o.free("metadata"); err != nil {
			return nil, err
		}
		p = x
	case PartReasoning:
		x := &ReasoningPart{PartBase: b}
		if x.Text, err = o.str("text"); err != nil {
			return nil, err
		}
		to, err := o.sub("time")
		if err != nil {
			return nil, err
		}
		if x.Time, err = partTime(to); err != nil {
			return nil, err
		}
		if x.Metadata, _, err = o.free("metadata"); err != nil {
			return nil, err
		}
		p = x
	case PartTool:
		x := &ToolPart{PartBase: b}
		if x.CallID, err = o.id("callID"); err != nil {
			return nil, err
		}
		if x.Tool, err = o.str("tool"); err != nil {
			return nil, err
		}
		st, ok, err := o.value("state", kindObject)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, o.missing("state")
		}
		if x.State, err = d.toolState(st, o.at("state")); err != nil {
			return nil, err
		}
		if x.Metadata, _, err = o.free("metadata"); err != nil {
			return nil, err
		}
		p = x
	case PartFile:
		x, err := d.filePart(o, b)
		if err != nil {
			return nil, err
		}
		p = x
	case PartStepStart:
		x := &StepStartPart{PartBase: b}
		if x.Snapshot, _, err = o.optStr("snapshot"); err != nil {
			return nil, err
		}
		p = x
	case PartStepFinish:
		x := &StepFinishPart{PartBase: b}
		if x.Reason, err = o.str("reason"); err != nil {
			return nil, err
		}
		if x.Snapshot, _, err = o.optStr("snapshot"); err != nil {
			return nil, err
		}
		if x.Cost, x.Tokens, err = costTokens(o); err != nil {
			return nil, err
		}
		p = x
	case PartSubtask:
		x := &SubtaskPart{PartBase: b}
		if x.Prompt, err = o.str("prompt"); err != nil {
			return nil, err
		}
		if x.Description, err = o.str("description"); err != nil {
			return nil, err
		}
		if x.Agent, err = o.str("agent"); err != nil {
			return nil, err
		}
		if mo, err := o.optSub("model"); err != nil {
			return nil, err
		} else if mo != nil {
			m, err := modelRef(mo)
			if err != nil {
				return nil, err
			}
			x.Model = &m
		}
		if x.Command, _, err = o.optStr("command"); err != nil {
			return nil, err
		}
		p = x
	case PartAgent:
		x := &AgentPart{PartBase: b}
		if x.Name, err = o.str("name"); err != nil {
			return nil, err
		}
		p = x
	case PartSnapshot:
		x := &SnapshotPart{PartBase: b}
		if x.Snapshot, err = o.str("snapshot"); err != nil {
			return nil, err
		}
		p = x
	case PartPatch:
		x := &PatchPart{PartBase: b}
		if x.Hash, err = o.str("hash"); err != nil {
			return nil, err
		}
		if x.Files, err = o.reqStrList("files"); err != nil {
			return nil, err
		}
		p = x
	case PartCompaction:
		x := &CompactionPart{PartBase: b}
		if x.Auto, err = o.bool("auto"); err != nil {
			return nil, err
		}
		if x.Overflow, err = o.optBool("overflow"); err != nil {
			return nil, err
		}
		p = x
	case PartRetry:
		x := &RetryPart{PartBase: b}
		if x.Attempt, err = o.count("attempt"); err != nil {
			return nil, err
		}
		eo, err := o.sub("error")
		if err != nil {
			return nil, err
		}
		if x.Error, err = messageError(eo); err != nil {
			return nil, err
		}
		to, err := o.sub("time")
		if err != nil {
			return nil, err
		}
		if x.Time.Created, err = to.int("created"); err != nil {
			return nil, err
		}
		to.done()
		p = x
	default:
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, invalid(path, "%s", err)
		}
		d.report.UnknownParts++
		return &UnknownPart{PartBase: b, Type: typ, Raw: buf.Bytes()}, nil
	}
	o.done()
	return p, at(path, validatePart(p))
}

func partTime(o *obj) (PartTime, error) {
	var t PartTime
	var err error
	if t.Start, err = o.int("start"); err != nil {
		return t, err
	}
	if t.End, err = o.optInt("end"); err != nil {
		return t, err
	}
	o.done()
	return t, nil
}

func (d *decoder) filePart(o *obj, b PartBase) (*FilePart, error) {
	x := &FilePart{PartBase: b}
	var err error
	if x.Mime, err = o.str("mime"); err != nil {
		return nil, err
	}
	if x.Filename, _, err = o.optStr("filename"); err != nil {
		return nil, err
	}
	if x.URL, err = o.str("url"); err != nil {
		return nil, err
	}
	if x.Source, err = o.opaque("source"); err != nil {
		return nil, err
	}
	return x, nil
}

// toolStateKeys lists every member a tool state of some status may carry.
func toolStateKeys() []string {
	return []string{"input", "raw", "title", "output", "error", "metadata", "time", "attachments", "block"}
}

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

func (d *decoder) toolState(raw []byte, path string) (ToolState, error) {
	var s ToolState
	o, err := d.object(raw, path)
	if err != nil {
		return s, err
	}
	ss, err := o.str("status")
	if err != nil {
		return s, err
	}
	if s.Status, err = parseToolStatus(ss); err != nil {
		return s, &FieldError{Path: o.at("status"), Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	allowed := stateMembers(s.Status)
	for _, k := range toolStateKeys() {
		if o.has(k) && !containsString(allowed, k) {
			return s, invalid(o.at(k), "a %s tool state has no %s", s.Status, k)
		}
	}
	in, ok := o.take("input")
	if !ok {
		return s, o.missing("input")
	}
	if k := kindOf(in); k != kindObject {
		return s, invalid(o.at("input"), "tool input must be an object, got %s", k)
	}
	v, perr := parseAny(in)
	if perr != nil {
		return s, invalid(o.at("input"), "%s", perr)
	}
	s.Input = v.(map[string]any)
	switch s.Status {
	case StatusPending:
		if s.Raw, err = o.str("raw"); err != nil {
			return s, err
		}
	case StatusRunning, StatusBlocked:
		if s.Title, _, err = o.optStr("title"); err != nil {
			return s, err
		}
		if s.Metadata, _, err = o.free("metadata"); err != nil {
			return s, err
		}
		to, err := o.sub("time")
		if err != nil {
			return s, err
		}
		if err := to.refuseKeys("a "+string(s.Status)+" tool's time", "end", "compacted"); err != nil {
			return s, err
		}
		if s.Time.Start, err = to.int("start"); err != nil {
			return s, err
		}
		to.done()
	case StatusCompleted:
		if s.Output, err = o.str("output"); err != nil {
			return s, err
		}
		if s.Title, err = o.str("title"); err != nil {
			return s, err
		}
		if s.Metadata, err = o.reqFree("metadata"); err != nil {
			return s, err
		}
		if s.Time, err = toolTime(o, true); err != nil {
			return s, err
		}
		els, ok, err := o.array("attachments")
		if err != nil {
			return s, err
		}
		if ok {
			s.Attachments = make([]FilePart, 0, len(els))
			for i, el := range els {
				ap := joinPath(o.at("attachments"), indexPath(i))
				p, err := d.part(el, ap)
				if err != nil {
					return s, err
				}
				f, isFile := p.(*FilePart)
				if !isFile {
					return s, invalid(ap+".type", "an attachment is a file part, not %q", p.PartType())
				}
				s.Attachments = append(s.Attachments, *f)
			}
		}
	case StatusError:
		if s.Error, err = o.str("error"); err != nil {
			return s, err
		}
		if s.Metadata, _, err = o.free("metadata"); err != nil {
			return s, err
		}
		if s.Time, err = toolTime(o, false); err != nil {
			return s, err
		}
	}
	if bo, ok, err := o.value("block", kindObject); err != nil {
		return s, err
	} else if ok {
		if s.Block, err = d.block(bo, o.at("block")); err != nil {
			return s, err
		}
	}
	o.done()
	if err := s.Validate(); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) && fe.Path == "block" && s.Status == StatusBlocked {
			// Say it at the state: it is the state that is impossible.
			return s, invalid(path, "%s", fe.Msg)
		}
		return s, at(path, err)
	}
	return s, nil
}

func containsString(a []string, s string) bool {
	for _, x := range a {
		if x == s {
			return true
		}
	}
	return false
}

func toolTime(o *obj, completed bool) (ToolTime, error) {
	var t ToolTime
	to, err := o.sub("time")
	if err != nil {
		return t, err
	}
	if t.Start, err = to.int("start"); err != nil {
		return t, err
	}
	if t.End, err = to.int("end"); err != nil {
		return t, err
	}
	if completed {
		if t.Compacted, err = to.optInt("compacted"); err != nil {
			return t, err
		}
	} else if err := to.refuseKeys("an error tool's time", "compacted"); err != nil {
		return t, err
	}
	to.done()
	return t, nil
}

func (d *decoder) block(raw []byte, path string) (*Block, error) {
	o, err := d.object(raw, path)
	if err != nil {
		return nil, err
	}
	b := &Block{}
	ts, err := o.str("type")
	if err != nil {
		return nil, err
	}
	if b.Type, err = parseBlockType(ts); err != nil {
		return nil, &FieldError{Path: o.at("type"), Reason: agent.DropInvalidField, Msg: err.Error(), Err: err}
	}
	if b.ID, err = o.id("id"); err != nil {
		return nil, err
	}
	if b.DecidedAt, err = o.optInt("decidedAt"); err != nil {
		return nil, err
	}
	resolved := b.DecidedAt != nil
	if !resolved {
		if err := o.refuseKeys("an unresolved block (no decidedAt)", "decision", "answers", "reason"); err != nil {
			return nil, err
		}
	}
	decision := func() error {
		ds, ok, err := o.optStr("decision")
		if err != nil || !ok {
			return err
		}
		dv, perr := agent.ParseDecision(ds)
		if perr != nil {
			return &FieldError{Path: o.at("decision"), Reason: agent.DropUnknownDecision, Msg: perr.Error(), Err: perr}
		}
		b.Decision = dv
		return nil
	}
	switch b.Type {
	case BlockPermission:
		if err := o.refuseKeys("a permission block", "questions", "answers"); err != nil {
			return nil, err
		}
		if b.Permission, err = o.str("permission"); err != nil {
			return nil, err
		}
		if b.Patterns, err = o.reqStrList("patterns"); err != nil {
			return nil, err
		}
		var ok bool
		if b.Always, ok, err = o.strList("always"); err != nil {
			return nil, err
		} else if !ok && !resolved {
			return nil, o.missing("always")
		}
		if b.Metadata, err = o.reqFree("metadata"); err != nil {
			return nil, err
		}
		if resolved {
			if !o.has("decision") {
				return nil, o.missing("decision")
			}
			if err := decision(); err != nil {
				return nil, err
			}
		}
	case BlockQuestion:
		if err := o.refuseKeys("a question block", "permission", "patterns", "always", "metadata"); err != nil {
			return nil, err
		}
		qs, err := o.reqArray("questions")
		if err != nil {
			return nil, err
		}
		b.Questions = make([]agent.QuestionInfo, 0, len(qs))
		for i, el := range qs {
			q, err := d.question(el, joinPath(o.at("questions"), indexPath(i)))
			if err != nil {
				return nil, err
			}
			b.Questions = append(b.Questions, q)
		}
		if resolved {
			as, err := o.reqArray("answers")
			if err != nil {
				return nil, err
			}
			b.Answers = make([][]string, 0, len(as))
			for i, el := range as {
				ap := joinPath(o.at("answers"), indexPath(i))
				if kindOf(el) != kindArray {
					return nil, invalid(ap, "want an array of labels, got %s", kindOf(el))
				}
				labels, _, err := strListOf(splitArray(el), ap)
				if err != nil {
					return nil, err
				}
				b.Answers = append(b.Answers, labels)
			}
			if err := decision(); err != nil {
				return nil, err
			}
		}
	}
	if resolved {
		if b.Reason, _, err = o.optStr("reason"); err != nil {
			return nil, err
		}
	}
	o.done()
	return b, at(path, b.Validate())
}

func (d *decoder) question(raw []byte, path string) (agent.QuestionInfo, error) {
	var q agent.QuestionInfo
	o, err := d.object(raw, path)
	if err != nil {
		return q, err
	}
	if q.Question, err = o.str("question"); err != nil {
		return q, err
	}
	if q.Header, err = o.str("header"); err != nil {
		return q, err
	}
	opts, err := o.reqArray("options")
	if err != nil {
		return q, err
	}
	q.Options = make([]agent.QuestionOption, 0, len(opts))
	for i, el := range opts {
		oo, err := d.object(el, joinPath(o.at("options"), indexPath(i)))
		if err != nil {
			return q, err
		}
		var opt agent.QuestionOption
		if opt.Label, err = oo.str("label"); err != nil {
			return q, err
		}
		if opt.Description, err = oo.str("description"); err != nil {
			return q, err
		}
		oo.done()
		q.Options = append(q.Options, opt)
	}
	if q.Multiple, err = o.optBool("multiple"); err != nil {
		return q, err
	}
	if q.Custom, err = o.optBool("custom"); err != nil {
		return q, err
	}
	o.done()
	return q, nil
}
