package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
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
// app's legacy records are counted in Legacy and otherwise skipped: its
// prompts ({role:"user", content:{type:"text",…}}), whose canonical user
// message the runner that consumed them wrote, and the legacy envelopes
// happy writes for the app next to the canonical records ({role:"session"|
// "agent", content:…}, package session/compat).
//
// The zero value is not usable; call NewReadback.
type Readback struct {
	fallback mapper.Session
	sessions map[string]versioned[mapper.Session]
	messages map[string]versioned[mapper.MessageWithParts]
	todos    map[string]versioned[[]agent.Todo]
	refused  map[string]versioned[[]agent.Dropped] // the writer's dropped records, by session
	first    map[string]int64                      // message id → seq of its first version seen
	dropped  []agent.Dropped
	// Legacy counts legacy records seen (prompts and envelopes).
	Legacy int
	// Unknown counts parts of types this version does not know (kept).
	Unknown int
}

type versioned[T any] struct {
	version int64
	seq     int64
	value   T
}

// NewReadback returns an empty Readback. fallback is the root session used
// when no root session record arrives (a session whose writer never sent
// one): its id must not be empty, so the document stays valid.
func NewReadback(fallback mapper.Session) *Readback {
	return &Readback{
		fallback: fallback,
		sessions: map[string]versioned[mapper.Session]{},
		messages: map[string]versioned[mapper.MessageWithParts]{},
		todos:    map[string]versioned[[]agent.Todo]{},
		first:    map[string]int64{},
		refused:  map[string]versioned[[]agent.Dropped]{},
	}
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
		if f, ok := r.first[id]; !ok || seq < f {
			r.first[id] = seq
		}
		if cur, ok := r.messages[id]; !ok || version > cur.version {
			r.messages[id] = versioned[mapper.MessageWithParts]{version, seq, m}
		}
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
			r.sessions[s.ID] = versioned[mapper.Session]{version, seq, s}
		}
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
			r.todos[env.SessionID] = versioned[[]agent.Todo]{version, seq, todos}
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
			r.refused[env.SessionID] = versioned[[]agent.Dropped]{version, seq, ds}
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

// Transcript assembles the document: the root session (the one without a
// parent; the earliest seen when several), its messages in the order their
// first versions reached the relay (the order the writer created them; a
// prompt written by another device comes where it arrived), its child
// sessions recursively,
// todos, and every dropped record (kept on the root). Messages whose session
// is unknown are kept on the root's dropped list as orphans.
func (r *Readback) Transcript() mapper.Transcript {
	// Each session's messages in the order of their first versions (then
	// by id), sorted once on keys taken before sorting: the comparison
	// then costs no map lookups.
	type keyed struct {
		first int64
		id    string
		m     mapper.MessageWithParts
	}
	keyedBySession := map[string][]keyed{}
	for id, m := range r.messages {
		sid := sessionOf(m.value.Info)
		keyedBySession[sid] = append(keyedBySession[sid], keyed{r.first[id], id, m.value})
	}
	bySession := make(map[string][]mapper.MessageWithParts, len(keyedBySession))
	for sid, ks := range keyedBySession {
		sort.Slice(ks, func(i, j int) bool {
			if ks[i].first != ks[j].first {
				return ks[i].first < ks[j].first
			}
			return ks[i].id < ks[j].id
		})
		ms := make([]mapper.MessageWithParts, len(ks))
		for i := range ks {
			ms[i] = ks[i].m
		}
		bySession[sid] = ms
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
	var build func(id string) mapper.Transcript
	build = func(id string) mapper.Transcript {
		used[id] = true
		t := mapper.Transcript{Session: r.sessions[id].value, Messages: bySession[id], Children: []mapper.Transcript{}, Todos: []agent.Todo{}, Dropped: []agent.Dropped{}}
		if t.Messages == nil {
			t.Messages = []mapper.MessageWithParts{}
		}
		if td, ok := r.todos[id]; ok {
			t.Todos = td.value
		}
		if rf, ok := r.refused[id]; ok {
			t.Dropped = append(t.Dropped, rf.value...)
		}
		kids := children[id]
		sort.Strings(kids)
		for _, k := range kids {
			if !used[k] {
				t.Children = append(t.Children, build(k))
			}
		}
		return t
	}
	var doc mapper.Transcript
	if rootID != "" {
		doc = build(rootID)
	} else {
		doc = mapper.Transcript{Session: r.fallback, Messages: []mapper.MessageWithParts{}, Children: []mapper.Transcript{}, Todos: []agent.Todo{}, Dropped: []agent.Dropped{}}
	}
	doc.Dropped = append(doc.Dropped, r.dropped...)
	var orphans []string
	for sid := range bySession {
		if !used[sid] {
			orphans = append(orphans, sid)
		}
	}
	sort.Strings(orphans)
	for _, sid := range orphans {
		for _, m := range bySession[sid] {
			v := r.messages[m.Info.MessageID()]
			doc.Dropped = append(doc.Dropped, agent.Dropped{Source: DroppedSourceRelay, Line: v.seq, Kind: KindMessage, Reason: agent.DropOrphan,
				Detail: fmt.Sprintf("message %s belongs to session %s, which has no session record", m.Info.MessageID(), sid)})
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
