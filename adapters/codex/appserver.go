package codex

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
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
	received map[string]*srvReq // Codex's requests by id (nil until the first: see receive)
	out      out                // the events of the frame being mapped
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
	input   json.RawMessage // the canonical input announced
	meta    agent.Object    // the part metadata announced
	paths   []string
	shown   bool // ToolCall emitted
	running bool
	blocked bool
	done    bool
	synth   bool // mcp-server: a call happy named for an approval that named none it knows
	out     outBuf
}

// receive records Codex's request r under key (the map is made at the
// first: a session may never get one).
func (d *AppServerDecoder) receive(key string, r *srvReq) {
	if d.received == nil {
		d.received = map[string]*srvReq{}
	}
	d.received[key] = r
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
		threads: map[string]*thread{},
		calls:   map[string]*call{},
		sent:    map[string]sentReq{},
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
	// The decoder's own out: one allocated per frame would be garbage at
	// once. Its events are collected in the decoder's buffer and handed
	// over in a slice of their exact number (the caller's): growing the
	// caller's slice by appending left two or three smaller ones behind.
	d.out = out{t: f.T, ev: d.out.ev[:0]}
	o := &d.out
	defer func() {
		clear(d.out.ev) // the caller's events are not held
		d.out = out{ev: d.out.ev[:0]}
	}()
	d.decode(o, f)
	if len(o.ev) == 0 {
		return nil
	}
	return append(make([]agent.Event, 0, len(o.ev)), o.ev...)
}

// decode maps frame f into o.
func (d *AppServerDecoder) decode(o *out, f jsonrpc.Frame) {
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
}

// unmarshalEmitted is emittedAtMs decoded by encoding/json (0 when it is
// no int64). A function of its own: the value json.Unmarshal fills escapes
// to the heap, and a2c would otherwise allocate it for every frame.
func unmarshalEmitted(raw []byte) int64 {
	var emitted int64
	if json.Unmarshal(raw, &emitted) != nil {
		return 0
	}
	return emitted
}

func (d *AppServerDecoder) drop(o *out, kind string, reason agent.DropReason, detail string, raw []byte) {
	o.add(dropped(SourceAppServer, d.n, o.t, kind, reason, detail, raw))
}

func (d *AppServerDecoder) a2c(o *out, f jsonrpc.Frame) {
	// A decoded frame is an object, never text: only the others are asked
	// (Text allocates).
	if s, ok := f.Text(); !f.HasMsg() && ok {
		d.drop(o, "", agent.DropUnparseableJSON, "agent wrote a line that is not JSON", []byte(s))
		return
	}
	if !f.HasMsg() {
		kind, reason, detail := jsonrpc.DropOf(f.Err)
		d.drop(o, kind, reason, detail, f.Data)
		return
	}
	m := f.Msg
	if emitted := unmarshalEmitted(m.EmittedAtMs()); emitted > 0 {
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
	return &thread{session: session, items: map[string]bool{}}
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

// threadResult is the result of thread/start, thread/resume and
// thread/fork.
type threadResult struct {
	Thread        threadInfo `json:"thread"`
	Model         string     `json:"model"`
	ModelProvider string     `json:"modelProvider"`
	Cwd           string     `json:"cwd"`
}

// turnParams are the params of turn/started and turn/completed, and the
// result of turn/start.
type turnParams struct {
	Turn turn `json:"turn"`
}

// usageParams are the params of thread/tokenUsage/updated the decoder
// reads.
type usageParams struct {
	Usage struct {
		Last *tokenBreakdown `json:"last"`
	} `json:"tokenUsage"`
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
	why, ok := ignoredNotifications[kind]
	return why, ok
}

// ignoredNotifications are the notifications known and deliberately not
// mapped, with the reason.
var ignoredNotifications = map[string]string{
	"thread/status/changed":                     "thread state is derived from turns and approval requests",
	"thread/readState/changed":                  "unread markers of other clients",
	"thread/archived":                           "thread housekeeping",
	"thread/deleted":                            "thread housekeeping",
	"thread/unarchived":                         "thread housekeeping",
	"thread/closed":                             "thread housekeeping; the process exit ends open turns",
	"thread/reverted":                           "history rewrite of another client",
	"thread/section/changed":                    "UI grouping of threads",
	"thread/attachment/updated":                 "attachments are not mirrored yet",
	"thread/goal/updated":                       "goal tracking of the Codex UI",
	"thread/goal/cleared":                       "goal tracking of the Codex UI",
	"thread/prediction/updated":                 "UI typing prediction",
	"thread/queue/changed":                      "Codex's own prompt queue; happy queues prompts itself",
	"project/changed":                           "project metadata",
	"thread/project/updated":                    "project metadata",
	"thread/environment/connected":              "execution environment status",
	"thread/environment/disconnected":           "execution environment status",
	"thread/settings/updated":                   "settings echo",
	"skills/changed":                            "skill inventory",
	"hook/started":                              "hook runs are not transcript content",
	"hook/completed":                            "hook runs are not transcript content",
	"turn/diff/updated":                         "aggregate diff of the turn; each fileChange item carries its own diff",
	"item/autoApprovalReview/started":           "automatic approval reviewer progress",
	"item/autoApprovalReview/completed":         "automatic approval reviewer progress",
	"autoApprovalReview/strictReviewRequired":   "automatic approval reviewer progress",
	"command/exec/outputDelta":                  "output of a command/exec request happy never sends",
	"process/outputDelta":                       "output of a process started outside a turn",
	"process/exited":                            "process started outside a turn",
	"thread/search/partial":                     "search results of another client",
	"item/commandExecution/terminalInteraction": "stdin written to a running command; its output follows as deltas",
	"item/reasoning/summaryPartAdded":           "separators are derived from summaryIndex of the deltas",
	"item/mcpToolCall/progress":                 "transient progress text of an MCP tool",
	"mcpServer/oauthLogin/completed":            "MCP server login",
	"mcpServer/startupStatus/updated":           "MCP server startup",
	"mcpServer/event/stream/notification":       "MCP server event stream",
	"account/updated":                           "account state",
	"account/gatewayOAuth/changed":              "account state",
	"account/rateLimits/updated":                "rate-limit gauges; errors carry what matters",
	"account/login/completed":                   "account state",
	"app/list/updated":                          "app inventory",
	"remoteControl/status/changed":              "remote-control status of the Codex UI",
	"externalAgentConfig/import/progress":       "config import",
	"externalAgentConfig/import/completed":      "config import",
	"fs/changed":                                "file watch of another client",
	"model/rerouted":                            "model fallback notice; usage stays on the turn",
	"model/verification":                        "model verification notice",
	"modelProvider/authRecoveryStarted":         "credential refresh",
	"modelProvider/authRecoveryCompleted":       "credential refresh",
	"turn/moderationMetadata":                   "moderation metadata",
	"model/safetyBuffering/updated":             "moderation buffering state",
	"warning":                                   "diagnostic, logged with the traffic",
	"guardianWarning":                           "diagnostic, logged with the traffic",
	"deprecationNotice":                         "diagnostic, logged with the traffic",
	"configWarning":                             "diagnostic, logged with the traffic",
	"fuzzyFileSearch/sessionUpdated":            "file search of another client",
	"fuzzyFileSearch/sessionCompleted":          "file search of another client",
	"thread/realtime/started":                   "realtime voice sessions are not mirrored",
	"thread/realtime/itemAdded":                 "realtime voice sessions are not mirrored",
	"thread/realtime/item/started":              "realtime voice sessions are not mirrored",
	"thread/realtime/item/transcript/delta":     "realtime voice sessions are not mirrored",
	"thread/realtime/item/completed":            "realtime voice sessions are not mirrored",
	"thread/realtime/transcript/delta":          "realtime voice sessions are not mirrored",
	"thread/realtime/transcript/done":           "realtime voice sessions are not mirrored",
	"thread/realtime/outputAudio/delta":         "realtime voice sessions are not mirrored",
	"thread/realtime/sdp":                       "realtime voice sessions are not mirrored",
	"thread/realtime/error":                     "realtime voice sessions are not mirrored",
	"thread/realtime/closed":                    "realtime voice sessions are not mirrored",
	"windows/worldWritableWarning":              "Windows sandbox setup",
	"windowsSandbox/setupCompleted":             "Windows sandbox setup",
}

// scoped is the thread/turn/item addressing most notifications carry.
type scoped struct {
	ThreadID string `json:"threadId"`
	TurnID   string `json:"turnId"`
	ItemID   string `json:"itemId"`
}

// notice is a notification of a known thread, for its handler.
type notice struct {
	o    *out
	th   *thread
	base agent.EventBase // the thread's session
	sc   scoped
	m    jsonrpc.Message
}

// appServerNotifications maps every notification the decoder maps (see the
// coverage table of the package doc) to its handler; a method neither here
// nor in ignoredNotification's list is dropped as unknown.
var appServerNotifications = map[string]func(*AppServerDecoder, notice){
	"thread/name/updated":               (*AppServerDecoder).threadName,
	"turn/started":                      (*AppServerDecoder).turnStarted,
	"turn/completed":                    (*AppServerDecoder).turnCompleted,
	"item/started":                      (*AppServerDecoder).itemNotice,
	"item/completed":                    (*AppServerDecoder).itemNotice,
	"item/agentMessage/delta":           (*AppServerDecoder).textDelta,
	"item/plan/delta":                   (*AppServerDecoder).textDelta,
	"item/reasoning/summaryTextDelta":   (*AppServerDecoder).summaryDelta,
	"item/reasoning/textDelta":          (*AppServerDecoder).reasoningDelta,
	"item/commandExecution/outputDelta": (*AppServerDecoder).outputDelta,
	"item/fileChange/outputDelta":       (*AppServerDecoder).outputDelta,
	"item/fileChange/patchUpdated":      (*AppServerDecoder).patchUpdated,
	"turn/plan/updated":                 (*AppServerDecoder).planUpdated,
	"thread/tokenUsage/updated":         (*AppServerDecoder).tokenUsage,
	"error":                             (*AppServerDecoder).errorNotice,
	"thread/compacted":                  (*AppServerDecoder).compacted,
	"serverRequest/resolved":            (*AppServerDecoder).requestResolved,
}

func (d *AppServerDecoder) notification(o *out, m jsonrpc.Message) {
	if _, ok := ignoredNotification(m.Method); ok {
		return
	}
	if m.Method == "thread/started" {
		var p struct {
			Thread threadInfo `json:"thread"`
		}
		if json.Unmarshal(m.Params, &p) != nil {
			p.Thread.ID = ""
		}
		if p.Thread.ID == "" {
			d.drop(o, m.Method, agent.DropMissingID, "thread/started without thread.id", m.Raw)
			return
		}
		d.threadStarted(o, p.Thread)
		return
	}
	handle := appServerNotifications[m.Method]
	if handle == nil {
		d.drop(o, m.Method, agent.DropUnknownType, "notification unknown to this version", m.Raw)
		return
	}
	var sc scoped
	if len(m.Params) > 0 && m.Params[0] == '{' {
		// The frame was validated when it was parsed: a structural pass
		// finds the three ids without decoding the params again.
		jsonlex.StringFields(m.Params, []*string{&sc.ThreadID, &sc.TurnID, &sc.ItemID}, "threadId", "turnId", "itemId")
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
	handle(d, notice{o: o, th: th, base: agent.EventBase{Session: th.session}, sc: sc, m: m})
}

func (d *AppServerDecoder) dropNotice(n notice, reason agent.DropReason, detail string) {
	d.drop(n.o, n.m.Method, reason, detail, n.m.Raw)
}

func (d *AppServerDecoder) threadName(n notice) {
	var p struct {
		Name *string `json:"threadName"`
	}
	_ = json.Unmarshal(n.m.Params, &p)
	if p.Name != nil && n.th.session == "" {
		n.o.add(&agent.SessionInfo{Title: *p.Name})
	}
}

func (d *AppServerDecoder) turnStarted(n notice) {
	var p turnParams
	if json.Unmarshal(n.m.Params, &p) != nil || p.Turn.ID == "" {
		d.dropNotice(n, agent.DropMissingID, "turn/started without turn.id")
		return
	}
	d.startTurn(n.o, n.th, p.Turn.ID)
}

func (d *AppServerDecoder) turnCompleted(n notice) {
	var p turnParams
	if json.Unmarshal(n.m.Params, &p) != nil || p.Turn.ID == "" {
		d.dropNotice(n, agent.DropMissingID, "turn/completed without turn.id")
		return
	}
	d.settleTurn(n.o, n.th, p.Turn, n.m.Raw)
}

func (d *AppServerDecoder) itemNotice(n notice) {
	item, _ := jsonlex.Field(n.m.Params, "item") // params of a validated frame
	if len(item) == 0 || item[0] != '{' {
		d.dropNotice(n, agent.DropInvalidField, "item is not an object")
		return
	}
	d.item(n.o, n.th, item, n.m.Method == "item/completed", n.m.Raw)
}

func (d *AppServerDecoder) textDelta(n notice) {
	var p struct{ Delta string }
	jsonlex.StringFields(n.m.Params, []*string{&p.Delta}, "delta")
	if n.sc.ItemID == "" {
		d.dropNotice(n, agent.DropMissingID, "delta without itemId")
		return
	}
	if p.Delta != "" && !n.th.items[n.sc.ItemID] {
		n.o.add(&agent.TextDelta{EventBase: n.base, Block: n.sc.ItemID, Delta: p.Delta})
	}
}

// summaryDelta puts a blank line between the parts of a reasoning summary.
func (d *AppServerDecoder) summaryDelta(n notice) {
	var p struct {
		Delta string `json:"delta"`
		Index int    `json:"summaryIndex"`
	}
	_ = json.Unmarshal(n.m.Params, &p)
	id := n.sc.ItemID
	if id == "" || n.th.items[id] {
		return
	}
	last, seen := n.th.reason[id]
	delta := p.Delta
	if seen && p.Index != last {
		delta = "\n\n" + delta
	}
	if n.th.reason == nil {
		n.th.reason = map[string]int{} // made at the first reasoning summary
	}
	n.th.reason[id] = p.Index
	if delta != "" {
		n.o.add(&agent.ReasoningDelta{EventBase: n.base, Block: id, Delta: delta})
	}
}

func (d *AppServerDecoder) reasoningDelta(n notice) {
	var p struct{ Delta string }
	jsonlex.StringFields(n.m.Params, []*string{&p.Delta}, "delta")
	if n.sc.ItemID != "" && p.Delta != "" && !n.th.items[n.sc.ItemID] {
		n.o.add(&agent.ReasoningDelta{EventBase: n.base, Block: n.sc.ItemID + "/raw", Delta: p.Delta})
	}
}

func (d *AppServerDecoder) outputDelta(n notice) {
	delta, _ := jsonlex.Field(n.m.Params, "delta")
	b, err := decodeChunk(delta, false)
	if err != nil {
		d.dropNotice(n, agent.DropInvalidField, err.Error())
		return
	}
	c := d.callFor(n.th, n.sc.ItemID)
	if c == nil {
		d.dropNotice(n, agent.DropMissingID, "output delta without itemId")
		return
	}
	c.out.write(b)
}

func (d *AppServerDecoder) patchUpdated(n notice) {
	var p struct {
		Changes []fileUpdate `json:"changes"`
	}
	if json.Unmarshal(n.m.Params, &p) != nil || n.sc.ItemID == "" {
		d.dropNotice(n, agent.DropInvalidField, "patchUpdated without itemId or changes")
		return
	}
	c := d.callFor(n.th, n.sc.ItemID)
	input, meta, paths := fileChangeDetail(p.Changes)
	c.paths = paths
	c.input = input
	n.o.add(&agent.ToolCall{EventBase: n.base, CallID: c.id, Tool: "edit", Title: strings.Join(paths, ", "), Input: input, Metadata: meta})
	c.shown = true
}

func (d *AppServerDecoder) planUpdated(n notice) {
	var p struct {
		Plan []struct {
			Step   string `json:"step"`
			Status string `json:"status"`
		} `json:"plan"`
	}
	if json.Unmarshal(n.m.Params, &p) != nil {
		d.dropNotice(n, agent.DropInvalidField, "plan is not a list of steps")
		return
	}
	todos := make([]agent.Todo, 0, len(p.Plan))
	for _, s := range p.Plan {
		todos = append(todos, agent.Todo{Content: s.Step, Status: todoStatus(s.Status), Priority: agent.PriorityMedium})
	}
	n.o.add(&agent.TodosUpdated{EventBase: n.base, Todos: todos})
}

func (d *AppServerDecoder) tokenUsage(n notice) {
	var p usageParams
	if json.Unmarshal(n.m.Params, &p) != nil || p.Usage.Last == nil {
		d.dropNotice(n, agent.DropInvalidField, "tokenUsage.last missing")
		return
	}
	if t := p.Usage.Last.tokens(); t != nil {
		n.o.add(&agent.Usage{EventBase: n.base, Tokens: t})
	}
}

// errorNotice is a Retry when Codex retries, else an AgentError.
func (d *AppServerDecoder) errorNotice(n notice) {
	var p struct {
		Error     turnError `json:"error"`
		WillRetry bool      `json:"willRetry"`
	}
	if json.Unmarshal(n.m.Params, &p) != nil {
		d.dropNotice(n, agent.DropInvalidField, "error notification without error")
		return
	}
	kind, status := errorKind(p.Error.Info)
	if p.WillRetry {
		n.th.retries++
		retryable := true
		n.o.add(&agent.Retry{EventBase: n.base, Attempt: n.th.retries, Error: agent.MessageError{
			Name: agent.ErrNameAPI,
			Data: agent.ErrorData{Message: p.Error.Message, Kind: kind, StatusCode: status, IsRetryable: &retryable},
		}})
		return
	}
	n.th.errored = n.sc.TurnID
	n.o.add(&agent.AgentError{EventBase: n.base, Kind: kind, Text: p.Error.Message, StatusCode: status})
}

func (d *AppServerDecoder) compacted(n notice) {
	if n.th.compacts == 0 {
		n.o.add(&agent.Compaction{EventBase: n.base, ID: "compacted:" + n.sc.TurnID, Auto: true})
	}
}

// requestResolved: a request Codex resolved without happy's answer.
func (d *AppServerDecoder) requestResolved(n notice) {
	var p struct {
		ID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(n.m.Params, &p)
	r := d.received[idString(p.ID)]
	if r == nil || r.answered {
		return
	}
	r.answered = true
	if c := d.calls[r.session+"\x00"+r.callID]; c != nil && c.blocked {
		c.blocked = false
		n.o.add(&agent.ToolResolved{EventBase: agent.EventBase{Session: r.session}, CallID: r.callID, Decision: agent.DecisionReject, Reason: agent.ReasonAnsweredInAgent})
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
