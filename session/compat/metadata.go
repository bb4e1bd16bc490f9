package compat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// ErrMetadata is wrapped by every refusal of ValidateMetadata.
var ErrMetadata = errors.New("metadata the reference app would discard")

// metaField is the type the reference app's metadata schema gives a field.
type metaField int

const (
	fString metaField = iota
	fNumber
	fBool
	fStrings         // array of strings
	fNullableString  // string or null
	fSummary         // {text: string, updatedAt: number}
	fStartedBy       // "daemon" | "terminal"
	fNamedStatusList // [{name: string, status: string}]
)

// metadataFields are the session metadata fields the reference app types
// (its MetadataSchema, docs/ARCHITECTURE.md "The reference app"). Every
// other field passes through unchecked. Optional fields may be absent but
// not null, except those typed nullable.
var metadataFields = map[string]metaField{
	"path": fString, "host": fString,
	"version": fString, "name": fString, "os": fString, "summary": fSummary, "machineId": fString,
	"claudeSessionId": fString, "codexThreadId": fString, "tools": fStrings, "slashCommands": fStrings,
	"skills": fStrings, "mcpServers": fNamedStatusList,
	"homeDir": fString, "happyHomeDir": fString, "startedFromDaemon": fBool, "hostPid": fNumber,
	"startedBy": fStartedBy, "flavor": fNullableString, "lifecycleState": fString,
	"lifecycleStateSince": fNumber, "archivedBy": fString, "archiveReason": fString,
	"permissionMode": fString, "modelMode": fString, "effortLevel": fString,
	"currentModelCode": fString, "currentOperatingModeCode": fString, "currentThoughtLevelCode": fString,
}

// metadataRequired are the fields the app's schema requires.
var metadataRequired = []string{"path", "host"}

// ValidateMetadata checks session metadata (plaintext JSON) against what the
// reference app's metadata schema accepts: an object with path and host
// strings, and every optional field it types of that type (absent, never
// null unless nullable). One bad field makes the app discard the whole
// metadata, so the error names every bad field, sorted; it wraps
// ErrMetadata.
func ValidateMetadata(raw []byte) error {
	var m map[string]json.RawMessage
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return fmt.Errorf("%w: not a JSON object", ErrMetadata)
	}
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return fmt.Errorf("%w: %v", ErrMetadata, err)
	}
	var bad []string
	for _, k := range metadataRequired {
		if _, ok := m[k]; !ok {
			bad = append(bad, k+": required")
		}
	}
	for k, v := range m {
		t, typed := metadataFields[k]
		if !typed {
			continue
		}
		if why := checkField(t, v); why != "" {
			bad = append(bad, k+": "+why)
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("%w: %s", ErrMetadata, joinComma(bad))
	}
	return nil
}

func joinComma(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x)
	}
	return b.String()
}

// checkField says why v is not of type t ("" when it is).
func checkField(t metaField, v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	null := string(v) == "null"
	switch t {
	case fString:
		if !isString(v) {
			return "must be a string"
		}
	case fNullableString:
		if !null && !isString(v) {
			return "must be a string or null"
		}
	case fNumber:
		var f float64
		if null || json.Unmarshal(v, &f) != nil {
			return "must be a number"
		}
	case fBool:
		var b bool
		if null || json.Unmarshal(v, &b) != nil {
			return "must be a boolean"
		}
	case fStrings:
		var a []json.RawMessage
		if null || json.Unmarshal(v, &a) != nil {
			return "must be an array of strings"
		}
		for _, e := range a {
			if !isString(e) {
				return "must be an array of strings"
			}
		}
	case fSummary:
		var s map[string]json.RawMessage
		if null || json.Unmarshal(v, &s) != nil || s == nil {
			return "must be {text, updatedAt}"
		}
		var f float64
		if !isString(s["text"]) || json.Unmarshal(s["updatedAt"], &f) != nil || string(bytes.TrimSpace(s["updatedAt"])) == "null" {
			return "must be {text: string, updatedAt: number}"
		}
	case fStartedBy:
		var s string
		if json.Unmarshal(v, &s) != nil || (s != "daemon" && s != "terminal") {
			return `must be "daemon" or "terminal"`
		}
	case fNamedStatusList:
		var a []map[string]json.RawMessage
		if null || json.Unmarshal(v, &a) != nil {
			return "must be an array of {name, status}"
		}
		for _, e := range a {
			if e == nil || !isString(e["name"]) || !isString(e["status"]) {
				return "must be an array of {name: string, status: string}"
			}
		}
	}
	return ""
}

func isString(v json.RawMessage) bool {
	var s string
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '"' && json.Unmarshal(v, &s) == nil
}
