package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// The canonical tool vocabulary (docs/ARCHITECTURE.md, section "Tools").
// Every adapter names a tool call with one of these names, whatever the
// agent calls it, and gives its input in the canonical shape of that name;
// the agent's own name goes to the tool part's metadata under
// MetaProviderTool and, when the canonical input is not what the agent
// sent, the agent's input under MetaProviderInput. Permission requests use
// the same names (PermissionRequest.Permission), so one permission rule
// file serves every agent: "bash:git status*" covers Claude's Bash, a Codex
// command execution and an ACP agent's shell command alike.
//
// The canonical inputs (members the agent did not give are absent):
//
//	bash      BashInput     {command, description?, cwd?, timeout? (ms)}
//	read      ReadInput     {path, offset?, limit?}
//	write     WriteInput    {path, content}
//	edit      EditInput     {path, oldString, newString, replaceAll?, diff?}
//	glob      GlobInput     {pattern, path?}
//	grep      GrepInput     {pattern, path?, glob?}
//	fetch     FetchInput    {url, prompt?}
//	search    SearchInput   {query}               (a web search)
//	task      TaskInput     {description, prompt, agent?}
//	todo      TodoInput     {todos}
//	question  QuestionInput {questions}
//	plan      PlanInput     {plan}
//	mcp:<server>/<tool>     the tool's own arguments
//	other                   the agent's input as it came
const (
	ToolBash     = "bash"
	ToolRead     = "read"
	ToolWrite    = "write"
	ToolEdit     = "edit"
	ToolGlob     = "glob"
	ToolGrep     = "grep"
	ToolFetch    = "fetch"
	ToolSearch   = "search"
	ToolTask     = "task"
	ToolTodo     = "todo"
	ToolQuestion = "question"
	ToolPlan     = "plan"
	ToolOther    = "other"
)

// ToolMCPPrefix starts the canonical name of an MCP server's tool:
// "mcp:<server>/<tool>" (MCPTool).
const ToolMCPPrefix = "mcp:"

// Keys of a tool part's metadata that every adapter fills the same way.
const (
	// MetaProviderTool is the agent's own name of the tool ("Bash",
	// "commandExecution", "run_shell_command", an ACP kind, …).
	MetaProviderTool = "providerTool"
	// MetaProviderInput is the input exactly as the agent gave it, kept
	// when the canonical input differs from it: a decoded value, or its
	// JSON text as a json.RawMessage (the ACP decoder keeps it so; encoded
	// in a transcript, both give the same bytes: docs/ARCHITECTURE.md,
	// "Mapping and delivery").
	MetaProviderInput = "providerInput"
)

// MCPTool returns the canonical name of tool of MCP server server:
// "mcp:<server>/<tool>". An empty server gives "mcp:/<tool>".
func MCPTool(server, tool string) string { return ToolMCPPrefix + server + "/" + tool }

// ParseMCPTool splits a canonical MCP tool name into its server and tool;
// ok is false for a name that does not start with "mcp:" or has no "/"
// after it.
func ParseMCPTool(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, ToolMCPPrefix)
	if !ok {
		return "", "", false
	}
	if server, tool, ok = strings.Cut(rest, "/"); !ok {
		return "", "", false
	}
	return server, tool, true
}

// IsCanonicalTool reports whether name is one of the canonical tool names
// (an MCP tool name included).
func IsCanonicalTool(name string) bool {
	switch name {
	case ToolBash, ToolRead, ToolWrite, ToolEdit, ToolGlob, ToolGrep, ToolFetch, ToolSearch,
		ToolTask, ToolTodo, ToolQuestion, ToolPlan, ToolOther:
		return true
	}
	_, _, ok := ParseMCPTool(name)
	return ok
}

// BashInput is the canonical input of a shell command.
type BashInput struct {
	Command     string `json:"command,omitempty"` // the command line as a shell reads it
	Description string `json:"description,omitempty"`
	Cwd         string `json:"cwd,omitempty"`     // working folder
	Timeout     *int64 `json:"timeout,omitempty"` // milliseconds
}

// ReadInput is the canonical input of a file read.
type ReadInput struct {
	Path   string `json:"path,omitempty"`
	Offset *int64 `json:"offset,omitempty"` // first line, as the agent counts lines
	Limit  *int64 `json:"limit,omitempty"`  // number of lines
}

// WriteInput is the canonical input of a file written whole (created or
// replaced). Content is nil when the agent did not say it.
type WriteInput struct {
	Path    string  `json:"path,omitempty"`
	Content *string `json:"content,omitempty"`
}

// EditInput is the canonical input of a change to part of a file: replace
// OldString with NewString (every occurrence when ReplaceAll). An agent
// that describes the change as a patch gives Diff, a unified diff; where
// the diff has one hunk OldString and NewString are its two sides. Nil
// strings are what the agent did not say ("" is an empty string).
type EditInput struct {
	Path       string  `json:"path,omitempty"`
	OldString  *string `json:"oldString,omitempty"`
	NewString  *string `json:"newString,omitempty"`
	ReplaceAll *bool   `json:"replaceAll,omitempty"`
	Diff       string  `json:"diff,omitempty"`
}

// GlobInput is the canonical input of a file name search (a directory
// listing is the pattern "*" in Path).
type GlobInput struct {
	Pattern string `json:"pattern,omitempty"`
	Path    string `json:"path,omitempty"`
}

// GrepInput is the canonical input of a content search: the regular
// expression Pattern in the files under Path whose names match Glob.
type GrepInput struct {
	Pattern string `json:"pattern,omitempty"`
	Path    string `json:"path,omitempty"`
	Glob    string `json:"glob,omitempty"`
}

// FetchInput is the canonical input of a web page fetch.
type FetchInput struct {
	URL    string `json:"url,omitempty"`
	Prompt string `json:"prompt,omitempty"` // what to do with the page
}

// SearchInput is the canonical input of a web search.
type SearchInput struct {
	Query string `json:"query,omitempty"`
}

// TaskInput is the canonical input of a subagent call.
type TaskInput struct {
	Description string `json:"description,omitempty"`
	Prompt      string `json:"prompt,omitempty"`
	Agent       string `json:"agent,omitempty"` // subagent type ("explore", "general-purpose", …)
}

// TodoInput is the canonical input of a todo tool: the items it writes,
// the whole list for a tool that replaces it (Claude's TodoWrite, OpenCode's
// todowrite), the one item for a tool that creates or changes one (Claude's
// TaskCreate, TaskUpdate), none for a tool that only reads the list.
type TodoInput struct {
	Todos []TodoItem `json:"todos"`
}

// TodoItem is one item of a TodoInput: the todo's fields the call sets.
type TodoItem struct {
	ID       string       `json:"id,omitempty"` // the agent's id of the item, when it has one
	Content  string       `json:"content,omitempty"`
	Status   TodoStatus   `json:"status,omitempty"`
	Priority TodoPriority `json:"priority,omitempty"`
}

// QuestionInput is the canonical input of a question to the user.
type QuestionInput struct {
	Questions []QuestionInfo `json:"questions"`
}

// PlanInput is the canonical input of a plan the agent presents (leaving
// plan mode): the plan's text, Markdown.
type PlanInput struct {
	Plan string `json:"plan,omitempty"`
}

// EncodeInput renders a canonical input (one of the *Input types above, or
// an Object) as a JSON object, with <, > and & as they are. A value that cannot be encoded, or does not
// encode to an object, gives {}.
func EncodeInput(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "a > b" stays readable
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`{}`)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(b) == 0 || b[0] != '{' {
		return json.RawMessage(`{}`)
	}
	return b
}

// ToolPatterns returns what a call of the canonical tool accesses, for
// permission rules to match (PermissionRequest.Patterns): the command of
// bash, the path of read, write and edit, the pattern of glob and grep, the
// URL of fetch, the query of search, the subagent type of task, and "*"
// for an MCP tool (a rule names the tool itself). ok is false for the other
// tools, and for an input that lacks the member: the adapter then picks a
// pattern of its own.
func ToolPatterns(tool string, input json.RawMessage) (patterns []string, ok bool) {
	if _, _, mcp := ParseMCPTool(tool); mcp {
		return []string{"*"}, true
	}
	key := ""
	switch tool {
	case ToolBash:
		key = "command"
	case ToolRead, ToolWrite, ToolEdit:
		key = "path"
	case ToolGlob, ToolGrep:
		key = "pattern"
	case ToolFetch:
		key = "url"
	case ToolSearch:
		key = "query"
	case ToolTask:
		key = "agent"
	default:
		return nil, false
	}
	var in map[string]json.RawMessage
	if json.Unmarshal(input, &in) != nil {
		return nil, false
	}
	var s string
	if json.Unmarshal(in[key], &s) != nil || s == "" {
		return nil, false
	}
	return []string{s}, true
}

// ToolMetadata returns the members every adapter puts in a tool part's
// metadata: MetaProviderTool (when providerTool is not empty) and, when
// input is not the same JSON value as providerInput, MetaProviderInput
// with providerInput decoded (numbers as json.Number, the convention of
// Object; a providerInput that is not JSON is kept as its text). A nil,
// empty or null providerInput adds nothing.
func ToolMetadata(providerTool string, providerInput, input json.RawMessage) Object {
	m := Object{}
	if providerTool != "" {
		m[MetaProviderTool] = providerTool
	}
	if t := bytes.TrimSpace(providerInput); len(t) == 0 || string(t) == "null" {
		return m
	}
	raw, err := decodeJSONValue(providerInput)
	if err != nil {
		m[MetaProviderInput] = string(providerInput)
		return m
	}
	if canon, err := decodeJSONValue(input); err == nil && reflect.DeepEqual(raw, canon) {
		return m
	}
	m[MetaProviderInput] = raw
	return m
}

var errTrailing = errors.New("data after the JSON value")

// decodeJSONValue decodes one JSON value with numbers as json.Number.
func decodeJSONValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	return v, nil
}
