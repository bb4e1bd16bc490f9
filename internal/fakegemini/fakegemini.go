// Package fakegemini is a scripted, deterministic Gemini API server for
// tests: enough of POST /v1beta/models/<model>:generateContent and
// :streamGenerateContent?alt=sse for the real Gemini CLI to run a turn
// offline against 127.0.0.1.
//
// The default script is stateless: a request that declares tools and whose
// last content carries no functionResponse gets one function call
// (Script.ToolName, Script.ToolArgs); any other request with tools gets
// Script.FinalText; a request without tools (routing, titles and other side
// calls) gets Script.SideText, or Script.SideJSON when it asks for a JSON
// response. Set Script.Decide to take over completely.
//
// Responses have the shape of the public API: {"candidates":[{"content":
// {"role":"model","parts":[…]},"finishReason":"STOP","index":0}],
// "usageMetadata":{promptTokenCount, candidatesTokenCount, totalTokenCount},
// "modelVersion":…}; streamed ones are Server-Sent Events whose data lines
// each carry one such object.
package fakegemini

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request is what the server saw of one model request, for assertions.
type Request struct {
	Model    string          // from the path
	Stream   bool            // :streamGenerateContent
	HasTools bool            // the request declares function tools
	ToolDone bool            // the last content carries a functionResponse
	JSON     bool            // generationConfig.responseMimeType is application/json
	LastText string          // text of the last user content (function responses excluded)
	Body     json.RawMessage // the whole request body
}

// Reply is the scripted answer to one request: a function call when
// ToolName is set, else Text.
type Reply struct {
	Text     string
	ToolName string
	ToolArgs map[string]any
}

// Script configures the answers. Zero fields take the defaults in New.
type Script struct {
	ToolName  string                // function the model calls (default "run_shell_command")
	ToolArgs  map[string]any        // its arguments (default {"command":"echo hi","description":"Print hi"})
	FinalText string                // answer after a function response (default "Done.")
	SideText  string                // answer to requests without tools (default "Fake title")
	SideJSON  string                // answer to side requests asking for JSON (default "{}")
	Decide    func(r Request) Reply // when set, decides every answer
	Delay     time.Duration         // pause between streamed events
}

// Server is a running fake Gemini API server.
type Server struct {
	URL string // base URL, e.g. http://127.0.0.1:41234 (GOOGLE_GEMINI_BASE_URL)

	script Script
	srv    *http.Server

	mu       sync.Mutex
	requests []Request
}

// New starts a server on 127.0.0.1 with an OS-chosen port. Errors: the
// listen error.
func New(s Script) (*Server, error) {
	if s.ToolName == "" {
		s.ToolName = "run_shell_command"
	}
	if s.ToolArgs == nil {
		s.ToolArgs = map[string]any{"command": "echo hi", "description": "Print hi"}
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
		return nil, fmt.Errorf("fakegemini: listen: %w", err)
	}
	fs := &Server{URL: "http://" + ln.Addr().String(), script: s}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1beta/models/{call}", fs.models)
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "not found", http.StatusNotFound) })
	fs.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = fs.srv.Serve(ln) }()
	return fs, nil
}

// Close stops the server and waits for open requests (at most 5 s).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}

// Requests returns a copy of the model requests seen so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

type part struct {
	Text             *string         `json:"text"`
	FunctionCall     json.RawMessage `json:"functionCall"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
}

type content struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type generateRequest struct {
	Contents []content `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType string `json:"responseMimeType"`
	} `json:"generationConfig"`
}

// Parse reads the parts of a generateContent request body the script
// needs. Errors: the body is not a request object.
func Parse(body []byte) (Request, error) {
	var g generateRequest
	if err := json.Unmarshal(body, &g); err != nil {
		return Request{}, fmt.Errorf("fakegemini: decode request: %w", err)
	}
	r := Request{Body: append(json.RawMessage(nil), body...), JSON: g.GenerationConfig.ResponseMimeType == "application/json"}
	for _, t := range g.Tools {
		if len(t.FunctionDeclarations) > 0 {
			r.HasTools = true
		}
	}
	if n := len(g.Contents); n > 0 {
		last := g.Contents[n-1]
		var texts []string
		for _, p := range last.Parts {
			if len(p.FunctionResponse) > 0 {
				r.ToolDone = true
			}
			if p.Text != nil && last.Role != "model" {
				texts = append(texts, *p.Text)
			}
		}
		r.LastText = strings.Join(texts, "\n")
	}
	return r, nil
}

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
	}
	return Reply{ToolName: s.script.ToolName, ToolArgs: s.script.ToolArgs}
}

// models serves /v1beta/models/<model>:generateContent and
// :streamGenerateContent.
func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(r.PathValue("call"), ":")
	if !ok || (method != "generateContent" && method != "streamGenerateContent") {
		http.Error(w, "unknown method", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := Parse(body)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400, "message": err.Error(), "status": "INVALID_ARGUMENT"}})
		return
	}
	req.Model, req.Stream = model, method == "streamGenerateContent"
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	reply := s.decide(req)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(encode(response(model, reply, reply.Text, true)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		fmt.Fprintf(w, "data: %s\r\n\r\n", encode(v))
		if fl != nil {
			fl.Flush()
		}
		if s.script.Delay > 0 {
			time.Sleep(s.script.Delay)
		}
	}
	if reply.ToolName != "" {
		send(response(model, reply, "", true))
		return
	}
	pieces := chunks(reply.Text, 12)
	for i, c := range pieces {
		send(response(model, Reply{}, c, i == len(pieces)-1))
	}
}

// response is one GenerateContentResponse: a function call or a text
// piece; the last one carries the finish reason and the usage.
func response(model string, r Reply, text string, last bool) map[string]any {
	var parts []any
	if r.ToolName != "" {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": r.ToolName, "args": r.ToolArgs}})
	} else {
		parts = append(parts, map[string]any{"text": text})
	}
	cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
	out := map[string]any{"candidates": []any{cand}, "modelVersion": model}
	if last {
		cand["finishReason"] = "STOP"
		out["usageMetadata"] = map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}
	}
	return out
}

// encode writes v as one line of JSON, without HTML escaping.
func encode(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// chunks cuts s into pieces of about n bytes on rune boundaries (at least
// one piece, "" for an empty text).
func chunks(s string, n int) []string {
	if s == "" {
		return []string{""}
	}
	var out []string
	for len(s) > 0 {
		cut := min(n, len(s))
		for cut < len(s) && !runeStart(s[cut]) {
			cut++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }
