package appserver

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/happy-dev/happy/adapters/codex"
	"github.com/happy-dev/happy/adapters/codex/internal/codextest"
	"github.com/happy-dev/happy/agent"
)

// TestSameCallIDInTwoThreadsRefused: two sub-agent threads ask approval
// for the same item id. Happy's answers name only the call id, so one
// answer would approve both commands: the second thread's request is
// refused with a JSON-RPC error (its tool is resolved cancelled in its own
// session), and the answer to the first reaches the first alone.
func TestSameCallIDInTwoThreadsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			f.Expect("turn/start")
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			for _, th := range []string{"thA", "thB"} {
				f.Send(`{"method":"thread/started","params":{"thread":{"id":"%s","parentThreadId":"th1"}}}`, th)
			}
			f.Send(`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"thA","turnId":"tA","itemId":"c1","command":"ls"}}`)
			f.Send(`{"id":8,"method":"item/commandExecution/requestApproval","params":{"threadId":"thB","turnId":"tB","itemId":"c1","command":"rm -rf /"}}`)
			var got []string
			for range 2 {
				m := f.Expect("")
				got = append(got, string(m["id"])+" "+string(m["result"])+string(m["error"]))
			}
			if want := `[8 {"code":-32602,"message":"happy: call id c1 already waits for an answer in another thread"} 7 {"decision":"accept"}]`; fmt.Sprint(got) != want {
				t.Errorf("answers %s, want %s", got, want)
			}
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`)
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "go"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := c.Answer(ctx, "c1", agent.DecisionOnce); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		_ = c.Close()
		<-col.Done()
		var res []string
		for _, e := range col.Events() {
			if r, ok := e.(*agent.ToolResolved); ok {
				res = append(res, r.Session+":"+r.CallID+":"+string(r.Decision)+":"+r.Reason)
			}
		}
		if want := "[thB:c1:reject:cancelled thA:c1:once:]"; fmt.Sprint(res) != want {
			t.Errorf("resolutions %v, want %s", res, want)
		}
	})
}

// TestMainTurnEndCancelsSubagentRequests: the main thread's turn ends while
// a sub-agent thread's approval waits. The session runner settles that
// tool cancelled with the turn; Codex's sub-agent, whose thread goes on,
// is told so (cancel) instead of waiting forever for an answer nobody
// will send. The main thread's own request of the ended turn is dropped
// unanswered, as before (Codex resolved it with its turn).
func TestMainTurnEndCancelsSubagentRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rwc, f := codextest.Pipe(t)
		ctx := context.Background()
		script := make(chan struct{})
		go func() {
			defer close(script)
			f.AppServerHandshake()
			f.Expect("turn/start")
			f.Send(`{"id":3,"result":{"turn":{"id":"tu1","items":[],"status":"inProgress"}}}`)
			f.Send(`{"method":"thread/started","params":{"thread":{"id":"thA","parentThreadId":"th1"}}}`)
			f.Send(`{"id":6,"method":"item/commandExecution/requestApproval","params":{"threadId":"th1","turnId":"tu1","itemId":"c0","command":"pwd"}}`)
			f.Send(`{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"thA","turnId":"tA","itemId":"c1","command":"ls"}}`)
			f.Send(`{"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"tu1","items":[],"status":"completed"}}}`)
			m := f.Expect("")
			if got := string(m["id"]) + " " + string(m["result"]); got != `7 {"decision":"cancel"}` {
				t.Errorf("answer %s, want the sub-agent's request cancelled", got)
			}
		}()
		c, err := connect(ctx, rwc, codex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		col := codextest.Collect(c.Events())
		if err := c.Prompt(ctx, codex.Prompt{Text: "go"}); err != nil {
			t.Fatal(err)
		}
		<-script
		synctest.Wait()
		if n := c.S.Pending(); n != 0 {
			t.Errorf("%d requests still pending", n)
		}
		_ = c.Close()
		<-col.Done()
	})
}
