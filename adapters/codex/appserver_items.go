package codex

import (
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"sort"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/agent"
)

// itemHead is what every ThreadItem has, plus the fields of the variants
// this decoder reads (one flat struct; absent fields stay zero).
type itemHead struct {
	Type string `json:"type"`
	ID   string `json:"id"`

	// userMessage
	Content json.RawMessage `json:"content"`
	// agentMessage, plan
	Text *string `json:"text"`
	// reasoning
	Summary []string `json:"summary"`
	// commandExecution
	Command          string          `json:"command"`
	Cwd              string          `json:"cwd"`
	Status           string          `json:"status"`
	CommandActions   json.RawMessage `json:"commandActions"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int64          `json:"exitCode"`
	DurationMs       *int64          `json:"durationMs"`
	Source           string          `json:"source"`
	// fileChange
	Changes []fileUpdate `json:"changes"`
	// mcpToolCall, dynamicToolCall
	Server       string          `json:"server"`
	Tool         string          `json:"tool"`
	Namespace    *string         `json:"namespace"`
	Arguments    json.RawMessage `json:"arguments"`
	Result       json.RawMessage `json:"result"`
	Error        json.RawMessage `json:"error"`
	ContentItems json.RawMessage `json:"contentItems"`
	Success      *bool           `json:"success"`
	// collabAgentToolCall
	Prompt          *string                     `json:"prompt"`
	Model           *string                     `json:"model"`
	ReceiverThreads []string                    `json:"receiverThreadIds"`
	AgentsStates    map[string]collabAgentState `json:"agentsStates"`
	// subAgentActivity
	AgentThreadID string `json:"agentThreadId"`
	AgentPath     string `json:"agentPath"`
	Kind          string `json:"kind"`
	// webSearch
	Query   string          `json:"query"`
	Action  json.RawMessage `json:"action"`
	Results json.RawMessage `json:"results"`
	// imageView
	Path string `json:"path"`
	// imageGeneration
	SavedPath     *string         `json:"savedPath"`
	RevisedPrompt *string         `json:"revisedPrompt"`
	Failure       json.RawMessage `json:"failure"`
	// exitedReviewMode
	Review string `json:"review"`
}

type collabAgentState struct {
	Status  string  `json:"status"`
	Message *string `json:"message"`
}

type fileUpdate struct {
	Path string          `json:"path"`
	Diff string          `json:"diff"`
	Kind json.RawMessage `json:"kind"`
}

// ignoredItem says why an item type is shown by nothing.
func ignoredItem(kind string) (string, bool) {
	switch kind {
	case "hookPrompt":
		return "context injected by a hook, not typed by the user", true
	case "functionCallOutput":
		return "raw model-facing output of a call whose own item is shown", true
	case "enteredReviewMode":
		return "mode marker; the review arrives with exitedReviewMode", true
	}
	return "", false
}

// item maps one ThreadItem, seen in item/started (completed false) or
// item/completed / a turn's final item list (completed true).
func (d *AppServerDecoder) item(o *out, th *thread, raw json.RawMessage, completed bool, frame []byte) {
	var it itemHead
	if err := json.Unmarshal(raw, &it); err != nil {
		d.drop(o, "item", agent.DropInvalidField, err.Error(), frame)
		return
	}
	if it.ID == "" {
		d.drop(o, "item:"+it.Type, agent.DropMissingID, "item without id", frame)
		return
	}
	was, seen := th.items[it.ID]
	if was {
		return // already completed
	}
	th.items[it.ID] = completed
	base := agent.EventBase{Session: th.session}
	if _, ok := ignoredItem(it.Type); ok {
		return
	}
	switch it.Type {
	case "userMessage":
		if seen {
			return
		}
		text, files := userContent(it.Content)
		o.add(&agent.UserPrompt{EventBase: base, PromptID: it.ID, Text: text, Files: files})
	case "agentMessage", "plan":
		if it.Text != nil && *it.Text != "" && (completed || !seen) {
			o.add(&agent.TextFinal{EventBase: base, Block: it.ID, Text: *it.Text})
		}
	case "exitedReviewMode":
		if it.Review != "" {
			o.add(&agent.TextFinal{EventBase: base, Block: it.ID, Text: it.Review})
		}
	case "reasoning":
		if !completed {
			return
		}
		if len(it.Summary) > 0 {
			o.add(&agent.ReasoningFinal{EventBase: base, Block: it.ID, Text: strings.Join(it.Summary, "\n\n")})
		}
		var content []string
		_ = json.Unmarshal(it.Content, &content)
		if len(content) > 0 {
			o.add(&agent.ReasoningFinal{EventBase: base, Block: it.ID + "/raw", Text: strings.Join(content, "\n\n")})
		}
	case "contextCompaction":
		th.compacts++
		if !seen {
			o.add(&agent.Compaction{EventBase: base, ID: it.ID, Auto: true})
		}
	case "commandExecution":
		c := d.callFor(th, it.ID)
		c.tool = "bash"
		in := map[string]any{"command": it.Command}
		if it.Cwd != "" {
			in["cwd"] = it.Cwd
		}
		meta := agent.Object{}
		if len(it.CommandActions) > 0 && string(it.CommandActions) != "null" {
			meta["commandActions"] = it.CommandActions
		}
		d.announce(o, c, base, it.Command, mustObject(in), meta)
		if !completed {
			d.run(o, c, base)
			return
		}
		res := agent.Object{}
		if it.ExitCode != nil {
			res["exitCode"] = *it.ExitCode
		}
		if it.DurationMs != nil {
			res["durationMs"] = *it.DurationMs
		}
		output := c.out.String()
		if it.AggregatedOutput != nil {
			output = *it.AggregatedOutput
		}
		switch it.Status {
		case "completed":
			d.complete(o, c, base, output, res)
		case "declined":
			d.fail(o, c, base, "declined", res)
		default: // failed, or an unknown status at completion
			msg := output
			if strings.TrimSpace(msg) == "" {
				msg = "command failed"
				if it.ExitCode != nil {
					msg = fmt.Sprintf("command failed with exit code %d", *it.ExitCode)
				}
			}
			if it.Status != "failed" {
				res["status"] = it.Status
			}
			d.fail(o, c, base, msg, res)
		}
	case "fileChange":
		c := d.callFor(th, it.ID)
		c.tool = "edit"
		input, meta, paths := fileChangeDetail(it.Changes)
		c.paths, c.input = paths, input
		d.announce(o, c, base, strings.Join(paths, ", "), input, meta)
		if !completed {
			d.run(o, c, base)
			return
		}
		switch it.Status {
		case "completed":
			d.complete(o, c, base, c.out.String(), meta)
		case "declined":
			d.fail(o, c, base, "declined", meta)
		default:
			msg := c.out.String()
			if msg == "" {
				msg = "patch failed to apply"
			}
			d.fail(o, c, base, msg, meta)
		}
	case "mcpToolCall", "dynamicToolCall":
		c := d.callFor(th, it.ID)
		name := it.Tool
		if it.Type == "mcpToolCall" {
			name = it.Server + "_" + it.Tool
		} else if it.Namespace != nil && *it.Namespace != "" {
			name = *it.Namespace + "_" + it.Tool
		}
		c.tool = name
		d.announce(o, c, base, it.Tool, objectOr(it.Arguments), nil)
		if !completed {
			d.run(o, c, base)
			return
		}
		meta := agent.Object{}
		if it.DurationMs != nil {
			meta["durationMs"] = *it.DurationMs
		}
		var text string
		if it.Type == "mcpToolCall" {
			var res struct {
				Content    []json.RawMessage `json:"content"`
				Structured json.RawMessage   `json:"structuredContent"`
			}
			_ = json.Unmarshal(it.Result, &res)
			text = contentText(res.Content)
			if len(res.Structured) > 0 && string(res.Structured) != "null" {
				meta["structuredContent"] = res.Structured
			}
		} else {
			var items []json.RawMessage
			_ = json.Unmarshal(it.ContentItems, &items)
			text = contentText(items)
		}
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(it.Error, &e)
		if it.Status == "completed" && (it.Success == nil || *it.Success) {
			d.complete(o, c, base, text, meta)
		} else {
			msg := e.Message
			if msg == "" {
				msg = text
			}
			if msg == "" {
				msg = "tool call " + it.Status
			}
			d.fail(o, c, base, msg, meta)
		}
	case "collabAgentToolCall":
		c := d.callFor(th, it.ID)
		c.tool = "task"
		in := map[string]any{"tool": it.Tool}
		prompt := ""
		if it.Prompt != nil {
			prompt = *it.Prompt
			in["prompt"] = prompt
		}
		if it.Model != nil {
			in["model"] = *it.Model
		}
		if len(it.ReceiverThreads) > 0 {
			in["receiverThreadIds"] = it.ReceiverThreads
		}
		title := it.Tool
		if prompt != "" {
			title = firstLine(prompt, 80)
		}
		d.announce(o, c, base, title, mustObject(in), nil)
		for _, tid := range it.ReceiverThreads {
			d.child(o, th, tid, it.ID, firstLine(prompt, 80), "codex", prompt)
		}
		d.endChildren(o, it.AgentsStates)
		if !completed {
			d.run(o, c, base)
			return
		}
		var msgs []string
		keys := make([]string, 0, len(it.AgentsStates))
		for k := range it.AgentsStates {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s := it.AgentsStates[k]; s.Message != nil && *s.Message != "" {
				msgs = append(msgs, *s.Message)
			}
		}
		text := strings.Join(msgs, "\n\n")
		if it.Status == "completed" {
			d.complete(o, c, base, text, nil)
		} else {
			if text == "" {
				text = "subagent call " + it.Status
			}
			d.fail(o, c, base, text, nil)
		}
	case "subAgentActivity":
		if it.AgentThreadID == "" {
			d.drop(o, "item:subAgentActivity", agent.DropMissingID, "subAgentActivity without agentThreadId", frame)
			return
		}
		switch it.Kind {
		case "started", "interacted":
			d.child(o, th, it.AgentThreadID, "", it.AgentPath, "codex", "")
		case "completed", "interrupted":
			d.child(o, th, it.AgentThreadID, "", it.AgentPath, "codex", "")
			d.endChildren(o, map[string]collabAgentState{it.AgentThreadID: {Status: "completed"}})
		}
	case "webSearch":
		c := d.callFor(th, it.ID)
		c.tool = "websearch"
		in := map[string]any{"query": it.Query}
		if len(it.Action) > 0 && string(it.Action) != "null" {
			in["action"] = it.Action
		}
		d.announce(o, c, base, it.Query, mustObject(in), nil)
		d.run(o, c, base)
		if completed {
			meta := agent.Object{}
			if len(it.Results) > 0 && string(it.Results) != "null" {
				meta["results"] = it.Results
			}
			d.complete(o, c, base, "", meta)
		}
	case "imageView", "sleep", "imageGeneration":
		c := d.callFor(th, it.ID)
		in := map[string]any{}
		title := ""
		switch it.Type {
		case "imageView":
			c.tool, in["path"], title = "read", it.Path, it.Path
		case "sleep":
			c.tool, in["durationMs"], title = "sleep", it.DurationMs, "sleep"
		default:
			c.tool, title = "image_generation", "image generation"
			if it.RevisedPrompt != nil {
				in["prompt"] = *it.RevisedPrompt
			}
		}
		d.announce(o, c, base, title, mustObject(in), nil)
		d.run(o, c, base)
		if !completed {
			return
		}
		if it.Type == "imageGeneration" && (it.Status == "failed" || (len(it.Failure) > 0 && string(it.Failure) != "null")) {
			d.fail(o, c, base, "image generation failed: "+string(it.Failure), nil)
			return
		}
		outText := ""
		if it.SavedPath != nil {
			outText = *it.SavedPath
		}
		d.complete(o, c, base, outText, nil)
	default:
		if !seen {
			d.drop(o, "item:"+it.Type, agent.DropUnknownType, "thread item type unknown to this version", frame)
		}
	}
}

// endChildren closes child sessions whose agent reached a final state.
func (d *AppServerDecoder) endChildren(o *out, states map[string]collabAgentState) {
	keys := make([]string, 0, len(states))
	for k := range states {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch states[k].Status {
		case "completed", "errored", "shutdown", "interrupted", "notFound":
			if th := d.threads[k]; th != nil && th.session != "" && !th.ended {
				th.ended = true
				if th.open {
					d.endTurn(o, th, agent.TurnCompleted, "")
				}
				o.add(&agent.SubagentEnded{Child: k})
			}
		}
	}
}

// announce emits the ToolCall of a call once (and again when its input
// becomes known later).
func (d *AppServerDecoder) announce(o *out, c *call, base agent.EventBase, title string, input json.RawMessage, meta agent.Object) {
	if c.shown && (input == nil || string(input) == string(c.input)) {
		return
	}
	c.shown = true
	c.input = input
	if len(meta) == 0 {
		meta = nil
	}
	o.add(&agent.ToolCall{EventBase: base, CallID: c.id, Tool: c.tool, Title: title, Input: input, Metadata: meta})
}

// run marks the call running unless it waits for a decision.
func (d *AppServerDecoder) run(o *out, c *call, base agent.EventBase) {
	if c.running || c.blocked || c.done {
		return
	}
	c.running = true
	o.add(&agent.ToolRunning{EventBase: base, CallID: c.id})
}

func (d *AppServerDecoder) complete(o *out, c *call, base agent.EventBase, output string, meta agent.Object) {
	if c.done {
		return
	}
	d.run(o, c, base)
	c.done = true
	if len(meta) == 0 {
		meta = nil
	}
	o.add(&agent.ToolCompleted{EventBase: base, CallID: c.id, Output: output, Metadata: meta})
	delete(d.calls, c.session+"\x00"+c.id)
}

func (d *AppServerDecoder) fail(o *out, c *call, base agent.EventBase, msg string, meta agent.Object) {
	if c.done {
		return
	}
	c.done = true
	if len(meta) == 0 {
		meta = nil
	}
	o.add(&agent.ToolFailed{EventBase: base, CallID: c.id, Error: msg, Metadata: meta})
	delete(d.calls, c.session+"\x00"+c.id)
}

// fileChangeDetail renders a fileChange's changes as tool input
// ({"changes":[{path, kind}]}), metadata ({"diff": all diffs, "files":
// [{path, kind, diff, movePath?}]}) and the list of paths.
func fileChangeDetail(changes []fileUpdate) (json.RawMessage, agent.Object, []string) {
	type inChange struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	ins := make([]inChange, 0, len(changes))
	files := make([]any, 0, len(changes))
	paths := make([]string, 0, len(changes))
	var diff strings.Builder
	for _, ch := range changes {
		var k struct {
			Type     string  `json:"type"`
			MovePath *string `json:"move_path"`
		}
		if json.Unmarshal(ch.Kind, &k) != nil {
			var s string
			_ = json.Unmarshal(ch.Kind, &s)
			k.Type = s
		}
		ins = append(ins, inChange{Path: ch.Path, Kind: k.Type})
		f := map[string]any{"path": ch.Path, "kind": k.Type, "diff": ch.Diff}
		if k.MovePath != nil {
			f["movePath"] = *k.MovePath
		}
		files = append(files, f)
		paths = append(paths, ch.Path)
		if ch.Diff != "" {
			if diff.Len() > 0 && !strings.HasSuffix(diff.String(), "\n") {
				diff.WriteByte('\n')
			}
			diff.WriteString(ch.Diff)
		}
	}
	input := mustObject(map[string]any{"changes": ins})
	meta := agent.Object{"files": files}
	if diff.Len() > 0 {
		meta["diff"] = diff.String()
	}
	return input, meta, paths
}

// userContent flattens a userMessage's UserInput list: text parts joined
// by blank lines, images as files.
func userContent(raw json.RawMessage) (string, []agent.PromptFile) {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		URL  string `json:"url"`
		Path string `json:"path"`
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &parts)
	var texts []string
	var files []agent.PromptFile
	for _, p := range parts {
		switch p.Type {
		case "text":
			texts = append(texts, p.Text)
		case "image":
			files = append(files, agent.PromptFile{Mime: dataURLMime(p.URL), URL: p.URL})
		case "localImage":
			files = append(files, agent.PromptFile{Mime: mimeOf(p.Path), Filename: path.Base(p.Path), URL: "file://" + p.Path})
		case "mention", "skill":
			if p.Path != "" {
				texts = append(texts, "@"+p.Path)
			}
		}
	}
	return strings.Join(texts, "\n\n"), files
}

func dataURLMime(u string) string {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if i := strings.IndexAny(rest, ";,"); i > 0 {
			return rest[:i]
		}
	}
	return mimeOf(u)
}

func mimeOf(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		if i := strings.IndexByte(t, ';'); i > 0 {
			t = t[:i]
		}
		return t
	}
	return "application/octet-stream"
}

// contentText joins the text of MCP-style content items.
func contentText(items []json.RawMessage) string {
	var texts []string
	for _, raw := range items {
		var c struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &c) == nil && (c.Type == "text" || c.Type == "inputText") {
			texts = append(texts, c.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// request maps a Codex → happy request (approvals, questions).
func (d *AppServerDecoder) request(o *out, m jsonrpc.Message) {
	key := idString(mustObject(m.ID))
	var p struct {
		scoped
		CallID      string          `json:"callId"`
		Command     json.RawMessage `json:"command"`
		Cwd         string          `json:"cwd"`
		Reason      *string         `json:"reason"`
		Actions     json.RawMessage `json:"commandActions"`
		Available   json.RawMessage `json:"availableDecisions"`
		Amendment   json.RawMessage `json:"proposedExecpolicyAmendment"`
		GrantRoot   *string         `json:"grantRoot"`
		FileChanges map[string]any  `json:"fileChanges"`
		Conv        string          `json:"conversationId"`
		Questions   []struct {
			ID       string `json:"id"`
			Header   string `json:"header"`
			Question string `json:"question"`
			IsOther  bool   `json:"isOther"`
			Options  []struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			} `json:"options"`
		} `json:"questions"`
	}
	if len(m.Params) == 0 || m.Params[0] != '{' || json.Unmarshal(m.Params, &p) != nil {
		d.drop(o, m.Method, agent.DropInvalidField, "request params are not an object of the expected shape", m.Raw)
		return
	}
	if r := d.received[key]; r != nil && !r.answered {
		// A second request under the id of one still waiting: keep the
		// first (its answer is matched by id), refuse this one.
		d.drop(o, m.Method, agent.DropInvalidField, "request id "+key+" is already pending", m.Raw)
		return
	}
	threadID := p.ThreadID
	if threadID == "" {
		threadID = p.Conv
	}
	th := d.threadOf(threadID)
	if th == nil {
		th = d.threads[d.main]
	}
	if th == nil {
		d.drop(o, m.Method, agent.DropOrphan, "request for an unknown thread", m.Raw)
		return
	}
	base := agent.EventBase{Session: th.session}
	meta := agent.Object{}
	if p.Reason != nil && *p.Reason != "" {
		meta["reason"] = *p.Reason
	}
	switch m.Method {
	case "item/commandExecution/requestApproval", "execCommandApproval":
		callID := p.ItemID
		if m.Method == "execCommandApproval" {
			callID = p.CallID
		}
		cmd := commandString(p.Command)
		if callID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "approval request without item/call id", m.Raw)
			return
		}
		if p.Cwd != "" {
			meta["cwd"] = p.Cwd
		}
		for k, v := range map[string]json.RawMessage{"commandActions": p.Actions, "availableDecisions": p.Available, "proposedExecpolicyAmendment": p.Amendment} {
			if len(v) > 0 && string(v) != "null" {
				meta[k] = v
			}
		}
		var patterns []string
		if cmd != "" {
			patterns = []string{cmd}
		}
		c := d.callFor(th, callID)
		if c.tool == "" {
			c.tool = "bash"
		}
		in := map[string]any{"command": cmd}
		if p.Cwd != "" {
			in["cwd"] = p.Cwd
		}
		d.block(o, c, base, key, m.Method, mustObject(in), &agent.PermissionRequest{Permission: "bash", Patterns: patterns, Always: patterns, Metadata: meta})
	case "item/fileChange/requestApproval", "applyPatchApproval":
		callID := p.ItemID
		if m.Method == "applyPatchApproval" {
			callID = p.CallID
		}
		if callID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "approval request without item/call id", m.Raw)
			return
		}
		if p.GrantRoot != nil && *p.GrantRoot != "" {
			meta["grantRoot"] = *p.GrantRoot
		}
		c := d.callFor(th, callID)
		if c.tool == "" {
			c.tool = "edit"
		}
		paths := c.paths
		if len(p.FileChanges) > 0 {
			paths = paths[:0:0]
			for k := range p.FileChanges {
				paths = append(paths, k)
			}
			sort.Strings(paths)
			meta["fileChanges"] = p.FileChanges
		}
		var input json.RawMessage
		if !c.shown {
			input = mustObject(map[string]any{"paths": paths})
		}
		d.block(o, c, base, key, m.Method, input, &agent.PermissionRequest{Permission: "edit", Patterns: paths, Always: paths, Metadata: meta})
	case "item/tool/requestUserInput":
		if p.ItemID == "" || len(p.Questions) == 0 {
			d.drop(o, m.Method, agent.DropInvalidField, "question request without itemId or questions", m.Raw)
			return
		}
		c := d.callFor(th, p.ItemID)
		if c.tool == "" {
			c.tool = "question"
		}
		q := &agent.QuestionRequest{}
		var qids []string
		for _, x := range p.Questions {
			info := agent.QuestionInfo{Question: x.Question, Header: x.Header, Options: []agent.QuestionOption{}}
			for _, op := range x.Options {
				info.Options = append(info.Options, agent.QuestionOption{Label: op.Label, Description: op.Description})
			}
			custom := x.IsOther || len(x.Options) == 0
			info.Custom = &custom
			q.Questions = append(q.Questions, info)
			qids = append(qids, x.ID)
		}
		d.received[key] = &srvReq{method: m.Method, session: th.session, callID: p.ItemID, qids: qids}
		c.blocked = true
		o.add(&agent.ToolBlocked{EventBase: base, CallID: p.ItemID, Tool: c.tool, Question: q})
	case "mcpServer/elicitation/request", "item/permissions/requestApproval", "item/tool/call",
		"account/chatgptAuthTokens/refresh", "attestation/generate":
		// Known, and refused by the live client with a JSON-RPC error.
		d.received[key] = &srvReq{method: m.Method, session: th.session}
	default:
		d.drop(o, m.Method, agent.DropUnknownType, "server request unknown to this version", m.Raw)
	}
}

func (d *AppServerDecoder) block(o *out, c *call, base agent.EventBase, key, method string, input json.RawMessage, perm *agent.PermissionRequest) {
	d.received[key] = &srvReq{method: method, session: c.session, callID: c.id}
	if c.done {
		return
	}
	c.blocked = true
	if c.shown {
		input = nil
	}
	o.add(&agent.ToolBlocked{EventBase: base, CallID: c.id, Tool: c.tool, Input: input, Permission: perm})
}

// commandString renders a command given as a string or an argv list.
func commandString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		return shellJoin(argv)
	}
	return ""
}

// shellJoin quotes argv the way a POSIX shell would read it back.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r == '/' || r == '-' || r == '_' || r == '.' || r == '=' || r == ':' || r == ',' ||
				(r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'"'"'`) + "'"
	}
	return strings.Join(out, " ")
}

// c2a maps happy's own frames: the requests it sent (remembered, to read
// their responses) and its answers to Codex's requests.
func (d *AppServerDecoder) c2a(o *out, f jsonrpc.Frame) {
	if f.Msg == nil {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(o, kind, reason, "own frame: "+detail, f.Data)
		return
	}
	m := *f.Msg
	switch m.Kind {
	case jsonrpc.KindRequest:
		var p struct {
			ThreadID string `json:"threadId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		d.sent[idString(mustObject(m.ID))] = sentReq{method: m.Method, thread: p.ThreadID}
	case jsonrpc.KindResponse:
		key := idString(mustObject(m.ID))
		r := d.received[key]
		if r == nil || r.answered {
			return
		}
		r.answered = true
		if r.callID == "" {
			return
		}
		c := d.calls[r.session+"\x00"+r.callID]
		base := agent.EventBase{Session: r.session}
		if m.Error != nil {
			if c != nil {
				c.blocked = false
			}
			o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
			return
		}
		if r.method == "item/tool/requestUserInput" {
			var res struct {
				Answers map[string]struct {
					Answers []string `json:"answers"`
				} `json:"answers"`
			}
			_ = json.Unmarshal(m.Result, &res)
			answers := make([][]string, len(r.qids))
			for i, q := range r.qids {
				answers[i] = append([]string{}, res.Answers[q].Answers...)
			}
			if c != nil {
				c.blocked = false
			}
			o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Answers: answers})
			return
		}
		var res struct {
			Decision json.RawMessage `json:"decision"`
		}
		_ = json.Unmarshal(m.Result, &res)
		dec, reason, ok := decision(res.Decision)
		if !ok {
			r.answered = false
			d.drop(o, "decision", agent.DropUnknownDecision, "answer "+string(res.Decision)+" is not a known decision", f.Data)
			return
		}
		if c != nil {
			c.blocked = false
			c.running = dec != agent.DecisionReject
		}
		o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Decision: dec, Reason: reason})
	}
}

// response maps Codex's responses to happy's requests.
func (d *AppServerDecoder) response(o *out, m jsonrpc.Message) {
	key := idString(mustObject(m.ID))
	s, ok := d.sent[key]
	if !ok {
		return // a request this decoder did not see (the log started later)
	}
	delete(d.sent, key)
	if m.Error != nil {
		switch s.method {
		case "turn/start", "thread/start", "thread/resume":
			o.add(&agent.AgentError{Kind: agent.ErrorProtocol, Text: s.method + " failed: " + m.Error.Message})
		}
		return
	}
	switch s.method {
	case "thread/start", "thread/resume", "thread/fork":
		var r struct {
			Thread        threadInfo `json:"thread"`
			Model         string     `json:"model"`
			ModelProvider string     `json:"modelProvider"`
			Cwd           string     `json:"cwd"`
		}
		if json.Unmarshal(m.Result, &r) != nil || r.Thread.ID == "" {
			d.drop(o, s.method, agent.DropMissingID, "response without thread.id", m.Raw)
			return
		}
		if r.Thread.Model == "" {
			r.Thread.Model = r.Model
		}
		if r.Thread.ModelProvider == "" {
			r.Thread.ModelProvider = r.ModelProvider
		}
		if r.Thread.Cwd == "" {
			r.Thread.Cwd = r.Cwd
		}
		r.Thread.ParentThread = nil
		if d.main == "" {
			d.main = r.Thread.ID
			d.threads[r.Thread.ID] = newThread("")
		}
		d.threadStarted(o, r.Thread)
	case "turn/start":
		var r struct {
			Turn turn `json:"turn"`
		}
		if json.Unmarshal(m.Result, &r) == nil && r.Turn.ID != "" {
			if th := d.threadOf(s.thread); th != nil && (!th.open || th.turn != r.Turn.ID) && !(th.turn == r.Turn.ID) {
				d.startTurn(o, th, r.Turn.ID)
			}
		}
	case "thread/read":
		// Reconciliation: a turn that ended without turn/completed.
		var r struct {
			Thread threadInfo `json:"thread"`
		}
		if json.Unmarshal(m.Result, &r) != nil {
			d.drop(o, s.method, agent.DropInvalidField, "thread/read result without thread", m.Raw)
			return
		}
		th := d.threads[r.Thread.ID]
		if th == nil || !th.open {
			return
		}
		for _, t := range r.Thread.Turns {
			if t.ID == th.turn && t.Status != "inProgress" {
				d.settleTurn(o, th, t, m.Raw)
			}
		}
	}
}
