package mapper

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/happy-dev/happy/agent"
)

// largeTranscript is a realistic long session: 100 prompts, each answered
// by one assistant step (200 messages), every step with reasoning, text,
// two tool calls (one approved through a permission block) and usage.
func largeTranscript() Transcript {
	const sid = "ses_bench"
	line := "The quick brown fox jumps over the lazy dog; func main() { fmt.Println(\"<hello>\") }\n"
	tr := Transcript{Session: Session{ID: sid, ProjectID: "prj", Directory: "/home/user/app", Title: "bench",
		Time: SessionTime{Created: 1753120000000, Updated: 1753129999000}}}
	at := int64(1753120000000)
	for i := 0; i < 100; i++ {
		uid, aid := fmt.Sprintf("msg_%04du", i), fmt.Sprintf("msg_%04da", i)
		base := func(mid string, n int) PartBase {
			return PartBase{ID: fmt.Sprintf("prt_%04d_%02d", i, n), SessionID: sid, MessageID: mid}
		}
		tr.Messages = append(tr.Messages, MessageWithParts{
			Info: &UserMessage{ID: uid, SessionID: sid, Time: UserTime{Created: at}, Agent: "build",
				Model: ModelRef{ProviderID: "anthropic", ModelID: "claude-sonnet-4-6"}},
			Parts: []Part{&TextPart{PartBase: base(uid, 0), Text: strings.Repeat("Please change the handler. ", 8)}},
		})
		req := Block{Type: BlockPermission, ID: fmt.Sprintf("per_%04d", i), Permission: "edit",
			Patterns: []string{fmt.Sprintf("src/file%d.go", i)}, Always: []string{"src/*"},
			Metadata: agent.Object{"filepath": fmt.Sprintf("src/file%d.go", i), "diff": strings.Repeat("+"+line, 6)}}
		edit, _ := PendingState(agent.Object{"path": fmt.Sprintf("src/file%d.go", i), "content": strings.Repeat(line, 6)}, "").Run(at + 100)
		edit, _ = edit.Ask(req)
		edit, _ = edit.Decide(agent.DecisionOnce, at+200, "")
		edit, _ = edit.Complete("Wrote 522 bytes", "edit src/file.go", agent.Object{"bytes": json.Number("522")}, at+300)
		bash, _ := PendingState(agent.Object{"command": "go test ./...", "timeout": json.Number("120000")}, "").Run(at + 400)
		bash, _ = bash.Complete(strings.Repeat("ok  \tgithub.com/x/y/pkg\t0.123s\n", 40), "go test ./...",
			agent.Object{"exit": json.Number("0"), "duration": json.Number("1.25")}, at+900)
		tokens := &agent.Tokens{Input: ptr[int64](12000 + int64(i)), Output: ptr[int64](800), Reasoning: ptr[int64](200),
			Cache: agent.CacheTokens{Read: ptr[int64](11000), Write: ptr[int64](400)}}
		tr.Messages = append(tr.Messages, MessageWithParts{
			Info: &AssistantMessage{ID: aid, SessionID: sid, Time: AssistantTime{Created: at + 50, Completed: ptr(at + 1000)},
				ParentID: uid, ModelID: "claude-sonnet-4-6", ProviderID: "anthropic", Agent: "build",
				Path: MessagePath{Cwd: "/home/user/app", Root: "/home/user/app"}, Cost: ptr(0.0123), Tokens: tokens, Finish: agent.FinishStop},
			Parts: []Part{
				&StepStartPart{PartBase: base(aid, 1), Snapshot: "a1b2c3d4"},
				&ReasoningPart{PartBase: base(aid, 2), Text: strings.Repeat("Let me think about the handler. ", 30),
					Time: PartTime{Start: at + 60, End: ptr(at + 90)}, Metadata: agent.Object{"signature": strings.Repeat("Sig0", 40)}},
				&ToolPart{PartBase: base(aid, 3), CallID: fmt.Sprintf("toolu_%04d_a", i), Tool: "edit", State: edit},
				&ToolPart{PartBase: base(aid, 4), CallID: fmt.Sprintf("toolu_%04d_b", i), Tool: "bash", State: bash},
				&TextPart{PartBase: base(aid, 5), Text: strings.Repeat(line, 20), Time: &PartTime{Start: at + 950, End: ptr(at + 990)}},
				&StepFinishPart{PartBase: base(aid, 6), Reason: agent.FinishStop, Cost: ptr(0.0123), Tokens: tokens},
			},
		})
		at += 60000
	}
	tr.Todos = []agent.Todo{{Content: "ship it", Status: agent.TodoInProgress, Priority: agent.PriorityHigh}}
	return tr
}

func BenchmarkEncodeTranscript(b *testing.B) {
	tr := largeTranscript()
	data, err := EncodeTranscript(tr)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeTranscript(tr); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTranscript(b *testing.B) {
	data, err := EncodeTranscript(largeTranscript())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, rep, err := DecodeTranscript(data); err != nil || len(rep.Refused) != 0 {
			b.Fatal(err, rep.Refused)
		}
	}
}

// BenchmarkStdlibUnmarshalAny is a yardstick: encoding/json reading the
// same document into untyped maps, with no checks at all.
func BenchmarkStdlibUnmarshalAny(b *testing.B) {
	data, err := EncodeTranscript(largeTranscript())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestLargeTranscriptRoundTrip(t *testing.T) {
	tr := largeTranscript()
	data, err := EncodeTranscript(tr)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Messages) != 200 || len(data) < 512<<10 {
		t.Fatalf("%d messages, %d bytes", len(tr.Messages), len(data))
	}
	back, _, err := DecodeTranscript(data)
	if err != nil {
		t.Fatal(err)
	}
	again, err := EncodeTranscript(back)
	if err != nil || string(again) != string(data) {
		t.Fatal("large transcript is not byte-stable")
	}
}
