package mapper

import (
	"strings"

	"github.com/happy-dev/happy/agent"
)

// ---- text and reasoning ----

// block returns the text/reasoning block a content event refers to, or nil
// when it does not exist and create is false. Block "" is the message's
// last part when that is a block of the same kind.
func (m *redMessage) block(kind, key string) *redBlock {
	if key != "" {
		return m.blocks[redBlockKey{kind, key}]
	}
	if b := m.tail; b != nil && len(m.parts) > 0 && b.part() == m.parts[len(m.parts)-1] && b.kind() == kind {
		return b
	}
	return nil
}

func (b *redBlock) part() Part {
	if b.text != nil {
		return b.text
	}
	return b.reasoning
}

func (b *redBlock) kind() string {
	if b.text != nil {
		return "text"
	}
	return "reasoning"
}

func (r *Reducer) newBlock(m *redMessage, kind, key, text string, t int64) *redBlock {
	b := &redBlock{sb: &strings.Builder{}}
	b.sb.WriteString(text)
	base := r.partBase(m, kind+"\x00"+key)
	if kind == "text" {
		b.text = &TextPart{PartBase: base, Text: b.sb.String(), Time: &PartTime{Start: t}}
	} else {
		b.reasoning = &ReasoningPart{PartBase: base, Text: b.sb.String(), Time: PartTime{Start: t}}
	}
	if key != "" {
		m.blocks[redBlockKey{kind, key}] = b
	}
	m.tail = b
	m.parts = append(m.parts, b.part())
	return b
}

func (r *Reducer) textDelta(s *redSession, msgKey, blockKey, delta string, reasoning bool, t int64) {
	if delta == "" {
		return
	}
	kind := "text"
	if reasoning {
		kind = "reasoning"
	}
	m := r.assistant(s, msgKey, redFindOutput, t)
	b := m.block(kind, blockKey)
	if b == nil {
		b = r.newBlock(m, kind, blockKey, delta, t)
		r.emitPart(b.part())
		return
	}
	if b.final {
		return // stale: the final already holds the whole text
	}
	b.sb.WriteString(delta)
	if b.text != nil {
		b.text.Text = b.sb.String()
	} else {
		b.reasoning.Text = b.sb.String()
	}
	p := b.part().Base()
	r.emit(&MessagePartDelta{SessionID: p.SessionID, MessageID: p.MessageID, PartID: p.ID, Field: "text", Delta: delta})
}

func (r *Reducer) textFinal(s *redSession, msgKey, blockKey, text string, meta agent.Object, reasoning bool, t int64) {
	kind := "text"
	if reasoning {
		kind = "reasoning"
	}
	m := r.assistant(s, msgKey, redFindOutput, t)
	b := m.block(kind, blockKey)
	if b == nil {
		b = r.newBlock(m, kind, blockKey, text, t)
		b.final = true
		r.endBlock(b, t)
		if meta != nil && b.reasoning != nil {
			b.reasoning.Metadata = meta
		}
		r.emitPart(b.part())
		return
	}
	changed := !b.final
	b.final = true
	if b.sb.Len() != len(text) || b.sb.String() != text {
		b.sb = &strings.Builder{}
		b.sb.WriteString(text)
		changed = true
	}
	if b.text != nil {
		b.text.Text = b.sb.String()
	} else {
		b.reasoning.Text = b.sb.String()
		if meta != nil && !redObjectsEqual(b.reasoning.Metadata, meta) {
			b.reasoning.Metadata = meta
			changed = true
		}
	}
	if changed {
		r.endBlock(b, t)
		r.emitPart(b.part())
	}
}

// endBlock sets a block's time.end (once).
func (r *Reducer) endBlock(b *redBlock, t int64) {
	if b.text != nil {
		if b.text.Time.End == nil {
			b.text.Time = &PartTime{Start: b.text.Time.Start, End: redPtr(t)}
		}
		return
	}
	if b.reasoning.Time.End == nil {
		b.reasoning.Time = PartTime{Start: b.reasoning.Time.Start, End: redPtr(t)}
	}
}
