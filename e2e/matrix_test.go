//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// The real-agent matrix: every pinned agent through the same five
// scenarios, each cell (TestE2EMatrix/<agent>/<scenario>) with its own
// relay, account, two happy homes, working folder and fake model. Home A
// runs the agent; home B is another machine on the same account that answers
// permissions, sends prompts and reads the transcript back. A cell checks the
// exit code, the marker files the commands write (present exactly when the
// command was allowed), and the transcript home B reads (`happy log --json`):
// no dropped records, no part twice, every tool call under its canonical
// name, and equal to testdata/matrix/<agent>-<scenario>.json once
// normalised (-update rewrites it).
//
// What a cell expects is data: the scenario's defaults (matrixScenarios),
// adjusted per cell in matrixOverrides.

// answerMode is what home B does with a tool call blocked on permission.
type answerMode int

const (
	answerNone    answerMode = iota // nothing may block: a blocked call fails the cell (and is denied so the run ends)
	answerApprove                   // approve every blocked call
	answerDeny                      // deny every blocked call
)

// cellSpec is what one cell runs and expects.
type cellSpec struct {
	// turns lists, per prompt, the files the model's shell calls write (the
	// command is `echo hi > FILE`, all calls of a turn in one model answer).
	turns [][]string
	// allow are --allow rules given to happy.
	allow  []string
	answer answerMode
	// ran: the commands must have run (their files hold "hi\n"); otherwise
	// none of the files may exist.
	ran bool
	// exit is happy's expected exit code.
	exit int
	// stdout, when set, is happy's expected standard output (-p runs).
	stdout *string
	// stderr, when set, must be part of happy's standard error (-p runs).
	stderr string
	// toolStatus is the final state every tool part must have.
	toolStatus string
	// unsupported, when set, says why the agent cannot run the scenario:
	// the cell is reported n/a (skipped), never passed.
	unsupported string
}

// finalText is the fake model's answer once the tools of a turn ran (or were
// refused), for turn n (from 1).
func finalText(n int) string { return fmt.Sprintf("Turn %d finished.", n) }

func strp(s string) *string { return &s }

// matrixScenario is one column of the matrix.
type matrixScenario struct {
	name string
	spec cellSpec
}

// matrixScenarios are the columns, with what every agent should do.
var matrixScenarios = []matrixScenario{
	// A bash call a rule allows runs without asking.
	{"allowed", cellSpec{turns: [][]string{{"allowed.txt"}}, allow: []string{"bash:echo hi*"}, answer: answerNone,
		ran: true, exit: 0, stdout: strp(finalText(1) + "\n"), toolStatus: "completed"}},
	// Home B approves the call.
	{"approved", cellSpec{turns: [][]string{{"approved.txt"}}, answer: answerApprove,
		ran: true, exit: 0, stdout: strp(finalText(1) + "\n"), toolStatus: "completed"}},
	// Home B denies the call: it must not run, and -p exits 1.
	{"denied", cellSpec{turns: [][]string{{"denied.txt"}}, answer: answerDeny,
		ran: false, exit: 1, stderr: "1 permission request(s) were rejected", toolStatus: "error"}},
	// Two calls in one model answer, both approved from home B.
	{"two-tools", cellSpec{turns: [][]string{{"one.txt", "two.txt"}}, answer: answerApprove,
		ran: true, exit: 0, stdout: strp(finalText(1) + "\n"), toolStatus: "completed"}},
	// Two prompts sent from home B to a session started without -p, each
	// with a call home B approves; the session then ends on SIGTERM (130,
	// interrupted).
	{"two-turns", cellSpec{turns: [][]string{{"turn1.txt"}, {"turn2.txt"}}, answer: answerApprove,
		ran: true, exit: 130, toolStatus: "completed"}},
}

// matrixOverrides adjust a scenario's expectations for one cell, keyed
// "<agent>/<scenario>". Each entry says why.
var matrixOverrides = map[string]func(*cellSpec){
	// Claude's multi-turn session runs in a terminal (local mode, prompts
	// from home B hand it to remote mode); Ctrl-C ends Claude and happy
	// with it, which is a normal end (exit 0).
	"claude/two-turns": func(c *cellSpec) { c.exit = 0 },
	// OpenClaw's shell call is a copy, not echo (see openclawShell): the
	// rule allows that command.
	"openclaw/allowed": func(c *cellSpec) { c.allow = []string{"bash:cp .hi *"} },
}

// matrixAgent is one row of the matrix: how to run the agent under happy
// against the fake model.
type matrixAgent struct {
	name   string
	binEnv string // HAPPY_E2E_<binEnv>
	// shell is the model's call of the agent's shell tool for command.
	shell func(command, file string) fakemodel.ToolCall
	// setup prepares the agent's throwaway environment for a cell.
	setup func(t *testing.T, c *matrixCell) agentSetup
	// pty: multi-turn runs the agent's own terminal UI (Claude).
	pty bool
}

// agentSetup is what a row's setup returns.
type agentSetup struct {
	env   []string          // home A's environment; the cell appends HAPPY_HOME_DIR and HAPPY_SERVER_URL (the last value of a variable wins)
	sub   []string          // happy's subcommand and its own flags
	tail  []string          // arguments after happy's flags (-- agent args…)
	paths map[string]string // throwaway paths to normalise in the transcript (none inside another: they are replaced in any order)
}

func escalated(command, file string) fakemodel.ToolCall {
	return fakemodel.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": command,
		"sandbox_permissions": "require_escalated", "justification": "Need to write " + file}}
}

var matrixAgents = []matrixAgent{
	{name: "claude", binEnv: "CLAUDE", pty: true,
		shell: func(command, file string) fakemodel.ToolCall {
			return fakemodel.ToolCall{Name: "Bash", Input: map[string]any{"command": command, "description": "Write " + file}}
		},
		setup: func(t *testing.T, c *matrixCell) agentSetup {
			h := claudeHome(t, c.work, "sk-e2e-dummy-key-0123456789")
			return agentSetup{env: claudeEnv(h, "", "", c.model.URL, c.bin), sub: []string{"claude"},
				tail: []string{"--", "--model", "claude-sonnet-4-5"}, paths: map[string]string{h: "<HOME>"}}
		}},
	{name: "codex", binEnv: "CODEX", shell: escalated,
		setup: func(t *testing.T, c *matrixCell) agentSetup { return codexSetup(t, c, "app-server", "fake-model") }},
	{name: "codex-mcp", binEnv: "CODEX150", shell: escalated,
		setup: func(t *testing.T, c *matrixCell) agentSetup { return codexSetup(t, c, "mcp", "fake-model") }},
	{name: "gemini", binEnv: "GEMINI",
		shell: func(command, file string) fakemodel.ToolCall {
			return fakemodel.ToolCall{Name: "run_shell_command", Input: map[string]any{"command": command, "description": "Write " + file}}
		},
		setup: func(t *testing.T, c *matrixCell) agentSetup {
			h := geminiHome(t)
			return agentSetup{env: []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "HOME=" + h, "HAPPY_GEMINI_PATH=" + c.bin,
				"GEMINI_API_KEY=e2e-dummy-key", "GOOGLE_GEMINI_BASE_URL=" + c.model.URL}, sub: []string{"gemini"}, paths: map[string]string{h: "<HOME>"}}
		}},
	{name: "claude-code-acp", binEnv: "CLAUDE_ACP",
		shell: func(command, file string) fakemodel.ToolCall {
			return fakemodel.ToolCall{Name: "mcp__acp__Bash", Input: map[string]any{"command": command, "timeout": 60000, "description": "Write " + file}}
		},
		setup: func(t *testing.T, c *matrixCell) agentSetup {
			h := claudeHome(t, c.work, "sk-e2e-dummy-key-0123456789")
			env := claudeEnv(h, "", "", c.model.URL, "")
			return agentSetup{env: env, sub: []string{"acp"}, tail: []string{"--", c.bin}, paths: map[string]string{h: "<HOME>"}}
		}},
	{name: "codex-acp", binEnv: "CODEX_ACP", shell: escalated,
		setup: func(t *testing.T, c *matrixCell) agentSetup {
			// codex-acp embeds an older Codex that does not know the fake
			// model's slug (it says so in the transcript): it gets a known one.
			s := codexSetup(t, c, "", "gpt-5.4")
			s.env = append(s.env, "PATH="+bwrapDir(t)+":"+os.Getenv("PATH"))
			s.sub, s.tail = []string{"acp"}, []string{"--", c.bin}
			return s
		}},
	{name: "opencode", binEnv: "OPENCODE",
		shell: func(command, file string) fakemodel.ToolCall {
			return fakemodel.ToolCall{Name: "bash", Input: map[string]any{"command": command, "description": "Write " + file}}
		},
		setup: opencodeSetup},
	{name: "openclaw", binEnv: "OPENCLAW", shell: openclawShell, setup: openclawSetup},
}

// codexSetup writes CODEX_HOME/config.toml (the fake model as the only
// provider, with model slug model) for Codex speaking protocol, or for
// codex-acp when protocol is "".
func codexSetup(t *testing.T, c *matrixCell, protocol, model string) agentSetup {
	t.Helper()
	home := t.TempDir()
	codexHome := filepath.Join(home, "codex")
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(codexConfig(c.model.URL), `model = "fake-model"`, fmt.Sprintf("model = %q", model), 1)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// The cell's HAPPY_HOME_DIR and HAPPY_SERVER_URL come later and win.
	s := agentSetup{env: codexEnv(home, codexHome, "", "", c.bin), paths: map[string]string{home: "<HOME>"}}
	if protocol != "" {
		s.sub = []string{"codex", "--codex-protocol", protocol}
	}
	return s
}

// bwrapDir is a folder with a bwrap for codex-acp, which runs every
// command in it and ships none: the system's, else the one bundled with the
// pinned Codex.
func bwrapDir(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("bwrap"); err == nil {
		return filepath.Dir(p)
	}
	codexBin := agentBinary(t, "CODEX")
	found, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(codexBin)), "@openai", "codex-linux-*", "vendor", "*", "codex-resources", "bwrap"))
	if len(found) == 0 {
		t.Fatalf("codex-acp needs bwrap: none on PATH and none bundled with %s", codexBin)
	}
	return filepath.Dir(found[0])
}

// opencodeSetup gives OpenCode throwaway HOME and XDG folders and a global
// opencode.json: the anthropic provider at the fake model, bash asking for
// permission, no autoupdate and no sharing.
func opencodeSetup(t *testing.T, c *matrixCell) agentSetup {
	t.Helper()
	h := t.TempDir()
	cfgDir := filepath.Join(h, ".config", "opencode")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
		"model":      "anthropic/claude-sonnet-4-5",
		"provider":   map[string]any{"anthropic": map[string]any{"options": map[string]any{"baseURL": c.model.URL + "/v1", "apiKey": "sk-e2e-dummy"}}},
		"permission": map[string]any{"bash": "ask"},
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(cfgDir, "opencode.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "HOME=" + h, "HAPPY_OPENCODE_PATH=" + c.bin,
		"XDG_CONFIG_HOME=" + filepath.Join(h, ".config"), "XDG_DATA_HOME=" + filepath.Join(h, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(h, ".cache"), "XDG_STATE_HOME=" + filepath.Join(h, ".local", "state"),
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1"}
	return agentSetup{env: env, sub: []string{"opencode"}, paths: map[string]string{h: "<HOME>"}}
}

// matrixCell is one running cell.
type matrixCell struct {
	agent    *matrixAgent
	scenario string
	spec     cellSpec
	bin      string
	model    *fakemodel.Server
	relay    *relayProc
	work     string
	envA     []string
	envB     []string
	setup    agentSetup
	sid      string
	answered map[string]bool // call ids home B answered
	lastDoc  string          // the last transcript read, for failures
}

// matrixResult is one cell's outcome, for the table.
type matrixResult struct {
	status string // pass, FAIL, n/a, skip
	wall   time.Duration
}

// matrixDecide is the cell's fake model: the calls of the turn the request
// belongs to (turn 2 once its prompt is in the conversation), then that
// turn's final text; side requests get a title (or {} for JSON).
func matrixDecide(a *matrixAgent, spec cellSpec) func(fakemodel.Request) fakemodel.Reply {
	return func(q fakemodel.Request) fakemodel.Reply {
		turn := 1
		for n := len(spec.turns); n > 1; n-- {
			if strings.Contains(string(q.Body), turnPrompt(n)) {
				turn = n
				break
			}
		}
		switch {
		case !q.HasTools && q.JSON:
			return fakemodel.Reply{Text: "{}"}
		case !q.HasTools:
			return fakemodel.Reply{Text: "Fake title"}
		case q.ToolDone:
			return fakemodel.Reply{Text: finalText(turn)}
		}
		var r fakemodel.Reply
		for _, f := range spec.turns[turn-1] {
			r.Calls = append(r.Calls, a.shell("echo hi > "+f, f))
		}
		return r
	}
}

// turnPrompt is the prompt of turn n (from 1).
func turnPrompt(n int) string { return fmt.Sprintf("Turn %d: write the files", n) }

// matrixRun is what TestE2EMatrix leaves for printMatrix.
var matrixRun struct {
	sync.Mutex
	results map[string]matrixResult // by "<agent>/<scenario>"
	wall    time.Duration
}

func TestE2EMatrix(t *testing.T) {
	start := time.Now()
	matrixRun.Lock()
	matrixRun.results = map[string]matrixResult{}
	matrixRun.Unlock()
	t.Cleanup(func() {
		matrixRun.Lock()
		matrixRun.wall = time.Since(start)
		matrixRun.Unlock()
	})
	for i := range matrixAgents {
		a := &matrixAgents[i]
		t.Run(a.name, func(t *testing.T) {
			for _, sc := range matrixScenarios {
				spec := sc.spec
				spec.turns = slices.Clone(spec.turns)
				if o := matrixOverrides[a.name+"/"+sc.name]; o != nil {
					o(&spec)
				}
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					began := time.Now()
					t.Cleanup(func() {
						st := "pass"
						switch {
						case t.Failed():
							st = "FAIL"
						case t.Skipped() && spec.unsupported != "":
							st = "n/a"
						case t.Skipped():
							st = "skip"
						}
						matrixRun.Lock()
						matrixRun.results[a.name+"/"+sc.name] = matrixResult{status: st, wall: time.Since(began)}
						matrixRun.Unlock()
					})
					if spec.unsupported != "" {
						t.Skipf("n/a: %s", spec.unsupported)
					}
					runCell(t, a, sc.name, spec)
				})
			}
		})
	}
}

// printMatrix writes the agent × scenario table of the last TestE2EMatrix
// to standard output (nothing when it did not run): per cell pass, FAIL, n/a
// or skip and its seconds, then the count of passing cells.
func printMatrix() {
	matrixRun.Lock()
	defer matrixRun.Unlock()
	results, wall := matrixRun.results, matrixRun.wall
	if len(results) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nreal-agent matrix (%s wall):\n%-16s", wall.Round(time.Second), "agent")
	for _, sc := range matrixScenarios {
		fmt.Fprintf(&b, " %-12s", sc.name)
	}
	b.WriteString("\n")
	passed, total := 0, 0
	for _, a := range matrixAgents {
		fmt.Fprintf(&b, "%-16s", a.name)
		for _, sc := range matrixScenarios {
			r, ok := results[a.name+"/"+sc.name]
			cell := "-"
			if ok {
				total++
				if r.status == "pass" {
					passed++
				}
				cell = fmt.Sprintf("%s %3.0fs", r.status, r.wall.Seconds())
			}
			fmt.Fprintf(&b, " %-12s", cell)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "%d of %d cells pass\n", passed, total)
	fmt.Fprint(os.Stdout, b.String())
}

// runCell runs one cell and checks it.
func runCell(t *testing.T, a *matrixAgent, scenario string, spec cellSpec) {
	c := &matrixCell{agent: a, scenario: scenario, spec: spec, bin: agentBinary(t, a.binEnv), answered: map[string]bool{}}
	multi := len(spec.turns) > 1
	if multi && a.pty {
		runPTYCell(t, c)
		return
	}
	c.relay = startRelay(t)
	hs := homes(t, c.relay.URL, 2)
	c.work = t.TempDir()
	model, err := fakemodel.New(fakemodel.Script{Decide: matrixDecide(a, spec)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { model.Close() })
	c.model = model
	c.setup = a.setup(t, c)
	c.envA = append(slices.Clone(c.setup.env), "HAPPY_HOME_DIR="+hs[0], "HAPPY_SERVER_URL="+c.relay.URL)
	c.envB = []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "HOME=" + t.TempDir(), "HAPPY_HOME_DIR=" + hs[1], "HAPPY_SERVER_URL=" + c.relay.URL}
	record := filepath.Join(t.TempDir(), "traffic.jsonl")

	args := slices.Clone(c.setup.sub)
	if !multi {
		args = append(args, "-p", turnPrompt(1))
	}
	args = append(args, "--permission-timeout", "60s", "--record", record)
	for _, r := range spec.allow {
		args = append(args, "--allow", r)
	}
	args = append(args, c.setup.tail...)
	proc := happyStart(t, c.envA, c.work, args...)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(record)
			t.Logf("happy %s\nstdout: %s\nstderr: %s\ntraffic log (end):\n%s", strings.Join(args, " "), proc.out.String(), tail(proc.errb.String(), 4000), tail(string(b), 6000))
		}
	})
	exited := func() bool {
		select {
		case <-proc.done:
			return true
		default:
			return false
		}
	}
	c.waitSession(t, exited)
	if multi {
		for n := 1; n <= len(spec.turns); n++ {
			if code, out, errOut := happyRun(t, c.envB, c.work, "send", c.sid, turnPrompt(n)); code != 0 {
				t.Fatalf("happy send (turn %d): exit %d\n%s%s", n, code, out, errOut)
			}
			if !c.drive(t, exited, func(d matrixDoc) bool { return d.turnsDone() == n }) {
				t.Fatalf("happy exited %d during turn %d", proc.wait(t, time.Second), n)
			}
		}
		_ = syscall.Kill(proc.cmd.Process.Pid, syscall.SIGTERM)
	} else {
		c.drive(t, exited, func(matrixDoc) bool { return false }) // until happy exits
	}
	code := proc.wait(t, 60*time.Second)
	if code != spec.exit {
		t.Errorf("happy exit %d, want %d", code, spec.exit)
	}
	if spec.stdout != nil && !multi && proc.out.String() != *spec.stdout {
		t.Errorf("stdout %q, want %q", proc.out.String(), *spec.stdout)
	}
	if spec.stderr != "" && !multi && !strings.Contains(proc.errb.String(), spec.stderr) {
		t.Errorf("stderr lacks %q", spec.stderr)
	}
	c.check(t)
}

// runPTYCell runs the multi-turn scenario in Claude's own terminal UI:
// the prompts come from home B (remote mode), Ctrl-C ends it.
func runPTYCell(t *testing.T, c *matrixCell) {
	r := startSwitchRun(t, matrixDecide(c.agent, c.spec))
	c.work, c.envB = r.work, r.envB
	c.setup.paths = map[string]string{r.ch: "<HOME>"}
	exited := func() bool {
		select {
		case <-r.gone:
			return true
		default:
			return false
		}
	}
	c.waitSession(t, exited)
	for n := 1; n <= len(c.spec.turns); n++ {
		r.sid = c.sid
		r.send(turnPrompt(n))
		if !c.drive(t, exited, func(d matrixDoc) bool { return d.turnsDone() == n }) {
			t.Fatalf("happy exited during turn %d", n)
		}
	}
	r.finish()
	if code := r.cmd.ProcessState.ExitCode(); code != c.spec.exit {
		t.Errorf("happy exit %d, want %d", code, c.spec.exit)
	}
	c.check(t)
}

// matrixDoc is what the matrix reads of a transcript document.
type matrixDoc struct {
	Session struct {
		ID string `json:"id"`
	} `json:"session"`
	Messages []struct {
		Info struct {
			Role   string `json:"role"`
			Finish string `json:"finish"`
		} `json:"info"`
		Parts []struct {
			ID     string `json:"id"`
			Type   string `json:"type"`
			Text   string `json:"text"`
			Tool   string `json:"tool"`
			CallID string `json:"callID"`
			State  struct {
				Status string `json:"status"`
			} `json:"state"`
		} `json:"parts"`
	} `json:"messages"`
	Dropped []json.RawMessage `json:"dropped"`
}

// turnsDone counts the prompts answered: the user messages, when the last
// message is an assistant message that finished for a reason other than
// calling tools and no tool is still open; else that count minus one.
func (d matrixDoc) turnsDone() int {
	users := 0
	for _, m := range d.Messages {
		if m.Info.Role == "user" {
			users++
		}
		for _, p := range m.Parts {
			switch p.State.Status {
			case "pending", "running", "blocked":
				return users - 1
			}
		}
	}
	if n := len(d.Messages); n == 0 || d.Messages[n-1].Info.Role != "assistant" || d.Messages[n-1].Info.Finish == "" || d.Messages[n-1].Info.Finish == "tool-calls" {
		return users - 1
	}
	return users
}

// read reads the transcript from home B.
func (c *matrixCell) read(t *testing.T) (matrixDoc, bool) {
	t.Helper()
	code, out, _ := happyRun(t, c.envB, c.work, "log", c.sid, "--json")
	c.lastDoc = out
	var d matrixDoc
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil {
		return d, false
	}
	return d, true
}

// waitSession waits until home B sees the session and its root record.
func (c *matrixCell) waitSession(t *testing.T, exited func() bool) {
	t.Helper()
	// OpenClaw's gateway loads its plugins before happy opens the session.
	waitFor(t, 240*time.Second, "the session on the relay", func() bool {
		if c.sid == "" {
			code, out, _ := happyRun(t, c.envB, c.work, "sessions", "--json")
			var list []struct{ ID string }
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
				return exited()
			}
			c.sid = list[0].ID
		}
		d, ok := c.read(t)
		return ok && strings.HasPrefix(d.Session.ID, "ses_") || exited()
	})
	if c.sid == "" {
		t.Fatalf("happy exited before its session was on the relay")
	}
}

// drive answers blocked calls from home B (as the spec says) until done
// holds for the transcript (true) or happy exited (false, after a last look
// at the transcript), for at most three minutes.
func (c *matrixCell) drive(t *testing.T, exited func() bool, done func(matrixDoc) bool) bool {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		over := exited()
		d, ok := c.read(t)
		if ok {
			for _, m := range d.Messages {
				for _, p := range m.Parts {
					if p.Type == "tool" && p.State.Status == "blocked" && !c.answered[p.CallID] {
						c.answer(t, p.CallID)
					}
				}
			}
			if done(d) {
				return true
			}
		}
		if over {
			return false
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out driving the cell; last transcript read (end):\n%s", tail(c.lastDoc, 6000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// answer answers one blocked call from home B.
func (c *matrixCell) answer(t *testing.T, callID string) {
	t.Helper()
	c.answered[callID] = true
	verb := "approve"
	switch c.spec.answer {
	case answerNone:
		t.Errorf("call %s asked for permission although a rule allows it; denied so the run ends", callID)
		verb = "deny"
	case answerDeny:
		verb = "deny"
	}
	if code, _, errOut := happyRun(t, c.envB, c.work, verb, c.sid, callID); code != 0 {
		t.Errorf("happy %s %s: exit %d: %s", verb, callID, code, errOut)
	}
}

// rawTimeRe matches the Unix-millisecond time of an agent event inside a
// dropped record's raw JSON (a string, so its quotes are escaped).
var rawTimeRe = regexp.MustCompile(`\\"time\\":1[0-9]{12}`)

// varyingKeys are fields of an agent's own tool metadata that differ from
// run to run (process ids, wall-clock times, durations, a millisecond that
// may or may not have passed): pinVarying replaces their values.
var varyingKeys = map[string]bool{"process_id": true, "started_at_ms": true, "completed_at_ms": true,
	"secs": true, "nanos": true, "durationMs": true, "duration_ms": true}

// pinVarying replaces the value of every varyingKeys field in doc by
// "<varies>" (an absent field stays absent), and puts the tool parts of
// each message in the order of their call ids: agents that run the calls of
// one answer in parallel (Codex) announce them in either order.
func pinVarying(t *testing.T, doc []byte) []byte {
	t.Helper()
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("pinVarying: %v", err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if parts, ok := x["parts"].([]any); ok {
				sortToolParts(parts)
			}
			for k, e := range x {
				if varyingKeys[k] {
					x[k] = "<varies>"
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sortToolParts sorts the tool parts of parts by callID among the places
// tool parts hold; other parts stay where they are.
func sortToolParts(parts []any) {
	var at []int
	var tools []map[string]any
	for i, p := range parts {
		if m, ok := p.(map[string]any); ok && m["type"] == "tool" {
			at = append(at, i)
			tools = append(tools, m)
		}
	}
	slices.SortStableFunc(tools, func(a, b map[string]any) int {
		return strings.Compare(fmt.Sprint(a["callID"]), fmt.Sprint(b["callID"]))
	})
	for j, i := range at {
		parts[i] = tools[j]
	}
}

// tail is the last n bytes of s (about: cut on a line start when it can).
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return "…\n" + s
}

// check checks the marker files and the transcript home B reads back.
func (c *matrixCell) check(t *testing.T) {
	var files []string
	for _, turn := range c.spec.turns {
		files = append(files, turn...)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(c.work, f))
		switch {
		case c.spec.ran && (err != nil || string(b) != "hi\n"):
			t.Errorf("%s: %q, %v (the command should have run)", f, b, err)
		case !c.spec.ran && !os.IsNotExist(err):
			t.Errorf("%s exists (%v): the command ran although it was denied", f, err)
		}
	}
	code, out, errOut := happyRun(t, c.envB, c.work, "log", c.sid, "--json")
	if code != 0 {
		t.Fatalf("happy log from home B: exit %d: %s", code, errOut)
	}
	c.lastDoc = out
	var d matrixDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("happy log --json: %v", err)
	}
	for _, raw := range d.Dropped {
		var dr struct{ Source, Kind, Reason, Detail string }
		_ = json.Unmarshal(raw, &dr)
		t.Errorf("dropped record: %s %s %s: %s", dr.Source, dr.Kind, dr.Reason, dr.Detail)
	}
	parts, calls := map[string]bool{}, map[string]bool{}
	var tools []string
	for _, m := range d.Messages {
		for _, p := range m.Parts {
			if parts[p.ID] {
				t.Errorf("part %s appears twice", p.ID)
			}
			parts[p.ID] = true
			if p.Type != "tool" {
				continue
			}
			if calls[p.CallID] {
				t.Errorf("tool call %s appears twice", p.CallID)
			}
			calls[p.CallID] = true
			tools = append(tools, p.Tool)
			if p.Tool != "bash" {
				t.Errorf("tool call %s is named %q, want the canonical bash", p.CallID, p.Tool)
			}
			if p.State.Status != c.spec.toolStatus {
				t.Errorf("tool call %s ended %s, want %s", p.CallID, p.State.Status, c.spec.toolStatus)
			}
		}
	}
	if len(tools) != len(files) {
		t.Errorf("%d tool parts (%v), want %d", len(tools), tools, len(files))
	}
	doc := msRe.ReplaceAllString(out, "_<ms>_")
	doc = rawTimeRe.ReplaceAllString(doc, `\"time\":1`)
	doc = string(pinVarying(t, []byte(doc)))
	paths := map[string]string{c.work: "<WORK>"}
	for k, v := range c.setup.paths {
		paths[k] = v
	}
	golden(t, filepath.Join("matrix", c.agent.name+"-"+c.scenario+".json"), normalize(t, []byte(doc), paths))
}
