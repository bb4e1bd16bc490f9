package compat

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
	"github.com/happy-dev/happy/session/refimport"
)

// transcriptView is what of a transcript seed 000 carries, one line per
// shown part in order, for the round trip. Left out, because the legacy
// envelopes cannot carry them: ids and times; message boundaries within a
// turn (a turn is one assistant message when read back) and the model,
// tokens and cost of messages; step-start and step-finish parts; synthetic
// and blank texts, which Writer does not write; tools still pending, and
// tool titles and metadata (the native name and input are kept in
// metadata on the way back); subagent sessions (only the root's messages
// are written); todos and the writer's dropped records. A permission
// carries only its decision (Writer writes no patterns, and a rejected
// block's reason only when it is one of the settled-without-a-decision
// reasons). Within a turn the parts are compared in sorted order: Writer
// writes a text when it ends, so a tool that started while a text was
// still streaming comes before it in the envelopes.
func transcriptView(t mapper.Transcript) []string {
	var out, turn []string
	flush := func() {
		sort.Strings(turn)
		out, turn = append(out, turn...), nil
	}
	for _, line := range partLines(t) {
		if strings.HasPrefix(line, "user ") {
			flush()
			out = append(out, line)
			continue
		}
		turn = append(turn, line)
	}
	flush()
	return out
}

// partLines is one line per shown part, in order.
func partLines(t mapper.Transcript) []string {
	var out []string
	for _, m := range t.Messages {
		role := string(m.Info.MessageRole())
		for _, p := range m.Parts {
			switch x := p.(type) {
			case *mapper.TextPart:
				if x.Synthetic || strings.TrimSpace(x.Text) == "" {
					continue
				}
				out = append(out, role+" text: "+x.Text)
			case *mapper.ReasoningPart:
				if strings.TrimSpace(x.Text) == "" {
					continue
				}
				out = append(out, role+" reasoning: "+x.Text)
			case *mapper.ToolPart:
				st := x.State
				if st.Status == mapper.StatusPending {
					continue
				}
				in, _ := json.Marshal(st.Input)
				line := fmt.Sprintf("%s tool %s %s %s in=%s output=%q error=%q", role, x.CallID, x.Tool, st.Status, in, st.Output, st.Error)
				if b := st.Block; b != nil && b.Type == mapper.BlockPermission {
					line += fmt.Sprintf(" permission=%s", b.Decision)
				}
				out = append(out, line)
			}
		}
	}
	return out
}

// TestRoundTrip: the legacy envelopes and agentState Writer writes for a
// Claude, a Codex and an ACP capture, read back by the importer, give the
// transcript the canonical records hold (transcriptView lists what seed
// 000 cannot carry).
func TestRoundTrip(t *testing.T) {
	type roundTripCase struct {
		flavor string
		events func(t *testing.T) []agent.Event
	}
	cases := map[string]roundTripCase{}
	for name, flavor := range flavors {
		cases[name] = roundTripCase{flavor, func(t *testing.T) []agent.Event { return captureEvents(t, name) }}
	}
	// Richer captures, as the adapters' golden tests decode them: several
	// turns, approved permissions, reasoning, parallel tools, a subagent.
	for name, c := range map[string]struct{ flavor, path string }{
		"gemini-multi-turn":  {"gemini", "../../adapters/acp/testdata/golden/gemini-multi-turn.events.jsonl"},
		"acp-approved":       {"claude-acp", "../../adapters/acp/testdata/golden/B18-approved.events.jsonl"},
		"ccacp-tools":        {"claude-acp", "../../adapters/acp/testdata/golden/ccacp-tools.events.jsonl"},
		"codex-multi-tool":   {"codex", "../../adapters/codex/testdata/golden/codex-app-multi-tool.events.jsonl"},
		"claude-parallel":    {"claude", "../../adapters/claude/testdata/claude-parallel/stream-json.events.jsonl"},
		"claude-task":        {"claude", "../../adapters/claude/testdata/claude-claude-task/stream-json.events.jsonl"},
		"opencode-tools":     {"opencode", "../../adapters/acp/testdata/golden/opencode-tools.events.jsonl"},
		"codex-app-tool-err": {"codex", "../../adapters/codex/testdata/golden/codex-app-tool-error.events.jsonl"},
	} {
		cases[name] = roundTripCase{c.flavor, func(t *testing.T) []agent.Event {
			evs := loadEvents(t, c.path)
			for _, ev := range evs {
				if _, ok := ev.(*agent.UserPrompt); ok {
					return evs
				}
			}
			return append([]agent.Event{&agent.UserPrompt{PromptID: "relay:1", Text: "Go"}}, evs...)
		}}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rp := replay(t, c.flavor, c.events(t), true)
			rb := session.NewReadback(mapper.Session{ID: "relay-compat-1"})
			for i, r := range rp.store.canonical() {
				rb.Add(int64(i+1), fmt.Sprintf("%s.%d", r.record, r.version), r.body)
			}
			want := rb.Transcript()
			var im refimport.Importer
			for i, body := range rp.store.legacy() {
				im.Add(int64(i+1), body)
			}
			im.SetAgentState(rp.state.value)
			got := im.Transcript(want.Session)
			if len(got.Dropped) != 0 {
				t.Errorf("dropped: %+v", got.Dropped)
			}
			g, w := transcriptView(got), transcriptView(want)
			if strings.Join(g, "\n") != strings.Join(w, "\n") {
				t.Errorf("read back:\n  %s\nwant:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
			}
			if len(w) < 3 {
				t.Fatalf("the capture shows too little to prove anything: %v", w)
			}
		})
	}
}
