package acp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrProtocolVersion is wrapped by every *VersionError.
var ErrProtocolVersion = errors.New("acp: protocol version refused")

// Reasons of a VersionError (seed 002, "Protocol version reporting").
const (
	VersionTooOld     = "too_old"          // the agent's version is below ours
	VersionTooNew     = "too_new"          // the agent's version is above ours
	VersionUnreadable = "unreadable"       // the agent stated no readable version
	VersionMismatch   = "version_mismatch" // any other disagreement
)

// VersionError refuses an agent whose initialize response states a protocol
// version this client cannot speak. Expected is always the version we
// speak (ProtocolVersion), never the agent's; Agent is the version the
// agent stated, nil when it stated none that is readable (absent, null, not
// an integer, negative, out of range) — never 0 for "nothing".
type VersionError struct {
	Reason   string // one of the Version* reasons
	Expected int64  // what we speak
	Agent    *int64 // what the agent stated; nil when unreadable
	Raw      string // the agent's protocolVersion as written ("" when absent)
}

// Error names both versions: "acp: agent protocol version 2 is too new:
// happy speaks version 1 (too_new)".
func (e *VersionError) Error() string {
	switch e.Reason {
	case VersionUnreadable:
		got := e.Raw
		if got == "" {
			got = "nothing"
		}
		return fmt.Sprintf("acp: the agent stated no readable protocol version (got %s): happy speaks version %d (%s)", got, e.Expected, e.Reason)
	case VersionTooNew:
		return fmt.Sprintf("acp: agent protocol version %d is too new: happy speaks version %d (%s)", *e.Agent, e.Expected, e.Reason)
	case VersionTooOld:
		return fmt.Sprintf("acp: agent protocol version %d is too old: happy speaks version %d (%s)", *e.Agent, e.Expected, e.Reason)
	}
	return fmt.Sprintf("acp: agent protocol version %s does not match: happy speaks version %d (%s)", e.Raw, e.Expected, e.Reason)
}

// Unwrap returns ErrProtocolVersion.
func (e *VersionError) Unwrap() error { return ErrProtocolVersion }

// CheckVersion checks the protocolVersion member of an initialize response
// (raw JSON, nil when the member is absent) against ProtocolVersion. It
// returns the version the agent stated and nil when they agree, else a
// *VersionError. The schema makes the version a uint16.
func CheckVersion(raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	e := &VersionError{Expected: ProtocolVersion, Raw: string(raw)}
	if len(raw) == 0 || raw[0] == 'n' || raw[0] == '"' || raw[0] == '{' || raw[0] == '[' || raw[0] == 't' || raw[0] == 'f' {
		e.Reason = VersionUnreadable
		return 0, e
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v < 0 || v > 65535 {
		e.Reason = VersionUnreadable
		return 0, e
	}
	switch {
	case v == ProtocolVersion:
		return v, nil
	case v < ProtocolVersion:
		e.Reason = VersionTooOld
	default:
		e.Reason = VersionTooNew
	}
	e.Agent = &v
	return v, e
}
