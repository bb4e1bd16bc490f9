package codex

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
)

func TestUnwrapShell(t *testing.T) {
	cases := []struct{ in, want string }{
		{`/bin/bash -lc 'echo hi > hi.txt'`, `echo hi > hi.txt`},
		{`/bin/bash -lc ls`, `ls`},
		{`bash -c "git status"`, `git status`},
		{`zsh -lc 'echo '"'"'hi →'"'"''`, `echo 'hi →'`},
		{`sh -c "a \"b\" \$c"`, `a "b" $c`},
		{`bash -lc 'a' extra`, `bash -lc 'a' extra`},     // more than one script word
		{`bash -x 'ls'`, `bash -x 'ls'`},                 // not -c
		{`python -c 'print(1)'`, `python -c 'print(1)'`}, // not a shell
		{`bash -lc 'open`, `bash -lc 'open`},             // an open quote: unchanged
		{`ls -l`, `ls -l`},
		{``, ``},
	}
	for _, c := range cases {
		if got := unwrapShell(c.in); got != c.want {
			t.Errorf("unwrapShell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestShellCall(t *testing.T) {
	cases := []struct {
		name, tool, command, wrapped, cwd string
		input                             string
		meta                              agent.Object
	}{
		{"wrapped", "commandExecution", "echo hi", "/bin/bash -lc 'echo hi'", "/w", `{"command":"echo hi","cwd":"/w"}`,
			agent.Object{"providerTool": "commandExecution", "providerInput": map[string]any{"command": "/bin/bash -lc 'echo hi'", "cwd": "/w"},
				"rawCommand": "/bin/bash -lc 'echo hi'"}},
		{"plain", "exec_command", "ls", "", "", `{"command":"ls"}`, agent.Object{"providerTool": "exec_command"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, meta := shellCall(c.tool, c.command, c.wrapped, c.cwd)
			if string(in) != c.input || !reflect.DeepEqual(meta, c.meta) {
				t.Errorf("shellCall = %s %v, want %s %v", in, meta, c.input, c.meta)
			}
		})
	}
}

func TestPatchTool(t *testing.T) {
	kind := func(k string) json.RawMessage { return json.RawMessage(`{"type":"` + k + `"}`) }
	cases := []struct {
		name    string
		changes []fileUpdate
		tool    string
		input   string
	}{
		{"one added file (added lines)", []fileUpdate{{Path: "/w/n.txt", Kind: kind("add"), Diff: "+x\n+y\n"}},
			agent.ToolWrite, `{"path":"/w/n.txt","content":"x\ny\n"}`},
		{"one added file (content)", []fileUpdate{{Path: "/w/n.txt", Kind: json.RawMessage(`"add"`), Diff: "x\n"}},
			agent.ToolWrite, `{"path":"/w/n.txt","content":"x\n"}`},
		{"one hunk", []fileUpdate{{Path: "/w/a.txt", Kind: kind("update"), Diff: "@@ -1,2 +1,2 @@\n keep\n-old\n+new\n"}},
			agent.ToolEdit, `{"path":"/w/a.txt","oldString":"keep\nold\n","newString":"keep\nnew\n","diff":"@@ -1,2 +1,2 @@\n keep\n-old\n+new\n"}`},
		{"two hunks: the diff only", []fileUpdate{{Path: "/w/a.txt", Kind: kind("update"), Diff: "@@ -1 +1 @@\n-a\n+b\n@@ -9 +9 @@\n-c\n+d\n"}},
			agent.ToolEdit, `{"path":"/w/a.txt","diff":"@@ -1 +1 @@\n-a\n+b\n@@ -9 +9 @@\n-c\n+d\n"}`},
		{"a deleted file", []fileUpdate{{Path: "/w/a.txt", Kind: kind("delete"), Diff: "-a\n"}},
			agent.ToolEdit, `{"path":"/w/a.txt","diff":"-a\n"}`},
		{"two files", []fileUpdate{{Path: "/w/a.txt", Kind: kind("update"), Diff: "@@ -1 +1 @@\n-a\n+b"}, {Path: "/w/b.txt", Kind: kind("add"), Diff: "+c\n"}},
			agent.ToolEdit, `{"path":"/w/a.txt","diff":"@@ -1 +1 @@\n-a\n+b\n+c\n"}`},
		{"nothing", nil, agent.ToolEdit, `{}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool, in := patchTool(c.changes)
			if tool != c.tool || string(in) != c.input {
				t.Errorf("patchTool = %s %s, want %s %s", tool, in, c.tool, c.input)
			}
		})
	}
}

func TestOneHunk(t *testing.T) {
	cases := []struct {
		diff, old, new string
		ok             bool
	}{
		{"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n", "a\n", "b\n", true},
		{"@@ -1,3 +1,3 @@\n x\n-y\n+z\n w\n", "x\ny\nw\n", "x\nz\nw\n", true},
		{"@@\n-a\n@@\n-b\n", "", "", false}, // two hunks
		{"-a\n+b\n", "", "", false},         // no hunk header
		{"@@ -1 +1 @@\n?a\n", "", "", false},
		{"", "", "", false},
	}
	for _, c := range cases {
		old, new, ok := oneHunk(c.diff)
		if old != c.old || new != c.new || ok != c.ok {
			t.Errorf("oneHunk(%q) = %q %q %v, want %q %q %v", c.diff, old, new, ok, c.old, c.new, c.ok)
		}
	}
}

func TestApplyPatchUpdates(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** Update File: b.txt\n*** Move to: c.txt\n@@ def f\n-x\n+y\n*** Delete File: d.txt\n*** Update File: e.txt\n-p\n+q\n*** End of File\n*** End Patch\n"
	got := applyPatchUpdates(patch)
	want := []fileUpdate{
		{Path: "a.txt", Kind: json.RawMessage(`{"type":"add"}`), Diff: "+hello\n"},
		{Path: "b.txt", Kind: json.RawMessage(`{"move_path":"c.txt","type":"update"}`), Diff: "@@ def f\n-x\n+y\n"},
		{Path: "d.txt", Kind: json.RawMessage(`{"type":"delete"}`)},
		{Path: "e.txt", Kind: json.RawMessage(`{"type":"update"}`), Diff: "@@\n-p\n+q\n"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("updates:\n%+v\nwant:\n%+v", got, want)
	}
	if got := applyPatchUpdates("just some text"); len(got) != 0 {
		t.Errorf("text that is no patch: %+v", got)
	}
	tool, in := patchTool(applyPatchUpdates("*** Begin Patch\n*** Update File: e.txt\n@@\n-p\n+q\n*** End Patch"))
	if tool != agent.ToolEdit || string(in) != `{"path":"e.txt","oldString":"p\n","newString":"q\n","diff":"@@\n-p\n+q\n"}` {
		t.Errorf("apply_patch edit: %s %s", tool, in)
	}
}

func TestRolloutTools(t *testing.T) {
	cases := []struct {
		typ, name, args, text string
		tool, title, input    string
		meta                  agent.Object
		shell                 bool
	}{
		{"function_call", "exec_command", `{"cmd":"ls","workdir":"/w"}`, "", agent.ToolBash, "ls", `{"command":"ls","cwd":"/w"}`,
			agent.Object{"providerTool": "exec_command", "providerInput": map[string]any{"cmd": "ls", "workdir": "/w"}}, true},
		{"function_call", "shell", `{"command":["bash","-lc","git status"]}`, "", agent.ToolBash, "git status", `{"command":"git status"}`,
			agent.Object{"providerTool": "shell", "providerInput": map[string]any{"command": []any{"bash", "-lc", "git status"}}}, true},
		{"function_call", "web_search", `{"query":"go"}`, "", agent.ToolSearch, "web_search", `{"query":"go"}`,
			agent.Object{"providerTool": "web_search"}, false},
		{"function_call", "view_image", `{"path":"/w/a.png"}`, "", agent.ToolRead, "view_image", `{"path":"/w/a.png"}`,
			agent.Object{"providerTool": "view_image"}, false},
		{"function_call", "update_plan", `{"plan":[{"step":"a","status":"in_progress"}]}`, "", agent.ToolTodo, "update_plan",
			`{"todos":[{"content":"a","status":"in_progress"}]}`,
			agent.Object{"providerTool": "update_plan", "providerInput": map[string]any{"plan": []any{map[string]any{"step": "a", "status": "in_progress"}}}}, false},
		{"function_call", "request_user_input", `{"questions":[{"header":"H","question":"Q?","options":[{"label":"y","description":"yes"}]}]}`, "", agent.ToolQuestion, "request_user_input",
			`{"questions":[{"question":"Q?","header":"H","options":[{"label":"y","description":"yes"}]}]}`,
			agent.Object{"providerTool": "request_user_input"}, false}, // the same input: no providerInput
		{"function_call", "mcp__docs__search", `{"q":"x"}`, "", "mcp:docs/search", "mcp__docs__search", `{"q":"x"}`,
			agent.Object{"providerTool": "mcp__docs__search"}, false},
		{"function_call", "get_goal", `{}`, "", agent.ToolOther, "get_goal", `{}`, agent.Object{"providerTool": "get_goal"}, false},
		{"custom_tool_call", "apply_patch", "", "*** Begin Patch\n*** Add File: n.txt\n+x\n*** End Patch\n", agent.ToolWrite, "apply_patch",
			`{"path":"n.txt","content":"x\n"}`,
			agent.Object{"providerTool": "apply_patch", "providerInput": map[string]any{"input": "*** Begin Patch\n*** Add File: n.txt\n+x\n*** End Patch\n"}}, false},
		{"custom_tool_call", "js", "", "1+1", agent.ToolOther, "js", `{"input":"1+1"}`, agent.Object{"providerTool": "js"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool, title, in, meta, shell := toolOf(c.typ, c.name, c.args, c.text, nil)
			if tool != c.tool || title != c.title || string(in) != c.input || shell != c.shell {
				t.Errorf("toolOf = %s %q %s %v, want %s %q %s %v", tool, title, in, shell, c.tool, c.title, c.input, c.shell)
			}
			if !reflect.DeepEqual(normal(meta), normal(c.meta)) {
				t.Errorf("meta %v, want %v", meta, c.meta)
			}
		})
	}
}

// normal renders a metadata object as JSON text, so that json.Number and
// plain values compare.
func normal(o agent.Object) string {
	b, _ := json.Marshal(o)
	return string(b)
}

func FuzzCodexTools(f *testing.F) {
	f.Add("*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n*** End Patch", "bash -lc 'echo hi'")
	f.Add("@@ -1 +1 @@\n-a\n+b\n", `sh -c "a \"b\""`)
	f.Add("*** Add File: \n+", `'`)
	f.Fuzz(func(t *testing.T, patch, cmd string) {
		_ = unwrapShell(cmd)
		ups := applyPatchUpdates(patch)
		ups = append(ups, fileUpdate{Path: "p", Kind: json.RawMessage(`{"type":"update"}`), Diff: patch})
		for i := range ups {
			tool, in := patchTool(ups[i : i+1])
			if (tool != agent.ToolEdit && tool != agent.ToolWrite) || !json.Valid(in) || in[0] != '{' {
				t.Fatalf("patchTool = %s %s", tool, in)
			}
		}
		if _, in := patchTool(ups); !json.Valid(in) {
			t.Fatalf("patchTool of all: %s", in)
		}
		if in, _ := shellCall("x", cmd, "", ""); !json.Valid(in) {
			t.Fatalf("shellCall: %s", in)
		}
	})
}
