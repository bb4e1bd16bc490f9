package hooks

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Hook timeouts written into the settings file when SettingsOptions leaves
// them zero. A PermissionRequest hook waits for a person on another device,
// so it gets a day; Claude's own dialog answers meanwhile as usual.
const (
	DefaultPermissionTimeout = 24 * time.Hour
	DefaultHookTimeout       = 60 * time.Second
)

// Events lists the hook events happy registers, in the order they are
// written to the settings file.
func Events() []string {
	return []string{
		EventSessionStart, EventUserPromptSubmit, EventPreToolUse, EventPermissionRequest,
		EventPostToolUse, EventPostToolUseFailure, EventStop, EventSubagentStart, EventSubagentStop,
		EventSessionEnd,
	}
}

// SettingsOptions configure Settings.
type SettingsOptions struct {
	// Command is the argv that runs `happy hook` (the happy executable's
	// absolute path, then "hook"); the event name is appended. Required.
	Command []string
	// PermissionTimeout is the PermissionRequest hook's timeout;
	// DefaultPermissionTimeout when zero.
	PermissionTimeout time.Duration
	// Timeout is every other hook's timeout; DefaultHookTimeout when zero.
	Timeout time.Duration
}

type settingsFile struct {
	Hooks map[string][]matcherGroup `json:"hooks"`
}

type matcherGroup struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []hookCommand `json:"hooks"`
}

type hookCommand struct {
	Type    string `json:"type"`
	Command string `json:"command"`
	Timeout int64  `json:"timeout"` // seconds
}

// toolEvents take a matcher (on the tool name); the others do not need one.
var toolEvents = map[string]bool{
	EventPreToolUse: true, EventPermissionRequest: true, EventPostToolUse: true, EventPostToolUseFailure: true,
}

// Settings returns the JSON of a Claude settings file (for --settings)
// that runs Command for every event of Events. Claude merges it with the
// user's own settings; nothing else is in it.
func Settings(opts SettingsOptions) ([]byte, error) {
	if len(opts.Command) == 0 {
		return nil, fmt.Errorf("hook settings: no command")
	}
	permTimeout, timeout := opts.PermissionTimeout, opts.Timeout
	if permTimeout <= 0 {
		permTimeout = DefaultPermissionTimeout
	}
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	f := settingsFile{Hooks: map[string][]matcherGroup{}}
	for _, ev := range Events() {
		argv := append(append([]string(nil), opts.Command...), ev)
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = shellQuote(a)
		}
		t := timeout
		if ev == EventPermissionRequest {
			t = permTimeout
		}
		g := matcherGroup{Hooks: []hookCommand{{Type: "command", Command: strings.Join(quoted, " "), Timeout: int64(t / time.Second)}}}
		if toolEvents[ev] {
			g.Matcher = "*"
		}
		f.Hooks[ev] = []matcherGroup{g}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("hook settings: %w", err)
	}
	return append(b, '\n'), nil
}

// WriteSettings writes Settings(opts) to path (mode 0600, replaced
// atomically), for Claude's --settings flag. path is happy's own file,
// never one of the user's settings files.
func WriteSettings(path string, opts SettingsOptions) error {
	b, err := Settings(opts)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".settings-*.json")
	if err != nil {
		return fmt.Errorf("write hook settings: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write hook settings: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write hook settings: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write hook settings: %w", err)
	}
	return nil
}

// shellQuote quotes s for a POSIX shell (Claude runs hook commands with sh).
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+=:@%,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
