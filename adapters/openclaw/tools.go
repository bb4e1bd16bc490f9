package openclaw

import (
	"encoding/json"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// This file maps OpenClaw's tool calls to the canonical tool vocabulary
// (docs/ARCHITECTURE.md, section "Tools"). The gateway's tool stream gives
// the agent's own tool name and its arguments (data.name, data.args); the
// built-in tools and their arguments, from the openclaw package:
//
//	exec          {command, workdir?, env?, timeout? (seconds), yieldMs?, background?, pty?}
//	bash          the older name of exec
//	read          {path, offset?, limit?}  (file_path is accepted too)
//	write         {path, content}
//	edit          {path, oldText, newText}  (old_string/new_string too)
//	apply_patch   {input}  a patch of one or more files
//	web_search    {query}
//	web_fetch     {url}
//	sessions_spawn {task, label?, agentId?}  a subagent run
//
// Any other tool (browser, canvas, nodes, cron, message, memory tools, a
// plugin's) is "other" with its arguments as they came; a tool whose name
// is "<server>__<tool>" (an MCP server's tool as bundled MCP names it) is
// mcp:<server>/<tool>.

// canonicalTool returns the canonical name and input of a call of OpenClaw
// tool name with arguments args (a JSON object, or nil when unknown).
func canonicalTool(name string, args json.RawMessage) (string, json.RawMessage) {
	var a map[string]json.RawMessage
	_ = json.Unmarshal(args, &a)
	str := func(keys ...string) string {
		for _, k := range keys {
			var s string
			if json.Unmarshal(a[k], &s) == nil && s != "" {
				return s
			}
		}
		return ""
	}
	strp := func(keys ...string) *string {
		for _, k := range keys {
			var s string
			if raw, ok := a[k]; ok && json.Unmarshal(raw, &s) == nil {
				return &s
			}
		}
		return nil
	}
	num := func(key string) *int64 {
		var f float64
		if json.Unmarshal(a[key], &f) != nil {
			return nil
		}
		n := int64(f)
		return &n
	}
	switch strings.ToLower(name) {
	case "exec", "bash":
		in := agent.BashInput{Command: str("command", "cmd"), Cwd: str("workdir", "cwd")}
		if t := num("timeout"); t != nil {
			ms := *t * 1000 // OpenClaw counts exec timeouts in seconds
			in.Timeout = &ms
		}
		return agent.ToolBash, agent.EncodeInput(in)
	case "read":
		return agent.ToolRead, agent.EncodeInput(agent.ReadInput{Path: str("path", "file_path"), Offset: num("offset"), Limit: num("limit")})
	case "write":
		return agent.ToolWrite, agent.EncodeInput(agent.WriteInput{Path: str("path", "file_path"), Content: strp("content")})
	case "edit":
		return agent.ToolEdit, agent.EncodeInput(agent.EditInput{Path: str("path", "file_path"),
			OldString: strp("oldText", "old_string"), NewString: strp("newText", "new_string")})
	case "apply_patch":
		return agent.ToolEdit, agent.EncodeInput(agent.EditInput{Path: patchPath(str("input", "patch")), Diff: str("input", "patch")})
	case "web_search":
		return agent.ToolSearch, agent.EncodeInput(agent.SearchInput{Query: str("query")})
	case "web_fetch":
		return agent.ToolFetch, agent.EncodeInput(agent.FetchInput{URL: str("url")})
	case "sessions_spawn":
		return agent.ToolTask, agent.EncodeInput(agent.TaskInput{Description: str("label"), Prompt: str("task"), Agent: str("agentId")})
	}
	if server, tool, ok := strings.Cut(name, "__"); ok && server != "" && tool != "" {
		return agent.MCPTool(server, tool), objectOrEmpty(args)
	}
	return agent.ToolOther, objectOrEmpty(args)
}

// patchPath is the first file an apply_patch input names ("*** Update
// File: <path>", "*** Add File: …"), "" when none.
func patchPath(patch string) string {
	for line := range strings.SplitSeq(patch, "\n") {
		for _, p := range []string{"*** Update File: ", "*** Add File: ", "*** Delete File: "} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), p); ok {
				return strings.TrimSpace(rest)
			}
		}
	}
	return ""
}

// objectOrEmpty is args when it is a JSON object, else {}.
func objectOrEmpty(args json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil || m == nil {
		return json.RawMessage(`{}`)
	}
	return args
}

// resultText is the text of a tool result as the gateway streams it: a
// string, an {content: [{type:"text", text}, …]} result of the agent
// runtime, or {text}/{output}; other JSON is kept as its text.
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Text   *string `json:"text"`
		Output *string `json:"output"`
	}
	if json.Unmarshal(raw, &r) == nil {
		switch {
		case len(r.Content) > 0:
			var parts []string
			for _, c := range r.Content {
				if c.Type == "text" || c.Type == "" {
					parts = append(parts, c.Text)
				}
			}
			return strings.Join(parts, "\n")
		case r.Text != nil:
			return *r.Text
		case r.Output != nil:
			return *r.Output
		}
	}
	return string(raw)
}
