package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/app"
	"github.com/happy-dev/happy/crypto"
	"github.com/happy-dev/happy/internal/waitfor"
	"github.com/happy-dev/happy/relay"
	"github.com/happy-dev/happy/server/servertest"
)

// fakeCodexEnv names the folder that configures a fake Codex process (the
// test binary run through a small shell script, see newFakeCodex):
//
//	version          what `codex --version` prints
//	app-server.jsonl traffic log replayed for `codex app-server`
//	mcp-server.jsonl traffic log replayed for `codex mcp-server`
//	args.jsonl       written: the arguments of every invocation, one JSON array a line
//	recv.jsonl       written: every message happy sent, one a line
//	mismatch         written: what differed from the recorded traffic
const fakeCodexEnv = "HAPPY_TEST_FAKE_CODEX_DIR"

// TestFakeCodexProcess is not a test: it is the body of the fake Codex
// process, entered only when fakeCodexEnv is set (by the script
// newFakeCodex writes).
func TestFakeCodexProcess(t *testing.T) {
	dir := os.Getenv(fakeCodexEnv)
	if dir == "" {
		t.Skip("runs only as the fake codex process of the happy codex tests")
	}
	os.Exit(fakeCodexMain(dir, flagArgsAfterDash()))
}

// flagArgsAfterDash returns the arguments after "--" on the command line.
func flagArgsAfterDash() []string {
	for i, a := range os.Args {
		if a == "--" {
			return os.Args[i+1:]
		}
	}
	return nil
}

// fakeCodexMain replays the traffic log of the subcommand: it writes the
// log's Codex-to-client messages in order and, at each client-to-Codex
// message of the log, reads happy's next message and checks that it is the
// same method (or, for an answer to Codex's request, the same result) and
// has the "jsonrpc" member exactly when the log has it. A difference is
// written to the mismatch file and ends the process with code 3; an exit
// record ends it with the recorded code. After the last record it records
// what happy still sends, until happy's first answer to a request or the
// end of stdin.
func fakeCodexMain(dir string, args []string) int {
	if b, err := json.Marshal(args); err == nil {
		appendFile(filepath.Join(dir, "args.jsonl"), append(b, '\n'))
	}
	if len(args) == 1 && args[0] == "--version" {
		v, _ := os.ReadFile(filepath.Join(dir, "version"))
		os.Stdout.Write(v)
		return 0
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "fake codex: no subcommand")
		return 2
	}
	// The Nth run of a subcommand replays <sub>.N.jsonl when there is one
	// (a restarted Codex), else <sub>.jsonl.
	name := args[0] + ".jsonl"
	runs := 0
	for _, l := range readLinesOf(filepath.Join(dir, "args.jsonl")) {
		var a []string
		if json.Unmarshal([]byte(l), &a) == nil && len(a) > 0 && a[0] == args[0] {
			runs++
		}
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("%s.%d.jsonl", args[0], runs))); runs > 1 && err == nil {
		name = fmt.Sprintf("%s.%d.jsonl", args[0], runs)
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake codex:", err)
		return 2
	}
	tr, err := jsonrpc.ReadTraffic(f)
	frames := tr.Frames
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake codex:", err)
		return 2
	}
	mismatch := func(format string, a ...any) int {
		_ = os.WriteFile(filepath.Join(dir, "mismatch"), fmt.Appendf(nil, format, a...), 0o644)
		return 3
	}
	in := bufio.NewReader(os.Stdin)
	for _, fr := range frames {
		switch fr.Dir {
		case trafficlog.A2C:
			os.Stdout.Write(append(append([]byte(nil), fr.Data...), '\n'))
		case trafficlog.C2A:
			var want map[string]json.RawMessage
			_ = json.Unmarshal(fr.Data, &want)
			_, answer := want["result"]
			line, err := in.ReadBytes('\n')
			if err != nil {
				return mismatch("stdin ended (%v), want %s", err, fr.Data)
			}
			appendFile(filepath.Join(dir, "recv.jsonl"), line)
			var got map[string]json.RawMessage
			if err := json.Unmarshal(line, &got); err != nil {
				return mismatch("not JSON: %s", line)
			}
			_, wantVer := want["jsonrpc"]
			_, gotVer := got["jsonrpc"]
			if wantVer != gotVer || string(want["method"]) != string(got["method"]) {
				return mismatch("want %s\ngot  %s", fr.Data, line)
			}
			if answer {
				var w, g any
				_ = json.Unmarshal(want["result"], &w)
				_ = json.Unmarshal(got["result"], &g)
				if !reflect.DeepEqual(w, g) {
					return mismatch("answer: want %s\ngot  %s", fr.Data, line)
				}
			}
		case trafficlog.Exit:
			// Exiting closes stdout; happy still reads what was written.
			st, _ := trafficlog.DecodeExit(fr.Data)
			if st.Code != nil {
				return *st.Code
			}
			return 0
		}
	}
	// The log is over: record what happy sends until its first answer to
	// a request, or until it closes stdin.
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		appendFile(filepath.Join(dir, "recv.jsonl"), line)
		var got map[string]json.RawMessage
		if json.Unmarshal(line, &got) == nil && got["result"] != nil {
			return 0
		}
	}
}

func appendFile(path string, b []byte) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	_, _ = f.Write(b)
	_ = f.Close()
}

// fakeCodex is a configured fake Codex executable.
type fakeCodex struct {
	dir  string // its configuration and records
	path string // the executable script
}

// newFakeCodex writes a fake Codex that prints version for --version and
// replays the traffic logs appServer / mcpServer (names under
// testdata/codex, "" for none) for the subcommands.
func newFakeCodex(t *testing.T, version, appServer, mcpServer string) *fakeCodex {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fc := &fakeCodex{dir: t.TempDir()}
	fc.path = filepath.Join(fc.dir, "codex")
	if err := os.WriteFile(filepath.Join(fc.dir, "version"), []byte(version), 0o644); err != nil {
		t.Fatal(err)
	}
	for sub, name := range map[string]string{"app-server": appServer, "mcp-server": mcpServer} {
		if name == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", "codex", name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fc.dir, sub+".jsonl"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf("#!/bin/sh\n%s=%q exec %q -test.run='^TestFakeCodexProcess$' -- \"$@\"\n", fakeCodexEnv, fc.dir, exe)
	if err := os.WriteFile(fc.path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return fc
}

// invocations are the argument lists the fake was run with.
func (fc *fakeCodex) invocations(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, l := range fc.lines(t, "args.jsonl") {
		var a []string
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func (fc *fakeCodex) lines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fc.dir, name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// sent returns the params of the first message happy sent with method.
func (fc *fakeCodex) sent(t *testing.T, method string) map[string]any {
	t.Helper()
	for _, l := range fc.lines(t, "recv.jsonl") {
		var m struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Method == method {
			return m.Params
		}
	}
	t.Fatalf("happy sent no %s; it sent:\n%s", method, strings.Join(fc.lines(t, "recv.jsonl"), "\n"))
	return nil
}

func (fc *fakeCodex) mismatch(t *testing.T) string {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(fc.dir, "mismatch"))
	return string(b)
}

// codexTestEnv is the environment of happy for a run against a fresh relay,
// logged into a new account there.
func codexTestEnv(t *testing.T, fc *fakeCodex) map[string]string {
	t.Helper()
	r := servertest.Start(t)
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		t.Fatal(err)
	}
	api, err := relay.NewAPI(relay.HTTPConfig{BaseURL: r.URL})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := relay.CreateAccount(context.Background(), api, secret)
	if err != nil {
		t.Fatal(err)
	}
	h := t.TempDir()
	if err := creds.Save(filepath.Join(h, crypto.CredentialsFileName)); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HAPPY_SERVER_URL": r.URL, "HAPPY_HOME_DIR": h, "PATH": agentFreePath()}
	if fc != nil {
		env["HAPPY_CODEX_PATH"] = fc.path
	}
	return env
}

// agentFreePath is this process's PATH without the folders that hold a real
// agent (claude, codex, gemini, opencode, openclaw): the agents a test
// gives are absolute paths, and one installed on the developer's machine
// is never found instead, while the shell's tools stay.
func agentFreePath() string {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		has := false
		for _, a := range app.KnownAgents {
			if st, err := os.Stat(filepath.Join(dir, a.Def)); err == nil && !st.IsDir() {
				has = true
			}
		}
		if !has {
			keep = append(keep, dir)
		}
	}
	return strings.Join(keep, string(filepath.ListSeparator))
}

func TestCodexCommandUsage(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown protocol", []string{"codex", "-p", "x", "--codex-protocol", "acp"}, `happy: --codex-protocol: codex: unknown protocol: "acp" (want app-server, mcp or auto)` + "\n"},
		{"unknown mode", []string{"codex", "-p", "x", "--permission-mode", "bypass"}, `happy: --permission-mode: codex: unknown permission mode: "bypass" (want default, read-only, safe-yolo or yolo)` + "\n"},
		{"unknown flag", []string{"codex", "-p", "x", "--model", "o3"}, "happy: unknown flag: --model (flags of codex itself go after --: happy codex -- --model …)\n"},
		{"bad rule", []string{"codex", "-p", "x", "--allow", "nocolon"}, ""},
		{"bad timeout", []string{"codex", "-p", "x", "--permission-timeout", "soon"}, `happy: invalid argument "soon" for "--permission-timeout" flag: time: invalid duration "soon"` + "\n"},
		{"negative timeout", []string{"codex", "-p", "x", "--permission-timeout", "-5s"}, "happy: --permission-timeout -5s: want a duration ≥ 0 (0 waits forever)\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// No relay and no codex: a usage error is found before either is needed.
			env := map[string]string{"HAPPY_SERVER_URL": "http://127.0.0.1:1", "HAPPY_CODEX_PATH": filepath.Join(t.TempDir(), "absent")}
			code, stdout, stderr := runHappy(t, env, tc.args...)
			if code != exitUsage || stdout != "" {
				t.Fatalf("happy %v = (%d, %q, %q), want exit %d", tc.args, code, stdout, stderr, exitUsage)
			}
			if tc.wantErr != "" && stderr != tc.wantErr {
				t.Fatalf("stderr %q, want %q", stderr, tc.wantErr)
			}
			if tc.wantErr == "" && !strings.HasPrefix(stderr, "happy: ") {
				t.Fatalf("stderr %q", stderr)
			}
		})
	}
}

// sessionLine checks that stderr starts with the line happy prints once
// the relay session exists, and returns the rest with the session id
// replaced by SID.
func sessionLine(t *testing.T, stderr string) string {
	t.Helper()
	first, rest, _ := strings.Cut(stderr, "\n")
	if !strings.HasPrefix(first, "happy: session ") || !strings.Contains(first, "follow it with: happy log ") {
		t.Fatalf("stderr does not start with the session line: %q", stderr)
	}
	sid, _, _ := strings.Cut(strings.TrimPrefix(first, "happy: session "), " ")
	return strings.ReplaceAll(rest, sid, "SID")
}

// waitingLine is what a -p run prints when the fake Codex's echo command
// waits for a person.
const waitingLine = "happy: bash echo hi > hi.txt waits for permission — answer with: happy approve SID call_fake_1  (or: happy deny SID call_fake_1)\n"

func TestCodexPrintOutcomes(t *testing.T) {
	cases := []struct {
		name       string
		version    string
		appServer  string
		mcpServer  string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string     // after the session line
		wantRuns   [][]string // invocations of codex
		wantSent   string     // method whose params are checked
		wantParams map[string]any
		wantLog    string // a line of happy log (the permission decision)
	}{
		{
			name: "auto picks app-server, rule allows", version: "codex-cli 0.171.0\n", appServer: "codex-app",
			args:       []string{"-p", "Run `echo hi > hi.txt` in the shell and tell me what happened", "--allow", "bash:*", "--permission-mode", "read-only", "--", "-c", "x=1"},
			wantCode:   exitOK,
			wantStdout: "Done: the command printed hi.\n",
			wantRuns:   [][]string{{"--version"}, {"app-server", "-c", "x=1"}},
			wantSent:   "thread/start", wantParams: map[string]any{"approvalPolicy": "on-request", "sandbox": "read-only"},
			wantLog: "once, allowed by rule bash:*",
		},
		{
			// The rule is written as a person types the command: Codex's
			// /bin/bash -lc wrapper is not part of what it matches.
			name: "app-server, a rule on the typed command allows at once", version: "not asked", appServer: "codex-app",
			args:       []string{"-p", "x", "--codex-protocol", "app-server", "--allow", "bash:echo hi*", "--permission-timeout", "3s"},
			wantCode:   exitOK,
			wantStdout: "Done: the command printed hi.\n",
			wantRuns:   [][]string{{"app-server"}},
		},
		{
			name: "mcp, a rule on the typed command allows at once", version: "not asked", mcpServer: "codex0150-mcp-server",
			args:       []string{"-p", "x", "--codex-protocol", "mcp", "--allow", "bash:echo hi*", "--permission-timeout", "3s"},
			wantCode:   exitOK,
			wantStdout: "Done: the command printed hi.\n",
			wantRuns:   [][]string{{"mcp-server"}},
		},
		{
			name: "pinned app-server, rule denies", version: "not asked", appServer: "codex-app-decline",
			args:       []string{"-p", "x", "--codex-protocol", "app-server", "--deny", "bash:*"},
			wantCode:   exitFailed,
			wantStdout: "Done: the command printed hi.\n",
			wantStderr: "happy: 1 permission request(s) were rejected\n",
			wantRuns:   [][]string{{"app-server"}},
			wantSent:   "thread/start", wantParams: map[string]any{"approvalPolicy": "on-request", "sandbox": "workspace-write"},
			wantLog: "reject, denied by rule bash:*",
		},
		{
			name: "nobody answers before the permission timeout", version: "codex-cli 0.171.0", appServer: "codex-app-decline",
			args:       []string{"-p", "x", "--permission-timeout", "300ms"},
			wantCode:   exitFailed,
			wantStdout: "Done: the command printed hi.\n",
			wantStderr: waitingLine + "happy: 1 permission request(s) were rejected\n",
			wantRuns:   [][]string{{"--version"}, {"app-server"}},
		},
		{
			name: "auto picks mcp for an old codex", version: "codex-cli 0.59.9", mcpServer: "codex0150-mcp-server",
			args:       []string{"-p", "x", "--allow", "bash:*", "--permission-mode", "safe-yolo"},
			wantCode:   exitOK,
			wantStdout: "Done: the command printed hi.\n",
			wantRuns:   [][]string{{"--version"}, {"mcp-server"}},
			wantSent:   "tools/call",
			wantParams: map[string]any{"name": "codex"},
			wantLog:    "once, allowed by rule bash:*",
		},
		{
			name: "pinned mcp on a new codex", version: "codex-cli 0.171.0", mcpServer: "codex0150-mcp-server",
			args:       []string{"-p", "x", "--codex-protocol", "mcp", "--allow", "bash:*"},
			wantCode:   exitOK,
			wantStdout: "Done: the command printed hi.\n",
			wantRuns:   [][]string{{"mcp-server"}},
			wantLog:    "once, allowed by rule bash:*",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc := newFakeCodex(t, tc.version, tc.appServer, tc.mcpServer)
			env := codexTestEnv(t, fc)
			code, stdout, stderr := runHappy(t, env, append([]string{"codex"}, tc.args...)...)
			if m := fc.mismatch(t); m != "" {
				t.Fatalf("happy's traffic differs from the capture:\n%s", m)
			}
			if code != tc.wantCode || stdout != tc.wantStdout {
				t.Fatalf("exit %d stdout %q, want %d %q\nstderr: %s", code, stdout, tc.wantCode, tc.wantStdout, stderr)
			}
			if rest := sessionLine(t, stderr); rest != tc.wantStderr {
				t.Fatalf("stderr after the session line %q, want %q", rest, tc.wantStderr)
			}
			if got := fc.invocations(t); !reflect.DeepEqual(got, tc.wantRuns) {
				t.Fatalf("codex invocations %q, want %q", got, tc.wantRuns)
			}
			if tc.wantSent != "" {
				p := fc.sent(t, tc.wantSent)
				for k, v := range tc.wantParams {
					if !reflect.DeepEqual(p[k], v) {
						t.Errorf("%s %s = %v, want %v", tc.wantSent, k, p[k], v)
					}
				}
			}
			// The transcript records the decision, and nothing was dropped.
			first, _, _ := strings.Cut(stderr, "\n")
			_, rest, _ := strings.Cut(first, "follow it with: happy log ")
			sid, _, _ := strings.Cut(rest, " ")
			code, log, logErr := runHappy(t, env, "log", sid)
			if code != exitOK {
				t.Fatalf("happy log %q: exit %d: %s", sid, code, logErr)
			}
			if tc.wantLog != "" && !strings.Contains(log, tc.wantLog) {
				t.Errorf("happy log lacks %q:\n%s", tc.wantLog, log)
			}
			if strings.Contains(log, "dropped") {
				t.Errorf("happy log reports dropped input:\n%s", log)
			}
		})
	}
}

// The permission mode reaches the mcp-server's tools/call as Codex's own
// option names.
func TestCodexPrintMCPMode(t *testing.T) {
	fc := newFakeCodex(t, "", "", "codex0150-mcp-server")
	code, _, stderr := runHappy(t, codexTestEnv(t, fc), "codex", "-p", "x", "--codex-protocol", "mcp", "--allow", "bash:*", "--permission-mode", "yolo")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	args, _ := fc.sent(t, "tools/call")["arguments"].(map[string]any)
	if args["approval-policy"] != "never" || args["sandbox"] != "danger-full-access" || args["prompt"] != "x" {
		t.Fatalf("tools/call arguments %v", args)
	}
}

func TestCodexPrintRecord(t *testing.T) {
	fc := newFakeCodex(t, "", "codex-app", "")
	rec := filepath.Join(t.TempDir(), "traffic.jsonl")
	code, _, stderr := runHappy(t, codexTestEnv(t, fc), "codex", "-p", "x", "--codex-protocol", "app-server", "--allow", "bash:*", "--record", rec)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := jsonrpc.ReadTraffic(f)
	frames := tr.Frames
	if err != nil || len(tr.Bad) != 0 {
		t.Fatalf("read the record: %v, %d bad lines", err, len(tr.Bad))
	}
	// Everything the fake wrote and happy answered is in the log, in order.
	var methods []string
	for _, fr := range frames {
		var m struct {
			Method string `json:"method"`
		}
		if fr.Dir == trafficlog.C2A && json.Unmarshal(fr.Data, &m) == nil && m.Method != "" {
			methods = append(methods, m.Method)
		}
	}
	if want := []string{"initialize", "initialized", "thread/start", "turn/start"}; !reflect.DeepEqual(methods, want) {
		t.Fatalf("recorded requests %q, want %q", methods, want)
	}
	if last := frames[len(frames)-1]; last.Dir != trafficlog.Exit {
		t.Fatalf("record ends with %s, want the exit", last.Dir)
	}
}

func TestCodexPrintFailures(t *testing.T) {
	t.Run("version unreadable", func(t *testing.T) {
		fc := newFakeCodex(t, "codex (development build)\n", "codex-app", "")
		code, stdout, stderr := runHappy(t, codexTestEnv(t, fc), "codex", "-p", "x")
		want := "happy: choose the codex protocol (use --codex-protocol app-server or mcp): codex: cannot tell the installed version: \"codex (development build)\"\n"
		if code != exitFailed || stdout != "" || stderr != want {
			t.Fatalf("= (%d, %q, %q), want (1, \"\", %q)", code, stdout, stderr, want)
		}
	})
	t.Run("codex missing", func(t *testing.T) {
		env := codexTestEnv(t, nil)
		missing := filepath.Join(t.TempDir(), "codex")
		code, stdout, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--codex-path", missing)
		want := "happy: Codex not found: --codex-path \"" + missing + "\" does not exist; point it at the codex executable\n"
		if code != exitFailed || stdout != "" || stderr != want {
			t.Fatalf("= (%d, %q, %q)", code, stdout, stderr)
		}
	})
	t.Run("codex exits mid-turn", func(t *testing.T) {
		// The capture ends right after the approval request: Codex is gone
		// before anyone could answer.
		b, err := os.ReadFile(filepath.Join("testdata", "codex", "codex-app.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		var cut []string
		for _, l := range strings.Split(string(b), "\n") {
			cut = append(cut, l)
			if strings.Contains(l, `"item/commandExecution/requestApproval"`) {
				break
			}
		}
		cut = append(cut, `{"t":1,"dir":"exit","msg":{"code":1,"sig":null}}`)
		fc := newFakeCodex(t, "", "", "")
		if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), []byte(strings.Join(cut, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runHappy(t, codexTestEnv(t, fc), "codex", "-p", "x", "--codex-protocol", "app-server")
		if code != exitFailed || stdout != "" {
			t.Fatalf("= (%d, %q, %q), want exit 1", code, stdout, stderr)
		}
		if rest := sessionLine(t, stderr); rest != waitingLine+"happy: codex exited\n" {
			t.Fatalf("stderr after the session line %q", rest)
		}
	})
	t.Run("not logged in to the configured relay", func(t *testing.T) {
		fc := newFakeCodex(t, "", "codex-app", "")
		env := map[string]string{"HAPPY_SERVER_URL": "http://127.0.0.1:1", "HAPPY_CODEX_PATH": fc.path}
		code, stdout, stderr := runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server")
		if code != exitRelay || stdout != "" || stderr != "happy: "+app.ErrLoggedOut.Error()+"\n" {
			t.Fatalf("= (%d, %q, %q), want exit 3", code, stdout, stderr)
		}
		if runs := fc.invocations(t); len(runs) != 0 {
			t.Fatalf("codex was started without a relay: %q", runs)
		}
	})
}

// SIGINT while a permission waits: the turn is aborted (Codex gets cancel)
// and happy exits 130. The SIGINT is sent once happy has read Codex's
// request, maybe before the runner saw the blocked tool.
func TestCodexPrintInterrupted(t *testing.T) {
	// Keep SIGINT from ending the test binary if it arrives outside the
	// command's own handler.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)

	fc := newFakeCodex(t, "", "codex-app", "")
	// Codex's side stops at its approval request: whatever happy sends from
	// then on is recorded, in any order.
	full, err := os.ReadFile(filepath.Join(fc.dir, "app-server.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(full), "/requestApproval")
	if !ok {
		t.Fatal("the capture has no approval request")
	}
	end := strings.IndexByte(string(full[len(head):]), '\n')
	if err := os.WriteFile(filepath.Join(fc.dir, "app-server.jsonl"), full[:len(head)+end+1], 0o644); err != nil {
		t.Fatal(err)
	}
	env := codexTestEnv(t, fc)
	done := make(chan int, 1)
	var stdout, stderr string
	record := filepath.Join(t.TempDir(), "traffic.jsonl")
	go func() {
		var code int
		code, stdout, stderr = runHappy(t, env, "codex", "-p", "x", "--codex-protocol", "app-server", "--record", record)
		done <- code
	}()
	// Interrupt once happy has read the request (it is in the traffic log).
	waitfor.Until(t, "happy to read the approval request", func() bool {
		b, _ := os.ReadFile(record)
		return strings.Contains(string(b), "/requestApproval")
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitInterrupted || stdout != "" {
			t.Fatalf("= (%d, %q, %q), want exit 130", code, stdout, stderr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("happy codex did not end after SIGINT")
	}
	// Codex was told to cancel the pending approval (an abort is answered
	// cancel): by the runner when the tool was blocked already, at once when
	// the request came after the interrupt.
	for _, l := range fc.lines(t, "recv.jsonl") {
		if strings.Contains(l, `"result"`) {
			if !strings.Contains(l, `"decision":"cancel"`) {
				t.Fatalf("answer to the approval %s, want cancel", l)
			}
			return
		}
	}
	t.Fatalf("happy never answered the approval; it sent:\n%s", strings.Join(fc.lines(t, "recv.jsonl"), "\n"))
}
