package codex

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/happy-dev/happy/agent"
)

// TestAgent drives the agent.Agent face: image attachments become image
// inputs, decisions go out in Codex's form (an abort's rejection as
// cancel), stale answers give agent.ErrStale, and the echo of what the
// runner records itself (prompts, its answers) is not published.
func TestAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := newFake(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.appServerHandshake()
			m := f.expect("turn/start")
			if want := `{"input":[{"text":"look","type":"text"},{"type":"image","url":"data:image/png;base64,AAAA"},{"path":"/w/shot.png","type":"localImage"}],"threadId":"th1"}`; string(m["params"]) != want {
				t.Errorf("turn/start params %s", m["params"])
			}
			f.send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.send(`{"method":"item/completed","params":{"threadId":"th1","turnId":"tu1","item":{"type":"userMessage","id":"u1","content":[{"type":"text","text":"look"}]}}}`)
			f.send(`{"method":"item/commandExecution/requestApproval","id":0,"params":{"threadId":"th1","turnId":"tu1","itemId":"a","startedAtMs":1,"command":"ls"}}`)
			f.send(`{"method":"item/commandExecution/requestApproval","id":1,"params":{"threadId":"th1","turnId":"tu1","itemId":"b","startedAtMs":1,"command":"rm x"}}`)
			if m := f.expect(""); string(m["id"]) != "0" || string(m["result"]) != `{"decision":"accept"}` {
				t.Errorf("answer a: %s %s", m["id"], m["result"])
			}
			if m := f.expect(""); string(m["id"]) != "1" || string(m["result"]) != `{"decision":"cancel"}` {
				t.Errorf("answer b: %s %s", m["id"], m["result"])
			}
			f.send(`{"method":"serverRequest/resolved","params":{"threadId":"th1","requestId":1}}`)
			f.send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"interrupted"}}}`)
		}()
		c, err := Connect(ctx, rwc, Options{Protocol: ProtocolAppServer})
		if err != nil {
			t.Fatal(err)
		}
		a := NewAgent(c)
		col := collect(c)
		err = a.Prompt(ctx, agent.Prompt{Text: "look", Files: []agent.PromptFile{
			{Mime: "image/png", URL: "data:image/png;base64,AAAA"},
			{Mime: "image/png", Filename: "shot.png", URL: "file:///w/shot.png"},
			{Mime: "text/plain", Filename: "notes.txt", URL: "data:text/plain;base64,aGk="},
		}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := a.Decide(ctx, "a", agent.Verdict{Decision: agent.DecisionOnce}); err != nil {
			t.Fatal(err)
		}
		if err := a.Decide(ctx, "b", agent.Verdict{Decision: agent.DecisionReject, Reason: agent.ReasonCancelled}); err != nil {
			t.Fatal(err)
		}
		if err := a.Decide(ctx, "a", agent.Verdict{Decision: agent.DecisionOnce}); !errors.Is(err, agent.ErrStale) {
			t.Errorf("second decision: %v, want ErrStale", err)
		}
		if err := a.AnswerQuestion(ctx, "nope", [][]string{{"x"}}); !errors.Is(err, agent.ErrStale) {
			t.Errorf("unknown question: %v, want ErrStale", err)
		}
		<-script
		synctest.Wait()
		_ = a.Close()
		<-col.done
		for _, e := range col.events() {
			switch e := e.(type) {
			case *agent.UserPrompt:
				t.Errorf("prompt echo published: %+v", e)
			case *agent.ToolResolved:
				t.Errorf("answer echo published: %+v", e)
			}
		}
		if got := turnEnds(col.events()); len(got) != 1 || got[0] != "tu1:interrupted" {
			t.Errorf("turn ends %v", got)
		}
	})
}
