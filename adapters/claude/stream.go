package claude

import (
	"encoding/json"
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
		if ev.Message == nil || ev.Message.ID == "" {
			d.drop(kind, agent.DropMissingID, "message_start without a message id")
			return
		}
		msg, ok := d.openMessage(s, ev.Message.ID, ev.Message.Model)
		if !ok {
			return
		}
		s.streamMsg = msg.id
		if ev.Message.Usage != nil {
			d.usage(s, msg, ev.Message.Usage)
		}
		return
	case "ping":
		return
	case "error":
		var text, code string
		if ev.Error != nil {
			text, code = ev.Error.Message, ev.Error.Type
		}
		if text == "" {
			text = "stream error " + code
		}
		d.ensureTurn(s)
		s.turnErr, s.errEmitted = text, true
		d.emit(&agent.AgentError{EventBase: d.base(s.key), Message: s.streamMsg, Kind: errorKind(nil, code, text), Text: text})
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
	block := strconv.Itoa(idx)
	switch ev.Type {
	case "content_block_start":
		cb := ev.ContentBlock
		if cb == nil {
			d.drop(kind, agent.DropInvalidField, "content_block_start without a content block")
			return
		}
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
			if t := deref(cb.Text); t != "" {
				d.emit(&agent.TextDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: t})
			}
		case "thinking":
			if t := deref(cb.Thinking); t != "" {
				d.emit(&agent.ReasoningDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: t})
			}
		}
		// Other blocks (redacted thinking, server tool results) arrive
		// whole in the assistant line.
	case "content_block_delta":
		dl := ev.Delta
		if dl == nil {
			d.drop(kind, agent.DropInvalidField, "content_block_delta without a delta")
			return
		}
		switch dl.Type {
		case "text_delta":
			d.emit(&agent.TextDelta{EventBase: d.base(s.key), Message: msg.id, Block: block, Delta: dl.Text})
		case "thinking_delta":
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
