package claude

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// toolInput holds the input fields of Claude's built-in tools that the
// decoder reads (titles, permission patterns, subagents, todos, the
// canonical input).
type toolInput struct {
	Command      string          `json:"command"`
	Description  string          `json:"description"`
	Timeout      *int64          `json:"timeout"` // Bash: milliseconds
	FilePath     string          `json:"file_path"`
	Offset       *int64          `json:"offset"`
	Limit        *int64          `json:"limit"`
	Content      *string         `json:"content"`
	OldString    *string         `json:"old_string"`
	NewString    *string         `json:"new_string"`
	ReplaceAll   *bool           `json:"replace_all"`
	Edits        []claudeEdit    `json:"edits"`
	NotebookPath string          `json:"notebook_path"`
	NewSource    *string         `json:"new_source"`
	Path         string          `json:"path"`
	Pattern      string          `json:"pattern"`
	Glob         string          `json:"glob"`
	URL          string          `json:"url"`
	Query        string          `json:"query"`
	Prompt       string          `json:"prompt"`
	SubagentType string          `json:"subagent_type"`
	Skill        string          `json:"skill"`
	Todos        []todoItem      `json:"todos"`
	Subject      string          `json:"subject"`
	TaskID       string          `json:"taskId"`
	Status       string          `json:"status"`
	Plan         string          `json:"plan"`
	Questions    json.RawMessage `json:"questions"`
}

// claudeEdit is one edit of a MultiEdit call.
type claudeEdit struct {
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll *bool   `json:"replace_all"`
}

type todoItem struct {
	Content  string `json:"content"`
	Status   string `json:"status"`
	Priority string `json:"priority"`
}

// parseInput reads the known fields of a tool input; fields of another
// type than expected stay zero, and optional ones absent (a tool input is
// the model's, any shape).
func parseInput(raw json.RawMessage) toolInput {
	var in toolInput
	if len(raw) == 0 || raw[0] != '{' {
		return in
	}
	if json.Unmarshal(raw, &in) == nil {
		return in
	}
	// A member of another type: read the members one by one (in name
	// order), leaving out those that do not fit.
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return toolInput{}
	}
	in = toolInput{}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		one, _ := json.Marshal(map[string]json.RawMessage{k: members[k]})
		var probe toolInput
		if json.Unmarshal(one, &probe) == nil {
			_ = json.Unmarshal(one, &in)
		}
	}
	return in
}

// canonicalTools maps Claude's tool names to the canonical vocabulary
// (docs/ARCHITECTURE.md, section "Tools"). An MCP tool
// (mcp__<server>__<tool>) becomes mcp:<server>/<tool>; any other tool
// (BashOutput, KillShell, Skill, SlashCommand, newer built-ins) is "other".
var canonicalTools = map[string]string{
	"Bash": agent.ToolBash, "Read": agent.ToolRead, "Write": agent.ToolWrite,
	"Edit": agent.ToolEdit, "MultiEdit": agent.ToolEdit, "NotebookEdit": agent.ToolEdit,
	"Glob": agent.ToolGlob, "LS": agent.ToolGlob, "Grep": agent.ToolGrep,
	"WebFetch": agent.ToolFetch, "WebSearch": agent.ToolSearch,
	"web_search": agent.ToolSearch, "web_fetch": agent.ToolFetch, // server tools the API runs
	"Task": agent.ToolTask, "Agent": agent.ToolTask,
	"TodoWrite": agent.ToolTodo, "TaskCreate": agent.ToolTodo, "TaskUpdate": agent.ToolTodo,
	"TaskList": agent.ToolTodo, "TaskGet": agent.ToolTodo,
	"AskUserQuestion": agent.ToolQuestion, "ExitPlanMode": agent.ToolPlan, "EnterPlanMode": agent.ToolPlan,
}

// canonicalTool returns the canonical name of a Claude tool.
func canonicalTool(name string) string {
	if c, ok := canonicalTools[name]; ok {
		return c
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if server, tool, ok := strings.Cut(rest, "__"); ok && server != "" && tool != "" {
			return agent.MCPTool(server, tool)
		}
	}
	return agent.ToolOther
}

// canonicalInput builds the canonical input of a call of Claude's tool
// name from Claude's input raw (nil stays nil: the input is not known
// yet). MCP and other tools keep Claude's input; a MultiEdit with several
// edits keeps only its path (the edits are in the provider input).
func canonicalInput(name string, raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	in := parseInput(raw)
	var v any
	switch name {
	case "Bash":
		v = agent.BashInput{Command: in.Command, Description: in.Description, Timeout: in.Timeout}
	case "Read":
		v = agent.ReadInput{Path: in.FilePath, Offset: in.Offset, Limit: in.Limit}
	case "Write":
		v = agent.WriteInput{Path: in.FilePath, Content: in.Content}
	case "Edit":
		v = agent.EditInput{Path: in.FilePath, OldString: in.OldString, NewString: in.NewString, ReplaceAll: in.ReplaceAll}
	case "MultiEdit":
		e := agent.EditInput{Path: in.FilePath}
		if len(in.Edits) == 1 {
			e.OldString, e.NewString, e.ReplaceAll = in.Edits[0].OldString, in.Edits[0].NewString, in.Edits[0].ReplaceAll
		}
		v = e
	case "NotebookEdit":
		v = agent.EditInput{Path: in.NotebookPath, NewString: in.NewSource}
	case "Glob":
		v = agent.GlobInput{Pattern: in.Pattern, Path: in.Path}
	case "LS":
		v = agent.GlobInput{Pattern: "*", Path: in.Path}
	case "Grep":
		v = agent.GrepInput{Pattern: in.Pattern, Path: in.Path, Glob: in.Glob}
	case "WebFetch", "web_fetch":
		v = agent.FetchInput{URL: in.URL, Prompt: in.Prompt}
	case "WebSearch", "web_search":
		v = agent.SearchInput{Query: in.Query}
	case "Task", "Agent":
		v = agent.TaskInput{Description: in.Description, Prompt: in.Prompt, Agent: in.SubagentType}
	case "TodoWrite":
		items := make([]agent.TodoItem, 0, len(in.Todos))
		for _, t := range in.Todos {
			items = append(items, agent.TodoItem{Content: t.Content, Status: agent.TodoStatus(t.Status), Priority: agent.TodoPriority(t.Priority)})
		}
		v = agent.TodoInput{Todos: items}
	case "TaskCreate":
		v = agent.TodoInput{Todos: []agent.TodoItem{{Content: in.Subject, Status: agent.TodoPending}}}
	case "TaskUpdate":
		st := agent.TodoStatus(in.Status)
		if in.Status == "deleted" {
			st = agent.TodoCancelled
		}
		v = agent.TodoInput{Todos: []agent.TodoItem{{ID: in.TaskID, Content: in.Subject, Status: st}}}
	case "TaskGet":
		v = agent.TodoInput{Todos: []agent.TodoItem{{ID: in.TaskID}}}
	case "TaskList":
		v = agent.TodoInput{Todos: []agent.TodoItem{}}
	case "AskUserQuestion":
		v = agent.QuestionInput{Questions: questionRequest("", raw).Questions}
	case "ExitPlanMode", "EnterPlanMode":
		v = agent.PlanInput{Plan: in.Plan}
	default:
		if !json.Valid(raw) {
			return json.RawMessage(`{}`)
		}
		return objectOrEmpty(raw)
	}
	return agent.EncodeInput(v)
}

// toolMeta is the part metadata of a call of Claude's tool name: Claude's
// name and, when it differs from the canonical one, Claude's input.
func toolMeta(name string, raw json.RawMessage) agent.Object {
	return agent.ToolMetadata(name, raw, canonicalInput(name, raw))
}

// isAgentTool reports whether the tool starts a subagent (Claude 2.1 offers
// "Agent" to the model and lists it as "Task").
func isAgentTool(name string) bool { return name == "Agent" || name == "Task" }

// toolPatterns lists what a tool call accesses, for permission rules: the
// patterns of the canonical tool (agent.ToolPatterns: the command, the
// path, …), else Claude's name of the tool, followed by the skill's name
// for Skill ("Skill release-notes", which the rule "other:Skill *" matches).
func toolPatterns(name string, raw json.RawMessage) []string {
	if p, ok := agent.ToolPatterns(canonicalTool(name), canonicalInput(name, objectOrEmpty(raw))); ok {
		return p
	}
	if s := parseInput(raw).Skill; name == "Skill" && s != "" {
		return []string{name + " " + s}
	}
	return []string{name}
}

// toolTitle is a short human-readable title of a call.
func toolTitle(name string, in toolInput) string {
	switch name {
	case "Bash":
		if in.Description != "" {
			return in.Description
		}
		return firstLine(in.Command, 80)
	case "Edit", "MultiEdit", "Write", "Read":
		return in.FilePath
	case "NotebookEdit":
		return in.NotebookPath
	case "Glob", "Grep":
		return in.Pattern
	case "LS":
		return in.Path
	case "WebFetch":
		return in.URL
	case "WebSearch":
		return in.Query
	case "Task", "Agent":
		return in.Description
	case "TodoWrite":
		return fmt.Sprintf("%d todos", len(in.Todos))
	case "Skill":
		return in.Skill
	case "TaskCreate":
		return in.Subject
	}
	return ""
}

// objectOrEmpty returns raw when it is a JSON object, else {}.
func objectOrEmpty(raw json.RawMessage) json.RawMessage {
	if isObject(raw) {
		return raw
	}
	return json.RawMessage(`{}`)
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// decodeValue decodes any JSON value with numbers as json.Number, the
// convention of agent.Object.
func decodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// permissionRequest builds the request of a blocked tool: kind and patterns
// from the tool and its input, "always" patterns from Claude's permission
// suggestions (rules it would add on "always allow"), the suggestions
// themselves and Claude's reasons in metadata.
func permissionRequest(id, name string, input json.RawMessage, req *controlRequest) *agent.PermissionRequest {
	pr := &agent.PermissionRequest{ID: id, Permission: canonicalTool(name), Patterns: toolPatterns(name, input),
		Always: []string{}, Metadata: agent.Object{"tool": name}}
	if req == nil {
		return pr
	}
	if len(req.PermissionSuggestions) > 0 && string(req.PermissionSuggestions) != "null" {
		var sugg []permissionSuggestion
		if json.Unmarshal(req.PermissionSuggestions, &sugg) == nil {
			for _, s := range sugg {
				if s.Type != "addRules" || s.Behavior != "allow" {
					continue
				}
				for _, r := range s.Rules {
					p := r.RuleContent
					if p == "" {
						p = "*"
					}
					pr.Always = append(pr.Always, p)
				}
			}
		}
		if v, err := decodeValue(req.PermissionSuggestions); err == nil {
			pr.Metadata["suggestions"] = v
		}
	}
	if req.BlockedPath != "" {
		pr.Metadata["blockedPath"] = req.BlockedPath
	}
	if req.Description != "" {
		pr.Metadata["description"] = req.Description
	}
	if req.DecisionReason != "" {
		pr.Metadata["decisionReason"] = req.DecisionReason
	}
	return pr
}

// questionRequest builds the question block of an AskUserQuestion call.
func questionRequest(id string, input json.RawMessage) *agent.QuestionRequest {
	var in questionInput
	_ = json.Unmarshal(objectOrEmpty(input), &in)
	q := &agent.QuestionRequest{ID: id, Questions: []agent.QuestionInfo{}}
	for _, qq := range in.Questions {
		info := agent.QuestionInfo{Question: qq.Question, Header: qq.Header, Options: []agent.QuestionOption{}, Multiple: qq.MultiSelect}
		for _, o := range qq.Options {
			info.Options = append(info.Options, agent.QuestionOption{Label: o.Label, Description: o.Description})
		}
		q.Questions = append(q.Questions, info)
	}
	return q
}

// questionAnswers reads the answers Claude records for an AskUserQuestion
// call ({"answers": {question text: answer}}) in question order. An answer
// equal to an option label is that label; for a multi-select question a
// ", "-separated list of labels is split; anything else is a free-text
// answer kept whole.
func questionAnswers(questionsInput, answersFrom json.RawMessage) ([][]string, bool) {
	var qs, as questionInput
	_ = json.Unmarshal(objectOrEmpty(questionsInput), &qs)
	if json.Unmarshal(objectOrEmpty(answersFrom), &as) != nil || as.Answers == nil {
		return nil, false
	}
	if len(qs.Questions) == 0 {
		qs.Questions = as.Questions
	}
	out := make([][]string, 0, len(qs.Questions))
	for _, q := range qs.Questions {
		a, ok := as.Answers[q.Question]
		if !ok || a == "" {
			out = append(out, []string{})
			continue
		}
		labels := map[string]bool{}
		for _, o := range q.Options {
			labels[o.Label] = true
		}
		if labels[a] || q.MultiSelect == nil || !*q.MultiSelect {
			out = append(out, []string{a})
			continue
		}
		parts := strings.Split(a, ", ")
		all := true
		for _, p := range parts {
			all = all && labels[p]
		}
		if all {
			out = append(out, parts)
		} else {
			out = append(out, []string{a})
		}
	}
	return out, true
}

// todoStatus maps a Claude todo status; ok is false for an unknown one.
func todoStatus(s string) (agent.TodoStatus, bool) {
	switch st := agent.TodoStatus(s); st {
	case agent.TodoPending, agent.TodoInProgress, agent.TodoCompleted, agent.TodoCancelled:
		return st, true
	}
	return "", false
}

// todoPriority keeps a priority Claude gave (TodoWrite before 2.x had
// one). Claude 2.x todos and tasks have none, while the transcript model
// requires one: they get medium, the neutral middle, not a claim of urgency.
func todoPriority(s string) agent.TodoPriority {
	switch p := agent.TodoPriority(s); p {
	case agent.PriorityHigh, agent.PriorityMedium, agent.PriorityLow:
		return p
	}
	return agent.PriorityMedium
}

var taskCreatedRE = regexp.MustCompile(`Task #(\S+) created`)

// createdTaskID finds the id of a task TaskCreate made: the structured
// result's task.id, else "Task #N created" in its text.
func createdTaskID(structured json.RawMessage, output string) string {
	var r struct {
		Task struct {
			ID json.RawMessage `json:"id"`
		} `json:"task"`
	}
	if isObject(structured) && json.Unmarshal(structured, &r) == nil && len(r.Task.ID) > 0 {
		var s string
		if json.Unmarshal(r.Task.ID, &s) == nil && s != "" {
			return s
		}
		if n := strings.TrimSpace(string(r.Task.ID)); n != "" && n != "null" && n[0] != '"' {
			return n
		}
	}
	if m := taskCreatedRE.FindStringSubmatch(output); m != nil {
		return m[1]
	}
	return ""
}
