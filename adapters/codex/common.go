package codex

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// Decoder turns Codex traffic into agent events; both protocol decoders
// (app-server and mcp-server) implement it. Decode never panics: a frame it
// cannot use becomes an agent.DroppedInput event with a reason.
type Decoder = jsonrpc.Decoder

// Drop sources of the two decoders.
const (
	SourceAppServer = "codex-rpc"
	SourceMCP       = "codex-mcp"
)

// noteAbandoned is the note the live client records (and the decoder
// understands) when it gives up on a turn that never ended:
// {"happy":"turn-abandoned","threadId":…,"turnId":…,"reason":…}.
const noteAbandoned = "turn-abandoned"

// happyNote is a structured note frame written by the live client.
type happyNote struct {
	Happy    string `json:"happy"`
	ThreadID string `json:"threadId,omitempty"`
	TurnID   string `json:"turnId,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

func dropped(source string, line int64, t int64, kind string, reason agent.DropReason, detail string, raw []byte) *agent.DroppedInput {
	return &agent.DroppedInput{
		EventBase: agent.EventBase{Time: t},
		Dropped:   agent.Dropped{Source: source, Line: line, Kind: kind, Reason: reason, Detail: detail, Raw: agent.CutUTF8(string(raw), agent.DroppedRawMax)},
	}
}

// Output buffering (B15): command output arrives in chunks that may split a
// UTF-8 sequence, as text, as a base64 string or as a JSON array of bytes.
// outBuf decodes incrementally and keeps at most outHeadMax bytes from the
// start and outTailMax from the end, with a marker for what was left out.
const (
	outHeadMax = 96 << 10
	outTailMax = 96 << 10
)

type outBuf struct {
	pending []byte // an incomplete UTF-8 sequence held for the next chunk
	head    strings.Builder
	tail    []byte // ring of the last bytes once head is full (kept whole, trimmed on write)
	omitted int64
	any     bool
}

// write appends raw bytes.
func (o *outBuf) write(b []byte) {
	if len(b) == 0 {
		return
	}
	o.any = true
	data := append(o.pending, b...)
	o.pending = nil
	// Hold back a trailing incomplete sequence.
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	o.pending = append([]byte(nil), data[cut:]...)
	o.appendText(strings.ToValidUTF8(string(data[:cut]), "\uFFFD"))
}

func (o *outBuf) appendText(s string) {
	if room := outHeadMax - o.head.Len(); room > 0 {
		if len(s) <= room {
			o.head.WriteString(s)
			return
		}
		head := agent.CutUTF8(s, room)
		o.head.WriteString(head)
		s = s[len(head):]
	}
	o.tail = append(o.tail, s...)
	if over := len(o.tail) - outTailMax; over > 0 {
		for over < len(o.tail) && !utf8.RuneStart(o.tail[over]) {
			over++
		}
		o.omitted += int64(over)
		o.tail = append(o.tail[:0], o.tail[over:]...)
	}
}

// String returns the text so far; an incomplete trailing sequence is shown
// as U+FFFD (the stream ended in the middle of it).
func (o *outBuf) String() string {
	var b strings.Builder
	b.WriteString(o.head.String())
	if o.omitted > 0 {
		fmt.Fprintf(&b, "\n… [%d bytes of output omitted] …\n", o.omitted)
	}
	b.Write(o.tail)
	if len(o.pending) > 0 {
		b.WriteString("\uFFFD")
	}
	return b.String()
}

// decodeChunk decodes one output chunk: a JSON string (plain text, or
// base64 when b64 is set and it decodes) or a JSON array of byte values.
func decodeChunk(raw json.RawMessage, b64 bool) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("chunk string: %w", err)
		}
		if b64 {
			if b, err := base64.StdEncoding.DecodeString(s); err == nil {
				return b, nil
			}
		}
		return []byte(s), nil
	case '[':
		var nums []int
		if err := json.Unmarshal(raw, &nums); err != nil {
			return nil, fmt.Errorf("chunk byte array: %w", err)
		}
		out := make([]byte, len(nums))
		for i, n := range nums {
			if n < 0 || n > 255 {
				return nil, fmt.Errorf("chunk byte array: value %d at %d is not a byte", n, i)
			}
			out[i] = byte(n)
		}
		return out, nil
	case 'n':
		return nil, nil
	}
	return nil, fmt.Errorf("chunk is %s, want a string or an array of bytes", agent.CutUTF8(string(raw), 40))
}

// decision maps a Codex approval answer (app-server v2 or legacy
// ReviewDecision, as written in a response) to the canonical decision and,
// when nobody really decided, a reason. ok is false for anything unknown.
func decision(raw json.RawMessage) (d agent.Decision, reason string, ok bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return decisionString(s)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || len(obj) != 1 {
		return "", "", false
	}
	for k, v := range obj {
		switch k {
		case "acceptWithExecpolicyAmendment", "approved_execpolicy_amendment":
			return agent.DecisionAlways, "", true
		case "applyNetworkPolicyAmendment", "network_policy_amendment":
			var a struct {
				Action string `json:"action"`
				NPA    *struct {
					Action string `json:"action"`
				} `json:"network_policy_amendment"`
			}
			_ = json.Unmarshal(v, &a)
			action := a.Action
			if a.NPA != nil {
				action = a.NPA.Action
			}
			switch action {
			case "allow":
				return agent.DecisionAlways, "", true
			case "deny":
				return agent.DecisionReject, "", true
			}
		}
	}
	return "", "", false
}

// decisionString is decision of a decision Codex gave as the JSON string s
// (decoded).
func decisionString(s string) (d agent.Decision, reason string, ok bool) {
	switch s {
	case "accept", "approved":
		return agent.DecisionOnce, "", true
	case "acceptForSession", "approved_for_session", "approved_mcp_policy_amendment":
		return agent.DecisionAlways, "", true
	case "decline", "denied":
		return agent.DecisionReject, "", true
	case "cancel", "abort":
		return agent.DecisionReject, agent.ReasonCancelled, true
	case "timed_out":
		return agent.DecisionReject, agent.ReasonTimeout, true
	}
	return "", "", false
}

// tokenBreakdown is a Codex token count, in either naming (app-server
// camelCase, protocol snake_case). Pointers: absent is not zero.
type tokenBreakdown struct {
	Input       *int64 `json:"inputTokens"`
	Cached      *int64 `json:"cachedInputTokens"`
	CacheWrite  *int64 `json:"cacheWriteInputTokens"`
	Output      *int64 `json:"outputTokens"`
	Reasoning   *int64 `json:"reasoningOutputTokens"`
	SInput      *int64 `json:"input_tokens"`
	SCached     *int64 `json:"cached_input_tokens"`
	SCacheWrite *int64 `json:"cache_write_input_tokens"`
	SOutput     *int64 `json:"output_tokens"`
	SReasoning  *int64 `json:"reasoning_output_tokens"`
}

// tokens converts a breakdown: input excludes cached input (reported as a
// cache read), output is as Codex reports it, reasoning separately.
func (b *tokenBreakdown) tokens() *agent.Tokens {
	pick := func(a, s *int64) *int64 {
		if a != nil {
			return a
		}
		return s
	}
	in, cached, cw := pick(b.Input, b.SInput), pick(b.Cached, b.SCached), pick(b.CacheWrite, b.SCacheWrite)
	out, rs := pick(b.Output, b.SOutput), pick(b.Reasoning, b.SReasoning)
	if in == nil && out == nil && cached == nil && rs == nil {
		return nil
	}
	t := &agent.Tokens{Output: out, Reasoning: rs, Cache: agent.CacheTokens{Read: cached, Write: cw}}
	if in != nil {
		v := *in
		if cached != nil && *cached <= v {
			v -= *cached
		}
		t.Input = &v
	}
	return t
}

// errorKind maps a Codex error code (codexErrorInfo, either casing) to an
// error kind, and extracts an HTTP status when one is given.
func errorKind(info json.RawMessage) (agent.ErrorKind, *int) {
	if len(info) == 0 || string(info) == "null" {
		return agent.ErrorInternal, nil
	}
	var s string
	if json.Unmarshal(info, &s) == nil {
		return kindOf(s), nil
	}
	var obj map[string]struct {
		Status  *int `json:"httpStatusCode"`
		SStatus *int `json:"http_status_code"`
	}
	if json.Unmarshal(info, &obj) != nil {
		return agent.ErrorInternal, nil
	}
	for k, v := range obj {
		st := v.Status
		if st == nil {
			st = v.SStatus
		}
		kind := kindOf(k)
		if st != nil && (*st == 401 || *st == 403) {
			kind = agent.ErrorAuth
		} else if st != nil && *st == 429 {
			kind = agent.ErrorRateLimit
		}
		return kind, st
	}
	return agent.ErrorInternal, nil
}

func kindOf(code string) agent.ErrorKind {
	switch code {
	case "unauthorized":
		return agent.ErrorAuth
	case "usageLimitExceeded", "usage_limit_exceeded", "rateLimitExceeded", "rate_limit_exceeded",
		"serverOverloaded", "server_overloaded", "sessionBudgetExceeded":
		return agent.ErrorRateLimit
	case "httpConnectionFailed", "http_connection_failed", "responseStreamConnectionFailed",
		"response_stream_connection_failed", "responseStreamDisconnected", "response_stream_disconnected",
		"responseTooManyFailedAttempts", "response_too_many_failed_attempts":
		return agent.ErrorTransport
	case "badRequest", "bad_request", "modelNotFound", "activeTurnNotSteerable":
		return agent.ErrorProtocol
	}
	return agent.ErrorInternal
}

// objectOr returns raw when it is a JSON object, else {"value": raw} (tool
// input must be an object), or nil for nothing.
func objectOr(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if raw[0] == '{' {
		return raw
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"value": raw})
	return b
}

func mustObject(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// idString renders a JSON-RPC id as a map key: 7, or "abc" quoted.
func idString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strconv.Quote(s)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = agent.CutUTF8(s, max) + "…"
	}
	return s
}
