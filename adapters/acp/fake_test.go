package acp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/happy-dev/happy/adapters/jsonrpc"
	"github.com/happy-dev/happy/adapters/trafficlog"
	"github.com/happy-dev/happy/internal/waitfor"
)

// TestMain lets the test binary act as an ACP agent:
//
//   - ACP_FAKE_SCRIPT names a traffic log: the log's a2c frames are written
//     in order, and at each c2a frame the client's next message is read and
//     compared with the recorded one (see sameMessage). A mismatch exits
//     with code 3 and the difference on stderr.
//   - ACP_FAKE_AGENT=1 runs the scripted agent of fakeAgent: the prompt's
//     text names the scenario.
func TestMain(m *testing.M) {
	if script := os.Getenv("ACP_FAKE_SCRIPT"); script != "" {
		os.Exit(replayAgent(script))
	}
	if os.Getenv("ACP_FAKE_AGENT") != "" {
		os.Exit(runFakeAgent())
	}
	// No goroutine of a client (readers, reapers, timers, terminals)
	// outlives the tests.
	goleak.VerifyTestMain(m)
}

// sameMessage compares a message happy sent with the recorded one. What a
// capture's driver chose differently from happy is not compared: the
// client capabilities and name of initialize (happy offers fs and
// terminals) and the working folder.
func sameMessage(want, got []byte) bool {
	var w, g map[string]any
	if json.Unmarshal(want, &w) != nil || json.Unmarshal(got, &g) != nil {
		return false
	}
	for _, m := range []map[string]any{w, g} {
		if p, ok := m["params"].(map[string]any); ok {
			delete(p, "cwd")
			if m["method"] == "initialize" {
				delete(p, "clientCapabilities")
				delete(p, "clientInfo")
			}
		}
	}
	return reflect.DeepEqual(w, g)
}

func replayAgent(script string) int {
	f, err := os.Open(script)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	frames, _, err := readFrames(f)
	f.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for _, fr := range frames {
		switch fr.Dir {
		case trafficlog.A2C:
			out.Write(fr.Data)
			out.WriteByte('\n')
			out.Flush()
		case trafficlog.C2A:
			line, err := in.ReadBytes('\n')
			if err != nil {
				fmt.Fprintf(os.Stderr, "MISMATCH: stdin ended (%v), want %s\n", err, fr.Data)
				return 3
			}
			if !sameMessage(fr.Data, line) {
				fmt.Fprintf(os.Stderr, "MISMATCH:\nwant %s\ngot  %s", fr.Data, line)
				return 3
			}
		}
	}
	// Script over: wait for the client to close stdin.
	_, _ = in.ReadBytes(0)
	return 0
}

// stdio joins this process's stdin and stdout.
type stdio struct{}

func (stdio) Read(b []byte) (int, error)  { return os.Stdin.Read(b) }
func (stdio) Write(b []byte) (int, error) { return os.Stdout.Write(b) }
func (stdio) Close() error                { return os.Stdin.Close() }

// fakeAgent is a scripted ACP agent. Environment: ACP_FAKE_VERSION (raw
// JSON protocolVersion, default 1), ACP_FAKE_AUTH=1 (session/new needs
// authenticate first), ACP_FAKE_NO_LOAD=1 (no loadSession),
// ACP_FAKE_RESUME=1 (sessionCapabilities.resume). session/load replays a
// short history (a prompt, a thought, a tool call, then after its answer
// the agent's reply) and a mode update; session/resume replays nothing.
type fakeAgent struct {
	conn *jsonrpc.Conn

	mu       sync.Mutex
	sid      string
	cwd      string
	authed   bool
	cancel   chan struct{}
	cancelOK bool
}

func runFakeAgent() int {
	a := &fakeAgent{}
	ctx := context.Background()
	ready := make(chan struct{})
	a.conn = jsonrpc.New(ctx, stdio{}, jsonrpc.HandlerFunc(func(ctx context.Context, in *jsonrpc.Incoming) {
		<-ready // the connection's reader starts before New returns
		a.Handle(ctx, in)
	}), jsonrpc.Options{CallTimeout: time.Minute})
	close(ready)
	<-a.conn.Done()
	return 0
}

func (a *fakeAgent) notify(update string) {
	a.mu.Lock()
	sid := a.sid
	a.mu.Unlock()
	_ = a.conn.Notify(context.Background(), "session/update", json.RawMessage(`{"sessionId":"`+sid+`","update":`+update+`}`))
}

func (a *fakeAgent) say(text string) {
	b, _ := json.Marshal(text)
	a.notify(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":` + string(b) + `}}`)
}

func (a *fakeAgent) Handle(ctx context.Context, in *jsonrpc.Incoming) {
	if in.Notif {
		if in.Method == "session/cancel" {
			a.mu.Lock()
			if a.cancel != nil && a.cancelOK {
				close(a.cancel)
				a.cancel = nil
			}
			a.mu.Unlock()
		}
		return
	}
	switch in.Method {
	case "initialize":
		v := os.Getenv("ACP_FAKE_VERSION")
		if v == "" {
			v = "1"
		}
		load := os.Getenv("ACP_FAKE_NO_LOAD") == ""
		resume := ""
		if os.Getenv("ACP_FAKE_RESUME") != "" {
			resume = `,"sessionCapabilities":{"resume":{}}`
		}
		_ = in.Reply(ctx, json.RawMessage(`{"protocolVersion":`+v+`,"agentCapabilities":{"loadSession":`+fmt.Sprint(load)+
			`,"promptCapabilities":{"image":true,"embeddedContext":true}`+resume+`},"authMethods":[{"id":"key","name":"API key"}],"agentInfo":{"name":"fake","version":"1.0"}}`))
	case "authenticate":
		a.mu.Lock()
		a.authed = true
		a.mu.Unlock()
		_ = in.Reply(ctx, struct{}{})
	case "session/new", "session/load", "session/resume":
		var p struct {
			Cwd       string `json:"cwd"`
			SessionID string `json:"sessionId"`
		}
		_ = json.Unmarshal(in.Params, &p)
		a.mu.Lock()
		if os.Getenv("ACP_FAKE_AUTH") != "" && !a.authed {
			a.mu.Unlock()
			_ = in.Fail(ctx, -32000, "Authentication required")
			return
		}
		a.cwd = p.Cwd
		a.sid = "sess-1"
		if p.SessionID != "" {
			a.sid = p.SessionID
		}
		a.mu.Unlock()
		modes := `{"currentModeId":"default","availableModes":[{"id":"default","name":"Default"},{"id":"plan","name":"Plan"}]}`
		switch in.Method {
		case "session/load":
			a.notify(`{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"earlier prompt"}}`)
			a.notify(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"thinking it over"}}`)
			a.notify(`{"sessionUpdate":"tool_call","toolCallId":"old-1","title":"ls","kind":"execute","status":"completed"}`)
			_ = in.Reply(ctx, json.RawMessage(`{"modes":`+modes+`}`))
			// The rest of the replay after the answer (as Gemini CLI does).
			a.say("earlier answer")
			a.notify(`{"sessionUpdate":"current_mode_update","currentModeId":"plan"}`)
			return
		case "session/resume":
			_ = in.Reply(ctx, json.RawMessage(`{"modes":`+modes+`}`))
			return
		}
		_ = in.Reply(ctx, json.RawMessage(`{"sessionId":"sess-1","modes":`+modes+`}`))
	case "session/set_mode":
		var p struct {
			ModeID string `json:"modeId"`
		}
		_ = json.Unmarshal(in.Params, &p)
		_ = in.Reply(ctx, struct{}{})
		a.notify(`{"sessionUpdate":"current_mode_update","currentModeId":"` + p.ModeID + `"}`)
	case "session/prompt":
		var p struct {
			Prompt []json.RawMessage `json:"prompt"`
		}
		_ = json.Unmarshal(in.Params, &p)
		var text struct {
			Text string `json:"text"`
		}
		if len(p.Prompt) > 0 {
			_ = json.Unmarshal(p.Prompt[0], &text)
		}
		go a.run(in, strings.Fields(text.Text + " _")[0], p.Prompt)
	default:
		_ = in.Fail(ctx, jsonrpc.CodeMethodNotFound, "fake agent: "+in.Method)
	}
}

// call sends a request to the client and returns its result or error text.
func (a *fakeAgent) call(method string, params string) (json.RawMessage, string) {
	var res json.RawMessage
	err := a.conn.Call(context.Background(), method, json.RawMessage(params), &res)
	if err != nil {
		if re, ok := err.(*jsonrpc.RPCError); ok {
			return nil, fmt.Sprintf("error %d", re.Code)
		}
		return nil, err.Error()
	}
	return res, ""
}

// run plays one prompt's scenario.
func (a *fakeAgent) run(in *jsonrpc.Incoming, scenario string, prompt []json.RawMessage) {
	ctx := context.Background()
	a.mu.Lock()
	a.cancel = make(chan struct{})
	a.cancelOK = scenario != "hang"
	cancel, sid, cwd := a.cancel, a.sid, a.cwd
	a.mu.Unlock()
	end := func(reason string) { _ = in.Reply(ctx, json.RawMessage(`{"stopReason":"`+reason+`"}`)) }
	switch scenario {
	case "permission":
		a.notify(`{"sessionUpdate":"tool_call","toolCallId":"t1","title":"rm -rf build","kind":"execute","status":"pending","rawInput":{"command":"rm -rf build"}}`)
		res, errText := a.call("session/request_permission", `{"sessionId":"`+sid+`","toolCall":{"toolCallId":"t1"},"options":[{"optionId":"yes","name":"Allow","kind":"allow_once"},{"optionId":"always","name":"Always","kind":"allow_always"},{"optionId":"no","name":"Reject","kind":"reject_once"}]}`)
		var r struct {
			Outcome struct {
				Outcome  string `json:"outcome"`
				OptionID string `json:"optionId"`
			} `json:"outcome"`
		}
		_ = json.Unmarshal(res, &r)
		switch {
		case errText != "":
			a.say("permission failed: " + errText)
			end("end_turn")
		case r.Outcome.Outcome == "cancelled":
			select {
			case <-cancel:
			case <-time.After(5 * time.Second):
			}
			end("cancelled")
		case r.Outcome.OptionID == "no":
			a.notify(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"failed","content":[{"type":"content","content":{"type":"text","text":"the user said no"}}]}`)
			a.say("Not removing build.")
			end("end_turn")
		default:
			a.notify(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"in_progress"}`)
			a.notify(`{"sessionUpdate":"tool_call_update","toolCallId":"t1","status":"completed","content":[{"type":"content","content":{"type":"text","text":"removed (` + r.Outcome.OptionID + `)"}}]}`)
			a.say("Removed build.")
			end("end_turn")
		}
	case "slow":
		a.notify(`{"sessionUpdate":"tool_call","toolCallId":"s1","title":"sleep","kind":"execute","status":"in_progress"}`)
		select {
		case <-cancel:
			end("cancelled")
		case <-time.After(10 * time.Second):
			end("end_turn")
		}
	case "hang":
		a.say("working")
		// Never answers, not even after session/cancel.
	case "fs":
		a.fsScenario(sid, cwd)
		end("end_turn")
	case "terminal":
		a.terminalScenario(sid)
		end("end_turn")
	case "echo-prompt":
		b, _ := json.Marshal(prompt)
		a.say(string(b))
		end("end_turn")
	default:
		a.say("echo: " + scenario)
		end("end_turn")
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// fsScenario reads and writes inside and outside the session folder and
// reports each outcome as a line of text.
func (a *fakeAgent) fsScenario(sid, cwd string) {
	a.notify(`{"sessionUpdate":"tool_call","toolCallId":"w1","title":"Write notes","kind":"edit","status":"in_progress","locations":[{"path":` + quote(cwd+"/notes.md") + `}]}`)
	report := func(name, method, params string) {
		res, errText := a.call(method, `{"sessionId":"`+sid+`",`+params+`}`)
		if errText != "" {
			a.say(name + ": " + errText + "\n")
			return
		}
		var r struct {
			Content *string `json:"content"`
		}
		_ = json.Unmarshal(res, &r)
		if r.Content != nil {
			a.say(name + ": " + quote(*r.Content) + "\n")
			return
		}
		a.say(name + ": ok\n")
	}
	report("read inside", "fs/read_text_file", `"path":`+quote(cwd+"/a.txt"))
	report("read lines 2-3", "fs/read_text_file", `"path":`+quote(cwd+"/a.txt")+`,"line":2,"limit":2`)
	report("read missing", "fs/read_text_file", `"path":`+quote(cwd+"/missing.txt"))
	report("read outside", "fs/read_text_file", `"path":`+quote(cwd+"/../outside.txt"))
	report("read relative", "fs/read_text_file", `"path":"a.txt"`)
	report("read through symlink", "fs/read_text_file", `"path":`+quote(cwd+"/escape/outside.txt"))
	report("write notes", "fs/write_text_file", `"path":`+quote(cwd+"/notes.md")+`,"content":"one\ntwo\nthree\n"`)
	report("write new", "fs/write_text_file", `"path":`+quote(cwd+"/sub/dir/new.txt")+`,"content":"new\n"`)
	report("write outside", "fs/write_text_file", `"path":`+quote(cwd+"/../evil.txt")+`,"content":"x"`)
	report("write through symlink", "fs/write_text_file", `"path":`+quote(cwd+"/escape/evil.txt")+`,"content":"x"`)
	report("wrong session", "fs/read_text_file", `"path":`+quote(cwd+"/a.txt")+`,"sessionId":"other"`)
	a.notify(`{"sessionUpdate":"tool_call_update","toolCallId":"w1","status":"completed"}`)
}

// terminalScenario exercises terminals and reports each outcome.
func (a *fakeAgent) terminalScenario(sid string) {
	create := func(params string) string {
		res, errText := a.call("terminal/create", `{"sessionId":"`+sid+`",`+params+`}`)
		if errText != "" {
			return errText
		}
		var r struct {
			TerminalID string `json:"terminalId"`
		}
		_ = json.Unmarshal(res, &r)
		return r.TerminalID
	}
	op := func(method, id string) string {
		res, errText := a.call(method, `{"sessionId":"`+sid+`","terminalId":"`+id+`"}`)
		if errText != "" {
			return errText
		}
		return string(res)
	}
	// Output kept up to its limit, cut at the front on a character boundary.
	t1 := create(`"command":"printf","args":["%s","héllo wörld"],"outputByteLimit":4`)
	a.say("limit create: " + t1 + "\n")
	a.say("limit wait: " + op("terminal/wait_for_exit", t1) + "\n")
	a.say("limit output: " + op("terminal/output", t1) + "\n")
	a.notify(`{"sessionUpdate":"tool_call","toolCallId":"x1","title":"printf","kind":"execute","status":"completed","content":[{"type":"terminal","terminalId":"` + t1 + `"}]}`)
	a.say("limit release: " + op("terminal/release", t1) + "\n")
	// A shell command line, its exit code, an env var, a working folder.
	t2 := create(`"command":"echo $GREETING; pwd; exit 3","env":[{"name":"GREETING","value":"hi"}],"cwd":` + quote(os.Getenv("ACP_FAKE_SUBDIR")))
	a.say("exit wait: " + op("terminal/wait_for_exit", t2) + "\n")
	a.say("exit output: " + op("terminal/output", t2) + "\n")
	// Kill ends the whole process group: the background child too.
	t3 := create(`"command":"sleep 30 & echo $! > child.pid; wait"`)
	// Once the shell has started it (its pid file is written); the kill
	// is checked either way.
	_ = waitfor.Poll{Within: 2 * time.Second}.True(func() bool {
		b, err := os.ReadFile(os.Getenv("ACP_FAKE_CWD") + "/child.pid")
		return err == nil && len(b) > 0 && b[len(b)-1] == '\n'
	})
	a.say("kill: " + op("terminal/kill", t3) + "\n")
	a.say("kill wait: " + op("terminal/wait_for_exit", t3) + "\n")
	a.say("kill release: " + op("terminal/release", t3) + "\n")
	a.say("released output: " + op("terminal/output", t3) + "\n")
	a.say("outside cwd: " + create(`"command":"true","cwd":"/"`) + "\n")
}
