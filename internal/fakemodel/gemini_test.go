package fakemodel

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// postRaw sends body to url and returns the answer and its whole body.
func postRaw(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// sseData returns the data lines of an event stream.
func sseData(t *testing.T, body string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

const geminiTools = `"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]`

func TestGeminiScript(t *testing.T) {
	s, err := New(Script{ToolName: "run_shell_command", ToolInput: map[string]any{"command": "echo hi > hi.txt"}, FinalText: "Created hi.txt for you."})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stream := s.URL + "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"

	resp, body := postRaw(t, stream, `{"contents":[{"role":"user","parts":[{"text":"make hi"}]}],`+geminiTools+`}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(body, "\r\n\r\n") {
		t.Fatalf("events are not CRLF-framed: %q", body)
	}
	data := sseData(t, body)
	want := `{"candidates":[{"content":{"parts":[{"functionCall":{"args":{"command":"echo hi > hi.txt"},"name":"run_shell_command"}}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"gemini-x","usageMetadata":{"candidatesTokenCount":5,"promptTokenCount":10,"totalTokenCount":15}}`
	if len(data) != 1 || data[0] != want {
		t.Fatalf("tool call: %q", data)
	}

	_, body = postRaw(t, stream, `{"contents":[{"role":"user","parts":[{"text":"make hi"}]},{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{}}}]}],`+geminiTools+`}`)
	data = sseData(t, body)
	var text string
	for i, d := range data {
		var r struct {
			Candidates []struct {
				Content struct {
					Parts []struct {
						Text string `json:"text"`
					} `json:"parts"`
				} `json:"content"`
				FinishReason string `json:"finishReason"`
			} `json:"candidates"`
		}
		if err := json.Unmarshal([]byte(d), &r); err != nil {
			t.Fatal(err)
		}
		text += r.Candidates[0].Content.Parts[0].Text
		if (r.Candidates[0].FinishReason == "STOP") != (i == len(data)-1) {
			t.Errorf("finish reason on piece %d of %d", i, len(data))
		}
	}
	if len(data) != 2 || text != "Created hi.txt for you." {
		t.Fatalf("final text in %d pieces: %q", len(data), text)
	}

	_, body = postRaw(t, s.URL+"/v1beta/models/gemini-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"route"}]}],"generationConfig":{"responseMimeType":"application/json"}}`)
	if !strings.Contains(body, `"parts":[{"text":"{}"}]`) {
		t.Fatalf("side JSON: %s", body)
	}
	_, body = postRaw(t, s.URL+"/v1beta/models/gemini-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"title"}]}]}`)
	if !strings.Contains(body, `"parts":[{"text":"Fake title"}]`) {
		t.Fatalf("side text: %s", body)
	}
	resp, body = postRaw(t, s.URL+"/v1beta/models/gemini-lite:generateContent", `[1]`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"status":"INVALID_ARGUMENT"`) {
		t.Fatalf("bad body: %d %s", resp.StatusCode, body)
	}
	resp, _ = postRaw(t, s.URL+"/v1beta/models/gemini-lite:embedContent", `{}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown method: %d", resp.StatusCode)
	}

	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	if r := reqs[0]; r.API != "gemini" || r.Model != "gemini-x" || !r.Stream || !r.HasTools || r.ToolDone || r.LastText != "make hi" || r.Path != "/v1beta/models/gemini-x:streamGenerateContent" {
		t.Errorf("first request %+v", r)
	}
	if r := reqs[1]; !r.ToolDone || r.LastText != "" {
		t.Errorf("second request %+v", r)
	}
	if r := reqs[2]; r.Stream || r.HasTools || !r.JSON || r.Model != "gemini-lite" {
		t.Errorf("third request %+v", r)
	}
}

// Several calls in one reply are functionCall parts of one answer; a raw
// U+2028 in a text is escaped, so an SSE data line never holds one.
func TestGeminiTwoCallsAndLineSeparator(t *testing.T) {
	s, err := New(Script{Decide: func(r Request) Reply {
		if r.ToolDone {
			return Reply{Text: "a\u2028b"}
		}
		return Reply{Calls: []ToolCall{{Name: "run_shell_command", Input: map[string]any{"command": "echo one"}}, {Name: "run_shell_command", Input: map[string]any{"command": "echo two"}}}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, body := postRaw(t, s.URL+"/v1beta/models/g:generateContent", `{"contents":[{"role":"user","parts":[{"text":"two"}]}],`+geminiTools+`}`)
	want := `{"candidates":[{"content":{"parts":[{"functionCall":{"args":{"command":"echo one"},"name":"run_shell_command"}},{"functionCall":{"args":{"command":"echo two"},"name":"run_shell_command"}}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"g","usageMetadata":{"candidatesTokenCount":5,"promptTokenCount":10,"totalTokenCount":15}}`
	if body != want {
		t.Fatalf("two calls:\n%s\nwant\n%s", body, want)
	}
	_, body = postRaw(t, s.URL+"/v1beta/models/g:streamGenerateContent?alt=sse", `{"contents":[{"role":"user","parts":[{"functionResponse":{}},{"functionResponse":{}}]}],`+geminiTools+`}`)
	if strings.Contains(body, "\u2028") || !strings.Contains(body, `a\u2028b`) {
		t.Fatalf("line separator not escaped: %q", body)
	}
}

func TestByteChunksKeepRunes(t *testing.T) {
	got := byteChunks("héllo wörld", 2)
	if strings.Join(got, "") != "héllo wörld" {
		t.Fatalf("%q", got)
	}
	for _, c := range got {
		if strings.ToValidUTF8(c, "?") != c {
			t.Errorf("piece %q splits a character", c)
		}
	}
	if got := byteChunks("", 5); len(got) != 1 || got[0] != "" {
		t.Errorf("empty: %q", got)
	}
}

// FuzzParseGemini: any body is parsed or refused, never a panic.
func FuzzParseGemini(f *testing.F) {
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"},{"functionResponse":{}}]}],"tools":[{"functionDeclarations":[{}]}]}`))
	f.Add([]byte(`{"contents":null}`))
	f.Add([]byte(`{"contents":[{"role":"model","parts":[{"text":null}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseGemini(body)
		if err == nil && r.API != "gemini" {
			t.Fatalf("API %q", r.API)
		}
	})
}
