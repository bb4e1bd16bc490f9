package acp

import (
	"bytes"
	"encoding/json"
	"maps"
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

// geminiParts is geminiID's FindStringSubmatch (the two tool names, ok
// when it matches) without the expression (it was a few percent of the
// mapping's time): the id ends with "_<digits>_<digits>" after its
// second-to-last underscore, and the rest is two names of [a-z][a-z0-9_]*
// split at the last "__" that leaves both names well formed, the split
// the expression's greedy first group takes (FuzzGeminiParts).
func geminiParts(id string) (t1, t2 string, ok bool) {
	last := strings.LastIndexByte(id, '_')
	if last < 0 || !allDigits(id[last+1:]) {
		return "", "", false
	}
	tail := strings.LastIndexByte(id[:last], '_')
	if tail < 0 || !allDigits(id[tail+1:last]) {
		return "", "", false
	}
	p := id[:tail]
	for i := 0; i < len(p); i++ {
		if c := p[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return "", "", false
		}
	}
	for k := len(p) - 3; k >= 1; k-- {
		if p[k] == '_' && p[k+1] == '_' && isLower(p[k+2]) && isLower(p[0]) {
			return p[:k], p[k+2:], true
		}
	}
	return "", "", false
}

// allDigits reports whether s is one or more ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }

// agentTool returns the agent's own name of the tool and the table it is
// read with ("claude", "gemini", "opencode"), or "" when the traffic does
// not say it.
func (d *Decoder) agentTool(tl *tool) (name, table string) {
	if tl.metaTool != "" {
		return strings.TrimPrefix(tl.metaTool, "mcp__acp__"), "claude"
	}
	// Read from the call id each time (without allocating): the canonical
	// form is computed again only when the tool changed (canonicalOf), and
	// a field for it would take 16 bytes of every tool.
	if t1, t2, ok := geminiParts(tl.acpID); ok && t1 == t2 {
		return t1, "gemini"
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
	name, input, meta, _ := d.canonicalOf(tl)
	return name, input, maps.Clone(meta)
}

// providerOf is what buildCanonical reads the tool's metadata from: the
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

// buildCanonical is canonical, computed. In the one-pass form, the
// metadata withProviderInput would make is left to be made (deferred; nil
// meta), for canonMeta or partMetaOver.
func (d *Decoder) buildCanonical(tl *tool) (string, json.RawMessage, agent.Object, bool) {
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
	case commandOf(&in) != "":
		name = agent.ToolBash
	case tl.kind == "edit" && strPtr(&in, "content") != nil && strPtr(&in, "old_string", "oldString", "new_string", "newString") == nil:
		name = agent.ToolWrite // the whole file's content
	case kindTools[tl.kind] != "":
		name = kindTools[tl.kind]
	default:
		name = agent.ToolOther
	}
	input := toolInput(name, tl, &in, d.general)
	if tl.rawInput == nil && string(input) == "{}" {
		input = nil // nothing known: the part keeps its input
	}
	if name == "list" {
		name = agent.ToolGlob
	}
	provider, raw := d.providerOf(tl)
	meta, deferred := d.toolMetadata(tl, provider, raw, input)
	if deferred {
		tl.providerInput = true
		return name, input, nil, true
	}
	if _, ok := meta[agent.MetaProviderInput]; ok {
		tl.providerInput = true
	} else if tl.providerInput && raw != nil {
		// The part's metadata merges: once the agent's input was kept, it
		// is kept up to date, or an earlier one would stay. The metadata
		// may be shared (providerOnly): added to in a copy.
		meta = maps.Clone(meta)
		if rv, ok := opaque(raw); ok {
			meta[agent.MetaProviderInput] = rv
		} else {
			meta[agent.MetaProviderInput], _ = jsonlex.ParseAny(raw)
		}
	}
	return name, input, meta, false
}

// toolInput builds the canonical input of the tool from its rawInput
// members in (nil when the agent sent none), then its title, locations
// and content, encoded by encodeAs (agent.EncodeInput in the general
// form, else its one-pass form).
func toolInput(name string, tl *tool, in *obj, general bool) json.RawMessage {
	noInput := tl.rawInput == nil // Gemini: the title and content are all there is
	if isObject(tl.rawInput) && in.n == 0 {
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
		return encodeAs(general, b)
	case agent.ToolRead:
		return encodeAs(general, agent.ReadInput{Path: p, Offset: number(in, "offset"), Limit: number(in, "limit")})
	case agent.ToolWrite:
		w := agent.WriteInput{Path: p, Content: strPtr(in, "content")}
		if d := tl.diff(); w.Content == nil && d != nil && d.OldText == nil {
			c := d.NewText
			w.Content = &c
		}
		return encodeAs(general, w)
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
		return encodeAs(general, e)
	case agent.ToolGlob, "list":
		g := agent.GlobInput{Pattern: first(in, "pattern"), Path: first(in, "path", "dir_path", "directory")}
		if name == "list" {
			g.Pattern, g.Path = "*", p
		} else if g.Pattern == "" && noInput {
			g.Pattern = unquote(tl.title)
		}
		return encodeAs(general, g)
	case agent.ToolGrep:
		g := agent.GrepInput{Pattern: first(in, "pattern", "regex"), Path: first(in, "path", "dir_path"), Glob: first(in, "glob", "include")}
		if g.Pattern == "" && noInput {
			g.Pattern = unquote(tl.title)
		}
		return encodeAs(general, g)
	case agent.ToolFetch:
		f := agent.FetchInput{URL: first(in, "url"), Prompt: first(in, "prompt")}
		if f.Prompt == "" && noInput {
			f.Prompt = quoted(tl.title)
		}
		if f.URL == "" {
			f.URL = urlRE.FindString(f.Prompt + " " + tl.title)
		}
		return encodeAs(general, f)
	case agent.ToolSearch:
		s := agent.SearchInput{Query: first(in, "query")}
		if s.Query == "" && noInput {
			s.Query = quoted(tl.title)
		}
		return encodeAs(general, s)
	case agent.ToolTask:
		return encodeAs(general, agent.TaskInput{Description: first(in, "description"), Prompt: first(in, "prompt"),
			Agent: first(in, "subagent_type", "subagentType", "agent")})
	case agent.ToolTodo:
		return encodeAs(general, agent.TodoInput{Todos: todoItems(in.get("todos"))})
	case agent.ToolQuestion:
		return encodeAs(general, agent.QuestionInput{Questions: questionInfos(in.get("questions"))})
	case agent.ToolPlan:
		return encodeAs(general, agent.PlanInput{Plan: first(in, "plan")})
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
func commandOf(in *obj) string {
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
func pathOf(in *obj, tl *tool) string {
	if p := first(in, "file_path", "filePath", "filepath", "path", "absolute_path", "abs_path", "notebook_path", "dir_path"); p != "" {
		return p
	}
	if len(tl.locations) > 0 {
		return tl.locations[0].Path
	}
	return ""
}

// first returns the first of the members that is a non-empty string.
func first(in *obj, keys ...string) string {
	for _, k := range keys {
		if s, ok := str(in.get(k)); ok && s != "" {
			return s
		}
	}
	return ""
}

// strPtr returns the first of the members that is a string (empty
// included), nil when none is.
func strPtr(in *obj, keys ...string) *string {
	for _, k := range keys {
		if s, ok := str(in.get(k)); ok {
			return &s
		}
	}
	return nil
}

// boolPtr returns the first of the members that is a boolean.
func boolPtr(in *obj, keys ...string) *bool {
	for _, k := range keys {
		var b bool
		if !isNull(in.get(k)) && json.Unmarshal(in.get(k), &b) == nil {
			return &b
		}
	}
	return nil
}

// number returns the first of the members that is an integer.
func number(in *obj, keys ...string) *int64 {
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
// Gemini's todo tools: {content|description, status, priority?, id?}).
func todoItems(raw json.RawMessage) []agent.TodoItem {
	var buf [16]json.RawMessage
	if items, ok := objectList(buf[:0], raw); ok {
		out := make([]agent.TodoItem, 0, len(items))
		for _, el := range items {
			it, _ := members(el) // null: no members
			out = append(out, todoItem(&it))
		}
		return out
	}
	// Not a list of objects (an element of another type is an empty
	// item): read by encoding/json.
	return todoItemsJSON(raw)
}

// todoItemsJSON is todoItems read by json.Unmarshal into a
// []map[string]json.RawMessage, as every list was before objectList
// (FuzzObjectList compares the two): an element of another type is an
// empty item, anything but an array no items.
func todoItemsJSON(raw json.RawMessage) []agent.TodoItem {
	var items []map[string]json.RawMessage
	_ = json.Unmarshal(raw, &items)
	out := make([]agent.TodoItem, 0, len(items))
	for _, m := range items {
		out = append(out, todoItem(objOf(m)))
	}
	return out
}

// todoItem is one item of a todo list.
func todoItem(it *obj) agent.TodoItem {
	return agent.TodoItem{ID: first(it, "id"), Content: first(it, "content", "description"),
		Status: agent.TodoStatus(first(it, "status")), Priority: agent.TodoPriority(first(it, "priority"))}
}

// questionInfos reads questions given as rawInput ({question, header,
// options: [{label, description}], multiSelect | multiple}).
func questionInfos(raw json.RawMessage) []agent.QuestionInfo {
	var qs []map[string]json.RawMessage
	_ = json.Unmarshal(raw, &qs)
	out := make([]agent.QuestionInfo, 0, len(qs))
	for _, m := range qs {
		q := objOf(m)
		info := agent.QuestionInfo{Question: first(q, "question"), Header: first(q, "header"), Options: []agent.QuestionOption{},
			Multiple: boolPtr(q, "multiSelect", "multiple")}
		var opts []map[string]json.RawMessage
		_ = json.Unmarshal(q.get("options"), &opts)
		for _, m := range opts {
			o := objOf(m)
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
	// Only an array (or null) can be a list of blocks.
	if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '[' || t[0] == 'n') {
		var buf [16]json.RawMessage
		if blocks, ok := objectList(buf[:0], t); ok {
			var pbuf [4]string
			parts := pbuf[:0]
			for _, el := range blocks {
				b, _ := members(el) // null: no members
				if isTextType(b.get("type")) {
					parts = append(parts, first(&b, "text"))
				}
			}
			return strings.Join(parts, "\n")
		}
		// Not a list of blocks: what objectList does not read,
		// json.Unmarshal into []map[string]json.RawMessage (what this
		// read before) fails on too.
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
	if s := first(&o, "output", "aggregated_output", "formatted_output"); s != "" {
		return s
	}
	if s := first(&o, "stdout") + first(&o, "stderr"); s != "" {
		return s
	}
	return first(&o, "content", "error")
}

// isTextType reports whether raw is the JSON string "text" (written plainly,
// looked at in place, or with escapes).
func isTextType(raw json.RawMessage) bool {
	if string(raw) == `"text"` {
		return true
	}
	s, _ := str(raw)
	return s == "text"
}

// objectList splits raw, a JSON array of objects, into its elements as
// json.Unmarshal into a []map[string]json.RawMessage reads it: each
// element an object or null (which has no members), appended to dst[:0]
// (a buffer on the caller's stack), read in place (raw is a member of a
// frame jsonrpc validated). ok is false where that Unmarshal fails (raw is
// neither an array nor null, or an element is neither an object nor
// null), and where raw is not read in place (not structurally complete,
// nested deeper than encoding/json reads): the caller takes the
// encoding/json way then. Null gives no elements.
func objectList(dst []json.RawMessage, raw []byte) ([]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == "null" {
		return dst[:0], true
	}
	if len(raw) == 0 || raw[0] != '[' || tooDeep(raw) {
		return nil, false
	}
	items, ok := splitArray(dst[:0], raw)
	if !ok {
		return nil, false
	}
	for _, el := range items {
		if el[0] != '{' && string(el) != "null" {
			return nil, false
		}
	}
	return items, true
}

// isOpenCode reports whether the agent is OpenCode (its agentInfo name),
// whose first title is its tool's name: all the canonical form reads of
// the agent's name, so the canonical cache keys on it (canonKey) rather
// than on the name.
func (d *Decoder) isOpenCode() bool {
	return strings.EqualFold(d.agentName, "opencode")
}
