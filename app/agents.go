package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/happy-dev/happy/internal/proc"
)

// AgentCommand names where an agent command of happy looks for the agent's
// executable: a flag (FlagName; "" for happy acp, whose flag value is the
// command after --), then the environment variable Env, then the name Def
// on PATH.
type AgentCommand struct {
	Name     string // happy's command and the session flavor: "claude", "codex", …
	Title    string // what the user installs: "Claude Code", "Codex", …
	FlagName string // e.g. "claude-path"
	Env      string // e.g. "HAPPY_CLAUDE_PATH"
	Def      string // e.g. "claude"
}

// The agents happy starts by name (happy claude, codex, gemini, opencode,
// openclaw).
var (
	ClaudeCommand   = AgentCommand{Name: "claude", Title: "Claude Code", FlagName: "claude-path", Env: "HAPPY_CLAUDE_PATH", Def: "claude"}
	CodexCommand    = AgentCommand{Name: "codex", Title: "Codex", FlagName: "codex-path", Env: "HAPPY_CODEX_PATH", Def: "codex"}
	GeminiCommand   = AgentCommand{Name: "gemini", Title: "Gemini CLI", FlagName: "gemini-path", Env: "HAPPY_GEMINI_PATH", Def: "gemini"}
	OpencodeCommand = AgentCommand{Name: "opencode", Title: "OpenCode", FlagName: "opencode-path", Env: "HAPPY_OPENCODE_PATH", Def: "opencode"}
	// OpenclawCommand is the openclaw CLI: happy openclaw talks to a running
	// gateway, and starts one with it only for --start-gateway.
	OpenclawCommand = AgentCommand{Name: "openclaw", Title: "OpenClaw", FlagName: "openclaw-path", Env: "HAPPY_OPENCLAW_PATH", Def: "openclaw"}
)

// KnownAgents are the agents happy starts by name, in the order they are
// listed (machine metadata, happy machines).
var KnownAgents = []AgentCommand{ClaudeCommand, CodexCommand, GeminiCommand, OpencodeCommand, OpenclawCommand}

// AgentByName returns the known agent called name.
func AgentByName(name string) (AgentCommand, bool) {
	for _, a := range KnownAgents {
		if a.Name == name {
			return a, true
		}
	}
	return AgentCommand{}, false
}

// Find checks that the executable the command would start exists and is
// executable, and returns it as given (flagValue, else $Env, else Def). Its
// error is one line saying what was looked for, where, and how to fix it.
func (a AgentCommand) Find(getenv func(string) string, flagValue string) (string, error) {
	val, from := flagValue, "--"+a.FlagName
	if val == "" {
		val, from = getenv(a.Env), a.Env
	}
	if val == "" {
		val, from = a.Def, ""
	}
	_, err := lookPath(getenv, val)
	if err == nil {
		return val, nil
	}
	why := "does not exist"
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, exec.ErrNotFound) && strings.Contains(val, "/") && fileExists(val):
		why = "is not an executable file"
	}
	var msg string
	switch {
	case from == "":
		msg = fmt.Sprintf("%s not found: no %q on PATH (%s); install it, or set %s to its executable", a.Title, val, PathOf(getenv), a.Env)
	case from == "--":
		if !strings.Contains(val, "/") {
			why = "is not on PATH (" + PathOf(getenv) + ")"
		}
		msg = fmt.Sprintf("%s not found: the command after -- is %q, which %s; install the agent, or give its full path after --", a.Title, val, why)
	case strings.HasPrefix(from, "--"):
		msg = fmt.Sprintf("%s not found: %s %q %s; point it at the %s executable", a.Title, from, val, why, a.Def)
	default:
		if !strings.Contains(val, "/") {
			why = "is not on PATH (" + PathOf(getenv) + ")"
		}
		msg = fmt.Sprintf("%s not found: %s is %q, which %s; point it at the %s executable, or unset it to look for %q on PATH", a.Title, a.Env, val, why, a.Def, a.Def)
	}
	return "", errors.New(msg)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// InstalledAgent is what DetectAgents found of one known agent: whether its
// executable is there (Path, as Find returns it), and the first line its
// `--version` printed ("" when it printed nothing or failed).
type InstalledAgent struct {
	Name      string `json:"name"`
	Installed bool   `json:"installed"`
	Path      string `json:"path,omitempty"`
	Version   string `json:"version,omitempty"`
	// Error says why it is not installed (Find's message).
	Error string `json:"error,omitempty"`
}

// versionTimeout bounds one agent's `--version`.
const versionTimeout = 10 * time.Second

// DetectAgents looks for every known agent (AgentCommand.Find with no
// flag) and asks each one found for its version (`<exe> --version`, in its
// own process group, bounded by 10 s).
func DetectAgents(ctx context.Context, getenv func(string) string) []InstalledAgent {
	out := make([]InstalledAgent, 0, len(KnownAgents))
	for _, a := range KnownAgents {
		ia := InstalledAgent{Name: a.Name}
		path, err := a.Find(getenv, "")
		if err != nil {
			ia.Error = err.Error()
			out = append(out, ia)
			continue
		}
		ia.Installed, ia.Path = true, path
		ia.Version = agentVersion(ctx, path)
		out = append(out, ia)
	}
	return out
}

// agentVersion runs `exe --version` and returns its first non-empty line.
func agentVersion(parent context.Context, exe string) string {
	ctx, cancel := context.WithTimeout(parent, versionTimeout)
	defer cancel()
	f, err := os.CreateTemp("", "happy-version-*")
	if err != nil {
		return ""
	}
	defer os.Remove(f.Name())
	defer f.Close()
	cmd := exec.Command(exe, "--version")
	cmd.Stdout = f
	p, err := proc.Start(ctx, cmd, proc.Options{Grace: time.Second})
	if err != nil {
		return ""
	}
	if _, err := p.Wait(); err != nil {
		return ""
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > 200 {
				l = l[:200]
			}
			return l
		}
	}
	return ""
}

// PathOf is the PATH of the environment getenv reads (the process's when
// it has none), so a command run with another environment (a test, the
// daemon for a spawned session) looks agents up where that environment
// says, never in the developer's own PATH by accident.
func PathOf(getenv func(string) string) string {
	if p := getenv("PATH"); p != "" {
		return p
	}
	return os.Getenv("PATH")
}

// lookPath is exec.LookPath over PathOf(getenv): a name with a slash is
// checked as it is, any other is searched in that PATH's folders.
func lookPath(getenv func(string) string, name string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	for _, dir := range filepath.SplitList(PathOf(getenv)) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}
