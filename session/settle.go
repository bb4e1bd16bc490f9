package session

import (
	"cmp"
	"slices"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// SettledMessage is a new version of a message that a writer which died
// left open (docs/ARCHITECTURE.md, section "A session's life"): its open
// tools settled, and, when it was still being produced, completed with
// finish "error".
type SettledMessage struct {
	// Record is the message's record id (its message id).
	Record string
	// ReadVersion is the version read back; the settled one must be
	// greater, or readers keep the old one.
	ReadVersion int64
	// Message is the settled message.
	Message mapper.MessageWithParts
}

// Settle returns the messages the read-back transcript leaves open, settled
// at time at (Unix ms) with reason (agent.ReasonWrapperExited for a happy
// that died): every tool still pending, running or blocked goes to error
// with the reason (a blocked one resolved as reject, as mapper.ToolState
// Settle does), text and reasoning parts still streaming get an end time,
// and an assistant message without time.completed gets it, with finish
// "error", an error saying why, and a closing step-finish part. Messages
// come in the order their first versions reached the relay; nothing open
// gives nil. The Readback itself is not changed.
func (r *Readback) Settle(reason string, at int64) []SettledMessage {
	type entry struct {
		id    string
		e     msgEntry
		value mapper.MessageWithParts
	}
	var all []entry
	var maxPos uint64
	for id, e := range r.msgs {
		v := r.values[id]
		all = append(all, entry{id, e, v})
		for _, p := range v.Parts {
			if pos, ok := mapper.IDPosition(p.Base().ID, mapper.PrefixPart); ok && pos > maxPos {
				maxPos = pos
			}
		}
	}
	slices.SortFunc(all, func(a, b entry) int {
		if c := cmp.Compare(a.e.first, b.e.first); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	var out []SettledMessage
	for _, e := range all {
		m, changed := settleMessage(e.value, reason, at, &maxPos)
		if changed {
			out = append(out, SettledMessage{Record: e.id, ReadVersion: e.e.version, Message: m})
		}
	}
	return out
}

// settleMessage returns a settled copy of m and whether anything was open.
func settleMessage(m mapper.MessageWithParts, reason string, at int64, maxPos *uint64) (mapper.MessageWithParts, bool) {
	changed := false
	parts := make([]mapper.Part, len(m.Parts))
	for i, p := range m.Parts {
		parts[i] = p
		switch x := p.(type) {
		case *mapper.ToolPart:
			if !x.State.Status.Open() {
				continue
			}
			next, err := x.State.Settle(reason, at)
			if err != nil {
				continue
			}
			c := *x
			c.State = next
			parts[i], changed = &c, true
		case *mapper.TextPart:
			if x.Time != nil && x.Time.End == nil {
				c := *x
				c.Time = &mapper.PartTime{Start: x.Time.Start, End: &at}
				parts[i], changed = &c, true
			}
		case *mapper.ReasoningPart:
			if x.Time.End == nil {
				c := *x
				c.Time = mapper.PartTime{Start: x.Time.Start, End: &at}
				parts[i], changed = &c, true
			}
		}
	}
	info := m.Info
	if am, ok := m.Info.(*mapper.AssistantMessage); ok && am.Time.Completed == nil {
		c := *am
		c.Time.Completed = &at
		c.Finish = agent.FinishError
		if c.Error == nil {
			c.Error = &agent.MessageError{Name: agent.ErrNameUnknown, Data: agent.ErrorData{
				Message: "happy exited before the turn ended (" + reason + ")", Kind: agent.ErrorInternal}}
		}
		info = &c
		*maxPos++
		parts = append(parts, &mapper.StepFinishPart{
			PartBase: mapper.PartBase{ID: mapper.MakeID(mapper.PrefixPart, am.SessionID, *maxPos, "settle:"+am.ID),
				SessionID: am.SessionID, MessageID: am.ID},
			Reason: agent.FinishError, Cost: am.Cost, Tokens: am.Tokens,
		})
		changed = true
	}
	return mapper.MessageWithParts{Info: info, Parts: parts}, changed
}

// NextPosition is one past the highest id position among everything read
// back (sessions, messages, parts, permission and question blocks): the
// mapper.Config FirstPosition of a reducer that continues the session, so
// its new ids never collide with these (docs/ARCHITECTURE.md, section
// "Ids").
func (r *Readback) NextPosition() uint64 {
	var top uint64
	seen := false
	note := func(id string, prefixes ...string) {
		for _, p := range prefixes {
			if pos, ok := mapper.IDPosition(id, p); ok {
				if !seen || pos > top {
					top, seen = pos, true
				}
				return
			}
		}
	}
	for id := range r.sessions {
		note(id, mapper.PrefixSession)
	}
	for id := range r.msgs {
		note(id, mapper.PrefixMessage)
		for _, p := range r.values[id].Parts {
			note(p.Base().ID, mapper.PrefixPart)
			if tp, ok := p.(*mapper.ToolPart); ok && tp.State.Block != nil {
				note(tp.State.Block.ID, mapper.PrefixPermission, mapper.PrefixQuestion)
			}
		}
	}
	if !seen {
		return 0
	}
	return top + 1
}
