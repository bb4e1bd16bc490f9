package fakemodel

// The Gemini API: POST /v1beta/models/<model>:generateContent (one JSON
// answer) and :streamGenerateContent?alt=sse (Server-Sent Events whose data
// lines each carry one answer object), as Gemini CLI calls it with
// GOOGLE_GEMINI_BASE_URL pointing here.
//
// An answer has the shape of the public API's GenerateContentResponse:
// {"candidates":[{"content":{"role":"model","parts":[…]},"finishReason":"STOP",
// "index":0}],"usageMetadata":{promptTokenCount, candidatesTokenCount,
// totalTokenCount},"modelVersion":…}. Tool calls are functionCall parts, all
// in one answer; a text is streamed in pieces of about 12 bytes, the last
// piece carrying the finish reason and the usage.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

type geminiPart struct {
	Text             *string         `json:"text"`
	FunctionCall     json.RawMessage `json:"functionCall"`
	FunctionResponse json.RawMessage `json:"functionResponse"`
}

type geminiContent struct {
	Role  string       `json:"role"`
	Parts []geminiPart `json:"parts"`
}

type geminiRequest struct {
	Contents []geminiContent `json:"contents"`
	Tools    []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType string `json:"responseMimeType"`
	} `json:"generationConfig"`
}

// ParseGemini reads what the script needs of a generateContent request
// body: whether it declares function tools, whether its last content
// carries a functionResponse, whether it asks for a JSON answer, and the
// text of its last content when that is not the model's. Model, Stream and
// Path are left for the caller (they come from the URL). Errors: the body
// is not a request object.
func ParseGemini(body []byte) (Request, error) {
	var g geminiRequest
	if err := json.Unmarshal(body, &g); err != nil {
		return Request{}, fmt.Errorf("fakemodel: decode gemini request: %w", err)
	}
	r := Request{API: "gemini", Body: append(json.RawMessage(nil), body...), JSON: g.GenerationConfig.ResponseMimeType == "application/json"}
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

// geminiModels serves /v1beta/models/<model>:generateContent and
// :streamGenerateContent; other methods are 404, a bad body is 400 with the
// API's error shape.
func (s *Server) geminiModels(w http.ResponseWriter, r *http.Request) {
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
	req, err := ParseGemini(body)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": 400, "message": err.Error(), "status": "INVALID_ARGUMENT"}})
		return
	}
	req.Path, req.Model, req.Stream = r.URL.Path, model, method == "streamGenerateContent"
	s.record(req)
	reply := s.decide(req)
	calls := reply.calls()
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(encodeLine(geminiResponse(model, calls, reply.Text, true)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		fmt.Fprintf(w, "data: %s\r\n\r\n", encodeLine(v))
		if fl != nil {
			fl.Flush()
		}
		if s.script.Delay > 0 {
			time.Sleep(s.script.Delay)
		}
	}
	if len(calls) > 0 {
		send(geminiResponse(model, calls, "", true))
		return
	}
	pieces := byteChunks(reply.Text, 12)
	for i, c := range pieces {
		send(geminiResponse(model, nil, c, i == len(pieces)-1))
	}
}

// geminiResponse is one GenerateContentResponse: the function calls, or a
// text piece; the last one carries the finish reason and the usage.
func geminiResponse(model string, calls []ToolCall, text string, last bool) map[string]any {
	var parts []any
	for _, c := range calls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": c.Input}})
	}
	if len(calls) == 0 {
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

// encodeLine writes v as one line of JSON without HTML escaping (a raw
// U+2028 is escaped by encoding/json, which Gemini CLI needs: it cuts SSE
// data at a raw line separator).
func encodeLine(v any) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // only maps of plain values reach here
	return []byte(strings.TrimSuffix(b.String(), "\n"))
}

// byteChunks cuts s into pieces of about n bytes on rune boundaries (at
// least one piece, "" for an empty text).
func byteChunks(s string, n int) []string {
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
