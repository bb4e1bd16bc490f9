//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// subagentScript answers the main conversation with a call of Claude's
// subagent tool (Task, or Agent in later versions: whichever the request
// offers) per prompt in subPrompts, all in one response, and each
// subagent's conversation (its first user message is its prompt) with one
// shell command that writes a file ("echo sub<n> > sub<n>.txt", which
// Claude asks permission for) and then "sub <n> done".
func subagentScript(subPrompts []string, final string) fakemodel.Script {
	return fakemodel.Script{Decide: func(r fakemodel.Request) fakemodel.Reply {
		if !r.HasTools {
			return fakemodel.Reply{Text: "Fake title"}
		}
		var body struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(r.Body, &body)
		first := ""
		if len(body.Messages) > 0 {
			first = string(body.Messages[0].Content)
		}
		for i, p := range subPrompts {
			if strings.Contains(first, p) {
				n := string(rune('1' + i))
				if r.ToolDone {
					return fakemodel.Reply{Text: "sub " + n + " done"}
				}
				return fakemodel.Reply{ToolName: "Bash", ToolInput: map[string]any{"command": "echo sub" + n + " > sub" + n + ".txt", "description": "Write sub" + n + ".txt"}}
			}
		}
		if r.ToolDone {
			return fakemodel.Reply{Text: final}
		}
		tool := "Task"
		for _, t := range body.Tools {
			if t.Name == "Agent" {
				tool = "Agent"
			}
		}
		var calls []fakemodel.ToolCall
		for _, p := range subPrompts {
			calls = append(calls, fakemodel.ToolCall{Name: tool, Input: map[string]any{
				"description": "Run a command", "prompt": p, "subagent_type": "general-purpose"}})
		}
		return fakemodel.Reply{Calls: calls}
	}}
}

// subagentRun starts `happy claude -p` against the real Claude Code with
// the subagent script.
func subagentRun(t *testing.T, subPrompts []string, final string, flags ...string) *claudeRun {
	t.Helper()
	r := startClaudeScript(t, subagentScript(subPrompts, final), "Use subagents to run the commands", flags...)
	model := r.model
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var seen []string
		for _, q := range model.Requests() {
			seen = append(seen, fmt.Sprintf("tools=%v done=%v last=%.80q", q.HasTools, q.ToolDone, q.LastText))
		}
		_, logged, _ := happyRun(t, r.envB, r.work, "log", r.sid)
		t.Logf("stdout: %s\nstderr: %s\nmodel requests:\n%s\nhappy log:\n%s", r.proc.out.String(), r.proc.errb.String(), strings.Join(seen, "\n"), logged)
	})
	return r
}

// subagentLog is what home B reads of the session: its readable log.
func (r *claudeRun) subagentLog(t *testing.T) string {
	t.Helper()
	code, out, errOut := happyRun(t, r.envB, r.work, "sessions", "--json")
	var list []struct{ ID string }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 {
		t.Fatalf("happy sessions: exit %d: %s %s", code, out, errOut)
	}
	r.sid = list[0].ID
	code, out, errOut = happyRun(t, r.envB, r.work, "log", r.sid)
	if code != 0 {
		t.Fatalf("happy log: exit %d: %s", code, errOut)
	}
	return out
}

// One Task subagent whose shell command asks for permission, approved from
// another home: the session's turn is not taken for over when the
// subagent's turn ends; the subagent's tool runs and is recorded approved;
// -p prints the main answer and exits 0; nothing is dropped.
func TestE2EClaudeSubagentApprovedElsewhere(t *testing.T) {
	r := subagentRun(t, []string{"SUBTASK one: run echo sub1"}, "Both subagents reported.")
	var call string
	waitFor(t, 90*time.Second, "the subagent's command blocked", func() bool {
		code, out, _ := happyRun(t, r.envB, r.work, "sessions", "--json")
		var list []struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
			return false
		}
		r.sid = list[0].ID
		code, out, _ = happyRun(t, r.envB, r.work, "log", r.sid, "--json")
		if code != 0 {
			return false
		}
		var doc any
		if json.Unmarshal([]byte(out), &doc) != nil {
			return false
		}
		call = blockedAnywhere(doc)
		return call != ""
	})
	if code, _, errOut := happyRun(t, r.envB, r.work, "approve", r.sid, call); code != 0 {
		t.Fatalf("happy approve %s: exit %d: %s", call, code, errOut)
	}
	if code := r.proc.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("happy claude -p exit %d\nstdout: %s\nstderr: %s", code, r.proc.out.String(), r.proc.errb.String())
	}
	if got := r.proc.out.String(); got != "Both subagents reported.\n" {
		t.Fatalf("stdout %q\nstderr: %s", got, r.proc.errb.String())
	}
	log := r.subagentLog(t)
	if b, err := os.ReadFile(filepath.Join(r.work, "sub1.txt")); err != nil || string(b) != "sub1\n" {
		t.Errorf("sub1.txt: %q, %v", b, err)
	}
	for _, want := range []string{"bash echo sub1 > sub1.txt — completed", "permission bash echo sub1 > sub1.txt: once", "Both subagents reported."} {
		if !strings.Contains(log, want) {
			t.Errorf("happy log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "dropped") || strings.Contains(log, "cancelled") || strings.Contains(log, " running") {
		t.Errorf("happy log:\n%s", log)
	}
}

// blockedAnywhere is the callID of a blocked tool part anywhere in a
// transcript document (children included), or "".
func blockedAnywhere(v any) string {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "tool" {
			if st, ok := x["state"].(map[string]any); ok && st["status"] == "blocked" {
				if id, ok := x["callID"].(string); ok {
					return id
				}
			}
		}
		for _, e := range x {
			if id := blockedAnywhere(e); id != "" {
				return id
			}
		}
	case []any:
		for _, e := range x {
			if id := blockedAnywhere(e); id != "" {
				return id
			}
		}
	}
	return ""
}

// blockedCalls lists the callIDs of every blocked tool part in a transcript
// document (children included).
func blockedCalls(v any, out []string) []string {
	switch x := v.(type) {
	case map[string]any:
		if x["type"] == "tool" {
			if st, ok := x["state"].(map[string]any); ok && st["status"] == "blocked" {
				if id, ok := x["callID"].(string); ok {
					out = append(out, id)
				}
			}
		}
		for _, e := range x {
			out = blockedCalls(e, out)
		}
	case []any:
		for _, e := range x {
			out = blockedCalls(e, out)
		}
	}
	return out
}

// approveAllUntilExit approves from home B (envB) every blocked call of
// the session *sid (found first when empty), anywhere in it (subagents
// included), as they appear, until proc exits; it returns the calls
// approved.
func approveAllUntilExit(t *testing.T, proc *bg, envB []string, work string, sid *string, d time.Duration) map[string]bool {
	t.Helper()
	approved := map[string]bool{}
	waitFor(t, d, "every subagent command approved and the run over", func() bool {
		select {
		case <-proc.done:
			return true
		default:
		}
		if *sid == "" {
			code, out, _ := happyRun(t, envB, work, "sessions", "--json")
			var list []struct{ ID string }
			if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) == 0 {
				return false
			}
			*sid = list[0].ID
		}
		code, out, _ := happyRun(t, envB, work, "log", *sid, "--json")
		var doc any
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
			return false
		}
		for _, call := range blockedCalls(doc, nil) {
			if approved[call] {
				continue
			}
			if code, _, errOut := happyRun(t, envB, work, "approve", *sid, call); code != 0 {
				t.Logf("happy approve %s: exit %d: %s", call, code, errOut)
				continue
			}
			approved[call] = true
		}
		return false
	})
	return approved
}

// Two Task subagents in parallel, each with a shell command that asks for
// permission, both approved from another home as they appear: neither
// permission is lost, both commands run, the session ends with the main
// answer (exit 0), nothing is cancelled or dropped.
func TestE2EClaudeTwoSubagentsApprovedElsewhere(t *testing.T) {
	r := subagentRun(t, []string{"SUBTASK one: run echo sub1", "SUBTASK two: run echo sub2"}, "Both subagents reported.")
	approved := approveAllUntilExit(t, r.proc, r.envB, r.work, &r.sid, 150*time.Second)
	if code := r.proc.wait(t, 10*time.Second); code != 0 || len(approved) != 2 {
		t.Fatalf("happy claude -p exit %d after approving %v\nstdout: %s\nstderr: %s", code, approved, r.proc.out.String(), r.proc.errb.String())
	}
	if got := r.proc.out.String(); got != "Both subagents reported.\n" {
		t.Fatalf("stdout %q\nstderr: %s", got, r.proc.errb.String())
	}
	log := r.subagentLog(t)
	for _, n := range []string{"1", "2"} {
		if b, err := os.ReadFile(filepath.Join(r.work, "sub"+n+".txt")); err != nil || string(b) != "sub"+n+"\n" {
			t.Errorf("sub%s.txt: %q, %v", n, b, err)
		}
		for _, want := range []string{"bash echo sub" + n + " > sub" + n + ".txt — completed", "permission bash echo sub" + n + " > sub" + n + ".txt: once"} {
			if !strings.Contains(log, want) {
				t.Errorf("happy log lacks %q:\n%s", want, log)
			}
		}
	}
	if strings.Contains(log, "dropped") || strings.Contains(log, "cancelled") || strings.Contains(log, " running") {
		t.Errorf("happy log:\n%s", log)
	}
}
