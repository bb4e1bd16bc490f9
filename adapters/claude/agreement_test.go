package claude

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
)

// content is what two recordings of the same run must agree on: texts,
// reasoning, tool calls with their inputs, statuses and outputs, todos.
// Ids, times, usage figures (stream-json reports the first usage of a step,
// the JSONL the last) and the subagent's own text (stream-json does not
// carry it) are left out.
type content struct {
	Texts     []string
	Reasoning []string
	Tools     []toolContent
	Children  [][]toolContent
	Todos     []agent.Todo
}

type toolContent struct {
	Tool, Input, Status, Output string
	blocked                     bool // went through a permission or question block
}

func contentOf(tr mapper.Transcript) content {
	c := content{Texts: []string{}, Reasoning: []string{}, Todos: tr.Todos}
	c.Tools = toolsOf(tr, func(p mapper.Part) {
		switch x := p.(type) {
		case *mapper.TextPart:
			c.Texts = append(c.Texts, x.Text)
		case *mapper.ReasoningPart:
			c.Reasoning = append(c.Reasoning, x.Text)
		}
	}, true)
	for _, ch := range tr.Children {
		c.Children = append(c.Children, toolsOf(ch, func(mapper.Part) {}, false))
	}
	return c
}

// toolsOf lists the tool parts of the assistant messages of tr, calling
// visit for every assistant part.
func toolsOf(tr mapper.Transcript, visit func(mapper.Part), assistantOnly bool) []toolContent {
	out := []toolContent{}
	for _, m := range tr.Messages {
		if assistantOnly && m.Info.MessageRole() != mapper.RoleAssistant {
			continue
		}
		for _, p := range m.Parts {
			visit(p)
			tp, ok := p.(*mapper.ToolPart)
			if !ok {
				continue
			}
			in, _ := json.Marshal(tp.State.Input)
			tc := toolContent{Tool: tp.Tool, Input: string(in), Status: string(tp.State.Status), blocked: tp.State.Block != nil}
			if tp.State.Status == mapper.StatusCompleted {
				tc.Output = tp.State.Output
			} else {
				tc.Output = tp.State.Error
			}
			out = append(out, tc)
		}
	}
	return out
}

// TestFormsAgree checks that the session JSONL and the stream-json (or SDK
// traffic log) of the same run map to the same content.
func TestFormsAgree(t *testing.T) {
	byCase := map[string]map[Form]string{}
	var order []string
	for _, c := range captures {
		if byCase[c.name] == nil {
			byCase[c.name] = map[Form]string{}
			order = append(order, c.name)
		}
		byCase[c.name][c.form] = filepath.Join("testdata", c.name, c.input)
	}
	pairs := 0
	for _, name := range order {
		forms := byCase[name]
		jsonl, ok := forms[FormSessionJSONL]
		if !ok {
			continue
		}
		other, otherForm := forms[FormStreamJSON], FormStreamJSON
		if other == "" {
			other, otherForm = forms[FormTrafficLog], FormTrafficLog
		}
		if other == "" {
			continue
		}
		pairs++
		t.Run(name, func(t *testing.T) {
			a, _ := replayEvents(t, jsonl)
			b, _ := replayEvents(t, other)
			ta, _ := transcriptOf(t, a)
			tb, _ := transcriptOf(t, b)
			ca, cb := contentOf(ta), contentOf(tb)
			// A tool rejected through a permission channel (only the traffic
			// log has one) carries the decision and the mapper's error text;
			// the agent's own text for it is compared only when neither
			// side went through a block.
			for i := range ca.Tools {
				if i < len(cb.Tools) && ca.Tools[i].Status == string(mapper.StatusError) && (ca.Tools[i].blocked || cb.Tools[i].blocked) {
					ca.Tools[i].Output, cb.Tools[i].Output = "", ""
				}
				ca.Tools[i].blocked = false
			}
			for i := range cb.Tools {
				cb.Tools[i].blocked = false
			}
			if len(ca.Tools)+len(ca.Texts) == 0 {
				t.Fatal("nothing decoded from the session JSONL")
			}
			if !reflect.DeepEqual(ca, cb) {
				t.Fatalf("session JSONL and %v disagree:\njsonl: %s\n%v: %s", otherForm, dump(ca), otherForm, dump(cb))
			}
			if otherForm == FormTrafficLog {
				// Prompts travel in both the JSONL and the c2a side.
				if pa, pb := prompts(ta), prompts(tb); !reflect.DeepEqual(pa, pb) {
					t.Fatalf("prompts differ: %q vs %q", pa, pb)
				}
			}
		})
	}
	if pairs != 11 {
		t.Fatalf("compared %d pairs, want 11", pairs)
	}
}

func prompts(tr mapper.Transcript) []string {
	var out []string
	for _, m := range tr.Messages {
		if m.Info.MessageRole() != mapper.RoleUser {
			continue
		}
		for _, p := range m.Parts {
			if tp, ok := p.(*mapper.TextPart); ok {
				out = append(out, tp.Text)
			}
		}
	}
	return out
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// TestIndexFacts checks what the capture index (shared agents-rich/INDEX.md
// and the agents README) says a correct canonical transcript must contain.
func TestIndexFacts(t *testing.T) {
	type tool struct{ tool, status, outputPrefix string }
	cases := []struct {
		name, input string
		texts       []string
		tools       []tool
		childTools  []tool
		todos       []agent.Todo
		reasoning   int
		userTurns   int
	}{
		{name: "claude-claude-task", input: "stdout.jsonl",
			texts:      []string{"I will delegate this to a subagent.", "The subagent found two files: alpha.txt and beta.txt."},
			tools:      []tool{{"task", "completed", "Subagent report: the directory contains alpha.txt and beta.txt.\nagentId: ae81f9e"}},
			childTools: []tool{{"bash", "completed", "alpha.txt\nbeta.txt"}}},
		{name: "claude-claude-task", input: "claude-project/a3ba2153-280d-414f-b455-2c0308493d25.jsonl", userTurns: 1,
			texts:      []string{"I will delegate this to a subagent.", "The subagent found two files: alpha.txt and beta.txt."},
			tools:      []tool{{"task", "completed", "Subagent report"}},
			childTools: []tool{{"bash", "completed", "alpha.txt\nbeta.txt"}}},
		{name: "interactive-r20-subagent", input: "session/5d8a3d59-15e7-4fe1-81c2-c31171c0953f.jsonl", userTurns: 1,
			texts:      []string{"I will run the command.", "Done: the command printed hi."},
			tools:      []tool{{"task", "completed", "Done: the command printed hi."}},
			childTools: []tool{{"bash", "completed", "hi"}}},
		{name: "claude-long-output", input: "stdout.jsonl",
			texts: []string{"I will print a long sequence.", "Printed 20000 lines (1 … 20000) ✅🎉 — 完成了，数字从一到两万。\u2028Line after U+2028: naïve café, 日本語テキスト, emoji 👩\u200d💻."},
			tools: []tool{{"bash", "completed", "1\n2\n3\n"}}},
		{name: "claude-parallel", input: "stdout.jsonl",
			texts: []string{"I will run both commands in parallel.", "Both parallel commands finished: the first printed \"slow\", the second printed \"fast\"."},
			tools: []tool{{"bash", "completed", "slow"}, {"bash", "completed", "fast"}}},
		{name: "claude-thinking", input: "stdout.jsonl", reasoning: 2,
			texts: []string{"Let me run it.", "The command printed: thinking."},
			tools: []tool{{"bash", "completed", "thinking"}}},
		{name: "claude-sdk-multi-turn", input: "sdk-traffic.jsonl", userTurns: 2,
			texts: []string{"Turn 1: running the command.", "Turn 1 done: the command printed turn1.", "Turn 2: running the command.", "Turn 2 done: the command printed turn2."},
			tools: []tool{{"bash", "completed", "turn1"}, {"bash", "completed", "turn2"}}},
		{name: "claude-sdk-todowrite", input: "sdk-traffic.jsonl", userTurns: 1,
			texts: []string{"I will plan the work as todos.", "Planned three todos: write the spec, implement the feature, run the tests."},
			tools: []tool{{"todo", "completed", "Todos have been modified successfully."}},
			todos: []agent.Todo{{Content: "Write the spec", Status: agent.TodoInProgress, Priority: agent.PriorityMedium},
				{Content: "Implement the feature", Status: agent.TodoPending, Priority: agent.PriorityMedium},
				{Content: "Run the tests", Status: agent.TodoPending, Priority: agent.PriorityMedium}}},
		{name: "claude-sdk-stdio", input: "sdk-traffic.jsonl", userTurns: 1,
			texts: []string{"I will run the command.", "Done: the command printed hi."},
			tools: []tool{{"bash", "completed", "(Bash completed with no output)"}}},
		{name: "claude-sdk-stdio-deny", input: "sdk-traffic.jsonl", userTurns: 1,
			texts: []string{"I will run the command.", "Done: the command printed hi."},
			tools: []tool{{"bash", "error", "rejected"}}},
		{name: "claude-perm-default", input: "stdout.jsonl",
			texts: []string{"I will run the command.", "Done: the command printed hi."},
			tools: []tool{{"bash", "error", "Output redirection to '/home/dev/run/work/hi.txt' was blocked."}}},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+c.input, func(t *testing.T) {
			evs, _ := replayEvents(t, filepath.Join("testdata", c.name, c.input))
			tr, _ := transcriptOf(t, evs)
			got := contentOf(tr)
			if !reflect.DeepEqual(got.Texts, c.texts) {
				t.Errorf("texts %q, want %q", got.Texts, c.texts)
			}
			if len(got.Reasoning) != c.reasoning {
				t.Errorf("%d reasoning parts, want %d", len(got.Reasoning), c.reasoning)
			}
			check := func(what string, got []toolContent, want []tool) {
				if len(got) != len(want) {
					t.Fatalf("%s: %d tools, want %d: %+v", what, len(got), len(want), got)
				}
				for i, w := range want {
					g := got[i]
					if g.Tool != w.tool || g.Status != w.status || len(g.Output) < len(w.outputPrefix) || g.Output[:len(w.outputPrefix)] != w.outputPrefix {
						t.Errorf("%s %d: %s %s %.80q, want %s %s %q…", what, i, g.Tool, g.Status, g.Output, w.tool, w.status, w.outputPrefix)
					}
				}
			}
			check("tools", got.Tools, c.tools)
			var child []toolContent
			if len(got.Children) > 0 {
				child = got.Children[0]
			}
			if len(got.Children) > 1 {
				t.Errorf("%d child sessions, want at most 1", len(got.Children))
			}
			check("child tools", child, c.childTools)
			if c.todos != nil && !reflect.DeepEqual(got.Todos, c.todos) {
				t.Errorf("todos %+v, want %+v", got.Todos, c.todos)
			}
			if c.userTurns > 0 {
				if n := len(prompts(tr)); n != c.userTurns {
					t.Errorf("%d prompts, want %d", n, c.userTurns)
				}
			}
		})
	}
}
