package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session/refimport"
)

// DroppedSourceRelay is the Dropped.Source of relay messages a reader
// refused.
const DroppedSourceRelay = "relay"

// Readback rebuilds the transcript document of one relay session from its
// decrypted messages: for every record (message, session, todo list) the
// highest version wins, whatever order the versions arrive in; a version
// seen twice changes nothing. Messages that cannot be used become Dropped
// records (with the relay seq as Line) instead of vanishing, and so does a
// row that is not the record version its localId names (reason
// wrong_localid: a replay of another row's ciphertext). The reference
// app's legacy records are counted in Legacy: its prompts ({role:"user",
// content:{type:"text",…}}) and the legacy envelopes ({role:"session"|
// "agent", content:…}). In a session with canonical records they are
// companions (the runner wrote the canonical user message of a prompt it
// consumed; happy writes the envelopes next to its records, package
// session/compat) and are skipped; a session with none was written by the
// reference CLI, and its transcript is the legacy records projected onto
// the canonical model (refimport.Importer, with the agentState given to
// SetAgentState).
//
// The zero value is not usable; call NewReadback.
type Readback struct {
	fallback mapper.Session
	sessions map[string]versioned[mapper.Session]
	msgs     map[string]msgEntry                // which row wins for each message
	values   map[string]mapper.MessageWithParts // the winning messages (not in an index)
	todos    map[string]versioned[[]agent.Todo]
	refused  map[string]versioned[[]agent.Dropped] // the writer's dropped records, by session
	dropped  []agent.Dropped
	// Legacy counts legacy records seen (prompts and envelopes).
	Legacy int
	// Unknown counts parts of types this version does not know (kept).
	Unknown int
	// index: messages keep which row holds their winning version, not
	// its value (NewReadbackIndex).
	index bool
	sids  map[string]int32 // the sessions messages name, numbered
	sidOf []string         // session ids by number
	// imp holds the legacy records, the transcript of a session without
	// canonical records (imported).
	imp refimport.Importer
}

type versioned[T any] struct {
	version int64
	seq     int64
	value   T
}

// msgEntry is what a Readback keeps of a message besides its value.
type msgEntry struct {
	version, seq int64 // its winning version and the row holding it
	first        int64 // the seq of its first version seen
	sid          int32 // its session (sidOf)
	pos          int32 // its place among its session's messages (WriteDocument)
}

// NewReadback returns an empty Readback. fallback is the root session used
// when no root session record arrives (a session whose writer never sent
// one): its id must not be empty, so the document stays valid.
func NewReadback(fallback mapper.Session) *Readback {
	return &Readback{
		fallback: fallback,
		sessions: map[string]versioned[mapper.Session]{},
		msgs:     map[string]msgEntry{},
		values:   map[string]mapper.MessageWithParts{},
		todos:    map[string]versioned[[]agent.Todo]{},
		refused:  map[string]versioned[[]agent.Dropped]{},
	}
}

// NewReadbackIndex returns an empty Readback that keeps of each message
// only which row holds its winning version (a few dozen bytes per message,
// whatever the number of its versions), for WriteDocument; its Transcript
// has no messages, and Settle and NextPosition, which read the messages,
// see none. Everything else is kept as NewReadback keeps it.
func NewReadbackIndex(fallback mapper.Session) *Readback {
	r := NewReadback(fallback)
	r.index = true
	return r
}

// intern returns the number of a session id (messages name a few
// sessions many times).
func (r *Readback) intern(sid string) int32 {
	if r.sids == nil {
		r.sids = map[string]int32{}
	}
	if n, ok := r.sids[sid]; ok {
		return n
	}
	n := int32(len(r.sidOf))
	r.sids[sid] = n
	r.sidOf = append(r.sidOf, sid)
	return n
}

// Drop records a message that could not even be decrypted.
func (r *Readback) Drop(d agent.Dropped) { r.dropped = append(r.dropped, d) }

func (r *Readback) refuse(seq int64, kind string, reason agent.DropReason, detail string, raw []byte) {
	if len(raw) > 512 {
		raw = raw[:512]
	}
	r.dropped = append(r.dropped, agent.Dropped{Source: DroppedSourceRelay, Line: seq, Kind: kind, Reason: reason, Detail: detail, Raw: string(raw)})
}

// Add takes one decrypted relay message: seq is its relay seq, localID the
// localId it was stored under ("<record id>.<version>", CheckRecord).
func (r *Readback) Add(seq int64, localID string, plaintext []byte) {
	var env struct {
		Kind      *string         `json:"kind"`
		Version   json.RawMessage `json:"version"`
		Info      json.RawMessage `json:"info"`
		Parts     json.RawMessage `json:"parts"`
		Session   json.RawMessage `json:"session"`
		SessionID string          `json:"sessionID"`
		Todos     json.RawMessage `json:"todos"`
		Dropped   json.RawMessage `json:"dropped"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
	}
	// Unmarshal checks the syntax itself; only a record it refuses is
	// scanned again, to tell broken JSON from JSON of the wrong shape.
	if err := json.Unmarshal(plaintext, &env); err != nil {
		if !json.Valid(plaintext) {
			r.refuse(seq, "", agent.DropUnparseableJSON, "not valid JSON", plaintext)
			return
		}
		r.refuse(seq, "", agent.DropNotAnObject, "a relay record must be a JSON object", plaintext)
		return
	}
	if env.Kind == nil {
		if env.Role == "user" || isLegacyEnvelope(env.Role, env.Content) {
			if err := checkLegacyLocalID(localID, env.Role, env.Content); err != nil {
				r.refuse(seq, env.Role, agent.DropWrongLocalID, err.Error(), plaintext)
				return
			}
			r.Legacy++
			if len(r.msgs) == 0 && len(r.sessions) == 0 {
				// Kept only while the session may be a reference one.
				r.imp.Add(seq, plaintext)
			}
			return
		}
		r.refuse(seq, env.Role, agent.DropUnknownType, "no envelope kind", plaintext)
		return
	}
	kind := *env.Kind
	version, err := strconv.ParseInt(string(env.Version), 10, 64)
	if err != nil || version < 1 {
		r.refuse(seq, kind, agent.DropInvalidField, "version must be an integer >= 1", plaintext)
		return
	}
	switch kind {
	case KindMessage:
		if len(env.Info) == 0 || len(env.Parts) == 0 {
			r.refuse(seq, kind, agent.DropInvalidField, "message record needs info and parts", plaintext)
			return
		}
		// {"info":…,"parts":…} from the two values as they came (Unmarshal
		// checked both), without encoding them again.
		body := make([]byte, 0, len(env.Info)+len(env.Parts)+19)
		body = append(append(append(append(body, `{"info":`...), env.Info...), `,"parts":`...), env.Parts...)
		body = append(body, '}')
		m, rep, err := mapper.DecodeMessageWithParts(body)
		if err != nil {
			r.refuse(seq, kind, reasonOf(err), err.Error(), plaintext)
			return
		}
		id := m.Info.MessageID()
		if !r.owns(seq, kind, localID, id, version, plaintext) {
			return
		}
		r.Unknown += rep.UnknownParts
		for _, d := range rep.Refused {
			d.Source, d.Line = DroppedSourceRelay, seq
			r.dropped = append(r.dropped, d)
		}
		cur, ok := r.msgs[id]
		if !ok || seq < cur.first {
			cur.first = seq
		}
		if !ok || version > cur.version {
			cur.version, cur.seq, cur.sid = version, seq, r.intern(sessionOf(m.Info))
			if !r.index {
				r.values[id] = m
			}
		}
		r.msgs[id] = cur
		r.imp.Reset()
	case KindSession:
		var s mapper.Session
		if err := json.Unmarshal(env.Session, &s); err != nil || s.ID == "" {
			r.refuse(seq, kind, agent.DropInvalidField, "session record needs a session with an id", plaintext)
			return
		}
		if !r.owns(seq, kind, localID, s.ID, version, plaintext) {
			return
		}
		if cur, ok := r.sessions[s.ID]; !ok || version > cur.version {
			r.sessions[s.ID] = versioned[mapper.Session]{version: version, seq: seq, value: s}
		}
		r.imp.Reset()
	case KindTodos:
		var todos []agent.Todo
		if env.SessionID == "" || json.Unmarshal(env.Todos, &todos) != nil || todos == nil && string(env.Todos) != "[]" {
			r.refuse(seq, kind, agent.DropInvalidField, "todos record needs sessionID and a todos array", plaintext)
			return
		}
		for i, t := range todos {
			if _, err := agent.ParseTodoStatus(string(t.Status)); err != nil {
				r.refuse(seq, kind, agent.DropInvalidField, fmt.Sprintf("todos[%d].status: %v", i, err), plaintext)
				return
			}
			if _, err := agent.ParseTodoPriority(string(t.Priority)); err != nil {
				r.refuse(seq, kind, agent.DropInvalidField, fmt.Sprintf("todos[%d].priority: %v", i, err), plaintext)
				return
			}
		}
		if !r.owns(seq, kind, localID, TodosRecord(env.SessionID), version, plaintext) {
			return
		}
		if todos == nil {
			todos = []agent.Todo{}
		}
		if cur, ok := r.todos[env.SessionID]; !ok || version > cur.version {
			r.todos[env.SessionID] = versioned[[]agent.Todo]{version: version, seq: seq, value: todos}
		}
	case KindDropped:
		var ds []agent.Dropped
		if env.SessionID == "" || json.Unmarshal(env.Dropped, &ds) != nil || ds == nil {
			r.refuse(seq, kind, agent.DropInvalidField, "dropped record needs sessionID and a dropped array", plaintext)
			return
		}
		if !r.owns(seq, kind, localID, DroppedRecord(env.SessionID), version, plaintext) {
			return
		}
		if cur, ok := r.refused[env.SessionID]; !ok || version > cur.version {
			r.refused[env.SessionID] = versioned[[]agent.Dropped]{version: version, seq: seq, value: ds}
		}
	default:
		r.refuse(seq, kind, agent.DropUnknownType, "unknown envelope kind", plaintext)
	}
}

// owns reports whether the row at seq is record version `version` its
// localId names; a row that is not is refused (wrong_localid).
func (r *Readback) owns(seq int64, kind, localID, record string, version int64, plaintext []byte) bool {
	if err := checkLocalID(localID, record, version); err != nil {
		r.refuse(seq, kind, agent.DropWrongLocalID, err.Error(), plaintext)
		return false
	}
	return true
}

// reasonOf extracts the drop reason of a mapper decode error.
func reasonOf(err error) agent.DropReason {
	var fe *mapper.FieldError
	if errors.As(err, &fe) && fe.Reason != "" {
		return fe.Reason
	}
	return agent.DropInvalidField
}

// SetAgentState gives the session's agentState (decrypted JSON, nil when
// none): the permissions of a session read from its legacy records.
func (r *Readback) SetAgentState(raw json.RawMessage) { r.imp.SetAgentState(raw) }

// Imported reports whether the transcript is the projection of legacy
// records: the session has legacy records and no canonical message or
// session record.
func (r *Readback) Imported() bool {
	return r.imp.Len() > 0 && len(r.msgs) == 0 && len(r.sessions) == 0
}

// imported is the transcript of an imported session: the projection, with
// this reader's own refusals after the importer's.
func (r *Readback) imported() mapper.Transcript {
	t := r.imp.Transcript(r.fallback)
	t.Dropped = append(t.Dropped, r.dropped...)
	return t
}

// Transcript assembles the document (an imported session's: the legacy
// records projected, see Imported): the root session (the one without a
// parent; the earliest seen when several), its messages in the order their
// first versions reached the relay (the order the writer created them; a
// prompt written by another device comes where it arrived), its child
// sessions recursively,
// todos, and every dropped record (kept on the root). Messages whose session
// is unknown are kept on the root's dropped list as orphans.
func (r *Readback) Transcript() mapper.Transcript {
	if r.Imported() {
		return r.imported()
	}
	var fill func(n *docNode) mapper.Transcript
	fill = func(n *docNode) mapper.Transcript {
		t := n.t
		if !r.index {
			t.Messages = make([]mapper.MessageWithParts, len(n.ids))
			for i, id := range n.ids {
				t.Messages[i] = r.values[id]
			}
		}
		for _, k := range n.kids {
			t.Children = append(t.Children, fill(k))
		}
		return t
	}
	return fill(r.plan())
}

// docNode is one session of the document as planned: the document without
// its messages and children, the ids of its messages in order, and its
// child sessions.
type docNode struct {
	t    mapper.Transcript
	ids  []string
	kids []*docNode
}

// plan lays the document out (Transcript's order) without the messages'
// values.
func (r *Readback) plan() *docNode {
	// Each session's messages in the order of their first versions (then
	// by id), sorted once on keys taken before sorting: the comparison
	// then costs no map lookups.
	type keyed struct {
		first int64
		id    string
	}
	keyedBySession := map[string][]keyed{}
	for id, m := range r.msgs {
		sid := r.sidOf[m.sid]
		keyedBySession[sid] = append(keyedBySession[sid], keyed{m.first, id})
	}
	bySession := make(map[string][]string, len(keyedBySession))
	for sid, ks := range keyedBySession {
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].first != ks[j].first {
				return ks[i].first < ks[j].first
			}
			return ks[i].id < ks[j].id
		})
		ids := make([]string, len(ks))
		for i := range ks {
			ids[i] = ks[i].id
		}
		bySession[sid] = ids
	}
	children := map[string][]string{}
	var rootID string
	var rootSeq int64
	for id, s := range r.sessions {
		if s.value.ParentID == "" {
			if rootID == "" || s.seq < rootSeq || (s.seq == rootSeq && id < rootID) {
				rootID, rootSeq = id, s.seq
			}
			continue
		}
		children[s.value.ParentID] = append(children[s.value.ParentID], id)
	}
	used := map[string]bool{}
	var build func(id string) *docNode
	build = func(id string) *docNode {
		used[id] = true
		n := &docNode{ids: bySession[id]}
		n.t = mapper.Transcript{Session: r.sessions[id].value, Messages: []mapper.MessageWithParts{}, Children: []mapper.Transcript{}, Todos: []agent.Todo{}, Dropped: []agent.Dropped{}}
		if td, ok := r.todos[id]; ok {
			n.t.Todos = td.value
		}
		if rf, ok := r.refused[id]; ok {
			n.t.Dropped = append(n.t.Dropped, rf.value...)
		}
		kids := children[id]
		sort.Strings(kids)
		for _, k := range kids {
			if !used[k] {
				n.kids = append(n.kids, build(k))
			}
		}
		return n
	}
	var doc *docNode
	if rootID != "" {
		doc = build(rootID)
	} else {
		doc = &docNode{t: mapper.Transcript{Session: r.fallback, Messages: []mapper.MessageWithParts{}, Children: []mapper.Transcript{}, Todos: []agent.Todo{}, Dropped: []agent.Dropped{}}}
	}
	doc.t.Dropped = append(doc.t.Dropped, r.dropped...)
	var orphans []string
	for sid := range bySession {
		if !used[sid] {
			orphans = append(orphans, sid)
		}
	}
	sort.Strings(orphans)
	for _, sid := range orphans {
		for _, id := range bySession[sid] {
			v := r.msgs[id]
			doc.t.Dropped = append(doc.t.Dropped, agent.Dropped{Source: DroppedSourceRelay, Line: v.seq, Kind: KindMessage, Reason: agent.DropOrphan,
				Detail: fmt.Sprintf("message %s belongs to session %s, which has no session record", id, sid)})
		}
	}
	return doc
}

func sessionOf(m mapper.Message) string {
	switch v := m.(type) {
	case *mapper.UserMessage:
		return v.SessionID
	case *mapper.AssistantMessage:
		return v.SessionID
	}
	return ""
}

// isLegacyEnvelope reports whether a record without a kind is one of the
// reference app's legacy envelopes: role "session" with a content carrying
// an event (ev), or role "agent" with a typed content (acp, output, …).
func isLegacyEnvelope(role string, content json.RawMessage) bool {
	var c struct {
		Type string          `json:"type"`
		Ev   json.RawMessage `json:"ev"`
	}
	if len(content) == 0 || content[0] != '{' || json.Unmarshal(content, &c) != nil {
		return false
	}
	switch role {
	case "session":
		return len(c.Ev) > 0 || c.Type == "session"
	case "agent":
		return c.Type != ""
	}
	return false
}

// RowSource reads a relay session's rows with a seq above after, in seq
// order, handing each to fn with the localId it was stored under and a
// function that decrypts it (called only for the rows WriteDocument
// needs). It returns fn's error as soon as fn returns one (ErrStopRows
// included), or its own.
type RowSource func(after int64, fn func(seq int64, localID string, open func() ([]byte, error)) error) error

// ErrStopRows is what WriteDocument's fn returns to stop a RowSource early.
var ErrStopRows = errors.New("session: rows not needed any more")

// WriteDocument writes the transcript document in canonical form
// (mapper.EncodeTranscript's bytes of Transcript()) to w while reading the
// messages' winning versions again from rows: r, filled by a first read of
// every row (a NewReadbackIndex keeps only which row wins for each
// message), gives the layout, and each session's messages are read back in
// one pass over its rows, from its first message's first row to its last
// winning row. What it holds meanwhile is r and the messages that come out
// of order (a later message's winning version read before an earlier
// one's), so memory does not grow with the session's versions. An imported
// session (Imported) is written from the legacy records r holds. Errors: w's,
// rows', an encoding error as EncodeTranscript's, and an error saying
// which rows the relay no longer had.
func (r *Readback) WriteDocument(w io.Writer, rows RowSource) error {
	if r.Imported() {
		b, err := mapper.EncodeTranscript(r.imported())
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return r.writeNode(w, r.plan(), rows, 0)
}

func (r *Readback) writeNode(w io.Writer, n *docNode, rows RowSource, depth int) error {
	if depth > mapper.MaxNesting {
		return fmt.Errorf("session: children nested deeper than %d", mapper.MaxNesting)
	}
	head, tail, err := mapper.EncodeTranscriptShell(n.t)
	if err != nil {
		return err
	}
	if _, err := w.Write(head); err != nil {
		return err
	}
	if _, err := io.WriteString(w, `,"messages":[`); err != nil {
		return err
	}
	if err := r.writeMessages(w, n.ids, rows); err != nil {
		return err
	}
	if _, err := io.WriteString(w, `],"children":[`); err != nil {
		return err
	}
	for i, k := range n.kids {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if err := r.writeNode(w, k, rows, depth+1); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, "]"); err != nil {
		return err
	}
	_, err = w.Write(tail)
	return err
}

// writeMessages writes the messages ids (in this order, all of one
// session) from their winning rows, separated by commas, in one pass over
// the rows that can hold them.
func (r *Readback) writeMessages(w io.Writer, ids []string, rows RowSource) error {
	if len(ids) == 0 {
		return nil
	}
	from, to := int64(-1), int64(0)
	for i, id := range ids {
		e := r.msgs[id]
		e.pos = int32(i)
		r.msgs[id] = e
		if from < 0 || e.first < from {
			from = e.first
		}
		to = max(to, e.seq)
	}
	sid := r.msgs[ids[0]].sid
	pending := map[int][]byte{} // encoded messages read before their turn
	next := 0
	err := rows(from-1, func(seq int64, localID string, open func() ([]byte, error)) error {
		if seq > to {
			return ErrStopRows
		}
		dot := strings.LastIndexByte(localID, '.')
		if dot < 0 {
			return nil
		}
		id := localID[:dot]
		e, ok := r.msgs[id]
		if !ok || e.seq != seq || e.sid != sid || int(e.pos) < next {
			return nil
		}
		plain, err := open()
		if err != nil {
			return fmt.Errorf("session: row %d: %w", seq, err)
		}
		m, version, err := decodeMessageRecord(plain)
		if err != nil {
			return fmt.Errorf("session: row %d: %w", seq, err)
		}
		// The row must be what the first read took: the relay cannot
		// forge one, but it could serve another row's ciphertext.
		if version != e.version || m.Info.MessageID() != id {
			return fmt.Errorf("session: row %d read again is not version %d of message %s", seq, e.version, id)
		}
		b, err := mapper.EncodeMessageWithParts(m)
		if err != nil {
			return err
		}
		pending[int(e.pos)] = b
		for b, ok := pending[next]; ok; b, ok = pending[next] {
			delete(pending, next)
			if next > 0 {
				if _, err := io.WriteString(w, ","); err != nil {
					return err
				}
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
			next++
		}
		if next == len(ids) {
			return ErrStopRows
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrStopRows) {
		return err
	}
	if next < len(ids) {
		return fmt.Errorf("session: the relay no longer has the row (seq %d) of message %s", r.msgs[ids[next]].seq, ids[next])
	}
	return nil
}

// decodeMessageRecord decodes the message of a message record's plaintext
// as Add does, with the record's version.
func decodeMessageRecord(plain []byte) (mapper.MessageWithParts, int64, error) {
	var env struct {
		Kind    string          `json:"kind"`
		Version int64           `json:"version"`
		Info    json.RawMessage `json:"info"`
		Parts   json.RawMessage `json:"parts"`
	}
	if err := json.Unmarshal(plain, &env); err != nil {
		return mapper.MessageWithParts{}, 0, err
	}
	if env.Kind != KindMessage {
		return mapper.MessageWithParts{}, 0, fmt.Errorf("a %q record, not a message", env.Kind)
	}
	body := make([]byte, 0, len(env.Info)+len(env.Parts)+19)
	body = append(append(append(append(body, `{"info":`...), env.Info...), `,"parts":`...), env.Parts...)
	body = append(body, '}')
	m, _, err := mapper.DecodeMessageWithParts(body)
	return m, env.Version, err
}
