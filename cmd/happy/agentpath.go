//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/internal/proc"
)

// agentExe names where an agent command looks for its executable
// (app.AgentCommand: a flag, then an environment variable, then a name on
// PATH).
type agentExe struct {
	title    string // what the user installs: "Claude Code", "Codex", …
	flagName string // e.g. "claude-path"
	env      string // e.g. "HAPPY_CLAUDE_PATH"
	def      string // e.g. "claude"
}

func fromCommand(a app.AgentCommand) agentExe {
	return agentExe{title: a.Title, flagName: a.FlagName, env: a.Env, def: a.Def}
}

// find checks that the executable the command would start exists and is
// executable, before any session is opened, and returns it as given
// (flagValue, else $env, else def). Its error is one line saying what was
// looked for, where, and how to fix it (exit status 1).
func (a agentExe) find(f *factory, flagValue string) (string, error) {
	c := app.AgentCommand{Title: a.title, FlagName: a.flagName, Env: a.env, Def: a.def}
	path, err := c.Find(f.getenv, flagValue)
	if err != nil {
		return "", &exitError{code: exitFailed, err: err}
	}
	return path, nil
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
	claudeExe   = fromCommand(app.ClaudeCommand)
	codexExe    = fromCommand(app.CodexCommand)
	geminiExe   = fromCommand(app.GeminiCommand)
	opencodeExe = fromCommand(app.OpencodeCommand)
)
