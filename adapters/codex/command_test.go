package codex

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

func TestUserCommand(t *testing.T) {
	cases := []struct {
		name, raw     string
		cmd, wrapped  string
		unwrapOK      bool // UnwrapShell of the argv form
		argvUnwrapped string
	}{
		{"app-server string", `"/bin/bash -lc 'echo hi > hi.txt'"`, "echo hi > hi.txt", "/bin/bash -lc 'echo hi > hi.txt'", false, ""},
		{"argv", `["/bin/bash","-lc","echo hi > hi.txt"]`, "echo hi > hi.txt", "/bin/bash -lc 'echo hi > hi.txt'", true, "echo hi > hi.txt"},
		{"sh -c", `["sh","-c","git status"]`, "git status", "sh -c 'git status'", true, "git status"},
		{"zsh -l -c", `["/usr/bin/zsh","-l","-c","ls -la"]`, "ls -la", "/usr/bin/zsh -l -c 'ls -la'", true, "ls -la"},
		{"bash -cl", `"bash -cl ls"`, "ls", "bash -cl ls", false, ""},
		{"quote inside", `"bash -lc 'echo '\"'\"'hi →'\"'\"''"`, "echo 'hi →'", "bash -lc 'echo '\"'\"'hi →'\"'\"''", false, ""},
		{"double quotes", `"bash -lc \"echo \\\"a b\\\"\""`, `echo "a b"`, `bash -lc "echo \"a b\""`, false, ""},
		{"backslash escape", `"bash -lc echo\\ hi"`, "echo hi", `bash -lc echo\ hi`, false, ""},
		{"plain string", `"git status"`, "git status", "", false, ""},
		{"plain argv", `["git","log","--oneline"]`, "git log --oneline", "", false, ""},
		{"argv with spaces", `["echo","a b"]`, "echo 'a b'", "", false, ""},
		{"not a shell", `["/usr/bin/python3","-c","print(1)"]`, "/usr/bin/python3 -c 'print(1)'", "", false, ""},
		{"script then args", `["bash","-c","echo $0","x"]`, "bash -c 'echo $0' x", "", false, ""},
		{"other option", `["bash","-ec","false"]`, "bash -ec false", "", false, ""},
		{"no -c", `["bash","-l","script.sh"]`, "bash -l script.sh", "", false, ""},
		{"empty script", `["bash","-lc",""]`, "bash -lc ''", "", false, ""},
		{"operator outside quotes", `"bash -lc 'a' > out"`, "bash -lc 'a' > out", "", false, ""},
		{"expansion in double quotes", `"bash -lc \"echo $HOME\""`, `bash -lc "echo $HOME"`, "", false, ""},
		{"unterminated quote", `"bash -lc 'echo"`, "bash -lc 'echo", "", false, ""},
		{"null", `null`, "", "", false, ""},
		{"number", `7`, "", "", false, ""},
		{"absent", ``, "", "", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd, wrapped := UserCommand(json.RawMessage(tc.raw))
			if cmd != tc.cmd || wrapped != tc.wrapped {
				t.Errorf("UserCommand(%s) = %q, %q; want %q, %q", tc.raw, cmd, wrapped, tc.cmd, tc.wrapped)
			}
			var argv []string
			if json.Unmarshal([]byte(tc.raw), &argv) == nil {
				got, ok := UnwrapShell(argv)
				if ok != tc.unwrapOK || got != tc.argvUnwrapped {
					t.Errorf("UnwrapShell(%q) = %q, %v; want %q, %v", argv, got, ok, tc.argvUnwrapped, tc.unwrapOK)
				}
			}
		})
	}
}

// The permission a real capture asks for matches rules written the way a
// person types the command (the README's own example among them): on
// both protocols the pattern is the unwrapped command, and the wrapped
// one stays in the metadata.
func TestPermissionPatternsMatchTypedRules(t *testing.T) {
	for _, tc := range []struct {
		capture string
		p       Protocol
	}{{"codex-app", ProtocolAppServer}, {"codex0150-mcp-server", ProtocolMCP}} {
		t.Run(tc.capture, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata", "captures", tc.capture, "rpc-traffic.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			evs, err := Replay(f, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			var perm *agent.PermissionRequest
			var input json.RawMessage
			for _, e := range evs {
				switch e := e.(type) {
				case *agent.ToolBlocked:
					if e.Permission != nil && perm == nil {
						perm = e.Permission
					}
				case *agent.ToolCall:
					if input == nil {
						input = e.Input
					}
				}
			}
			if perm == nil {
				t.Fatal("the capture asks for no permission")
			}
			if got := perm.Metadata["rawCommand"]; got != "/bin/bash -lc 'echo hi > hi.txt'" {
				t.Errorf("metadata rawCommand %v", got)
			}
			var in struct{ Command string }
			if err := json.Unmarshal(input, &in); err != nil || in.Command != "echo hi > hi.txt" {
				t.Errorf("tool input %s", input)
			}
			for _, rule := range []struct {
				pattern string
				want    mapper.Action
			}{
				{"echo hi*", mapper.ActionAllow},
				{"echo hi > hi.txt", mapper.ActionAllow},
				{"echo *", mapper.ActionAllow},
				{"git status*", mapper.ActionAsk},
				{"rm *", mapper.ActionAsk},
			} {
				rules := []mapper.PermissionRule{{Permission: "bash", Pattern: rule.pattern, Action: mapper.ActionAllow}}
				if got := mapper.Evaluate(rules, perm.Permission, perm.Patterns); got != rule.want {
					t.Errorf("rule bash:%s on %q = %s, want %s", rule.pattern, perm.Patterns, got, rule.want)
				}
			}
		})
	}
}

// FuzzUserCommand: any bytes give an answer without panicking, and an
// unwrapped command never is longer than what Codex gave.
func FuzzUserCommand(f *testing.F) {
	for _, s := range []string{`"/bin/bash -lc 'echo hi > hi.txt'"`, `["/bin/bash","-lc","echo hi"]`, `"bash -lc \"a \\\" b\""`, `"'unterminated`, `["sh"]`, `null`, `"a\\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cmd, wrapped := UserCommand(raw)
		if wrapped != "" && len(cmd) > len(wrapped) {
			t.Fatalf("UserCommand(%q) = %q, longer than %q", raw, cmd, wrapped)
		}
	})
}
