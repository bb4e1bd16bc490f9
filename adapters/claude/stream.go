package claude

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/happy-dev/happy/agent"
)

// streamEvent maps a stream_event record (raw Anthropic streaming events,
// --include-partial-messages): deltas of text, reasoning and tool input,
// keyed by the content index, which is also the key the complete assistant
// lines get (see message.blockKey).
func (d *Decoder) streamEvent(r *record, typeErr *json.UnmarshalTypeError) {
	ev := r.Event
	if ev == nil || badField(typeErr, "event") {
		d.drop("stream_event", agent.DropInvalidField, fieldError(typeErr, "stream_event has no event object"))
		return
	}
	s := d.session(d.sessionOf(r))
	kind := "stream_event/" + ev.Type
	switch ev.Type {
	case "message_start":
		d.streamStart(s, kind, ev.Message)
		return
	case "ping":
		return
	case "error":
		d.streamError(s, ev.Error)
		return
	case "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop":
	default:
		d.drop(kind, agent.DropUnknownType, "stream event type not known to this version")
		return
	}
	msg := d.msgs[msgKey(s.key, s.streamMsg)]
	if s.streamMsg == "" || msg == nil {
		d.drop(kind, agent.DropOrphan, "stream event outside a streamed message")
		return
	}
	idx := 0
	if ev.Index != nil {
		idx = *ev.Index
	}
	switch ev.Type {
	case "content_block_start":
		d.blockStart(s, msg, kind, ev.ContentBlock, idx)
	case "content_block_delta":
		d.blockDelta(s, msg, kind, ev.Delta, idx)
	case "message_delta":
		if dl := ev.Delta; dl != nil && dl.StopReason != nil && *dl.StopReason != "" && *dl.StopReason != msg.stop {
			if !knownStop(*dl.StopReason) {
				d.drop(kind, agent.DropInvalidField, "unknown stop_reason "+strconv.Quote(*dl.StopReason)+"; the step keeps no finish reason")
			}
			msg.stop = *dl.StopReason
		}
		if ev.Usage != nil {
			d.usage(s, msg, ev.Usage)
		}
	case "message_stop":
		d.finishStep(s, msg.id)
		s.streamMsg = ""
	}
}

// streamStart opens the message a message_start announces: the stream's
// later events belong to it.
func (d *Decoder) streamStart(s *session, kind string, m *apiMessage) {
	if m == nil || m.ID == "" {
		d.drop(kind, agent.DropMissingID, "message_start without a message id")
		return
	}
	msg, ok := d.openMessage(s, m.ID, m.Model)
	if !ok {
		return
	}
	s.streamMsg = msg.id
	if m.Usage != nil {
		d.usage(s, msg, m.Usage)
	}
}

// streamError reports an error event of the stream as the turn's error.
func (d *Decoder) streamError(s *session, e *apiErrorBody) {
	var text, code string
	if e != nil {
		text, code = e.Message, e.Type
	}
	if text == "" {
		text = "stream error " + code
	}
	d.ensureTurn(s)
	s.turnErr, s.errEmitted = text, true
	d.emit(&agent.AgentError{EventBase: d.base(s.key), Message: s.streamMsg, Kind: errorKind(nil, code, text), Text: text})
}

// blockStart handles content_block_start: a streamed tool call is
// announced, a text or thinking block may start with text.
func (d *Decoder) blockStart(s *session, msg *message, kind string, cb *contentBlock, idx int) {
	if cb == nil {
		d.drop(kind, agent.DropInvalidField, "content_block_start without a content block")
		return
	}
	block := strconv.Itoa(idx)
	switch cb.Type {
	case "tool_use", "server_tool_use", "mcp_tool_use":
		if cb.ID == "" {
			d.drop(kind, agent.DropMissingID, "streamed tool_use without an id")
			return
		}
		if msg.stream == nil {
			msg.stream = map[int]string{}
		}
		msg.stream[idx] = cb.ID
		d.toolUse(s, msg, cb, false)
	case "text":
		msg.notePartial(block, false)
		if t := deref(cb.Text); t != "" {
			d.emit(&agent.TextDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: t})
		}
	case "thinking":
		msg.notePartial(block, true)
		if t := deref(cb.Thinking); t != "" {
			d.emit(&agent.ReasoningDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: t})
		}
	}
	// Other blocks (redacted thinking, server tool results) arrive whole
	// in the assistant line.
}

// blockDelta handles content_block_delta: text, reasoning and tool input
// deltas of the block at content index idx.
func (d *Decoder) blockDelta(s *session, msg *message, kind string, dl *streamDelta, idx int) {
	if dl == nil {
		d.drop(kind, agent.DropInvalidField, "content_block_delta without a delta")
		return
	}
	block := strconv.Itoa(idx)
	switch dl.Type {
	case "text_delta":
		msg.notePartial(block, false)
		d.emit(&agent.TextDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: dl.Text})
	case "thinking_delta":
		msg.notePartial(block, true)
		d.emit(&agent.ReasoningDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: dl.Thinking})
	case "input_json_delta":
		callID := msg.stream[idx]
		if callID == "" {
			d.drop(kind, agent.DropOrphan, "input_json_delta for content index "+block+", which started no tool call")
			return
		}
		if t := d.tools[callID]; t != nil && t.input == nil {
			d.emit(&agent.ToolInputDelta{EventBase: d.base(s.key), CallID: callID, Delta: dl.PartialJSON})
		}
	case "signature_delta", "citations_delta":
		// The complete block (assistant line) carries them.
	default:
		d.drop(kind+"/"+dl.Type, agent.DropUnknownType, "delta type not known to this version")
	}
}

// notePartial records a streamed text or thinking block of m that has no
// complete assistant line yet.
func (m *message) notePartial(block string, thinking bool) {
	if m.partial == nil {
		m.partial = map[string]bool{}
	}
	if _, ok := m.partial[block]; !ok {
		m.partial[block] = thinking
	}
}

// brokenAttempt handles a retry while msg was still streaming: that model
// call broke off and Claude asks again, from the same context. What it had
// streamed is dropped, not kept as superseded: Claude discards it (the
// retried call starts over and says it again, and no transcript of
// Claude's holds it), so keeping it would show words the conversation does
// not contain, often twice. A text or thinking block without its complete
// line is emptied, a tool call whose input was still streaming fails, and
// the step is finished here without a finish of its own (the reducer
// derives one when the next step opens); the retry part, on the same step,
// says what happened.
func (d *Decoder) brokenAttempt(s *session, msg *message) {
	blocks := make([]string, 0, len(msg.partial))
	for b := range msg.partial {
		blocks = append(blocks, b)
	}
	slices.SortFunc(blocks, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	for _, b := range blocks {
		if msg.partial[b] {
			d.emit(&agent.ReasoningFinal{EventBase: d.base(s.key), Message: msg.id, Block: b})
		} else {
			d.emit(&agent.TextFinal{EventBase: d.base(s.key), Message: msg.id, Block: b})
		}
	}
	msg.partial = nil
	idx := make([]int, 0, len(msg.stream))
	for i := range msg.stream {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		if t := d.tools[msg.stream[i]]; t != nil && t.input == nil {
			d.settleTool(t, agent.TurnFailed, "the model call broke off and Claude retried it", agent.ReasonCancelled)
		}
	}
	msg.finished = true
	if s.curMsg == msg.id {
		s.curMsg = ""
	}
}
