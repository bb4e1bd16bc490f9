package fakemodel

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type sseEvent struct {
	Name string
	Data map[string]any
}

// post sends body to path and parses the SSE stream of the answer.
func post(t *testing.T, url, body string) []sseEvent {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.Data); err != nil {
				t.Fatalf("bad data line %q: %v", line, err)
			}
		case line == "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	return out
}

func names(evs []sseEvent) string {
	var n []string
	for _, e := range evs {
		n = append(n, e.Name)
	}
	return strings.Join(n, ",")
}

func TestAnthropicToolCallThenFinalText(t *testing.T) {
	s, err := New(Script{ToolInput: map[string]any{"command": "ls"}, FinalText: "Listed the files."})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	first := post(t, s.URL+"/v1/messages?beta=true", `{"model":"m","stream":true,"tools":[{"name":"Bash"}],
		"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"list files"}]}]}`)
	if got, want := names(first), "message_start,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	block := first[1].Data["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "Bash" || block["id"] != "toolu_fake_0001" {
		t.Fatalf("tool block %v", block)
	}
	if pj := first[2].Data["delta"].(map[string]any)["partial_json"]; pj != `{"command":"ls"}` {
		t.Fatalf("partial_json %v", pj)
	}
	if sr := first[4].Data["delta"].(map[string]any)["stop_reason"]; sr != "tool_use" {
		t.Fatalf("stop_reason %v", sr)
	}

	second := post(t, s.URL+"/v1/messages", `{"model":"m","stream":true,"tools":[{"name":"Bash"}],
		"messages":[{"role":"user","content":"list files"},{"role":"assistant","content":[]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_fake_0001","content":"a\nb"}]}]}`)
	var text strings.Builder
	for _, e := range second {
		if e.Name == "content_block_delta" {
			text.WriteString(e.Data["delta"].(map[string]any)["text"].(string))
		}
	}
	if text.String() != "Listed the files." {
		t.Fatalf("final text %q", text.String())
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].LastText != "list files" || reqs[0].ToolDone || !reqs[1].ToolDone || !reqs[0].HasTools {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestAnthropicNonStreamingSideCall(t *testing.T) {
	s, err := New(Script{SideText: "A title"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"name this"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Content []struct{ Type, Text string }
		Stop    string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || m.Content[0].Text != "A title" || m.Stop != "end_turn" {
		t.Fatalf("answer %+v", m)
	}
}

func TestOpenAIResponsesToolCallThenText(t *testing.T) {
	s, err := New(Script{ToolName: "shell", ToolInput: map[string]any{"command": []any{"echo", "hi"}}, FinalText: "It printed hi."})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := post(t, s.URL+"/v1/responses", `{"model":"fake-model","stream":true,"tools":[{"type":"function","name":"shell"}],
		"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say hi"}]}]}`)
	if got, want := names(first), "response.created,response.output_item.added,response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done,response.completed"; got != want {
		t.Fatalf("events %s", got)
	}
	item := first[4].Data["item"].(map[string]any)
	if item["type"] != "function_call" || item["name"] != "shell" || item["arguments"] != `{"command":["echo","hi"]}` || item["call_id"] != "call_fake_0001" {
		t.Fatalf("item %v", item)
	}
	second := post(t, s.URL+"/v1/responses", `{"model":"fake-model","stream":true,"tools":[{"type":"function","name":"shell"}],
		"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say hi"}]},
		{"type":"function_call","call_id":"call_fake_0001"},{"type":"function_call_output","call_id":"call_fake_0001","output":"hi"}]}`)
	last := second[len(second)-1]
	out := last.Data["response"].(map[string]any)["output"].([]any)[0].(map[string]any)
	if txt := out["content"].([]any)[0].(map[string]any)["text"]; txt != "It printed hi." {
		t.Fatalf("final %v", txt)
	}
}

func TestBadBodyIs400(t *testing.T) {
	s, err := New(Script{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{"/v1/messages", "/v1/responses"} {
		resp, err := http.Post(s.URL+p, "application/json", strings.NewReader(`{not json`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", p, resp.StatusCode)
		}
	}
}

func TestChunksKeepRunes(t *testing.T) {
	got := chunks("héllo wörld ✅🎉", 4)
	if strings.Join(got, "") != "héllo wörld ✅🎉" || len(got) != 4 {
		t.Fatalf("chunks %q", got)
	}
	if c := chunks("", 4); len(c) != 1 || c[0] != "" {
		t.Fatalf("chunks of empty %q", c)
	}
}

// Several calls in one reply: one tool_use block each, in order, with
// their own ids, and stop_reason tool_use.
func TestAnthropicTwoCalls(t *testing.T) {
	s, err := New(Script{Decide: func(Request) Reply {
		return Reply{Calls: []ToolCall{{Name: "Bash", Input: map[string]any{"command": "echo one"}}, {Name: "Bash", Input: map[string]any{"command": "echo two"}}}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := post(t, s.URL+"/v1/messages", `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"two"}]}`)
	if got, want := names(evs), "message_start,content_block_start,content_block_delta,content_block_stop,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"; got != want {
		t.Fatalf("events %s", got)
	}
	for i, want := range []struct {
		index float64
		id    string
		json  string
	}{{0, "toolu_fake_0001", `{"command":"echo one"}`}, {1, "toolu_fake_0001_2", `{"command":"echo two"}`}} {
		start, delta := evs[1+3*i].Data, evs[2+3*i].Data
		block := start["content_block"].(map[string]any)
		if start["index"] != want.index || block["id"] != want.id || block["name"] != "Bash" {
			t.Errorf("call %d: start %v", i, start)
		}
		if delta["index"] != want.index || delta["delta"].(map[string]any)["partial_json"] != want.json {
			t.Errorf("call %d: delta %v", i, delta)
		}
	}
	resp, err := http.Post(s.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"m","tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"two more"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Content []struct{ Type, ID, Name string }
		Stop    string `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 2 || m.Content[0].ID != "toolu_fake_0002" || m.Content[1].ID != "toolu_fake_0002_2" || m.Stop != "tool_use" {
		t.Fatalf("plain answer %+v", m)
	}
}

// Several calls in one Responses answer: one function_call item each, at
// output indexes 0 and 1, all in response.completed.
func TestOpenAIResponsesTwoCalls(t *testing.T) {
	s, err := New(Script{Decide: func(Request) Reply {
		return Reply{Calls: []ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "echo one"}}, {Name: "spawn_agent", Namespace: "multi_agent_v1", Input: map[string]any{"message": "two"}}}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := post(t, s.URL+"/v1/responses", `{"model":"fake-model","stream":true,"tools":[{"type":"function","name":"exec_command"}],"input":"two"}`)
	one := "response.output_item.added,response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done"
	if got, want := names(evs), "response.created,"+one+","+one+",response.completed"; got != want {
		t.Fatalf("events %s", got)
	}
	out := evs[len(evs)-1].Data["response"].(map[string]any)["output"].([]any)
	if len(out) != 2 {
		t.Fatalf("output %v", out)
	}
	for i, want := range []struct {
		callID, name, args string
		namespace          any
	}{{"call_fake_0001", "exec_command", `{"cmd":"echo one"}`, nil}, {"call_fake_0001_2", "spawn_agent", `{"message":"two"}`, "multi_agent_v1"}} {
		item := out[i].(map[string]any)
		if item["call_id"] != want.callID || item["name"] != want.name || item["arguments"] != want.args || item["type"] != "function_call" || item["namespace"] != want.namespace {
			t.Errorf("item %d: %v", i, item)
		}
		if idx := evs[1+4*i].Data["output_index"]; idx != float64(i) {
			t.Errorf("item %d at output_index %v", i, idx)
		}
	}
	if r := s.Requests()[0]; r.API != "openai" || !r.Stream || r.LastText != "two" {
		t.Errorf("request %+v", r)
	}
}

// FuzzParseAnthropic and FuzzParseOpenAI: any body is parsed or refused,
// never a panic.
func FuzzParseAnthropic(f *testing.F) {
	f.Add([]byte(`{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"user","content":[{"type":"tool_result"},{"type":"text","text":"x"}]}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":"plain"}]}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":7}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, r, err := parseAnthropic(body); err == nil && r.API != "anthropic" {
			t.Fatalf("API %q", r.API)
		}
	})
}

func FuzzParseOpenAI(f *testing.F) {
	f.Add([]byte(`{"model":"m","input":[{"type":"function_call_output"},{"role":"user","content":[{"type":"input_text","text":"x"}]}]}`))
	f.Add([]byte(`{"input":"plain"}`))
	f.Add([]byte(`{"input":[{"role":"user","content":"not parts"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, r, err := parseOpenAI(body); err == nil && r.API != "openai" {
			t.Fatalf("API %q", r.API)
		}
	})
}

// TestRetryKeepsIds: an agent that repeats its last request (a retry after
// a slow answer) gets the same ids again; the next request gets the next
// number, as if the retry had not happened.
func TestRetryKeepsIds(t *testing.T) {
	s, err := New(Script{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ask := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"list files"}]}`
	toolID := func(events []sseEvent) any { return events[1].Data["content_block"].(map[string]any)["id"] }
	if id := toolID(post(t, s.URL+"/v1/messages", ask)); id != "toolu_fake_0001" {
		t.Fatalf("first answer's tool id %v", id)
	}
	if id := toolID(post(t, s.URL+"/v1/messages", ask)); id != "toolu_fake_0001" {
		t.Fatalf("the retry's tool id %v, want the first's", id)
	}
	other := `{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"list the tests"}]}`
	if id := toolID(post(t, s.URL+"/v1/messages", other)); id != "toolu_fake_0002" {
		t.Fatalf("the next conversation's tool id %v", id)
	}
	// The same question later, after another: a new answer.
	if id := toolID(post(t, s.URL+"/v1/messages", ask)); id != "toolu_fake_0003" {
		t.Fatalf("the question asked again later got tool id %v", id)
	}
	if n := len(s.Requests()); n != 4 {
		t.Fatalf("%d requests recorded, want 4", n)
	}
}
