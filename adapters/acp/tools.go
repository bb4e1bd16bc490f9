package acp

import (
	"encoding/json"
	"path"
	"regexp"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// This file maps an ACP tool call to the canonical tool vocabulary
// (docs/ARCHITECTURE.md, section "Tools"). ACP itself says little: a kind
// (execute, read, edit, search, …), a title, locations, content and an
// optional rawInput whose shape is the agent's own. What each agent sends:
//
//	claude-code-acp  _meta.claudeCode.toolName is Claude's tool name (Bash, Read,
//	                 …; its own replacements are mcp__acp__Bash, …); rawInput is
//	                 Claude's input, {} in the first announcement
//	codex-acp        rawInput {command: argv, cwd, parsed_cmd, …} for every shell
//	                 command, whatever the kind: `ls` is kind search ("List <cwd>"),
//	                 `cat a` kind read; the output only in rawOutput
//	                 {aggregated_output, formatted_output, exit_code, …}
//	Gemini CLI       no rawInput at all; the tool's name in the call id
//	                 (run_shell_command__run_shell_command_<ms>_<n>); a command's
//	                 title is the command, its content "[current working directory
//	                 <cwd>] (<description>)"; file tools give locations and diff
//	                 content; no output
//	OpenCode         the first announcement's title is the tool's name (bash,
//	                 read, write, …) with rawInput {}; later updates carry
//	                 OpenCode's input; the output in rawOutput.output
//
// The canonical name comes from the agent's own tool name when the traffic
// gives one, else from a rawInput with a command (a shell command, whatever
// its kind), else from the kind (an edit whose rawInput is a whole file's
// content is a write). The input is built from rawInput, then
// from locations, diff content and the title, best effort.

// agentTools maps the tool names of the agents that give one to canonical
// names; "list" stands for a directory listing, which becomes glob with
// the pattern "*".
var agentTools = map[string]map[string]string{
	"claude": {
		"Bash": agent.ToolBash, "Read": agent.ToolRead, "Write": agent.ToolWrite,
		"Edit": agent.ToolEdit, "MultiEdit": agent.ToolEdit, "NotebookEdit": agent.ToolEdit,
		"Glob": agent.ToolGlob, "LS": "list", "Grep": agent.ToolGrep,
		"WebFetch": agent.ToolFetch, "WebSearch": agent.ToolSearch, "Task": agent.ToolTask, "Agent": agent.ToolTask,
		"TodoWrite": agent.ToolTodo, "AskUserQuestion": agent.ToolQuestion, "ExitPlanMode": agent.ToolPlan,
	},
	"gemini": {
		"run_shell_command": agent.ToolBash, "read_file": agent.ToolRead, "read_many_files": agent.ToolRead,
		"write_file": agent.ToolWrite, "replace": agent.ToolEdit, "edit": agent.ToolEdit,
		"glob": agent.ToolGlob, "list_directory": "list", "ls": "list",
		"search_file_content": agent.ToolGrep, "grep": agent.ToolGrep, "grep_search": agent.ToolGrep,
		"web_fetch": agent.ToolFetch, "google_web_search": agent.ToolSearch, "web_search": agent.ToolSearch,
		"write_todos": agent.ToolTodo,
	},
	"opencode": {
		"bash": agent.ToolBash, "read": agent.ToolRead, "write": agent.ToolWrite, "edit": agent.ToolEdit,
		"multiedit": agent.ToolEdit, "patch": agent.ToolEdit, "glob": agent.ToolGlob, "list": "list",
		"grep": agent.ToolGrep, "webfetch": agent.ToolFetch, "websearch": agent.ToolSearch,
		"task": agent.ToolTask, "todowrite": agent.ToolTodo, "todoread": agent.ToolTodo,
		"question": agent.ToolQuestion, "plan_exit": agent.ToolPlan,
	},
}

// kindTools maps ACP tool kinds to canonical names, for a tool whose own
// name is not known.
var kindTools = map[string]string{
	"execute": agent.ToolBash, "read": agent.ToolRead, "edit": agent.ToolEdit, "delete": agent.ToolEdit,
	"move": agent.ToolEdit, "search": agent.ToolGrep, "fetch": agent.ToolFetch, "switch_mode": agent.ToolPlan,
}

// geminiID matches Gemini CLI's call ids: <tool>__<tool>_<ms>_<n>.
var geminiID = regexp.MustCompile(`^([a-z][a-z0-9_]*)__([a-z][a-z0-9_]*)_[0-9]+_[0-9]+$`)

// geminiIDOf is geminiID's FindStringSubmatch of id, nil without running
// the expression for an id without "__" (which it cannot match).
func geminiIDOf(id string) []string {
	if !strings.Contains(id, "__") {
		return nil
	}
	return geminiID.FindStringSubmatch(id)
}

// agentTool returns the agent's own name of the tool and the table it is
// read with ("claude", "gemini", "opencode"), or "" when the traffic does
// not say it.
func (d *Decoder) agentTool(tl *tool) (name, table string) {
	if tl.metaTool != "" {
		return strings.TrimPrefix(tl.metaTool, "mcp__acp__"), "claude"
	}
	if m := geminiIDOf(tl.acpID); m != nil && m[1] == m[2] {
		return m[1], "gemini"
	}
	if d.isOpenCode() && tl.firstTitle != "" {
		return tl.firstTitle, "opencode"
	}
	return "", ""
}

// canonical returns the canonical name and input of the tool, and the
// part metadata that goes with them (the agent's name of the tool, else
// its kind; rawInput when it is not the canonical input).
func (d *Decoder) canonical(tl *tool) (string, json.RawMessage, agent.Object) {
	own, table := d.agentTool(tl)
	in, _ := members(tl.rawInput)
	var name string
	switch {
	case own != "" && agentTools[table][own] != "":
		name = agentTools[table][own]
	case table == "claude" && strings.HasPrefix(own, "mcp__"):
		name = agent.ToolOther
		if server, t, ok := strings.Cut(strings.TrimPrefix(own, "mcp__"), "__"); ok && server != "" && t != "" {
			name = agent.MCPTool(server, t)
		}
	case own != "":
		name = agent.ToolOther
	case commandOf(in) != "":
		name = agent.ToolBash
	case tl.kind == "edit" && strPtr(in, "content") != nil && strPtr(in, "old_string", "oldString", "new_string", "newString") == nil:
		name = agent.ToolWrite // the whole file's content
	case kindTools[tl.kind] != "":
		name = kindTools[tl.kind]
	default:
		name = agent.ToolOther
	}
	input := toolInput(name, tl, in)
	if tl.rawInput == nil && string(input) == "{}" {
		input = nil // nothing known: the part keeps its input
	}
	if name == "list" {
		name = agent.ToolGlob
	}
	provider, raw := d.providerOf(tl)
	meta := toolMetadata(provider, raw, input)
	if _, ok := meta[agent.MetaProviderInput]; ok {
		tl.providerInput = true
	} else if tl.providerInput && raw != nil {
		// The part's metadata merges: once the agent's input was kept, it
		// is kept up to date, or an earlier one would stay.
		if rv, ok := opaque(raw); ok {
			meta[agent.MetaProviderInput] = rv
		} else {
			meta[agent.MetaProviderInput], _ = jsonlex.ParseAny(raw)
		}
	}
	return name, input, meta
}

// providerOf is what canonical reads the tool's metadata from: the
// agent's name of the tool, else its kind, and its raw input as an object
// (nil for none).
func (d *Decoder) providerOf(tl *tool) (provider string, raw json.RawMessage) {
	provider, _ = d.agentTool(tl)
	if provider == "" {
		provider = tl.kind
	}
	if tl.rawInput != nil {
		raw = objectOr(tl.rawInput)
	}
	return provider, raw
}

// toolInput builds the canonical input of the tool from its rawInput
// members in (nil when the agent sent none), then its title, locations
// and content.
func toolInput(name string, tl *tool, in obj) json.RawMessage {
	noInput := tl.rawInput == nil // Gemini: the title and content are all there is
	if isObject(tl.rawInput) && len(in) == 0 {
		return json.RawMessage(`{}`) // an announcement before the input (OpenCode, claude-code-acp)
	}
	p := pathOf(in, tl)
	switch name {
	case agent.ToolBash:
		b := agent.BashInput{Command: commandOf(in), Description: first(in, "description"),
			Cwd: first(in, "cwd", "workdir", "dir_path"), Timeout: number(in, "timeout", "timeout_ms")}
		if b.Command == "" && noInput && tl.kind == "execute" {
			b.Command = tl.title
		}
		if b.Description == "" {
			b.Description = tl.hintDesc
		}
		if b.Cwd == "" {
			b.Cwd = tl.hintCwd
		}
		return agent.EncodeInput(b)
	case agent.ToolRead:
		return agent.EncodeInput(agent.ReadInput{Path: p, Offset: number(in, "offset"), Limit: number(in, "limit")})
	case agent.ToolWrite:
		w := agent.WriteInput{Path: p, Content: strPtr(in, "content")}
		if d := tl.diff(); w.Content == nil && d != nil && d.OldText == nil {
			c := d.NewText
			w.Content = &c
		}
		return agent.EncodeInput(w)
	case agent.ToolEdit:
		e := agent.EditInput{Path: p, OldString: strPtr(in, "old_string", "oldString", "old_str"),
			NewString: strPtr(in, "new_string", "newString", "new_str"), ReplaceAll: boolPtr(in, "replace_all", "replaceAll"),
			Diff: first(in, "diff", "patch")}
		if d := tl.diff(); e.OldString == nil && e.NewString == nil && d != nil {
			old, nw := "", d.NewText
			if d.OldText != nil {
				old = *d.OldText
			}
			e.OldString, e.NewString = &old, &nw
		}
		return agent.EncodeInput(e)
	case agent.ToolGlob, "list":
		g := agent.GlobInput{Pattern: first(in, "pattern"), Path: first(in, "path", "dir_path", "directory")}
		if name == "list" {
			g.Pattern, g.Path = "*", p
		} else if g.Pattern == "" && noInput {
			g.Pattern = unquote(tl.title)
		}
		return agent.EncodeInput(g)
	case agent.ToolGrep:
		g := agent.GrepInput{Pattern: first(in, "pattern", "regex"), Path: first(in, "path", "dir_path"), Glob: first(in, "glob", "include")}
		if g.Pattern == "" && noInput {
			g.Pattern = unquote(tl.title)
		}
		return agent.EncodeInput(g)
	case agent.ToolFetch:
		f := agent.FetchInput{URL: first(in, "url"), Prompt: first(in, "prompt")}
		if f.Prompt == "" && noInput {
			f.Prompt = quoted(tl.title)
		}
		if f.URL == "" {
			f.URL = urlRE.FindString(f.Prompt + " " + tl.title)
		}
		return agent.EncodeInput(f)
	case agent.ToolSearch:
		s := agent.SearchInput{Query: first(in, "query")}
		if s.Query == "" && noInput {
			s.Query = quoted(tl.title)
		}
		return agent.EncodeInput(s)
	case agent.ToolTask:
		return agent.EncodeInput(agent.TaskInput{Description: first(in, "description"), Prompt: first(in, "prompt"),
			Agent: first(in, "subagent_type", "subagentType", "agent")})
	case agent.ToolTodo:
		return agent.EncodeInput(agent.TodoInput{Todos: todoItems(in.get("todos"))})
	case agent.ToolQuestion:
		return agent.EncodeInput(agent.QuestionInput{Questions: questionInfos(in.get("questions"))})
	case agent.ToolPlan:
		return agent.EncodeInput(agent.PlanInput{Plan: first(in, "plan")})
	default:
		if o := objectOr(tl.rawInput); o != nil {
			return o
		}
		return json.RawMessage(`{}`)
	}
}

// commandOf reads a shell command from rawInput: command as a string, or
// as an argv list (codex-acp), a shell running one script given as that
// script.
func commandOf(in obj) string {
	if s := first(in, "command", "cmd"); s != "" {
		return s
	}
	argv, ok := stringsOf(in.get("command"))
	if !ok || len(argv) == 0 {
		return ""
	}
	if len(argv) == 3 && (argv[1] == "-c" || argv[1] == "-lc") {
		switch path.Base(argv[0]) {
		case "bash", "sh", "zsh":
			return argv[2]
		}
	}
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = shellQuote(a)
	}
	return strings.Join(words, " ")
}

// shellQuote quotes a word the way a POSIX shell reads it back.
func shellQuote(a string) string {
	if a != "" && strings.IndexFunc(a, func(r rune) bool {
		return !(r == '/' || r == '-' || r == '_' || r == '.' || r == '=' || r == ':' || r == ',' ||
			(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
	}) < 0 {
		return a
	}
	return "'" + strings.ReplaceAll(a, "'", `'"'"'`) + "'"
}

// pathOf is the file the tool works on: a path member of rawInput, else
// its first location.
func pathOf(in obj, tl *tool) string {
	if p := first(in, "file_path", "filePath", "filepath", "path", "absolute_path", "abs_path", "notebook_path", "dir_path"); p != "" {
		return p
	}
	if len(tl.locations) > 0 {
		return tl.locations[0].Path
	}
	return ""
}

// first returns the first of the members that is a non-empty string.
func first(in obj, keys ...string) string {
	for _, k := range keys {
		if s, ok := str(in.get(k)); ok && s != "" {
			return s
		}
	}
	return ""
}

// strPtr returns the first of the members that is a string (empty
// included), nil when none is.
func strPtr(in obj, keys ...string) *string {
	for _, k := range keys {
		if s, ok := str(in.get(k)); ok {
			return &s
		}
	}
	return nil
}

// boolPtr returns the first of the members that is a boolean.
func boolPtr(in obj, keys ...string) *bool {
	for _, k := range keys {
		var b bool
		if !isNull(in.get(k)) && json.Unmarshal(in.get(k), &b) == nil {
			return &b
		}
	}
	return nil
}

// number returns the first of the members that is an integer.
func number(in obj, keys ...string) *int64 {
	for _, k := range keys {
		var n int64
		if !isNull(in.get(k)) && json.Unmarshal(in.get(k), &n) == nil {
			return &n
		}
	}
	return nil
}

// diff returns the tool's one diff content, nil when it has none or
// several.
func (tl *tool) diff() *toolContent {
	var out *toolContent
	for i := range tl.content {
		if tl.content[i].Type == "diff" {
			if out != nil {
				return nil
			}
			out = &tl.content[i]
		}
	}
	return out
}

// unquote returns the first quoted part of a title that starts with a
// quote ('*.txt' → *.txt, "'a' within src" → a, as Gemini CLI titles its
// searches), else the title.
func unquote(title string) string {
	t := strings.TrimSpace(title)
	for _, q := range []string{`'`, `"`, "`"} {
		if len(t) >= 2 && strings.HasPrefix(t, q) {
			if i := strings.Index(t[1:], q); i >= 0 {
				return t[1 : 1+i]
			}
		}
	}
	return t
}

// quoted returns the text between the first pair of double quotes of a
// title (`Searching the web for: "happy"` → happy), else "".
func quoted(title string) string {
	i := strings.IndexByte(title, '"')
	if i < 0 {
		return ""
	}
	j := strings.LastIndexByte(title, '"')
	if j <= i {
		return ""
	}
	return title[i+1 : j]
}

var urlRE = regexp.MustCompile(`https?://[^\s"'<>]+`)

// geminiContent matches the content Gemini CLI gives a shell command:
// "[current working directory <cwd>] (<description>)".
var geminiContent = regexp.MustCompile(`^\[current working directory ([^\]]*)\](?: \((.*)\))?$`)

// geminiContentPrefix is how every text geminiContent matches begins.
const geminiContentPrefix = "[current working directory "

// noteHints keeps what the tool's content says about its input: a shell
// command's working folder and description, as Gemini CLI writes them.
// Hints stay once seen (the content is replaced by the output later).
func (tl *tool) noteHints() {
	for _, c := range tl.content {
		if c.Type != "content" || c.Block.Type != "text" {
			continue
		}
		// Only a text that starts as the hint does can match: other texts
		// are not run through the expression.
		text := strings.TrimSpace(c.Block.Text)
		if !strings.HasPrefix(text, geminiContentPrefix) {
			continue
		}
		if m := geminiContent.FindStringSubmatch(text); m != nil {
			tl.hintCwd, tl.hintDesc = m[1], m[2]
		}
	}
}

// todoItems reads a todo list given as rawInput (Claude's, OpenCode's and
// Gemini's todo tools: {content|description, status, priority?, id?}), as
// json.Unmarshal into a []map[string]json.RawMessage reads it: an element
// of another type is an empty item, anything but an array no items.
func todoItems(raw json.RawMessage) []agent.TodoItem {
	items, _ := objects(raw)
	out := make([]agent.TodoItem, 0, len(items))
	for _, it := range items {
		out = append(out, todoItem(it))
	}
	return out
}

// todoItem is one item of a todo list.
func todoItem(it obj) agent.TodoItem {
	return agent.TodoItem{ID: first(it, "id"), Content: first(it, "content", "description"),
		Status: agent.TodoStatus(first(it, "status")), Priority: agent.TodoPriority(first(it, "priority"))}
}

// questionInfos reads questions given as rawInput ({question, header,
// options: [{label, description}], multiSelect | multiple}).
func questionInfos(raw json.RawMessage) []agent.QuestionInfo {
	qs, _ := objects(raw)
	out := make([]agent.QuestionInfo, 0, len(qs))
	for _, q := range qs {
		info := agent.QuestionInfo{Question: first(q, "question"), Header: first(q, "header"), Options: []agent.QuestionOption{},
			Multiple: boolPtr(q, "multiSelect", "multiple")}
		opts, _ := objects(q.get("options"))
		for _, o := range opts {
			info.Options = append(info.Options, agent.QuestionOption{Label: first(o, "label"), Description: first(o, "description")})
		}
		out = append(out, info)
	}
	return out
}

// rawOutputText reads a tool's output from its rawOutput when that is all
// the agent gives: a string; a list of content blocks (claude-code-acp);
// an object's output (OpenCode), aggregated_output or formatted_output
// (codex-acp), stdout and stderr, content or error member.
func rawOutputText(raw json.RawMessage) string {
	if s, ok := str(raw); ok {
		return s
	}
	if blocks, ok := objects(raw); ok {
		var parts []string
		for _, b := range blocks {
			if t, _ := str(b.get("type")); t == "text" {
				parts = append(parts, first(b, "text"))
			}
		}
		return strings.Join(parts, "\n")
	}
	return objectOutput(raw)
}

// objectOutput is the output an object rawOutput holds (see
// rawOutputText), "" for anything else.
func objectOutput(raw json.RawMessage) string {
	o, ok := members(raw)
	if !ok {
		return ""
	}
	if s := first(o, "output", "aggregated_output", "formatted_output"); s != "" {
		return s
	}
	if s := first(o, "stdout") + first(o, "stderr"); s != "" {
		return s
	}
	return first(o, "content", "error")
}

// isOpenCode reports whether the agent is OpenCode (its agentInfo name),
// whose first title is its tool's name: all the canonical form reads of
// the agent's name.
func (d *Decoder) isOpenCode() bool {
	return strings.EqualFold(d.agentName, "opencode")
}
