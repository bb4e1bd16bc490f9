package agent

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestMCPToolNames(t *testing.T) {
	if got := MCPTool("github", "search_issues"); got != "mcp:github/search_issues" {
		t.Errorf("MCPTool = %q", got)
	}
	cases := []struct {
		name, server, tool string
		ok                 bool
	}{
		{"mcp:github/search_issues", "github", "search_issues", true},
		{"mcp:a/b/c", "a", "b/c", true},
		{"mcp:/t", "", "t", true},
		{"mcp:noslash", "", "", false},
		{"bash", "", "", false},
	}
	for _, c := range cases {
		s, tl, ok := ParseMCPTool(c.name)
		if s != c.server || tl != c.tool || ok != c.ok {
			t.Errorf("ParseMCPTool(%q) = %q %q %v", c.name, s, tl, ok)
		}
	}
	for _, name := range []string{ToolBash, ToolRead, ToolWrite, ToolEdit, ToolGlob, ToolGrep, ToolFetch, ToolSearch,
		ToolTask, ToolTodo, ToolQuestion, ToolPlan, ToolOther, "mcp:x/y"} {
		if !IsCanonicalTool(name) {
			t.Errorf("%q is not canonical", name)
		}
	}
	for _, name := range []string{"", "Bash", "execute", "todowrite", "webfetch", "mcp:x"} {
		if IsCanonicalTool(name) {
			t.Errorf("%q is canonical", name)
		}
	}
}

func TestToolPatterns(t *testing.T) {
	cases := []struct {
		tool, input string
		want        []string
		ok          bool
	}{
		{ToolBash, `{"command":"git status","cwd":"/w"}`, []string{"git status"}, true},
		{ToolRead, `{"path":"/w/a"}`, []string{"/w/a"}, true},
		{ToolWrite, `{"path":"/w/a","content":"x"}`, []string{"/w/a"}, true},
		{ToolEdit, `{"path":"/w/a","oldString":"x"}`, []string{"/w/a"}, true},
		{ToolGlob, `{"pattern":"*.go","path":"/w"}`, []string{"*.go"}, true},
		{ToolGrep, `{"pattern":"TODO"}`, []string{"TODO"}, true},
		{ToolFetch, `{"url":"https://x.test"}`, []string{"https://x.test"}, true},
		{ToolSearch, `{"query":"go"}`, []string{"go"}, true},
		{ToolTask, `{"agent":"explore"}`, []string{"explore"}, true},
		{"mcp:docs/search", `{"q":1}`, []string{"*"}, true},
		{ToolBash, `{}`, nil, false},
		{ToolBash, `{"command":7}`, nil, false},
		{ToolRead, `[`, nil, false},
		{ToolTodo, `{"todos":[]}`, nil, false},
		{ToolOther, `{"path":"/a"}`, nil, false},
	}
	for _, c := range cases {
		got, ok := ToolPatterns(c.tool, json.RawMessage(c.input))
		if !reflect.DeepEqual(got, c.want) || ok != c.ok {
			t.Errorf("ToolPatterns(%s, %s) = %q %v, want %q %v", c.tool, c.input, got, ok, c.want, c.ok)
		}
	}
}

func TestToolMetadata(t *testing.T) {
	cases := []struct {
		name, tool, provider, input string
		want                        string
	}{
		{"same input", "Bash", `{"command":"ls"}`, `{"command":"ls"}`, `{"providerTool":"Bash"}`},
		{"same input, other order and spacing", "x", `{ "b":1, "a":"2" }`, `{"a":"2","b":1}`, `{"providerTool":"x"}`},
		{"a number's spelling counts", "x", `{"n":1.0}`, `{"n":1}`, `{"providerInput":{"n":1.0},"providerTool":"x"}`},
		{"other input", "Read", `{"file_path":"/a"}`, `{"path":"/a"}`, `{"providerInput":{"file_path":"/a"},"providerTool":"Read"}`},
		{"not JSON", "x", `{"a":`, `{}`, `{"providerInput":"{\"a\":","providerTool":"x"}`},
		{"no provider input", "x", ``, `{}`, `{"providerTool":"x"}`},
		{"null", "x", `null`, `{}`, `{"providerTool":"x"}`},
		{"no tool name", "", `{"a":1}`, `{}`, `{"providerInput":{"a":1}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := json.Marshal(ToolMetadata(c.tool, json.RawMessage(c.provider), json.RawMessage(c.input)))
			if string(got) != c.want {
				t.Errorf("ToolMetadata = %s, want %s", got, c.want)
			}
		})
	}
}

func TestEncodeInput(t *testing.T) {
	ten := int64(10)
	empty := ""
	cases := []struct {
		v    any
		want string
	}{
		{BashInput{Command: "a > b && c", Timeout: &ten}, `{"command":"a > b && c","timeout":10}`},
		{WriteInput{Path: "/a", Content: &empty}, `{"path":"/a","content":""}`},
		{EditInput{Path: "/a"}, `{"path":"/a"}`},
		{TodoInput{}, `{"todos":null}`},
		{QuestionInput{Questions: []QuestionInfo{}}, `{"questions":[]}`},
		{[]int{1}, `{}`},
		{make(chan int), `{}`},
	}
	for _, c := range cases {
		if got := EncodeInput(c.v); string(got) != c.want {
			t.Errorf("EncodeInput(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}

func FuzzToolMetadata(f *testing.F) {
	f.Add("bash", `{"command":"ls"}`, `{"command":"ls"}`)
	f.Add("read", `{"file_path":"/a","offset":1e3}`, `{"path":"/a"}`)
	f.Add("mcp:a/b", `[1,2`, `{}`)
	f.Fuzz(func(t *testing.T, tool, provider, input string) {
		m := ToolMetadata(tool, json.RawMessage(provider), json.RawMessage(input))
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("metadata does not encode: %v", err)
		}
		if p, ok := ToolPatterns(tool, json.RawMessage(input)); ok && (len(p) != 1 || p[0] == "") {
			t.Fatalf("patterns %q", p)
		}
		_ = IsCanonicalTool(tool)
		if s, tl, ok := ParseMCPTool(tool); ok && MCPTool(s, tl) != tool {
			t.Fatalf("MCPTool(ParseMCPTool(%q)) = %q", tool, MCPTool(s, tl))
		}
	})
}
