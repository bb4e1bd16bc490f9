package server

import "github.com/happy-dev/happy/server/store"

// Wire shapes of the relay contract. Opaque strings pass through unchanged;
// nil pointers encode as null.

type wireContent struct {
	T string `json:"t"`
	C string `json:"c"`
}

type wireMessage struct {
	ID        string      `json:"id"`
	Seq       int64       `json:"seq"`
	Content   wireContent `json:"content"`
	LocalID   *string     `json:"localId"`
	CreatedAt int64       `json:"createdAt"`
	UpdatedAt int64       `json:"updatedAt"`
}

func toWireMessage(m store.Message) wireMessage {
	return wireMessage{ID: m.ID, Seq: m.Seq, Content: wireContent{T: "encrypted", C: m.Content}, LocalID: m.LocalID, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

// wireMessageRef is a post's receipt for one row. New (happy's relay
// only) is true when this post stored the row; a row whose localId was
// already taken comes back as stored then, without it, so a writer can
// tell its own rows from a row someone else stored first under its
// localId (docs/ARCHITECTURE.md, "Relay envelope and versions").
type wireMessageRef struct {
	ID        string  `json:"id"`
	Seq       int64   `json:"seq"`
	LocalID   *string `json:"localId"`
	New       bool    `json:"new,omitempty"`
	CreatedAt int64   `json:"createdAt"`
	UpdatedAt int64   `json:"updatedAt"`
}

type wireSessionBase struct {
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

type wireSession struct {
	wireSessionBase
	LastMessage *struct{} `json:"lastMessage"`
}

func toWireSessionBase(x store.Session) wireSessionBase {
	return wireSessionBase{ID: x.ID, Seq: x.Seq, Metadata: x.Metadata, MetadataVersion: x.MetadataVersion, AgentState: x.AgentState,
		AgentStateVersion: x.AgentStateVersion, DataEncryptionKey: x.DataEncryptionKey, Active: x.Active, ActiveAt: x.ActiveAt,
		CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
}

func toWireSession(x store.Session) wireSession {
	return wireSession{wireSessionBase: toWireSessionBase(x)}
}

type wireMachine struct {
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

func toWireMachine(m store.Machine, withSeq bool) wireMachine {
	w := wireMachine{ID: m.ID, Metadata: m.Metadata, MetadataVersion: m.MetadataVersion, DaemonState: m.DaemonState,
		DaemonStateVersion: m.DaemonStateVersion, DataEncryptionKey: m.DataEncryptionKey, Active: m.Active, ActiveAt: m.ActiveAt,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if withSeq {
		seq := m.Seq
		w.Seq = &seq
	}
	return w
}

// update is the envelope of a Socket.IO `update` event.
type update struct {
	ID        string `json:"id"`
	Seq       int64  `json:"seq"`
	Body      any    `json:"body"`
	CreatedAt int64  `json:"createdAt"`
}

type versioned struct {
	Value   *string `json:"value"`
	Version int64   `json:"version"`
}

type bodyNewMessage struct {
	T       string      `json:"t"`
	SID     string      `json:"sid"`
	Message wireMessage `json:"message"`
}

type bodyNewSession struct {
	T string `json:"t"`
	wireSessionBase
}

type bodyUpdateSession struct {
	T          string     `json:"t"`
	ID         string     `json:"id"`
	Metadata   *versioned `json:"metadata,omitempty"`
	AgentState *versioned `json:"agentState,omitempty"`
}

type bodyDeleteSession struct {
	T   string `json:"t"`
	SID string `json:"sid"`
}

type bodyNewMachine struct {
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

type bodyUpdateMachine struct {
	T           string     `json:"t"`
	MachineID   string     `json:"machineId"`
	Metadata    *versioned `json:"metadata,omitempty"`
	DaemonState *versioned `json:"daemonState,omitempty"`
}

// Ephemeral events.

type ephActivity struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Active   bool   `json:"active"`
	ActiveAt int64  `json:"activeAt"`
	Thinking bool   `json:"thinking"`
}

type ephMachineActivity struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Active   bool   `json:"active"`
	ActiveAt int64  `json:"activeAt"`
}

// ephTextDelta is a live text delta of a session, forwarded as it came.
type ephTextDelta struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Message string `json:"message"`
}

type ephUsage struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	Key       string `json:"key"`
	Tokens    any    `json:"tokens"`
	Cost      any    `json:"cost"`
	Timestamp int64  `json:"timestamp"`
}

type ephSessionEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionId"`
	Kind      string `json:"kind"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	Timestamp int64  `json:"timestamp"`
}
