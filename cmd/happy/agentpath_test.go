package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent executable that is not there is reported in one line naming
// what was looked for, where, and the variable or flag that fixes it.
func TestAgentExeFind(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	missingDef := agentExe{title: "Gemini CLI", flagName: "gemini-path", env: "HAPPY_GEMINI_PATH", def: "gemini"}
	cases := []struct {
		name    string
		exe     agentExe
		env     string
		flag    string
		want    string
		wantErr string
	}{
		{"on PATH", claudeExe, "", "", "claude", ""},
		{"env wins over PATH", claudeExe, exe, "", exe, ""},
		{"flag wins over env", claudeExe, "/nonexistent", exe, exe, ""},
		{"not on PATH", missingDef, "", "", "",
			`Gemini CLI not found: no "gemini" on PATH (` + dir + `); install it, or set HAPPY_GEMINI_PATH to its executable`},
		{"env names a missing file", claudeExe, "/nonexistent", "", "",
			`Claude Code not found: HAPPY_CLAUDE_PATH is "/nonexistent", which does not exist; point it at the claude executable, or unset it to look for "claude" on PATH`},
		{"env names a file that is not executable", codexExe, plain, "", "",
			`Codex not found: HAPPY_CODEX_PATH is "` + plain + `", which is not an executable file; point it at the codex executable, or unset it to look for "codex" on PATH`},
		{"env names a name not on PATH", codexExe, "codex-nightly", "", "",
			`Codex not found: HAPPY_CODEX_PATH is "codex-nightly", which is not on PATH (` + dir + `); point it at the codex executable, or unset it to look for "codex" on PATH`},
		{"flag names a missing file", claudeExe, "", "/nope", "",
			`Claude Code not found: --claude-path "/nope" does not exist; point it at the claude executable`},
		{"acp command", agentExe{title: "ACP agent", def: "nosuch"}, "", "nosuch", "",
			`ACP agent not found: the command after -- is "nosuch", which is not on PATH (` + dir + `); install the agent, or give its full path after --`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFactory(strings.NewReader(""), &strings.Builder{}, &strings.Builder{}, func(k string) string {
				if k == tc.exe.env {
					return tc.env
				}
				return ""
			})
			got, err := tc.exe.find(f, tc.flag)
			if tc.wantErr == "" {
				if err != nil || got != tc.want {
					t.Fatalf("find = %q, %v; want %q", got, err, tc.want)
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitFailed || err.Error() != tc.wantErr {
				t.Fatalf("find error %v\nwant          %s (exit 1)", err, tc.wantErr)
			}
		})
	}
}

// happy doctor names the PATH it searched once, with the first agent
// missing from it, not once per agent.
func TestDoctorShowsThePathOnce(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"PATH": dir, "HAPPY_SERVER_URL": "http://127.0.0.1:1"}
	_, out, _ := runHappy(t, env, "doctor")
	if n := strings.Count(out, dir); n != 1 {
		t.Fatalf("the PATH %s is shown %d times:\n%s", dir, n, out)
	}
	for _, want := range []string{`no "claude" on PATH (` + dir + `)`, `no "codex" on PATH either`, `no "opencode" on PATH either`} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
}
