package fakegemini

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
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

func TestScript(t *testing.T) {
	s, err := New(Script{FinalText: "Created hi.txt for you.", ToolArgs: map[string]any{"command": "echo hi > hi.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools := `"tools":[{"functionDeclarations":[{"name":"run_shell_command"}]}]`
	stream := s.URL + "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"

	resp, body := post(t, stream, `{"contents":[{"role":"user","parts":[{"text":"make hi"}]}],`+tools+`}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	data := sseData(t, body)
	want := `{"candidates":[{"content":{"parts":[{"functionCall":{"args":{"command":"echo hi > hi.txt"},"name":"run_shell_command"}}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"gemini-x","usageMetadata":{"candidatesTokenCount":5,"promptTokenCount":10,"totalTokenCount":15}}`
	if len(data) != 1 || data[0] != want {
		t.Fatalf("tool call: %q", data)
	}

	_, body = post(t, stream, `{"contents":[{"role":"user","parts":[{"text":"make hi"}]},{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{}}}]},{"role":"user","parts":[{"functionResponse":{"name":"run_shell_command","response":{}}}]}],`+tools+`}`)
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
	if len(data) < 2 || text != "Created hi.txt for you." {
		t.Fatalf("final text in %d pieces: %q", len(data), text)
	}

	_, body = post(t, s.URL+"/v1beta/models/gemini-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"route"}]}],"generationConfig":{"responseMimeType":"application/json"}}`)
	if !strings.Contains(body, `"parts":[{"text":"{}"}]`) {
		t.Fatalf("side JSON: %s", body)
	}
	_, body = post(t, s.URL+"/v1beta/models/gemini-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"title"}]}]}`)
	if !strings.Contains(body, `"parts":[{"text":"Fake title"}]`) {
		t.Fatalf("side text: %s", body)
	}
	resp, _ = post(t, s.URL+"/v1beta/models/gemini-lite:generateContent", `[1]`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad body: %d", resp.StatusCode)
	}
	resp, _ = post(t, s.URL+"/v1beta/models/gemini-lite:embedContent", `{}`)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown method: %d", resp.StatusCode)
	}

	reqs := s.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	if r := reqs[0]; r.Model != "gemini-x" || !r.Stream || !r.HasTools || r.ToolDone || r.LastText != "make hi" {
		t.Errorf("first request %+v", r)
	}
	if r := reqs[1]; !r.ToolDone {
		t.Errorf("second request %+v", r)
	}
	if r := reqs[2]; r.Stream || r.HasTools || !r.JSON || r.Model != "gemini-lite" {
		t.Errorf("third request %+v", r)
	}
}

func TestChunks(t *testing.T) {
	got := chunks("héllo wörld", 2)
	if strings.Join(got, "") != "héllo wörld" {
		t.Fatalf("%q", got)
	}
	for _, c := range got {
		if !strings.HasPrefix(c, string([]rune(c)[0])) || strings.ToValidUTF8(c, "?") != c {
			t.Errorf("piece %q splits a character", c)
		}
	}
	if got := chunks("", 5); len(got) != 1 || got[0] != "" {
		t.Errorf("empty: %q", got)
	}
}

// FuzzParse: any body is parsed or refused, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"contents":[{"role":"user","parts":[{"text":"x"},{"functionResponse":{}}]}],"tools":[{"functionDeclarations":[{}]}]}`))
	f.Add([]byte(`{"contents":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _ = Parse(body)
	})
}
