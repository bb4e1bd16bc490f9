package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
)

// Decoder turns ACP traffic (both directions, as in a traffic log) into
// agent events. It is deterministic and never panics: a frame it cannot use
// becomes a agent.DroppedInput with a reason. Not safe for concurrent use.
type Decoder struct {
	t int64
	// out collects the events of the frame being decoded: the decoder's
	// own buffer, kept from one frame to the next, which Decode returns
	// (valid until the next call; see Decode), so a frame's events cost no
	// allocation of their slice once the buffer has room.
	out []agent.Event

	// ours and theirs are the requests awaiting an answer: happy's, and
	// the agent's awaiting happy's, by id key (idKey).
	ours      map[string]ourRequest
	theirs    map[string]agentRequest
	sessions  map[string]bool // ACP session ids opened
	agentName string          // initialize's agentInfo.name ("gemini-cli", "OpenCode", …)

	turn    *turn // the prompt turn in flight, nil between turns
	loading bool  // a session/load replays history (until the next prompt)
	// skipNext: a history-known note armed the next session/load to leave
	// its replay out; skipping: history updates are left out now (from
	// that load until the next prompt); skipped counts the updates left
	// out since SkippedHistory last reported them.
	skipNext, skipping bool
	// restarting: a restart note (noteRestart) came, the exit that follows
	// is the restart's; anyStep: an assistant message exists in
	// the session; turnStep: the current turn has an assistant step;
	// stepResult: a tool of the current step reported its result.
	restarting, anyStep, turnStep, stepResult bool
	// planned: the agent sent a plan update; from then on its plan alone
	// sets the todo list, not its todo tools (toolTodos).
	planned bool
	// turns counts the prompt turns (their ids); skipped: see above.
	turns, skipped int

	tools     map[string]*tool // by ACP toolCallId, in the current turn's scope
	toolSeq   int
	callIDs   *recentIDs // canonical call ids used lately (see toolFor)
	terminals map[string]*terminalInfo

	// decisions and writes are the decision and fs-write notes by request
	// id key.
	decisions map[string]happyNote
	writes    map[string]happyNote

	// History replayed by session/load: consecutive user chunks make one
	// prompt (lastKind: the last update's kind; replay: the prompt being
	// gathered, made by the first user chunk of a load).
	lastKind string
	replay   *loadReplay

	lastCost  *float64
	stepCost  float64
	heldUsage *agent.Usage
}

// loadReplay is the user prompt a session/load's history replay is
// gathering from consecutive user chunks: its prompt id ("" for none since
// the load began or the last other update), text and files, and the count
// the ids are numbered by.
type loadReplay struct {
	seq   int
	key   string
	text  strings.Builder
	files []agent.PromptFile
}

type ourRequest struct {
	method    string
	sessionID string
	cwd       string
	modeID    string
	turn      *turn
}

type agentRequest struct {
	method     string
	callID     string
	options    []PermissionOption
	path       string
	content    string
	terminalID string
}

type turn struct {
	id        string
	cancelled bool // happy sent session/cancel
	// rejected: happy answered a permission of the turn with a rejection
	// (a person, a rule, the permission timeout), not to abort the turn.
	rejected bool
}

// terminalInfo is what the traffic says about a terminal happy runs for the
// agent.
type terminalInfo struct {
	output    string
	truncated bool
	exitCode  *int64
	signal    *string
	known     bool // an output or exit was seen
}

// tool is the merged state of one ACP tool call.
type tool struct {
	acpID     string
	callID    string
	kind      string
	title     string
	rawInput  json.RawMessage
	content   []toolContent
	locations []location
	rawOutput json.RawMessage
	status    string
	perms     int
	// asking counts the agent's permission requests for the tool that
	// happy has not answered yet: meanwhile an in_progress status is not
	// the tool running (OpenCode reports it before the answer), since the
	// transcript's tool waits for a decision.
	asking int
	seq    int // the order of first appearance
	writes []agent.FileDiff
	ann    announcement // the last ToolCall emitted, to skip repeats
	// What the traffic says of the agent's own tool (tools.go): Claude's
	// tool name in _meta (claude-code-acp), the title of the first
	// announcement (OpenCode's tool name), a command's folder and
	// description from its content (Gemini CLI).
	metaTool, firstTitle string
	hintCwd, hintDesc    string

	// outContent: the content came with the tool's start or end, so it is
	// output rather than a description; providerInput: the part's
	// metadata has the agent's input; merged: an update was merged
	// (mergeFields: the title of the first is firstTitle).
	outContent, running, settled bool
	merged, providerInput        bool
}

type location struct {
	Path string `json:"path"`
	Line *int64 `json:"line,omitempty"`
}

// NewDecoder returns a decoder for one ACP connection.
func NewDecoder() *Decoder {
	return &Decoder{
		ours:      map[string]ourRequest{},
		theirs:    map[string]agentRequest{},
		sessions:  map[string]bool{},
		tools:     map[string]*tool{},
		terminals: map[string]*terminalInfo{},
		decisions: map[string]happyNote{},
		writes:    map[string]happyNote{},
		callIDs:   newRecentIDs(RecentCallIDs),
	}
}

// keptEvents is the most events the decoder's buffer (Decoder.out) keeps
// room for from one frame to the next: 1 KiB of interface values.
const keptEvents = 64

// Decode consumes the next frame, in traffic order, and returns the events
// it yields (possibly none). The slice is the decoder's buffer: it is valid
// until the next call of Decode or Finish, so a caller that keeps the
// events past that copies them (the events themselves are its to keep).
func (d *Decoder) Decode(f jsonrpc.Frame) []agent.Event {
	// The last frame's events leave the buffer: their caller has them. A
	// buffer a large frame grew is let go rather than kept (held memory
	// stays the open state).
	if cap(d.out) > keptEvents {
		d.out = nil
	}
	clear(d.out)
	d.t, d.out = f.T, d.out[:0]
	switch f.Dir {
	case trafficlog.A2C:
		d.fromAgent(f)
	case trafficlog.C2A:
		d.fromHappy(f)
	case trafficlog.Note:
		d.note(f)
	case trafficlog.Exit:
		d.exit(f)
	case trafficlog.Stderr:
		// Kept in the log; carries nothing for the transcript.
	default:
		d.drop(string(f.Dir), agent.DropUnknownType, "unknown traffic direction", f.Data)
	}
	if len(d.out) == 0 {
		return nil
	}
	return d.out
}

// toolByCall returns the tool whose call id is callID, or nil.
func (d *Decoder) toolByCall(callID string) *tool {
	for _, tl := range d.tools {
		if tl.callID == callID {
			return tl
		}
	}
	return nil
}

// PermissionCall tells the live client which tool call the agent's
// permission request id is about and which options it offers; ok is false
// when the request was refused (malformed) or is not a permission request.
func (d *Decoder) PermissionCall(id jsonrpc.ID) (callID string, opts []PermissionOption, ok bool) {
	r, ok := d.theirs[idKey(id)]
	if !ok || r.method != "session/request_permission" || r.callID == "" {
		return "", nil, false
	}
	return r.callID, r.options, true
}

// Finish ends the stream: a prompt turn still in flight (the log stops
// before the agent answered session/prompt) ends as truncated, which
// settles its open tools and closes its assistant message. It returns the
// events that yields (none when no turn is open) and may be called more
// than once. The slice is the caller's (a copy, not the buffer Decode
// returns), as Finish ends the stream.
func (d *Decoder) Finish() []agent.Event {
	clear(d.out)
	d.out = d.out[:0]
	if d.turn != nil {
		d.flushUsage(true)
		d.emit(&agent.TurnEnded{TurnID: d.turn.id, Reason: agent.TurnTruncated, Error: "the log ends before the turn ended"})
		d.closeTurn()
	}
	if len(d.out) == 0 {
		return nil
	}
	out := slices.Clone(d.out)
	clear(d.out)
	d.out = d.out[:0]
	return out
}

// InTurn reports whether a prompt turn is in flight.
func (d *Decoder) InTurn() bool { return d.turn != nil }

func (d *Decoder) emit(evs ...agent.Event) {
	for _, e := range evs {
		e.Base().Time = d.t
		d.out = append(d.out, e)
	}
}

func (d *Decoder) drop(kind string, reason agent.DropReason, detail string, raw []byte) {
	d.out = append(d.out, dropped(d.t, kind, reason, detail, raw))
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// str reads a JSON string; ok is false for anything else (absent included).
// Every raw value the decoder reads is a member of a frame jsonrpc already
// validated, so it is split and unquoted by structure (jsonlex) instead of
// being decoded again.
func str(raw json.RawMessage) (string, bool) {
	return jsonlex.StringOf(raw)
}

// ---- frames from the agent ----

func (d *Decoder) fromAgent(f jsonrpc.Frame) {
	// Only a line that is not JSON, or a JSON string, is text (Frame.Text).
	if !f.JSON || len(f.Data) > 0 && f.Data[0] == '"' {
		if s, ok := f.Text(); ok {
			d.drop("", agent.DropUnparseableJSON, "the agent wrote a line that is not JSON", []byte(s))
			return
		}
	}
	if !f.HasMsg() {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(kind, reason, detail, f.Data)
		return
	}
	m := f.Msg
	switch m.Kind {
	case jsonrpc.KindRequest:
		d.agentRequest(m)
	case jsonrpc.KindNotification:
		d.agentNotification(m)
	case jsonrpc.KindResponse:
		d.agentResponse(m)
	}
}

func (d *Decoder) agentNotification(m jsonrpc.Message) {
	switch {
	case m.Method == "session/update":
		d.sessionUpdate(m)
	case m.Method == "$/cancel_request":
		p, ok := members(m.Params)
		if !ok || p.get("requestId") == nil {
			d.drop(m.Method, agent.DropInvalidField, "params need requestId", m.Raw)
			return
		}
		key := rawIDKey(p.get("requestId"))
		r, ok := d.theirs[key]
		if !ok {
			return // a request already answered: nothing is waiting
		}
		delete(d.theirs, key)
		if r.method == "session/request_permission" {
			d.emit(&agent.ToolResolved{CallID: r.callID, Decision: agent.DecisionReject, Reason: agent.ReasonCancelled})
		}
	case m.Method == "elicitation/complete":
		// Elicitation is not advertised; a completion refers to nothing.
	case strings.HasPrefix(m.Method, "_"), strings.HasPrefix(m.Method, "$/"):
		// Extension and protocol-level notifications: the protocol says
		// to ignore what one does not implement.
	default:
		d.drop(m.Method, agent.DropUnknownType, "unknown notification", m.Raw)
	}
}

func (d *Decoder) agentRequest(m jsonrpc.Message) {
	key := idKey(m.ID)
	p, _ := members(m.Params)
	switch m.Method {
	case "session/request_permission":
		d.permission(m, key)
	case "fs/read_text_file":
		d.theirs[key] = agentRequest{method: m.Method}
	case "fs/write_text_file":
		path, _ := str(p.get("path"))
		content, _ := str(p.get("content"))
		d.theirs[key] = agentRequest{method: m.Method, path: path, content: content}
	case "terminal/create":
		d.theirs[key] = agentRequest{method: m.Method}
	case "terminal/output", "terminal/wait_for_exit", "terminal/kill", "terminal/release":
		id, _ := str(p.get("terminalId"))
		d.theirs[key] = agentRequest{method: m.Method, terminalID: id}
	case "elicitation/create":
		// Not advertised: the client refuses it with method-not-found.
	default:
		if strings.HasPrefix(m.Method, "_") {
			return // an extension method: refused with method-not-found
		}
		d.drop(m.Method, agent.DropUnknownType, "unknown request", m.Raw)
	}
}

func (d *Decoder) agentResponse(m jsonrpc.Message) {
	key := idKey(m.ID)
	req, ok := d.ours[key]
	if !ok {
		d.drop("response", agent.DropOrphan, "response to request id "+key+" that happy never sent", m.Raw)
		return
	}
	delete(d.ours, key)
	r := &req
	if m.Error != nil {
		d.failedCall(r, m)
		return
	}
	res, _ := members(m.Result)
	switch r.method {
	case "initialize":
		if _, err := CheckVersion(res.get("protocolVersion")); err != nil {
			d.emit(&agent.AgentError{Kind: agent.ErrorProtocol, Text: err.Error()})
		}
		if info, ok := members(res.get("agentInfo")); ok {
			d.agentName, _ = str(info.get("name"))
		}
	case "session/new":
		id, ok := str(res.get("sessionId"))
		if !ok || id == "" {
			d.drop(r.method, agent.DropMissingID, "session/new response without sessionId", m.Raw)
			return
		}
		d.sessions[id] = true
		info := &agent.SessionInfo{ProviderSessionID: id, Cwd: r.cwd}
		d.sessionState(info, res)
		d.emit(info)
	case "session/load", "session/resume":
		// The replay of a load goes on until the next prompt (startTurn
		// ends it): agents stream it without waiting for it to end before
		// they answer (Gemini CLI sends most of it after the response).
		info := &agent.SessionInfo{ProviderSessionID: r.sessionID, Cwd: r.cwd}
		d.sessionState(info, res)
		d.emit(info)
	case "session/set_mode":
		if r.modeID != "" {
			d.emit(&agent.SessionInfo{Agent: r.modeID})
		}
	case "session/set_config_option":
		info := &agent.SessionInfo{}
		d.sessionState(info, res)
		if info.Agent != "" || info.ModelID != "" {
			d.emit(info)
		}
	case "session/prompt":
		d.endTurn(r.turn, m)
	}
}

// sessionState reads the modes, models and config options a session
// response (or config update) carries into info.
func (d *Decoder) sessionState(info *agent.SessionInfo, res obj) {
	if modes, ok := members(res.get("modes")); ok {
		if id, ok := str(modes.get("currentModeId")); ok {
			info.Agent = id
		}
	}
	// "models" is an unstable extension some agents send (Gemini CLI,
	// claude-code-acp): the model the session starts with.
	if models, ok := members(res.get("models")); ok {
		if id, ok := str(models.get("currentModelId")); ok {
			info.ModelID = id
		}
	}
	d.configOptions(info, res.get("configOptions"))
}

// configOptions applies the options of category mode (the agent mode) and
// model (the model id); the other categories have no place in the
// transcript. It reports false when raw is present but not an array.
func (d *Decoder) configOptions(info *agent.SessionInfo, raw json.RawMessage) bool {
	if isNull(raw) {
		return true
	}
	opts, ok := array(raw)
	if !ok {
		return false
	}
	for _, o := range opts {
		m, ok := members(o)
		if !ok {
			continue
		}
		cat, _ := str(m.get("category"))
		val, ok := str(m.get("currentValue"))
		if !ok {
			continue
		}
		switch cat {
		case "mode":
			info.Agent = val
		case "model":
			info.ModelID = val
		}
	}
	return true
}

// failedCall handles an error response to one of happy's requests.
func (d *Decoder) failedCall(r *ourRequest, m jsonrpc.Message) {
	switch r.method {
	case "session/prompt":
		d.endTurn(r.turn, m)
	case "initialize", "authenticate", "session/new", "session/load", "session/resume":
		if r.method == "session/load" {
			d.endLoad()
		}
		d.emit(&agent.AgentError{Kind: errorKind(m.Error.Code), Text: r.method + " failed: " + errorText(m.Error)})
	}
	// Other failures (set_mode, …) are returned to the caller of the live
	// client; they change nothing in the transcript.
}

// Error codes of the schema (ErrorCode).
const (
	codeAuthRequired     = -32000
	codeResourceNotFound = -32002
	codeRequestCancelled = -32800
)

func errorKind(code int64) agent.ErrorKind {
	switch code {
	case codeAuthRequired:
		return agent.ErrorAuth
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
		return agent.ErrorProtocol
	}
	return agent.ErrorInternal
}

// errorText is an error's message, with the cause when the agent gave
// one: data.details (the TypeScript SDK puts it there), else data.message
// (codex-acp: "model is at capacity" under "Internal error"), else data
// itself when it is a string.
func errorText(e *jsonrpc.ErrorObject) string {
	msg := e.Message
	det, _ := str(e.Data)
	if dm, ok := members(e.Data); ok {
		if det, ok = str(dm.get("details")); !ok || det == "" {
			det, _ = str(dm.get("message"))
		}
	}
	switch {
	case det == "" || det == msg:
	case msg == "":
		msg = det
	default:
		msg += ": " + det
	}
	if msg == "" {
		msg = "error " + strconv.FormatInt(e.Code, 10)
	}
	return msg
}

// ---- turns ----

func (d *Decoder) startTurn(m jsonrpc.Message, p obj) *turn {
	if d.turn != nil {
		// A second prompt while one runs breaks the protocol; the first
		// turn can no longer be told apart from the second.
		d.emit(&agent.TurnEnded{TurnID: d.turn.id, Reason: agent.TurnTruncated, Error: "a new prompt was sent before the turn ended"})
	}
	d.endLoad()
	d.turns++
	t := &turn{id: "turn-" + strconv.Itoa(d.turns)}
	d.turn = t
	d.tools = map[string]*tool{} // the tools of a turn are scoped to it
	d.turnStep, d.stepResult = false, false
	if d.lastCost != nil {
		// A report before the turn's first output costs what was spent
		// since the turn began, not since the previous turn's last step.
		d.stepCost = *d.lastCost
	}
	d.emit(&agent.TurnStarted{TurnID: t.id})
	blocks, _ := array(p.get("prompt"))
	var texts []string
	var files []agent.PromptFile
	for _, raw := range blocks {
		b, err := decodeBlock(raw)
		if err != nil {
			d.drop("session/prompt", agent.DropInvalidField, "prompt content: "+err.Error(), raw)
			continue
		}
		if b.Type == "text" {
			texts = append(texts, b.Text)
		} else if f, ok := b.promptFile(); ok {
			files = append(files, f)
		}
	}
	d.emit(&agent.UserPrompt{PromptID: "prompt-" + strconv.Itoa(d.turns), Text: strings.Join(texts, "\n"), Files: files})
	return t
}

// endTurn ends turn t with the response to its session/prompt.
func (d *Decoder) endTurn(t *turn, m jsonrpc.Message) {
	if t == nil || t != d.turn {
		return // the turn was already given up (see noteAbandoned)
	}
	end := &agent.TurnEnded{TurnID: t.id, Reason: agent.TurnCompleted}
	var pre []agent.Event
	switch {
	case t.cancelled:
		// Whatever the agent answers after session/cancel (an error, end_turn
		// or cancelled), the person cancelled the turn.
		end.Reason = agent.TurnInterrupted
	case m.Error != nil:
		text := errorText(m.Error)
		pre = append(pre, &agent.AgentError{Kind: errorKind(m.Error.Code), Text: text})
		end.Reason, end.Error = agent.TurnFailed, text
	default:
		res, _ := members(m.Result)
		reason, ok := str(res.get("stopReason"))
		switch {
		case !ok:
			d.drop("session/prompt", agent.DropInvalidField, "prompt response without a stopReason string", m.Raw)
			end.Reason, end.Error = agent.TurnFailed, "the agent ended the turn without a stop reason"
		case reason == "end_turn":
		case reason == "max_tokens", reason == "max_turn_requests":
			if !d.turnStep {
				pre = append(pre, &agent.MessageStarted{})
			}
			pre = append(pre, &agent.StepFinished{Finish: agent.FinishLength})
		case reason == "refusal":
			text := "the agent refused to continue (stop reason refusal)"
			pre = append(pre, &agent.AgentError{Kind: agent.ErrorInternal, Text: text})
			end.Reason, end.Error = agent.TurnFailed, text
		case reason == "cancelled" && t.rejected:
			// Nobody cancelled the turn: the agent ended it because happy
			// rejected one of its tools (codex-acp's only rejection,
			// "abort", ends the prompt this way). It is a rejected turn,
			// not an interrupted one.
		case reason == "cancelled":
			end.Reason = agent.TurnInterrupted
		default:
			d.drop("stopReason:"+reason, agent.DropUnknownType, "unknown stop reason", m.Raw)
			end.Reason, end.Error = agent.TurnFailed, "unknown stop reason "+strconv.Quote(reason)
		}
	}
	d.flushUsage(true)
	d.emit(pre...)
	d.emit(end)
	d.closeTurn()
}

func (d *Decoder) closeTurn() {
	d.turn = nil
	d.tools = map[string]*tool{} // the tools of a turn are scoped to it
	d.turnStep, d.stepResult = false, false
}

// ---- frames from happy ----

func (d *Decoder) fromHappy(f jsonrpc.Frame) {
	if !f.HasMsg() {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(kind, reason, "happy's own frame: "+detail, f.Data)
		return
	}
	m := f.Msg
	p, _ := members(m.Params)
	switch m.Kind {
	case jsonrpc.KindRequest:
		r := ourRequest{method: m.Method}
		r.sessionID, _ = str(p.get("sessionId"))
		switch m.Method {
		case "session/new":
			r.cwd, _ = str(p.get("cwd"))
		case "session/load", "session/resume":
			r.cwd, _ = str(p.get("cwd"))
			if r.sessionID != "" {
				d.sessions[r.sessionID] = true
			}
			d.loading = m.Method == "session/load"
			d.skipping = d.loading && d.skipNext
			d.skipNext = false
		case "session/set_mode":
			r.modeID, _ = str(p.get("modeId"))
		case "session/prompt":
			if r.sessionID != "" {
				d.sessions[r.sessionID] = true
			}
			r.turn = d.startTurn(m, p)
		}
		d.ours[idKey(m.ID)] = r
	case jsonrpc.KindNotification:
		if m.Method == "session/cancel" && d.turn != nil {
			d.turn.cancelled = true
		}
	case jsonrpc.KindResponse:
		d.answered(m)
	}
}

// answered handles happy's response to one of the agent's requests.
func (d *Decoder) answered(m jsonrpc.Message) {
	key := idKey(m.ID)
	r, isTheirs := d.theirs[key]
	note, hasNote := d.decisions[key]
	if hasNote {
		delete(d.decisions, key)
	}
	wnote, hasWrite := d.writes[key]
	if hasWrite {
		delete(d.writes, key)
	}
	if !isTheirs {
		return // answered after the agent withdrew it, or a request happy refused
	}
	delete(d.theirs, key)
	if r.method == "session/request_permission" {
		if tl := d.toolByCall(r.callID); tl != nil && tl.asking > 0 {
			tl.asking--
		}
	}
	if m.Error != nil {
		return // happy refused the request (outside the folder, bad params, …)
	}
	res, _ := members(m.Result)
	switch r.method {
	case "session/request_permission":
		// The wire answer is what the agent got, so it wins; happy's note
		// adds the reason (timeout, rule, …) when it agrees, and stands in
		// for an answer the wire does not carry in a readable shape.
		dec, reason, ok := decisionOf(m.Result, r.options)
		if hasNote {
			if nd, err := agent.ParseDecision(note.Decision); err == nil {
				switch {
				case !ok:
					dec, reason, ok = nd, note.Reason, true
				case noteAgrees(nd, note.Reason, dec, m.Result, r.options):
					dec, reason = nd, note.Reason
				default:
					d.drop("session/request_permission", agent.DropInvalidField,
						fmt.Sprintf("happy's decision note (%s) contradicts its answer on the wire (%s); the wire answer is kept", nd, dec), m.Raw)
				}
			}
		}
		if !ok {
			d.drop("session/request_permission", agent.DropUnknownDecision, "happy's answer selects no offered option", m.Raw)
			return
		}
		if dec == agent.DecisionReject && reason != agent.ReasonCancelled && d.turn != nil {
			d.turn.rejected = true
		}
		d.emit(&agent.ToolResolved{CallID: r.callID, Decision: dec, Reason: reason})
	case "fs/write_text_file":
		var before *string
		status := ""
		if hasWrite {
			status = "modified"
			if !wnote.Existed {
				status = "added"
			} else if wnote.BeforeOmitted == 0 {
				b := wnote.Before
				before = &b
			}
		}
		d.recordWrite(r.path, before, r.content, status)
	case "terminal/create":
		if id, ok := str(res.get("terminalId")); ok {
			d.terminals[id] = &terminalInfo{}
		}
	case "terminal/output":
		if ti := d.terminals[r.terminalID]; ti != nil {
			ti.output, _ = str(res.get("output"))
			ti.truncated = string(res.get("truncated")) == "true"
			ti.known = true
			if es, ok := members(res.get("exitStatus")); ok {
				ti.setExit(es)
			}
		}
	case "terminal/wait_for_exit":
		if ti := d.terminals[r.terminalID]; ti != nil {
			ti.setExit(res)
		}
	}
}

func (ti *terminalInfo) setExit(m obj) {
	var code int64
	if json.Unmarshal(m.get("exitCode"), &code) == nil && !isNull(m.get("exitCode")) {
		ti.exitCode = &code
	}
	if s, ok := str(m.get("signal")); ok {
		ti.signal = &s
	}
	ti.known = true
}

// recordWrite attaches a file write to the tool it belongs to: an open tool
// of the turn whose locations name the path, else the latest open edit
// tool, else the latest open tool. An edit no tool claims is not recorded.
func (d *Decoder) recordWrite(path string, before *string, after, status string) {
	var target, edit, last *tool
	for _, tl := range d.sortedTools() {
		if tl.settled {
			continue
		}
		last = tl
		if tl.kind == "edit" || tl.kind == "delete" || tl.kind == "move" {
			edit = tl
		}
		for _, l := range tl.locations {
			if l.Path == path {
				target = tl
			}
		}
	}
	if target == nil {
		target = edit
	}
	if target == nil {
		target = last
	}
	if target == nil {
		return
	}
	fd := fileDiff(path, before, after)
	if status == "" {
		// No note from the client that wrote it: what was there before is
		// unknown, so no status and no deletions are claimed.
		fd.Status, fd.Before, fd.Deletions = "", "", 0
	}
	target.writes = append(target.writes, fd)
	d.announce(target, false)
}

// ---- notes and exit ----

func (d *Decoder) note(f jsonrpc.Frame) {
	if !isObject(f.Data) {
		return // a remark of whoever recorded the traffic
	}
	var n happyNote
	if json.Unmarshal(f.Data, &n) != nil || n.Happy == "" {
		return
	}
	switch n.Happy {
	case noteDecision:
		d.decisions[rawIDKey(n.Request)] = n
	case noteFSWrite:
		d.writes[rawIDKey(n.Request)] = n
	case noteAbandoned:
		if d.turn != nil {
			reason := n.Reason
			if reason == "" {
				reason = "the agent did not end the turn after it was cancelled"
			}
			d.flushUsage(true)
			d.emit(&agent.TurnEnded{TurnID: d.turn.id, Reason: agent.TurnInterrupted, Error: reason})
			d.closeTurn()
		}
	case noteRestart:
		d.restarting = true
	case noteHistoryKnown:
		d.skipNext = true
	}
}

func (d *Decoder) exit(f jsonrpc.Frame) {
	d.endLoad()
	if d.restarting {
		d.restarting = false
		return
	}
	// Requests the agent can no longer answer.
	clear(d.ours)
	clear(d.theirs)
	if d.turn == nil {
		return
	}
	text := "the agent exited"
	if st, err := trafficlog.DecodeExit(f.Data); err == nil {
		switch {
		case st.Code != nil:
			text += " with code " + strconv.Itoa(*st.Code)
		case st.Sig != nil:
			text += " on signal " + *st.Sig
		}
	}
	d.flushUsage(true)
	d.emit(&agent.TurnEnded{TurnID: d.turn.id, Reason: agent.TurnAgentExited, Error: text})
	d.closeTurn()
}

// ---- usage ----

// beginOutput is called before assistant output (text, reasoning, a new
// tool call): it tracks model steps the way the reducer opens them, so
// that a step's cost is the increase of the cumulative cost during it.
func (d *Decoder) beginOutput() {
	if !d.turnStep || d.stepResult {
		if d.lastCost != nil {
			d.stepCost = *d.lastCost
		}
		d.turnStep, d.stepResult = true, false
	}
	d.anyStep = true
}

// flushUsage emits a usage report held until a step existed.
func (d *Decoder) flushUsage(turnEnd bool) {
	u := d.heldUsage
	if u == nil {
		return
	}
	if d.turnStep || (d.turn == nil && d.anyStep) {
		d.heldUsage = nil
		d.emit(u)
		return
	}
	if turnEnd {
		// The turn ends without assistant output (a refusal, a question
		// asked instead of an answer): the usage is the turn's, and the
		// reducer opens the turn's step for it.
		d.heldUsage = nil
		d.emit(u)
	}
}

// String summarises the decoder's state (for diagnostics).
func (d *Decoder) String() string {
	return fmt.Sprintf("acp decoder: turn=%v tools=%d pending=%d/%d", d.turn != nil, len(d.tools), len(d.ours), len(d.theirs))
}

// RecentCallIDs is how many canonical tool call ids a Decoder remembers to
// keep the id of a call unique when the agent reuses its ACP id in a later
// turn (toolFor). The memory stays bounded whatever the length of the
// session: a reuse further apart than this many calls gets the ACP id
// itself again, which the reducer then treats as a re-announcement of the
// old, settled part.
const RecentCallIDs = 1024

// recentIDs remembers the last max ids added: a bounded set, a ring of
// them (grown as ids come, so a short session holds only its own) and an
// index of the ring.
type recentIDs struct {
	set  map[string]struct{}
	ring []string
	max  int
	next int
}

func newRecentIDs(n int) *recentIDs {
	return &recentIDs{set: map[string]struct{}{}, max: n}
}

// has reports whether id is among the last ids added.
func (r *recentIDs) has(id string) bool {
	_, ok := r.set[id]
	return ok
}

// add inserts id (one not already present), forgetting the oldest when the
// ring is full.
func (r *recentIDs) add(id string) {
	r.set[id] = struct{}{}
	if len(r.ring) < r.max {
		r.ring = append(r.ring, id)
		return
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = id
	r.next = (r.next + 1) % len(r.ring)
}

// len is how many ids are remembered.
func (r *recentIDs) len() int { return len(r.set) }
