// Package fakemodel is a scripted, deterministic model server for tests: it
// speaks enough of three wire formats for the real agent CLIs to run turns
// offline against 127.0.0.1:
//
//   - the Anthropic Messages API, POST /v1/messages (streaming SSE and plain
//     JSON) and /v1/messages/count_tokens: Claude Code, claude-code-acp,
//     OpenCode's anthropic provider and an OpenClaw gateway's
//     anthropic-messages provider (its internal-context user messages are
//     skipped when reading the last user turn);
//   - the OpenAI Responses API, POST /v1/responses (streaming SSE): Codex and
//     codex-acp (wire_api = "responses");
//   - the Gemini API, POST /v1beta/models/<model>:generateContent and
//     :streamGenerateContent?alt=sse (gemini.go): Gemini CLI.
//
// The default script is stateless: a request that offers tools and whose last
// user message carries no tool result gets one tool call (Script.ToolName and
// Script.ToolInput); any other request with tools gets Script.FinalText; a
// request without tools (title or summary side calls) gets Script.SideText, or
// Script.SideJSON when it asks for a JSON answer (Gemini's routing calls).
// Set Script.Decide to take over completely; a Reply with several Calls
// answers with that many tool calls in one model response.
//
// Ids in responses come from a per-server counter (msg_fake_0001,
// toolu_fake_0001, …; side calls, without tools, from 9001 on a counter of
// their own), so the same conversation yields the same ids; a request that
// repeats the one before it (the same API and conversation: an agent's
// retry after a slow answer) gets the same number again, so a retry never
// moves the ids; the second and later calls of one response add _2, _3, …
// (toolu_fake_0001_2).
package fakemodel

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is what the fake server saw of one model request, for assertions.
type Request struct {
	API      string          // "anthropic", "openai" or "gemini"
	Path     string          // URL path
	Model    string          // the request's "model" (Gemini: from the path)
	Stream   bool            // the answer is streamed (Gemini: :streamGenerateContent)
	HasTools bool            // the request offered tools
	ToolDone bool            // the last user input carries a tool result
	JSON     bool            // Gemini: generationConfig.responseMimeType is application/json
	LastText string          // text of the last user message (tool results excluded)
	Images   []Image         // image blocks of the last user message (Anthropic base64 sources; tool results excluded)
	Body     json.RawMessage // the whole request body
}

// Image is one image a request carried: its media type and decoded bytes
// (nil when the base64 did not decode).
type Image struct {
	MediaType string
	Data      []byte
}

// ToolCall is one tool call of a Reply: the tool's name and its input
// object (sent as the Anthropic tool_use input, the Responses function_call
// arguments string, or the Gemini functionCall args). Namespace names the
// Responses namespace tool the function belongs to (Codex's
// "multi_agent_v1"): the function_call's "namespace"; other APIs ignore it.
type ToolCall struct {
	Name      string
	Namespace string
	Input     map[string]any
}

// Reply is the scripted answer to one request: tool calls when Calls or
// ToolName is set (ToolName first, then Calls, all in one response), else
// Text.
type Reply struct {
	Text      string
	ToolName  string
	ToolInput map[string]any
	Calls     []ToolCall
}

// calls lists the reply's tool calls in the order they are sent.
func (r Reply) calls() []ToolCall {
	var out []ToolCall
	if r.ToolName != "" {
		out = append(out, ToolCall{Name: r.ToolName, Input: r.ToolInput})
	}
	return append(out, r.Calls...)
}

// callID is the id of the i-th call (from 0) of response n with prefix
// (toolu_fake_0001, toolu_fake_0001_2, …).
func callID(prefix string, n, i int) string {
	if i == 0 {
		return fmt.Sprintf("%s_fake_%04d", prefix, n)
	}
	return fmt.Sprintf("%s_fake_%04d_%d", prefix, n, i+1)
}

// Script configures the answers. Zero fields take the defaults in New.
type Script struct {
	ToolName  string                // tool the model calls (default "Bash")
	ToolInput map[string]any        // its input (default {"command":"echo hi","description":"Print hi"})
	FinalText string                // answer after a tool result (default "Done.")
	SideText  string                // answer to requests without tools (default "Fake title")
	SideJSON  string                // answer to side requests asking for JSON (default "{}")
	Decide    func(r Request) Reply // when set, decides every answer
	Delay     time.Duration         // pause between streamed events
}

// Server is a running fake model server.
type Server struct {
	URL string // base URL, e.g. http://127.0.0.1:41234

	script Script
	srv    *http.Server
	ln     net.Listener

	mu       sync.Mutex
	requests []Request
	counter  int
	side     int    // side calls seen (record)
	last     string // conversation of the last request with tools (record)
}

// New starts a fake model server on 127.0.0.1 with an OS-chosen port.
func New(s Script) (*Server, error) {
	if s.ToolName == "" {
		s.ToolName = "Bash"
	}
	if s.ToolInput == nil {
		s.ToolInput = map[string]any{"command": "echo hi", "description": "Print hi"}
	}
	if s.FinalText == "" {
		s.FinalText = "Done."
	}
	if s.SideText == "" {
		s.SideText = "Fake title"
	}
	if s.SideJSON == "" {
		s.SideJSON = "{}"
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: listen: %w", err)
	}
	fs := &Server{URL: "http://" + ln.Addr().String(), script: s, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", fs.anthropicMessages)
	mux.HandleFunc("POST /v1/messages/count_tokens", fs.anthropicCountTokens)
	mux.HandleFunc("POST /v1/responses", fs.openaiResponses)
	mux.HandleFunc("POST /v1beta/models/{call}", fs.geminiModels)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "not found", http.StatusNotFound) })
	fs.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fs.srv.Serve(ln) }()
	return fs, nil
}

// Close stops the server and waits for open requests to finish (at most 5 s).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Requests returns a copy of the requests seen so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// record keeps r and returns the number of its response. A side call (a
// request without tools: a title, a summary) numbers from sideBase on its
// own counter, so that whether an agent sends it before or after its main
// request (OpenCode's title call races it) does not move the ids of the
// conversation's messages and tool calls.
func (s *Server) record(r Request) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
	if !r.HasTools {
		s.side++
		return sideBase + s.side
	}
	key := conversationKey(r)
	if key == s.last && s.counter > 0 {
		return s.counter // a retry of the last request
	}
	s.last = key
	s.counter++
	return s.counter
}

// conversationKey identifies a request's conversation: its API and the
// hash of its messages (Anthropic), input (OpenAI Responses) or contents
// (Gemini), as sent.
func conversationKey(r Request) string {
	var c struct {
		Messages json.RawMessage `json:"messages"`
		Input    json.RawMessage `json:"input"`
		Contents json.RawMessage `json:"contents"`
	}
	_ = json.Unmarshal(r.Body, &c)
	h := sha256.New()
	for _, part := range []json.RawMessage{c.Messages, c.Input, c.Contents} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return r.API + ":" + hex.EncodeToString(h.Sum(nil))
}

// sideBase is where side calls' response numbers start (msg_fake_9001, …).
const sideBase = 9000

func (s *Server) decide(r Request) Reply {
	if s.script.Decide != nil {
		return s.script.Decide(r)
	}
	switch {
	case !r.HasTools && r.JSON:
		return Reply{Text: s.script.SideJSON}
	case !r.HasTools:
		return Reply{Text: s.script.SideText}
	case r.ToolDone:
		return Reply{Text: s.script.FinalText}
	default:
		return Reply{ToolName: s.script.ToolName, ToolInput: s.script.ToolInput}
	}
}

// --- Anthropic Messages ---

type anthropicBlock struct {
	Type    string          `json:"type"`
	Text    string          `json:"text"`
	Content json.RawMessage `json:"content"`
	Source  *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // string or []anthropicBlock
}

type anthropicRequest struct {
	Model    string             `json:"model"`
	Stream   bool               `json:"stream"`
	Tools    []json.RawMessage  `json:"tools"`
	Messages []anthropicMessage `json:"messages"`
}

// openclawContext starts the user message OpenClaw appends after each user
// turn (and after tool results): runtime context, not what the user said.
const openclawContext = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>"

// contextOnly reports whether a user message is nothing but OpenClaw's
// internal context blocks.
func contextOnly(blocks []anthropicBlock) bool {
	if len(blocks) == 0 {
		return false
	}
	for _, b := range blocks {
		if b.Type != "text" || !strings.HasPrefix(b.Text, openclawContext) {
			return false
		}
	}
	return true
}

// parseAnthropic reads the parts of a Messages request the script needs.
func parseAnthropic(body []byte) (anthropicRequest, Request, error) {
	var ar anthropicRequest
	if err := json.Unmarshal(body, &ar); err != nil {
		return ar, Request{}, fmt.Errorf("decode messages request: %w", err)
	}
	r := Request{API: "anthropic", Model: ar.Model, Stream: ar.Stream, HasTools: len(ar.Tools) > 0, Body: append(json.RawMessage(nil), body...)}
	for i := len(ar.Messages) - 1; i >= 0; i-- {
		m := ar.Messages[i]
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if strings.HasPrefix(s, openclawContext) {
				continue
			}
			r.LastText = s
			break
		}
		var blocks []anthropicBlock
		_ = json.Unmarshal(m.Content, &blocks)
		if contextOnly(blocks) {
			continue // OpenClaw's internal context after the real user turn
		}
		var texts []string
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				r.ToolDone = true
			case "text":
				if !strings.HasPrefix(b.Text, "<system-reminder>") {
					texts = append(texts, b.Text)
				}
			case "image":
				if b.Source != nil && b.Source.Type == "base64" {
					data, _ := base64.StdEncoding.DecodeString(b.Source.Data)
					r.Images = append(r.Images, Image{MediaType: b.Source.MediaType, Data: data})
				}
			}
		}
		r.LastText = strings.Join(texts, "\n")
		break
	}
	return ar, r, nil
}

func (s *Server) anthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	writeJSON(w, map[string]any{"input_tokens": 100})
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ar, req, err := parseAnthropic(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": "invalid_request_error", "message": err.Error()}})
		return
	}
	req.Path = r.URL.Path
	n := s.record(req)
	reply := s.decide(req)
	msgID := fmt.Sprintf("msg_fake_%04d", n)
	model := ar.Model
	if model == "" {
		model = "fake-model"
	}
	var content []map[string]any
	stop := "end_turn"
	calls := reply.calls()
	for i, c := range calls {
		stop = "tool_use"
		content = append(content, map[string]any{"type": "tool_use", "id": callID("toolu", n, i), "name": c.Name, "input": c.Input})
	}
	if len(calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	usage := map[string]any{"input_tokens": 100, "output_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !ar.Stream {
		writeJSON(w, map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": model, "content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	sse := newSSE(w, s.script.Delay)
	sse.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	for i, c := range calls {
		in, _ := json.Marshal(c.Input)
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{
			"type": "tool_use", "id": content[i]["id"], "name": c.Name, "input": map[string]any{}}})
		sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if len(calls) == 0 {
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		for _, chunk := range chunks(reply.Text, 16) {
			sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": chunk}})
		}
		sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	}
	sse.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 20}})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

// --- OpenAI Responses ---

type openaiRequest struct {
	Model  string            `json:"model"`
	Stream bool              `json:"stream"`
	Tools  []json.RawMessage `json:"tools"`
	Input  json.RawMessage   `json:"input"`
}

type openaiItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func parseOpenAI(body []byte) (openaiRequest, Request, error) {
	var or openaiRequest
	if err := json.Unmarshal(body, &or); err != nil {
		return or, Request{}, fmt.Errorf("decode responses request: %w", err)
	}
	r := Request{API: "openai", Model: or.Model, Stream: or.Stream, HasTools: len(or.Tools) > 0, Body: append(json.RawMessage(nil), body...)}
	var items []openaiItem
	if json.Unmarshal(or.Input, &items) != nil {
		var s string
		_ = json.Unmarshal(or.Input, &s)
		r.LastText = s
		return or, r, nil
	}
	// The last input item decides: a function call output means the tool ran.
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" {
			r.ToolDone = true
			break
		}
		if it.Role == "user" {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(it.Content, &parts) == nil {
				var texts []string
				for _, p := range parts {
					if p.Text != "" {
						texts = append(texts, p.Text)
					}
				}
				r.LastText = strings.Join(texts, "\n")
			}
			break
		}
	}
	return or, r, nil
}

func (s *Server) openaiResponses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	or, req, err := parseOpenAI(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error"}})
		return
	}
	req.Path = r.URL.Path
	n := s.record(req)
	reply := s.decide(req)
	respID := fmt.Sprintf("resp_fake_%04d", n)
	model := or.Model
	if model == "" {
		model = "fake-model"
	}
	var items []map[string]any
	calls := reply.calls()
	for i, c := range calls {
		args, _ := json.Marshal(c.Input)
		item := map[string]any{"type": "function_call", "id": callID("fc", n, i), "call_id": callID("call", n, i),
			"name": c.Name, "arguments": string(args), "status": "completed"}
		if c.Namespace != "" {
			item["namespace"] = c.Namespace
		}
		items = append(items, item)
	}
	if len(calls) == 0 {
		items = append(items, map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake_%04d", n), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}})
	}
	usage := map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 20, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 120}
	response := func(status string, output []any) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "created_at": 0, "status": status, "model": model, "output": output}
		if status == "completed" {
			m["usage"] = usage
		}
		return m
	}
	sse := newSSE(w, s.script.Delay)
	sse.event("response.created", map[string]any{"type": "response.created", "response": response("in_progress", []any{})})
	var output []any
	for idx, item := range items {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["status"] = "in_progress"
		if item["type"] == "function_call" {
			added["arguments"] = ""
			sse.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": idx, "item": added})
			sse.event("response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": idx, "delta": item["arguments"]})
			sse.event("response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": idx, "arguments": item["arguments"]})
		} else {
			added["content"] = []any{}
			sse.event("response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": idx, "item": added})
			sse.event("response.content_part.added", map[string]any{"type": "response.content_part.added", "item_id": item["id"], "output_index": idx, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, c := range chunks(reply.Text, 16) {
				sse.event("response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": item["id"], "output_index": idx, "content_index": 0, "delta": c})
			}
			sse.event("response.output_text.done", map[string]any{"type": "response.output_text.done", "item_id": item["id"], "output_index": idx, "content_index": 0, "text": reply.Text})
		}
		sse.event("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item})
		output = append(output, item)
	}
	sse.event("response.completed", map[string]any{"type": "response.completed", "response": response("completed", output)})
}

// --- helpers ---

type sseWriter struct {
	w     http.ResponseWriter
	f     http.Flusher
	delay time.Duration
}

func newSSE(w http.ResponseWriter, delay time.Duration) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sseWriter{w: w, f: f, delay: delay}
}

func (s *sseWriter) event(name string, data any) {
	b, _ := json.Marshal(data) // only maps of plain values reach here
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if s.f != nil {
		s.f.Flush()
	}
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// chunks splits s into pieces of at most n runes (never splitting a rune).
func chunks(s string, n int) []string {
	var out []string
	r := []rune(s)
	for len(r) > n {
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	if len(r) > 0 || len(out) == 0 {
		out = append(out, string(r))
	}
	return out
}
