//go:build unix

package main

import (
	"github.com/happy-dev/happy/app"
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

// The agents happy starts by name.
var (
	claudeExe   = fromCommand(app.ClaudeCommand)
	codexExe    = fromCommand(app.CodexCommand)
	geminiExe   = fromCommand(app.GeminiCommand)
	opencodeExe = fromCommand(app.OpencodeCommand)
)
