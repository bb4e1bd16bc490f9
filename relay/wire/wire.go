// Package wire holds the JSON shapes of the relay contract that both sides
// of it speak: the relay (package server) encodes them and happy's client
// of it (package relay) decodes them. One set of types keeps the two sides
// from drifting apart (docs/ARCHITECTURE.md, "Relay envelope and versions").
//
// The package imports nothing of happy's, so that server and relay can both
// import it. Ciphertext fields are opaque base64 strings passed through
// unchanged; times are milliseconds since the Unix epoch; nil pointers
// encode as JSON null unless the field says omitempty. The field order is
// the order on the wire, pinned byte for byte by the package's tests.
package wire

// Content is the envelope of a message row: {"t":"encrypted","c":<base64>}.
type Content struct {
	T string `json:"t"`
	C string `json:"c"`
}

// Message is a message row of a session as the relay sends it (in a
// new-message update, a page of GET /v3/sessions/:id/messages and the
// session's message stream). LocalID is the writer's idempotency key, null
// when the row was stored without one; a reader that tells no difference
// between none and "" reads it with LocalIDOrEmpty.
type Message struct {
	ID        string  `json:"id"`
	Seq       int64   `json:"seq"`
	Content   Content `json:"content"`
	LocalID   *string `json:"localId"`
	CreatedAt int64   `json:"createdAt"`
	UpdatedAt int64   `json:"updatedAt"`
}

// LocalIDOrEmpty is the row's localId, "" when it has none (null or absent).
func (m Message) LocalIDOrEmpty() string { return deref(m.LocalID) }

// MessageRef is a post's receipt for one row (an element of the answer to
// POST /v3/sessions/:id/messages). LocalID is the row's localId, null when
// it has none. New (happy's relay only) is true when this post stored the
// row; a row whose localId was already taken comes back as stored then,
// without it, so a writer can tell its own rows from a row someone else
// stored first under its localId. A relay that never says "new" (the
// reference relay) reads as false throughout.
type MessageRef struct {
	ID        string  `json:"id"`
	Seq       int64   `json:"seq"`
	LocalID   *string `json:"localId"`
	New       bool    `json:"new,omitempty"`
	CreatedAt int64   `json:"createdAt"`
	UpdatedAt int64   `json:"updatedAt"`
}

// LocalIDOrEmpty is the receipt's localId, "" when it has none (null or
// absent).
func (r MessageRef) LocalIDOrEmpty() string { return deref(r.LocalID) }

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// Session is a session as the relay returns it. Metadata and AgentState
// are base64 ciphertext; DataEncryptionKey is the wrapped data key (null for
// a legacy session).
type Session struct {
	ID                string  `json:"id"`
	Seq               int64   `json:"seq"`
	Metadata          string  `json:"metadata"`
	MetadataVersion   int64   `json:"metadataVersion"`
	AgentState        *string `json:"agentState"`
	AgentStateVersion int64   `json:"agentStateVersion"`
	DataEncryptionKey *string `json:"dataEncryptionKey"`
	Active            bool    `json:"active"`
	ActiveAt          int64   `json:"activeAt"`
	CreatedAt         int64   `json:"createdAt"`
	UpdatedAt         int64   `json:"updatedAt"`
}

// ListedSession is a session in POST /v1/sessions and GET /v1/sessions:
// Session's fields and lastMessage, always null.
type ListedSession struct {
	Session
	LastMessage *struct{} `json:"lastMessage"`
}

// Machine is a machine as the relay returns it (base64 ciphertext fields).
// Seq, the machine's update seq, is present in GET /v1/machines and
// GET /v1/machines/:id and absent from POST /v1/machines.
type Machine struct {
	ID                 string  `json:"id"`
	Metadata           string  `json:"metadata"`
	MetadataVersion    int64   `json:"metadataVersion"`
	DaemonState        *string `json:"daemonState"`
	DaemonStateVersion int64   `json:"daemonStateVersion"`
	DataEncryptionKey  *string `json:"dataEncryptionKey"`
	Seq                *int64  `json:"seq,omitempty"`
	Active             bool    `json:"active"`
	ActiveAt           int64   `json:"activeAt"`
	CreatedAt          int64   `json:"createdAt"`
	UpdatedAt          int64   `json:"updatedAt"`
}

// SessionCreate is the body of POST /v1/sessions. Metadata is base64
// ciphertext; DataEncryptionKey is base64 of the wrapped data key (nil for a
// legacy session). The relay ignores AgentState on create.
type SessionCreate struct {
	Tag               string  `json:"tag"`
	Metadata          string  `json:"metadata"`
	AgentState        *string `json:"agentState"`
	DataEncryptionKey *string `json:"dataEncryptionKey"`
}

// MachineCreate is the body of POST /v1/machines.
type MachineCreate struct {
	ID                string  `json:"id"`
	Metadata          string  `json:"metadata"`
	DaemonState       *string `json:"daemonState,omitempty"`
	DataEncryptionKey *string `json:"dataEncryptionKey,omitempty"`
}

// OutgoingMessage is one message of a POST /v3/sessions/:id/messages
// batch: base64 ciphertext and the writer's localId.
type OutgoingMessage struct {
	Content string `json:"content"`
	LocalID string `json:"localId"`
}

// Update is the envelope of a Socket.IO `update` event. Body is one of
// the Body* types; Seq is the account's update seq.
type Update struct {
	ID        string `json:"id"`
	Seq       int64  `json:"seq"`
	Body      any    `json:"body"`
	CreatedAt int64  `json:"createdAt"`
}

// Versioned is a {value, version} pair of an update-session or
// update-machine body; Value is base64 ciphertext or null (a cleared
// agent or daemon state).
type Versioned struct {
	Value   *string `json:"value"`
	Version int64   `json:"version"`
}

// BodyNewMessage is the body of a new-message update (T "new-message").
type BodyNewMessage struct {
	T       string  `json:"t"`
	SID     string  `json:"sid"`
	Message Message `json:"message"`
}

// BodyNewSession is the body of a new-session update (T "new-session").
type BodyNewSession struct {
	T string `json:"t"`
	Session
}

// BodyUpdateSession is the body of an update-session update (T
// "update-session"): one of Metadata and AgentState.
type BodyUpdateSession struct {
	T          string     `json:"t"`
	ID         string     `json:"id"`
	Metadata   *Versioned `json:"metadata,omitempty"`
	AgentState *Versioned `json:"agentState,omitempty"`
}

// BodyDeleteSession is the body of a delete-session update (T
// "delete-session").
type BodyDeleteSession struct {
	T   string `json:"t"`
	SID string `json:"sid"`
}

// BodyNewMachine is the body of a new-machine update (T "new-machine").
type BodyNewMachine struct {
	T                  string  `json:"t"`
	MachineID          string  `json:"machineId"`
	Seq                int64   `json:"seq"`
	Metadata           string  `json:"metadata"`
	MetadataVersion    int64   `json:"metadataVersion"`
	DaemonState        *string `json:"daemonState"`
	DaemonStateVersion int64   `json:"daemonStateVersion"`
	DataEncryptionKey  *string `json:"dataEncryptionKey"`
	Active             bool    `json:"active"`
	ActiveAt           int64   `json:"activeAt"`
	CreatedAt          int64   `json:"createdAt"`
	UpdatedAt          int64   `json:"updatedAt"`
}

// BodyUpdateMachine is the body of an update-machine update (T
// "update-machine"): one of Metadata and DaemonState.
type BodyUpdateMachine struct {
	T           string     `json:"t"`
	MachineID   string     `json:"machineId"`
	Metadata    *Versioned `json:"metadata,omitempty"`
	DaemonState *Versioned `json:"daemonState,omitempty"`
}

// Activity is the ephemeral event of a session's presence (Type
// "activity").
type Activity struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Active   bool   `json:"active"`
	ActiveAt int64  `json:"activeAt"`
	Thinking bool   `json:"thinking"`
}

// MachineActivity is the ephemeral event of a machine's presence (Type
// "machine-activity").
type MachineActivity struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Active   bool   `json:"active"`
	ActiveAt int64  `json:"activeAt"`
}

// TextDelta is a live text delta of a session, forwarded unstored as it
// came (Type "text-delta"; Message is base64 ciphertext).
type TextDelta struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Message string `json:"message"`
}

// Usage is the ephemeral usage report of a session (Type "usage"); Tokens
// and Cost pass through as the writer sent them.
type Usage struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Key       string `json:"key"`
	Tokens    any    `json:"tokens"`
	Cost      any    `json:"cost"`
	Timestamp int64  `json:"timestamp"`
}

// SessionEvent is the ephemeral event of POST /v1/sessions/:id/events
// (Type "session-event").
type SessionEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId"`
	Kind      string `json:"kind"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	Timestamp int64  `json:"timestamp"`
}
