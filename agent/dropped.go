package agent

import (
	"reflect"
	"unicode/utf8"
)

// DroppedRawMax is the longest Dropped.Raw kept, in bytes: enough to
// recognise a refused frame, small enough that a flood of bad input cannot
// grow a transcript.
const DroppedRawMax = 512

// CutUTF8 returns s cut to at most n bytes without splitting a UTF-8
// sequence (the cut moves back to the start of the rune that would be
// split). n <= 0 gives "". It is the one truncation helper of the agent
// vocabulary and of every adapter.
func CutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// IsNilEvent reports whether ev is nil or a typed nil pointer (a
// (*ToolCall)(nil) in an Event): consumers refuse both instead of
// panicking on a field access.
func IsNilEvent(ev Event) bool {
	if ev == nil {
		return true
	}
	v := reflect.ValueOf(ev)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// DropReason says why an input was refused. Readers count them by reason.
type DropReason string

// Drop reasons shared by all decoders.
const (
	DropUnparseableJSON   DropReason = "unparseable_json"   // not JSON (truncated line, HTML page)
	DropNotAnObject       DropReason = "not_an_object"      // JSON, but an array, string, number or null
	DropUnknownType       DropReason = "unknown_type"       // a record/event kind this version does not know
	DropMissingID         DropReason = "missing_id"         // an id the record needs is absent or empty
	DropInvalidField      DropReason = "invalid_field"      // a field has the wrong type or an impossible value
	DropOversize          DropReason = "oversize"           // larger than the reader accepts
	DropIllegalTransition DropReason = "illegal_transition" // a tool state change the state machine refuses
	DropOrphan            DropReason = "orphan"             // refers to something never announced and cannot stand alone
	DropDecryptFailed     DropReason = "decrypt_failed"     // ciphertext that does not open with our key
	DropWrongLocalID      DropReason = "wrong_localid"      // a relay row whose record and version are not the ones its localId names (a replay)
	DropUnknownDecision   DropReason = "unknown_decision"   // a permission answer that is not once/always/reject

	// Control inputs (prompts, decisions, machine requests) refused by
	// their receiver (docs/ARCHITECTURE.md, "Trust"); the values are the
	// control package's reasons.
	DropReplayed    DropReason = "replayed"     // consumed before: a replay
	DropWrongTarget DropReason = "wrong_target" // sealed for another session, machine or method
	DropStale       DropReason = "stale"        // issued outside the accepted window
	DropUnsealed    DropReason = "unsealed"     // no sealed envelope where one is required
	DropMalformed   DropReason = "malformed"    // an envelope that is not a valid one
)

// SourceControl is the Dropped source of a control input (a prompt row, an
// RPC) that a session refused as replayed, wrong-target, stale, unsealed or
// malformed (docs/ARCHITECTURE.md, "Trust"). Such a record says what was
// not acted on; unlike the other sources it does not make the transcript
// incomplete.
const SourceControl = "control"

// Dropped records one refused input: where it came from, why, and a prefix
// of the raw bytes for diagnosis. It is kept in the transcript document so
// a reader can tell the transcript is incomplete.
type Dropped struct {
	Source string     `json:"source"`           // e.g. "claude-jsonl", "codex-rpc", "relay"
	Line   int64      `json:"line,omitempty"`   // 1-based line (or record) number, when known
	Kind   string     `json:"kind,omitempty"`   // the raw kind/type of the refused record, when known
	Reason DropReason `json:"reason"`           // why it was refused
	Detail string     `json:"detail,omitempty"` // human-readable specifics
	Raw    string     `json:"raw,omitempty"`    // at most the first 512 bytes of the input
}
