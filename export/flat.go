// Package export projects a canonical transcript (package mapper) into other
// shapes. Flat produces the flat, append-only event stream of the session
// protocol v2 draft (seed 000): turn-start, text, tool-call-start,
// permission-request, permission-response, tool-call-end, turn-end, file,
// service. It is a pure function of the transcript: the same transcript
// always gives the same events, ids included.
package export

import (
	"strconv"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Flat event types (seed 000).
const (
	TypeTurnStart          = "turn-start"
	TypeTurnEnd            = "turn-end"
	TypeText               = "text"
	TypeToolCallStart      = "tool-call-start"
	TypeToolCallEnd        = "tool-call-end"
	TypePermissionRequest  = "permission-request"
	TypePermissionResponse = "permission-response"
	TypeFile               = "file"
	TypePhoto              = "photo"
	TypeService            = "service"
)

// Permission option kinds and ids offered in a permission-request.
const (
	OptionAllowOnce    = "allow-once"
	OptionAllowAlways  = "allow-always"
	OptionRejectOnce   = "reject-once"
	OptionRejectAlways = "reject-always"
)

// Option is one choice of a permission-request.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Kind  string `json:"kind"`
}

// FlatEvent is one event of the flat stream. Fields not used by an event's
// Type are empty and omitted from JSON. ID is derived from the canonical part
// (or message) id plus a suffix naming the event's role, so it is stable.
type FlatEvent struct {
	ID         string         `json:"id"`
	Time       int64          `json:"time"` // Unix ms
	Role       string         `json:"role"` // "agent" | "user"
	Type       string         `json:"type"`
	Turn       string         `json:"turn,omitempty"`
	ParentID   string         `json:"parentId,omitempty"` // the tool call that spawned a subagent
	AgentID    string         `json:"agentId,omitempty"`  // the subagent (child session id)
	Text       string         `json:"text,omitempty"`
	Thinking   bool           `json:"thinking,omitempty"`
	CallID     string         `json:"callId,omitempty"`
	ToolName   string         `json:"toolName,omitempty"`
	Title      string         `json:"title,omitempty"`
	Args       map[string]any `json:"args,omitempty"`
	AgentTitle string         `json:"agentTitle,omitempty"`
	Options    []Option       `json:"options,omitempty"`
	OptionID   string         `json:"optionId,omitempty"`
	Error      string         `json:"error,omitempty"`
	Status     string         `json:"status,omitempty"` // turn-end: completed | failed | cancelled
	Ref        string         `json:"ref,omitempty"`    // file, photo: URL or blob reference
	Name       string         `json:"name,omitempty"`   // file: display name
	MimeType   string         `json:"mimeType,omitempty"`
	Size       int64          `json:"size,omitempty"`      // file, photo: bytes, when known
	Width      int            `json:"width,omitempty"`     // photo: pixels
	Height     int            `json:"height,omitempty"`    // photo: pixels
	Thumbhash  string         `json:"thumbhash,omitempty"` // photo: base64 ThumbHash
}

// fileEvent fills ev (its id, time, role and turn set) for a file part: a
// photo (ref, width, height, thumbhash, size, mimeType) for an image whose
// blob source gives its size in pixels, else a file (ref, name, size,
// mimeType). Seed 000 "photo" and "file".
func fileEvent(ev FlatEvent, f *mapper.FilePart) FlatEvent {
	ev.Type, ev.Ref, ev.Name, ev.MimeType = TypeFile, f.URL, f.Filename, f.Mime
	if src, ok := mapper.ParseBlobSource(f.Source); ok {
		ev.Size = src.Size
		if strings.HasPrefix(f.Mime, "image/") && src.Width > 0 && src.Height > 0 {
			ev.Type, ev.Width, ev.Height, ev.Thumbhash = TypePhoto, src.Width, src.Height, src.Thumbhash
		}
	}
	return ev
}

// permissionOptions are the four choices every permission-request offers.
var permissionOptions = [...]Option{
	{ID: OptionAllowOnce, Label: "Allow once", Kind: OptionAllowOnce},
	{ID: OptionAllowAlways, Label: "Allow for session", Kind: OptionAllowAlways},
	{ID: OptionRejectOnce, Label: "Deny", Kind: OptionRejectOnce},
	{ID: OptionRejectAlways, Label: "Always deny", Kind: OptionRejectAlways},
}

// Flat projects t into the flat event stream. Child sessions are inlined
// after the tool call that spawned them (the parent tool part's
// metadata.sessionId names the child), with ParentID set to that call and
// AgentID to the child session id.
func Flat(t mapper.Transcript) []FlatEvent {
	p := projector{children: map[string]*mapper.Transcript{}, open: -1}
	for i := range t.Children {
		p.children[t.Children[i].Session.ID] = &t.Children[i]
	}
	p.session(&t, "", "", "")
	return p.out
}

type projector struct {
	out      []FlatEvent
	children map[string]*mapper.Transcript
	// open is the index in out of the first event that may still change
	// (a text still streaming, a tool whose input still streams); -1 when
	// none does.
	open int
}

// unsettled marks the event just appended as one that may still change.
func (p *projector) unsettled() {
	if p.open < 0 {
		p.open = len(p.out) - 1
	}
}

// FlatSettled is the part of Flat(t) that will not change as the
// transcript goes on: the events before the first one that still may (a
// text part that is still streaming, a tool call whose input is still
// streaming). A text or reasoning part that another part of its message
// follows counts as settled, reported end or not: the model went on past
// it (an agent that adds to it afterwards makes its event change; a
// follower writes it again). Printed as it grows, it is an append-only stream, each event
// written once and in the order Flat gives; a tool-call-start carries what
// was known when the tool started (its title may be refined later in the
// transcript).
func FlatSettled(t mapper.Transcript) []FlatEvent {
	p := projector{children: map[string]*mapper.Transcript{}, open: -1}
	for i := range t.Children {
		p.children[t.Children[i].Session.ID] = &t.Children[i]
	}
	p.session(&t, "", "", "")
	if p.open >= 0 {
		return p.out[:p.open]
	}
	return p.out
}

// session emits the events of one session; inherited turn/parent/agent are
// set for child sessions.
//
// In the root session a turn is a prompt and the steps that answer it: an
// assistant message belongs to the turn of its parentID (the user message it
// answers), or, when that names no prompt of the session, to the turn of the
// latest prompt before it. A prompt's place in the transcript is not where
// its turn begins: a prompt sent from another device while a turn runs is on
// the relay where it was sent, among the running turn's steps. So each turn
// starts at its first step and ends after its last, and every prompt gets
// its own turn-start/turn-end pair.
func (p *projector) session(t *mapper.Transcript, turn, parentID, agentID string) {
	child := parentID != ""
	var turnOf []string      // by message index: the turn of an assistant message
	last := map[string]int{} // turn → index of its last assistant message
	if !child {
		turnOf = make([]string, len(t.Messages))
		prompts := map[string]bool{}
		for _, m := range t.Messages {
			if u, ok := m.Info.(*mapper.UserMessage); ok {
				prompts[u.ID] = true
			}
		}
		latest := ""
		for i, m := range t.Messages {
			switch info := m.Info.(type) {
			case *mapper.UserMessage:
				latest = info.ID
			case *mapper.AssistantMessage:
				turnOf[i] = latest
				if prompts[info.ParentID] {
					turnOf[i] = info.ParentID
				}
				if turnOf[i] != "" {
					last[turnOf[i]] = i
				}
			}
		}
	}
	turns := map[string]*turnState{}
	for i, m := range t.Messages {
		switch info := m.Info.(type) {
		case *mapper.UserMessage:
			if !child { // a subagent's prompt is in the parent's tool-call-start args
				p.userMessage(info, m.Parts)
			}
		case *mapper.AssistantMessage:
			if child || turnOf[i] == "" {
				p.assistantMessage(info, m.Parts, turn, parentID, agentID)
				continue
			}
			id := turnOf[i]
			ts := turns[id]
			if ts == nil {
				ts = &turnState{id: id}
				turns[id] = ts
				p.out = append(p.out, FlatEvent{ID: id + ".turn-start", Time: info.Time.Created, Role: "agent", Type: TypeTurnStart, Turn: id})
			}
			ts.last = info
			p.assistantMessage(info, m.Parts, id, parentID, agentID)
			if last[id] == i {
				if ev, ok := ts.end(); ok {
					p.out = append(p.out, ev)
					if info.Finish == agent.FinishToolCalls {
						p.unsettled() // the model goes on once its tools are done
					}
				}
			}
		}
	}
}

// turnState tracks a started turn: its prompt's id and its latest step.
type turnState struct {
	id   string
	last *mapper.AssistantMessage
}

// end returns the turn-end event, once the turn's last assistant message is
// complete.
func (ts *turnState) end() (FlatEvent, bool) {
	if ts.last == nil || ts.last.Time.Completed == nil {
		return FlatEvent{}, false
	}
	status := "completed"
	switch ts.last.Finish {
	case agent.FinishAborted:
		status = "cancelled"
	case agent.FinishError:
		status = "failed"
	}
	if ts.last.Error != nil && ts.last.Finish != agent.FinishAborted {
		status = "failed"
	}
	return FlatEvent{ID: ts.id + ".turn-end", Time: *ts.last.Time.Completed, Role: "agent", Type: TypeTurnEnd, Turn: ts.id, Status: status}, true
}

func (p *projector) userMessage(m *mapper.UserMessage, parts []mapper.Part) {
	for _, part := range parts {
		switch pt := part.(type) {
		case *mapper.TextPart:
			p.out = append(p.out, FlatEvent{ID: pt.ID, Time: m.Time.Created, Role: "user", Type: TypeText, Text: pt.Text})
		case *mapper.FilePart:
			p.out = append(p.out, fileEvent(FlatEvent{ID: pt.ID, Time: m.Time.Created, Role: "user"}, pt))
		}
	}
}

func (p *projector) assistantMessage(m *mapper.AssistantMessage, parts []mapper.Part, turn, parentID, agentID string) {
	base := func(id string, t int64, typ string) FlatEvent {
		return FlatEvent{ID: id, Time: t, Role: "agent", Type: typ, Turn: turn, ParentID: parentID, AgentID: agentID}
	}
	for i, part := range parts {
		// A text the model went past (another part follows it) is settled
		// although no end was reported (ACP reports none).
		last := i == len(parts)-1
		switch pt := part.(type) {
		case *mapper.TextPart:
			open := m.Time.Completed == nil && (pt.Time == nil || pt.Time.End == nil) && last
			if pt.Text == "" && !open {
				continue // emptied (a broken-off attempt's text): it says nothing
			}
			ev := base(pt.ID, partStart(pt.Time, m.Time.Created), TypeText)
			ev.Text = pt.Text
			p.out = append(p.out, ev)
			if open {
				p.unsettled()
			}
		case *mapper.ReasoningPart:
			open := m.Time.Completed == nil && pt.Time.End == nil && last
			if pt.Text == "" && !open && pt.Metadata == nil {
				continue
			}
			ev := base(pt.ID, partStart(&pt.Time, m.Time.Created), TypeText)
			ev.Text, ev.Thinking = pt.Text, true
			p.out = append(p.out, ev)
			if open {
				p.unsettled()
			}
		case *mapper.FilePart:
			p.out = append(p.out, fileEvent(base(pt.ID, m.Time.Created, TypeFile), pt))
		case *mapper.CompactionPart:
			ev := base(pt.ID, m.Time.Created, TypeService)
			ev.Text = "Context compacted"
			p.out = append(p.out, ev)
		case *mapper.RetryPart:
			ev := base(pt.ID, pt.Time.Created, TypeService)
			ev.Text = "Retrying (attempt " + strconv.Itoa(pt.Attempt) + "): " + pt.Error.Data.Message
			p.out = append(p.out, ev)
		case *mapper.ToolPart:
			p.tool(m, pt, base)
		}
	}
}

func (p *projector) tool(m *mapper.AssistantMessage, pt *mapper.ToolPart, base func(string, int64, string) FlatEvent) {
	st := &pt.State
	start := st.Time.Start
	if start == 0 {
		start = m.Time.Created
	}
	ev := base(pt.ID, start, TypeToolCallStart)
	ev.CallID, ev.ToolName, ev.Title, ev.Args = pt.CallID, pt.Tool, st.Title, st.Input
	if ev.Title == "" {
		ev.Title = pt.Tool
	}
	childID, _ := st.Metadata["sessionId"].(string)
	child := p.children[childID]
	if child != nil {
		ev.AgentTitle = child.Session.Title
	}
	p.out = append(p.out, ev)
	if st.Status == mapper.StatusPending {
		p.unsettled() // its input is still streaming
	}

	if b := st.Block; b != nil {
		switch b.Type {
		case mapper.BlockPermission:
			req := base(pt.ID+".permission", start, TypePermissionRequest)
			req.CallID, req.ToolName, req.Title, req.Args = pt.CallID, pt.Tool, ev.Title, st.Input
			req.Options = permissionOptions[:]
			p.out = append(p.out, req)
			if b.Resolved() {
				resp := base(pt.ID+".decision", *b.DecidedAt, TypePermissionResponse)
				resp.Role, resp.Turn, resp.CallID = "user", "", pt.CallID
				resp.OptionID = optionFor(b.Decision)
				p.out = append(p.out, resp)
			}
		case mapper.BlockQuestion:
			if b.Resolved() {
				q := base(pt.ID+".answer", *b.DecidedAt, TypeService)
				q.Text = questionSummary(b)
				p.out = append(p.out, q)
			}
		}
	}
	if child != nil {
		p.session(child, ev.Turn, pt.CallID, child.Session.ID)
	}
	for i := range st.Attachments {
		a := &st.Attachments[i]
		p.out = append(p.out, fileEvent(base(a.ID, st.Time.End, TypeFile), a))
	}
	switch st.Status {
	case mapper.StatusCompleted, mapper.StatusError:
		end := base(pt.ID+".end", st.Time.End, TypeToolCallEnd)
		end.CallID = pt.CallID
		if st.Status == mapper.StatusError {
			end.Error = st.Error
			if end.Error == "" {
				end.Error = "failed"
			}
		}
		p.out = append(p.out, end)
	}
}

// optionFor maps a canonical decision to the flat stream's option id.
func optionFor(d agent.Decision) string {
	switch d {
	case agent.DecisionOnce:
		return OptionAllowOnce
	case agent.DecisionAlways:
		return OptionAllowAlways
	default:
		return OptionRejectOnce
	}
}

func questionSummary(b *mapper.Block) string {
	s := ""
	for i, q := range b.Questions {
		if i > 0 {
			s += "\n"
		}
		s += q.Question + " = "
		if i < len(b.Answers) {
			for j, a := range b.Answers[i] {
				if j > 0 {
					s += ", "
				}
				s += a
			}
		}
	}
	if s == "" && b.Reason != "" {
		s = "Question not answered: " + b.Reason
	}
	return s
}

func partStart(t *mapper.PartTime, fallback int64) int64 {
	if t != nil && t.Start != 0 {
		return t.Start
	}
	return fallback
}
