package codex

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
)

// AppServerDecoder maps `codex app-server` (protocol v2) traffic to agent
// events. It is fed every frame in both directions: Codex's notifications,
// requests and responses, and happy's own requests and answers (an answer
// to an approval request becomes the tool's resolution). The same frames
// always yield the same events, so a recorded traffic log replays exactly.
// Not safe for concurrent use.
type AppServerDecoder struct {
	n    int64 // frames seen (1-based line of the current one)
	main string

	threads  map[string]*thread // by thread id (main and children)
	calls    map[string]*call   // by session + "\x00" + call id
	sent     map[string]sentReq // our requests by id
	received map[string]*srvReq // Codex's requests by id
}

type thread struct {
	session  string // "" for the main thread, else the child key (the thread id)
	turn     string // current turn id
	open     bool
	items    map[string]bool // item ids seen (completed: true)
	reason   map[string]int  // reasoning item → last summary index (for separators)
	retries  int
	errored  string // turn id whose error was already reported
	compacts int    // contextCompaction items seen in the current turn
	ended    bool   // SubagentEnded sent
	linked   bool   // announced with the tool call that spawned it
	title    string // child: the title and agent it was announced with
	agent    string
}

type call struct {
	session string
	id      string
	tool    string
	input   json.RawMessage
	paths   []string
	shown   bool // ToolCall emitted
	running bool
	blocked bool
	done    bool
	out     outBuf
}

type sentReq struct {
	method string
	thread string
}

type srvReq struct {
	method   string
	session  string
	callID   string
	answered bool
	qids     []string // requestUserInput question ids, in order
}

// NewAppServerDecoder returns a decoder with no state.
func NewAppServerDecoder() *AppServerDecoder {
	return &AppServerDecoder{
		threads:  map[string]*thread{},
		calls:    map[string]*call{},
		sent:     map[string]sentReq{},
		received: map[string]*srvReq{},
	}
}

// out collects the events of one frame.
type out struct {
	t  int64
	ev []agent.Event
}

func (o *out) add(e agent.Event) {
	if e.Base().Time == 0 {
		e.Base().Time = o.t
	}
	o.ev = append(o.ev, e)
}

// Decode implements Decoder.
func (d *AppServerDecoder) Decode(f jsonrpc.Frame) []agent.Event {
	d.n++
	o := &out{t: f.T}
	switch f.Dir {
	case trafficlog.A2C:
		d.a2c(o, f)
	case trafficlog.C2A:
		d.c2a(o, f)
	case trafficlog.Exit:
		d.exit(o)
	case trafficlog.Note:
		var n happyNote
		if json.Unmarshal(f.Data, &n) == nil && n.Happy == noteAbandoned {
			if th := d.threads[n.ThreadID]; th != nil && th.open && th.turn == n.TurnID {
				d.endTurn(o, th, agent.TurnInterrupted, "codex never ended the turn: "+n.Reason)
			}
		}
	case trafficlog.Stderr:
		// Diagnostics only; they are in the log.
	default:
		o.add(dropped(SourceAppServer, d.n, f.T, string(f.Dir), agent.DropUnknownType, "unknown traffic direction", f.Data))
	}
	return o.ev
}

func (d *AppServerDecoder) drop(o *out, kind string, reason agent.DropReason, detail string, raw []byte) {
	o.add(dropped(SourceAppServer, d.n, o.t, kind, reason, detail, raw))
}

func (d *AppServerDecoder) a2c(o *out, f jsonrpc.Frame) {
	if s, ok := f.Text(); ok {
		d.drop(o, "", agent.DropUnparseableJSON, "agent wrote a line that is not JSON", []byte(s))
		return
	}
	if f.Msg == nil {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(o, kind, reason, detail, f.Data)
		return
	}
	m := *f.Msg
	var emitted int64
	if json.Unmarshal(m.Extra["emittedAtMs"], &emitted) == nil && emitted > 0 {
		o.t = emitted
	}
	switch m.Kind {
	case jsonrpc.KindNotification:
		d.notification(o, m)
	case jsonrpc.KindRequest:
		d.request(o, m)
	case jsonrpc.KindResponse:
		d.response(o, m)
	}
}

// threadOf resolves a thread id to its state; the first thread seen
// becomes the main thread. Threads never announced are orphans.
func (d *AppServerDecoder) threadOf(id string) *thread {
	if id == "" {
		return nil
	}
	if th := d.threads[id]; th != nil {
		return th
	}
	if d.main == "" {
		d.main = id
		th := newThread("")
		d.threads[id] = th
		return th
	}
	return nil
}

func newThread(session string) *thread {
	return &thread{session: session, items: map[string]bool{}, reason: map[string]int{}}
}

// child registers a sub-agent thread and announces it once.
func (d *AppServerDecoder) child(o *out, parent *thread, id, callID, title, role, prompt string) *thread {
	if th := d.threads[id]; th != nil {
		if th.session != "" && !th.linked && callID != "" {
			// Announced by thread/started first: now link it to its call.
			th.linked = true
			ps := ""
			if parent != nil {
				ps = parent.session
			}
			o.add(&agent.SubagentStarted{EventBase: agent.EventBase{Session: ps}, CallID: callID, Child: id, Title: th.title, Agent: th.agent, Prompt: prompt})
		}
		return th
	}
	th := newThread(id)
	th.linked, th.title, th.agent = callID != "", title, role
	d.threads[id] = th
	ps := ""
	if parent != nil {
		ps = parent.session
	}
	o.add(&agent.SubagentStarted{EventBase: agent.EventBase{Session: ps}, CallID: callID, Child: id,
		Title: title, Agent: role, Prompt: prompt})
	return th
}

type threadInfo struct {
	ID            string  `json:"id"`
	ParentThread  *string `json:"parentThreadId"`
	Model         string  `json:"model"`
	ModelProvider string  `json:"modelProvider"`
	Cwd           string  `json:"cwd"`
	Name          *string `json:"name"`
	Nickname      *string `json:"agentNickname"`
	Role          *string `json:"agentRole"`
	Turns         []turn  `json:"turns"`
}

type turn struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Items  []json.RawMessage `json:"items"`
	Error  *turnError        `json:"error"`
}

type turnError struct {
	Message string          `json:"message"`
	Info    json.RawMessage `json:"codexErrorInfo"`
	Details *string         `json:"additionalDetails"`
}

func (d *AppServerDecoder) threadStarted(o *out, ti threadInfo) {
	if ti.ID == "" {
		return
	}
	if ti.ParentThread != nil && *ti.ParentThread != "" && ti.ID != d.main {
		parent := d.threads[*ti.ParentThread]
		title, agent := "", ""
		if ti.Nickname != nil {
			title = *ti.Nickname
		}
		if ti.Role != nil {
			agent = *ti.Role
		}
		d.child(o, parent, ti.ID, "", title, agent, "")
		return
	}
	th := d.threadOf(ti.ID)
	if th == nil || th.session != "" {
		return
	}
	info := &agent.SessionInfo{ProviderSessionID: ti.ID, ProviderID: ti.ModelProvider, ModelID: ti.Model, Cwd: ti.Cwd}
	if ti.Name != nil {
		info.Title = *ti.Name
	}
	o.add(info)
}

// ignoredNotification says why a notification's content is deliberately
// not shown (ok false: not on the list).
func ignoredNotification(kind string) (string, bool) {
	switch kind {
	case "thread/status/changed":
		return "thread state is derived from turns and approval requests", true
	case "thread/readState/changed":
		return "unread markers of other clients", true
	case "thread/archived":
		return "thread housekeeping", true
	case "thread/deleted":
		return "thread housekeeping", true
	case "thread/unarchived":
		return "thread housekeeping", true
	case "thread/closed":
		return "thread housekeeping; the process exit ends open turns", true
	case "thread/reverted":
		return "history rewrite of another client", true
	case "thread/section/changed":
		return "UI grouping of threads", true
	case "thread/attachment/updated":
		return "attachments are not mirrored yet", true
	case "thread/goal/updated":
		return "goal tracking of the Codex UI", true
	case "thread/goal/cleared":
		return "goal tracking of the Codex UI", true
	case "thread/prediction/updated":
		return "UI typing prediction", true
	case "thread/queue/changed":
		return "Codex's own prompt queue; happy queues prompts itself", true
	case "project/changed":
		return "project metadata", true
	case "thread/project/updated":
		return "project metadata", true
	case "thread/environment/connected":
		return "execution environment status", true
	case "thread/environment/disconnected":
		return "execution environment status", true
	case "thread/settings/updated":
		return "settings echo", true
	case "skills/changed":
		return "skill inventory", true
	case "hook/started":
		return "hook runs are not transcript content", true
	case "hook/completed":
		return "hook runs are not transcript content", true
	case "turn/diff/updated":
		return "aggregate diff of the turn; each fileChange item carries its own diff", true
	case "item/autoApprovalReview/started":
		return "automatic approval reviewer progress", true
	case "item/autoApprovalReview/completed":
		return "automatic approval reviewer progress", true
	case "autoApprovalReview/strictReviewRequired":
		return "automatic approval reviewer progress", true
	case "command/exec/outputDelta":
		return "output of a command/exec request happy never sends", true
	case "process/outputDelta":
		return "output of a process started outside a turn", true
	case "process/exited":
		return "process started outside a turn", true
	case "thread/search/partial":
		return "search results of another client", true
	case "item/commandExecution/terminalInteraction":
		return "stdin written to a running command; its output follows as deltas", true
	case "item/reasoning/summaryPartAdded":
		return "separators are derived from summaryIndex of the deltas", true
	case "item/mcpToolCall/progress":
		return "transient progress text of an MCP tool", true
	case "mcpServer/oauthLogin/completed":
		return "MCP server login", true
	case "mcpServer/startupStatus/updated":
		return "MCP server startup", true
	case "mcpServer/event/stream/notification":
		return "MCP server event stream", true
	case "account/updated":
		return "account state", true
	case "account/gatewayOAuth/changed":
		return "account state", true
	case "account/rateLimits/updated":
		return "rate-limit gauges; errors carry what matters", true
	case "account/login/completed":
		return "account state", true
	case "app/list/updated":
		return "app inventory", true
	case "remoteControl/status/changed":
		return "remote-control status of the Codex UI", true
	case "externalAgentConfig/import/progress":
		return "config import", true
	case "externalAgentConfig/import/completed":
		return "config import", true
	case "fs/changed":
		return "file watch of another client", true
	case "model/rerouted":
		return "model fallback notice; usage stays on the turn", true
	case "model/verification":
		return "model verification notice", true
	case "modelProvider/authRecoveryStarted":
		return "credential refresh", true
	case "modelProvider/authRecoveryCompleted":
		return "credential refresh", true
	case "turn/moderationMetadata":
		return "moderation metadata", true
	case "model/safetyBuffering/updated":
		return "moderation buffering state", true
	case "warning":
		return "diagnostic, logged with the traffic", true
	case "guardianWarning":
		return "diagnostic, logged with the traffic", true
	case "deprecationNotice":
		return "diagnostic, logged with the traffic", true
	case "configWarning":
		return "diagnostic, logged with the traffic", true
	case "fuzzyFileSearch/sessionUpdated":
		return "file search of another client", true
	case "fuzzyFileSearch/sessionCompleted":
		return "file search of another client", true
	case "thread/realtime/started":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/itemAdded":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/item/started":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/item/transcript/delta":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/item/completed":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/transcript/delta":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/transcript/done":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/outputAudio/delta":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/sdp":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/error":
		return "realtime voice sessions are not mirrored", true
	case "thread/realtime/closed":
		return "realtime voice sessions are not mirrored", true
	case "windows/worldWritableWarning":
		return "Windows sandbox setup", true
	case "windowsSandbox/setupCompleted":
		return "Windows sandbox setup", true
	}
	return "", false
}

// scoped is the thread/turn/item addressing most notifications carry.
type scoped struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
}

func (d *AppServerDecoder) notification(o *out, m jsonrpc.Message) {
	if _, ok := ignoredNotification(m.Method); ok {
		return
	}
	var sc scoped
	if len(m.Params) > 0 && m.Params[0] == '{' {
		_ = json.Unmarshal(m.Params, &sc)
	}
	switch m.Method {
	case "thread/started":
		var p struct {
			Thread threadInfo `json:"thread"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.Thread.ID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "thread/started without thread.id", m.Raw)
			return
		}
		d.threadStarted(o, p.Thread)
		return
	case "error":
		// An error may come before any thread is known (e.g. at start-up).
	}
	known := map[string]bool{
		"thread/name/updated": true, "thread/tokenUsage/updated": true, "turn/started": true,
		"turn/completed": true, "turn/plan/updated": true, "item/started": true, "item/completed": true,
		"item/agentMessage/delta": true, "item/plan/delta": true, "item/commandExecution/outputDelta": true,
		"item/fileChange/outputDelta": true, "item/fileChange/patchUpdated": true, "serverRequest/resolved": true,
		"item/reasoning/summaryTextDelta": true, "item/reasoning/textDelta": true, "thread/compacted": true,
		"error": true,
	}
	if !known[m.Method] {
		d.drop(o, m.Method, agent.DropUnknownType, "notification unknown to this version", m.Raw)
		return
	}
	th := d.threadOf(sc.ThreadID)
	if th == nil {
		if sc.ThreadID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "notification without threadId", m.Raw)
		} else {
			d.drop(o, m.Method, agent.DropOrphan, "thread "+sc.ThreadID+" was never announced", m.Raw)
		}
		return
	}
	base := agent.EventBase{Session: th.session}
	switch m.Method {
	case "thread/name/updated":
		var p struct {
			Name *string `json:"threadName"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Name != nil && th.session == "" {
			o.add(&agent.SessionInfo{Title: *p.Name})
		}
	case "turn/started":
		var p struct {
			Turn turn `json:"turn"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.Turn.ID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "turn/started without turn.id", m.Raw)
			return
		}
		d.startTurn(o, th, p.Turn.ID)
	case "turn/completed":
		var p struct {
			Turn turn `json:"turn"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.Turn.ID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "turn/completed without turn.id", m.Raw)
			return
		}
		d.settleTurn(o, th, p.Turn, m.Raw)
	case "item/started", "item/completed":
		var p struct {
			Item json.RawMessage `json:"item"`
		}
		if json.Unmarshal(m.Params, &p) != nil || len(p.Item) == 0 || p.Item[0] != '{' {
			d.drop(o, m.Method, agent.DropInvalidField, "item is not an object", m.Raw)
			return
		}
		d.item(o, th, p.Item, m.Method == "item/completed", m.Raw)
	case "item/agentMessage/delta", "item/plan/delta":
		var p struct {
			Delta string `json:"delta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if sc.ItemID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "delta without itemId", m.Raw)
			return
		}
		if p.Delta != "" && !th.items[sc.ItemID] {
			o.add(&agent.TextDelta{EventBase: base, Block: sc.ItemID, Delta: p.Delta})
		}
	case "item/reasoning/summaryTextDelta":
		var p struct {
			Delta string `json:"delta"`
			Index int    `json:"summaryIndex"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if sc.ItemID == "" || th.items[sc.ItemID] {
			return
		}
		last, seen := th.reason[sc.ItemID]
		delta := p.Delta
		if seen && p.Index != last {
			delta = "\n\n" + delta
		}
		th.reason[sc.ItemID] = p.Index
		if delta != "" {
			o.add(&agent.ReasoningDelta{EventBase: base, Block: sc.ItemID, Delta: delta})
		}
	case "item/reasoning/textDelta":
		var p struct {
			Delta string `json:"delta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if sc.ItemID != "" && p.Delta != "" && !th.items[sc.ItemID] {
			o.add(&agent.ReasoningDelta{EventBase: base, Block: sc.ItemID + "/raw", Delta: p.Delta})
		}
	case "item/commandExecution/outputDelta", "item/fileChange/outputDelta":
		var p struct {
			Delta json.RawMessage `json:"delta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		b, err := decodeChunk(p.Delta, false)
		if err != nil {
			d.drop(o, m.Method, agent.DropInvalidField, err.Error(), m.Raw)
			return
		}
		c := d.callFor(th, sc.ItemID)
		if c == nil {
			d.drop(o, m.Method, agent.DropMissingID, "output delta without itemId", m.Raw)
			return
		}
		c.out.write(b)
	case "item/fileChange/patchUpdated":
		var p struct {
			Changes []fileUpdate `json:"changes"`
		}
		if json.Unmarshal(m.Params, &p) != nil || sc.ItemID == "" {
			d.drop(o, m.Method, agent.DropInvalidField, "patchUpdated without itemId or changes", m.Raw)
			return
		}
		c := d.callFor(th, sc.ItemID)
		input, meta, paths := fileChangeDetail(p.Changes)
		c.paths = paths
		c.input = input
		o.add(&agent.ToolCall{EventBase: base, CallID: c.id, Tool: "edit", Title: strings.Join(paths, ", "), Input: input, Metadata: meta})
		c.shown = true
	case "turn/plan/updated":
		var p struct {
			Plan []struct {
				Step   string `json:"step"`
				Status string `json:"status"`
			} `json:"plan"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			d.drop(o, m.Method, agent.DropInvalidField, "plan is not a list of steps", m.Raw)
			return
		}
		todos := make([]agent.Todo, 0, len(p.Plan))
		for _, s := range p.Plan {
			todos = append(todos, agent.Todo{Content: s.Step, Status: todoStatus(s.Status), Priority: agent.PriorityMedium})
		}
		o.add(&agent.TodosUpdated{EventBase: base, Todos: todos})
	case "thread/tokenUsage/updated":
		var p struct {
			Usage struct {
				Last *tokenBreakdown `json:"last"`
			} `json:"tokenUsage"`
		}
		if json.Unmarshal(m.Params, &p) != nil || p.Usage.Last == nil {
			d.drop(o, m.Method, agent.DropInvalidField, "tokenUsage.last missing", m.Raw)
			return
		}
		if t := p.Usage.Last.tokens(); t != nil {
			o.add(&agent.Usage{EventBase: base, Tokens: t})
		}
	case "error":
		var p struct {
			Error     turnError `json:"error"`
			WillRetry bool      `json:"willRetry"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			d.drop(o, m.Method, agent.DropInvalidField, "error notification without error", m.Raw)
			return
		}
		kind, status := errorKind(p.Error.Info)
		if p.WillRetry {
			th.retries++
			retryable := true
			o.add(&agent.Retry{EventBase: base, Attempt: th.retries, Error: agent.MessageError{
				Name: agent.ErrNameAPI,
				Data: agent.ErrorData{Message: p.Error.Message, Kind: kind, StatusCode: status, IsRetryable: &retryable},
			}})
			return
		}
		th.errored = sc.TurnID
		o.add(&agent.AgentError{EventBase: base, Kind: kind, Text: p.Error.Message, StatusCode: status})
	case "thread/compacted":
		if th.compacts == 0 {
			o.add(&agent.Compaction{EventBase: base, ID: "compacted:" + sc.TurnID, Auto: true})
		}
	case "serverRequest/resolved":
		var p struct {
			ID json.RawMessage `json:"requestId"`
		}
		_ = json.Unmarshal(m.Params, &p)
		r := d.received[idString(p.ID)]
		if r == nil || r.answered {
			return
		}
		r.answered = true
		if c := d.calls[r.session+"\x00"+r.callID]; c != nil && c.blocked {
			c.blocked = false
			o.add(&agent.ToolResolved{EventBase: base, CallID: r.callID, Decision: agent.DecisionReject, Reason: agent.ReasonAnsweredInAgent})
		}
	}
}

func todoStatus(s string) agent.TodoStatus {
	switch s {
	case "inProgress", "in_progress":
		return agent.TodoInProgress
	case "completed":
		return agent.TodoCompleted
	}
	return agent.TodoPending
}

func (d *AppServerDecoder) startTurn(o *out, th *thread, id string) {
	if th.open && th.turn == id {
		return
	}
	if th.open {
		// A new turn while the previous never ended: close that one first.
		d.endTurn(o, th, agent.TurnTruncated, "a new turn started before this one ended")
	}
	th.turn, th.open, th.retries, th.compacts = id, true, 0, 0
	o.add(&agent.TurnStarted{EventBase: agent.EventBase{Session: th.session}, TurnID: id})
}

// settleTurn ends a turn from its final state (turn/completed, or a
// thread/read that shows it finished): items never seen are shown first.
func (d *AppServerDecoder) settleTurn(o *out, th *thread, t turn, raw []byte) {
	if !th.open || th.turn != t.ID {
		if th.turn == t.ID {
			return // already ended (reconciled earlier, or a repeat)
		}
		if !th.open && th.turn == "" {
			// The turn's start was never seen (a resumed thread): open it.
			d.startTurn(o, th, t.ID)
		} else {
			return // an older turn
		}
	}
	for _, it := range t.Items {
		var head struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(it, &head) == nil && head.ID != "" && !th.items[head.ID] {
			d.item(o, th, it, true, raw)
		}
	}
	reason, msg := agent.TurnCompleted, ""
	switch t.Status {
	case "completed":
	case "interrupted":
		reason = agent.TurnInterrupted
	case "failed":
		reason = agent.TurnFailed
		msg = "turn failed"
		if t.Error != nil {
			msg = t.Error.Message
			if th.errored != t.ID {
				kind, status := errorKind(t.Error.Info)
				o.add(&agent.AgentError{EventBase: agent.EventBase{Session: th.session}, Kind: kind, Text: msg, StatusCode: status})
			}
		}
	default:
		d.drop(o, "turn/completed", agent.DropInvalidField, "turn status "+t.Status+" is not terminal", raw)
		return
	}
	if t.Error != nil && msg == "" {
		msg = t.Error.Message
	}
	d.endTurn(o, th, reason, msg)
}

// endTurn closes the thread's open turn; open tools are settled by the
// reducer, and the decoder forgets them.
func (d *AppServerDecoder) endTurn(o *out, th *thread, reason, msg string) {
	if !th.open {
		return
	}
	th.open = false
	for k, c := range d.calls {
		if c.session == th.session && !c.done {
			c.done = true
			delete(d.calls, k)
		}
	}
	o.add(&agent.TurnEnded{EventBase: agent.EventBase{Session: th.session}, TurnID: th.turn, Reason: reason, Error: msg})
}

func (d *AppServerDecoder) exit(o *out) {
	ids := make([]string, 0, len(d.threads))
	for id := range d.threads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Children first, then the main thread.
	for _, id := range ids {
		if th := d.threads[id]; th.session != "" && th.open {
			d.endTurn(o, th, agent.TurnAgentExited, "codex exited")
		}
	}
	if th := d.threads[d.main]; th != nil && th.open {
		d.endTurn(o, th, agent.TurnAgentExited, "codex exited")
	}
}

func (d *AppServerDecoder) callFor(th *thread, id string) *call {
	if id == "" {
		return nil
	}
	k := th.session + "\x00" + id
	c := d.calls[k]
	if c == nil {
		c = &call{session: th.session, id: id}
		d.calls[k] = c
	}
	return c
}
