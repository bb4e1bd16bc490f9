package mapper

import (
	"slices"

	"github.com/happy-dev/happy/agent"
)

// Snapshots: the reducer mutates its live parts and messages in place but
// never mutates a map, slice or pointed-to value it has handed out (it
// replaces them), so a shallow copy of a part or message is an immutable
// snapshot, safe to publish to other goroutines.

func (s *redSession) sessionSnapshot() Session { return s.info }

func (m *redMessage) infoSnapshot() Message {
	if m.user != nil {
		u := *m.user
		return &u
	}
	a := *m.asst
	return &a
}

// redCopyPart returns a shallow copy of a part.
func redCopyPart(p Part) Part {
	switch x := p.(type) {
	case *TextPart:
		c := *x
		return &c
	case *ReasoningPart:
		c := *x
		return &c
	case *ToolPart:
		c := *x
		return &c
	case *FilePart:
		c := *x
		return &c
	case *StepStartPart:
		c := *x
		return &c
	case *StepFinishPart:
		c := *x
		return &c
	case *SubtaskPart:
		c := *x
		return &c
	case *AgentPart:
		c := *x
		return &c
	case *SnapshotPart:
		c := *x
		return &c
	case *PatchPart:
		c := *x
		return &c
	case *CompactionPart:
		c := *x
		return &c
	case *RetryPart:
		c := *x
		return &c
	case *UnknownPart:
		c := *x
		return &c
	}
	return p
}

func (r *Reducer) emitPart(p Part) { r.emit(&MessagePartUpdated{Part: redCopyPart(p)}) }

// snapshot returns the message and its parts, the step-finish last.
func (m *redMessage) snapshot() MessageWithParts {
	parts := make([]Part, 0, len(m.parts)+1)
	for _, p := range m.parts {
		parts = append(parts, redCopyPart(p))
	}
	if m.finish != nil {
		parts = append(parts, redCopyPart(m.finish))
	}
	return MessageWithParts{Info: m.infoSnapshot(), Parts: parts}
}

// Message returns the current state of one message (info and parts, in
// order) by its canonical id, and false when there is none. This is what
// the relay sink encrypts and sends as the message's next version.
func (r *Reducer) Message(id string) (MessageWithParts, bool) {
	m := r.msgs[id]
	if m == nil {
		return MessageWithParts{}, false
	}
	return m.snapshot(), true
}

// Session returns the current record of a session (root or child) by its
// canonical id, and false when there is none.
func (r *Reducer) Session(id string) (Session, bool) {
	if s := r.byID[id]; s != nil {
		return s.info, true
	}
	return Session{}, false
}

// Key returns the agent's key of a session (root or child) by its
// canonical id: "" for the root, a child's key as its agent events name
// it (EventBase.Session); false when there is no such session.
func (r *Reducer) Key(id string) (string, bool) {
	if s := r.byID[id]; s != nil {
		return s.key, true
	}
	return "", false
}

// Todos returns the todo list of a session by its canonical id (empty when
// none was reported).
func (r *Reducer) Todos(sessionID string) []agent.Todo {
	if s := r.byID[sessionID]; s != nil {
		return append([]agent.Todo{}, s.todos...)
	}
	return []agent.Todo{}
}

// RuntimeRules returns the permission rules added by "always" answers in a
// session (by canonical id), in the order they were added.
func (r *Reducer) RuntimeRules(sessionID string) []PermissionRule {
	if s := r.byID[sessionID]; s != nil {
		return slices.Clone(s.rules.Runtime)
	}
	return nil
}

// Transcript returns the whole transcript document: the root session, its
// messages in order of creation, its child sessions (each a Transcript,
// nested as the subagents were), todos and dropped inputs. Every slice is
// non-nil. The result is a snapshot: later events do not change it.
func (r *Reducer) Transcript() Transcript { return r.transcript(r.root) }

func (r *Reducer) transcript(s *redSession) Transcript {
	t := Transcript{
		Session:  s.info,
		Messages: make([]MessageWithParts, 0, len(s.messages)),
		Children: make([]Transcript, 0, len(s.children)),
		Todos:    append([]agent.Todo{}, s.todos...),
		Dropped:  append([]agent.Dropped{}, s.dropped...),
	}
	for _, m := range s.messages {
		t.Messages = append(t.Messages, m.snapshot())
	}
	for _, c := range s.children {
		t.Children = append(t.Children, r.transcript(c))
	}
	return t
}

// Dropped returns the refusals recorded for a session (root or child, by
// canonical id), in order; nil when none or the session is unknown.
func (r *Reducer) Dropped(sessionID string) []agent.Dropped {
	s := r.byID[sessionID]
	if s == nil || len(s.dropped) == 0 {
		return nil
	}
	return slices.Clone(s.dropped)
}

// DroppedTotal counts the refusals recorded across all sessions; a caller
// compares it before and after Apply to notice new ones cheaply.
func (r *Reducer) DroppedTotal() int { return r.droppedTotal }

// DroppedSessions lists the canonical ids of the sessions that recorded
// refusals, root first, then children in the order they were opened.
func (r *Reducer) DroppedSessions() []string {
	var out []string
	var walk func(s *redSession)
	walk = func(s *redSession) {
		if len(s.dropped) > 0 {
			out = append(out, s.info.ID)
		}
		for _, c := range s.children {
			walk(c)
		}
	}
	walk(r.root)
	return out
}
