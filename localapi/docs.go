package localapi

import (
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// sessionDoc is what the hub knows of one session (root or child).
type sessionDoc struct {
	info    mapper.Session
	hasInfo bool
	msgs    map[string]*messageDoc
	order   []string // message ids in order of first appearance
	todos   []agent.Todo
}

// messageDoc is one message: its info (nil until a message.updated) and its
// parts in order of first appearance, the step-finish kept last as the
// reducer keeps it.
type messageDoc struct {
	info   mapper.Message
	parts  []mapper.Part
	finish mapper.Part
}

// session returns the document of a session, made when create (h.mu held).
func (h *Hub) session(id string, create bool) *sessionDoc {
	sd := h.sessions[id]
	if sd == nil && create {
		sd = &sessionDoc{msgs: map[string]*messageDoc{}}
		h.sessions[id] = sd
		h.order = append(h.order, id)
	}
	return sd
}

// message returns the document of a message, made when create (h.mu held).
func (h *Hub) message(sessionID, messageID string, create bool) *messageDoc {
	sd := h.session(sessionID, create)
	if sd == nil {
		return nil
	}
	md := sd.msgs[messageID]
	if md == nil && create {
		md = &messageDoc{}
		sd.msgs[messageID] = md
		sd.order = append(sd.order, messageID)
	}
	return md
}

// part returns the hub's part named k, nil when there is none (h.mu held).
func (h *Hub) part(k partKey) mapper.Part {
	md := h.message(k.session, k.message, false)
	if md == nil {
		return nil
	}
	if md.finish != nil && md.finish.Base().ID == k.part {
		return md.finish
	}
	for _, p := range md.parts {
		if p.Base().ID == k.part {
			return p
		}
	}
	return nil
}

// fold applies one change to the documents (h.mu held). Values are
// snapshots (mapper.BusEvent): the hub keeps them as they are and copies a
// part before appending a delta to it.
func (h *Hub) fold(ev mapper.BusEvent) {
	switch e := ev.(type) {
	case *mapper.SessionCreated:
		sd := h.session(e.Info.ID, true)
		sd.info, sd.hasInfo = e.Info, true
	case *mapper.SessionUpdated:
		sd := h.session(e.Info.ID, true)
		sd.info, sd.hasInfo = e.Info, true
	case *mapper.MessageUpdated:
		md := h.message(messageSession(e.Info), e.Info.MessageID(), true)
		md.info = e.Info
	case *mapper.MessagePartUpdated:
		b := e.Part.Base()
		md := h.message(b.SessionID, b.MessageID, true)
		if e.Part.PartType() == mapper.PartStepFinish {
			md.finish = e.Part
			return
		}
		for i, p := range md.parts {
			if p.Base().ID == b.ID {
				md.parts[i] = e.Part
				return
			}
		}
		md.parts = append(md.parts, e.Part)
	case *mapper.MessagePartDelta:
		md := h.message(e.SessionID, e.MessageID, false)
		if md == nil {
			return
		}
		for i, p := range md.parts {
			if p.Base().ID == e.PartID {
				md.parts[i] = appendDelta(p, e.Field, e.Delta)
				return
			}
		}
	case *mapper.TodoUpdated:
		sd := h.session(e.SessionID, true)
		sd.todos = append([]agent.Todo{}, e.Todos...)
	}
}

// appendDelta returns a copy of p with delta appended to field ("text" of a
// text or reasoning part, "state.raw" of a tool part); p itself when the
// field is not one of those (the next message.part.updated carries it).
func appendDelta(p mapper.Part, field, delta string) mapper.Part {
	switch x := p.(type) {
	case *mapper.TextPart:
		if field == "text" {
			c := *x
			c.Text += delta
			return &c
		}
	case *mapper.ReasoningPart:
		if field == "text" {
			c := *x
			c.Text += delta
			return &c
		}
	case *mapper.ToolPart:
		if field == "state.raw" {
			c := *x
			c.State.Raw += delta
			return &c
		}
	}
	return p
}

func messageSession(m mapper.Message) string {
	switch x := m.(type) {
	case *mapper.UserMessage:
		return x.SessionID
	case *mapper.AssistantMessage:
		return x.SessionID
	}
	return ""
}

// Sessions returns the sessions the hub knows (root and child sessions, in
// order of first appearance), as session.created and session.updated last
// described them.
func (h *Hub) Sessions() []mapper.Session {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]mapper.Session, 0, len(h.order))
	for _, id := range h.order {
		if sd := h.sessions[id]; sd != nil && sd.hasInfo {
			out = append(out, sd.info)
		}
	}
	return out
}

// Messages returns one session's messages with their parts (in order of
// first appearance, each part as its last change left it), and false when
// the hub knows no such session. A message whose info has not been
// published yet is left out.
func (h *Hub) Messages(sessionID string) ([]mapper.MessageWithParts, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sd := h.sessions[sessionID]
	if sd == nil || !sd.hasInfo {
		return nil, false
	}
	out := make([]mapper.MessageWithParts, 0, len(sd.order))
	for _, id := range sd.order {
		md := sd.msgs[id]
		if md.info == nil {
			continue
		}
		parts := make([]mapper.Part, 0, len(md.parts)+1)
		parts = append(parts, md.parts...)
		if md.finish != nil {
			parts = append(parts, md.finish)
		}
		out = append(out, mapper.MessageWithParts{Info: md.info, Parts: parts})
	}
	return out, true
}

// Todos returns one session's todo list (empty when none was published),
// and false when the hub knows no such session.
func (h *Hub) Todos(sessionID string) ([]agent.Todo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sd := h.sessions[sessionID]
	if sd == nil || !sd.hasInfo {
		return nil, false
	}
	return append([]agent.Todo{}, sd.todos...), true
}
