package codex

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// The app-server decoder's one-pass readers (see lex.go for the rules
// they keep): the notifications, items, turns, threads and requests most
// traffic carries are read without encoding/json; anything they do not
// reproduce exactly goes the general way, as every frame does when
// AppServerDecoder.general is set (tests compare the two).

// noteParams are the members of a notification's params the handlers
// read, raw (nil when absent).
type noteParams struct {
	threadID, turnID, itemID []byte
	delta, item, tokenUsage  []byte
	turn, thread, requestID  []byte
}

var noteKeys = newKeys("threadId", "turnId", "itemId", "delta", "item", "tokenUsage", "turn", "thread", "requestId")

// scan splits params, an object, into p; false when it must be read by
// encoding/json (see lexMembers).
func (p *noteParams) scan(params []byte) bool {
	return lexMembers(params, noteKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			p.threadID = v
		case 1:
			p.turnID = v
		case 2:
			p.itemID = v
		case 3:
			p.delta = v
		case 4:
			p.item = v
		case 5:
			p.tokenUsage = v
		case 6:
			p.turn = v
		case 7:
			p.thread = v
		case 8:
			p.requestID = v
		}
		return true
	})
}

// stringOf is what jsonlex.StringFields stores from one member: its string,
// or "" for a value of another kind or none.
func stringOf(v []byte) string {
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, _ := lexStr(v)
	return s
}

// lexEmitted reads emittedAtMs as json.Unmarshal into an int64 does; ok
// false when it must.
func lexEmitted(v []byte) (n int64, ok bool) {
	if len(v) == 0 {
		return 0, true // absent: json.Unmarshal fails, nothing is set
	}
	if v[0] == 'n' {
		return 0, true
	}
	n, ok = lexInt64(v)
	return n, ok
}

// idKey is idString(mustObject(id)) without encoding it: the id as a map
// key; ok false for a string id that is not UTF-8 (encoding/json rewrites
// its bytes).
func idKey(id jsonrpc.ID) (string, bool) {
	if !id.IsString {
		return strconv.FormatUint(id.Num, 10), true
	}
	if !utf8.ValidString(id.Str) {
		return "", false
	}
	return strconv.Quote(id.Str), true
}

// rawIDKey is idString for a raw id value: ok false when it must go to
// idString.
func rawIDKey(raw []byte) (string, bool) {
	if len(raw) == 0 {
		return "", true
	}
	switch c := raw[0]; {
	case c == '"':
		s, ok := lexStr(raw)
		return strconv.Quote(s), ok
	case c == '-' || (c >= '0' && c <= '9'):
		return string(raw), true // json.Number keeps the literal
	case c == 'n':
		return `""`, true // null decodes as the empty string
	}
	return "", true // an object, array or boolean is no id
}

var tokenUsageKeys = newKeys("last")

// lexTokenUsage reads tokenUsage.last of a thread/tokenUsage/updated
// (v is the tokenUsage member, nil when absent).
func lexTokenUsage(v []byte) (last *tokenBreakdown, ok bool) { return lexTokenUsageInto(v, nil) }

// lexTokenUsageInto is lexTokenUsage decoding last into buf (nil: a new
// one), which the caller may keep on its stack.
func lexTokenUsageInto(v []byte, buf *tokenBreakdown) (last *tokenBreakdown, ok bool) {
	if v == nil || v[0] == 'n' {
		return nil, true
	}
	ok = lexMembers(v, tokenUsageKeys, func(_ int, v []byte) bool {
		switch v[0] {
		case 'n':
			last = nil
			return true
		case '{':
			if buf == nil {
				buf = &tokenBreakdown{}
			}
			*buf = tokenBreakdown{}
			last = buf
			return lexTokens(v, last)
		}
		return false
	})
	return last, ok
}

var tokenKeys = newKeys("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens", "reasoningOutputTokens",
	"input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens", "reasoning_output_tokens")

func lexTokens(v []byte, b *tokenBreakdown) bool {
	dst := [...]**int64{&b.Input, &b.Cached, &b.CacheWrite, &b.Output, &b.Reasoning,
		&b.SInput, &b.SCached, &b.SCacheWrite, &b.SOutput, &b.SReasoning}
	return lexMembers(v, tokenKeys, func(i int, v []byte) bool { return setInt64Ptr(v, dst[i]) })
}

var turnKeys = newKeys("id", "status", "items", "error")

// lexTurn fills t from the object v; null leaves it alone.
func lexTurn(v []byte, t *turn) bool {
	if len(v) == 0 || v[0] == 'n' {
		return true
	}
	return lexMembers(v, turnKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			return setString(v, &t.ID)
		case 1:
			return setString(v, &t.Status)
		case 2:
			return setRawsShared(v, &t.Items) // read by settleTurn, not kept
		default:
			switch v[0] {
			case 'n':
				t.Error = nil
				return true
			case '{':
				t.Error = &turnError{}
				return lexTurnError(v, t.Error)
			}
			return false
		}
	})
}

var turnErrorKeys = newKeys("message", "codexErrorInfo", "additionalDetails")

func lexTurnError(v []byte, e *turnError) bool {
	return lexMembers(v, turnErrorKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			return setString(v, &e.Message)
		case 1:
			return setRaw(v, &e.Info)
		default:
			return setStringPtr(v, &e.Details)
		}
	})
}

var threadKeys = newKeys("id", "parentThreadId", "model", "modelProvider", "cwd", "name", "agentNickname", "agentRole", "turns")

// lexThread fills ti from the object v; null leaves it alone.
func lexThread(v []byte, ti *threadInfo) bool {
	if len(v) == 0 || v[0] == 'n' {
		return true
	}
	return lexMembers(v, threadKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			return setString(v, &ti.ID)
		case 1:
			return setStringPtr(v, &ti.ParentThread)
		case 2:
			return setString(v, &ti.Model)
		case 3:
			return setString(v, &ti.ModelProvider)
		case 4:
			return setString(v, &ti.Cwd)
		case 5:
			return setStringPtr(v, &ti.Name)
		case 6:
			return setStringPtr(v, &ti.Nickname)
		case 7:
			return setStringPtr(v, &ti.Role)
		default:
			if v[0] == 'n' {
				ti.Turns = nil
				return true
			}
			turns := []turn{}
			ok := lexElems(v, func(e []byte) bool {
				var t turn
				if e[0] != '{' && e[0] != 'n' {
					return false
				}
				turns = append(turns, t)
				return lexTurn(e, &turns[len(turns)-1])
			})
			ti.Turns = turns
			return ok
		}
	})
}

var threadResultKeys = newKeys("thread", "model", "modelProvider", "cwd")

// threadResult is the result of thread/start, thread/resume and
// thread/fork.
type threadResult struct {
	Thread        threadInfo `json:"thread"`
	Model         string     `json:"model"`
	ModelProvider string     `json:"modelProvider"`
	Cwd           string     `json:"cwd"`
}

func lexThreadResult(v []byte, r *threadResult) bool {
	return lexMembers(v, threadResultKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			return lexThread(v, &r.Thread)
		case 1:
			return setString(v, &r.Model)
		case 2:
			return setString(v, &r.ModelProvider)
		default:
			return setString(v, &r.Cwd)
		}
	})
}

var turnResultKeys = newKeys("turn")

// lexTurnResult reads the result of turn/start ({turn}).
func lexTurnResult(v []byte, t *turn) bool {
	return lexMembers(v, turnResultKeys, func(_ int, v []byte) bool {
		if v[0] != '{' && v[0] != 'n' {
			return false
		}
		return lexTurn(v, t)
	})
}

var idKeys = newKeys("id")

// lexItemID reads the id of a turn's item as json.Unmarshal into
// struct{ID string} does (ok false: ask it).
func lexItemID(v []byte) (id string, ok bool) {
	if len(v) == 0 || v[0] != '{' {
		return "", false
	}
	ok = lexMembers(v, idKeys, func(_ int, v []byte) bool { return setString(v, &id) })
	return id, ok
}

var itemKeys = newKeys(
	"type", "id", "content", "text", "summary", // 0-4
	"command", "cwd", "status", "commandActions", "aggregatedOutput", "exitCode", "durationMs", "source", // 5-12
	"changes", "server", "tool", "namespace", "arguments", "result", "error", "contentItems", "success", // 13-21
	"prompt", "model", "receiverThreadIds", "agentsStates", // 22-25
	"agentThreadId", "agentPath", "kind", "query", "action", "results", "path", // 26-32
	"savedPath", "revisedPrompt", "failure", "review", // 33-36
)

// lexItem fills it from the ThreadItem object v.
func lexItem(v []byte, it *itemHead) bool {
	return lexMembers(v, itemKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			return setString(v, &it.Type)
		case 1:
			return setString(v, &it.ID)
		case 2:
			return setRawShared(v, &it.Content) // read by the item's handler, not kept
		case 3:
			return setStringPtr(v, &it.Text)
		case 4:
			return setStrings(v, &it.Summary)
		case 5:
			return setString(v, &it.Command)
		case 6:
			return setString(v, &it.Cwd)
		case 7:
			return setString(v, &it.Status)
		case 8:
			return setRaw(v, &it.CommandActions)
		case 9:
			return setStringPtr(v, &it.AggregatedOutput)
		case 10:
			return setInt64Ptr(v, &it.ExitCode)
		case 11:
			return setInt64Ptr(v, &it.DurationMs)
		case 12:
			return setString(v, &it.Source)
		case 13:
			return lexChanges(v, &it.Changes)
		case 14:
			return setString(v, &it.Server)
		case 15:
			return setString(v, &it.Tool)
		case 16:
			return setStringPtr(v, &it.Namespace)
		case 17:
			return setRaw(v, &it.Arguments)
		case 18:
			return setRaw(v, &it.Result)
		case 19:
			return setRaw(v, &it.Error)
		case 20:
			return setRaw(v, &it.ContentItems)
		case 21:
			return jsonlex.SetBoolPtr(v, &it.Success)
		case 22:
			return setStringPtr(v, &it.Prompt)
		case 23:
			return setStringPtr(v, &it.Model)
		case 24:
			return setStrings(v, &it.ReceiverThreads)
		case 25:
			// A map: left to encoding/json unless null.
			it.AgentsStates = nil
			return v[0] == 'n'
		case 26:
			return setString(v, &it.AgentThreadID)
		case 27:
			return setString(v, &it.AgentPath)
		case 28:
			return setString(v, &it.Kind)
		case 29:
			return setString(v, &it.Query)
		case 30:
			return setRaw(v, &it.Action)
		case 31:
			return setRaw(v, &it.Results)
		case 32:
			return setString(v, &it.Path)
		case 33:
			return setStringPtr(v, &it.SavedPath)
		case 34:
			return setStringPtr(v, &it.RevisedPrompt)
		case 35:
			return setRaw(v, &it.Failure)
		default:
			return setString(v, &it.Review)
		}
	})
}

var changeKeys = newKeys("path", "diff", "kind")

// lexChanges decodes a fileChange's changes.
func lexChanges(v []byte, dst *[]fileUpdate) bool {
	if v[0] == 'n' {
		*dst = nil
		return true
	}
	out := []fileUpdate{}
	ok := lexElems(v, func(e []byte) bool {
		out = append(out, fileUpdate{})
		if e[0] == 'n' {
			return true
		}
		u := &out[len(out)-1]
		return lexMembers(e, changeKeys, func(i int, v []byte) bool {
			switch i {
			case 0:
				return setString(v, &u.Path)
			case 1:
				return setString(v, &u.Diff)
			default:
				return setRaw(v, &u.Kind)
			}
		})
	})
	if ok {
		*dst = out
	}
	return ok
}

var requestKeys = newKeys("threadId", "turnId", "itemId", "callId", "command", "cwd", "reason", "commandActions",
	"availableDecisions", "proposedExecpolicyAmendment", "grantRoot", "fileChanges", "conversationId", "questions")

// lexRequest fills p from the params object v of a Codex request.
func lexRequest(v []byte, p *requestParams) bool {
	return lexMembers(v, requestKeys, func(i int, v []byte) bool {
		switch i {
		case 0:
			return setString(v, &p.ThreadID)
		case 1:
			return setString(v, &p.TurnID)
		case 2:
			return setString(v, &p.ItemID)
		case 3:
			return setString(v, &p.CallID)
		case 4:
			return setRawShared(v, &p.Command) // read by commandApproval, not kept
		case 5:
			return setString(v, &p.Cwd)
		case 6:
			return setStringPtr(v, &p.Reason)
		case 7:
			return setRaw(v, &p.Actions)
		case 8:
			return setRaw(v, &p.Available)
		case 9:
			return setRaw(v, &p.Amendment)
		case 10:
			return setStringPtr(v, &p.GrantRoot)
		case 11:
			// A map: left to encoding/json unless null.
			p.FileChanges = nil
			return v[0] == 'n'
		case 12:
			return setString(v, &p.Conv)
		default:
			// Questions: left to encoding/json unless null.
			p.Questions = nil
			return v[0] == 'n'
		}
	})
}

var threadIDKeys = newKeys("threadId")
var decisionKeys = newKeys("decision")

// lexDecision reads the decision member of an approval answer's result.
func lexDecision(v []byte) (raw json.RawMessage, ok bool) {
	if len(v) == 0 || v[0] != '{' {
		return nil, false
	}
	ok = lexMembers(v, decisionKeys, func(_ int, v []byte) bool { return setRaw(v, &raw) })
	return raw, ok
}

// idKey is idString(mustObject(id)), in one step when it can be.
func (d *AppServerDecoder) idKey(id jsonrpc.ID) string {
	if !d.general {
		if k, ok := idKey(id); ok {
			return k
		}
	}
	return idString(mustObject(id))
}

// lexRequest is lexRequest unless the decoder is general; on false p is
// zero again, for encoding/json.
func (d *AppServerDecoder) lexRequest(v []byte, p *requestParams) bool {
	if !d.general && lexRequest(v, p) {
		return true
	}
	*p = requestParams{}
	return false
}

// lexThreadResult is lexThreadResult unless the decoder is general; on
// false r is zero again.
func (d *AppServerDecoder) lexThreadResult(v []byte, r *threadResult) bool {
	if !d.general && lexThreadResult(v, r) {
		return true
	}
	*r = threadResult{}
	return false
}

// lexTurnResult is lexTurnResult unless the decoder is general; on false t
// is zero again.
func (d *AppServerDecoder) lexTurnResult(v []byte, t *turn) bool {
	if !d.general && lexTurnResult(v, t) {
		return true
	}
	*t = turn{}
	return false
}

// turnParams are the params of turn/started and turn/completed, and the
// result of turn/start.
type turnParams struct {
	Turn turn `json:"turn"`
}

// usageParams are the params of thread/tokenUsage/updated the decoder
// reads.
type usageParams struct {
	Usage struct {
		Last *tokenBreakdown `json:"last"`
	} `json:"tokenUsage"`
}

// unmarshalAs is json.Unmarshal into a new T. A value decoded in place
// would be allocated on every call of its function, one-pass read or not
// (its address escapes to encoding/json); here it is only when this runs.
func unmarshalAs[T any](raw []byte) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
