//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/internal/fakemodel"
)

// Codex's own sub-agents: with [features] multi_agent on, Codex offers the
// model the namespace tool multi_agent_v1 (spawn_agent, wait_agent,
// send_input, close_agent, resume_agent). A spawned agent is a thread of
// its own whose first user message is the task; Codex tells the parent
// thread when it completes (a <subagent_notification> user message) and
// wait_agent answers with each waited agent's status.

// codexMultiAgent turns the multi-agent tools on (a line of [features]).
const codexMultiAgent = "multi_agent = true\n"

// codexInput is what the script reads of a Responses request's input: the
// user messages' texts and the function_call_output strings, in order.
type codexInput struct {
	userTexts []string
	outputs   []string
}

func readCodexInput(body json.RawMessage) codexInput {
	var b struct {
		Input []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			Output  json.RawMessage `json:"output"`
		} `json:"input"`
	}
	_ = json.Unmarshal(body, &b)
	var in codexInput
	for _, it := range b.Input {
		switch {
		case it.Type == "function_call_output":
			var s string
			if json.Unmarshal(it.Output, &s) == nil {
				in.outputs = append(in.outputs, s)
			}
		case it.Role == "user":
			var parts []struct {
				Text string `json:"text"`
			}
			if json.Unmarshal(it.Content, &parts) == nil {
				for _, p := range parts {
					in.userTexts = append(in.userTexts, p.Text)
				}
			}
		}
	}
	return in
}

// spawned lists the agent ids spawn_agent answered, in order.
func (in codexInput) spawned() []string {
	var ids []string
	for _, o := range in.outputs {
		var v struct {
			AgentID string `json:"agent_id"`
		}
		if json.Unmarshal([]byte(o), &v) == nil && v.AgentID != "" {
			ids = append(ids, v.AgentID)
		}
	}
	return ids
}

// completed reports whether the conversation says agent id completed: in a
// wait_agent answer ({"status":{id:{"completed":…}}}) or a notification.
func (in codexInput) completed(id string) bool {
	for _, o := range in.outputs {
		var v struct {
			Status map[string]map[string]json.RawMessage `json:"status"`
		}
		if json.Unmarshal([]byte(o), &v) == nil {
			if _, ok := v.Status[id]["completed"]; ok {
				return true
			}
		}
	}
	for _, u := range in.userTexts {
		if strings.Contains(u, "<subagent_notification>") && strings.Contains(u, `"agent_path":"`+id+`"`) && strings.Contains(u, `"completed"`) {
			return true
		}
	}
	return false
}

// codexSubagentScript answers the main thread with one spawn_agent call
// per task in subTasks (all in one response), then wait_agent on those not
// known to be completed until all are, then final; and each sub-agent's
// thread (its user message holds its task) with an escalated shell command
// that writes a file ("echo sub<n> > sub<n>.txt", which Codex asks approval
// for) and then "sub <n> done".
func codexSubagentScript(subTasks []string, final string) fakemodel.Script {
	return fakemodel.Script{Decide: func(r fakemodel.Request) fakemodel.Reply {
		if !r.HasTools {
			return fakemodel.Reply{Text: "Fake title"}
		}
		in := readCodexInput(r.Body)
		for i, task := range subTasks {
			if slices.ContainsFunc(in.userTexts, func(u string) bool { return strings.Contains(u, task) }) {
				n := fmt.Sprint(i + 1)
				if r.ToolDone {
					return fakemodel.Reply{Text: "sub " + n + " done"}
				}
				return fakemodel.Reply{ToolName: "exec_command", ToolInput: codexEscalated("echo sub"+n+" > sub"+n+".txt", "Need to write sub"+n+".txt")}
			}
		}
		ids := in.spawned()
		if len(ids) == 0 {
			var calls []fakemodel.ToolCall
			for _, task := range subTasks {
				calls = append(calls, fakemodel.ToolCall{Name: "spawn_agent", Namespace: "multi_agent_v1", Input: map[string]any{"message": task}})
			}
			return fakemodel.Reply{Calls: calls}
		}
		var waiting []string
		for _, id := range ids {
			if !in.completed(id) {
				waiting = append(waiting, id)
			}
		}
		if len(waiting) == 0 {
			return fakemodel.Reply{Text: final}
		}
		return fakemodel.Reply{Calls: []fakemodel.ToolCall{{Name: "wait_agent", Namespace: "multi_agent_v1",
			Input: map[string]any{"targets": waiting, "timeout_ms": 60000}}}}
	}}
}

// codexSubagentRun starts `happy codex -p` (app-server) against the real
// Codex with its sub-agents on and the sub-agent script.
func codexSubagentRun(t *testing.T, subTasks []string, final string) *codexRun {
	t.Helper()
	r := newCodexRunWith(t, "CODEX", "app-server", codexSubagentScript(subTasks, final), codexMultiAgent)
	args := []string{"codex", "-p", "Use sub-agents to run the commands", "--permission-timeout", "120s", "--codex-protocol", "app-server"}
	r.proc = happyStart(t, r.envA, r.work, args...)
	model := r.model
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var seen []string
		for _, q := range model.Requests() {
			seen = append(seen, fmt.Sprintf("tools=%v done=%v last=%.120q", q.HasTools, q.ToolDone, q.LastText))
		}
		logged := ""
		if r.sid != "" {
			_, logged, _ = happyRun(t, r.envB, r.work, "log", r.sid)
		}
		t.Logf("stdout: %s\nstderr: %s\nmodel requests:\n%s\nhappy log:\n%s", r.proc.out.String(), r.proc.errb.String(), strings.Join(seen, "\n"), logged)
	})
	return r
}

// checkSubagents checks a finished sub-agent run: exit 0 with the main
// answer, each sub-agent's file written, its command recorded completed
// and approved once inside a child session of its own, and nothing
// dropped, cancelled or left running.
func (r *codexRun) checkSubagents(t *testing.T, approved map[string]bool, n int, final string) {
	t.Helper()
	if code := r.proc.wait(t, 10*time.Second); code != 0 || len(approved) != n {
		t.Fatalf("happy codex -p exit %d after approving %v\nstdout: %s\nstderr: %s", code, approved, r.proc.out.String(), r.proc.errb.String())
	}
	if got := r.proc.out.String(); got != final+"\n" {
		t.Fatalf("stdout %q\nstderr: %s", got, r.proc.errb.String())
	}
	code, out, errOut := happyRun(t, r.envB, r.work, "log", r.sid, "--json")
	if code != 0 {
		t.Fatalf("happy log --json: exit %d: %s", code, errOut)
	}
	var doc struct {
		Dropped  []json.RawMessage `json:"dropped"`
		Children []struct {
			Session struct {
				ParentID string `json:"parentID"`
			} `json:"session"`
			Messages []json.RawMessage `json:"messages"`
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Children) != n || len(doc.Dropped) != 0 {
		t.Errorf("%d child sessions (want %d), %d dropped:\n%s", len(doc.Children), n, len(doc.Dropped), out)
	}
	_, log, _ := happyRun(t, r.envB, r.work, "log", r.sid)
	for i := 1; i <= n; i++ {
		s := fmt.Sprint(i)
		if b, err := os.ReadFile(filepath.Join(r.work, "sub"+s+".txt")); err != nil || string(b) != "sub"+s+"\n" {
			t.Errorf("sub%s.txt: %q, %v", s, b, err)
		}
		for _, want := range []string{"echo sub" + s + " > sub" + s + ".txt — completed", "sub " + s + " done"} {
			if !strings.Contains(log, want) {
				t.Errorf("happy log lacks %q:\n%s", want, log)
			}
		}
	}
	if !strings.Contains(log, final) {
		t.Errorf("happy log lacks the main answer %q:\n%s", final, log)
	}
	if strings.Contains(log, "dropped") || strings.Contains(log, "cancelled") || strings.Contains(log, " running") || strings.Contains(log, "— error") {
		t.Errorf("happy log:\n%s", log)
	}
}

// One Codex sub-agent whose shell command asks for approval, approved from
// another home: the sub-agent's thread is a child session, its turn's end
// does not end the session's, its command runs and is recorded approved;
// -p prints the main answer and exits 0; nothing is dropped.
func TestE2ECodexSubagentApprovedElsewhere(t *testing.T) {
	const final = "The sub-agent reported."
	r := codexSubagentRun(t, []string{"SUBTASK one: run echo sub1"}, final)
	approved := approveAllUntilExit(t, r.proc, r.envB, r.work, &r.sid, 120*time.Second)
	r.checkSubagents(t, approved, 1, final)
}

// Two Codex sub-agents in parallel, each with a shell command that asks
// for approval, both approved from another home as they appear: neither
// approval is lost, both commands run, the session ends with the main
// answer (exit 0), nothing is cancelled or dropped.
func TestE2ECodexTwoSubagentsApprovedElsewhere(t *testing.T) {
	const final = "Both sub-agents reported."
	r := codexSubagentRun(t, []string{"SUBTASK one: run echo sub1", "SUBTASK two: run echo sub2"}, final)
	approved := approveAllUntilExit(t, r.proc, r.envB, r.work, &r.sid, 150*time.Second)
	r.checkSubagents(t, approved, 2, final)
}
