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

// request maps a Codex → happy request (approvals, questions).
// requestParams are the members of Codex's requests the decoder reads.
type requestParams struct {
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

// serverRequest is one request of Codex's, for its handler.
type serverRequest struct {
	o    *out
	m    jsonrpc.Message
	p    requestParams
	key  string // its id, as a map key
	th   *thread
	base agent.EventBase
	meta agent.Object
}

func (d *AppServerDecoder) request(o *out, m jsonrpc.Message) {
	key := idString(mustObject(m.ID))
	var p requestParams
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
	r := serverRequest{o: o, m: m, p: p, key: key, th: th, base: base, meta: meta}
	switch m.Method {
	case "item/commandExecution/requestApproval", "execCommandApproval":
		d.commandApproval(r)
	case "item/fileChange/requestApproval", "applyPatchApproval":
		d.fileApproval(r)
	case "item/tool/requestUserInput":
		d.question(r)
	case "mcpServer/elicitation/request", "item/permissions/requestApproval", "item/tool/call",
		"account/chatgptAuthTokens/refresh", "attestation/generate":
		// Known, and refused by the live client with a JSON-RPC error.
		d.receive(key, &srvReq{method: m.Method, session: th.session})
	default:
		d.drop(o, m.Method, agent.DropUnknownType, "server request unknown to this version", m.Raw)
	}
}

// commandApproval blocks a command on its approval request.
func (d *AppServerDecoder) commandApproval(r serverRequest) {
	callID := r.p.ItemID
	if r.m.Method == "execCommandApproval" {
		callID = r.p.CallID
	}
	cmd, wrapped := appServerCommand(r.p.Command, r.p.Actions)
	if callID == "" {
		d.drop(r.o, r.m.Method, agent.DropMissingID, "approval request without item/call id", r.m.Raw)
		return
	}
	if r.p.Cwd != "" {
		r.meta["cwd"] = r.p.Cwd
	}
	for k, v := range map[string]json.RawMessage{"commandActions": r.p.Actions, "availableDecisions": r.p.Available, "proposedExecpolicyAmendment": r.p.Amendment} {
		if len(v) > 0 && string(v) != "null" {
			r.meta[k] = v
		}
	}
	if wrapped != "" {
		r.meta["rawCommand"] = wrapped
	}
	var patterns []string
	if cmd != "" {
		patterns = []string{cmd}
	}
	c := d.callFor(r.th, callID)
	if c.tool == "" {
		c.tool = agent.ToolBash
	}
	if !c.shown && !c.done {
		input, tmeta := shellCall("commandExecution", cmd, wrapped, r.p.Cwd)
		d.announce(r.o, c, r.base, cmd, input, tmeta)
	}
	d.block(r.o, c, r.base, r.key, r.m.Method, nil, &agent.PermissionRequest{Permission: agent.ToolBash, Patterns: patterns, Always: patterns, Metadata: r.meta})
}

// fileApproval blocks a file change on its approval request.
func (d *AppServerDecoder) fileApproval(r serverRequest) {
	callID := r.p.ItemID
	if r.m.Method == "applyPatchApproval" {
		callID = r.p.CallID
	}
	if callID == "" {
		d.drop(r.o, r.m.Method, agent.DropMissingID, "approval request without item/call id", r.m.Raw)
		return
	}
	if r.p.GrantRoot != nil && *r.p.GrantRoot != "" {
		r.meta["grantRoot"] = *r.p.GrantRoot
	}
	c := d.callFor(r.th, callID)
	if c.tool == "" {
		c.tool = agent.ToolEdit
	}
	paths := c.paths
	if len(r.p.FileChanges) > 0 {
		paths = paths[:0:0]
		for k := range r.p.FileChanges {
			paths = append(paths, k)
		}
		sort.Strings(paths)
		r.meta["fileChanges"] = r.p.FileChanges
	}
	if !c.shown && !c.done {
		in := agent.EditInput{}
		if len(paths) > 0 {
			in.Path = paths[0]
		}
		input := agent.EncodeInput(in)
		var raw json.RawMessage
		if len(paths) > 0 {
			raw = mustObject(map[string]any{"paths": paths})
		}
		d.announce(r.o, c, r.base, strings.Join(paths, ", "), input, agent.ToolMetadata("fileChange", raw, input))
	}
	d.block(r.o, c, r.base, r.key, r.m.Method, nil, &agent.PermissionRequest{Permission: c.tool, Patterns: paths, Always: paths, Metadata: r.meta})
}

// question blocks a tool on Codex's questions.
func (d *AppServerDecoder) question(r serverRequest) {
	if r.p.ItemID == "" || len(r.p.Questions) == 0 {
		d.drop(r.o, r.m.Method, agent.DropInvalidField, "question request without itemId or questions", r.m.Raw)
		return
	}
	c := d.callFor(r.th, r.p.ItemID)
	if c.tool == "" {
		c.tool = agent.ToolQuestion
	}
	q := &agent.QuestionRequest{}
	var qids []string
	for _, x := range r.p.Questions {
		info := agent.QuestionInfo{Question: x.Question, Header: x.Header, Options: []agent.QuestionOption{}}
		for _, op := range x.Options {
			info.Options = append(info.Options, agent.QuestionOption{Label: op.Label, Description: op.Description})
		}
		custom := x.IsOther || len(x.Options) == 0
		info.Custom = &custom
		q.Questions = append(q.Questions, info)
		qids = append(qids, x.ID)
	}
	d.receive(r.key, &srvReq{method: r.m.Method, session: r.th.session, callID: r.p.ItemID, qids: qids})
	c.blocked = true
	var input json.RawMessage
	if !c.shown {
		input = agent.EncodeInput(agent.QuestionInput{Questions: q.Questions})
	}
	r.o.add(&agent.ToolBlocked{EventBase: r.base, CallID: r.p.ItemID, Tool: c.tool, Input: input, Question: q})
}

func (d *AppServerDecoder) block(o *out, c *call, base agent.EventBase, key, method string, input json.RawMessage, perm *agent.PermissionRequest) {
	d.receive(key, &srvReq{method: method, session: c.session, callID: c.id})
	if c.done {
		return
	}
	c.blocked = true
	if c.shown {
		input = nil
	}
	o.add(&agent.ToolBlocked{EventBase: base, CallID: c.id, Tool: c.tool, Input: input, Permission: perm})
}

// appServerCommand is the command of an app-server commandExecution item
// or approval request as a person types it (see UserCommand), and the
// wrapped one Codex gave ("" when the same). Without a command, the
// commands of its commandActions (Codex's parse of it, for display) stand
// in, joined by " && ".
func appServerCommand(command, actions json.RawMessage) (cmd, wrapped string) {
	if cmd, wrapped = UserCommand(command); cmd != "" {
		return cmd, wrapped
	}
	return actionsCommand(actions), ""
}

// actionsCommand is the commands of Codex's parsed commandActions joined
// with " && " ("" when there are none).
func actionsCommand(actions json.RawMessage) string {
	var acts []struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(actions, &acts)
	var parts []string
	for _, a := range acts {
		if a.Command != "" {
			parts = append(parts, a.Command)
		}
	}
	return strings.Join(parts, " && ")
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
	if !f.HasMsg() {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(o, kind, reason, "own frame: "+detail, f.Data)
		return
	}
	m := f.Msg
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
		answer := res.Decision
		dec, reason, ok := decision(answer)
		if !ok {
			r.answered = false
			d.drop(o, "decision", agent.DropUnknownDecision, "answer "+string(answer)+" is not a known decision", f.Data)
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
		var r threadResult
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
		var r turnParams
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
