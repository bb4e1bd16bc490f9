package acp

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/happy-dev/happy/adapters/rpcagent"
	"github.com/happy-dev/happy/agent"
	"github.com/happy-dev/happy/mapper"
	"github.com/happy-dev/happy/session"
)

// A permission rule answers the captured agents' requests through the
// session runner: every tool that asked shows the request resolved by the
// rule, and the transcript drops nothing (the client's echo of happy's own
// answer and the tool's later updates change nothing).
func TestRuleAnswersAgainstCaptures(t *testing.T) {
	cases := []struct {
		name   string
		action mapper.Action
	}{
		{"gemini-acp", mapper.ActionAllow},       // the request comes before the tool call
		{"gemini-acp-reject", mapper.ActionDeny}, // rejected
		{"ccacp-acp", mapper.ActionAllow},        // the call id is announced twice
		{"acpsdk-example", mapper.ActionAllow},   // scripted calls and a permission
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			script, _ := filepath.Abs(filepath.Join("testdata", "captures", tc.name, "rpc-traffic.jsonl"))
			prompts := capturePrompts(t, readCapture(t, tc.name))
			rec := &syncBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := Start(ctx, Options{
				Command: []string{testExe(t)}, Env: []string{"ACP_FAKE_SCRIPT=" + script},
				Cwd: t.TempDir(), Settings: rpcagent.Settings{Record: rec, CallTimeout: 10 * time.Second, StopGrace: time.Second},
			})
			if err != nil {
				t.Fatal(err)
			}
			a := NewAgent(c)
			defer a.Close()
			rule := mapper.PermissionRule{Permission: "*", Pattern: "*", Action: tc.action}
			red := mapper.NewReducer(mapper.Config{SessionID: "relay-rules", Directory: "/w"})
			r := session.NewRunner(session.Options{Agent: a, Reducer: red, Rules: []mapper.PermissionRule{rule}, OneShot: true})
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _ = r.Run(ctx)
			}()
			if err := r.Control(ctx, session.ControlPrompt{Prompt: agent.Prompt{Text: prompts[0]}}); err != nil {
				t.Fatal(err)
			}
			<-done
			if strings.Contains(string(rec.Bytes()), "MISMATCH") {
				t.Fatalf("the client's traffic differs from the capture:\n%s", rec.Bytes())
			}
			tr := red.Transcript()
			if len(tr.Dropped) != 0 {
				t.Fatalf("dropped %+v", tr.Dropped)
			}
			asked := 0
			for _, m := range tr.Messages {
				for _, p := range m.Parts {
					tp, ok := p.(*mapper.ToolPart)
					if !ok || tp.State.Block == nil {
						continue
					}
					asked++
					if b := tp.State.Block; b.Reason != agent.ReasonRule || b.Rule == nil || *b.Rule != rule {
						t.Errorf("tool %s: status %s, block %+v", tp.CallID, tp.State.Status, b)
					}
				}
			}
			if asked == 0 {
				t.Fatal("no tool asked for permission")
			}
		})
	}
}
