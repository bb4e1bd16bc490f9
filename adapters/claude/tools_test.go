package claude

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// Every Claude tool maps to its canonical name, input, metadata and
// permission patterns (docs/ARCHITECTURE.md, section "Tools").
func TestCanonicalTools(t *testing.T) {
	cases := []struct {
		name, input string
		tool        string
		canonical   string
		meta        string // the part metadata, as JSON
		patterns    string
	}{
		{"Bash", `{"command":"git status","description":"Status","timeout":60000,"run_in_background":false}`, agent.ToolBash,
			`{"command":"git status","description":"Status","timeout":60000}`,
			`{"providerInput":{"command":"git status","description":"Status","run_in_background":false,"timeout":60000},"providerTool":"Bash"}`, "[git status]"},
		{"Bash", `{"command":"echo a > b"}`, agent.ToolBash, `{"command":"echo a > b"}`, `{"providerTool":"Bash"}`, "[echo a > b]"},
		{"Read", `{"file_path":"/w/a.go","offset":10,"limit":5}`, agent.ToolRead, `{"path":"/w/a.go","offset":10,"limit":5}`,
			`{"providerInput":{"file_path":"/w/a.go","limit":5,"offset":10},"providerTool":"Read"}`, "[/w/a.go]"},
		{"Write", `{"file_path":"/w/a.txt","content":""}`, agent.ToolWrite, `{"path":"/w/a.txt","content":""}`,
			`{"providerInput":{"content":"","file_path":"/w/a.txt"},"providerTool":"Write"}`, "[/w/a.txt]"},
		{"Edit", `{"file_path":"/w/a.go","old_string":"a","new_string":"b","replace_all":true}`, agent.ToolEdit,
			`{"path":"/w/a.go","oldString":"a","newString":"b","replaceAll":true}`,
			`{"providerInput":{"file_path":"/w/a.go","new_string":"b","old_string":"a","replace_all":true},"providerTool":"Edit"}`, "[/w/a.go]"},
		{"MultiEdit", `{"file_path":"/w/a.go","edits":[{"old_string":"a","new_string":"b"}]}`, agent.ToolEdit,
			`{"path":"/w/a.go","oldString":"a","newString":"b"}`,
			`{"providerInput":{"edits":[{"new_string":"b","old_string":"a"}],"file_path":"/w/a.go"},"providerTool":"MultiEdit"}`, "[/w/a.go]"},
		{"MultiEdit", `{"file_path":"/w/a.go","edits":[{"old_string":"a","new_string":"b"},{"old_string":"c","new_string":"d"}]}`, agent.ToolEdit,
			`{"path":"/w/a.go"}`, ``, "[/w/a.go]"},
		{"NotebookEdit", `{"notebook_path":"/w/n.ipynb","new_source":"x = 1"}`, agent.ToolEdit, `{"path":"/w/n.ipynb","newString":"x = 1"}`, ``, "[/w/n.ipynb]"},
		{"Glob", `{"pattern":"**/*.go","path":"/w"}`, agent.ToolGlob, `{"pattern":"**/*.go","path":"/w"}`, `{"providerTool":"Glob"}`, "[**/*.go]"},
		{"LS", `{"path":"/w"}`, agent.ToolGlob, `{"pattern":"*","path":"/w"}`, ``, "[*]"},
		{"Grep", `{"pattern":"TODO","path":"/w","glob":"*.go","output_mode":"content"}`, agent.ToolGrep, `{"pattern":"TODO","path":"/w","glob":"*.go"}`, ``, "[TODO]"},
		{"WebFetch", `{"url":"https://x.test","prompt":"sum"}`, agent.ToolFetch, `{"url":"https://x.test","prompt":"sum"}`, `{"providerTool":"WebFetch"}`, "[https://x.test]"},
		{"WebSearch", `{"query":"go","allowed_domains":["go.dev"]}`, agent.ToolSearch, `{"query":"go"}`, ``, "[go]"},
		{"web_search", `{"query":"go"}`, agent.ToolSearch, `{"query":"go"}`, `{"providerTool":"web_search"}`, "[go]"},
		{"Task", `{"description":"Look","prompt":"look","subagent_type":"Explore"}`, agent.ToolTask, `{"description":"Look","prompt":"look","agent":"Explore"}`, ``, "[Explore]"},
		{"Agent", `{"description":"Look","prompt":"look"}`, agent.ToolTask, `{"description":"Look","prompt":"look"}`, `{"providerTool":"Agent"}`, "[Agent]"},
		{"TodoWrite", `{"todos":[{"content":"a","status":"pending","activeForm":"Doing a"}]}`, agent.ToolTodo, `{"todos":[{"content":"a","status":"pending"}]}`, ``, "[TodoWrite]"},
		{"TaskCreate", `{"subject":"a","description":"d"}`, agent.ToolTodo, `{"todos":[{"content":"a","status":"pending"}]}`, ``, "[TaskCreate]"},
		{"TaskUpdate", `{"taskId":"3","status":"deleted"}`, agent.ToolTodo, `{"todos":[{"id":"3","status":"cancelled"}]}`, ``, "[TaskUpdate]"},
		{"TaskList", `{}`, agent.ToolTodo, `{"todos":[]}`, ``, "[TaskList]"},
		{"AskUserQuestion", `{"questions":[{"question":"Q?","header":"H","multiSelect":true,"options":[{"label":"a","description":"d"}]}]}`, agent.ToolQuestion,
			`{"questions":[{"question":"Q?","header":"H","options":[{"label":"a","description":"d"}],"multiple":true}]}`, ``, "[AskUserQuestion]"},
		{"ExitPlanMode", `{"plan":"1. do it"}`, agent.ToolPlan, `{"plan":"1. do it"}`, `{"providerTool":"ExitPlanMode"}`, "[ExitPlanMode]"},
		{"mcp__github__search_issues", `{"q":"bug"}`, "mcp:github/search_issues", `{"q":"bug"}`, `{"providerTool":"mcp__github__search_issues"}`, "[*]"},
		{"mcp__broken", `{"q":"bug"}`, agent.ToolOther, `{"q":"bug"}`, ``, "[mcp__broken]"},
		{"Skill", `{"skill":"pdf"}`, agent.ToolOther, `{"skill":"pdf"}`, `{"providerTool":"Skill"}`, "[Skill pdf]"},
		{"BashOutput", `{"bash_id":"1"}`, agent.ToolOther, `{"bash_id":"1"}`, ``, "[BashOutput]"},
		// The model's input can be anything: wrong types are left out.
		{"Bash", `{"command":7,"timeout":"soon"}`, agent.ToolBash, `{}`, ``, "[Bash]"},
		{"Read", `[]`, agent.ToolRead, `{}`, ``, "[Read]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := json.RawMessage(c.input)
			if got := canonicalTool(c.name); got != c.tool {
				t.Errorf("tool %q, want %q", got, c.tool)
			}
			if got := canonicalInput(c.name, raw); string(got) != c.canonical {
				t.Errorf("input %s, want %s", got, c.canonical)
			}
			if c.meta != "" {
				if got, _ := json.Marshal(toolMeta(c.name, raw)); string(got) != c.meta {
					t.Errorf("metadata %s, want %s", got, c.meta)
				}
			}
			if got := toolPatterns(c.name, raw); "["+strings.Join(got, " ")+"]" != c.patterns {
				t.Errorf("patterns %q, want %s", got, c.patterns)
			}
			if pr := permissionRequest("r", c.name, raw, nil); pr.Permission != c.tool {
				t.Errorf("permission %q, want the tool's name %q", pr.Permission, c.tool)
			}
		})
	}
	if canonicalInput("Bash", nil) != nil {
		t.Error("an input not known yet must stay nil")
	}
}

func FuzzCanonicalInput(f *testing.F) {
	for name := range canonicalTools {
		f.Add(name, `{"command":"ls","file_path":"/a","todos":[{"content":"x"}],"questions":[{"question":"q"}],"edits":[{}]}`)
	}
	f.Add("mcp__a__b", `{"x":1}`)
	f.Add("Read", `{"offset":1.5,"limit":-1}`)
	f.Add("Edit", `[`)
	f.Fuzz(func(t *testing.T, name, input string) {
		in := canonicalInput(name, json.RawMessage(input))
		if !json.Valid(in) || in[0] != '{' {
			t.Fatalf("input %q of %s is not an object", in, name)
		}
		if tool := canonicalTool(name); !agent.IsCanonicalTool(tool) {
			t.Fatalf("tool %q is not canonical", tool)
		}
		_ = toolMeta(name, json.RawMessage(input))
		_ = toolPatterns(name, json.RawMessage(input))
	})
}

// The rule bash:git status* covers Claude's Bash: the permission is the
// canonical tool's name and the pattern the command.
func TestBashRule(t *testing.T) {
	rules := []mapper.PermissionRule{{Permission: agent.ToolBash, Pattern: "git status*", Action: mapper.ActionAllow}}
	p := permissionRequest("r1", "Bash", json.RawMessage(`{"command":"git status --short"}`), nil)
	if got := mapper.Evaluate(rules, p.Permission, p.Patterns); got != mapper.ActionAllow {
		t.Errorf("%+v: %s", p, got)
	}
}
