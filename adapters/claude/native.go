package claude

import "encoding/json"

// record is every field the decoder reads from one native Claude record, in
// any of its forms (session JSONL, stream-json stdout, the msg of an SDK
// traffic log line). One struct for all kinds keeps decoding to a single
// pass; fields a kind does not have stay zero. Large or polymorphic values
// stay raw and are decoded only when the kind needs them.
type record struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`

	// Identity and placement.
	UUID            string  `json:"uuid"`
	ParentUUID      *string `json:"parentUuid"`
	SessionID       string  `json:"sessionId"`  // session JSONL
	SessionIDSnake  string  `json:"session_id"` // stream-json
	Timestamp       string  `json:"timestamp"`  // RFC 3339
	IsSidechain     bool    `json:"isSidechain"`
	AgentID         string  `json:"agentId"`
	ParentToolUseID *string `json:"parent_tool_use_id"`
	PromptID        string  `json:"promptId"`
	Cwd             string  `json:"cwd"`

	// user / assistant.
	Message                   *apiMessage     `json:"message"`
	IsMeta                    bool            `json:"isMeta"`
	IsCompactSummary          bool            `json:"isCompactSummary"`
	IsVisibleInTranscriptOnly bool            `json:"isVisibleInTranscriptOnly"`
	IsReplay                  bool            `json:"isReplay"`
	IsSynthetic               bool            `json:"isSynthetic"`
	IsAPIErrorMessage         bool            `json:"isApiErrorMessage"`
	APIErrorStatus            *int            `json:"apiErrorStatus"`
	Error                     json.RawMessage `json:"error"` // string (synthetic message, api_retry) or object (api_error)
	ToolUseResult             json.RawMessage `json:"toolUseResult"`
	ToolUseResultSnake        json.RawMessage `json:"tool_use_result"`

	// system.
	Model         string       `json:"model"`
	CompactMeta   *compactMeta `json:"compactMetadata"`
	CompactMetaSn *compactMeta `json:"compact_metadata"`
	Attempt       *int         `json:"attempt"`      // api_retry
	RetryAttempt  *int         `json:"retryAttempt"` // api_error (JSONL)
	ErrorStatus   *int         `json:"error_status"` // api_retry
	TaskID        string       `json:"task_id"`
	TaskType      string       `json:"task_type"` // task_started: local_agent, local_bash, …
	// model_refusal_no_fallback; Content is a string there (and on other
	// system records), kept raw because other kinds may differ.
	Content            json.RawMessage `json:"content"`
	OriginalModel      string          `json:"original_model"`
	RefusalCategory    string          `json:"api_refusal_category"`
	RefusalExplanation string          `json:"api_refusal_explanation"`
	ToolUseID          string          `json:"tool_use_id"`
	Status             string          `json:"status"`

	// result.
	IsError        *bool    `json:"is_error"`
	Result         *string  `json:"result"`
	StopReason     *string  `json:"stop_reason"`
	TotalCostUSD   *float64 `json:"total_cost_usd"`
	ResultStatus   *int     `json:"api_error_status"`
	Errors         []string `json:"errors"`
	TerminalReason string   `json:"terminal_reason"`

	// stream_event.
	Event *streamEvent `json:"event"`

	// control_request / control_response / control_cancel_request.
	RequestID string           `json:"request_id"`
	Request   *controlRequest  `json:"request"`
	Response  *controlResponse `json:"response"`

	// attachment.
	Attachment *attachment `json:"attachment"`

	// summary / custom-title / ai-title.
	Summary     string `json:"summary"`
	CustomTitle string `json:"customTitle"`
	AITitle     string `json:"aiTitle"`
}

// session returns the provider session id of the record, in either spelling.
func (r *record) session() string {
	if r.SessionID != "" {
		return r.SessionID
	}
	return r.SessionIDSnake
}

// toolResult returns the structured tool result, in either spelling.
func (r *record) toolResult() json.RawMessage {
	if len(r.ToolUseResult) > 0 {
		return r.ToolUseResult
	}
	return r.ToolUseResultSnake
}

// apiMessage is an Anthropic Messages API message as Claude Code records it.
type apiMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"` // string or []contentBlock
	StopReason *string         `json:"stop_reason"`
	Usage      *usage          `json:"usage"`

	// parsed holds Content already decoded as blocks (fastRecord, the
	// shape most records have); parsedOK says it is set.
	parsed   []contentBlock
	parsedOK bool
}

// blocks returns the message content as blocks (a string is one text
// block).
func (m *apiMessage) blocks() ([]contentBlock, error) {
	if m.parsedOK {
		return m.parsed, nil
	}
	return contentBlocks(m.Content)
}

// usage is the Messages API usage block. Absent counts stay nil.
type usage struct {
	InputTokens   *int64 `json:"input_tokens"`
	OutputTokens  *int64 `json:"output_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
}

// contentBlock is one block of a message's content array.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	Thinking  *string         `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"` // redacted_thinking
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // tool_result: string or []contentBlock
	IsError   *bool           `json:"is_error"`
	Source    *mediaSource    `json:"source"`
	Title     string          `json:"title"` // document

	// resultText is a tool_result's content when it was a plain string
	// (fastRecord); Content is then empty.
	resultText *string
}

// mediaSource is the source of an image or document block.
type mediaSource struct {
	Type      string `json:"type"` // "base64" | "url" | "text"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
}

type compactMeta struct {
	Trigger     string `json:"trigger"`
	PreTokens   *int64 `json:"preTokens"`
	PreTokensSn *int64 `json:"pre_tokens"`
}

// streamEvent is a raw Anthropic streaming event (stream_event records,
// --include-partial-messages).
type streamEvent struct {
	Type         string        `json:"type"`
	Index        *int          `json:"index"`
	Message      *apiMessage   `json:"message"`
	ContentBlock *contentBlock `json:"content_block"`
	Delta        *streamDelta  `json:"delta"`
	Usage        *usage        `json:"usage"`
	Error        *apiErrorBody `json:"error"`
}

type streamDelta struct {
	Type        string  `json:"type"`
	Text        string  `json:"text"`
	Thinking    string  `json:"thinking"`
	PartialJSON string  `json:"partial_json"`
	StopReason  *string `json:"stop_reason"`
}

// apiErrorBody is the error object of an Anthropic API error.
type apiErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// controlRequest is the request of an SDK control_request.
type controlRequest struct {
	Subtype               string          `json:"subtype"`
	ToolName              string          `json:"tool_name"`
	DisplayName           string          `json:"display_name"`
	Input                 json.RawMessage `json:"input"`
	PermissionSuggestions json.RawMessage `json:"permission_suggestions"`
	BlockedPath           string          `json:"blocked_path"`
	DecisionReason        string          `json:"decision_reason"`
	Description           string          `json:"description"`
	ToolUseID             string          `json:"tool_use_id"`
	AgentID               string          `json:"agent_id"`
}

// controlResponse is the response of an SDK control_response.
type controlResponse struct {
	Subtype   string           `json:"subtype"` // "success" | "error"
	RequestID string           `json:"request_id"`
	Response  *permissionReply `json:"response"`
	Error     string           `json:"error"`
}

// permissionReply is a can_use_tool answer: {behavior: allow|deny, …}.
type permissionReply struct {
	Behavior           string          `json:"behavior"`
	UpdatedInput       json.RawMessage `json:"updatedInput"`
	UpdatedPermissions json.RawMessage `json:"updatedPermissions"`
	Message            string          `json:"message"`
	Interrupt          bool            `json:"interrupt"`
}

// attachment is the payload of an attachment record.
type attachment struct {
	Type      string `json:"type"`
	Decision  string `json:"decision"`
	ToolUseID string `json:"toolUseID"`
	HookEvent string `json:"hookEvent"`
}

// permissionSuggestion is one entry of can_use_tool.permission_suggestions.
type permissionSuggestion struct {
	Type        string   `json:"type"` // "addRules" | "addDirectories" | "setMode" | …
	Behavior    string   `json:"behavior"`
	Rules       []rule   `json:"rules"`
	Directories []string `json:"directories"`
}

type rule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent"`
}

// questionInput is the input of an AskUserQuestion tool call.
type questionInput struct {
	Questions []struct {
		Question    string `json:"question"`
		Header      string `json:"header"`
		MultiSelect *bool  `json:"multiSelect"`
		Options     []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
	} `json:"questions"`
	Answers map[string]string `json:"answers"`
}

// fastRecord is the shape most records have: message content an array of
// blocks whose tool_result content is a plain string. Decoding it types the
// large strings directly, so they are scanned twice instead of four times
// (validate, skip into a raw value, validate again, decode). Any other
// shape fails with a type error and takes the general path (record).
type fastRecord struct {
	record
	Message *fastMessage `json:"message"` // shadows record.Message
}

type fastMessage struct {
	apiMessage
	Content []fastBlock `json:"content"` // shadows apiMessage.Content
}

type fastBlock struct {
	contentBlock
	Content *string `json:"content"` // shadows contentBlock.Content
}

// general converts a decoded fastRecord into a record.
func (f *fastRecord) general() record {
	r := f.record
	if f.Message != nil {
		m := f.Message.apiMessage
		m.parsedOK = true
		if f.Message.Content != nil {
			m.parsed = make([]contentBlock, len(f.Message.Content))
			for i := range f.Message.Content {
				b := f.Message.Content[i].contentBlock
				b.resultText = f.Message.Content[i].Content
				m.parsed[i] = b
			}
		}
		r.Message = &m
	}
	return r
}
