package mapper

// Canonical encoding of the model (the member order of every object is
// fixed here; the JSON Schema in schema/ describes the same shapes).

import (
	"bytes"
	"encoding/json"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// EncodeTranscript writes the transcript document in canonical form:
//
//	{"session":…,"messages":[…],"children":[…],"todos":[…],"dropped":[…]}
//
// Arrays are always written (empty, never null). Every value is validated
// first, so nothing is written that DecodeTranscript would refuse; the
// error is a *FieldError (wrapping ErrInvalid) naming the path, e.g.
// "messages[1].parts[2].state: blocked tool needs an unresolved block".
// Encoding is byte-stable: EncodeTranscript(DecodeTranscript(b)) == b for
// every b that EncodeTranscript produced.
func EncodeTranscript(t Transcript) ([]byte, error) {
	var e encoder
	if err := e.transcript(&t, 0); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// EncodeTranscriptShell writes the canonical document of t around its
// messages and children, for a writer that streams those: head is
// {"session":… and tail ,"todos":[…],"dropped":[…]}, so that head,
// ,"messages":[ the messages (EncodeMessageWithParts) separated by commas,
// ],"children":[ the children's documents separated by commas, ] and
// tail are EncodeTranscript's bytes. t's Messages and Children are not
// read; errors as EncodeTranscript's for the rest.
func EncodeTranscriptShell(t Transcript) (head, tail []byte, err error) {
	if err := validateSession(&t.Session); err != nil {
		return nil, nil, at("session", err)
	}
	var e encoder
	e.buf = append(e.buf, '{')
	e.key("session")
	e.session(&t.Session)
	var f encoder
	f.buf = append(f.buf, '{') // a sep-free start, cut below
	if err := f.todosAndDropped(&t); err != nil {
		return nil, nil, err
	}
	f.buf[0] = ','
	return e.buf, f.buf, nil
}

// EncodeMessageWithParts writes {"info":…,"parts":[…]} in canonical form;
// errors as EncodeTranscript.
func EncodeMessageWithParts(m MessageWithParts) ([]byte, error) {
	var e encoder
	if err := e.messageWithParts(&m); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// EncodeMessage writes a message envelope (UserMessage or
// AssistantMessage) in canonical form, "role" written by the codec.
func EncodeMessage(m Message) ([]byte, error) {
	var e encoder
	if err := e.message(m); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// EncodePart writes one part in canonical form, "type" written by the
// codec. An UnknownPart is written back exactly as it was read.
func EncodePart(p Part) ([]byte, error) {
	var e encoder
	if err := e.part(p); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// EncodeToolState writes a tool state in canonical form: the members of its
// status only (see ToolState).
func EncodeToolState(s ToolState) ([]byte, error) {
	var e encoder
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if err := e.toolState(&s); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// EncodeBlock writes a block in canonical form (unresolved or resolved, see
// Block).
func EncodeBlock(b Block) ([]byte, error) {
	var e encoder
	if err := b.Validate(); err != nil {
		return nil, err
	}
	if err := e.block(&b); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// MarshalJSON implements json.Marshaler with EncodeTranscript. (Through
// json.Marshal the standard library re-escapes <, > and & as \u003c…;
// call EncodeTranscript for the canonical bytes.)
func (t Transcript) MarshalJSON() ([]byte, error) { return EncodeTranscript(t) }

// MarshalJSON implements json.Marshaler with EncodeMessageWithParts.
func (m MessageWithParts) MarshalJSON() ([]byte, error) { return EncodeMessageWithParts(m) }

// MarshalJSON implements json.Marshaler with EncodeToolState.
func (s ToolState) MarshalJSON() ([]byte, error) { return EncodeToolState(s) }

// MarshalJSON implements json.Marshaler with EncodeBlock.
func (b Block) MarshalJSON() ([]byte, error) { return EncodeBlock(b) }

// MarshalJSON implements json.Marshaler with EncodeMessage.
func (m UserMessage) MarshalJSON() ([]byte, error) { return EncodeMessage(&m) }

// MarshalJSON implements json.Marshaler with EncodeMessage.
func (m AssistantMessage) MarshalJSON() ([]byte, error) { return EncodeMessage(&m) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p TextPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p ReasoningPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p ToolPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p FilePart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p StepStartPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p StepFinishPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p SubtaskPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p AgentPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p SnapshotPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p PatchPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p CompactionPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler with EncodePart.
func (p RetryPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MarshalJSON implements json.Marshaler: the raw JSON as it was read.
func (p UnknownPart) MarshalJSON() ([]byte, error) { return EncodePart(&p) }

// MaxNesting bounds children depth on the way out, matching what a decoder
// can read back (encoding/json refuses documents nested deeper than 10000).
const MaxNesting = 1000

func (e *encoder) transcript(t *Transcript, depth int) error {
	if depth > MaxNesting {
		return invalid("children", "children nested deeper than %d", MaxNesting)
	}
	if err := validateSession(&t.Session); err != nil {
		return at("session", err)
	}
	e.buf = append(e.buf, '{')
	e.key("session")
	e.session(&t.Session)
	e.key("messages")
	e.buf = append(e.buf, '[')
	seen := make(map[string]struct{}, len(t.Messages))
	for i := range t.Messages {
		e.sep()
		m := &t.Messages[i]
		p := joinPath("messages", indexPath(i))
		if err := e.messageWithParts(m); err != nil {
			return at(p, err)
		}
		if sid := messageSessionID(m.Info); sid != t.Session.ID {
			return invalid(p+".info.sessionID", "message belongs to session %q, not %q", sid, t.Session.ID)
		}
		if _, dup := seen[m.Info.MessageID()]; dup {
			return invalid(p+".info.id", "duplicate message id %q", m.Info.MessageID())
		}
		seen[m.Info.MessageID()] = struct{}{}
	}
	e.buf = append(e.buf, ']')
	e.key("children")
	e.buf = append(e.buf, '[')
	for i := range t.Children {
		e.sep()
		c := &t.Children[i]
		p := joinPath("children", indexPath(i))
		if c.Session.ParentID != t.Session.ID {
			return invalid(p+".session.parentID", "child session parentID %q is not the parent session id %q", c.Session.ParentID, t.Session.ID)
		}
		if err := e.transcript(c, depth+1); err != nil {
			return at(p, err)
		}
	}
	e.buf = append(e.buf, ']')
	return e.todosAndDropped(t)
}

// todosAndDropped writes the "todos" and "dropped" members of t and the
// document's closing brace.
func (e *encoder) todosAndDropped(t *Transcript) error {
	e.key("todos")
	e.buf = append(e.buf, '[')
	for i, td := range t.Todos {
		if err := validateTodo(td); err != nil {
			return at(joinPath("todos", indexPath(i)), err)
		}
		e.sep()
		e.buf = append(e.buf, '{')
		e.strField("content", td.Content)
		e.strField("status", string(td.Status))
		e.strField("priority", string(td.Priority))
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
	e.key("dropped")
	e.buf = append(e.buf, '[')
	for i, d := range t.Dropped {
		if err := validateDropped(d); err != nil {
			return at(joinPath("dropped", indexPath(i)), err)
		}
		e.sep()
		e.dropped(&d)
	}
	e.buf = append(e.buf, ']')
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) session(s *Session) {
	e.buf = append(e.buf, '{')
	e.strField("id", s.ID)
	e.strField("projectID", s.ProjectID)
	e.strField("directory", s.Directory)
	if s.ParentID != "" {
		e.strField("parentID", s.ParentID)
	}
	e.strField("title", s.Title)
	e.key("time")
	e.buf = append(e.buf, '{')
	e.intField("created", s.Time.Created)
	e.intField("updated", s.Time.Updated)
	e.optInt("compacting", s.Time.Compacting)
	e.buf = append(e.buf, '}')
	if s.Permission != nil {
		e.key("permission")
		e.buf = append(e.buf, '[')
		for _, r := range s.Permission {
			e.sep()
			e.buf = append(e.buf, '{')
			e.strField("permission", r.Permission)
			e.strField("pattern", r.Pattern)
			e.strField("action", string(r.Action))
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']')
	}
	if s.Summary != nil {
		e.key("summary")
		e.buf = append(e.buf, '{')
		e.intField("additions", int64(s.Summary.Additions))
		e.intField("deletions", int64(s.Summary.Deletions))
		e.intField("files", int64(s.Summary.Files))
		if s.Summary.Diffs != nil {
			e.key("diffs")
			e.diffs(s.Summary.Diffs)
		}
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
}

func (e *encoder) diffs(ds []agent.FileDiff) {
	e.buf = append(e.buf, '[')
	for _, d := range ds {
		e.sep()
		e.buf = append(e.buf, '{')
		e.strField("file", d.File)
		e.strField("before", d.Before)
		e.strField("after", d.After)
		e.intField("additions", int64(d.Additions))
		e.intField("deletions", int64(d.Deletions))
		e.optStr("status", d.Status)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, ']')
}

func (e *encoder) dropped(d *agent.Dropped) {
	e.buf = append(e.buf, '{')
	e.strField("source", d.Source)
	if d.Line != 0 {
		e.intField("line", d.Line)
	}
	e.optStr("kind", d.Kind)
	e.strField("reason", string(d.Reason))
	e.optStr("detail", d.Detail)
	e.optStr("raw", d.Raw)
	e.buf = append(e.buf, '}')
}

func (e *encoder) messageWithParts(m *MessageWithParts) error {
	e.buf = append(e.buf, '{')
	e.key("info")
	if err := e.message(m.Info); err != nil {
		return at("info", err)
	}
	id, sid := m.Info.MessageID(), messageSessionID(m.Info)
	e.key("parts")
	e.buf = append(e.buf, '[')
	seen := make(map[string]struct{}, len(m.Parts))
	for i, p := range m.Parts {
		e.sep()
		pp := joinPath("parts", indexPath(i))
		if p == nil {
			return invalid(pp, "part is nil")
		}
		if err := checkPartOwner(p.Base(), id, sid); err != nil {
			return at(pp, err)
		}
		if _, dup := seen[p.Base().ID]; dup {
			return invalid(pp+".id", "duplicate part id %q", p.Base().ID)
		}
		seen[p.Base().ID] = struct{}{}
		if err := e.part(p); err != nil {
			return at(pp, err)
		}
	}
	e.buf = append(e.buf, ']')
	e.buf = append(e.buf, '}')
	return nil
}

func messageSessionID(m Message) string {
	switch x := m.(type) {
	case *UserMessage:
		return x.SessionID
	case *AssistantMessage:
		return x.SessionID
	}
	return ""
}

// checkPartOwner refuses a part filed under another message or session.
func checkPartOwner(b *PartBase, messageID, sessionID string) error {
	if b.MessageID != "" && b.MessageID != messageID {
		return invalid("messageID", "part belongs to message %q, not %q", b.MessageID, messageID)
	}
	if b.SessionID != "" && b.SessionID != sessionID {
		return invalid("sessionID", "part belongs to session %q, not %q", b.SessionID, sessionID)
	}
	return nil
}

func (e *encoder) message(m Message) error {
	if err := ValidateMessage(m); err != nil {
		return err
	}
	switch x := m.(type) {
	case *UserMessage:
		e.buf = append(e.buf, '{')
		e.strField("id", x.ID)
		e.strField("sessionID", x.SessionID)
		e.strField("role", string(RoleUser))
		e.key("time")
		e.buf = append(e.buf, '{')
		e.intField("created", x.Time.Created)
		e.optInt("received", x.Time.Received)
		e.optInt("handed", x.Time.Handed)
		e.optInt("started", x.Time.Started)
		e.buf = append(e.buf, '}')
		e.strField("agent", x.Agent)
		e.key("model")
		e.modelRef(&x.Model)
		if len(x.Format) > 0 {
			e.key("format")
			if err := e.raw(x.Format); err != nil {
				return at("format", err)
			}
		}
		e.optStr("system", x.System)
		if x.Tools != nil {
			e.key("tools")
			m := make(map[string]any, len(x.Tools))
			for k, v := range x.Tools {
				m[k] = v
			}
			_ = e.object(m) // bools only: cannot fail
		}
		e.optStr("variant", x.Variant)
		if x.Summary != nil {
			e.key("summary")
			e.buf = append(e.buf, '{')
			e.optStr("title", x.Summary.Title)
			e.optStr("body", x.Summary.Body)
			e.key("diffs")
			e.diffs(x.Summary.Diffs)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, '}')
	case *AssistantMessage:
		e.buf = append(e.buf, '{')
		e.strField("id", x.ID)
		e.strField("sessionID", x.SessionID)
		e.strField("role", string(RoleAssistant))
		e.key("time")
		e.buf = append(e.buf, '{')
		e.intField("created", x.Time.Created)
		e.optInt("completed", x.Time.Completed)
		e.buf = append(e.buf, '}')
		e.strField("parentID", x.ParentID)
		e.strField("modelID", x.ModelID)
		e.strField("providerID", x.ProviderID)
		e.strField("agent", x.Agent)
		e.key("path")
		e.buf = append(e.buf, '{')
		e.strField("cwd", x.Path.Cwd)
		e.strField("root", x.Path.Root)
		e.buf = append(e.buf, '}')
		if err := e.costTokens(x.Cost, x.Tokens); err != nil {
			return err
		}
		e.optStr("finish", x.Finish)
		if x.Error != nil {
			e.key("error")
			e.messageError(x.Error)
		}
		if x.Summary != nil {
			e.key("summary")
			e.bool(*x.Summary)
		}
		e.optStr("variant", x.Variant)
		e.buf = append(e.buf, '}')
	}
	return nil
}

func (e *encoder) modelRef(m *ModelRef) {
	e.buf = append(e.buf, '{')
	e.strField("providerID", m.ProviderID)
	e.strField("modelID", m.ModelID)
	e.buf = append(e.buf, '}')
}

func (e *encoder) costTokens(cost *float64, t *agent.Tokens) error {
	if cost != nil {
		e.key("cost")
		if err := e.float(*cost); err != nil {
			return at("cost", err)
		}
	}
	if t != nil {
		e.key("tokens")
		e.buf = append(e.buf, '{')
		e.optInt("input", t.Input)
		e.optInt("output", t.Output)
		e.optInt("reasoning", t.Reasoning)
		if t.Cache.Read != nil || t.Cache.Write != nil {
			e.key("cache")
			e.buf = append(e.buf, '{')
			e.optInt("read", t.Cache.Read)
			e.optInt("write", t.Cache.Write)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, '}')
	}
	return nil
}

func (e *encoder) messageError(m *agent.MessageError) {
	e.buf = append(e.buf, '{')
	e.strField("name", m.Name)
	e.key("data")
	e.buf = append(e.buf, '{')
	e.strField("message", m.Data.Message)
	e.strField("kind", string(agent.ParseErrorKind(string(m.Data.Kind))))
	e.optStr("providerID", m.Data.ProviderID)
	if m.Data.StatusCode != nil {
		e.intField("statusCode", int64(*m.Data.StatusCode))
	}
	if m.Data.IsRetryable != nil {
		e.key("isRetryable")
		e.bool(*m.Data.IsRetryable)
	}
	e.optStr("responseBody", m.Data.ResponseBody)
	e.buf = append(e.buf, '}')
	e.buf = append(e.buf, '}')
}

// strField writes the member k with the string v.
func (e *encoder) strField(k, v string) {
	e.key(k)
	e.str(v)
}

// intField writes the member k with the integer v.
func (e *encoder) intField(k string, v int64) {
	e.key(k)
	e.int(v)
}

func (e *encoder) optStr(k, v string) {
	if v != "" {
		e.strField(k, v)
	}
}

func (e *encoder) optInt(k string, v *int64) {
	if v != nil {
		e.key(k)
		e.int(*v)
	}
}

func (e *encoder) optBool(k string, v *bool) {
	if v != nil {
		e.key(k)
		e.bool(*v)
	}
}

// optObject writes a free-form object when it is non-nil (an empty,
// non-nil Object is written as {}, so absent and empty stay distinct).
func (e *encoder) optObject(k string, o agent.Object) error {
	if o == nil {
		return nil
	}
	e.key(k)
	return at(k, e.object(o))
}

func (e *encoder) partBase(t PartType, b *PartBase) {
	e.buf = append(e.buf, '{')
	e.strField("id", b.ID)
	e.strField("sessionID", b.SessionID)
	e.strField("messageID", b.MessageID)
	e.strField("type", string(t))
}

func (e *encoder) partTime(t *PartTime) {
	e.buf = append(e.buf, '{')
	e.intField("start", t.Start)
	e.optInt("end", t.End)
	e.buf = append(e.buf, '}')
}

func (e *encoder) part(p Part) error {
	if p == nil {
		return invalid("", "part is nil")
	}
	if err := validatePart(p); err != nil {
		return err
	}
	if u, ok := p.(*UnknownPart); ok {
		return e.unknownPart(u)
	}
	e.partBase(p.PartType(), p.Base())
	switch x := p.(type) {
	case *TextPart:
		e.strField("text", x.Text)
		e.flag("synthetic", x.Synthetic)
		e.flag("ignored", x.Ignored)
		if x.Time != nil {
			e.key("time")
			e.partTime(x.Time)
		}
		if err := e.optObject("metadata", x.Metadata); err != nil {
			return err
		}
	case *ReasoningPart:
		e.strField("text", x.Text)
		e.key("time")
		e.partTime(&x.Time)
		if err := e.optObject("metadata", x.Metadata); err != nil {
			return err
		}
	case *ToolPart:
		e.strField("callID", x.CallID)
		e.strField("tool", x.Tool)
		e.key("state")
		if err := e.toolState(&x.State); err != nil {
			return at("state", err)
		}
		if err := e.optObject("metadata", x.Metadata); err != nil {
			return err
		}
	case *FilePart:
		e.strField("mime", x.Mime)
		e.optStr("filename", x.Filename)
		e.strField("url", x.URL)
		if len(x.Source) > 0 {
			e.key("source")
			if err := e.raw(x.Source); err != nil {
				return at("source", err)
			}
		}
	case *StepStartPart:
		e.optStr("snapshot", x.Snapshot)
	case *StepFinishPart:
		e.strField("reason", x.Reason)
		e.optStr("snapshot", x.Snapshot)
		if err := e.costTokens(x.Cost, x.Tokens); err != nil {
			return err
		}
	case *SubtaskPart:
		e.strField("prompt", x.Prompt)
		e.strField("description", x.Description)
		e.strField("agent", x.Agent)
		if x.Model != nil {
			e.key("model")
			e.modelRef(x.Model)
		}
		e.optStr("command", x.Command)
	case *AgentPart:
		e.strField("name", x.Name)
	case *SnapshotPart:
		e.strField("snapshot", x.Snapshot)
	case *PatchPart:
		e.strField("hash", x.Hash)
		e.key("files")
		e.strings(x.Files)
	case *CompactionPart:
		e.key("auto")
		e.bool(x.Auto)
		e.optBool("overflow", x.Overflow)
	case *RetryPart:
		e.intField("attempt", int64(x.Attempt))
		e.key("error")
		e.messageError(&x.Error)
		e.key("time")
		e.buf = append(e.buf, '{')
		e.intField("created", x.Time.Created)
		e.buf = append(e.buf, '}')
	}
	e.buf = append(e.buf, '}')
	return nil
}

// unknownPart writes a part of a type this version does not know back as
// it was read (compacted, so a hand-built Raw is too).
func (e *encoder) unknownPart(u *UnknownPart) error {
	var b bytes.Buffer
	b.Grow(len(u.Raw))
	if err := json.Compact(&b, u.Raw); err != nil {
		return invalid("", "unknown part %q: raw JSON: %v", u.Type, err)
	}
	if jsonlex.KindOf(b.Bytes()) != jsonlex.KindObject {
		return invalid("", "unknown part %q: raw JSON is not an object", u.Type)
	}
	e.buf = append(e.buf, b.Bytes()...)
	return nil
}

// flag writes the member k as true when v is set (false is left out).
func (e *encoder) flag(k string, v bool) {
	if v {
		e.key(k)
		e.bool(true)
	}
}

// toolState writes a validated state: only the members of its status.
func (e *encoder) toolState(s *ToolState) error {
	e.buf = append(e.buf, '{')
	e.strField("status", string(s.Status))
	e.key("input")
	if err := e.object(s.Input); err != nil {
		return at("input", err)
	}
	switch s.Status {
	case StatusPending:
		e.strField("raw", s.Raw)
	case StatusRunning, StatusBlocked:
		e.optStr("title", s.Title)
		if err := e.optObject("metadata", s.Metadata); err != nil {
			return err
		}
		e.key("time")
		e.buf = append(e.buf, '{')
		e.intField("start", s.Time.Start)
		e.buf = append(e.buf, '}')
	case StatusCompleted:
		e.strField("output", s.Output)
		e.strField("title", s.Title)
		e.key("metadata")
		if err := e.object(s.Metadata); err != nil {
			return at("metadata", err)
		}
		e.toolTime(&s.Time)
		if s.Attachments != nil {
			e.key("attachments")
			e.buf = append(e.buf, '[')
			for i := range s.Attachments {
				e.sep()
				if err := e.part(&s.Attachments[i]); err != nil {
					return at(joinPath("attachments", indexPath(i)), err)
				}
			}
			e.buf = append(e.buf, ']')
		}
	case StatusError:
		e.strField("error", s.Error)
		if err := e.optObject("metadata", s.Metadata); err != nil {
			return err
		}
		e.toolTime(&s.Time)
	}
	if s.Block != nil {
		e.key("block")
		if err := e.block(s.Block); err != nil {
			return at("block", err)
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

func (e *encoder) toolTime(t *ToolTime) {
	e.key("time")
	e.buf = append(e.buf, '{')
	e.intField("start", t.Start)
	e.intField("end", t.End)
	e.optInt("compacted", t.Compacted)
	e.buf = append(e.buf, '}')
}

// block writes a validated block (see Block for the members of each form).
func (e *encoder) block(b *Block) error {
	e.buf = append(e.buf, '{')
	e.strField("type", string(b.Type))
	e.strField("id", b.ID)
	resolved := b.DecidedAt != nil
	switch b.Type {
	case BlockPermission:
		e.strField("permission", b.Permission)
		e.key("patterns")
		e.strings(b.Patterns)
		if !resolved || len(b.Always) > 0 {
			e.key("always")
			e.strings(b.Always)
		}
		e.key("metadata")
		if err := e.object(b.Metadata); err != nil {
			return at("metadata", err)
		}
		if resolved {
			e.strField("decision", string(b.Decision))
		}
	case BlockQuestion:
		e.key("questions")
		e.buf = append(e.buf, '[')
		for _, q := range b.Questions {
			e.sep()
			e.buf = append(e.buf, '{')
			e.strField("question", q.Question)
			e.strField("header", q.Header)
			e.key("options")
			e.buf = append(e.buf, '[')
			for _, o := range q.Options {
				e.sep()
				e.buf = append(e.buf, '{')
				e.strField("label", o.Label)
				e.strField("description", o.Description)
				e.buf = append(e.buf, '}')
			}
			e.buf = append(e.buf, ']')
			e.optBool("multiple", q.Multiple)
			e.optBool("custom", q.Custom)
			e.buf = append(e.buf, '}')
		}
		e.buf = append(e.buf, ']')
		if resolved {
			e.key("answers")
			e.buf = append(e.buf, '[')
			for _, a := range b.Answers {
				e.sep()
				e.strings(a)
			}
			e.buf = append(e.buf, ']')
			if b.Decision != "" {
				e.strField("decision", string(b.Decision))
			}
		}
	}
	if resolved {
		e.intField("decidedAt", *b.DecidedAt)
		e.optStr("reason", b.Reason)
		if r := b.Rule; r != nil {
			e.key("rule")
			e.buf = append(e.buf, '{')
			e.strField("permission", r.Permission)
			e.strField("pattern", r.Pattern)
			e.strField("action", string(r.Action))
			e.buf = append(e.buf, '}')
		}
	}
	e.buf = append(e.buf, '}')
	return nil
}

// The codec is every model type's MarshalJSON: a change of receiver that
// would bypass it fails to compile here.
var (
	_ json.Marshaler = Transcript{}
	_ json.Marshaler = MessageWithParts{}
	_ json.Marshaler = ToolState{}
	_ json.Marshaler = Block{}
	_ json.Marshaler = UserMessage{}
	_ json.Marshaler = AssistantMessage{}
	_ json.Marshaler = TextPart{}
	_ json.Marshaler = UnknownPart{}
)
