package server

import (
	"github.com/happy-dev/happy/relay/wire"
	"github.com/happy-dev/happy/server/store"
)

// The relay's rows in the wire shapes of package wire (the contract shared
// with happy's client of the relay). Opaque strings pass through unchanged.

func toWireMessage(m store.Message) wire.Message {
	return wire.Message{ID: m.ID, Seq: m.Seq, Content: wire.Content{T: "encrypted", C: m.Content}, LocalID: m.LocalID, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
}

func toWireSessionBase(x store.Session) wire.Session {
	return wire.Session{ID: x.ID, Seq: x.Seq, Metadata: x.Metadata, MetadataVersion: x.MetadataVersion, AgentState: x.AgentState,
		AgentStateVersion: x.AgentStateVersion, DataEncryptionKey: x.DataEncryptionKey, Active: x.Active, ActiveAt: x.ActiveAt,
		CreatedAt: x.CreatedAt, UpdatedAt: x.UpdatedAt}
}

func toWireSession(x store.Session) wire.ListedSession {
	return wire.ListedSession{Session: toWireSessionBase(x)}
}

func toWireMachine(m store.Machine, withSeq bool) wire.Machine {
	w := wire.Machine{ID: m.ID, Metadata: m.Metadata, MetadataVersion: m.MetadataVersion, DaemonState: m.DaemonState,
		DaemonStateVersion: m.DaemonStateVersion, DataEncryptionKey: m.DataEncryptionKey, Active: m.Active, ActiveAt: m.ActiveAt,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt}
	if withSeq {
		seq := m.Seq
		w.Seq = &seq
	}
	return w
}
