package mapper

import (
	"cmp"
	"slices"
	"strings"

	"github.com/happy-dev/happy/agent"
)

// Config configures a Reducer. Only SessionID matters for ids; the rest
// fills the session record and the envelope of every message.
type Config struct {
	// SessionID is the relay session id. Every canonical id (ses_, msg_,
	// prt_, per_, q_) is derived from it, so two relay sessions never share
	// an id and the same relay session always gets the same ones.
	SessionID string
	// ProjectID is the root session's projectID.
	ProjectID string
	// Directory is the agent's working folder: session directory and
	// message path.cwd. A SessionInfo Cwd fills it when empty.
	Directory string
	// Root is the project root (message path.root); "" means Directory.
	Root string
	// Title is the root session's initial title; SessionInfo may change it.
	Title string
	// Agent is the agent mode of new messages ("build", "default", …).
	Agent string
	// ProviderID and ModelID name the model of new messages until a
	// SessionInfo or MessageStarted says otherwise.
	ProviderID string
	ModelID    string
	// Rules are the configured permission rules (config files, then
	// flags), in order. With a session's runtime "always" rules they decide
	// which other blocked tools an "always" answer unblocks (Ruleset).
	Rules []PermissionRule
	// Source is the Dropped.Source of events the reducer refuses; "" means
	// "mapper".
	Source string
	// FirstPosition, when above 0, is the id position the reducer's ids
	// start at after the root session's (which keeps position 0): a session
	// continued by a new process (happy resume) passes one past every id it
	// already has, so new ids never collide with earlier ones.
	FirstPosition uint64
}

// Reducer folds agent events into the canonical transcript of one relay
// session: the root session, its child sessions (subagents), their messages
// and parts, todos and dropped inputs. It is deterministic (the same events
// give the same transcript and the same ids, whatever the wall clock says)
// and every event is an upsert by provider identity (see Event).
//
// The rules it applies:
//
//   - Messages. A UserPrompt is a user message (text part, file parts) and
//     starts the turn's parent for assistant messages. Each assistant
//     message is one model step: it opens with a step-start part and, when
//     it ends, gets a step-finish part, time.completed and a finish. A step
//     ends when StepFinished says so, when another step of the session
//     opens (finish tool-calls if it called a tool, else stop), when a new
//     prompt arrives, or when the turn ends. Message "" is the current
//     step; output (text, reasoning, a new tool call) for Message "" after
//     a tool of the current step reported its result opens the next step.
//   - Text and reasoning. A delta appends (message.part.delta), a final
//     replaces (message.part.updated) and makes later deltas of the block
//     stale; a block still streaming when its step ends gets time.end.
//   - Tools. Every state change goes through Transition/TransitionPath: a
//     provider that skips states gets them synthesised (each published),
//     an illegal change is refused and kept as a Dropped with reason
//     illegal_transition. ToolBlocked for an unknown call creates the
//     part. ToolResolved once/always resumes the tool with the resolved
//     block kept; reject fails it. A person's reject (no Reason) rejects
//     every other blocked tool of the session (reason cancelled); always
//     adds the session's runtime rules and resumes every other blocked
//     permission they now allow (Ruleset). A ToolFailed on a blocked tool
//     resolves it as reject/answered-in-agent; one that only confirms the
//     reducer's own rejection or settlement is no news.
//   - Turn end. A turn that ends other than completed before its prompt
//     got a step gets an empty one, so its finish tells how it ended.
//     TurnEnded settles everything open in the session and its
//     child sessions: open tools go to error (reason cancelled, or
//     agent-exited), open steps finish stop/tool-calls (completed),
//     aborted (interrupted) or error with an error of kind internal
//     (transport for truncated). SubagentEnded does the same for a child.
//   - Subagents. SubagentStarted opens a child session (parentID the
//     session of the event, title, directory, a user message with the
//     prompt) and records sessionId in the state metadata of the tool
//     call that started it. Events whose Session is the child key go to
//     the child.
//   - Usage sets tokens and cost (absent stays nil); Usage for Message ""
//     before the turn has a step opens the step it belongs to; AgentError sets the
//     step's error (session.error); Retry adds a retry part (session.status
//     retry until output resumes); Compaction adds a compaction part
//     (session.compacted); TodosUpdated replaces the todo list
//     (todo.updated); DroppedInput joins the dropped list.
//   - Times. An event's Time when non-zero, else the latest time seen;
//     the wall clock is never read.
//
// Work per event is proportional to the event (parts are indexed by
// identity), except where the event itself is about many things: TurnEnded
// settles every open tool and message, an "always" or "reject" answer
// visits the session's other blocked tools.
//
// A Reducer is not safe for concurrent use: one goroutine applies events
// and publishes what Apply returns.
type Reducer struct {
	cfg          Config
	ids          *IDSource
	now          int64 // latest event time seen, Unix ms
	started      bool  // session.created of the root was emitted
	root         *redSession
	sessions     map[string]*redSession // by event session key ("" = root)
	msgs         map[string]*redMessage // by message id
	byID         map[string]*redSession // by canonical session id
	out          []BusEvent             // change events of the event being applied
	droppedTotal int                    // refusals recorded across all sessions
	cur          agent.Event            // the event being applied
}

// redSession is a session and its indexes.
type redSession struct {
	key       string
	info      Session
	parent    *redSession
	children  []*redSession
	messages  []*redMessage
	asstByKey map[string]*redMessage // assistant messages by provider message key
	userByKey map[string]*redMessage // user messages by prompt id
	current   *redMessage            // the assistant message Message "" refers to
	user      *redMessage            // the user message of the current turn
	tools     map[string]*redTool    // by call id
	open      map[*redTool]struct{}  // tools pending, running or blocked
	blocked   map[*redTool]struct{}  // tools blocked
	openMsgs  map[*redMessage]struct{}
	turns     map[string]bool // turn id → ended
	status    SessionStatusType
	pubUpdate int64 // time.updated of the last session.created/updated published
	todos     []agent.Todo
	dropped   []agent.Dropped
	dropSeen  map[agent.Dropped]struct{} // DroppedInput records with a line number
	refused   map[string]struct{}        // the reducer's own refusals
	links     map[string]string          // call id → child session id, for a subagent announced before its tool
	rules     Ruleset                    // configured rules and this session's "always" answers
	agent     string
	provider  string
	model     string
	cwd       string
}

// redMessage is a message, its parts and the index of its parts.
type redMessage struct {
	sess   *redSession
	pos    uint64
	user   *UserMessage      // exactly one of user and asst is set
	asst   *AssistantMessage //
	parts  []Part            // in order; the step-finish is kept in finish
	finish *StepFinishPart
	blocks map[redBlockKey]*redBlock // text/reasoning blocks, compaction and retry parts by identity
	tail   *redBlock                 // the text or reasoning block created last
	closed bool
	tools  int // tool parts
	// resultSeen is set when a tool of this message reported its result:
	// output for Message "" then opens the next step.
	resultSeen bool
}

// redBlockKey identifies a block within its message: kind ("text",
// "reasoning", "compaction", "retry") and the provider's key.
type redBlockKey struct{ kind, key string }

// redBlock is a text or reasoning part under construction.
type redBlock struct {
	text      *TextPart      // one of text and reasoning is set
	reasoning *ReasoningPart //
	sb        *strings.Builder
	final     bool // a final arrived: later deltas are stale
}

// NewReducer returns a Reducer for one relay session. Nothing is emitted
// until the first Apply, which starts with session.created for the root.
func NewReducer(cfg Config) *Reducer {
	if cfg.Source == "" {
		cfg.Source = "mapper"
	}
	r := &Reducer{
		cfg:      cfg,
		ids:      NewIDSource(cfg.SessionID),
		sessions: map[string]*redSession{},
		msgs:     map[string]*redMessage{},
		byID:     map[string]*redSession{},
	}
	root := r.newSession("", nil)
	root.info.ID = r.ids.Next(PrefixSession, "")
	root.info.ProjectID = cfg.ProjectID
	root.info.Directory = cfg.Directory
	root.info.Title = cfg.Title
	root.agent, root.provider, root.model, root.cwd = cfg.Agent, cfg.ProviderID, cfg.ModelID, cfg.Directory
	r.root = root
	r.byID[root.info.ID] = root
	if cfg.FirstPosition > r.ids.next {
		r.ids.next = cfg.FirstPosition
	}
	return r
}

func (r *Reducer) newSession(key string, parent *redSession) *redSession {
	s := &redSession{
		key:       key,
		parent:    parent,
		asstByKey: map[string]*redMessage{},
		userByKey: map[string]*redMessage{},
		tools:     map[string]*redTool{},
		open:      map[*redTool]struct{}{},
		blocked:   map[*redTool]struct{}{},
		openMsgs:  map[*redMessage]struct{}{},
		turns:     map[string]bool{},
		dropSeen:  map[agent.Dropped]struct{}{},
		refused:   map[string]struct{}{},
		links:     map[string]string{},
		rules:     Ruleset{Config: r.cfg.Rules},
	}
	r.sessions[key] = s
	if parent != nil {
		parent.children = append(parent.children, s)
	}
	return s
}

// RootID returns the canonical id of the root session (ses_…).
func (r *Reducer) RootID() string { return r.root.info.ID }

// Apply folds one event into the transcript and returns the change events
// it caused, in order (nil when it changed nothing). A refused event (invalid,
// orphaned, or an illegal tool transition) changes nothing but the
// session's dropped list. Apply never panics on any event value, nil
// included.
func (r *Reducer) Apply(ev agent.Event) []BusEvent {
	r.out = nil
	r.cur = ev
	if agent.IsNilEvent(ev) {
		r.startRoot(r.now)
		r.drop(r.root, agent.DropInvalidField, "nil event")
		return r.flush()
	}
	b := ev.Base()
	if b.Time > r.now {
		r.now = b.Time
	}
	t := b.Time
	if t <= 0 {
		t = r.now
	}
	r.startRoot(t)
	if err := agent.ValidateEvent(ev); err != nil {
		// Kept with the session it names when that exists; a refused event
		// does not open a session.
		s := r.sessions[b.Session]
		if s == nil {
			s = r.root
		}
		if ee, ok := err.(*agent.EventError); ok {
			r.drop(s, ee.Reason, ee.Msg)
		} else {
			r.drop(s, agent.DropInvalidField, err.Error())
		}
		return r.flush()
	}
	s := r.sessionFor(b.Session, t)
	if s.info.Time.Created == 0 {
		s.info.Time.Created = t // the stream carried no time before
	}
	if t > s.info.Time.Updated {
		s.info.Time.Updated = t
	}
	if s.status == SessionRetry {
		switch ev.(type) {
		case *agent.Retry, *agent.TurnEnded, *agent.SubagentEnded, *agent.DroppedInput:
		default:
			r.setStatus(s, SessionBusy) // the retried call is answering
		}
	}
	switch e := ev.(type) {
	case *agent.SessionInfo:
		r.sessionInfo(s, e)
	case *agent.TurnStarted:
		r.turnStarted(s, e)
	case *agent.UserPrompt:
		r.userPrompt(s, e, t)
	case *agent.MessageStarted:
		r.messageStarted(s, e, t)
	case *agent.TextDelta:
		r.textDelta(s, e.Message, e.Block, e.Delta, false, t)
	case *agent.ReasoningDelta:
		r.textDelta(s, e.Message, e.Block, e.Delta, true, t)
	case *agent.TextFinal:
		r.textFinal(s, e.Message, e.Block, e.Text, nil, false, t)
	case *agent.ReasoningFinal:
		r.textFinal(s, e.Message, e.Block, e.Text, e.Metadata, true, t)
	case *agent.ToolCall:
		r.toolCall(s, e, t)
	case *agent.ToolInputDelta:
		r.toolInputDelta(s, e)
	case *agent.ToolRunning:
		r.toolRunning(s, e, t)
	case *agent.ToolBlocked:
		r.toolBlocked(s, e, t)
	case *agent.ToolResolved:
		r.toolResolved(s, e, t)
	case *agent.ToolCompleted:
		r.toolCompleted(s, e, t)
	case *agent.ToolFailed:
		r.toolFailed(s, e, t)
	case *agent.Usage:
		r.usage(s, e, t)
	case *agent.StepFinished:
		r.stepFinished(s, e, t)
	case *agent.SubagentStarted:
		r.subagentStarted(s, e, t)
	case *agent.SubagentEnded:
		r.subagentEnded(s, e, t)
	case *agent.TodosUpdated:
		r.todosUpdated(s, e)
	case *agent.Compaction:
		r.compaction(s, e, t)
	case *agent.Retry:
		r.retry(s, e, t)
	case *agent.AgentError:
		r.agentError(s, e, t)
	case *agent.TurnEnded:
		r.turnEnded(s, e, t)
	case *agent.DroppedInput:
		r.droppedInput(s, e)
	}
	return r.flush()
}

func (r *Reducer) flush() []BusEvent {
	out := r.out
	r.out = nil
	r.cur = nil
	return out
}

func (r *Reducer) emit(ev BusEvent) { r.out = append(r.out, ev) }

// startRoot emits session.created for the root on the first event.
func (r *Reducer) startRoot(t int64) {
	if r.started {
		return
	}
	r.started = true
	r.root.info.Time = SessionTime{Created: t, Updated: t}
	r.publishSession(r.root, true)
}

// sessionFor returns the session an event is for. A key never announced by
// SubagentStarted opens a child of the root, so that its content is kept;
// a later SubagentStarted fills in its title.
func (r *Reducer) sessionFor(key string, t int64) *redSession {
	if s := r.sessions[key]; s != nil {
		return s
	}
	return r.openChild(r.root, key, "", t)
}

func (r *Reducer) openChild(parent *redSession, key, title string, t int64) *redSession {
	s := r.newSession(key, parent)
	s.info = Session{
		ID:        r.ids.Next(PrefixSession, key),
		ProjectID: parent.info.ProjectID,
		Directory: parent.info.Directory,
		ParentID:  parent.info.ID,
		Title:     title,
		Time:      SessionTime{Created: t, Updated: t},
	}
	s.agent, s.provider, s.model, s.cwd = parent.agent, parent.provider, parent.model, parent.cwd
	r.byID[s.info.ID] = s
	r.publishSession(s, true)
	return s
}

// drop records a refusal of the event being applied. The same event
// refused again for the same reason is one refusal (events are upserts).
func (r *Reducer) drop(s *redSession, reason agent.DropReason, detail string) {
	d := agent.Dropped{Source: r.cfg.Source, Kind: agent.EventName(r.cur), Reason: reason, Detail: detail}
	var raw []byte
	if !agent.IsNilEvent(r.cur) {
		raw, _ = agent.EncodeEvent(r.cur)
		d.Raw = agent.CutUTF8(string(raw), agent.DroppedRawMax)
	}
	key := string(reason) + "\x00" + detail + "\x00" + string(raw)
	if _, seen := s.refused[key]; seen {
		return
	}
	s.refused[key] = struct{}{}
	s.dropped = append(s.dropped, d)
	r.droppedTotal++
}

// ---- session-level events ----

func (r *Reducer) sessionInfo(s *redSession, e *agent.SessionInfo) {
	if e.ProviderID != "" {
		s.provider = e.ProviderID
	}
	if e.ModelID != "" {
		if s.model == "" {
			r.modelOfWaitingPrompt(s, e.ModelID)
		}
		s.model = e.ModelID
	}
	if e.Agent != "" {
		s.agent = e.Agent
	}
	changed := false
	if e.Cwd != "" {
		s.cwd = e.Cwd
		if s.info.Directory == "" {
			s.info.Directory = e.Cwd
			changed = true
		}
	}
	if e.Title != "" && e.Title != s.info.Title {
		s.info.Title = e.Title
		changed = true
	}
	if changed {
		r.publishSession(s, false)
	}
}

// modelOfWaitingPrompt gives the session's last message, a user message
// recorded before the agent said which model it runs (a prompt from another
// device that reached a starting agent), the model that will answer it: the
// one the agent now names. A message answered already keeps what it has.
// The session's provider was updated from the same event first.
func (r *Reducer) modelOfWaitingPrompt(s *redSession, model string) {
	if len(s.messages) == 0 {
		return
	}
	m := s.messages[len(s.messages)-1]
	if m.user == nil || m.user.Model.ModelID != "" {
		return
	}
	m.user.Model.ModelID = model
	if s.provider != "" {
		m.user.Model.ProviderID = s.provider // the provider that comes with the model
	}
	r.emit(&MessageUpdated{Info: m.infoSnapshot()})
}

func (r *Reducer) setBusy(s *redSession, busy bool) {
	if busy {
		r.setStatus(s, SessionBusy)
	} else {
		r.setStatus(s, SessionIdle)
	}
}

// setStatus publishes session.status when the session's state changes
// (a retry always, since its attempt changes).
func (r *Reducer) setStatus(s *redSession, st SessionStatusType) {
	if s.status == st && st != SessionRetry {
		return
	}
	s.status = st
	if st != SessionRetry {
		r.emit(&SessionStatus{SessionID: s.info.ID, Status: SessionStatusInfo{Type: st}})
	}
	// time.updated moves with every event; publishing it at every status
	// change (turn start and end) keeps the session record current without
	// a session.updated per event.
	if s.info.Time.Updated != s.pubUpdate {
		r.publishSession(s, false)
	}
}

// publishSession emits session.created or session.updated with the
// session's current record.
func (r *Reducer) publishSession(s *redSession, created bool) {
	s.pubUpdate = s.info.Time.Updated
	if created {
		r.emit(&SessionCreated{Info: s.sessionSnapshot()})
		return
	}
	r.emit(&SessionUpdated{Info: s.sessionSnapshot()})
}

func (r *Reducer) turnStarted(s *redSession, e *agent.TurnStarted) {
	if e.TurnID != "" {
		if _, seen := s.turns[e.TurnID]; seen {
			return
		}
		s.turns[e.TurnID] = false
	}
	r.setBusy(s, true)
}

func (r *Reducer) userPrompt(s *redSession, e *agent.UserPrompt, t int64) {
	if m := s.userByKey[e.PromptID]; m != nil {
		// A repeated prompt: the text may have been completed since.
		if len(m.parts) > 0 {
			if tp, ok := m.parts[0].(*TextPart); ok && (tp.Text != e.Text || tp.Synthetic != e.Synthetic) {
				tp.Text, tp.Synthetic = e.Text, e.Synthetic
				r.emitPart(tp)
			}
		}
		return
	}
	if c := s.current; c != nil && !c.closed {
		r.closeMessage(c, c.derivedFinish(), nil, t)
	}
	id := e.MessageID
	if id == "" || r.msgs[id] != nil {
		id = r.ids.Next(PrefixMessage, "user\x00"+e.PromptID)
	}
	um := &UserMessage{
		ID:        id,
		SessionID: s.info.ID,
		Role:      RoleUser,
		Time:      UserTime{Created: t},
		Agent:     s.agent,
		Model:     ModelRef{ProviderID: s.provider, ModelID: s.model},
	}
	if e.Received > 0 {
		received := e.Received
		um.Time.Received = &received
		if e.Handed > 0 {
			handed := e.Handed
			um.Time.Handed = &handed
		}
	}
	m := r.addMessage(s, um, nil)
	s.userByKey[e.PromptID] = m
	s.user = m
	s.current = nil
	r.emit(&MessageUpdated{Info: m.infoSnapshot()})
	if e.Text != "" || len(e.Files) == 0 {
		tp := &TextPart{PartBase: r.partBase(m, "text"), Text: e.Text, Synthetic: e.Synthetic}
		m.parts = append(m.parts, tp)
		r.emitPart(tp)
	}
	for _, f := range e.Files {
		// A file part needs a mime type (seed 001); a prompt's file of an
		// unknown type (an ACP resource_link without mimeType, say) is
		// bytes, as a tool result's file of an unknown type is.
		mime := f.Mime
		if mime == "" {
			mime = "application/octet-stream"
		}
		fp := &FilePart{PartBase: r.partBase(m, "file"), Mime: mime, Filename: f.Filename, URL: f.URL, Source: f.Source}
		m.parts = append(m.parts, fp)
		r.emitPart(fp)
	}
}

// PromptStarted writes the last receipt of the root session's prompt
// promptID (the UserPrompt's PromptID): t (Unix ms) is when the agent's
// first event of the turn it started came. It changes nothing (nil) for a
// prompt without receipts (no Received), one unknown, or one whose start is
// known already; otherwise it returns the user message's message.updated.
func (r *Reducer) PromptStarted(promptID string, t int64) []BusEvent {
	m := r.root.userByKey[promptID]
	if m == nil || m.user == nil || m.user.Time.Handed == nil || m.user.Time.Started != nil {
		return nil
	}
	m.user.Time.Started = &t
	r.out = nil
	r.emit(&MessageUpdated{Info: m.infoSnapshot()})
	return r.flush()
}

func (r *Reducer) todosUpdated(s *redSession, e *agent.TodosUpdated) {
	todos := slices.Clone(e.Todos)
	if todos == nil {
		todos = []agent.Todo{}
	}
	if s.todos != nil && slices.Equal(s.todos, todos) {
		return
	}
	s.todos = todos
	r.emit(&TodoUpdated{SessionID: s.info.ID, Todos: slices.Clone(todos)})
}

func (r *Reducer) droppedInput(s *redSession, e *agent.DroppedInput) {
	d := e.Dropped
	if d.Line != 0 {
		// With a line number a repeat is the same refusal read twice.
		if _, seen := s.dropSeen[d]; seen {
			return
		}
		s.dropSeen[d] = struct{}{}
	}
	s.dropped = append(s.dropped, d)
	r.droppedTotal++
}

func (r *Reducer) subagentStarted(s *redSession, e *agent.SubagentStarted, t int64) {
	title := e.Title
	if title == "" {
		title = e.Description
		if e.Agent != "" {
			title = strings.TrimSpace(title + " (@" + e.Agent + ")")
		}
	}
	child := r.sessions[e.Child]
	if child == nil {
		child = r.openChild(s, e.Child, title, t)
	} else if title != "" && child.info.Title != title {
		child.info.Title = title
		r.publishSession(child, false)
	}
	if e.Agent != "" {
		child.agent = e.Agent
	}
	if e.Prompt != "" && child.userByKey["subagent\x00"+e.Child] == nil {
		r.userPrompt(child, &agent.UserPrompt{PromptID: "subagent\x00" + e.Child, Text: e.Prompt}, t)
	}
	r.setBusy(child, true)
	if e.CallID != "" {
		if tl := s.tools[e.CallID]; tl != nil {
			r.linkChild(s, tl, child.info.ID)
		} else {
			s.links[e.CallID] = child.info.ID
		}
	}
}

func (r *Reducer) subagentEnded(s *redSession, e *agent.SubagentEnded, t int64) {
	child := r.sessions[e.Child]
	if child == nil || child == r.root {
		r.drop(s, agent.DropOrphan, "subagent "+e.Child+" was never started")
		return
	}
	r.settle(child, agent.TurnCompleted, "", t)
}

func (r *Reducer) turnEnded(s *redSession, e *agent.TurnEnded, t int64) {
	if e.TurnID != "" {
		s.turns[e.TurnID] = true
	}
	if e.Reason != agent.TurnCompleted && s.user != nil && s.current == nil {
		// Stopped (or failed) before its first step: the step exists
		// without content, so the prompt does not stand unanswered and
		// silent, and its finish says how the turn ended.
		r.openAssistant(s, "", t)
	}
	r.settle(s, e.Reason, e.Error, t)
}

// settle closes everything open in s and its descendants: tools still
// pending, running or blocked go to error (blocked ones resolved as reject
// with a reason), open assistant messages get time.completed and a finish.
func (r *Reducer) settle(s *redSession, reason, errText string, t int64) {
	for _, c := range s.children {
		r.settle(c, reason, errText, t)
	}
	// A tool still open when its turn ends will never finish: it is settled
	// with the reason nobody decided (docs/ARCHITECTURE.md "Vocabulary of a permission outcome").
	toolReason := agent.ReasonCancelled
	if reason == agent.TurnAgentExited {
		toolReason = agent.ReasonAgentExited
	}
	for _, tl := range redSortedTools(s.open) {
		r.settleTool(s, tl, toolReason, t)
	}
	msgs := make([]*redMessage, 0, len(s.openMsgs))
	for m := range s.openMsgs {
		msgs = append(msgs, m)
	}
	slices.SortFunc(msgs, func(a, b *redMessage) int { return cmp.Compare(a.pos, b.pos) })
	for _, m := range msgs {
		finish, merr := redTurnFinish(m, reason, errText)
		r.closeMessage(m, finish, merr, t)
	}
	r.setBusy(s, false)
}

// turnFinish is the finish (and error) of a message still open when its
// turn ends for reason.
func redTurnFinish(m *redMessage, reason, errText string) (string, *agent.MessageError) {
	switch reason {
	case agent.TurnCompleted:
		return m.derivedFinish(), nil
	case agent.TurnInterrupted:
		return agent.FinishAborted, nil
	}
	if m.asst.Error != nil {
		return agent.FinishError, nil
	}
	kind := agent.ErrorInternal
	if reason == agent.TurnTruncated {
		kind = agent.ErrorTransport
	}
	msg := errText
	if msg == "" {
		msg = "turn ended: " + reason
	}
	return agent.FinishError, &agent.MessageError{Name: agent.ErrNameUnknown, Data: agent.ErrorData{Message: msg, Kind: kind}}
}

// ---- helpers ----

func redPtr[T any](v T) *T { return &v }

func redQuoteKey(k string) string {
	if k == "" {
		return "(current)"
	}
	return "\"" + k + "\""
}
