package codex

import (
	"encoding/json"
	"fmt"
	"mime"
	"path"
	"sort"
	"strings"

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
	it := new(itemHead)
	if err := json.Unmarshal(raw, it); err != nil {
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
	handle := appServerItems[it.Type]
	if handle == nil {
		if !seen {
			d.drop(o, "item:"+it.Type, agent.DropUnknownType, "thread item type unknown to this version", frame)
		}
		return
	}
	handle(d, itemEvent{o: o, th: th, it: *it, base: base, completed: completed, seen: seen, frame: frame})
}

// itemEvent is one ThreadItem seen, for its handler: the thread, the item,
// whether it completed and whether it was seen before, and the raw frame.
type itemEvent struct {
	o         *out
	th        *thread
	it        itemHead
	base      agent.EventBase // the thread's session
	completed bool
	seen      bool
	frame     []byte
}

// appServerItems maps every ThreadItem type the decoder maps (see the
// coverage of the package doc) to its handler; a type neither here nor in
// ignoredItem's list is dropped as unknown.
var appServerItems = map[string]func(*AppServerDecoder, itemEvent){
	"userMessage":         (*AppServerDecoder).itemUserMessage,
	"agentMessage":        (*AppServerDecoder).itemAgentMessage,
	"plan":                (*AppServerDecoder).itemAgentMessage,
	"exitedReviewMode":    (*AppServerDecoder).itemExitedReviewMode,
	"reasoning":           (*AppServerDecoder).itemReasoning,
	"contextCompaction":   (*AppServerDecoder).itemContextCompaction,
	"commandExecution":    (*AppServerDecoder).itemCommandExecution,
	"fileChange":          (*AppServerDecoder).itemFileChange,
	"mcpToolCall":         (*AppServerDecoder).itemMcpToolCall,
	"dynamicToolCall":     (*AppServerDecoder).itemMcpToolCall,
	"collabAgentToolCall": (*AppServerDecoder).itemCollabAgentToolCall,
	"subAgentActivity":    (*AppServerDecoder).itemSubAgentActivity,
	"webSearch":           (*AppServerDecoder).itemWebSearch,
	"imageView":           (*AppServerDecoder).itemImageView,
	"sleep":               (*AppServerDecoder).itemImageView,
	"imageGeneration":     (*AppServerDecoder).itemImageView,
}

func (d *AppServerDecoder) itemUserMessage(e itemEvent) {
	if e.seen {
		return
	}
	text, files := userContent(e.it.Content)
	e.o.add(&agent.UserPrompt{EventBase: e.base, PromptID: e.it.ID, Text: text, Files: files})
}

func (d *AppServerDecoder) itemAgentMessage(e itemEvent) {
	if e.it.Text != nil && *e.it.Text != "" && (e.completed || !e.seen) {
		e.o.add(&agent.TextFinal{EventBase: e.base, Block: e.it.ID, Text: *e.it.Text})
	}
}

func (d *AppServerDecoder) itemExitedReviewMode(e itemEvent) {
	if e.it.Review != "" {
		e.o.add(&agent.TextFinal{EventBase: e.base, Block: e.it.ID, Text: e.it.Review})
	}
}

func (d *AppServerDecoder) itemReasoning(e itemEvent) {
	if !e.completed {
		return
	}
	if len(e.it.Summary) > 0 {
		e.o.add(&agent.ReasoningFinal{EventBase: e.base, Block: e.it.ID, Text: strings.Join(e.it.Summary, "\n\n")})
	}
	var content []string
	_ = json.Unmarshal(e.it.Content, &content)
	if len(content) > 0 {
		e.o.add(&agent.ReasoningFinal{EventBase: e.base, Block: e.it.ID + "/raw", Text: strings.Join(content, "\n\n")})
	}
}

func (d *AppServerDecoder) itemContextCompaction(e itemEvent) {
	e.th.compacts++
	if !e.seen {
		e.o.add(&agent.Compaction{EventBase: e.base, ID: e.it.ID, Auto: true})
	}
}

func (d *AppServerDecoder) itemCommandExecution(e itemEvent) {
	c := d.callFor(e.th, e.it.ID)
	c.tool = agent.ToolBash
	cmd, wrapped := appServerCommand(mustObject(e.it.Command), e.it.CommandActions)
	input, meta := shellCall("commandExecution", cmd, wrapped, e.it.Cwd)
	if len(e.it.CommandActions) > 0 && string(e.it.CommandActions) != "null" {
		meta["commandActions"] = e.it.CommandActions
	}
	d.announce(e.o, c, e.base, cmd, input, meta)
	if !e.completed {
		d.run(e.o, c, e.base)
		return
	}
	res := agent.Object{}
	if e.it.ExitCode != nil {
		res["exitCode"] = *e.it.ExitCode
	}
	if e.it.DurationMs != nil {
		res["durationMs"] = *e.it.DurationMs
	}
	output := c.out.String()
	if e.it.AggregatedOutput != nil {
		output = *e.it.AggregatedOutput
	}
	switch e.it.Status {
	case "completed":
		d.complete(e.o, c, e.base, output, res)
	case "declined":
		d.fail(e.o, c, e.base, "declined", res)
	default: // failed, or an unknown status at completion
		msg := output
		if strings.TrimSpace(msg) == "" {
			msg = "command failed"
			if e.it.ExitCode != nil {
				msg = fmt.Sprintf("command failed with exit code %d", *e.it.ExitCode)
			}
		}
		if e.it.Status != "failed" {
			res["status"] = e.it.Status
		}
		d.fail(e.o, c, e.base, msg, res)
	}
}

func (d *AppServerDecoder) itemFileChange(e itemEvent) {
	c := d.callFor(e.th, e.it.ID)
	_, meta, paths := fileChangeDetail(e.it.Changes)
	tool, input := patchTool(e.it.Changes)
	c.tool, c.paths = tool, paths
	d.announce(e.o, c, e.base, strings.Join(paths, ", "), input,
		mergeMeta(meta, agent.ToolMetadata("fileChange", mustObject(map[string]any{"changes": e.it.Changes}), input)))
	if !e.completed {
		d.run(e.o, c, e.base)
		return
	}
	switch e.it.Status {
	case "completed":
		d.complete(e.o, c, e.base, c.out.String(), meta)
	case "declined":
		d.fail(e.o, c, e.base, "declined", meta)
	default:
		msg := c.out.String()
		if msg == "" {
			msg = "patch failed to apply"
		}
		d.fail(e.o, c, e.base, msg, meta)
	}
}

func (d *AppServerDecoder) itemMcpToolCall(e itemEvent) {
	c := d.callFor(e.th, e.it.ID)
	input := objectOrEmpty(e.it.Arguments)
	var tmeta agent.Object
	if e.it.Type == "mcpToolCall" {
		c.tool = mcpToolName(e.it.Server, e.it.Tool)
		tmeta = agent.ToolMetadata(e.it.Type, e.it.Arguments, input)
	} else {
		// A dynamic tool is one the client defined: Codex's name is all
		// there is to say about it.
		name := e.it.Tool
		if e.it.Namespace != nil && *e.it.Namespace != "" {
			name = *e.it.Namespace + "_" + e.it.Tool
		}
		c.tool = agent.ToolOther
		tmeta = agent.ToolMetadata(name, e.it.Arguments, input)
	}
	d.announce(e.o, c, e.base, e.it.Tool, input, tmeta)
	if !e.completed {
		d.run(e.o, c, e.base)
		return
	}
	meta := agent.Object{}
	if e.it.DurationMs != nil {
		meta["durationMs"] = *e.it.DurationMs
	}
	var text string
	if e.it.Type == "mcpToolCall" {
		var res struct {
			Content    []json.RawMessage `json:"content"`
			Structured json.RawMessage   `json:"structuredContent"`
		}
		_ = json.Unmarshal(e.it.Result, &res)
		text = contentText(res.Content)
		if len(res.Structured) > 0 && string(res.Structured) != "null" {
			meta["structuredContent"] = res.Structured
		}
	} else {
		var items []json.RawMessage
		_ = json.Unmarshal(e.it.ContentItems, &items)
		text = contentText(items)
	}
	var failure struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(e.it.Error, &failure)
	if e.it.Status == "completed" && (e.it.Success == nil || *e.it.Success) {
		d.complete(e.o, c, e.base, text, meta)
	} else {
		msg := failure.Message
		if msg == "" {
			msg = text
		}
		if msg == "" {
			msg = "tool call " + e.it.Status
		}
		d.fail(e.o, c, e.base, msg, meta)
	}
}

func (d *AppServerDecoder) itemCollabAgentToolCall(e itemEvent) {
	c := d.callFor(e.th, e.it.ID)
	c.tool = agent.ToolTask
	in := map[string]any{"tool": e.it.Tool}
	prompt := ""
	if e.it.Prompt != nil {
		prompt = *e.it.Prompt
		in["prompt"] = prompt
	}
	if e.it.Model != nil {
		in["model"] = *e.it.Model
	}
	if len(e.it.ReceiverThreads) > 0 {
		in["receiverThreadIds"] = e.it.ReceiverThreads
	}
	title := e.it.Tool
	if prompt != "" {
		title = firstLine(prompt, 80)
	}
	input := agent.EncodeInput(agent.TaskInput{Prompt: prompt})
	d.announce(e.o, c, e.base, title, input, agent.ToolMetadata(e.it.Type, mustObject(in), input))
	for _, tid := range e.it.ReceiverThreads {
		if tid == "" {
			d.drop(e.o, "item:collabAgentToolCall", agent.DropMissingID, "receiverThreadIds holds an empty thread id", e.frame)
			continue
		}
		d.child(e.o, e.th, tid, e.it.ID, firstLine(prompt, 80), "codex", prompt)
	}
	d.endChildren(e.o, e.it.AgentsStates)
	if !e.completed {
		d.run(e.o, c, e.base)
		return
	}
	var msgs []string
	keys := make([]string, 0, len(e.it.AgentsStates))
	for k := range e.it.AgentsStates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if s := e.it.AgentsStates[k]; s.Message != nil && *s.Message != "" {
			msgs = append(msgs, *s.Message)
		}
	}
	text := strings.Join(msgs, "\n\n")
	if e.it.Status == "completed" {
		d.complete(e.o, c, e.base, text, nil)
	} else {
		if text == "" {
			text = "subagent call " + e.it.Status
		}
		d.fail(e.o, c, e.base, text, nil)
	}
}

func (d *AppServerDecoder) itemSubAgentActivity(e itemEvent) {
	if e.it.AgentThreadID == "" {
		d.drop(e.o, "item:subAgentActivity", agent.DropMissingID, "subAgentActivity without agentThreadId", e.frame)
		return
	}
	switch e.it.Kind {
	case "started", "interacted":
		d.child(e.o, e.th, e.it.AgentThreadID, "", e.it.AgentPath, "codex", "")
	case "completed", "interrupted":
		d.child(e.o, e.th, e.it.AgentThreadID, "", e.it.AgentPath, "codex", "")
		d.endChildren(e.o, map[string]collabAgentState{e.it.AgentThreadID: {Status: "completed"}})
	}
}

func (d *AppServerDecoder) itemWebSearch(e itemEvent) {
	c := d.callFor(e.th, e.it.ID)
	c.tool = agent.ToolSearch
	in := map[string]any{"query": e.it.Query}
	if len(e.it.Action) > 0 && string(e.it.Action) != "null" {
		in["action"] = e.it.Action
	}
	input := agent.EncodeInput(agent.SearchInput{Query: e.it.Query})
	d.announce(e.o, c, e.base, e.it.Query, input, agent.ToolMetadata(e.it.Type, mustObject(in), input))
	d.run(e.o, c, e.base)
	if e.completed {
		meta := agent.Object{}
		if len(e.it.Results) > 0 && string(e.it.Results) != "null" {
			meta["results"] = e.it.Results
		}
		d.complete(e.o, c, e.base, "", meta)
	}
}

func (d *AppServerDecoder) itemImageView(e itemEvent) {
	c := d.callFor(e.th, e.it.ID)
	in := map[string]any{}
	title := ""
	var input json.RawMessage
	switch e.it.Type {
	case "imageView":
		c.tool, in["path"], title = agent.ToolRead, e.it.Path, e.it.Path
		input = agent.EncodeInput(agent.ReadInput{Path: e.it.Path})
	case "sleep":
		c.tool, in["durationMs"], title = agent.ToolOther, e.it.DurationMs, "sleep"
	default:
		c.tool, title = agent.ToolOther, "image generation"
		if e.it.RevisedPrompt != nil {
			in["prompt"] = *e.it.RevisedPrompt
		}
	}
	if input == nil {
		input = mustObject(in)
	}
	d.announce(e.o, c, e.base, title, input, agent.ToolMetadata(e.it.Type, mustObject(in), input))
	d.run(e.o, c, e.base)
	if !e.completed {
		return
	}
	if e.it.Type == "imageGeneration" && (e.it.Status == "failed" || (len(e.it.Failure) > 0 && string(e.it.Failure) != "null")) {
		d.fail(e.o, c, e.base, "image generation failed: "+string(e.it.Failure), nil)
		return
	}
	outText := ""
	if e.it.SavedPath != nil {
		outText = *e.it.SavedPath
	}
	d.complete(e.o, c, e.base, outText, nil)
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
	if c.shown && (input == nil || string(input) == string(c.input)) && !newMembers(c.meta, meta) {
		return
	}
	c.shown = true
	if input != nil {
		c.input = input
	}
	if len(c.meta) == 0 && len(meta) > 0 {
		// mergeMeta would copy meta: neither map is written after this
		// (the call's metadata is only replaced, never changed in place).
		c.meta = meta
	} else {
		c.meta = mergeMeta(c.meta, meta)
	}
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
	var parts []userPart
	_ = json.Unmarshal(raw, &parts)
	return userParts(parts)
}

// userPart is one element of a userMessage item's content.
type userPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
	URL  string `json:"url"`
	Path string `json:"path"`
	Name string `json:"name"`
}

// userParts is the prompt text and files of a userMessage's content parts.
func userParts(parts []userPart) (string, []agent.PromptFile) {
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
