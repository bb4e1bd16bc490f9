package acp

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// An ACP tool call in the shapes each agent sends becomes the canonical
// tool, input and provider metadata (the shapes are those of the captures
// under testdata/captures).
func TestCanonicalACPTools(t *testing.T) {
	sp := func(s string) *string { return &s }
	cases := []struct {
		name      string
		agentName string // initialize's agentInfo.name
		tool      tool
		want      string // tool name
		input     string
		meta      string
	}{
		{name: "codex-acp ls arrives as a search", agentName: "codex-acp",
			tool: tool{acpID: "call_1", kind: "search", title: "List /w",
				rawInput: json.RawMessage(`{"call_id":"call_1","command":["/bin/bash","-lc","ls"],"cwd":"/w","parsed_cmd":[{"type":"list_files","cmd":"ls"}]}`)},
			want: agent.ToolBash, input: `{"command":"ls","cwd":"/w"}`,
			meta: `{"providerInput":{"call_id":"call_1","command":["/bin/bash","-lc","ls"],"cwd":"/w","parsed_cmd":[{"cmd":"ls","type":"list_files"}]},"providerTool":"search"}`},
		{name: "codex-acp cat arrives as a read", tool: tool{acpID: "call_2", kind: "read", title: "Read a.txt",
			rawInput: json.RawMessage(`{"command":["/bin/bash","-lc","cat a.txt"],"cwd":"/w"}`), locations: []location{{Path: "/w/a.txt"}}},
			want: agent.ToolBash, input: `{"command":"cat a.txt","cwd":"/w"}`},
		{name: "an argv that is no shell script", tool: tool{acpID: "c", kind: "execute", rawInput: json.RawMessage(`{"command":["git","commit","-m","a b"]}`)},
			want: agent.ToolBash, input: `{"command":"git commit -m 'a b'"}`},
		{name: "Gemini CLI: the command is the title, folder and description in the content",
			tool: tool{acpID: "run_shell_command__run_shell_command_1795964191428_0", kind: "execute", title: "echo hi > hi.txt",
				hintCwd: "/w", hintDesc: "Print hi"},
			want: agent.ToolBash, input: `{"command":"echo hi > hi.txt","description":"Print hi","cwd":"/w"}`, meta: `{"providerTool":"run_shell_command"}`},
		{name: "Gemini CLI read_file", tool: tool{acpID: "read_file__read_file_1_0", kind: "read", title: "alpha.txt", locations: []location{{Path: "/w/alpha.txt"}}},
			want: agent.ToolRead, input: `{"path":"/w/alpha.txt"}`},
		{name: "Gemini CLI replace: the diff's sides", tool: tool{acpID: "replace__replace_1_0", kind: "edit", title: "a: x => y", locations: []location{{Path: "/w/a"}},
			content: []toolContent{{Type: "diff", Path: "/w/a", OldText: sp("x\n"), NewText: "y\n"}}},
			want: agent.ToolEdit, input: `{"path":"/w/a","oldString":"x\n","newString":"y\n"}`},
		{name: "Gemini CLI write_file: a diff without old text", tool: tool{acpID: "write_file__write_file_1_0", kind: "edit", locations: []location{{Path: "/w/n"}},
			content: []toolContent{{Type: "diff", Path: "/w/n", NewText: "new\n"}}},
			want: agent.ToolWrite, input: `{"path":"/w/n","content":"new\n"}`},
		{name: "Gemini CLI glob: a quoted title", tool: tool{acpID: "glob__glob_1_0", kind: "search", title: "'*.txt' within src"},
			want: agent.ToolGlob, input: `{"pattern":"*.txt"}`},
		{name: "Gemini CLI search_file_content", tool: tool{acpID: "search_file_content__search_file_content_1_0", kind: "search", title: "'alpha'"},
			want: agent.ToolGrep, input: `{"pattern":"alpha"}`},
		{name: "Gemini CLI list_directory", tool: tool{acpID: "list_directory__list_directory_1_0", kind: "search", title: "src", locations: []location{{Path: "/w/src"}}},
			want: agent.ToolGlob, input: `{"pattern":"*","path":"/w/src"}`},
		{name: "Gemini CLI web_fetch: the URL from the prompt", tool: tool{acpID: "web_fetch__web_fetch_1_0", kind: "fetch",
			title: `Processing URLs and instructions from prompt: "Summarise https://x.test/a"`},
			want: agent.ToolFetch, input: `{"url":"https://x.test/a","prompt":"Summarise https://x.test/a"}`},
		{name: "Gemini CLI google_web_search", tool: tool{acpID: "google_web_search__google_web_search_1_0", kind: "search", title: `Searching the web for: "happy"`},
			want: agent.ToolSearch, input: `{"query":"happy"}`},
		{name: "claude-code-acp: Claude's tool name in _meta", tool: tool{acpID: "toolu_1", kind: "edit", metaTool: "mcp__acp__Edit",
			rawInput: json.RawMessage(`{"file_path":"/w/a","old_string":"x","new_string":"y","replace_all":false}`)},
			want: agent.ToolEdit, input: `{"path":"/w/a","oldString":"x","newString":"y","replaceAll":false}`,
			meta: `{"providerInput":{"file_path":"/w/a","new_string":"y","old_string":"x","replace_all":false},"providerTool":"Edit"}`},
		{name: "claude-code-acp: the first announcement has no input yet", tool: tool{acpID: "toolu_1", kind: "execute", title: "Terminal", metaTool: "mcp__acp__Bash",
			rawInput: json.RawMessage(`{}`)},
			want: agent.ToolBash, input: `{}`, meta: `{"providerTool":"Bash"}`},
		{name: "claude-code-acp Task is kind think", tool: tool{acpID: "toolu_2", kind: "think", metaTool: "Task",
			rawInput: json.RawMessage(`{"description":"Look","prompt":"look","subagent_type":"Explore"}`)},
			want: agent.ToolTask, input: `{"description":"Look","prompt":"look","agent":"Explore"}`},
		{name: "claude-code-acp MCP tool", tool: tool{acpID: "toolu_3", kind: "other", metaTool: "mcp__github__search", rawInput: json.RawMessage(`{"q":"x"}`)},
			want: "mcp:github/search", input: `{"q":"x"}`, meta: `{"providerTool":"mcp__github__search"}`},
		{name: "claude-code-acp unknown tool", tool: tool{acpID: "toolu_4", kind: "other", metaTool: "KillShell", rawInput: json.RawMessage(`{"shell_id":"1"}`)},
			want: agent.ToolOther, input: `{"shell_id":"1"}`},
		{name: "OpenCode: the first title is the tool's name", agentName: "OpenCode",
			tool: tool{acpID: "toolu_5", kind: "other", firstTitle: "todowrite", title: "1 todos",
				rawInput: json.RawMessage(`{"todos":[{"content":"Write spec","id":"1","priority":"high","status":"pending"}]}`)},
			want: agent.ToolTodo, input: `{"todos":[{"id":"1","content":"Write spec","status":"pending","priority":"high"}]}`, meta: `{"providerTool":"todowrite"}`},
		{name: "OpenCode grep", agentName: "OpenCode", tool: tool{acpID: "t", kind: "search", firstTitle: "grep", title: "grep",
			rawInput: json.RawMessage(`{"include":"*.txt","pattern":"alpha"}`)},
			want: agent.ToolGrep, input: `{"pattern":"alpha","glob":"*.txt"}`},
		{name: "OpenCode read", agentName: "OpenCode", tool: tool{acpID: "t", kind: "read", firstTitle: "read", rawInput: json.RawMessage(`{"filePath":"/w/a","offset":3,"limit":10}`)},
			want: agent.ToolRead, input: `{"path":"/w/a","offset":3,"limit":10}`},
		{name: "another agent's title is never taken for a name", agentName: "other-agent",
			tool: tool{acpID: "t", kind: "other", firstTitle: "todowrite", rawInput: json.RawMessage(`{"x":1}`)},
			want: agent.ToolOther, input: `{"x":1}`, meta: `{"providerTool":"other"}`},
		{name: "an edit kind whose input is a whole file is a write", tool: tool{acpID: "call_2", kind: "edit",
			rawInput: json.RawMessage(`{"path":"/p/c.json","content":"{}"}`)},
			want: agent.ToolWrite, input: `{"path":"/p/c.json","content":"{}"}`, meta: `{"providerTool":"edit"}`},
		{name: "kind only: fetch", tool: tool{acpID: "f", kind: "fetch", rawInput: json.RawMessage(`{"url":"https://x.test"}`)},
			want: agent.ToolFetch, input: `{"url":"https://x.test"}`},
		{name: "kind only: switch_mode", tool: tool{acpID: "m", kind: "switch_mode", rawInput: json.RawMessage(`{"plan":"do it"}`)},
			want: agent.ToolPlan, input: `{"plan":"do it"}`},
		{name: "nothing known", tool: tool{acpID: "x", kind: "other", title: "x"}, want: agent.ToolOther, input: ``, meta: `{"providerTool":"other"}`},
		{name: "a raw input that is no object", tool: tool{acpID: "x", kind: "other", rawInput: json.RawMessage(`[1]`)},
			want: agent.ToolOther, input: `{"value":[1]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewDecoder()
			d.agentName = c.agentName
			tl := c.tool
			name, input, meta := d.canonical(&tl)
			if name != c.want || string(input) != c.input {
				t.Errorf("canonical = %s %s, want %s %s", name, input, c.want, c.input)
			}
			if c.meta != "" {
				// In canonical form (the transcript's): the agent's input is
				// kept as its text, in its own key order.
				if got, _ := mapper.EncodeObject(meta); string(got) != c.meta {
					t.Errorf("metadata %s, want %s", got, c.meta)
				}
			}
		})
	}
}

// Once the part's metadata has the agent's input, later announcements keep
// it current even when the input became the canonical one (the reducer
// merges metadata, so a left-out member would keep an old value).
func TestProviderInputStaysCurrent(t *testing.T) {
	d := NewDecoder()
	tl := &tool{acpID: "t", kind: "read", rawInput: json.RawMessage(`{"file_path":"/a"}`)}
	_, _, m1 := d.canonical(tl)
	tl.rawInput = json.RawMessage(`{"path":"/b"}`)
	_, in, m2 := d.canonical(tl)
	if m1[agent.MetaProviderInput] == nil || string(in) != `{"path":"/b"}` {
		t.Fatalf("first %v, then %s", m1, in)
	}
	if got, _ := json.Marshal(m2[agent.MetaProviderInput]); string(got) != `{"path":"/b"}` {
		t.Errorf("providerInput %s, want the current input", got)
	}
}

func TestRawOutputText(t *testing.T) {
	cases := []struct{ raw, want string }{
		{`"plain"`, "plain"},
		{`[{"type":"text","text":"a"},{"type":"image","data":"x"},{"type":"text","text":"b"}]`, "a\nb"},
		{`{"output":"oc","metadata":{"exit":0}}`, "oc"},
		{`{"aggregated_output":"agg","formatted_output":"fmt","stdout":"s"}`, "agg"},
		{`{"formatted_output":"fmt"}`, "fmt"},
		{`{"stdout":"o","stderr":"e"}`, "oe"},
		{`{"error":"boom"}`, "boom"},
		{`{"success":true}`, ""},
		{`42`, ""},
	}
	for _, c := range cases {
		if got := rawOutputText(json.RawMessage(c.raw)); got != c.want {
			t.Errorf("rawOutputText(%s) = %q, want %q", c.raw, got, c.want)
		}
	}
}

// codex-acp puts a command's output only in rawOutput: it becomes the
// tool's output, and a failed command's error.
func TestCodexACPOutput(t *testing.T) {
	evs := decodeAll(script(append(append([]string{}, opened...),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"c1","title":"List /w","kind":"search","status":"in_progress","rawInput":{"command":["/bin/bash","-lc","ls"],"cwd":"/w"}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"c1","status":"completed","rawOutput":{"aggregated_output":"a\nb\n","exit_code":0}}`),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"c2","title":"List /nope","kind":"search","status":"in_progress","rawInput":{"command":["/bin/bash","-lc","ls /nope"],"cwd":"/w"}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"c2","status":"failed","rawOutput":{"aggregated_output":"ls: no\n","exit_code":2}}`),
	)...))
	var out []string
	for _, e := range evs {
		switch e := e.(type) {
		case *agent.ToolCall:
			out = append(out, e.Tool+" "+string(e.Input))
		case *agent.ToolCompleted:
			out = append(out, "completed "+e.Output)
		case *agent.ToolFailed:
			out = append(out, "failed "+e.Error)
		}
	}
	want := []string{`bash {"command":"ls","cwd":"/w"}`, "completed a\nb\n", `bash {"command":"ls /nope","cwd":"/w"}`, "failed ls: no\n"}
	if strings.Join(out, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", out, want)
	}
}

// A permission request whose rawInput is not the tool's input (OpenCode
// sends the diff there) leaves the tool's input alone and keeps its own in
// the block's metadata; the permission's name is the canonical tool's.
func TestPermissionKeepsToolInput(t *testing.T) {
	evs := decodeAll(script(append(append([]string{}, opened...),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"e1","title":"edit","kind":"edit","status":"pending","rawInput":{}}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"e1","status":"in_progress","kind":"edit","title":"edit","locations":[{"path":"/w/a"}],"rawInput":{"filePath":"/w/a","oldString":"x","newString":"y"}}`),
		`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"e1","title":"/w/a","kind":"edit","rawInput":{"filepath":"/w/a","diff":"@@ -1 +1 @@\n-x\n+y\n"}},"options":[{"optionId":"once","name":"Allow","kind":"allow_once"}]}}`,
	)...))
	var blocked *agent.ToolBlocked
	for _, e := range evs {
		if b, ok := e.(*agent.ToolBlocked); ok {
			blocked = b
		}
	}
	if blocked == nil {
		t.Fatal("no ToolBlocked")
	}
	if blocked.Tool != agent.ToolEdit || string(blocked.Input) != `{"path":"/w/a","oldString":"x","newString":"y"}` ||
		blocked.Permission.Permission != agent.ToolEdit || strings.Join(blocked.Permission.Patterns, ",") != "/w/a" {
		t.Errorf("blocked %s %s %+v", blocked.Tool, blocked.Input, blocked.Permission)
	}
	if raw, _ := json.Marshal(blocked.Permission.Metadata["rawInput"]); !strings.Contains(string(raw), `"diff"`) {
		t.Errorf("the request's own input is not in the block's metadata: %s", raw)
	}
}

// FuzzCanonicalTool feeds arbitrary tool states to the mapping: it never
// panics, names a canonical tool and gives an object input (or none).
func FuzzCanonicalTool(f *testing.F) {
	f.Add("search", "List /w", "call_1", `{"command":["/bin/bash","-lc","ls"],"cwd":"/w"}`, "", "")
	f.Add("execute", "echo hi", "run_shell_command__run_shell_command_1_0", "", "[current working directory /w] (Print)", "")
	f.Add("edit", "Edit", "toolu_1", `{"file_path":"/a","old_string":"x"}`, "", "mcp__acp__Edit")
	f.Add("fetch", `Processing URLs and instructions from prompt: "see https://x.test"`, "web_fetch__web_fetch_1_0", "", "", "")
	f.Add("other", "todowrite", "t", `{"todos":[{"content":1}]}`, "", "")
	f.Add("think", "", "t", `{"questions":[{"options":[{}]}]}`, "", "AskUserQuestion")
	f.Fuzz(func(t *testing.T, kind, title, id, rawInput, text, metaTool string) {
		tl := &tool{acpID: id, kind: kind, title: title, firstTitle: title, metaTool: metaTool}
		if rawInput != "" && json.Valid([]byte(rawInput)) {
			tl.rawInput = json.RawMessage(rawInput)
		}
		tl.content = []toolContent{{Type: "content", Block: contentBlock{Type: "text", Text: text}}, {Type: "diff", Path: text, NewText: title}}
		tl.noteHints()
		d := NewDecoder()
		d.agentName = "OpenCode"
		name, input, _ := d.canonical(tl)
		if !agent.IsCanonicalTool(name) {
			t.Fatalf("tool %q is not canonical", name)
		}
		if input != nil && (!json.Valid(input) || input[0] != '{') {
			t.Fatalf("input %q is not an object", input)
		}
		_, _ = agent.ToolPatterns(name, input)
		_ = rawOutputText(tl.rawInput)
	})
}

// One rule covers a shell command whatever the agent calls it: codex-acp's
// `git status` arrives with kind search, Gemini CLI's and claude-code-acp's
// with kind execute; the permission is bash and the pattern the command.
func TestOneRuleForEveryShell(t *testing.T) {
	rules := []mapper.PermissionRule{{Permission: agent.ToolBash, Pattern: "git status*", Action: mapper.ActionAllow}}
	for _, tc := range []string{
		`{"toolCallId":"t1","title":"Search","kind":"search","rawInput":{"command":["/bin/bash","-lc","git status --short"],"cwd":"/w"}}`,
		`{"toolCallId":"run_shell_command__run_shell_command_1_0","title":"git status --short","kind":"execute"}`,
		`{"toolCallId":"t1","title":"` + "`git status --short`" + `","kind":"execute","rawInput":{"command":"git status --short"}}`,
	} {
		evs := decodeAll(script(append(append([]string{}, opened...),
			`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":`+tc+`,"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`)...))
		var p *agent.PermissionRequest
		for _, e := range evs {
			if b, ok := e.(*agent.ToolBlocked); ok {
				p = b.Permission
			}
		}
		if p == nil || p.Permission != agent.ToolBash || mapper.Evaluate(rules, p.Permission, p.Patterns) != mapper.ActionAllow {
			t.Errorf("%s: permission %+v", tc, p)
		}
	}
}

// A file tool's permission covers every file it touches: a move's two
// paths are both patterns, so a deny rule on either catches it.
func TestFilePermissionCoversEveryLocation(t *testing.T) {
	evs := decodeAll(script(append(append([]string{}, opened...),
		`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"m1","title":"Move a to /etc/a","kind":"move","locations":[{"path":"/w/a"},{"path":"/etc/a"}]},"options":[{"optionId":"a","name":"Allow","kind":"allow_once"}]}}`)...))
	for _, e := range evs {
		if b, ok := e.(*agent.ToolBlocked); ok {
			rules := []mapper.PermissionRule{{Permission: "*", Pattern: "*", Action: mapper.ActionAllow}, {Permission: agent.ToolEdit, Pattern: "/etc/*", Action: mapper.ActionDeny}}
			if b.Permission.Permission != agent.ToolEdit || strings.Join(b.Permission.Patterns, " ") != "/w/a /etc/a" ||
				mapper.Evaluate(rules, b.Permission.Permission, b.Permission.Patterns) != mapper.ActionDeny {
				t.Errorf("permission %+v", b.Permission)
			}
			return
		}
	}
	t.Fatal("no ToolBlocked")
}

// OpenCode reports its tool in_progress after asking for permission and
// before the answer: the tool is not running yet (the transcript's waits for
// a decision), so nothing is refused; it runs once answered.
func TestInProgressWhileAskingIsNotRunning(t *testing.T) {
	evs := decodeAll(script(append([]string{opened[0], opened[1],
		`> {"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"say hi"}]}}`},
		upd(`{"sessionUpdate":"tool_call","toolCallId":"b1","title":"bash","kind":"execute","status":"pending","rawInput":{}}`),
		`< {"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"b1","title":"echo hi","kind":"execute","rawInput":{"command":"echo hi"}},"options":[{"optionId":"once","name":"Allow","kind":"allow_once"}]}}`,
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"in_progress","kind":"execute","title":"echo hi","rawInput":{"command":"echo hi","description":"Say hi"}}`),
		`> {"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected","optionId":"once"}}}`,
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"in_progress"}`),
		upd(`{"sessionUpdate":"tool_call_update","toolCallId":"b1","status":"completed","rawOutput":{"output":"hi"}}`),
		`< {"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}`,
	)...))
	var order []string
	for _, e := range evs {
		switch e.(type) {
		case *agent.ToolBlocked, *agent.ToolResolved, *agent.ToolRunning, *agent.ToolCompleted:
			order = append(order, strings.TrimPrefix(fmt.Sprintf("%T", e), "*agent."))
		}
	}
	if got := strings.Join(order, " "); got != "ToolBlocked ToolResolved ToolRunning ToolCompleted" {
		t.Errorf("tool events %s", got)
	}
	tr, _ := reduce(t, "s", evs)
	if len(tr.Dropped) != 0 {
		t.Errorf("dropped: %+v", tr.Dropped)
	}
}

// TestGeminiPrechecks: what the cheap check before Gemini's content
// expression lets through (a text with the hint's beginning) is all it
// can match.
func TestGeminiPrechecks(t *testing.T) {
	for _, text := range []string{"[current working directory /tmp] (list files)", "[current working directory /a]",
		"[current working directory] x", "output", "", "[current working directory /x] (y) z"} {
		if geminiContent.MatchString(text) && !strings.HasPrefix(text, geminiContentPrefix) {
			t.Errorf("geminiContent matches %q without its prefix", text)
		}
	}
}
