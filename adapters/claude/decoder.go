package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/jsonlex"
	"github.com/happy-dev/happy/internal/linereader"
)

// ProviderID is the provider id of every message the decoder announces.
const ProviderID = "anthropic"

// DefaultRecent is how many closed messages, closed tool calls and record
// uuids a Decoder remembers to recognise duplicates (Options.Recent).
const DefaultRecent = 4096

// Options configure a Decoder. The zero value suits `happy replay`.
type Options struct {
	// ControlChannel says that the stream is an SDK-mode stdout whose
	// can_use_tool requests the wrapper answers. An AskUserQuestion call
	// then becomes blocked when its control request arrives; without a
	// control channel (one-shot stream-json, session JSONL) it is blocked
	// as soon as the call is seen. FormTrafficLog implies it.
	ControlChannel bool
	// Recent bounds the memory used to recognise records, messages and tool
	// calls written twice (0 means DefaultRecent). Duplicates further apart
	// than this many closed items are decoded again, which the reducer's
	// upserts absorb.
	Recent int
}

// EndOfStream says how a native stream ended, for Decoder.Finish.
type EndOfStream struct {
	// Exited is true when the agent process ended (its exit is known);
	// false when only the stream ended (end of a file being replayed).
	Exited bool
	// Code is the exit code, nil when unknown or killed by a signal.
	Code *int
	// Signal names the signal that killed the process ("" if none).
	Signal string
}

// Decoder turns native Claude Code records, one line at a time, into
// provider-neutral agent events. It never panics on input: a line it
// cannot use becomes a DroppedInput event. It keeps only the state of
// what is open (turns, messages, tool calls, subagents) plus a bounded
// memory of recently closed items. Not safe for concurrent use.
type Decoder struct {
	form Form
	opts Options
	src  string

	out  []agent.Event
	line int64  // line number of the record being decoded
	raw  []byte // the line being decoded (for Dropped.Raw)
	t    int64  // time of the record being decoded (Unix ms), 0 = unknown

	sessions map[string]*session
	tools    map[string]*tool
	msgs     map[string]*message // open messages by msgKey(session, id)
	recent   *recentSet
	agents   map[string]string // Claude agentId → child session key
	sideUUID map[string]string // uuid of an old-style sidechain record → child key
	requests map[string]string // can_use_tool request_id → call id
	// hookAnswered are calls whose PermissionRequest hook happy answered
	// (Observe of their ToolResolved): the transcript's later
	// hook_permission_decision attachment is the echo of that answer,
	// already recorded with its reason, and is skipped once seen.
	hookAnswered map[string]bool
	turnSeq      int // turns opened without a provider id
	// compactions counts the compact_boundary records seen per uuid: a
	// later record with the same uuid is another compaction.
	compactions map[string]int

	costBase  *float64 // total_cost_usd of the last result of this agent process
	interrupt bool     // an interrupt was requested for the current root turn
	finished  bool
	info      agent.SessionInfo // last SessionInfo emitted

	rec         *record     // reused by decodeRecord
	fast        *fastRecord // reused by decodeRecord
	customTitle bool
}

// session is the decoder's view of the root session ("") or of a
// subagent's child session (key = the Agent/Task call id).
type session struct {
	key        string
	started    bool   // a child session that was announced with SubagentStarted
	ended      bool   // a child session that was ended with SubagentEnded
	owner      string // the session of the call that started a child
	prompt     string // the prompt SubagentStarted carried (the reducer shows it)
	turnOpen   bool
	turnID     string
	curMsg     string   // id of the current assistant message
	lastMsg    string   // last assistant message id of the turn
	turnMsgs   []string // ids of the messages of the open turn
	openTools  []string // call ids of open tools, in order of appearance
	lastStop   string   // native stop reason of the last finished step
	turnErr    string   // error of the turn (synthetic API error)
	errEmitted bool     // an AgentError was emitted for the turn
	stopped    bool     // an interruption marker was seen in this turn
	streamMsg  string   // id of the message being streamed (stream_event)
	tasks      []task   // the TaskCreate todo list
}

// message is an open assistant message (one model step).
type message struct {
	session  string
	id       string
	blocks   map[uint64]string // fingerprint → block key
	ordinal  int               // next block key
	hasTools bool
	stop     string // native stop_reason
	finished bool
	usage    usage
	usageFP  [4]int64
	stream   map[int]string // content index → call id (partial messages)
	// partial holds the streamed text and thinking blocks (by block key)
	// whose complete assistant line has not come yet: true for thinking.
	partial map[string]bool
	aborted bool // a person's stop marked it aborted
}

// toolStatus is the decoder's copy of a tool part's state.
type toolStatus int

const (
	toolPending  toolStatus = iota
	toolRunning             // running, or blocked and allowed
	toolBlocked             // waiting for a person
	toolRejected            // blocked and rejected; the agent's result will follow
)

// tool is an open tool call.
type tool struct {
	callID   string
	session  string
	msg      string
	name     string // Claude's tool name
	input    json.RawMessage
	status   toolStatus
	question bool   // blocked on a question rather than a permission
	child    string // child session key for Agent/Task calls
}

// task is one TaskCreate entry.
type task struct {
	id      string
	content string
	status  agent.TodoStatus
}

// NewDecoder returns a Decoder for one stream of the given form.
// Errors: ErrUnknownForm for FormUnknown or an out-of-range form.
func NewDecoder(form Form, opts Options) (*Decoder, error) {
	switch form {
	case FormSessionJSONL, FormStreamJSON, FormTrafficLog:
	default:
		return nil, fmt.Errorf("%w: form %d", ErrUnknownForm, form)
	}
	if form == FormTrafficLog {
		opts.ControlChannel = true
	}
	n := opts.Recent
	if n <= 0 {
		n = DefaultRecent
	}
	return &Decoder{
		form:     form,
		opts:     opts,
		src:      form.source(),
		sessions: map[string]*session{},
		tools:    map[string]*tool{},
		msgs:     map[string]*message{},
		recent:   newRecentSet(n),
		agents:   map[string]string{},
		sideUUID: map[string]string{},
		requests: map[string]string{},

		compactions: map[string]int{},
	}, nil
}

// Form is the form the decoder was made for.
func (d *Decoder) Form() Form { return d.form }

// Decode maps one native line (without its newline; lineNo is its 1-based
// number, used in Dropped records) to agent events, in order. The returned
// slice is the caller's. Blank lines yield nothing.
func (d *Decoder) Decode(line []byte, lineNo int64) []agent.Event {
	d.out = nil
	d.line, d.raw, d.t = lineNo, line, 0
	defer func() { d.raw = nil }()
	if d.finished {
		d.drop("", agent.DropInvalidField, "line after the end of the stream")
		return d.take()
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	if d.form == FormTrafficLog {
		d.decodeTraffic(line)
	} else {
		d.decodeRecord(line, "")
	}
	return d.take()
}

// DecodeLine maps a line from a linereader.Reader, reporting an oversized
// line (one the reader skipped) as a Dropped record with reason oversize
// whose detail gives its size and the reader's limit
// (linereader.Line.OversizeDetail).
func (d *Decoder) DecodeLine(l linereader.Line) []agent.Event {
	if !l.Oversize {
		return d.Decode(l.Data, l.Number)
	}
	d.out = nil
	d.line, d.raw, d.t = l.Number, l.Data, 0
	d.drop(sniffKind(l.Data), agent.DropOversize, l.OversizeDetail())
	d.raw = nil
	return d.take()
}

// Incomplete reports the bytes of a last line that never got its newline
// (the writer stopped mid-record): it becomes a Dropped record with reason
// unparseable_json. size is the full length of the fragment.
func (d *Decoder) Incomplete(fragment []byte, size, lineNo int64) []agent.Event {
	d.out = nil
	d.line, d.raw, d.t = lineNo, fragment, 0
	d.drop(sniffKind(fragment), agent.DropUnparseableJSON, fmt.Sprintf("incomplete last line (%d bytes, no newline): the writer stopped mid-record", size))
	d.raw = nil
	return d.take()
}

// Finish ends the stream: an open turn is closed (every open tool settled)
// with a reason that follows from how the stream ended, and pending steps
// are finished. After Finish, Decode refuses lines.
func (d *Decoder) Finish(end EndOfStream) []agent.Event {
	d.out = nil
	d.line, d.t = 0, 0
	if d.finished {
		return nil
	}
	root := d.session("")
	if root.turnOpen {
		switch {
		case end.Exited:
			d.closeTurn(root, agent.TurnAgentExited, exitText(end))
		case d.form == FormSessionJSONL:
			// A transcript file has no result record: a turn whose last
			// step finished and left nothing open is complete.
			reason, text := d.quietEnd(root, agent.TurnTruncated, "the transcript ends with the turn still open")
			d.closeTurn(root, reason, text)
		default:
			d.closeTurn(root, agent.TurnTruncated, "stream ended without a result")
		}
	}
	// Child sessions still running: background subagents, subagents of a
	// call never seen.
	for _, key := range d.sessionKeys() {
		if s := d.sessions[key]; key != "" {
			d.endChild(key, agent.TurnTruncated, "stream ended before the subagent finished")
			d.closeTurn(s, agent.TurnTruncated, "stream ended before the subagent finished")
		}
	}
	d.finished = true
	return d.take()
}

// Idle tells the decoder that the writer of a session JSONL went quiet at a
// record boundary (for a live tailer: Claude's Stop hook fired). A root turn
// whose last step finished with nothing left open is then closed as
// completed, as the next prompt would have closed it. Other forms end turns
// with their result record; Idle does nothing for them.
func (d *Decoder) Idle() []agent.Event {
	d.out = nil
	d.line, d.t = 0, 0
	if d.form != FormSessionJSONL || d.finished {
		return nil
	}
	root := d.session("")
	if root.turnOpen {
		if reason, text := d.quietEnd(root, "", ""); reason != "" {
			d.closeTurn(root, reason, text)
		}
	}
	return d.take()
}

// Observe tells the decoder about events another source emitted for the
// same session (for example a hook reporting that a tool is blocked on a
// permission), so that its view of open tools stays right: a tool blocked
// elsewhere and then rejected in Claude's own UI is settled with a resolved
// block. Only tool state events are used; others are ignored.
func (d *Decoder) Observe(evs ...agent.Event) {
	for _, ev := range evs {
		switch e := ev.(type) {
		case *agent.ToolBlocked:
			t := d.tools[e.CallID]
			if t == nil {
				// The event's tool and input are canonical; Claude's own
				// come with the call's tool_use.
				t = d.addTool(e.CallID, e.Session, e.Message, "", nil)
			}
			t.status = toolBlocked
			t.question = e.Question != nil
		case *agent.ToolRunning:
			if t := d.tools[e.CallID]; t != nil && t.status == toolPending {
				t.status = toolRunning
			}
		case *agent.ToolResolved:
			if t := d.tools[e.CallID]; t != nil && t.status == toolBlocked {
				if d.hookAnswered == nil {
					d.hookAnswered = map[string]bool{}
				}
				d.hookAnswered[e.CallID] = true
				if e.Decision == agent.DecisionReject {
					t.status = toolRejected
				} else {
					t.status = toolRunning
				}
			}
		case *agent.ToolCompleted:
			d.forgetTool(e.CallID)
		case *agent.ToolFailed:
			d.forgetTool(e.CallID)
		}
	}
}

// Knows reports whether the decoder has read the tool call callID (its
// tool_use) and not yet forgotten it.
func (d *Decoder) Knows(callID string) bool { return d.tools[callID] != nil }

// AttachSubagent links a subagent's Claude agent id to the Agent/Task tool
// call that started it (from <session>/subagents/agent-<id>.meta.json,
// field toolUseId), so that the records of its transcript file go into the
// right child session.
func (d *Decoder) AttachSubagent(agentID, toolUseID string) {
	if agentID != "" && toolUseID != "" {
		d.agents[agentID] = toolUseID
	}
}

// take returns the events produced by the current call.
func (d *Decoder) take() []agent.Event {
	out := d.out
	d.out = nil
	return out
}

func (d *Decoder) emit(ev agent.Event) { d.out = append(d.out, ev) }

// base builds an event base for session key s at the current record time.
func (d *Decoder) base(s string) agent.EventBase { return agent.EventBase{Session: s, Time: d.t} }

// drop emits a DroppedInput for the current line.
func (d *Decoder) drop(kind string, reason agent.DropReason, detail string) {
	raw := linereader.Prefix(d.raw, 512)
	d.emit(&agent.DroppedInput{EventBase: d.base(""), Dropped: agent.Dropped{
		Source: d.src, Line: d.line, Kind: kind, Reason: reason, Detail: detail, Raw: string(raw),
	}})
}

// session returns the session state for key, creating it.
func (d *Decoder) session(key string) *session {
	s := d.sessions[key]
	if s == nil {
		s = &session{key: key}
		d.sessions[key] = s
	}
	return s
}

// sessionKeys returns the session keys in a deterministic order.
func (d *Decoder) sessionKeys() []string {
	keys := make([]string, 0, len(d.sessions))
	for k := range d.sessions {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}

// decodeRecord parses one native record (a JSONL line, a stream-json line
// or the msg of a traffic record) and dispatches it by kind. dir is the
// traffic direction ("" outside traffic logs).
func (d *Decoder) decodeRecord(line []byte, dir string) {
	if line[0] != '{' {
		if json.Valid(line) {
			d.drop("", agent.DropNotAnObject, "record is JSON but not an object")
		} else {
			d.drop(sniffKind(line), agent.DropUnparseableJSON, "record is not valid JSON")
		}
		return
	}
	// Records of skipped kinds are recognised from their top-level type and
	// structure alone: the bulk of a long transcript, never decoded.
	if typ, ok := topLevelType(line); ok {
		if skippedKinds[string(typ)] {
			return
		}
		if string(typ) == "attachment" && !bytes.Contains(line, []byte("hook_permission_decision")) {
			return // context for the model; only permission decisions matter
		}
	}
	// The record structs are the decoder's, reused line after line (zeroed
	// first: Unmarshal leaves absent members alone, and a zeroed raw value
	// gets fresh memory, so nothing an event kept is overwritten).
	if d.rec == nil {
		d.rec, d.fast = new(record), new(fastRecord)
	}
	r, fast := d.rec, d.fast
	*fast = fastRecord{}
	// A tool result's structured copy (toolUseResult, often the bulk of
	// the line) is only passed on: it is cut out of a valid line by
	// structure, so encoding/json neither validates nor skips it.
	body, tur, cut := line, []byte(nil), false
	if bytes.Contains(line, toolUseResultKey) && jsonlex.Valid(line) {
		body, tur, cut = jsonlex.CutField(line, "toolUseResult")
		if !cut {
			body = line
		}
	}
	var typeErr *json.UnmarshalTypeError
	switch err := json.Unmarshal(body, fast); {
	case err == nil:
		if cut {
			fast.ToolUseResult = tur
		}
		*r = fast.general()
	case errors.As(err, &typeErr):
		// Another shape (string content, block arrays in a tool result,
		// a field of an unexpected type): the general path.
		typeErr = nil
		*r = record{}
		if err := json.Unmarshal(body, r); err != nil && !errors.As(err, &typeErr) {
			d.drop(sniffKind(line), agent.DropUnparseableJSON, "record is not valid JSON: "+err.Error())
			return
		}
		if cut {
			r.ToolUseResult = tur
		}
	default:
		d.drop(sniffKind(line), agent.DropUnparseableJSON, "record is not valid JSON: "+err.Error())
		return
	}
	d.decoded(r, line, dir, typeErr)
}

// decoded goes on with a record decodeRecord decoded from line: its time,
// duplicates, then its kind.
func (d *Decoder) decoded(r *record, line []byte, dir string, typeErr *json.UnmarshalTypeError) {
	if r.Type == "" {
		d.drop("", agent.DropMissingID, "record has no type")
		return
	}
	if d.t == 0 {
		d.t = parseTime(r.Timestamp)
	}
	if r.UUID != "" {
		// Claude itself skips a record whose uuid it already wrote; a
		// record seen twice (a re-read, a duplicated write) adds nothing.
		// A compaction boundary is told by its whole content instead:
		// Claude writes later boundaries with an earlier boundary's uuid.
		key := "u:" + r.UUID
		if r.Type == "system" && (r.Subtype == "compact_boundary" || r.Subtype == "microcompact_boundary") {
			h := fnv.New64a()
			_, _ = h.Write(line)
			key += "\x00" + strconv.FormatUint(h.Sum64(), 16)
		}
		if !d.recent.add(key) {
			return
		}
	}
	d.dispatch(r, dir, typeErr)
}

// toolUseResultKey is the member name decodeRecord cuts out before decoding.
var toolUseResultKey = []byte(`"toolUseResult"`)

// fieldError describes a field whose JSON type was wrong, for Dropped.
func fieldError(typeErr *json.UnmarshalTypeError, what string) string {
	if typeErr != nil {
		return fmt.Sprintf("%s (field %s is %s, want %s)", what, typeErr.Field, typeErr.Value, typeErr.Type)
	}
	return what
}

// badField reports whether a type error concerns the member name or a
// member inside it.
func badField(typeErr *json.UnmarshalTypeError, name string) bool {
	return typeErr != nil && (typeErr.Field == name || strings.HasPrefix(typeErr.Field, name+"."))
}

// parseTime converts an RFC 3339 timestamp to Unix ms (0 when absent or
// unreadable: times are optional).
func parseTime(s string) int64 {
	if s == "" {
		return 0
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixMilli()
}

// sniffKind finds `"type":"…"` near the start of a line that could not be
// parsed, to name its kind in a Dropped record.
func sniffKind(b []byte) string {
	if len(b) > 512 {
		b = b[:512]
	}
	i := bytes.Index(b, []byte(`"type":"`))
	if i < 0 {
		return ""
	}
	rest := b[i+8:]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 || j > 64 {
		return ""
	}
	return string(rest[:j])
}

// exitText is the error text of a turn cut short by the agent's exit.
func exitText(end EndOfStream) string {
	switch {
	case end.Signal != "":
		return "agent exited unexpectedly, signal " + end.Signal
	case end.Code != nil:
		return "agent exited unexpectedly, code " + strconv.Itoa(*end.Code)
	}
	return "agent exited unexpectedly"
}

// recentSet remembers the last n keys added (a bounded set).
type recentSet struct {
	set  map[string]struct{}
	ring []string
	next int
}

func newRecentSet(n int) *recentSet {
	return &recentSet{set: make(map[string]struct{}, n), ring: make([]string, n)}
}

// add inserts key and reports whether it was new.
func (r *recentSet) add(key string) bool {
	if _, ok := r.set[key]; ok {
		return false
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = key
	r.next = (r.next + 1) % len(r.ring)
	r.set[key] = struct{}{}
	return true
}

func (r *recentSet) has(key string) bool {
	_, ok := r.set[key]
	return ok
}
