package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Form is one of the native shapes a Claude Code run is recorded in.
type Form int

// Forms.
const (
	// FormUnknown is the zero Form; NewDecoder refuses it.
	FormUnknown Form = iota
	// FormSessionJSONL is Claude Code's own transcript,
	// ~/.claude/projects/<slug>/<session>.jsonl, and its subagent files
	// <session>/subagents/agent-<id>.jsonl: records user, assistant,
	// system, attachment, summary, … with camelCase envelope fields.
	FormSessionJSONL
	// FormStreamJSON is the stdout of `claude -p --output-format
	// stream-json --verbose` (one-shot or SDK mode): records system/init,
	// assistant, user, result, stream_event, control_request, … with
	// snake_case envelope fields.
	FormStreamJSON
	// FormTrafficLog is a traffic log of SDK mode (see package
	// adapters/trafficlog): stream-json messages in both directions, each
	// wrapped as {"t","dir","msg"}, plus stderr, exit and note records.
	FormTrafficLog
)

// Source names used in Dropped records, one per form.
const (
	SourceSessionJSONL = "claude-jsonl"
	SourceStreamJSON   = "claude-stream-json"
	SourceTrafficLog   = "claude-traffic"
)

// String returns the form's name as `happy replay` prints it.
func (f Form) String() string {
	switch f {
	case FormSessionJSONL:
		return "session-jsonl"
	case FormStreamJSON:
		return "stream-json"
	case FormTrafficLog:
		return "traffic-log"
	}
	return "unknown"
}

// source is the Dropped.Source of the form.
func (f Form) source() string {
	switch f {
	case FormSessionJSONL:
		return SourceSessionJSONL
	case FormStreamJSON:
		return SourceStreamJSON
	case FormTrafficLog:
		return SourceTrafficLog
	}
	return "claude"
}

// ErrUnknownForm is returned by DetectForm when no line identifies a form,
// and by NewDecoder for FormUnknown.
var ErrUnknownForm = errors.New("claude: cannot tell the form of the input")

// DetectForm looks at the first lines of a file (blank and unparseable
// lines are skipped) and names its form:
//
//   - an object with "dir" and "msg" is a traffic log line;
//   - an object with "sessionId", "parentUuid", "isSidechain" or a JSONL-only
//     kind (file-history-snapshot, queue-operation, summary, last-prompt,
//     mode, permission-mode, attachment, progress, custom-title, ai-title)
//     is session JSONL;
//   - an object with "session_id", or a stream-json-only kind (result,
//     stream_event, control_request, control_response), is stream-json.
//
// Errors: ErrUnknownForm (wrapped, with the number of lines seen).
func DetectForm(lines [][]byte) (Form, error) {
	for _, l := range lines {
		l = bytes.TrimSpace(l)
		if len(l) == 0 || l[0] != '{' {
			continue
		}
		var probe struct {
			Type        string          `json:"type"`
			Dir         json.RawMessage `json:"dir"`
			Msg         json.RawMessage `json:"msg"`
			SessionID   json.RawMessage `json:"sessionId"`
			SessionSn   json.RawMessage `json:"session_id"`
			ParentUUID  json.RawMessage `json:"parentUuid"`
			IsSidechain json.RawMessage `json:"isSidechain"`
		}
		if json.Unmarshal(l, &probe) != nil {
			continue
		}
		switch {
		case probe.Dir != nil && probe.Msg != nil:
			return FormTrafficLog, nil
		case probe.SessionID != nil || probe.ParentUUID != nil || probe.IsSidechain != nil:
			return FormSessionJSONL, nil
		case probe.SessionSn != nil:
			return FormStreamJSON, nil
		}
		switch probe.Type {
		case "file-history-snapshot", "queue-operation", "summary", "last-prompt", "mode",
			"permission-mode", "attachment", "progress", "custom-title", "ai-title":
			return FormSessionJSONL, nil
		case "result", "stream_event", "control_request", "control_response":
			return FormStreamJSON, nil
		}
	}
	return FormUnknown, fmt.Errorf("%w (%d lines looked at)", ErrUnknownForm, len(lines))
}
