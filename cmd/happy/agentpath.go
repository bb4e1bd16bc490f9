//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/happy-dev/happy/internal/proc"
)

// agentExe names where an agent command looks for its executable: a flag
// (flagName; "" for happy acp, whose flag value is the command after --), then the environment variable
// env, then the name def on PATH.
type agentExe struct {
	title    string // what the user installs: "Claude Code", "Codex", …
	flagName string // e.g. "claude-path"
	env      string // e.g. "HAPPY_CLAUDE_PATH"
	def      string // e.g. "claude"
}

// find checks that the executable the command would start exists and is
// executable, before any session is opened, and returns it as given
// (flagValue, else $env, else def). Its error is one line saying what was
// looked for, where, and how to fix it (exit status 1).
func (a agentExe) find(f *factory, flagValue string) (string, error) {
	val, from := flagValue, "--"+a.flagName
	if val == "" {
		val, from = f.getenv(a.env), a.env
	}
	if val == "" {
		val, from = a.def, ""
	}
	_, err := exec.LookPath(val)
	if err == nil {
		return val, nil
	}
	why := "does not exist"
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, exec.ErrNotFound) && strings.Contains(val, "/") && exists(val):
		why = "is not an executable file"
	}
	var msg string
	switch {
	case from == "":
		msg = fmt.Sprintf("%s not found: no %q on PATH (%s); install it, or set %s to its executable", a.title, val, os.Getenv("PATH"), a.env)
	case from == "--":
		if !strings.Contains(val, "/") {
			why = "is not on PATH (" + os.Getenv("PATH") + ")"
		}
		msg = fmt.Sprintf("%s not found: the command after -- is %q, which %s; install the agent, or give its full path after --", a.title, val, why)
	case strings.HasPrefix(from, "--"):
		msg = fmt.Sprintf("%s not found: %s %q %s; point it at the %s executable", a.title, from, val, why, a.def)
	default:
		if !strings.Contains(val, "/") {
			why = "is not on PATH (" + os.Getenv("PATH") + ")"
		}
		msg = fmt.Sprintf("%s not found: %s is %q, which %s; point it at the %s executable, or unset it to look for %q on PATH", a.title, a.env, val, why, a.def, a.def)
	}
	return "", &exitError{code: exitFailed, err: errors.New(msg)}
}

// cannotStart turns an error of starting the agent at path into one line
// (exit status 1): what could not be started, why (the system's reason; for
// a script whose #! interpreter is missing, that interpreter), and the fix.
// An error that is not a failed start (proc.ErrNotStarted, or the
// fork/exec error of os/exec) is returned as it is.
func (a agentExe) cannotStart(path string, err error) error {
	if !startFailed(err) {
		return err
	}
	why := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		why = errno.Error()
	}
	if errors.Is(err, syscall.ENOENT) && exists(path) {
		if interp := interpreter(path); interp != "" {
			why = fmt.Sprintf("its interpreter %q (its #! line) is not there", interp)
		}
	}
	fix := fmt.Sprintf("point %s (or --%s) at a working %s executable, or install %s", a.env, a.flagName, a.def, a.title)
	if a.flagName == "" {
		fix = "give the command of a working agent after --"
	}
	return &exitError{code: exitFailed, err: fmt.Errorf("%s cannot be started: %s: %s; %s", a.title, path, why, fix)}
}

// startFailed reports whether err says a program could not be started.
func startFailed(err error) bool {
	var pe *fs.PathError
	return errors.Is(err, proc.ErrNotStarted) || errors.As(err, &pe) && pe.Op == "fork/exec"
}

// interpreter is the program a script's first line (#!) names, "" when
// path is not a script.
func interpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	line, ok := strings.CutPrefix(string(buf[:n]), "#!")
	if !ok {
		return ""
	}
	line, _, _ = strings.Cut(line, "\n")
	if fields := strings.Fields(line); len(fields) > 0 {
		return fields[0]
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// The agents happy starts by name.
var (
	claudeExe   = agentExe{title: "Claude Code", flagName: "claude-path", env: "HAPPY_CLAUDE_PATH", def: "claude"}
	codexExe    = agentExe{title: "Codex", flagName: "codex-path", env: "HAPPY_CODEX_PATH", def: "codex"}
	geminiExe   = agentExe{title: "Gemini CLI", flagName: "gemini-path", env: "HAPPY_GEMINI_PATH", def: "gemini"}
	opencodeExe = agentExe{title: "OpenCode", flagName: "opencode-path", env: "HAPPY_OPENCODE_PATH", def: "opencode"}
)
