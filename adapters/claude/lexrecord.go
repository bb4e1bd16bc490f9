package claude

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/happy-dev/happy/internal/jsonlex"
)

// lexRecord fills r from line, a JSON object jsonlex.Valid accepted, in one
// pass over its bytes (jsonlex.Members), exactly as json.Unmarshal into a
// fastRecord and fastRecord.general would, for the shapes most records have: members of the types the struct
// declares, message content an array of blocks whose tool_result content
// is a plain string. Strings are copied out of the line (unquoted only when
// they hold an escape or bytes that are not UTF-8), raw values are copied.
// ok is false, and line must then be decoded by encoding/json, for anything
// else: a member of another type, a null where json.Unmarshal would store
// one, a member name with an escape, non-ASCII bytes or another case, a
// repeated object member, or a member the fast shape does not decode
// (stream events, control requests and responses, attachments, compaction
// metadata, errors lists, media sources). toolUseResult is kept raw
// whatever it holds, as decodeRecord keeps it after cutting it out, and is
// not copied: it aliases line (the one value a record may hold that is
// large and usually dropped: toolResult copies what it keeps).
func lexRecord(line []byte, r *record) (ok bool) {
	ok = true
	seenMsg := false
	err := jsonlex.Members(line, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		switch string(key) {
		case "type":
			ok = jsonlex.SetString(v, &r.Type)
		case "subtype":
			ok = jsonlex.SetString(v, &r.Subtype)
		case "uuid":
			ok = jsonlex.SetString(v, &r.UUID)
		case "parentUuid":
			ok = jsonlex.SetStringPtr(v, &r.ParentUUID)
		case "sessionId":
			ok = jsonlex.SetString(v, &r.SessionID)
		case "session_id":
			ok = jsonlex.SetString(v, &r.SessionIDSnake)
		case "timestamp":
			ok = jsonlex.SetString(v, &r.Timestamp)
		case "isSidechain":
			ok = jsonlex.SetBool(v, &r.IsSidechain)
		case "agentId":
			ok = jsonlex.SetString(v, &r.AgentID)
		case "parent_tool_use_id":
			ok = jsonlex.SetStringPtr(v, &r.ParentToolUseID)
		case "promptId":
			ok = jsonlex.SetString(v, &r.PromptID)
		case "cwd":
			ok = jsonlex.SetString(v, &r.Cwd)
		case "message":
			if seenMsg || v[0] != '{' {
				return fail(&ok)
			}
			seenMsg = true
			r.Message = &apiMessage{parsedOK: true}
			ok = lexMessage(v, r.Message)
		case "isMeta":
			ok = jsonlex.SetBool(v, &r.IsMeta)
		case "isCompactSummary":
			ok = jsonlex.SetBool(v, &r.IsCompactSummary)
		case "isVisibleInTranscriptOnly":
			ok = jsonlex.SetBool(v, &r.IsVisibleInTranscriptOnly)
		case "isReplay":
			ok = jsonlex.SetBool(v, &r.IsReplay)
		case "isSynthetic":
			ok = jsonlex.SetBool(v, &r.IsSynthetic)
		case "isApiErrorMessage":
			ok = jsonlex.SetBool(v, &r.IsAPIErrorMessage)
		case "apiErrorStatus":
			ok = lexIntPtr(v, &r.APIErrorStatus)
		case "error":
			ok = lexRaw(v, &r.Error)
		case "toolUseResult":
			r.ToolUseResult = v // not a copy: see decodeRecord
		case "tool_use_result":
			ok = lexRaw(v, &r.ToolUseResultSnake)
		case "model":
			ok = jsonlex.SetString(v, &r.Model)
		case "attempt":
			ok = lexIntPtr(v, &r.Attempt)
		case "retryAttempt":
			ok = lexIntPtr(v, &r.RetryAttempt)
		case "error_status":
			ok = lexIntPtr(v, &r.ErrorStatus)
		case "task_id":
			ok = jsonlex.SetString(v, &r.TaskID)
		case "tool_use_id":
			ok = jsonlex.SetString(v, &r.ToolUseID)
		case "status":
			ok = jsonlex.SetString(v, &r.Status)
		case "is_error":
			ok = jsonlex.SetBoolPtr(v, &r.IsError)
		case "result":
			ok = jsonlex.SetStringPtr(v, &r.Result)
		case "stop_reason":
			ok = jsonlex.SetStringPtr(v, &r.StopReason)
		case "total_cost_usd":
			ok = lexFloatPtr(v, &r.TotalCostUSD)
		case "api_error_status":
			ok = lexIntPtr(v, &r.ResultStatus)
		case "terminal_reason":
			ok = jsonlex.SetString(v, &r.TerminalReason)
		case "request_id":
			ok = jsonlex.SetString(v, &r.RequestID)
		case "summary":
			ok = jsonlex.SetString(v, &r.Summary)
		case "customTitle":
			ok = jsonlex.SetString(v, &r.CustomTitle)
		case "aiTitle":
			ok = jsonlex.SetString(v, &r.AITitle)
		default:
			ok = unknownKey(key, recordKeys)
		}
		return ok
	})
	return ok && err == nil
}

// recordKeys are the member names of record, in lower case: another
// member that equals one of them but for case is decoded by encoding/json
// into it.
var recordKeys = lowerSet(
	"type", "subtype", "uuid", "parentUuid", "sessionId", "session_id", "timestamp", "isSidechain",
	"agentId", "parent_tool_use_id", "promptId", "cwd", "message", "isMeta", "isCompactSummary",
	"isVisibleInTranscriptOnly", "isReplay", "isSynthetic", "isApiErrorMessage", "apiErrorStatus",
	"error", "toolUseResult", "tool_use_result", "model", "compactMetadata", "compact_metadata",
	"attempt", "retryAttempt", "error_status", "task_id", "tool_use_id", "status", "is_error",
	"result", "stop_reason", "total_cost_usd", "api_error_status", "errors", "terminal_reason",
	"event", "request_id", "request", "response", "attachment", "summary", "customTitle", "aiTitle",
)

var (
	messageKeys = lowerSet("id", "role", "model", "content", "stop_reason", "usage")
	usageKeys   = lowerSet("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
	blockKeys   = lowerSet("type", "text", "thinking", "signature", "data", "id", "name", "input",
		"tool_use_id", "content", "is_error", "source", "title")
)

// maxKey is longer than any field name (ASCII case folding keeps lengths).
const maxKey = 64

func lowerSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = true
	}
	return m
}

// unknownKey reports whether a member name that matched no field exactly
// may be ignored: plain ASCII without an escape and no field's name under
// case folding (those encoding/json would decode: left to it).
func unknownKey(key []byte, names map[string]bool) bool {
	var buf [maxKey]byte
	for i, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
		if i < maxKey {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			buf[i] = c
		}
	}
	return len(key) >= maxKey || !names[string(buf[:len(key)])]
}

func fail(ok *bool) bool {
	*ok = false
	return false
}

// lexMessage fills m from the object v (see lexRecord).
func lexMessage(v []byte, m *apiMessage) (ok bool) {
	ok = true
	seenContent, seenUsage := false, false
	err := jsonlex.Members(v, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		switch string(key) {
		case "id":
			ok = jsonlex.SetString(v, &m.ID)
		case "role":
			ok = jsonlex.SetString(v, &m.Role)
		case "model":
			ok = jsonlex.SetString(v, &m.Model)
		case "stop_reason":
			ok = jsonlex.SetStringPtr(v, &m.StopReason)
		case "usage":
			if seenUsage {
				return fail(&ok)
			}
			seenUsage = true
			switch v[0] {
			case 'n':
				m.Usage = nil
			case '{':
				m.Usage = new(usage)
				ok = lexUsage(v, m.Usage)
			default:
				ok = false
			}
		case "content":
			if seenContent {
				return fail(&ok)
			}
			seenContent = true
			switch v[0] {
			case '[':
				ok = lexBlocks(v, &m.parsed)
			case '"':
				// A plain prompt: one text block, as contentBlocks makes it.
				s, sok := jsonlex.Str(v)
				m.parsed, ok = []contentBlock{{Type: "text", Text: &s}}, sok
			default:
				ok = false
			}
		default:
			ok = unknownKey(key, messageKeys)
		}
		return ok
	})
	return ok && err == nil
}

// lexUsage fills u from the object v.
func lexUsage(v []byte, u *usage) (ok bool) {
	ok = true
	err := jsonlex.Members(v, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		switch string(key) {
		case "input_tokens":
			ok = lexInt64Ptr(v, &u.InputTokens)
		case "output_tokens":
			ok = lexInt64Ptr(v, &u.OutputTokens)
		case "cache_read_input_tokens":
			ok = lexInt64Ptr(v, &u.CacheRead)
		case "cache_creation_input_tokens":
			ok = lexInt64Ptr(v, &u.CacheCreation)
		default:
			ok = unknownKey(key, usageKeys)
		}
		return ok
	})
	return ok && err == nil
}

// lexBlocks fills *dst from the array v of content blocks, in one pass:
// the blocks are decoded into a small array on the stack, then into a
// slice of their exact number.
func lexBlocks(v []byte, dst *[]contentBlock) bool {
	var first [8]contentBlock
	blocks := first[:0]
	for i := jsonlex.SkipSpace(v, 1); i < len(v) && v[i] != ']'; {
		j := jsonlex.Skip(v, i)
		if j < 0 || v[i] != '{' {
			return false
		}
		blocks = append(blocks, contentBlock{})
		if !lexBlock(v[i:j], &blocks[len(blocks)-1]) {
			return false
		}
		i = jsonlex.SkipSpace(v, j)
		if i < len(v) && v[i] == ',' {
			i = jsonlex.SkipSpace(v, i+1)
		}
	}
	*dst = append([]contentBlock(nil), blocks...)
	if len(blocks) == 0 {
		*dst = []contentBlock{}
	}
	return true
}

// lexBlock fills b from the object v.
func lexBlock(v []byte, b *contentBlock) (ok bool) {
	ok = true
	err := jsonlex.Members(v, func(k, v []byte) bool {
		key := k[1 : len(k)-1]
		switch string(key) {
		case "type":
			ok = jsonlex.SetString(v, &b.Type)
		case "text":
			ok = jsonlex.SetStringPtr(v, &b.Text)
		case "thinking":
			ok = jsonlex.SetStringPtr(v, &b.Thinking)
		case "signature":
			ok = jsonlex.SetString(v, &b.Signature)
		case "data":
			ok = jsonlex.SetString(v, &b.Data)
		case "id":
			ok = jsonlex.SetString(v, &b.ID)
		case "name":
			ok = jsonlex.SetString(v, &b.Name)
		case "input":
			ok = lexRaw(v, &b.Input)
		case "tool_use_id":
			ok = jsonlex.SetString(v, &b.ToolUseID)
		case "content":
			// A tool_result's content: a string, or blocks kept raw as
			// encoding/json keeps them (resultContent decodes them); the
			// last member wins.
			switch v[0] {
			case '"', 'n':
				b.Content = nil
				ok = jsonlex.SetStringPtr(v, &b.resultText)
			default:
				b.resultText = nil
				b.Content = append([]byte(nil), v...)
			}
		case "is_error":
			ok = jsonlex.SetBoolPtr(v, &b.IsError)
		case "title":
			ok = jsonlex.SetString(v, &b.Title)
		default:
			// source (a media block) is left to encoding/json.
			ok = unknownKey(key, blockKeys)
		}
		return ok
	})
	return ok && err == nil
}

// lexInt64Ptr decodes a *int64 member (an integer literal in range); null
// sets it to nil.
func lexInt64Ptr(v []byte, dst **int64) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*dst = &n
	return true
}

// lexIntPtr decodes a *int member as lexInt64Ptr does.
func lexIntPtr(v []byte, dst **int) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	n, err := strconv.ParseInt(string(v), 10, strconv.IntSize)
	if err != nil {
		return false
	}
	i := int(n)
	*dst = &i
	return true
}

// lexFloatPtr decodes a *float64 member (a number in range); null sets it
// to nil.
func lexFloatPtr(v []byte, dst **float64) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return false
	}
	x, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return false
	}
	*dst = &x
	return true
}

// lexRaw keeps a raw member (a copy); null is left to encoding/json.
func lexRaw(v []byte, dst *json.RawMessage) bool {
	if v[0] == 'n' {
		return false
	}
	*dst = append([]byte(nil), v...)
	return true
}
