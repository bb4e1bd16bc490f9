package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// LegacyRecordPrefix starts the record id of every legacy envelope happy
// writes for the reference app: "legacy:<envelope id>", stored as version
// 1 (session/compat, whose RecordPrefix it is).
const LegacyRecordPrefix = "legacy:"

// ErrWrongLocalID: a relay row's plaintext is not the record version its
// localId names. The relay cannot read or forge a row, but it can store a
// row's ciphertext again under another localId (a replay); the envelope
// inside names its record and version, so a reader refuses the copy.
var ErrWrongLocalID = errors.New("row is not the record version its localId names")

// RecordID is the record id a canonical envelope of kind is filed under
// (docs/ARCHITECTURE.md, "Relay envelope and versions"): the message id,
// the session id, "todos:<sessionID>" or "dropped:<sessionID>"; id is the
// message's or session's id, sessionID the todos' or dropped list's
// session. Unknown kinds give "".
func RecordID(kind, id, sessionID string) string {
	switch kind {
	case KindMessage, KindSession:
		return id
	case KindTodos:
		return TodosRecord(sessionID)
	case KindDropped:
		return DroppedRecord(sessionID)
	}
	return ""
}

// checkLocalID is nil when localID is "<record>.<version>".
func checkLocalID(localID, record string, version int64) error {
	if record != "" && localID == record+"."+strconv.FormatInt(version, 10) {
		return nil
	}
	return fmt.Errorf("%w: stored under localId %q, but it is %s version %d", ErrWrongLocalID, localID, record, version)
}

// checkLegacyLocalID checks a legacy envelope (no kind) against its
// localId: under "legacy:<id>.<n>" (what happy writes) the envelope's own
// id must be <id>. Other localIds (the reference app's prompts, written
// under random ids) cannot be checked and pass.
func checkLegacyLocalID(localID, role string, content json.RawMessage) error {
	rest, ok := strings.CutPrefix(localID, LegacyRecordPrefix)
	if !ok {
		return nil
	}
	i := strings.LastIndexByte(rest, '.')
	if i >= 0 {
		if n, err := strconv.ParseInt(rest[i+1:], 10, 64); err != nil || n < 1 {
			i = -1
		}
	}
	id := legacyEnvelopeID(role, content)
	if i < 0 || id == "" || rest[:i] != id {
		return fmt.Errorf("%w: stored under localId %q, but it is the legacy envelope %q", ErrWrongLocalID, localID, id)
	}
	return nil
}

// legacyEnvelopeID is the id of a legacy envelope happy writes: content.id
// of a {"role":"session"} envelope, content.data.id of an ACP tool result
// ({"role":"agent","content":{"type":"acp",…}}); "" otherwise.
func legacyEnvelopeID(role string, content json.RawMessage) string {
	var c struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if len(content) == 0 || content[0] != '{' || json.Unmarshal(content, &c) != nil {
		return ""
	}
	switch {
	case role == "session":
		return c.ID
	case role == "agent" && c.Type == "acp":
		return c.Data.ID
	}
	return ""
}

// CheckRecord checks that a relay row's plaintext is the record version
// its localId names: a canonical envelope must sit under
// "<record id>.<version>" (RecordID), a legacy envelope happy wrote under
// "legacy:<its id>.<n>". A legacy record under another localId (the
// reference app's prompts) passes, and so does a plaintext that is not a
// record at all or of a kind this version does not know (its reader
// refuses it for what it is). The error wraps
// ErrWrongLocalID. It has the shape of relay.SessionOptions.CheckRecord.
func CheckRecord(localID string, plaintext []byte) error {
	var env struct {
		Kind    *string         `json:"kind"`
		Version json.RawMessage `json:"version"`
		Info    *struct {
			ID string `json:"id"`
		} `json:"info"`
		Session *struct {
			ID string `json:"id"`
		} `json:"session"`
		SessionID string          `json:"sessionID"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
	}
	if json.Unmarshal(plaintext, &env) != nil {
		return nil
	}
	if env.Kind == nil {
		return checkLegacyLocalID(localID, env.Role, env.Content)
	}
	if RecordID(*env.Kind, "-", "-") == "" {
		return nil
	}
	version, err := strconv.ParseInt(string(env.Version), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: stored under localId %q, a %s record without a version", ErrWrongLocalID, localID, *env.Kind)
	}
	var id string
	switch {
	case *env.Kind == KindMessage && env.Info != nil:
		id = env.Info.ID
	case *env.Kind == KindSession && env.Session != nil:
		id = env.Session.ID
	}
	return checkLocalID(localID, RecordID(*env.Kind, id, env.SessionID), version)
}
