package codex

import (
	"encoding/json"
	"path"
	"strings"
)

// Codex runs a model's shell command through a login shell and reports it
// wrapped: app-server as one string, `/bin/bash -lc 'echo hi > hi.txt'`
// (its parsed commandActions carry the plain `echo hi > hi.txt`), the
// mcp-server and the rollout as an argv, ["/bin/bash", "-lc", "echo hi >
// hi.txt"]. A person reads, and writes permission rules for, the plain
// command (`bash:echo hi*`, `bash:git status*`), so the bash tool's
// command, its title and its permission patterns are the unwrapped one;
// the wrapped form stays in the metadata (rawCommand).

// UserCommand returns the command a person would type for a command Codex
// reports (raw: a JSON string or a JSON array of arguments), and the
// command as Codex gave it when that differs ("" otherwise; an argv is
// joined with shell quoting). A shell wrapper (sh, bash, zsh, dash or ksh,
// by any path, with -c, -lc or -l -c, the script its last argument) is
// stripped to its script; an argv without one is joined the way a POSIX
// shell reads it back; a string that is not a wrapper, or that does not
// split into shell words, stays as it is. Anything else (null, a number, a
// malformed array) gives "", "".
func UserCommand(raw json.RawMessage) (command, wrapped string) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return userCommandString(s)
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		joined := shellJoin(argv)
		if script, ok := UnwrapShell(argv); ok {
			return script, joined
		}
		return joined, ""
	}
	return "", ""
}

// userCommandString is UserCommand of a command Codex gave as the JSON
// string s (decoded).
func userCommandString(s string) (command, wrapped string) {
	if words, ok := shellWords(s); ok {
		if script, ok := UnwrapShell(words); ok {
			return script, s
		}
	}
	return s, ""
}

// UnwrapShell returns the script of a shell wrapper argv ([sh|bash|zsh|
// dash|ksh, -c | -lc | -cl | -l -c, SCRIPT], the shell by any path); ok is
// false for any other argv (more arguments after the script, other
// options, an empty script).
func UnwrapShell(argv []string) (script string, ok bool) {
	if len(argv) < 3 {
		return "", false
	}
	switch path.Base(argv[0]) {
	case "sh", "bash", "zsh", "dash", "ksh":
	default:
		return "", false
	}
	sawC := false
	i := 1
	for ; i < len(argv)-1; i++ {
		flag, isFlag := strings.CutPrefix(argv[i], "-")
		if !isFlag || flag == "" || strings.Trim(flag, "lc") != "" {
			return "", false
		}
		sawC = sawC || strings.Contains(flag, "c")
	}
	if !sawC || i != len(argv)-1 || strings.TrimSpace(argv[i]) == "" {
		return "", false
	}
	return argv[i], true
}

// shellWords splits a command line into words the way a POSIX shell does
// for a simple command: blanks separate words, single quotes keep
// everything, double quotes keep everything but a backslash before $ ` "
// \ or a newline, a backslash outside quotes keeps the next character. ok
// is false for an unterminated quote or an unquoted operator or expansion
// (| & ; < > ( ) $ `): the line is then more than one command's argv.
func shellWords(s string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				} else if s[i] == '$' || s[i] == '`' {
					return nil, false
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, false
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, false
			}
			i++
			if s[i] != '\n' {
				cur.WriteByte(s[i])
				inWord = true
			}
		case strings.IndexByte("|&;<>()$`", c) >= 0:
			return nil, false
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}
