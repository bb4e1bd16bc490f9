package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/internal/golden"
	"github.com/happy-dev/happy/mapper"
)

// A small stream-json run: a tool call that needed permission (SDK traffic
// log), its result and the answer, plus one line of garbage.
const replayTraffic = `{"t":1000,"dir":"c2a","msg":{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Run echo hi > hi.txt"}]},"parent_tool_use_id":null,"session_id":""}}
{"t":1001,"dir":"a2c","msg":{"type":"system","subtype":"init","cwd":"/w","session_id":"S1","model":"claude-test","tools":["Bash"]}}
{"t":1002,"dir":"a2c","msg":{"type":"assistant","message":{"id":"msg_1","role":"assistant","model":"claude-test","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi > hi.txt","description":"Print hi"}}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"S1"}}
{"t":1003,"dir":"a2c","msg":{"type":"control_request","request_id":"perm-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"echo hi > hi.txt","description":"Print hi"},"tool_use_id":"toolu_1"}}}
{"t":1004,"dir":"c2a","msg":{"type":"control_response","response":{"subtype":"success","request_id":"perm-1","response":{"behavior":"allow","updatedInput":{"command":"echo hi > hi.txt","description":"Print hi"}}}}}
{"t":1005,"dir":"a2c","msg":{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"(Bash completed with no output)","is_error":false}]},"parent_tool_use_id":null,"session_id":"S1"}}
{"t":1006,"dir":"a2c","msg":{"type":"assistant","message":{"id":"msg_2","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Wrote hi.txt."}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"S1"}}
{"t":1007,"dir":"a2c","msg":{"type":"result","subtype":"success","is_error":false,"stop_reason":"end_turn","session_id":"S1","total_cost_usd":0.25}}
this line is not JSON
{"t":1009,"dir":"exit","msg":{"code":0,"sig":null}}
`

func writeReplayFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReplayText(t *testing.T) {
	p := writeReplayFile(t, "run.jsonl", replayTraffic)
	code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "claude", p)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"replay of " + p + " (traffic-log, 10 lines)",
		"> Run echo hi > hi.txt",
		`● bash echo hi > hi.txt — completed  [toolu_1]`,
		"permission bash echo hi > hi.txt: once",
		"Wrote hi.txt.",
		"warning: 1 input(s) were dropped; this transcript is incomplete:",
		"claude-traffic line 9: unparseable_json",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

func TestReplayJSON(t *testing.T) {
	p := writeReplayFile(t, "run.jsonl", replayTraffic)
	code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "claude", "--format", "json", "--session", "ses-test", p)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if want := "happy: warning: 1 input(s) of " + p + " were dropped; the transcript is incomplete (see \"dropped\")\n"; stderr != want {
		t.Fatalf("stderr %q, want %q", stderr, want)
	}
	tr, _, err := mapper.DecodeTranscript([]byte(stdout))
	if err != nil {
		t.Fatalf("output is not a transcript document: %v\n%s", err, stdout)
	}
	if tr.Session.Directory != "/w" || len(tr.Messages) != 3 || len(tr.Dropped) != 1 || tr.Dropped[0].Line != 9 {
		t.Fatalf("transcript: dir %q, %d messages, dropped %+v", tr.Session.Directory, len(tr.Messages), tr.Dropped)
	}
	asst := tr.Messages[1]
	tool, ok := asst.Parts[1].(*mapper.ToolPart)
	if !ok {
		t.Fatalf("second part of the first step is %T", asst.Parts[1])
	}
	if tool.CallID != "toolu_1" || tool.State.Status != mapper.StatusCompleted || tool.State.Output != "(Bash completed with no output)" ||
		tool.State.Block == nil || tool.State.Block.Decision != agent.DecisionOnce || tool.State.Block.ID != "perm-1" {
		t.Fatalf("tool part %+v", tool.State)
	}
	last := tr.Messages[2].Info.(*mapper.AssistantMessage)
	if last.Cost == nil || *last.Cost != 0.25 || last.Finish != agent.FinishStop {
		t.Fatalf("last step cost %v finish %q", last.Cost, last.Finish)
	}
	// The same file and session id give the same document, ids included.
	_, again, _ := runHappy(t, nil, "replay", "--format", "json", "--session", "ses-test", p)
	if again != stdout {
		t.Fatal("replaying the same file twice gave different documents")
	}
}

func TestReplayRefusals(t *testing.T) {
	p := writeReplayFile(t, "run.jsonl", replayTraffic)
	empty := writeReplayFile(t, "empty.jsonl", "\n\n")
	cases := []struct {
		name     string
		args     []string
		code     int
		inStderr string
	}{
		{"no file", []string{"replay"}, exitUsage, "replay takes one FILE, got 0 arguments"},
		{"two files", []string{"replay", p, p}, exitUsage, "replay takes one FILE, got 2 arguments"},
		{"other agent", []string{"replay", "--agent", "opencode", p}, exitUsage, `agent "opencode" is not supported`},
		{"bad format", []string{"replay", "--format", "yaml", p}, exitUsage, `format "yaml" is not text or json`},
		{"bad flag", []string{"replay", "--frobnicate", p}, exitUsage, "unknown flag: --frobnicate"},
		{"missing file", []string{"replay", filepath.Join(t.TempDir(), "nope.jsonl")}, exitFailed, "no such file or directory"},
		{"unknown form", []string{"replay", empty}, exitFailed, "cannot tell the form of the input"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runHappy(t, nil, c.args...)
			if code != c.code || !strings.Contains(stderr, c.inStderr) || stdout != "" {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d and %q", code, stdout, stderr, c.code, c.inStderr)
			}
		})
	}
}

// TestReplayOversizeLimit checks that --max-line turns a long line into a
// counted drop instead of reading it.
func TestReplayOversizeLimit(t *testing.T) {
	long := `{"t":1008,"dir":"note","msg":"` + strings.Repeat("x", 4096) + `"}` + "\n"
	p := writeReplayFile(t, "run.jsonl", replayTraffic+long)
	code, stdout, _ := runHappy(t, nil, "replay", "--max-line", "1024", p)
	if code != exitOK || !strings.Contains(stdout, "warning: 2 input(s) were dropped") || !strings.Contains(stdout, "line 11: oversize") {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
}

// A captured codex app-server run (approval accepted) replays to the same
// transcript as the adapter's golden file.
func TestReplayCodexTrafficLog(t *testing.T) {
	capture := filepath.Join("..", "..", "adapters", "codex", "testdata", "captures", "codex-app", "rpc-traffic.jsonl")
	code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "codex", capture)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"(codex traffic log)",
		"> Run `echo hi > hi.txt` in the shell and tell me what happened",
		"● bash echo hi > hi.txt — completed  [call_fake_1]",
		"permission bash echo hi > hi.txt: once",
		"Done: the command printed hi.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("replay output lacks %q:\n%s", want, stdout)
		}
	}
	code, _, stderr = runHappy(t, nil, "replay", "--agent", "gemini", capture)
	if code != exitUsage || !strings.Contains(stderr, "not supported") {
		t.Fatalf("unknown agent: exit %d, %q", code, stderr)
	}
}

// A Codex rollout (the session file Codex writes itself) is detected from
// its first line and replays through the rollout reader: same prompt,
// answer and failed command as the traffic log of that run, without the
// permission record (rollouts carry no approvals); a blank first line does
// not hide the form.
func TestReplayCodexRollout(t *testing.T) {
	dir := filepath.Join("..", "..", "adapters", "codex", "testdata", "rollout", "codex-app-tool-error")
	paths, err := filepath.Glob(filepath.Join(dir, "rollout-*.jsonl"))
	if err != nil || len(paths) != 1 {
		t.Fatalf("rollout: %v %v", paths, err)
	}
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	p := writeReplayFile(t, "rollout.jsonl", "\n  \n"+string(data))
	code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "codex", p)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"replay of " + p + " (codex rollout)",
		"  in /home/dev/run/work",
		"> Run `ls /nonexistent` and tell me what happened.",
		`● bash ls /nonexistent — error  [call_rich_main_t1s0c0_1]`,
		"error: ls: cannot access '/nonexistent': No such file or directory",
		"The command failed: ls reported that /nonexistent does not exist (No such file or directory).",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("replay output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "warning") || strings.Contains(stdout, "permission") {
		t.Errorf("unexpected warning or permission:\n%s", stdout)
	}
	code, stdout, _ = runHappy(t, nil, "replay", "--agent", "codex", "--format", "json", paths[0])
	if code != exitOK {
		t.Fatalf("json: exit %d", code)
	}
	tr, _, err := mapper.DecodeTranscript([]byte(stdout))
	if err != nil {
		t.Fatalf("json output is not a transcript: %v", err)
	}
	if len(tr.Messages) != 3 || len(tr.Dropped) != 0 {
		t.Fatalf("transcript: %d messages, dropped %+v", len(tr.Messages), tr.Dropped)
	}
}

// A captured Gemini CLI ACP run replays through the ACP adapter.
func TestReplayACPTrafficLog(t *testing.T) {
	capture := filepath.Join("..", "..", "adapters", "acp", "testdata", "captures", "gemini-acp", "rpc-traffic.jsonl")
	code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "acp", capture)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"(ACP traffic log)",
		"> Run `echo hi > hi.txt` in the shell and tell me what happened",
		"● bash echo hi > hi.txt — completed  [run_shell_command__run_shell_command_1795964191428_0]",
		"permission bash echo hi > hi.txt: once",
		"Done: the command printed hi.",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("replay output lacks %q:\n%s", want, stdout)
		}
	}
}

// The readable replay of Claude session transcripts (testdata/replay,
// written in the shape Claude Code 2.1.x gives them): compactions, each its
// own, with the /compact wrapper rows and the summary shown as synthetic
// text rather than prompts; and a subagent whose Agent call is not in the
// file, kept in an untitled child session that is shown too.
func TestReplayTextGolden(t *testing.T) {
	for _, name := range []string{"compaction", "unlinked-subagent"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join("testdata", "replay", name+".jsonl")
			code, stdout, stderr := runHappy(t, nil, "replay", "--agent", "claude", "--session", "ses-replay", p)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, filepath.Join("testdata", "replay", name+".txt"), []byte(stdout))
			code, stdout, stderr = runHappy(t, nil, "replay", "--agent", "claude", "--format", "json", "--session", "ses-replay", p)
			if code != exitOK || stderr != "" {
				t.Fatalf("json: exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, filepath.Join("testdata", "replay", name+".json"), []byte(stdout))
		})
	}
}
