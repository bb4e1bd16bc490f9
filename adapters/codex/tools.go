package codex

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// This file maps Codex's tools to the canonical vocabulary
// (docs/ARCHITECTURE.md, section "Tools"), for all three decoders:
//
//	app-server item      MCP event            rollout function      canonical
//	commandExecution     exec_command_*       shell, exec_command,  bash {command, cwd}
//	                                          local_shell, …
//	fileChange           patch_apply_*        apply_patch           write {path, content} (one added file),
//	                                                                else edit {path, diff, oldString?, newString?}
//	mcpToolCall          mcp_tool_call_*      mcp__<server>__<tool> mcp:<server>/<tool> (its arguments)
//	webSearch            web_search_*         web_search            search {query}
//	imageView            view_image_tool_call view_image            read {path}
//	collabAgentToolCall  —                    —                     task {prompt}
//	—                    —                    update_plan           todo {todos}
//	—                    —                    request_user_input    question {questions}
//	dynamicToolCall, sleep, imageGeneration, any other function     other (Codex's input)
//
// The command of a shell tool is what the user would type: Codex's
// "/bin/bash -lc '<script>'" wrapper is taken off (unwrapShell) and kept,
// with the rest of Codex's input, in the part's metadata (providerInput).

// unwrapShell returns the command a person would type for a command line
// Codex reports as one string (UserCommand, command.go): the script of a
// shell wrapper, else cmd unchanged.
func unwrapShell(cmd string) string {
	raw, _ := json.Marshal(cmd)
	if c, _ := UserCommand(raw); c != "" {
		return c
	}
	return cmd
}

// shellCall is a command Codex runs: the canonical input (cmd, what a
// person would type, see UserCommand) and the part metadata (Codex's name
// of the tool, its own input when the canonical one differs, and the
// wrapped command as Codex gave it, rawCommand, when it was unwrapped).
func shellCall(providerTool, cmd, wrapped, cwd string) (json.RawMessage, agent.Object) {
	given := cmd
	if wrapped != "" {
		given = wrapped
	}
	input := agent.EncodeInput(agent.BashInput{Command: cmd, Cwd: cwd})
	meta := shellMeta(providerTool, given, cwd, input)
	if wrapped != "" {
		meta["rawCommand"] = wrapped
	}
	return input, meta
}

// shellMeta is agent.ToolMetadata of a shell call whose input Codex gave
// as {command: given, cwd?}.
func shellMeta(providerTool, given, cwd string, input json.RawMessage) agent.Object {
	raw := map[string]any{"command": given}
	if cwd != "" {
		raw["cwd"] = cwd
	}
	return agent.ToolMetadata(providerTool, agent.EncodeInput(raw), input)
}

// patchTool maps the file changes of a patch (one fileChange item, one
// patch_apply event, one apply_patch call) to a canonical tool and input:
// a single added file is write {path, content}; anything else is edit
// {path, diff} with the first file's path and every file's diff (the paths
// are the permission's patterns), plus oldString and newString when the
// patch is one hunk of one file.
func patchTool(changes []fileUpdate) (string, json.RawMessage) {
	if len(changes) == 0 {
		return agent.ToolEdit, agent.EncodeInput(agent.EditInput{})
	}
	first := changes[0]
	if len(changes) == 1 && changeKind(first.Kind) == "add" {
		content := addedContent(first.Diff)
		return agent.ToolWrite, agent.EncodeInput(agent.WriteInput{Path: first.Path, Content: &content})
	}
	var diff strings.Builder
	for _, ch := range changes {
		if ch.Diff == "" {
			continue
		}
		if diff.Len() > 0 && !strings.HasSuffix(diff.String(), "\n") {
			diff.WriteByte('\n')
		}
		diff.WriteString(ch.Diff)
	}
	in := agent.EditInput{Path: first.Path, Diff: diff.String()}
	if len(changes) == 1 && changeKind(first.Kind) == "update" {
		if old, new, ok := oneHunk(first.Diff); ok {
			in.OldString, in.NewString = &old, &new
		}
	}
	return agent.ToolEdit, agent.EncodeInput(in)
}

// changeKind reads a change's kind: {"type": "add"} or "add".
func changeKind(raw json.RawMessage) string {
	var k struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(raw, &k) == nil && k.Type != "" {
		return k.Type
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// addedContent is the content of an added file from its diff: every line
// starts with "+" (an added-lines diff, as the MCP decoder renders one)
// or the diff is the content itself, as app-server sends it.
func addedContent(diff string) string {
	lines := strings.SplitAfter(diff, "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		rest, ok := strings.CutPrefix(l, "+")
		if !ok {
			return diff
		}
		b.WriteString(rest)
	}
	return b.String()
}

// oneHunk returns the two sides of a unified diff with exactly one hunk:
// context and removed lines, context and added lines, without the
// diff's line prefixes. ok is false for no hunk, several hunks, or a line
// that is not part of a hunk ("\ No newline at end of file" is skipped).
func oneHunk(diff string) (old, new string, ok bool) {
	var o, n strings.Builder
	hunks := 0
	for _, l := range strings.SplitAfter(diff, "\n") {
		switch {
		case l == "":
		case strings.HasPrefix(l, "@@"):
			hunks++
		case strings.HasPrefix(l, "---") && hunks == 0, strings.HasPrefix(l, "+++") && hunks == 0:
		case strings.HasPrefix(l, `\`):
		case hunks == 0:
			return "", "", false
		case l[0] == ' ':
			o.WriteString(l[1:])
			n.WriteString(l[1:])
		case l[0] == '-':
			o.WriteString(l[1:])
		case l[0] == '+':
			n.WriteString(l[1:])
		default:
			return "", "", false
		}
	}
	if hunks != 1 {
		return "", "", false
	}
	return o.String(), n.String(), true
}

// mcpToolName is the canonical name of an MCP server's tool.
func mcpToolName(server, tool string) string { return agent.MCPTool(server, tool) }

// rolloutTool maps a function a rollout's model called (a non-shell one:
// shell tools are mapped by toolOf) to a canonical tool and input: MCP
// tools (mcp__<server>__<tool>), web_search, view_image,
// request_user_input and update_plan have a canonical form, anything else
// is other with the function's arguments.
func rolloutTool(name string, args json.RawMessage) (string, json.RawMessage) {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if server, tool, ok := strings.Cut(rest, "__"); ok && server != "" && tool != "" {
			return mcpToolName(server, tool), objectOrEmpty(args)
		}
	}
	var a struct {
		Query string `json:"query"`
		Path  string `json:"path"`
		Plan  []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
		} `json:"plan"`
		Questions []struct {
			Header   string `json:"header"`
			Question string `json:"question"`
			Options  []struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			} `json:"options"`
		} `json:"questions"`
	}
	if len(args) > 0 && args[0] == '{' {
		_ = json.Unmarshal(args, &a)
	}
	switch name {
	case "web_search":
		return agent.ToolSearch, agent.EncodeInput(agent.SearchInput{Query: a.Query})
	case "view_image":
		return agent.ToolRead, agent.EncodeInput(agent.ReadInput{Path: a.Path})
	case "update_plan":
		items := make([]agent.TodoItem, 0, len(a.Plan))
		for _, s := range a.Plan {
			items = append(items, agent.TodoItem{Content: s.Step, Status: todoStatus(s.Status)})
		}
		return agent.ToolTodo, agent.EncodeInput(agent.TodoInput{Todos: items})
	case "request_user_input":
		qs := make([]agent.QuestionInfo, 0, len(a.Questions))
		for _, q := range a.Questions {
			info := agent.QuestionInfo{Question: q.Question, Header: q.Header, Options: []agent.QuestionOption{}}
			for _, o := range q.Options {
				info.Options = append(info.Options, agent.QuestionOption{Label: o.Label, Description: o.Description})
			}
			qs = append(qs, info)
		}
		return agent.ToolQuestion, agent.EncodeInput(agent.QuestionInput{Questions: qs})
	}
	return agent.ToolOther, objectOrEmpty(args)
}

// objectOrEmpty is objectOr, with {} for nothing at all.
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	if o := objectOr(raw); o != nil {
		return o
	}
	return json.RawMessage(`{}`)
}

// mergeMeta returns a's members and then b's in a new object, nil when
// both are empty.
func mergeMeta(a, b agent.Object) agent.Object {
	if len(a)+len(b) == 0 {
		return nil
	}
	out := make(agent.Object, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// newMembers reports whether next has a member that is absent from, or
// another value than in, had.
func newMembers(had, next agent.Object) bool {
	for k, v := range next {
		if w, ok := had[k]; !ok || !reflect.DeepEqual(v, w) {
			return true
		}
	}
	return false
}

// applyPatchUpdates reads the patch text of Codex's apply_patch tool
// ("*** Begin Patch", then per file "*** Add File: <path>" with "+" lines,
// "*** Delete File: <path>", or "*** Update File: <path>" with an optional
// "*** Move to: <path>" and "@@" hunks, then "*** End Patch") as file
// updates in the patch's order. A section that is not one of these is left
// out; text that is no patch at all gives none.
func applyPatchUpdates(text string) []fileUpdate {
	var ups []fileUpdate
	var cur *fileUpdate
	var body strings.Builder
	flush := func() {
		if cur == nil {
			return
		}
		cur.Diff = body.String()
		if changeKind(cur.Kind) == "update" && cur.Diff != "" && !strings.HasPrefix(cur.Diff, "@@") {
			cur.Diff = "@@\n" + cur.Diff // the first hunk may come without its header
		}
		ups = append(ups, *cur)
		cur = nil
		body.Reset()
	}
	for _, l := range strings.SplitAfter(text, "\n") {
		line := strings.TrimRight(l, "\r\n")
		header := func(prefix, kind string) bool {
			p, ok := strings.CutPrefix(line, prefix)
			if !ok {
				return false
			}
			flush()
			cur = &fileUpdate{Path: strings.TrimSpace(p), Kind: mustObject(map[string]string{"type": kind})}
			return true
		}
		switch {
		case header("*** Add File: ", "add"), header("*** Delete File: ", "delete"), header("*** Update File: ", "update"):
		case line == "*** Begin Patch", line == "*** End of File":
		case line == "*** End Patch":
			flush()
		case strings.HasPrefix(line, "*** Move to: "):
			if cur != nil {
				cur.Kind = mustObject(map[string]string{"type": "update", "move_path": strings.TrimSpace(strings.TrimPrefix(line, "*** Move to: "))})
			}
		case cur != nil && l != "":
			body.WriteString(line + "\n")
		}
	}
	flush()
	return ups
}
