package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runHappy runs the command line in-process with in-memory streams and a
// throwaway home folder, returning the exit code and both outputs.
func runHappy(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["HAPPY_HOME_DIR"]; !ok {
		env["HAPPY_HOME_DIR"] = t.TempDir()
	}
	var out, errb bytes.Buffer
	f := newFactory(strings.NewReader(""), &out, &errb, func(k string) string { return env[k] })
	code = run(args, f)
	return code, out.String(), errb.String()
}

func TestRootCommandExitCodes(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"version", []string{"--version"}, exitOK, "happy dev\n", ""},
		{"unknown flag", []string{"--bogus"}, exitUsage, "", "happy: unknown flag: --bogus\n"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "", "happy: unknown command \"frobnicate\" (see happy help)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runHappy(t, nil, tc.args...)
			if code != tc.wantCode || stdout != tc.wantStdout || stderr != tc.wantStderr {
				t.Fatalf("happy %v = (%d, %q, %q), want (%d, %q, %q)", tc.args, code, stdout, stderr, tc.wantCode, tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

func TestHelpListsUsage(t *testing.T) {
	code, stdout, _ := runHappy(t, nil, "help")
	if code != exitOK {
		t.Fatalf("happy help exit %d", code)
	}
	for _, want := range []string{"happy wraps a coding agent", "Usage:", "happy [flags]"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("help output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	code, stdout, _ := runHappy(t, nil, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "happy dev (go1.") {
		t.Fatalf("happy version = (%d, %q)", code, stdout)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{"claude", "-p", ""},
		{"claude", "-p", "   "},
		{"log"},
		{"approve", "S"},
		{"answer", "S", "C"},
		{"sessions", "extra"},
	} {
		code, _, stderr := runHappy(t, nil, args...)
		if code != exitUsage || stderr == "" {
			t.Errorf("happy %q: exit %d, stderr %q; want exit 2 with a message", args, code, stderr)
		}
	}
}

// happy server refuses a bad --synchronous before creating anything.
func TestServerBadSynchronous(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, "data")
	code, stdout, stderr := runHappy(t, map[string]string{"HAPPY_HOME_DIR": home}, "server", "--data", data, "--synchronous", "OFF")
	if code != exitUsage || stdout != "" || stderr != "happy: --synchronous must be NORMAL or FULL, got \"OFF\"\n" {
		t.Fatalf("happy server --synchronous OFF = (%d, %q, %q)", code, stdout, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("data folder created: %v", err)
	}
}
